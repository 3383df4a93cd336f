//! NHWC forms of NCHW values, so that a chain of convolutions and poolings imported from ONNX
//! (NCHW) does not transpose every activation twice per layer.
//!
//! Our convs and pools take NHWC: `ops_nn` transposes a rank-4 NCHW operand to NHWC and the
//! result back. Between two such layers, models put ops that do not care about the layout:
//! `Relu`, the per-channel affine of `BatchNormalization`, residual `Add` / `Sum`, channel
//! `Concat`, `Dropout`. [`nhwc_of`] finds an NHWC form of an NCHW value by walking back
//! through those ops to the transposes the previous layer made, rebuilding each op on the
//! NHWC operands. The forms are memoized per import ([`LayoutCache`]), so a value that
//! several layers read (a residual block's input) is rebuilt once.
//!
//! Invariants:
//! - `nhwc_of(x) == Some(y)` only when `y` equals `transpose(x, [0, 2, 3, 1])` element for
//!   element; each rule keeps that: `transpose(y, [0, 3, 1, 2])` has the form `y`; an
//!   `identity` or unary op of `a` has the form `op(form(a))`; a binary op (numpy
//!   broadcasting) of rank-4 operands with forms, or of such an operand and a small one (its
//!   value broadcast to rank 4 and permuted the same way, by graph ops: never evaluated at
//!   import, so derivatives w.r.t. it stay exact), has the form `op(forms)` (the
//!   permutation commutes with elementwise ops and with broadcasting between rank-4
//!   operands); `concat` along axis 1 has the form `concat` of the forms along axis 3.
//! - Otherwise `None`, and the caller transposes as before. Only fully static rank-4 types.
//! - A batch norm of a conv's result that nothing else has read ([`conv_result`]) is folded
//!   into the conv's filter and bias ([`fold_batch_norm`]), built as graph ops on the weights;
//!   the old conv is left unread.
//! - The NCHW nodes stay in the graph: those that only convs and pools read become dead and
//!   never run (plans run what their outputs need; `simplify` removes them). A value also read
//!   in NCHW (a residual sum read by the next sum) is then computed in both layouts: one
//!   elementwise pass, where the transpose it replaces was one copy.

use crate::error::Result;
use crate::ir::{Graph, NodeId, ValueId};
use crate::ops::{Conv2dParams, ConvOp, NnOp, Op, ShapeOp, SlicingOp};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// NCHW value → its NHWC form (`None`: it has none), shared by the nodes of one import.
pub(super) type LayoutCache = Rc<RefCell<HashMap<ValueId, Option<ValueId>>>>;

/// NCHW → NHWC.
pub(super) const TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// NHWC → NCHW.
pub(super) const TO_NCHW: [usize; 4] = [0, 3, 1, 2];

/// How far [`nhwc_of`] walks back through layout-free ops from one value (a bound on the
/// recursion; the memo makes each value's walk once).
const MAX_DEPTH: usize = 64;

/// A rank-4 operand without an NHWC form is transposed for a binary op only when it has at
/// most 1/`SMALL` of the op's output elements (an `[N, C, 1, 1]` gate, not an activation).
const SMALL: usize = 8;

/// An NHWC form of the static rank-4 value `x` built without transposing `x`, if the ops it
/// comes from allow one (see the module doc).
pub(super) fn nhwc_of(g: &mut Graph, cache: &LayoutCache, x: ValueId) -> Result<Option<ValueId>> {
    form(g, cache, x, 0)
}

fn form(g: &mut Graph, cache: &LayoutCache, x: ValueId, depth: usize) -> Result<Option<ValueId>> {
    if let Some(&known) = cache.borrow().get(&x) {
        return Ok(known);
    }
    let y = build(g, cache, x, depth)?;
    cache.borrow_mut().insert(x, y);
    Ok(y)
}

/// The static dims of `v` when it has rank 4.
fn rank4(g: &Graph, v: ValueId) -> Result<Option<Vec<usize>>> {
    Ok(g.shape(v)?.as_fixed().filter(|d| d.len() == 4))
}

