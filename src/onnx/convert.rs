//! The per-node driver of the importer: the name → value environment, the node context
//! (inputs, attributes read with defaults, constant operands), dispatch to the op families
//! (`ops_elementwise`, `ops_shape`, `ops_nn`) and folding of constant-only nodes.
//!
//! Invariants: a node's attributes that its converter did not read make the import fail
//! (naming them); a converter never sees an omitted optional input as a value; a node whose
//! inputs are all constants is evaluated once here and its outputs become constants; an
//! operand a converter needs as a constant ([`NodeCx::const_input`]) that is computed at run
//! time is an `Unsupported` error naming the op, node, input and the model inputs it depends
//! on (found by walking the graph back to the values bound with [`Env::bind_input`]), which
//! are also recorded in [`Sources::needed`] for [`super::Model::bind_needed_inputs`].

use super::layout::LayoutCache;
use super::proto::{AttributeProto, GraphProto, NodeProto, ValueType};
use super::{
    legacy, ops_attention, ops_convt, ops_dft, ops_einsum, ops_elementwise, ops_grid, ops_index, ops_loss, ops_math,
    ops_nn, ops_norm, ops_quant, ops_resize, ops_rnn, ops_rotary, ops_scatter, ops_shape, ops_spatial, ops_training,
    ops_window, tensor, versions,
};
use crate::error::{Error, Result};
use crate::exec::run_once;
use crate::ir::{Graph, ValueId};
use crate::ops::Op;
use crate::tensor::{DType, Tensor};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

/// Value name → its ONNX element type, where the file states it (see [`onnx_types`]).
pub(super) type OnnxTypes = Arc<HashMap<String, i64>>;

/// The ONNX element types a graph states: of its inputs, initializers, `Constant` outputs and
/// `Cast` outputs. Our dtypes widen narrow integers (see [`super::tensor`]); an op whose
/// result depends on the narrow type (`QuantizeLinear`'s saturation range) reads it here.
pub(super) fn onnx_types(graph: &GraphProto) -> OnnxTypes {
    let mut m = HashMap::new();
    for vi in &graph.input {
        if let ValueType::Tensor { elem_type, .. } = vi.ty {
            m.insert(vi.name.clone(), elem_type);
        }
    }
    for t in &graph.initializer {
        m.insert(t.name.clone(), t.data_type);
    }
    for n in &graph.node {
        let attr = |name: &str| n.attribute.iter().find(|a| a.name == name);
        let t = match n.op_type.as_str() {
            "Cast" => attr("to").map(|a| a.i),
            "Constant" => attr("value").and_then(|a| a.t.as_ref().map(|t| t.data_type)).or_else(|| {
                if attr("value_int").or(attr("value_ints")).is_some() {
                    Some(7)
                } else {
                    attr("value_float").or(attr("value_floats")).map(|_| 1)
                }
            }),
            _ => None,
        };
        if let (Some(t), Some(o)) = (t, n.output.first()) {
            m.insert(o.clone(), t);
        }
    }
    Arc::new(m)
}

/// Name → value bindings while a graph is converted.
pub(super) struct Env {
    values: HashMap<String, ValueId>,
    opset: i64,
    /// NHWC forms of the NCHW values found so far (see `layout`).
    layout: LayoutCache,
    sources: Rc<Sources>,
    types: OnnxTypes,
}

/// The model inputs of one conversion, and those a needs-a-constant error named.
#[derive(Default)]
pub(super) struct Sources {
    /// Value bound to a model input → the input's name.
    inputs: RefCell<HashMap<ValueId, String>>,
    /// Model inputs that an operand needed as a constant depends on, in order of discovery.
    needed: RefCell<Vec<String>>,
}

impl Sources {
    /// The model inputs `v` is computed from (by walking its ancestors in `g`), in order of
    /// discovery.
    fn inputs_of(&self, g: &Graph, v: ValueId) -> Vec<String> {
        let inputs = self.inputs.borrow();
        let (mut stack, mut seen, mut found) = (vec![v], HashSet::new(), Vec::new());
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let Some(name) = inputs.get(&v) {
                if !found.contains(name) {
                    found.push(name.clone());
                }
            } else if let Ok(node) = g.node(v.node) {
                stack.extend(node.inputs.iter().rev());
            }
        }
        found
    }
}

