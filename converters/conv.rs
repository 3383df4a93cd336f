//! Converters for convolutions and pooling (paper §3.4).
//!
//! - a stacked activation with an invariant filter folds the loop into the batch axis:
//!   `[n, N, H, W, C] -> [n*N, H, W, C]`, one op, unfolded after;
//! - a stacked filter with an invariant activation folds the loop into the output channels
//!   (`conv2d`, `conv2d_backprop_filter` with a stacked `dy`) or the input channels
//!   (`conv2d_backprop_input`, `conv2d_backprop_filter` with a stacked input);
//! - depthwise convolution folds the loop into channels whatever is stacked (channels are
//!   independent), which also gives the per-example filter gradient of a depthwise layer;
//! - `depthwise_conv2d_backprop_filter` with a loop length of 0 known only at run time is an
//!   error (zero folded channels cannot express the channel multiplier);
//! - `conv2d`, `conv2d_backprop_filter` and `conv2d_backprop_input` with BOTH operands
//!   stacked (a grouped convolution: per-example filter gradients, per-example filters) run
//!   as ONE batched im2col + GEMM over the loop axis: window patches of the stacked
//!   activation (`ops::conv::patches`, `[n, N*OH*OW, KH*KW*C]`) times the stacked operand
//!   in one `batch_matmul` (the input gradient scatters the patch gradients back with
//!   `col2im`). No work is wasted (folding the loop into channels would compute `n` times
//!   too much); it needs fixed per-iteration dims (else the per-op fallback runs);
//! - `depthwise_conv2d_backprop_input` with a stacked filter folds the loop into channels
//!   (the gradient is tiled when invariant).

use crate::ops::conv::patches::{WindowGeom, col2im, patches};
use crate::ops::{ConvKind, ConvOp, Op, OpKind};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry};
use crate::{Graph, Result, ValueId};

/// Per-iteration dims of input `k` if all fixed.
fn dims(ctx: &ConvertCtx<'_>, k: usize) -> Option<Vec<i64>> {
    ctx.input_type(k).shape.as_fixed().map(|d| d.into_iter().map(|x| x as i64).collect())
}

/// Run `op` with every stacked input folded into the batch axis (unstacked inputs tiled when
/// `tile_rest`), then unfold the result.
fn fold_batch(ctx: &mut ConvertCtx<'_>, op: ConvOp, batch_inputs: &[usize], other: &[usize]) -> Result<Converted> {
    let n_batch = ctx.input_type(batch_inputs[0]).shape.dim(0).value();
    let mut ins: Vec<(usize, ValueId)> = Vec::new();
    for &k in batch_inputs {
        let v = ctx.stacked(k)?;
        ins.push((k, ctx.flatten_first_two(v)?));
    }
    for &k in other {
        if ctx.is_stacked(k) {
            return ConvertCtx::unhandled("stacked filter together with a stacked activation");
        }
        ins.push((k, ctx.input(k).value));
    }
    ins.sort_by_key(|(k, _)| *k);
    let vals: Vec<ValueId> = ins.into_iter().map(|(_, v)| v).collect();
    let y = ctx.add(Op::Conv(op), &vals)?;
    let y = match n_batch {
        Some(b) => ctx.unflatten_first_known(y, b)?,
        None => ctx.unflatten_first(y)?,
    };
    Converted::stacked(y)
}

/// `[n, d0, .., dk, ..] -> [d0, .., n*dk, ..]`: move the loop axis next to axis `k` of the
/// per-iteration value (before it) and merge.
fn fold_into_axis(g: &mut Graph, v: ValueId, per_iter: &[i64], k: usize) -> Result<ValueId> {
    let r = per_iter.len();
    let mut perm: Vec<usize> = (1..=k).collect();
    perm.push(0);
    perm.extend(k + 1..=r);
    let t = g.transpose(v, &perm)?;
    let mut shape: Vec<i64> = per_iter[..k].to_vec();
    shape.push(-1);
    shape.extend_from_slice(&per_iter[k + 1..]);
    g.reshape(t, &shape)
}

