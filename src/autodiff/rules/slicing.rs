//! Derivative rules of the `slicing` family (`src/ops/slicing.rs`).
//!
//! Every op of the family is linear in its data input (affine for a constant pad), so
//! forward mode applies the same op to the tangent (a constant pad pads tangents with 0;
//! integer inputs — `dynamic_slice` begin, `roll` shift — unchanged), and
//! reverse mode applies the adjoint movement, built only from differentiable graph ops so
//! that gradients can be taken again:
//! - `concat` ↔ `split` (each is the other's adjoint; concat sizes known only at run time
//!   gather each input's `range` of the axis instead of splitting);
//! - `slice` → a zero `pad` (static dims) or a `dynamic_update_slice` into zeros (dynamic
//!   dims); `dynamic_slice` → `dynamic_update_slice` into zeros at the same run-time begin;
//! - `strided_slice` → reshape away new axes / restore shrunk ones, `reverse` the axes with
//!   a negative stride, interleave `stride - 1` zeros (pad + reshape + slice), then one
//!   zero `pad` to the input shape (no scatter needed);
//! - `pad`: constant → the `slice` of the interior; reflect/symmetric → the interior plus
//!   the mirrored border slices reversed and added back where they were copied from;
//! - `reverse` is its own adjoint; `roll` by `shift` has adjoint `roll` by `-shift`.
//!
//! Integer inputs (begin offsets, shifts) never get a cotangent. Rules that need static
//! dims (`pad` reflect/symmetric, `strided_slice`) return a clear
//! error naming the op when a dim they need is dynamic, never a wrong answer.

use super::linear_jvp;
use crate::autodiff::util::{dim_size, range_along};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Error;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::slicing::{AxisSelect, PadMode, StridedSliceSpec};
use crate::ops::{Linearity, Op, SlicingKind, SlicingOp};
use crate::tensor::Tensor;

/// Cotangents of the inputs.
pub fn vjp(op: &SlicingOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    let mut out = vec![None; n_in];
    match op {
        SlicingOp::Concat { axis } => {
            let dy = cx.dy(0)?;
            let rank = cx.g.shape(dy)?.rank();
            let ax = norm(*axis, rank);
            let sizes: Option<Vec<usize>> =
                cx.inputs.iter().map(|&x| cx.g.shape(x).map(|s| s.dim(ax).value())).collect::<Result<_>>()?;
            if let Some(sizes) = sizes {
                let parts = if n_in == 1 { vec![dy] } else { cx.g.split(dy, *axis, &sizes)? };
                for (i, p) in parts.into_iter().enumerate() {
                    if cx.need(i) {
                        out[i] = Some(p);
                    }
                }
                return Ok(out);
            }
            // Sizes known at run time only: gather each input's range of the axis.
            let g = &mut *cx.g;
            let mut off = g.constant(Tensor::scalar(0i64));
            for (i, &x) in cx.inputs.iter().enumerate() {
                let len = dim_size(g, x, ax)?;
                if cx.needs.get(i).copied().unwrap_or(false) {
                    out[i] = Some(range_along(g, dy, ax, off, len)?);
                }
                off = g.add(off, len)?;
            }
        }
        SlicingOp::Split { axis, .. } => {
            if !cx.need(0) {
                return Ok(out);
            }
            let parts: Vec<ValueId> = (0..cx.outputs.len()).map(|i| cx.dy(i)).collect::<Result<_>>()?;
            out[0] = Some(if parts.len() == 1 { parts[0] } else { cx.g.concat(&parts, *axis)? });
        }
        SlicingOp::Slice { begin, .. } => {
            if !cx.need(0) {
                return Ok(out);
            }
            let (x, dy) = (cx.x(0), cx.dy(0)?);
            let g = &mut *cx.g;
            let (sx, sd) = (g.shape(x)?, g.shape(dy)?);
            out[0] = Some(match (sx.as_fixed(), sd.as_fixed()) {
                (Some(dx), Some(dd)) => {
                    let pads: Vec<(usize, usize)> =
                        (0..dx.len()).map(|a| (begin[a] as usize, dx[a] - begin[a] as usize - dd[a])).collect();
                    g.pad(dy, &pads, PadMode::Constant(0.0))?
                }
                _ => {
                    let z = g.zeros_like(x)?;
                    let start = g.constant(Tensor::vec1(begin));
                    g.dynamic_update_slice(z, dy, start)?
                }
            });
        }
        SlicingOp::DynamicSlice { .. } => {
            if !cx.need(0) {
                return Ok(out);
            }
            let (x, begin, dy) = (cx.x(0), cx.x(1), cx.dy(0)?);
            let z = cx.g.zeros_like(x)?;
            out[0] = Some(cx.g.dynamic_update_slice(z, dy, begin)?);
        }
        SlicingOp::StridedSlice { .. } => {
            if !cx.need(0) {
                return Ok(out);
            }
            let (x, dy) = (cx.x(0), cx.dy(0)?);
            out[0] = Some(strided_slice_adjoint(cx, op, x, dy)?);
        }
        SlicingOp::Pad { paddings, mode } => {
            if !cx.need(0) {
                return Ok(out);
            }
            let (x, dy) = (cx.x(0), cx.dy(0)?);
            out[0] = Some(pad_adjoint(cx, x, dy, paddings, *mode)?);
        }
        SlicingOp::Reverse { axes } => {
            if cx.need(0) {
                let dy = cx.dy(0)?;
                out[0] = Some(cx.g.reverse(dy, axes)?);
            }
        }
        SlicingOp::Roll { axes } => {
            if cx.need(0) {
                let (shift, dy) = (cx.x(1), cx.dy(0)?);
                let back = cx.g.neg(shift)?;
                out[0] = Some(cx.g.roll(dy, back, axes)?);
            }
        }
    }
    Ok(out)
}

