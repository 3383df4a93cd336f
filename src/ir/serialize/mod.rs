//! Saving and loading graphs and functions: a versioned, documented binary format
//! ([`Graph::to_bytes`] / [`Graph::from_bytes`], [`Function::to_bytes`] /
//! [`Function::from_bytes`], and `save` / `load` to files). The layout, the versioning rule
//! and what is stable are in `docs/FORMAT.md`.
//!
//! Invariants:
//! - **versioned**: a file starts with [`MAGIC`] and a `u32` format version; a reader
//!   accepts every version up to its own [`FORMAT_VERSION`] and rejects a newer one with an
//!   error naming both;
//! - **robust**: reading never panics and never allocates more than a small multiple of the
//!   input's size (every count is checked against the bytes left, `wire.rs`); function
//!   bodies nest at most [`MAX_DEPTH`] deep (no stack overflow); every node is re-created
//!   through [`Graph::add_node`] (shape inference runs again and must give the stored
//!   output types) and the loaded graph and its library's functions pass [`Graph::verify`];
//! - **fresh handles**: a loaded graph's nodes get new stamps, so no handle of the saved
//!   graph (or of any other) names a node of the loaded one; its nodes are in the saved
//!   graph's topological order;
//! - **deterministic**: the same graph gives the same bytes (nodes in topological order,
//!   library entries sorted by name, variables in creation order);
//! - **what is not saved**: custom ops (their code is not data: saving one is an error
//!   naming it) and the opaque origin records and derivative hooks that passes attach to
//!   functions ([`Function::origin`], [`Function::derivative`]): a loaded Subset-form node
//!   runs and converts alike, but autodiff differentiates it by the generic rule.

mod ops;
mod wire;

use std::path::Path;
use std::sync::Arc;

use hashbrown::HashMap;

use super::{Function, Graph, Library, NodeId, ValueId};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::TensorType;
use wire::{Reader, Wire, Writer};

/// The first bytes of every file.
pub const MAGIC: &[u8; 8] = b"pforgrph";
/// The format version this build writes (and the newest it reads).
pub const FORMAT_VERSION: u32 = 1;
/// How deep function bodies (cond branches, loop bodies, nested functions) may nest.
pub const MAX_DEPTH: usize = 64;

/// What a file holds (the byte after the version).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Content {
    Graph = 0,
    Function = 1,
}

impl Content {
    fn name(self) -> &'static str {
        match self {
            Content::Graph => "a graph",
            Content::Function => "a function",
        }
    }
}

fn write_file(content: Content, lib: &Library, body: impl FnOnce(&mut Writer) -> Result<()>) -> Result<Vec<u8>> {
    let mut w = Writer::new(lib.clone());
    w.buf.extend_from_slice(MAGIC);
    w.u32(FORMAT_VERSION);
    w.u8(content as u8);
    put_library(lib, &mut w)?;
    body(&mut w)?;
    Ok(w.buf)
}

fn read_file<T>(bytes: &[u8], content: Content, body: impl FnOnce(&mut Reader) -> Result<T>) -> Result<T> {
    let mut r = Reader::new(bytes, Library::default());
    if r.remaining() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(r.err("not a pfor graph file (bad magic)"));
    }
    r.take(MAGIC.len())?;
    let version = r.u32()?;
    if version == 0 || version > FORMAT_VERSION {
        r.pos -= 4;
        return Err(r.err(format!(
            "format version {version} is not readable by this build, which reads versions 1 to {FORMAT_VERSION}{}",
            if version > FORMAT_VERSION { " (the file was written by a newer pfor)" } else { "" }
        )));
    }
    let got = r.tag(2, "content")?;
    if got != content as u8 {
        r.pos -= 1;
        let other = if got == 0 { Content::Graph } else { Content::Function };
        return Err(r.err(format!("the file holds {}, not {}", other.name(), content.name())));
    }
    get_library(&mut r)?;
    let out = body(&mut r)?;
    if r.remaining() != 0 {
        return Err(r.err(format!("{} trailing byte(s)", r.remaining())));
    }
    for name in r.lib.function_names() {
        let f = r.lib.get(&name)?;
        f.graph.verify().map_err(|e| r.err(format!("function '{name}' fails verification: {e}")))?;
    }
    Ok(out)
}