fn build(g: &mut Graph, cache: &LayoutCache, x: ValueId, depth: usize) -> Result<Option<ValueId>> {
    let Some(dims) = rank4(g, x)? else { return Ok(None) };
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    let out_len: usize = dims.iter().product();
    let node = g.node(x.node)?;
    if !matches!(node.op, Op::Shape(_) | Op::Unary(_) | Op::Binary(_) | Op::Slicing(SlicingOp::Concat { .. })) {
        return Ok(None);
    }
    let (op, inputs) = (node.op.clone(), node.inputs.clone());
    match &op {
        Op::Shape(ShapeOp::Transpose { perm }) if perm[..] == TO_NCHW => Ok(Some(inputs[0])),
        Op::Shape(ShapeOp::Identity) | Op::Unary(_) if inputs.len() == 1 => {
            let Some(a) = form(g, cache, inputs[0], depth + 1)? else { return Ok(None) };
            Ok(Some(g.add_op(op, &[a])?))
        }
        Op::Binary(_) if inputs.len() == 2 => {
            let mut forms = Vec::with_capacity(2);
            for &v in &inputs {
                match operand_form(g, cache, v, out_len, depth)? {
                    Some(f) => forms.push(f),
                    None => return Ok(None),
                }
            }
            Ok(Some(g.add_op(op, &forms)?))
        }
        Op::Slicing(SlicingOp::Concat { axis }) if *axis == 1 || *axis == -3 => {
            let mut forms = Vec::with_capacity(inputs.len());
            for &v in &inputs {
                match form(g, cache, v, depth + 1)? {
                    Some(f) => forms.push(f),
                    None => return Ok(None),
                }
            }
            Ok(Some(g.concat(&forms, 3)?))
        }
        _ => Ok(None),
    }
}

/// The NHWC form of a binary op's operand: a rank-4 value's form; else the operand broadcast
/// to rank 4 (leading unit dims, as numpy does) and permuted by graph ops, when that is cheap:
/// rank below 4 (a batch norm's `[C, 1, 1]` statistics, a scalar), or rank 4 with at most
/// 1/[`SMALL`] of the output's elements. Never evaluated here: the permuted operand keeps its
/// dependence on the values it comes from (derivatives w.r.t. weights given as constants
/// stay exact); plans fold it when it is constant.
fn operand_form(
    g: &mut Graph,
    cache: &LayoutCache,
    v: ValueId,
    out_len: usize,
    depth: usize,
) -> Result<Option<ValueId>> {
    let Some(dims) = g.shape(v)?.as_fixed() else { return Ok(None) };
    if dims.len() == 4
        && let Some(f) = form(g, cache, v, depth + 1)?
    {
        return Ok(Some(f));
    }
    let small = dims.len() < 4 || dims.iter().product::<usize>() * SMALL <= out_len;
    if !small {
        return Ok(None);
    }
    let mut d4 = vec![1i64; 4 - dims.len()];
    d4.extend(dims.iter().map(|&d| d as i64));
    let v4 = if dims.len() < 4 { g.reshape(v, &d4)? } else { v };
    Ok(Some(g.transpose(v4, &TO_NHWC)?))
}

/// An NHWC conv whose NCHW result only a batch norm reads: `transpose(conv2d(xh, f) [+ b])`.
pub(super) struct ConvResult {
    xh: ValueId,
    filter: ValueId,
    bias: Option<ValueId>,
    params: Conv2dParams,
}

/// `x` as [`ConvResult`] when it is the NCHW result of a plain (ungrouped) conv that nothing
/// else has read so far.
pub(super) fn conv_result(g: &Graph, x: ValueId) -> Result<Option<ConvResult>> {
    let sole = |id: NodeId, reader: NodeId| g.consumers(id) == [reader];
    let t = g.node(x.node)?;
    let Op::Shape(ShapeOp::Transpose { perm }) = &t.op else { return Ok(None) };
    if perm[..] != TO_NCHW || !g.consumers(x.node).is_empty() {
        return Ok(None);
    }
    let mut y = t.inputs[0];
    let mut bias = None;
    if let Op::Nn(NnOp::BiasAdd) = g.node(y.node)?.op {
        if !sole(y.node, x.node) {
            return Ok(None);
        }
        let inputs = &g.node(y.node)?.inputs;
        bias = Some(inputs[1]);
        let reader = y.node;
        y = inputs[0];
        if !sole(y.node, reader) {
            return Ok(None);
        }
    } else if !sole(y.node, x.node) {
        return Ok(None);
    }
    let c = g.node(y.node)?;
    let Op::Conv(ConvOp::Conv2D { params }) = &c.op else { return Ok(None) };
    Ok(Some(ConvResult { xh: c.inputs[0], filter: c.inputs[1], bias, params: *params }))
}

/// `batch_norm(conv(x)) = conv(x, f * s) + (b * s + t)` with the per-output-channel scale
/// `s` and shift `t` (`[O]`): the conv that a batch norm follows, rebuilt with the norm folded
/// into its filter and bias (graph ops: plans fold them when the weights are constants, and
/// derivatives w.r.t. the weights stay exact), so the plan runs conv, bias and a following
/// relu as one fused step. Returns the NCHW result.
pub(super) fn fold_batch_norm(g: &mut Graph, c: &ConvResult, s: ValueId, t: ValueId) -> Result<ValueId> {
    let filter = g.mul(c.filter, s)?;
    let bias = match c.bias {
        Some(b) => {
            let bs = g.mul(b, s)?;
            g.add(bs, t)?
        }
        None => t,
    };
    let y = g.conv2d(c.xh, filter, c.params)?;
    let y = g.bias_add(y, bias)?;
    g.transpose(y, &TO_NCHW)
}