/// Tangents of the outputs: the op applied to the tangents ([`linear_jvp`], from the kinds'
/// declared linearity); `pad`'s constant is not part of the tangent: tangents pad with
/// zeros.
pub fn jvp(op: &SlicingOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let (op, linearity) = match op {
        // `pad` (any mode) is linear in its data once its constant is zero
        SlicingOp::Pad { paddings, mode: PadMode::Constant(_) } => {
            (SlicingOp::Pad { paddings: paddings.clone(), mode: PadMode::Constant(0.0) }, Linearity::LinearIn(&[0]))
        }
        SlicingOp::Pad { .. } => (op.clone(), Linearity::LinearIn(&[0])),
        _ => (op.clone(), op.kind().linearity()),
    };
    linear_jvp(&Op::Slicing(op), linearity, cx)
}

/// Whether derivatives flow through this kind (all slicing ops are linear in their data).
pub fn differentiable(_k: SlicingKind) -> bool {
    true
}

fn norm(axis: i64, rank: usize) -> usize {
    if axis < 0 { (axis + rank as i64).max(0) as usize } else { axis as usize }
}

/// `v[start .. start + len]` along `axis` (all of every other axis).
fn slice_axis(g: &mut Graph, v: ValueId, axis: usize, start: usize, len: usize) -> Result<ValueId> {
    let rank = g.shape(v)?.rank();
    let mut begin = vec![0i64; rank];
    let mut size = vec![-1i64; rank];
    begin[axis] = start as i64;
    size[axis] = len as i64;
    g.slice(v, &begin, &size)
}

/// Zero-pad `v` by `(lo, hi)` along `axis`.
fn pad_axis(g: &mut Graph, v: ValueId, axis: usize, lo: usize, hi: usize) -> Result<ValueId> {
    if (lo, hi) == (0, 0) {
        return Ok(v);
    }
    let rank = g.shape(v)?.rank();
    let mut pads = vec![(0, 0); rank];
    pads[axis] = (lo, hi);
    g.pad(v, &pads, PadMode::Constant(0.0))
}

