//! The graph IR: nodes of [`Op`]s connected by ordered value edges.
//!
//! Invariants (checked by [`Graph::verify`] and kept by construction):
//! - every node's inputs refer to existing values when it is inserted, so a graph built
//!   through this API is acyclic (passes that rewire inputs are checked by `verify`);
//!   execution order is [`Graph::topo_order`] (Kahn, smallest id first: deterministic,
//!   and program order for independent stateful ops);
//! - a node's output types are what shape inference returned when it was inserted
//!   (inference runs on insertion, so a bad shape is an error at build time);
//! - petgraph edges mirror `Node::inputs` (one edge per input position). Code reads
//!   `Node::inputs` for order and never relies on petgraph's edge order.
//!
//! - every handle names one node: a [`NodeId`] carries the node's stamp and every lookup
//!   compares it with the stamp of the slot's live node, so a foreign or stale handle is an
//!   error naming the handle and what is wrong (see `ir/handle.rs` and `ir/scope.rs`);
//! - a node's inputs are handles of this graph: an enclosing graph's value used by a
//!   cond/while builder is replaced by a captured placeholder when it is stored.
//!
//! The petgraph graph is private; users see only [`NodeId`] and [`ValueId`].

mod callgraph;
mod derivative;
mod edit;
mod function;
mod handle;
mod print;
mod scope;
pub mod serialize;
mod verify;

pub use derivative::{DerivativeHook, FunctionDerivatives, HookNode};
pub use function::{Function, FunctionSignature, Library, VariableDef};
pub use handle::{NodeId, ValueId};
pub(crate) use scope::Capture;

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;

use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{DType, Shape, Tensor, TensorType};

/// A node: an op, its ordered inputs and its inferred output types.
#[derive(Clone, Debug)]
pub struct Node {
    /// The operation.
    pub op: Op,
    /// Ordered inputs.
    pub inputs: Vec<ValueId>,
    /// Inferred output types.
    pub outputs: Vec<TensorType>,
}

/// An edge mirrors one input position: `src_slot` of the producer feeds input `dst_pos`.
#[derive(Clone, Copy, Debug)]
struct Edge {
    src_slot: u32,
    dst_pos: u32,
}

/// A dataflow graph.
pub struct Graph {
    g: StableDiGraph<Node, Edge, u32>,
    library: Library,
    /// Stamp of the live node in each slot (`stamps[index]`, 0 when vacant). Stamps increase
    /// in insertion order, so they are also creation times: petgraph reuses the slots of
    /// removed nodes, so indices alone tell neither which node nor which is newer.
    stamps: Vec<u64>,
    /// Stamps of the nodes removed from this graph (or from the graph it was cloned from):
    /// only searched by errors, to say "removed" rather than "another graph" (a list, so a
    /// pass removing many nodes pays a push each).
    removed: Vec<u64>,
    /// Set while this graph is a body being built by a cond/while/function builder.
    scope: Option<Box<scope::Scope>>,
}

impl Clone for Graph {
    /// A copy of the nodes: handles of this graph are handles of the copy. A body under
    /// construction is copied without its enclosing graph (the copy captures nothing).
    fn clone(&self) -> Graph {
        Graph {
            g: self.g.clone(),
            library: self.library.clone(),
            stamps: self.stamps.clone(),
            removed: self.removed.clone(),
            scope: None,
        }
    }
}

impl Default for Graph {
    fn default() -> Self {
        Graph::new()
    }
}