/// Inverse of [`fold_into_axis`] on an op output: `[d0, .., n*dk, ..] -> [n, d0, .., dk, ..]`.
fn unfold_from_axis(g: &mut Graph, y: ValueId, per_iter_out: &[i64], k: usize) -> Result<ValueId> {
    let r = per_iter_out.len();
    let mut shape: Vec<i64> = per_iter_out[..k].to_vec();
    shape.push(-1);
    shape.extend_from_slice(&per_iter_out[k..]);
    let y = g.reshape(y, &shape)?;
    let mut perm = vec![k];
    perm.extend((0..=r).filter(|&d| d != k));
    g.transpose(y, &perm)
}

fn out_dims(ctx: &ConvertCtx<'_>) -> Option<Vec<i64>> {
    ctx.output_type(0).shape.as_fixed().map(|d| d.into_iter().map(|x| x as i64).collect())
}

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Conv(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a conv op");
    };
    let (s0, s1) = (ctx.is_stacked(0), ctx.is_stacked(1));
    match op {
        ConvOp::Conv2D { .. } if !s1 => fold_batch(ctx, op, &[0], &[1]),
        ConvOp::Conv2D { .. } if !s0 => {
            // stacked filter [n,KH,KW,C,O] -> [KH,KW,C,n*O]
            let (Some(fd), Some(od)) = (dims(ctx, 1), out_dims(ctx)) else {
                return ConvertCtx::unhandled("conv2d with a stacked filter and dynamic dims");
            };
            let (x, f) = (ctx.input(0).value, ctx.input(1).value);
            let g = ctx.graph();
            let f2 = fold_into_axis(g, f, &fd, 3)?;
            let y = g.add_op(Op::Conv(op.clone()), &[x, f2])?;
            Converted::stacked(unfold_from_axis(g, y, &od, 3)?)
        }
        ConvOp::Conv2DBackpropInput { .. } if !s0 => fold_batch(ctx, op, &[1], &[0]),
        ConvOp::Conv2DBackpropInput { .. } if !s1 => {
            // stacked filter [n,KH,KW,C,O] -> [KH,KW,n*C,O]; dx has n*C channels
            let (Some(fd), Some(od)) = (dims(ctx, 0), out_dims(ctx)) else {
                return ConvertCtx::unhandled("conv2d_backprop_input with a stacked filter and dynamic dims");
            };
            let (f, dy) = (ctx.input(0).value, ctx.input(1).value);
            let g = ctx.graph();
            let f2 = fold_into_axis(g, f, &fd, 2)?;
            let y = g.add_op(Op::Conv(op), &[f2, dy])?;
            Converted::stacked(unfold_from_axis(g, y, &od, 3)?)
        }
        ConvOp::Conv2DBackpropFilter { .. } if s0 != s1 => {
            // fold the loop into the channels of the stacked operand
            let (k, axis_out) = if s1 { (1, 3) } else { (0, 2) };
            let (Some(d), Some(od)) = (dims(ctx, k), out_dims(ctx)) else {
                return ConvertCtx::unhandled("conv2d_backprop_filter with dynamic dims");
            };
            let (x, dy) = (ctx.input(0).value, ctx.input(1).value);
            let g = ctx.graph();
            let folded = fold_into_axis(g, if s1 { dy } else { x }, &d, 3)?;
            let ins = if s1 { [x, folded] } else { [folded, dy] };
            let y = g.add_op(Op::Conv(op), &ins)?;
            Converted::stacked(unfold_from_axis(g, y, &od, axis_out)?)
        }
        ConvOp::DepthwiseConv2D { .. } if !s1 => fold_batch(ctx, op, &[0], &[1]),
        ConvOp::DepthwiseConv2D { .. } => {
            // channels are independent: fold the loop into them
            let (Some(fd), Some(od)) = (dims(ctx, 1), out_dims(ctx)) else {
                return ConvertCtx::unhandled("depthwise_conv2d with a stacked filter and dynamic dims");
            };
            let (m, c) = (fd[3], fd[2]);
            let x_st = ctx.is_stacked(0);
            let xd = dims(ctx, 0);
            let (x, f) = (ctx.input(0).value, ctx.input(1).value);
            let g = ctx.graph();
            if x_st {
                let Some(xd) = xd else { return ConvertCtx::unhandled("depthwise_conv2d with dynamic input dims") };
                let x2 = fold_into_axis(g, x, &xd, 3)?; // [N,H,W,n*C]
                let f2 = fold_into_axis(g, f, &fd, 2)?; // [KH,KW,n*C,M]
                let y = g.add_op(Op::Conv(op), &[x2, f2])?; // [N,OH,OW,n*C*M]
                Converted::stacked(unfold_from_axis(g, y, &od, 3)?)
            } else {
                // f [n,KH,KW,C,M] -> [KH,KW,C,n*M]; output channel c*(n*M) + i*M + m
                let f2 = fold_into_axis(g, f, &fd, 3)?;
                let y = g.add_op(Op::Conv(op), &[x, f2])?;
                let (nb, oh, ow) = (od[0], od[1], od[2]);
                let y = g.reshape(y, &[nb, oh, ow, c, -1, m])?; // [N,OH,OW,C,n,M]
                let y = g.transpose(y, &[4, 0, 1, 2, 3, 5])?;
                Converted::stacked(g.reshape(y, &[-1, nb, oh, ow, c * m])?)
            }
        }
        ConvOp::DepthwiseConv2DBackpropInput { .. } if !s0 => fold_batch(ctx, op, &[1], &[0]),
        ConvOp::DepthwiseConv2DBackpropInput { .. } => {
            // channels are independent: filter [n,KH,KW,C,M] -> [KH,KW,n*C,M], dy
            // [n,N,OH,OW,C*M] -> [N,OH,OW,n*C*M] (channel (i*C + c)*M + m), dx [N,H,W,n*C]
            let (Some(fd), Some(dd), Some(od)) = (dims(ctx, 0), dims(ctx, 1), out_dims(ctx)) else {
                return ConvertCtx::unhandled("depthwise_conv2d_backprop_input with dynamic dims");
            };
            let f = ctx.stacked(0)?;
            let dy = ctx.stacked(1)?;
            let g = ctx.graph();
            let f2 = fold_into_axis(g, f, &fd, 2)?;
            let d2 = fold_into_axis(g, dy, &dd, 3)?;
            let y = g.add_op(Op::Conv(op), &[f2, d2])?;
            Converted::stacked(unfold_from_axis(g, y, &od, 3)?)
        }
        ConvOp::Conv2D { .. } | ConvOp::Conv2DBackpropInput { .. } | ConvOp::Conv2DBackpropFilter { .. } => {
            batched_gemm(ctx, &op)
        }
        ConvOp::DepthwiseConv2DBackpropFilter { .. } => {
            // both operands folded into channels (the unstacked one tiled)
            let (Some(xd), Some(dd), Some(od)) = (dims(ctx, 0), dims(ctx, 1), out_dims(ctx)) else {
                return ConvertCtx::unhandled("depthwise_conv2d_backprop_filter with dynamic dims");
            };
            if ctx.loop_info().n_static == Some(0) {
                // zero channels cannot express the multiplier: the result is simply empty
                let t = ctx.output_type(0).clone();
                let mut shape = vec![0];
                shape.extend(od.iter().map(|&d| d as usize));
                return Converted::stacked(ctx.graph().constant(crate::Tensor::zeros(t.dtype, &shape)?));
            }
            let x = ctx.stacked(0)?;
            let dy = ctx.stacked(1)?;
            let g = ctx.graph();
            let x2 = fold_into_axis(g, x, &xd, 3)?;
            let d2 = fold_into_axis(g, dy, &dd, 3)?;
            let y = g.add_op(Op::Conv(op), &[x2, d2])?; // [KH,KW,n*C,M]
            Converted::stacked(unfold_from_axis(g, y, &od, 2)?)
        }
        ConvOp::MaxPool { .. }
        | ConvOp::AvgPool { .. }
        | ConvOp::AvgPoolGrad { .. }
        | ConvOp::ExtractPatches { .. }
        | ConvOp::ExtractPatchesGrad { .. } => fold_batch(ctx, op, &[0], &[]),
        ConvOp::MaxPoolGrad { .. } => fold_batch(ctx, op, &[0, 1], &[]),
    }
}