/// The adjoint of `pad`: the interior, plus (mirror modes) the border slices folded back
/// onto the elements they were copied from. Axes are independent linear maps, so they are
/// undone one at a time in any order.
fn pad_adjoint(
    cx: &mut VjpCtx<'_>,
    x: ValueId,
    dy: ValueId,
    paddings: &[(usize, usize)],
    mode: PadMode,
) -> Result<ValueId> {
    let sx = cx.g.shape(x)?;
    if let PadMode::Constant(_) = mode {
        let begin: Vec<i64> = paddings.iter().map(|p| p.0 as i64).collect();
        if let Some(dims) = sx.as_fixed() {
            let size: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            return cx.g.slice(dy, &begin, &size);
        }
        // Dynamic dims: a strided slice `lo .. -hi` per axis works on any run-time shape.
        let end: Vec<i64> = paddings.iter().map(|p| -(p.1 as i64)).collect();
        let end_mask = paddings.iter().enumerate().filter(|(_, p)| p.1 == 0).fold(0u64, |m, (i, _)| m | 1 << i);
        let spec = StridedSliceSpec::new(&begin, &end, &vec![1; begin.len()]).with_end_mask(end_mask);
        return cx.g.strided_slice(dy, &spec);
    }
    let skip = usize::from(mode == PadMode::Reflect);
    let mut d = dy;
    for (ax, &(lo, hi)) in paddings.iter().enumerate() {
        if (lo, hi) == (0, 0) {
            continue;
        }
        let n = sx.dim(ax).value().ok_or_else(|| cx.unsupported("reflect/symmetric pad gradient needs static dims"))?;
        let g = &mut *cx.g;
        let mut acc = slice_axis(g, d, ax, lo, n)?;
        if lo > 0 {
            let head = slice_axis(g, d, ax, 0, lo)?;
            let head = g.reverse(head, &[ax as i64])?;
            let head = pad_axis(g, head, ax, skip, n - skip - lo)?;
            acc = g.add(acc, head)?;
        }
        if hi > 0 {
            let tail = slice_axis(g, d, ax, lo + n, hi)?;
            let tail = g.reverse(tail, &[ax as i64])?;
            let tail = pad_axis(g, tail, ax, n - hi - skip, skip)?;
            acc = g.add(acc, tail)?;
        }
        d = acc;
    }
    Ok(d)
}

/// The adjoint of `strided_slice` for static shapes: undo new/shrink axes with a reshape,
/// then per axis reverse (negative stride) and interleave zeros (stride > 1), then one zero
/// pad to the input shape.
fn strided_slice_adjoint(cx: &mut VjpCtx<'_>, op: &SlicingOp, x: ValueId, dy: ValueId) -> Result<ValueId> {
    let sx = cx.g.shape(x)?;
    let spec = op.strided_spec().unwrap_or_default();
    let plan = spec.resolve(sx.dims())?;
    let Some(dims) = sx.as_fixed() else {
        return Err(cx.unsupported("strided_slice gradient needs a static input shape"));
    };
    let g = &mut *cx.g;
    // The selected block: one axis per input axis (an index keeps a dim of 1).
    let mut sel = Vec::with_capacity(dims.len());
    for a in &plan.axes {
        sel.push(match a {
            AxisSelect::Range { len, .. } => *len,
            AxisSelect::Index(_) => 1,
            AxisSelect::Dynamic { .. } => return Err(cx.unsupported("strided_slice gradient needs static dims")),
        });
    }
    if sel.contains(&0) {
        return g.zeros_like(x);
    }
    let shape: Vec<i64> = sel.iter().map(|&n| n as i64).collect();
    let mut d = g.reshape(dy, &shape)?;
    let mut pads = Vec::with_capacity(dims.len());
    for (ax, a) in plan.axes.iter().enumerate() {
        let (first, span) = match *a {
            AxisSelect::Index(i) => (i, 1),
            AxisSelect::Range { start, len, step } => {
                let s = step.unsigned_abs() as usize;
                let first = if step < 0 {
                    d = g.reverse(d, &[ax as i64])?;
                    start - (len - 1) * s
                } else {
                    start
                };
                if s > 1 && len > 1 {
                    // [.., len, ..] -> [.., len, s, ..] (zeros after each) -> [.., len * s, ..]
                    let e = g.expand_dims(d, ax as i64 + 1)?;
                    let e = pad_axis(g, e, ax + 1, 0, s - 1)?;
                    let cur = g.shape(d)?.as_fixed().ok_or_else(|| cx_err("strided_slice"))?;
                    let mut flat: Vec<i64> = cur.iter().map(|&n| n as i64).collect();
                    flat[ax] = (len * s) as i64;
                    let r = g.reshape(e, &flat)?;
                    d = slice_axis(g, r, ax, 0, (len - 1) * s + 1)?;
                }
                (first, (len - 1) * s + 1)
            }
            AxisSelect::Dynamic { .. } => return Err(cx_err("strided_slice")),
        };
        pads.push((first, dims[ax] - first - span));
    }
    g.pad(d, &pads, PadMode::Constant(0.0))
}

/// The error for a dim that became dynamic where the rule needs it static.
fn cx_err(op: &str) -> Error {
    Error::unsupported(op, "gradient needs static dims")
}