impl Env {
    pub(super) fn new(opset: i64, types: OnnxTypes) -> Env {
        Env { values: HashMap::new(), opset, layout: LayoutCache::default(), sources: Rc::default(), types }
    }
    pub(super) fn bind(&mut self, name: &str, v: ValueId) {
        self.values.insert(name.to_string(), v);
    }
    /// Binds model input `name` to `v`, a value an error can name it by.
    pub(super) fn bind_input(&mut self, name: &str, v: ValueId) {
        self.sources.inputs.borrow_mut().insert(v, name.to_string());
        self.bind(name, v);
    }
    /// The model inputs needs-a-constant errors named so far.
    pub(super) fn needed(&self) -> Vec<String> {
        self.sources.needed.borrow().clone()
    }
    pub(super) fn get(&self, _g: &Graph, name: &str) -> Result<ValueId> {
        self.values
            .get(name)
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("onnx: value '{name}' is used before it is defined")))
    }
}

/// Every op type the importer converts (the default domain, and `ai.onnx.preview.training`'s
/// optimizers), sorted.
pub fn supported_ops() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = [
        ops_elementwise::OPS,
        ops_shape::OPS,
        ops_nn::OPS,
        ops_loss::OPS,
        ops_norm::OPS,
        ops_index::OPS,
        ops_math::OPS,
        ops_resize::OPS,
        ops_attention::OPS,
        ops_convt::OPS,
        ops_rnn::OPS,
        ops_einsum::OPS,
        ops_scatter::OPS,
        ops_window::OPS,
        ops_quant::OPS,
        ops_spatial::OPS,
        ops_rotary::OPS,
        ops_training::OPS,
        ops_dft::OPS,
        ops_grid::OPS,
    ]
    .iter()
    .flat_map(|s| s.iter().copied())
    .collect();
    v.sort_unstable();
    v
}

/// Converts `nodes` in order, binding their outputs in `env`.
pub(super) fn run_graph(g: &mut Graph, env: &mut Env, nodes: &[NodeProto]) -> Result<()> {
    for node in nodes {
        let mut inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            inputs.push(if name.is_empty() { None } else { Some(env.get(g, name)?) });
        }
        let cx = NodeCx {
            proto: node,
            opset: env.opset,
            inputs,
            read: RefCell::new(vec![false; node.attribute.len()]),
            layout: env.layout.clone(),
            sources: env.sources.clone(),
            types: env.types.clone(),
        };
        let training = node.domain == ops_training::DOMAIN && ops_training::OPS.contains(&node.op_type.as_str());
        if !(node.domain.is_empty() || node.domain == "ai.onnx" || training) {
            return Err(cx.unsupported(format!("domain '{}'", node.domain)));
        }
        versions::check(&cx)?;
        let outs = convert_node(g, &cx)?;
        if let Some(i) = cx.read.borrow().iter().position(|r| !r) {
            let a = &node.attribute[i];
            return Err(cx.unsupported(format!("attribute '{}'", a.name)));
        }
        let outs = fold(g, &cx, outs)?;
        for (k, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let v = *outs.get(k).ok_or_else(|| cx.unsupported(format!("output {k} ('{name}')")))?;
            env.bind(name, v);
        }
    }
    Ok(())
}

fn convert_node(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let r = legacy::convert(g, n)
        .or_else(|| ops_elementwise::convert(g, n))
        .or_else(|| ops_shape::convert(g, n))
        .or_else(|| ops_nn::convert(g, n))
        .or_else(|| ops_loss::convert(g, n))
        .or_else(|| ops_norm::convert(g, n))
        .or_else(|| ops_index::convert(g, n))
        .or_else(|| ops_math::convert(g, n))
        .or_else(|| ops_resize::convert(g, n))
        .or_else(|| ops_attention::convert(g, n))
        .or_else(|| ops_convt::convert(g, n))
        .or_else(|| ops_rnn::convert(g, n))
        .or_else(|| ops_einsum::convert(g, n))
        .or_else(|| ops_scatter::convert(g, n))
        .or_else(|| ops_window::convert(g, n))
        .or_else(|| ops_quant::convert(g, n))
        .or_else(|| ops_spatial::convert(g, n))
        .or_else(|| ops_rotary::convert(g, n))
        .or_else(|| ops_training::convert(g, n))
        .or_else(|| ops_dft::convert(g, n))
        .or_else(|| ops_grid::convert(g, n))
        .unwrap_or_else(|| Err(n.unsupported("the op type")));
    r.map_err(|e| match e {
        Error::Unsupported { .. } => e,
        Error::InvalidArgument(m) if m.starts_with("onnx ") => Error::InvalidArgument(m),
        e => Error::InvalidArgument(format!("{}: {e}", n.describe())),
    })
}