/// Variables (creation order), declarations and definitions (sorted by name).
fn put_library(lib: &Library, w: &mut Writer) -> Result<()> {
    let vars = lib.variables();
    w.len(vars.len(), "variable")?;
    for v in &vars {
        w.str(&v.name)?;
        v.init.put(w)?;
    }
    let decls = lib.declarations()?;
    w.len(decls.len(), "declaration")?;
    for (name, sig) in &decls {
        w.str(name)?;
        sig.put(w)?;
    }
    let names = lib.function_names();
    w.len(names.len(), "function")?;
    for name in &names {
        w.str(name)?;
        let f = lib.get(name)?;
        put_function(&f, w)?;
    }
    Ok(())
}

fn get_library(r: &mut Reader) -> Result<()> {
    let lib = r.lib.clone();
    for _ in 0..r.count(9, "variable")? {
        let at = r.pos;
        let name = r.string()?;
        let init = Wire::get(r)?;
        lib.add_variable(&name, init).map_err(|e| Error::Format { at, msg: e.to_string() })?;
    }
    for _ in 0..r.count(12, "declaration")? {
        let at = r.pos;
        let name = r.string()?;
        let sig = Wire::get(r)?;
        lib.declare(&name, sig).map_err(|e| Error::Format { at, msg: e.to_string() })?;
    }
    for _ in 0..r.count(16, "function")? {
        let at = r.pos;
        let name = r.string()?;
        let f = get_function(r)?;
        lib.define(&name, f).map_err(|e| Error::Format { at, msg: e.to_string() })?;
    }
    Ok(())
}

/// The node table of `g` in topological order; returns each node's position.
fn put_body(g: &Graph, w: &mut Writer) -> Result<HashMap<NodeId, u32>> {
    let order = g.topo_order()?;
    w.len(order.len(), "node")?;
    let mut pos = HashMap::with_capacity(order.len());
    for (k, &n) in order.iter().enumerate() {
        let nd = g.node(n)?;
        nd.op.put(w).map_err(|e| e.at_node(n, nd.op.name()))?;
        w.len(nd.inputs.len(), "input")?;
        for v in &nd.inputs {
            put_value(w, &pos, *v)?;
        }
        nd.outputs.put(w)?;
        pos.insert(n, k as u32);
    }
    Ok(pos)
}

fn put_value(w: &mut Writer, pos: &HashMap<NodeId, u32>, v: ValueId) -> Result<()> {
    let p = pos.get(&v.node).ok_or_else(|| Error::unknown_value(v, "not a value of the graph being saved"))?;
    w.u32(*p);
    w.u32(v.slot);
    Ok(())
}

/// A node table into a fresh graph of the reader's library; returns the nodes by position.
fn get_body(r: &mut Reader) -> Result<(Graph, Vec<NodeId>)> {
    let mut g = Graph::with_library(r.lib.clone());
    // An op tag (4 + 1 bytes at least) and two counts.
    let n = r.count(13, "node")?;
    let mut ids: Vec<NodeId> = Vec::with_capacity(n);
    for k in 0..n {
        let at = r.pos;
        let op = Op::get(r)?;
        let inputs = get_values(r, &ids, "input")?;
        let outputs: Vec<TensorType> = Wire::get(r)?;
        let bad = |msg: String| Error::Format { at, msg: format!("node {k}: {msg}") };
        let id = match op {
            Op::Input { name } => match (&inputs[..], &outputs[..]) {
                ([], [ty]) => g.input(&name, ty.dtype, ty.shape.clone()).node,
                _ => return Err(bad(format!("input '{name}' must have no inputs and one output type"))),
            },
            op => {
                let name = op.to_string();
                let id = g.add_node(op, &inputs).map_err(|e| bad(e.to_string()))?;
                let inferred = &g.node(id)?.outputs;
                if *inferred != outputs {
                    return Err(bad(format!("{name}: stored output types {outputs:?} != inferred {inferred:?}")));
                }
                id
            }
        };
        ids.push(id);
    }
    Ok((g, ids))
}