/// The window geometry of a conv with `params` over an `[.., in_hw, channels]` input.
fn geometry(
    name: &str,
    params: crate::ops::conv::Conv2dParams,
    in_hw: [usize; 2],
    channels: usize,
    filter_hw: [usize; 2],
) -> Result<WindowGeom> {
    WindowGeom::new(name, in_hw, channels, filter_hw, params.strides, params.dilations, params.padding)
}

/// Both operands stacked: one batched im2col + GEMM over the loop axis.
fn batched_gemm(ctx: &mut ConvertCtx<'_>, op: &ConvOp) -> Result<Converted> {
    let name = op.kind().name();
    let (Some(d0), Some(d1), Some(od)) = (dims(ctx, 0), dims(ctx, 1), out_dims(ctx)) else {
        return ConvertCtx::unhandled("both operands stacked with dynamic per-iteration dims");
    };
    let n = ctx.loop_info().n_static.map_or(-1, |v| v as i64);
    let (a, b) = (ctx.stacked(0)?, ctx.stacked(1)?);
    let u = |v: &[i64]| -> Vec<usize> { v.iter().map(|&x| x as usize).collect() };
    match *op {
        ConvOp::Conv2D { params } => {
            // x [n,N,H,W,C] · w [n,KH,KW,C,O] -> [n,N,OH,OW,O]
            let (xd, wd) = (u(&d0), u(&d1));
            let x = ctx.flatten_first_two(a)?;
            let g = ctx.graph();
            let geom = geometry(name, params, [xd[1], xd[2]], xd[3], [wd[0], wd[1]])?;
            let (rows, kc, o) = (od[0] * od[1] * od[2], d1[0] * d1[1] * d1[2], d1[3]);
            let p = patches(g, x, &geom)?;
            let p = g.reshape(p, &[n, rows, kc])?;
            let w = g.reshape(b, &[n, kc, o])?;
            let y = g.batch_matmul(p, w)?;
            Converted::stacked(g.reshape(y, &[n, od[0], od[1], od[2], od[3]])?)
        }
        ConvOp::Conv2DBackpropFilter { params, filter_hw } => {
            // x [n,N,H,W,C], dy [n,N,OH,OW,O] -> Σ_rows patchesᵀ · dy = [n,KH,KW,C,O]
            let (xd, dd) = (u(&d0), u(&d1));
            let x = ctx.flatten_first_two(a)?;
            let g = ctx.graph();
            let geom = geometry(name, params, [xd[1], xd[2]], xd[3], filter_hw)?;
            let (rows, kc, o) = ((dd[0] * dd[1] * dd[2]) as i64, od[0] * od[1] * od[2], od[3]);
            let p = patches(g, x, &geom)?;
            let p = g.reshape(p, &[n, rows, kc])?;
            let dy = g.reshape(b, &[n, rows, o])?;
            let y = g.batch_matmul_t(p, dy, true, false)?;
            Converted::stacked(g.reshape(y, &[n, od[0], od[1], od[2], od[3]])?)
        }
        ConvOp::Conv2DBackpropInput { params, input_hw } => {
            // w [n,KH,KW,C,O], dy [n,N,OH,OW,O] -> col2im(dy · wᵀ) = [n,N,H,W,C]
            let wd = u(&d0);
            let g = ctx.graph();
            let geom = geometry(name, params, input_hw, wd[2], [wd[0], wd[1]])?;
            let (rows, kc, o) = (d1[0] * d1[1] * d1[2], d0[0] * d0[1] * d0[2], d0[3]);
            let w = g.reshape(a, &[n, kc, o])?;
            let dy = g.reshape(b, &[n, rows, o])?;
            let dcol = g.batch_matmul_t(dy, w, false, true)?;
            let dcol = g.reshape(dcol, &[-1, d1[1], d1[2], (wd[0] * wd[1]) as i64, d0[2]])?;
            let dx = col2im(g, dcol, &geom)?;
            Converted::stacked(g.reshape(dx, &[n, od[0], od[1], od[2], od[3]])?)
        }
        _ => ConvertCtx::unhandled("not a plain convolution"),
    }
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in ConvKind::ALL {
        r.register(OpKey::Builtin(OpKind::Conv(*k)), convert);
    }
}