/// Replaces outputs computed from constants only by constants: a node whose inputs are all
/// constants, or whose outputs depend on constants only (`CastLike(constant, x)` reads only
/// `x`'s type).
fn fold(g: &mut Graph, n: &NodeCx, outs: Vec<ValueId>) -> Result<Vec<ValueId>> {
    let all_const = n.inputs.iter().flatten().all(|&v| const_value(g, v).is_some())
        || outs.iter().all(|&v| from_constants_only(g, v));
    if !all_const || outs.iter().all(|&v| const_value(g, v).is_some()) {
        return Ok(outs);
    }
    let vals = run_once(g, &outs, &[]).map_err(|e| Error::InvalidArgument(format!("{}: {e}", n.describe())))?;
    Ok(vals.into_iter().map(|t| g.constant(t)).collect())
}

/// Whether `v` is computed from constants only: no graph input, no random or stateful op, no
/// op with side effects among its ancestors.
fn from_constants_only(g: &Graph, v: ValueId) -> bool {
    let (mut stack, mut seen) = (vec![v.node], HashSet::new());
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let Ok(node) = g.node(id) else { return false };
        match &node.op {
            Op::Const { .. } => {}
            op if node.inputs.is_empty() || op.is_stateful() || op.has_side_effects() => return false,
            _ => stack.extend(node.inputs.iter().map(|i| i.node)),
        }
    }
    true
}

/// The value of `v` if it is a constant node's output.
pub(super) fn const_value(g: &Graph, v: ValueId) -> Option<Tensor> {
    match &g.node(v.node).ok()?.op {
        Op::Const { value } => Some(value.clone()),
        _ => None,
    }
}

/// One node being converted.
pub(super) struct NodeCx<'a> {
    pub(super) proto: &'a NodeProto,
    pub(super) opset: i64,
    inputs: Vec<Option<ValueId>>,
    read: RefCell<Vec<bool>>,
    /// The import's NHWC forms (`layout::nhwc_of`).
    pub(super) layout: LayoutCache,
    sources: Rc<Sources>,
    types: OnnxTypes,
}

impl<'a> NodeCx<'a> {
    /// This node with input `k` replaced by `v`, for a converter that rewrites an operand
    /// and hands the node on (attribute reads on the copy are not tracked).
    pub(super) fn with_input(&self, k: usize, v: ValueId) -> NodeCx<'a> {
        let mut inputs = self.inputs.clone();
        if let Some(slot) = inputs.get_mut(k) {
            *slot = Some(v);
        }
        NodeCx {
            proto: self.proto,
            opset: self.opset,
            inputs,
            read: RefCell::new(vec![true; self.proto.attribute.len()]),
            layout: self.layout.clone(),
            sources: self.sources.clone(),
            types: self.types.clone(),
        }
    }
}