fn get_value(r: &mut Reader, ids: &[NodeId]) -> Result<ValueId> {
    let p = r.u32()?;
    let slot = r.u32()?;
    let node = ids.get(p as usize).copied().ok_or_else(|| {
        r.err(format!("value refers to node {p}, which does not come before node {} in the table", ids.len()))
    })?;
    Ok(ValueId { node, slot })
}

fn get_values(r: &mut Reader, ids: &[NodeId], what: &str) -> Result<Vec<ValueId>> {
    let n = r.count(8, what)?;
    (0..n).map(|_| get_value(r, ids)).collect()
}

fn put_function(f: &Function, w: &mut Writer) -> Result<()> {
    if !f.graph.library().same(&w.lib) {
        return Err(Error::InvalidArgument("a function body uses another library than the graph being saved".into()));
    }
    w.depth += 1;
    if w.depth > MAX_DEPTH {
        return Err(Error::InvalidArgument(format!("function bodies nest deeper than {MAX_DEPTH}")));
    }
    let pos = put_body(&f.graph, w)?;
    for list in [&f.params, &f.results] {
        w.len(list.len(), "value")?;
        list.iter().try_for_each(|v| put_value(w, &pos, *v))?;
    }
    w.depth -= 1;
    Ok(())
}

fn get_function(r: &mut Reader) -> Result<Function> {
    if r.depth >= MAX_DEPTH {
        return Err(r.err(format!("function bodies nest deeper than {MAX_DEPTH}")));
    }
    r.depth += 1;
    let (g, ids) = get_body(r)?;
    let params = get_values(r, &ids, "parameter")?;
    let at = r.pos;
    let results = get_values(r, &ids, "result")?;
    r.depth -= 1;
    Function::from_parts(g, params, results).map_err(|e| Error::Format { at, msg: e.to_string() })
}

impl Wire for Arc<Function> {
    fn put(&self, w: &mut Writer) -> Result<()> {
        put_function(self, w)
    }
    fn get(r: &mut Reader) -> Result<Self> {
        get_function(r).map(Arc::new)
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::InvalidArgument(format!("{what} {}: {e}", path.display()))
}

impl Graph {
    /// This graph (its nodes, their ops with every attribute, constants, inputs with their
    /// declared shapes, and its whole function library and variables) in the versioned
    /// format of `docs/FORMAT.md`, with `outputs` recorded so that [`Graph::from_bytes`]
    /// can name them in the loaded graph. Deterministic: the same graph gives the same
    /// bytes. Errors name a custom op (which cannot be saved) or an output that is not a
    /// value of this graph.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(3)]);
    /// let y = g.exp(x)?;
    /// let bytes = g.to_bytes(&[y])?;
    /// let (h, outs) = Graph::from_bytes(&bytes)?;
    /// let xs = Tensor::from_vec(&[2, 3], vec![0.0f32; 6])?;
    /// let r = run_once(&h, &outs, &[(h.input_by_name("x").unwrap(), xs)])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, vec![1.0; 6]);
    /// # Ok::<(), pfor::Error>(())
    /// ```
    pub fn to_bytes(&self, outputs: &[ValueId]) -> Result<Vec<u8>> {
        write_file(Content::Graph, &self.library, |w| {
            let pos = put_body(self, w)?;
            w.len(outputs.len(), "output")?;
            outputs.iter().try_for_each(|v| put_value(w, &pos, *v))
        })
    }

    /// A graph saved by [`Graph::to_bytes`], with fresh handles, and its recorded outputs.
    /// The bytes are validated: a bad magic, a format version newer than this build's,
    /// truncated or malformed bytes, or a graph that fails [`Graph::verify`] give an
    /// [`Error::Format`] with the byte offset — never a panic.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// let g = Graph::new();
    /// let mut bytes = g.to_bytes(&[])?;
    /// bytes[8] = 99; // the format version
    /// let e = Graph::from_bytes(&bytes).unwrap_err().to_string();
    /// assert!(e.contains("version 99") && e.contains("versions 1 to 1"), "{e}");
    /// # Ok::<(), pfor::Error>(())
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<(Graph, Vec<ValueId>)> {
        read_file(bytes, Content::Graph, |r| {
            let (g, ids) = get_body(r)?;
            let outputs = get_values(r, &ids, "output")?;
            for v in &outputs {
                g.check_value(*v).map_err(|e| r.err(format!("output: {e}")))?;
            }
            g.verify().map_err(|e| r.err(format!("the graph fails verification: {e}")))?;
            Ok((g, outputs))
        })
    }

