//! [`ConvertCtx`]: what a converter sees (the op, its wrapped inputs, the loop) and the
//! helpers converters share (tiling, axis folding, broadcasting alignment).

use super::{Converted, PforOptions, Wrapped};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, ValueId};
use crate::ops::Op;
use crate::tensor::{Dim, Shape, Tensor, TensorType};

/// The loop being vectorized (or the active subset of it, inside control flow).
#[derive(Clone, Debug)]
pub struct LoopInfo {
    /// The number of (active) iterations, if known at build time.
    pub n_static: Option<usize>,
    /// The number of (active) iterations as an i64 scalar value.
    pub n: ValueId,
    /// The iteration indices as a stacked i64 `[n]` value (`0..n`, or the active subset).
    pub index: ValueId,
    /// True if `index` is exactly `0..n` (the full loop, not a subset or a chunk).
    pub index_is_iota: bool,
}

impl LoopInfo {
    /// The leading dim of stacked values.
    pub fn dim(&self) -> Dim {
        self.n_static.map_or(Dim::Dynamic(None), Dim::Fixed)
    }
}

/// The context handed to a converter.
pub struct ConvertCtx<'a> {
    pub(crate) g: &'a mut Graph,
    pub(crate) node: NodeId,
    pub(crate) op: Op,
    pub(crate) inputs: Vec<Wrapped>,
    pub(crate) in_types: Vec<TensorType>,
    pub(crate) out_types: Vec<TensorType>,
    pub(crate) info: &'a LoopInfo,
    pub(crate) options: &'a PforOptions,
}

impl<'a> ConvertCtx<'a> {
    /// The op being converted.
    pub fn op(&self) -> &Op {
        &self.op
    }
    /// The original node (for error messages).
    pub fn node(&self) -> NodeId {
        self.node
    }
    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }
    /// Input `k`, converted.
    pub fn input(&self, k: usize) -> Wrapped {
        self.inputs[k]
    }
    /// All converted inputs.
    pub fn inputs(&self) -> &[Wrapped] {
        &self.inputs
    }
    /// True if input `k` is stacked.
    pub fn is_stacked(&self, k: usize) -> bool {
        self.inputs.get(k).is_some_and(|w| w.stacked)
    }
    /// True if any input is stacked.
    pub fn any_stacked(&self) -> bool {
        self.inputs.iter().any(|w| w.stacked)
    }
    /// The per-iteration type of input `k` (as in the body).
    pub fn input_type(&self, k: usize) -> &TensorType {
        &self.in_types[k]
    }
    /// The per-iteration type of output `k` (as in the body).
    pub fn output_type(&self, k: usize) -> &TensorType {
        &self.out_types[k]
    }

    /// The per-iteration types of all the op's outputs.
    pub fn output_types(&self) -> &[TensorType] {
        &self.out_types
    }
    /// The output graph.
    pub fn graph(&mut self) -> &mut Graph {
        self.g
    }
    /// The loop.
    pub fn loop_info(&self) -> &LoopInfo {
        self.info
    }
    /// The number of iterations as a value.
    pub fn loop_len(&self) -> ValueId {
        self.info.n
    }
    /// The conversion options.
    pub fn options(&self) -> &PforOptions {
        self.options
    }
    /// Add a single-output node.
    pub fn add(&mut self, op: Op, inputs: &[ValueId]) -> Result<ValueId> {
        self.g.add_op(op, inputs)
    }
    /// Add a multi-output node.
    pub fn add_multi(&mut self, op: Op, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
        self.g.add_op_multi(op, inputs)
    }
    /// Input `k` as a stacked value (tiling an invariant one: use only when the op truly
    /// needs a stacked operand).
    pub fn stacked(&mut self, k: usize) -> Result<ValueId> {
        let w = self.inputs[k];
        if w.stacked { Ok(w.value) } else { tile(self.g, self.info, w.value) }
    }
    /// Input `k`, which must be loop-invariant.
    pub fn unstacked(&self, k: usize) -> Result<ValueId> {
        let w = self.inputs[k];
        if w.stacked {
            return Err(Error::NoConverter {
                op: self.op.name(),
                node: self.node,
                reason: format!("input {k} must be loop-invariant"),
            });
        }
        Ok(w.value)
    }
    /// Re-emit the op on new inputs (e.g. when only axis renumbering was needed).
    pub fn emit(&mut self, op: Op, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
        self.g.add_op_multi(op, inputs)
    }
    /// `[n, m, rest...] -> [n*m, rest...]`.
    pub fn flatten_first_two(&mut self, v: ValueId) -> Result<ValueId> {
        merge_first_two(self.g, v)
    }
    /// `[n*m, rest...] -> [n, m, rest...]` for the loop's n.
    pub fn unflatten_first(&mut self, v: ValueId) -> Result<ValueId> {
        split_first(self.g, self.info, v, None)
    }
    /// `[n*m, rest...] -> [n, m, rest...]` when the converter knows `m` (exact even for n = 0).
    pub fn unflatten_first_known(&mut self, v: ValueId, m: usize) -> Result<ValueId> {
        split_first(self.g, self.info, v, Some(m))
    }
    /// Align a stacked input for broadcasting against per-iteration rank `rank`: inserts
    /// size-1 axes after the loop axis (`[n, s...] -> [n, 1.., s...]`). Unstacked inputs
    /// are returned as is (numpy broadcasting aligns trailing axes already).
    pub fn expand_for_broadcast(&mut self, k: usize, rank: usize) -> Result<ValueId> {
        let w = self.inputs[k];
        let r = self.in_types[k].rank();
        if !w.stacked || r >= rank {
            return Ok(w.value);
        }
        let mut v = w.value;
        for _ in r..rank {
            v = self.g.expand_dims(v, 1)?;
        }
        Ok(v)
    }
    /// Outputs of a successful conversion.
    pub fn done(outs: Vec<Wrapped>) -> Result<Converted> {
        Ok(Converted::Done(outs))
    }
    /// Decline this input pattern.
    pub fn unhandled(reason: impl Into<String>) -> Result<Converted> {
        Ok(Converted::Unhandled(reason.into()))
    }
}

