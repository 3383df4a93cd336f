//! Converters for slicing, padding and concatenation.
//!
//! Static attributes: axes shift past the loop axis; begin/size/paddings get a full range
//! on the loop axis prepended; strided-slice masks shift left by one bit with the loop axis
//! fully selected. Loop-variant offsets (`dynamic_slice` begin, `roll` shift) become
//! batched gathers: per axis, indices `offset[:, d] + range(size)` gathered with
//! `batch_dims = 1`, which also keeps out-of-range offsets an error, as in the loop.

use crate::ops::{Op, OpKind, SlicingKind, SlicingOp};
use crate::tensor::Tensor;
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, Wrapped, shift_axis as shift};
use crate::{Result, ValueId};

/// Column `d` of a stacked `[n, r]` offsets value, as `[n, 1]`.
fn column(ctx: &mut ConvertCtx<'_>, offsets: ValueId, r: usize, d: usize) -> Result<ValueId> {
    let g = ctx.graph();
    if r == 0 {
        return Err(crate::Error::shape("dynamic_slice", "rank-0 operand"));
    }
    g.slice(offsets, &[0, d as i64], &[-1, 1])
}

fn dynamic_slice_gather(ctx: &mut ConvertCtx<'_>, sizes: &[usize]) -> Result<Converted> {
    let r = sizes.len();
    let begin = ctx.stacked(1)?; // [n, r]
    let mut x = ctx.input(0).value;
    let mut x_stacked = ctx.is_stacked(0);
    for (d, &s) in sizes.iter().enumerate() {
        let col = column(ctx, begin, r, d)?; // [n, 1]
        let g = ctx.graph();
        let iota = g.constant(Tensor::arange(s)?);
        let idx = g.add(col, iota)?; // [n, s]
        x = if x_stacked {
            g.gather_batched(x, idx, d as i64 + 1, 1)?
        } else {
            // invariant x, first axis: the loop axis comes from the indices
            debug_assert_eq!(d, 0);
            g.gather(x, idx, 0)?
        };
        x_stacked = true;
    }
    if r == 0 {
        x = ctx.stacked(0)?;
    }
    Converted::stacked(x)
}

fn roll_gather(ctx: &mut ConvertCtx<'_>, axes: &[i64]) -> Result<Converted> {
    let t = ctx.input_type(0).clone();
    let mut x = ctx.stacked(0)?;
    let shift_w = ctx.input(1);
    let shift_v = ctx.stacked(1)?; // [n] or [n, k]
    let shift_rank = ctx.input_type(1).rank();
    for (j, &a) in axes.iter().enumerate() {
        let axis = crate::ops::norm_axis("roll", a, t.rank())?;
        let Some(dim) = t.shape.dim(axis).value() else {
            return ConvertCtx::unhandled("roll over a dynamic axis with a loop-variant shift");
        };
        let g = ctx.graph();
        let sh =
            if shift_rank == 0 { g.reshape(shift_v, &[-1, 1])? } else { g.slice(shift_v, &[0, j as i64], &[-1, 1])? };
        let iota = g.constant(Tensor::arange(dim)?);
        let d = g.constant(Tensor::scalar(dim as i64));
        let back = g.sub(iota, sh)?; // [n, dim]
        let idx = g.floor_mod(back, d)?;
        x = g.gather_batched(x, idx, axis as i64 + 1, 1)?;
    }
    let _ = shift_w;
    Converted::stacked(x)
}

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Slicing(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a slicing op");
    };
    let new = match op {
        SlicingOp::Concat { axis } => {
            let mut ins = Vec::with_capacity(ctx.num_inputs());
            for k in 0..ctx.num_inputs() {
                ins.push(ctx.stacked(k)?);
            }
            return Converted::stacked(ctx.add(Op::Slicing(SlicingOp::Concat { axis: shift(axis) }), &ins)?);
        }
        SlicingOp::Split { axis, sizes } => {
            let x = ctx.stacked(0)?;
            let outs = ctx.add_multi(Op::Slicing(SlicingOp::Split { axis: shift(axis), sizes }), &[x])?;
            return ConvertCtx::done(outs.into_iter().map(Wrapped::stacked).collect());
        }
        SlicingOp::Slice { begin, size } => {
            let mut b = vec![0];
            b.extend(begin);
            let mut s = vec![-1];
            s.extend(size);
            SlicingOp::Slice { begin: b, size: s }
        }
        SlicingOp::DynamicSlice { sizes } => {
            if ctx.is_stacked(1) {
                return dynamic_slice_gather(ctx, &sizes);
            }
            let Some(n) = ctx.loop_info().n_static else {
                // begin is invariant: slice every row with the same offsets via gathers too
                return dynamic_slice_gather(ctx, &sizes);
            };
            let b = ctx.input(1).value;
            let x = ctx.stacked(0)?;
            let g = ctx.graph();
            let zero = g.constant(Tensor::vec1(&[0i64]));
            let b2 = g.concat(&[zero, b], 0)?;
            let mut s = vec![n];
            s.extend(sizes);
            return Converted::stacked(g.dynamic_slice(x, b2, &s)?);
        }
        SlicingOp::StridedSlice {
            begin,
            end,
            strides,
            begin_mask,
            end_mask,
            ellipsis_mask,
            new_axis_mask,
            shrink_axis_mask,
        } => {
            let pre = |v: Vec<i64>, x: i64| {
                let mut o = vec![x];
                o.extend(v);
                o
            };
            SlicingOp::StridedSlice {
                begin: pre(begin, 0),
                end: pre(end, 0),
                strides: pre(strides, 1),
                begin_mask: (begin_mask << 1) | 1,
                end_mask: (end_mask << 1) | 1,
                ellipsis_mask: ellipsis_mask << 1,
                new_axis_mask: new_axis_mask << 1,
                shrink_axis_mask: shrink_axis_mask << 1,
            }
        }
        SlicingOp::Pad { paddings, mode } => {
            let mut p = vec![(0, 0)];
            p.extend(paddings);
            SlicingOp::Pad { paddings: p, mode }
        }
        SlicingOp::Reverse { axes } => SlicingOp::Reverse { axes: axes.into_iter().map(shift).collect() },
        SlicingOp::Roll { axes } => {
            if ctx.is_stacked(1) {
                return roll_gather(ctx, &axes);
            }
            let s = ctx.input(1).value;
            let x = ctx.stacked(0)?;
            return Converted::stacked(
                ctx.add(Op::Slicing(SlicingOp::Roll { axes: axes.into_iter().map(shift).collect() }), &[x, s])?,
            );
        }
    };
    let x = ctx.stacked(0)?;
    Converted::stacked(ctx.add(Op::Slicing(new), &[x])?)
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in SlicingKind::ALL {
        r.register(OpKey::Builtin(OpKind::Slicing(*k)), convert);
    }
}