    /// [`Graph::to_bytes`] written to a file.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// let mut g = Graph::new();
    /// let c = g.scalar(DType::F64, 2.0);
    /// let path = std::env::temp_dir().join(format!("pfor-doc-save-{}.pfor", std::process::id()));
    /// g.save(&path, &[c])?;
    /// let (h, outs) = Graph::load(&path)?;
    /// assert_eq!(run_once(&h, &outs, &[])?[0].to_vec::<f64>()?, vec![2.0]);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), pfor::Error>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>, outputs: &[ValueId]) -> Result<()> {
        let bytes = self.to_bytes(outputs)?;
        std::fs::write(path.as_ref(), bytes).map_err(|e| io_error("save", path.as_ref(), e))
    }

    /// [`Graph::from_bytes`] of a file written by [`Graph::save`].
    ///
    /// ```
    /// use pfor::prelude::*;
    /// let e = Graph::load("/nonexistent/graph.pfor").unwrap_err();
    /// assert!(e.to_string().contains("/nonexistent/graph.pfor"));
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<(Graph, Vec<ValueId>)> {
        let bytes = std::fs::read(path.as_ref()).map_err(|e| io_error("load", path.as_ref(), e))?;
        Graph::from_bytes(&bytes)
    }
}

impl Function {
    /// This function (its body, parameters and results, and its library) in the format of
    /// [`Graph::to_bytes`]. The origin record and derivative hook are not saved.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// let g = Graph::new();
    /// let f = Function::build(&g, &[TensorType::new(DType::F64, [2])], |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// let h = Function::from_bytes(&f.to_bytes()?)?;
    /// let x = Tensor::from_vec(&[2], vec![1.0, -2.0])?;
    /// assert_eq!(pfor::run_function(&h, vec![x])?[0].to_vec::<f64>()?, vec![-1.0, 2.0]);
    /// # Ok::<(), pfor::Error>(())
    /// ```
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        write_file(Content::Function, self.graph.library(), |w| {
            w.depth = 0;
            put_function(self, w)
        })
    }

    /// A function saved by [`Function::to_bytes`], validated like [`Graph::from_bytes`].
    ///
    /// ```
    /// use pfor::prelude::*;
    /// let g = Graph::new();
    /// let e = Function::from_bytes(&g.to_bytes(&[])?).unwrap_err();
    /// assert!(e.to_string().contains("holds a graph, not a function"), "{e}");
    /// # Ok::<(), pfor::Error>(())
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Function> {
        read_file(bytes, Content::Function, |r| {
            let f = get_function(r)?;
            f.graph.verify().map_err(|e| r.err(format!("the function fails verification: {e}")))?;
            Ok(f)
        })
    }

    /// [`Function::to_bytes`] written to a file.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// let g = Graph::new();
    /// let f = Function::build(&g, &[], |g, _| Ok(vec![g.scalar(DType::I64, 7.0)]))?;
    /// let path = std::env::temp_dir().join(format!("pfor-doc-fsave-{}.pfor", std::process::id()));
    /// f.save(&path)?;
    /// let h = Function::load(&path)?;
    /// assert_eq!(pfor::run_function(&h, vec![])?[0].to_vec::<i64>()?, vec![7]);
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), pfor::Error>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let bytes = self.to_bytes()?;
        std::fs::write(path.as_ref(), bytes).map_err(|e| io_error("save", path.as_ref(), e))
    }

    /// [`Function::from_bytes`] of a file written by [`Function::save`].
    ///
    /// ```
    /// use pfor::prelude::*;
    /// assert!(Function::load("/nonexistent/f.pfor").is_err());
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Function> {
        let bytes = std::fs::read(path.as_ref()).map_err(|e| io_error("load", path.as_ref(), e))?;
        Function::from_bytes(&bytes)
    }
}