/// Tile a loop-invariant value to `[n] + shape`.
pub fn tile(g: &mut Graph, info: &LoopInfo, v: ValueId) -> Result<ValueId> {
    let t = g.value_type(v)?.clone();
    if let (Some(n), Some(dims)) = (info.n_static, t.shape.as_fixed()) {
        let e = g.expand_dims(v, 0)?;
        let mut shape = vec![n];
        shape.extend(dims);
        return g.broadcast_to(e, &shape);
    }
    // n copies of row 0 of `[1] + shape`: a gather keeps every per-iteration dim as it is
    // (a tiled `[?, K]` index keeps its static depth K, which a scatter needs)
    let e = g.expand_dims(v, 0)?;
    let rows = g.zeros_like(info.index)?;
    g.gather(e, rows, 0)
}

/// `[a, b, rest...] -> [a*b, rest...]`, static when `rest` is fixed.
/// `[a, b, rest...] -> [a*b, rest...]` (public for converters).
pub fn flatten_first_two(g: &mut Graph, v: ValueId) -> Result<ValueId> {
    merge_first_two(g, v)
}

pub(crate) fn merge_first_two(g: &mut Graph, v: ValueId) -> Result<ValueId> {
    let t = g.value_type(v)?.clone();
    if t.rank() < 2 {
        return Err(Error::shape("flatten_first_two", format!("needs rank >= 2, got {t}")));
    }
    let rest = Shape::from_dims(t.shape.dims()[2..].iter().cloned());
    if let Some(r) = rest.as_fixed() {
        let mut s = vec![-1i64];
        s.extend(r.iter().map(|&d| d as i64));
        // With a zero-sized rest, -1 is ambiguous: use the fixed leading dims if known.
        if r.contains(&0)
            && let (Some(a), Some(b)) = (t.shape.dim(0).value(), t.shape.dim(1).value())
        {
            s[0] = a
                .checked_mul(b)
                .and_then(|n| i64::try_from(n).ok())
                .ok_or_else(|| Error::shape("flatten_first_two", format!("the first two dims of {t} overflow")))?;
        }
        return g.reshape(v, &s);
    }
    let shp = g.shape_of(v)?;
    let m1 = g.constant(Tensor::vec1(&[-1i64]));
    let tail = g.slice(shp, &[2], &[-1])?;
    let new = g.concat(&[m1, tail], 0)?;
    g.reshape_dyn(v, new)
}

/// `[n*m, rest...] -> [n, m, rest...]` for the loop's n.
pub(crate) fn split_first(g: &mut Graph, info: &LoopInfo, v: ValueId, m: Option<usize>) -> Result<ValueId> {
    let t = g.value_type(v)?.clone();
    if t.rank() < 1 {
        return Err(Error::shape("unflatten_first", format!("needs rank >= 1, got {t}")));
    }
    let rest = Shape::from_dims(t.shape.dims()[1..].iter().cloned());
    if let (Some(m), Some(r)) = (m, rest.as_fixed()) {
        let lead = match info.n_static {
            Some(n) => n as i64,
            None if m > 0 && !r.contains(&0) => -1,
            None => return split_dynamic(g, info, v, Some(m)),
        };
        let mut s = vec![lead, m as i64];
        s.extend(r.iter().map(|&d| d as i64));
        return g.reshape(v, &s);
    }
    if let (Some(n), Some(r)) = (info.n_static, rest.as_fixed())
        && n > 0
        && !r.contains(&0)
    {
        let mut s = vec![n as i64, -1];
        s.extend(r.iter().map(|&d| d as i64));
        return g.reshape(v, &s);
    }
    split_dynamic(g, info, v, m)
}

fn split_dynamic(g: &mut Graph, info: &LoopInfo, v: ValueId, m: Option<usize>) -> Result<ValueId> {
    let n1 = g.reshape(info.n, &[1])?;
    let m1 = g.constant(Tensor::vec1(&[m.map_or(-1, |m| m as i64)]));
    let shp = g.shape_of(v)?;
    let tail = g.slice(shp, &[1], &[-1])?;
    let new = g.concat(&[n1, m1, tail], 0)?;
    g.reshape_dyn(v, new)
}

/// A stacked `[n] + t.shape` type for the loop.
pub(crate) fn stacked_type(info: &LoopInfo, t: &TensorType) -> TensorType {
    TensorType { dtype: t.dtype, shape: t.shape.prepend(info.dim()) }
}

/// An i64 scalar constant.
pub(crate) fn i64_scalar(g: &mut Graph, v: i64) -> ValueId {
    g.constant(Tensor::scalar(v))
}