impl Graph {
    /// An empty graph with a new, empty function library.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// assert_eq!(g.num_nodes(), 2);
    /// # let _ = y;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Graph {
        Graph::with_library(Library::default())
    }

    fn with_library(library: Library) -> Graph {
        Graph { g: StableDiGraph::default(), library, stamps: Vec::new(), removed: Vec::new(), scope: None }
    }

    /// An empty graph sharing this graph's function library and variables (for function
    /// bodies and control-flow branches).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.variable("w", Tensor::vec1(&[1.0f32]))?;
    /// let mut body = g.new_child(); // shares the library: sees the variable
    /// let r = body.read_variable("w")?;
    /// # let _ = (w, r);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new_child(&self) -> Graph {
        Graph::with_library(self.library.clone())
    }

    /// The shared function library and variable table.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.variable("w", Tensor::vec1(&[1.0f32]))?;
    /// assert_eq!(g.library().variables().len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn library(&self) -> &Library {
        &self.library
    }

    /// Add a graph input (a placeholder fed at run time).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);                             // fixed shape
    /// let b = g.input("b", DType::F32, [Dim::dynamic("batch"), Dim::fixed(3)]); // a dim fixed per run
    /// assert_eq!(g.shape(x)?.as_fixed(), Some(vec![2, 3]));
    /// assert_eq!(g.shape(b)?.as_fixed(), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn input(&mut self, name: &str, dtype: DType, shape: impl Into<Shape>) -> ValueId {
        let ty = TensorType::new(dtype, shape);
        self.push_node(Op::Input { name: name.to_string() }, vec![], vec![ty])
    }

    /// Add a constant.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let c = g.constant(Tensor::vec1(&[1.0f64, 2.0]));
    /// assert_eq!(run_once(&g, &[c], &[])?[0].to_f64_vec(), [1.0, 2.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn constant(&mut self, value: impl Into<Tensor>) -> ValueId {
        let value = value.into();
        let ty = value.tensor_type();
        self.push_node(Op::Const { value }, vec![], vec![ty])
    }

    /// A scalar constant of `dtype`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let two = g.scalar(DType::I64, 2.0);
    /// assert_eq!(run_once(&g, &[two], &[])?[0].scalar_i64()?, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar(&mut self, dtype: DType, v: f64) -> ValueId {
        self.constant(Tensor::scalar_of(dtype, v))
    }

    /// Add a node, running shape inference. Errors name the op and the node, or the input
    /// handle that is not a value of this graph. Inside a cond/while builder, an enclosing
    /// graph's value is captured (see [`Graph::capture`]).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::ops::UnaryKind;
    ///
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let n = g.add_node(Op::Unary(UnaryKind::Exp), &[x])?; // what `g.exp(x)` does
    /// assert_eq!(g.outputs_of(n).len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_node(&mut self, op: Op, inputs: &[ValueId]) -> Result<NodeId> {
        let mut in_types = Vec::with_capacity(inputs.len());
        for &v in inputs {
            in_types.push(self.value_type(v)?.clone());
        }
        let inferred = op.infer(&in_types);
        match inferred {
            Ok(outputs) => {
                let inputs = self.capture_read(inputs)?;
                let v = self.push_node(op, inputs, outputs);
                Ok(v.node)
            }
            Err(e) => {
                // Reserve the index the node would have had so the error can name it.
                let name = op.to_string();
                let v = self.push_node(Op::Input { name: String::new() }, vec![], vec![]);
                self.remove_slot(v.node);
                Err(e.at_node(v.node, name))
            }
        }
    }

    /// Add a single-output node and return its value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::ops::UnaryKind;
    ///
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.add_op(Op::Unary(UnaryKind::Exp), &[x])?;
    /// assert_eq!(g.value_type(y)?, g.value_type(x)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_op(&mut self, op: Op, inputs: &[ValueId]) -> Result<ValueId> {
        let n = self.add_node(op, inputs)?;
        Ok(ValueId { node: n, slot: 0 })
    }

    /// Add a node and return all its output values.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::ops::SlicingOp;
    ///
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let parts = g.add_op_multi(Op::Slicing(SlicingOp::Split { axis: 0, sizes: vec![1, 2] }), &[x])?;
    /// assert_eq!(parts.len(), 2);
    /// assert_eq!(g.shape(parts[1])?.as_fixed(), Some(vec![2]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_op_multi(&mut self, op: Op, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
        let n = self.add_node(op, inputs)?;
        Ok(self.outputs_of(n))
    }

    fn push_node(&mut self, op: Op, inputs: Vec<ValueId>, outputs: Vec<TensorType>) -> ValueId {
        let idx = self.g.add_node(Node { op, inputs: inputs.clone(), outputs });
        if self.stamps.len() <= idx.index() {
            self.stamps.resize(idx.index() + 1, 0);
        }
        let stamp = handle::fresh_stamp();
        self.stamps[idx.index()] = stamp;
        for (pos, v) in inputs.iter().enumerate() {
            self.g.add_edge(nx(v.node), idx, Edge { src_slot: v.slot, dst_pos: pos as u32 });
        }
        ValueId { node: NodeId::new(idx.index(), stamp), slot: 0 }
    }

    /// The handle of the live node in slot `i`.
    fn id_at(&self, i: NodeIndex<u32>) -> NodeId {
        NodeId::new(i.index(), self.stamps[i.index()])
    }

    /// Remove one node (and its edges), remembering its stamp for errors.
    fn remove_slot(&mut self, n: NodeId) {
        if self.g.remove_node(nx(n)).is_some() {
            self.stamps[n.index()] = 0;
            self.removed.push(n.stamp());
        }
    }

    /// The graph's creation clock: nodes added from now on are [`Graph::added_since`] it.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let m = g.mark();
    /// let y = g.exp(x)?;
    /// assert!(g.added_since(y.node, m) && !g.added_since(x.node, m));
    /// # Ok(())
    /// # }
    /// ```
    pub fn mark(&self) -> u64 {
        handle::stamp_clock()
    }

    /// Whether node `n` is in this graph and was added at or after `mark` (robust to the
    /// reuse of the slots of nodes removed by [`Graph::prune`]).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let m = g.mark();
    /// let x = g.input("x", DType::F32, [2]);
    /// assert!(g.added_since(x.node, m));
    /// # Ok(())
    /// # }
    /// ```
    pub fn added_since(&self, n: NodeId, mark: u64) -> bool {
        self.contains(n) && n.stamp() >= mark
    }

    /// The creation time of node `n` on the clock of [`Graph::mark`] (its stamp), if `n`
    /// is in this graph.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// assert!(g.birth(x.node).is_some() && g.birth(x.node) < g.birth(y.node));
    /// assert_eq!(Graph::new().birth(x.node), None); // another graph's node
    /// # Ok(())
    /// # }
    /// ```
    pub fn birth(&self, n: NodeId) -> Option<u64> {
        self.contains(n).then(|| n.stamp())
    }

    /// Whether `n` is a live node of this graph (not removed, not another graph's).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// assert!(g.contains(x.node) && !Graph::new().contains(x.node));
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains(&self, n: NodeId) -> bool {
        self.own(n).is_some()
    }

    /// The node `id` names, if it is live in this graph itself.
    #[inline]
    fn own(&self, id: NodeId) -> Option<&Node> {
        if self.stamps.get(id.index()) == Some(&id.stamp()) { self.g.node_weight(nx(id)) } else { None }
    }

    /// The node. Inside a cond/while builder, an enclosing graph's node is found too (its
    /// values are captured when an op uses them). Any other handle is an error that names
    /// it and says why: removed by a pass, another graph's, or (in a named function's
    /// body) an enclosing graph's value that must be passed in as a parameter.
    #[inline]
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// assert_eq!(g.node(y.node)?.inputs, [x]);
    /// assert!(Graph::new().node(y.node).is_err()); // another graph's handle: an error naming it
    /// # Ok(())
    /// # }
    /// ```
    pub fn node(&self, id: NodeId) -> Result<&Node> {
        match self.own(id) {
            Some(nd) => Ok(nd),
            None => self.outer_node(id),
        }
    }

    /// The node where [`Graph::node`] finds one, else `None` without building an error (for
    /// passes that probe nodes they may have removed).
    #[inline]
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// assert!(g.find_node(x.node).is_some() && Graph::new().find_node(x.node).is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn find_node(&self, id: NodeId) -> Option<&Node> {
        self.own(id).or_else(|| self.outer(id))
    }

    /// The static type of a value (of this graph or, in a builder, of an enclosing graph
    /// as for [`Graph::node`]).
    #[inline]
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let s = g.sum_all(x)?;
    /// assert_eq!(g.value_type(s)?.to_string(), "f32[]");
    /// # Ok(())
    /// # }
    /// ```
    pub fn value_type(&self, v: ValueId) -> Result<&TensorType> {
        let nd = self.node(v.node)?;
        nd.outputs
            .get(v.slot as usize)
            .ok_or_else(|| Error::unknown_value(v, format!("node {} has {} output(s)", v.node, nd.outputs.len())))
    }

    /// Shape of a value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let t = g.transpose(x, &[1, 0])?;
    /// assert_eq!(g.shape(t)?.as_fixed(), Some(vec![3, 2]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn shape(&self, v: ValueId) -> Result<Shape> {
        Ok(self.value_type(v)?.shape.clone())
    }

    /// Dtype of a value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let c = g.cast(x, DType::I64)?;
    /// assert_eq!(g.dtype(c)?, DType::I64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn dtype(&self, v: ValueId) -> Result<DType> {
        Ok(self.value_type(v)?.dtype)
    }

    /// All output values of a node (none for a handle [`Graph::node`] rejects).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let parts = g.split(x, 0, &[1, 3])?;
    /// assert_eq!(g.outputs_of(parts[0].node), parts);
    /// # Ok(())
    /// # }
    /// ```
    pub fn outputs_of(&self, n: NodeId) -> Vec<ValueId> {
        let k = self.node(n).map_or(0, |nd| nd.outputs.len());
        (0..k as u32).map(|slot| ValueId { node: n, slot }).collect()
    }

    /// Node ids in insertion order (creation time, not id: the ids of removed nodes are
    /// reused). A topological order unless a pass rewired a node to a newer value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let y = g.exp(x)?;
    /// assert_eq!(g.node_ids(), [x.node, y.node]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn node_ids(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.g.node_indices().map(|i| self.id_at(i)).collect();
        v.sort_unstable_by_key(|n| n.stamp());
        v
    }

    /// Number of nodes.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let _ = g.exp(x)?;
    /// assert_eq!(g.num_nodes(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn num_nodes(&self) -> usize {
        self.g.node_count()
    }

    /// Nodes that consume any output of `n`, each once, sorted (none if `n` is not a node
    /// of this graph).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let (a, b) = (g.exp(x)?, g.sin(x)?);
    /// assert_eq!(g.consumers(x.node), [a.node, b.node]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn consumers(&self, n: NodeId) -> Vec<NodeId> {
        if !self.contains(n) {
            return Vec::new();
        }
        let mut v: Vec<NodeId> =
            self.g.edges_directed(nx(n), petgraph::Direction::Outgoing).map(|e| self.id_at(e.target())).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Graph inputs (Input nodes), in insertion order.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let _ = g.constant(Tensor::scalar(1.0f32));
    /// assert_eq!(g.inputs(), [x]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn inputs(&self) -> Vec<ValueId> {
        self.node_ids()
            .into_iter()
            .filter(|&n| matches!(self.g[nx(n)].op, Op::Input { .. }))
            .map(|n| ValueId { node: n, slot: 0 })
            .collect()
    }

    /// Find an input by name.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// assert_eq!(g.input_by_name("x"), Some(x));
    /// assert_eq!(g.input_by_name("y"), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn input_by_name(&self, name: &str) -> Option<ValueId> {
        self.inputs().into_iter().find(|v| matches!(&self.g[nx(v.node)].op, Op::Input { name: nm } if nm == name))
    }

    /// Check that a value handle is a value of this graph itself; the error names the
    /// handle and says what is wrong with it. (Inside a cond/while builder an enclosing
    /// graph's value fails this check: [`Graph::capture`] gives this graph's handle for it.)
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// g.check_value(x)?;
    /// let e = Graph::new().check_value(x).unwrap_err();
    /// assert!(matches!(e, Error::UnknownValue { .. }), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn check_value(&self, v: ValueId) -> Result<()> {
        let nd = self.own(v.node).ok_or_else(|| self.unknown(v))?;
        if (v.slot as usize) < nd.outputs.len() {
            Ok(())
        } else {
            Err(Error::unknown_value(v, format!("node {} has {} output(s)", v.node, nd.outputs.len())))
        }
    }

    /// The set of nodes (sorted) that `roots` transitively depend on, `roots` included.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let (a, b) = (g.exp(x)?, g.sin(x)?);
    /// assert_eq!(g.ancestors(&[a])?, [x.node, a.node]); // not b
    /// # let _ = b;
    /// # Ok(())
    /// # }
    /// ```
    pub fn ancestors(&self, roots: &[ValueId]) -> Result<Vec<NodeId>> {
        let mut seen = hashbrown::HashSet::new();
        let mut stack: Vec<NodeId> = Vec::new();
        for r in roots {
            self.check_value(*r)?;
            stack.push(r.node);
        }
        while let Some(n) = stack.pop() {
            if seen.insert(n) {
                for v in &self.own_node(n)?.inputs {
                    stack.push(v.node);
                }
            }
        }
        let mut v: Vec<NodeId> = seen.into_iter().collect();
        v.sort_unstable();
        Ok(v)
    }

    /// A topological order of all nodes (Kahn's algorithm, oldest node first, so it
    /// equals insertion order for graphs built through the API — also after removals,
    /// whose ids petgraph reuses — and keeps program order for independent stateful ops).
    /// Errors on a cycle.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.neg(x)?;
    /// let z = g.exp(y)?;
    /// assert_eq!(g.topo_order()?, [x.node, y.node, z.node]); // producers before consumers
    /// # Ok(())
    /// # }
    /// ```
    pub fn topo_order(&self) -> Result<Vec<NodeId>> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        // Unread inputs per slot (one edge per input); the heap holds (stamp, slot).
        let mut indeg: Vec<usize> = vec![0; self.stamps.len()];
        let mut heap = BinaryHeap::new();
        for i in self.g.node_indices() {
            indeg[i.index()] = self.g[i].inputs.len();
            if indeg[i.index()] == 0 {
                heap.push(Reverse((self.stamps[i.index()], i)));
            }
        }
        let mut order = Vec::with_capacity(self.g.node_count());
        while let Some(Reverse((stamp, i))) = heap.pop() {
            order.push(NodeId::new(i.index(), stamp));
            for e in self.g.edges_directed(i, petgraph::Direction::Outgoing) {
                let t = e.target();
                indeg[t.index()] -= 1;
                if indeg[t.index()] == 0 {
                    heap.push(Reverse((self.stamps[t.index()], t)));
                }
            }
        }
        if order.len() != self.g.node_count()
            && let Some(stuck) = self.g.node_indices().find(|i| indeg[i.index()] > 0)
        {
            return Err(Error::Cycle { node: self.id_at(stuck) });
        }
        Ok(order)
    }
}

/// The petgraph index of a handle's slot (only for handles checked to be of this graph).
fn nx(n: NodeId) -> NodeIndex<u32> {
    NodeIndex::new(n.index())
}