impl NodeCx<'_> {
    /// The op type.
    pub(super) fn op(&self) -> &str {
        &self.proto.op_type
    }
    /// "op 'X' (node 'n', opset k)".
    pub(super) fn describe(&self) -> String {
        format!("onnx {} (node '{}', opset {})", self.proto.op_type, self.proto.name, self.opset)
    }
    /// An unsupported error naming the op, node and opset and `what`.
    pub(super) fn unsupported(&self, what: impl Into<String>) -> Error {
        Error::unsupported(&self.describe(), what)
    }
    /// An invalid-model error naming the op, node and opset.
    pub(super) fn invalid(&self, what: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(format!("{}: {what}", self.describe()))
    }
    /// Input `k`, which must be given.
    pub(super) fn input(&self, k: usize) -> Result<ValueId> {
        self.opt_input(k).ok_or_else(|| self.invalid(format!("input {k} is missing")))
    }
    /// Input `k`, if given.
    pub(super) fn opt_input(&self, k: usize) -> Option<ValueId> {
        self.inputs.get(k).copied().flatten()
    }
    /// The ONNX element type of input `k`, where the file states it ([`onnx_types`]).
    pub(super) fn elem_type(&self, k: usize) -> Option<i64> {
        self.proto.input.get(k).and_then(|name| self.types.get(name)).copied()
    }
    /// Every given input.
    pub(super) fn all_inputs(&self) -> Vec<ValueId> {
        self.inputs.iter().flatten().copied().collect()
    }
    /// The constant value of input `k`, if given; an unsupported error when it is not a
    /// constant (our ops take shapes, axes and sizes statically), see [`NodeCx::needs_constant`].
    pub(super) fn const_input(&self, g: &Graph, k: usize) -> Result<Option<Tensor>> {
        match self.opt_input(k) {
            None => Ok(None),
            Some(v) => const_value(g, v).map(Some).ok_or_else(|| self.needs_constant(g, k, v)),
        }
    }
    /// The error for input `k` (value `v`), needed as a constant but computed at run time:
    /// it names the op, node, input and the model inputs `v` depends on, says how to bind
    /// them, and records them for [`super::Model::bind_needed_inputs`].
    fn needs_constant(&self, g: &Graph, k: usize, v: ValueId) -> Error {
        let name = self.proto.input.get(k).map_or("", String::as_str);
        let from = self.sources.inputs_of(g, v);
        let how = if from.is_empty() {
            "it depends on no model input (a run-time parameter?): give the value as a constant".to_string()
        } else {
            self.sources.needed.borrow_mut().extend(from.iter().cloned());
            let list: Vec<String> = from.iter().map(|n| format!("'{n}'")).collect();
            format!(
                "it is computed from the model input(s) {}: bind them to known values with \
                 Model::bind_input(\"{}\", value) (or Model::bind_needed_inputs)",
                list.join(", "),
                from[0]
            )
        };
        self.unsupported(format!("input {k} ('{name}') computed at run time (it must be a constant); {how}"))
    }
    /// Input `k` as constant integers, if given.
    pub(super) fn const_ints(&self, g: &Graph, k: usize) -> Result<Option<Vec<i64>>> {
        Ok(self.const_input(g, k)?.map(|t| t.to_f64_vec().into_iter().map(|x| x as i64).collect()))
    }
    /// The attribute `name`, marked read.
    pub(super) fn attr(&self, name: &str) -> Option<&AttributeProto> {
        let i = self.proto.attribute.iter().position(|a| a.name == name)?;
        self.read.borrow_mut()[i] = true;
        Some(&self.proto.attribute[i])
    }
    /// Integer attribute with a default.
    pub(super) fn attr_i(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i)
    }
    /// Float attribute with a default.
    pub(super) fn attr_f(&self, name: &str, default: f32) -> f64 {
        f64::from(self.attr(name).map_or(default, |a| a.f))
    }
    /// Integer list attribute.
    pub(super) fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }
    /// String attribute.
    pub(super) fn attr_s(&self, name: &str) -> Option<String> {
        self.attr(name).map(|a| String::from_utf8_lossy(&a.s).into_owned())
    }
    /// String attribute that must be one of `allowed` (the first is the default).
    pub(super) fn attr_choice(&self, name: &str, allowed: &[&str]) -> Result<String> {
        let v = self.attr_s(name).unwrap_or_else(|| allowed[0].to_string());
        if allowed.contains(&v.as_str()) {
            Ok(v)
        } else {
            Err(self.unsupported(format!("attribute {name} = '{v}' (supported: {allowed:?})")))
        }
    }
    /// Requires attribute `name` to be absent or equal `expected`.
    pub(super) fn attr_i_only(&self, name: &str, expected: i64) -> Result<()> {
        match self.attr(name) {
            Some(a) if a.i != expected => {
                Err(self.unsupported(format!("attribute {name} = {} (only {expected})", a.i)))
            }
            _ => Ok(()),
        }
    }
    /// Our dtype for the ONNX element type attribute `name`.
    pub(super) fn attr_dtype(&self, name: &str) -> Result<DType> {
        let t = self.attr(name).map(|a| a.i).ok_or_else(|| self.invalid(format!("attribute {name} is missing")))?;
        tensor::dtype_of(t).map_err(|_| self.unsupported(format!("element type {}", tensor::onnx_type_name(t))))
    }
}
