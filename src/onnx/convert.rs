//! The per-node driver of the importer: the name → value environment, the node context
//! (inputs, attributes read with defaults, constant operands), dispatch to the op families
//! (`ops_elementwise`, `ops_shape`, `ops_nn`) and folding of constant-only nodes.
//!
//! Invariants: a node's attributes that its converter did not read make the import fail
//! (naming them); a converter never sees an omitted optional input as a value; a node whose
//! inputs are all constants is evaluated once here and its outputs become constants.

use super::layout::LayoutCache;
use super::proto::{AttributeProto, NodeProto};
use super::{
    legacy, ops_attention, ops_convt, ops_einsum, ops_elementwise, ops_index, ops_loss, ops_math, ops_nn, ops_norm,
    ops_quant, ops_resize, ops_rnn, ops_rotary, ops_scatter, ops_shape, ops_spatial, ops_window, tensor, versions,
};
use crate::error::{Error, Result};
use crate::exec::run_once;
use crate::ir::{Graph, ValueId};
use crate::ops::Op;
use crate::tensor::{DType, Tensor};
use std::cell::RefCell;
use std::collections::HashMap;

/// Name → value bindings while a graph is converted.
pub(super) struct Env {
    values: HashMap<String, ValueId>,
    opset: i64,
    /// NHWC forms of the NCHW values found so far (see `layout`).
    layout: LayoutCache,
}

impl Env {
    pub(super) fn new(opset: i64) -> Env {
        Env { values: HashMap::new(), opset, layout: LayoutCache::default() }
    }
    pub(super) fn bind(&mut self, name: &str, v: ValueId) {
        self.values.insert(name.to_string(), v);
    }
    pub(super) fn get(&self, _g: &Graph, name: &str) -> Result<ValueId> {
        self.values
            .get(name)
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("onnx: value '{name}' is used before it is defined")))
    }
}

/// Every op type the importer converts (default domain), sorted.
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
        };
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
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
        .unwrap_or_else(|| Err(n.unsupported("the op type")));
    r.map_err(|e| match e {
        Error::Unsupported { .. } => e,
        Error::InvalidArgument(m) if m.starts_with("onnx ") => Error::InvalidArgument(m),
        e => Error::InvalidArgument(format!("{}: {e}", n.describe())),
    })
}

/// Replaces outputs computed from constants only by constants.
fn fold(g: &mut Graph, n: &NodeCx, outs: Vec<ValueId>) -> Result<Vec<ValueId>> {
    let all_const = n.inputs.iter().flatten().all(|&v| const_value(g, v).is_some());
    if !all_const || outs.iter().all(|&v| const_value(g, v).is_some()) {
        return Ok(outs);
    }
    let vals = run_once(g, &outs, &[]).map_err(|e| Error::InvalidArgument(format!("{}: {e}", n.describe())))?;
    Ok(vals.into_iter().map(|t| g.constant(t)).collect())
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
    /// Every given input.
    pub(super) fn all_inputs(&self) -> Vec<ValueId> {
        self.inputs.iter().flatten().copied().collect()
    }
    /// The constant value of input `k`, if given; an unsupported error when it is not a
    /// constant (our ops take shapes, axes and sizes statically).
    pub(super) fn const_input(&self, g: &Graph, k: usize) -> Result<Option<Tensor>> {
        match self.opt_input(k) {
            None => Ok(None),
            Some(v) => const_value(g, v)
                .map(Some)
                .ok_or_else(|| self.unsupported(format!("input {k} computed at run time (it must be a constant)"))),
        }
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
