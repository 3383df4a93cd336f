//! Grouped convolutions: `conv2d`, `conv2d_backprop_filter` and `conv2d_backprop_input` where
//! BOTH operands vary per iteration (`y_i = conv2d(x_i, w_i)`: per-example filters, the
//! filter gradient of per-example gradients, jacobians w.r.t. filters).
//!
//! All three are a batched im2col GEMM, built from ops that have converters and derivative
//! rules (so the result can be differentiated and vectorized again):
//! - patches: pad the stacked activation once, take one strided slice per filter tap
//!   `(a, b)` and concatenate them along channels: `[n, B, OH, OW, KH*KW*C]`, ordered
//!   `(a, b, c)` like the rows of the filter reshaped to `[KH*KW*C, O]`;
//! - `conv2d`: `[n, B*OH*OW, K] x [n, K, O]` (one `batch_matmul`);
//! - `conv2d_backprop_filter`: `patchesᵀ x dy`, `[n, K, B*OH*OW] x [n, B*OH*OW, O]`;
//! - `conv2d_backprop_input`: `dy x wᵀ` gives the column matrix; col2im places each tap's
//!   slice at stride `s` (zeros interleaved by pad + reshape) and offset `a*d`, sums, and
//!   crops the padding away.
//!
//! Invariant: the per-iteration shapes must be fully static (they give the geometry); the
//! loop length may be dynamic. Otherwise the pattern is declined (`unhandled`).

use crate::ops::conv::{Conv2dParams, Padding};
use crate::ops::slicing::{PadMode, StridedSliceSpec};
use crate::vectorize::{ConvertCtx, Converted, Wrapped};
use crate::{Graph, Result, ValueId};

/// Window geometry along one spatial axis.
#[derive(Clone, Copy)]
struct Axis {
    /// Input size.
    i: usize,
    /// Output size.
    o: usize,
    /// Filter size.
    k: usize,
    /// Stride.
    s: usize,
    /// Dilation.
    d: usize,
    /// Padding before / after.
    before: usize,
    after: usize,
}

impl Axis {
    fn new(i: usize, o: usize, k: usize, s: usize, d: usize, padding: Padding) -> Axis {
        let ke = (k - 1) * d + 1;
        let (before, after) = match padding {
            Padding::Valid => (0, 0),
            Padding::Same => {
                let total = ((o.max(1) - 1) * s + ke).saturating_sub(i);
                (total / 2, total - total / 2)
            }
        };
        Axis { i, o, k, s, d, before, after }
    }
    /// Padded input size.
    fn padded(&self) -> usize {
        self.i + self.before + self.after
    }
    /// Span of one tap's output positions in the padded input: `(o-1)*s + 1`.
    fn span(&self) -> usize {
        (self.o.max(1) - 1) * self.s + 1
    }
}

fn fixed(ctx: &ConvertCtx<'_>, ty: Option<usize>) -> Option<Vec<usize>> {
    match ty {
        Some(k) => ctx.input_type(k).shape.as_fixed(),
        None => ctx.output_type(0).shape.as_fixed(),
    }
}

/// `[n] + dims` for a stacked value with static per-iteration `dims`.
fn to_stacked(ctx: &mut ConvertCtx<'_>, v: ValueId, dims: &[usize]) -> Result<Option<ValueId>> {
    let lead = match ctx.loop_info().n_static {
        Some(n) => n as i64,
        None if dims.iter().product::<usize>() > 0 => -1,
        None => return Ok(None),
    };
    let mut s = vec![lead];
    s.extend(dims.iter().map(|&d| d as i64));
    Ok(Some(ctx.graph().reshape(v, &s)?))
}

/// The patches `[n, B, OH, OW, KH*KW*C]` of a stacked `x [n, B, H, W, C]`.
fn patches(g: &mut Graph, x: ValueId, ay: Axis, ax: Axis) -> Result<ValueId> {
    let xp =
        g.pad(x, &[(0, 0), (0, 0), (ay.before, ay.after), (ax.before, ax.after), (0, 0)], PadMode::Constant(0.0))?;
    let mut taps = Vec::with_capacity(ay.k * ax.k);
    for a in 0..ay.k {
        for b in 0..ax.k {
            let (y0, x0) = ((a * ay.d) as i64, (b * ax.d) as i64);
            let spec = StridedSliceSpec {
                begin_mask: 0b10011,
                end_mask: 0b10011,
                ..StridedSliceSpec::new(
                    &[0, 0, y0, x0, 0],
                    &[0, 0, y0 + ay.span() as i64, x0 + ax.span() as i64, 0],
                    &[1, 1, ay.s as i64, ax.s as i64, 1],
                )
            };
            taps.push(g.strided_slice(xp, &spec)?);
        }
    }
    if taps.len() == 1 { Ok(taps[0]) } else { g.concat(&taps, -1) }
}

/// Interleave `s - 1` zeros after each element of axis `axis` (of a rank-`rank` value with
/// that axis of size `len`), keeping `(len-1)*s + 1` elements.
fn dilate(g: &mut Graph, v: ValueId, axis: usize, rank: usize, dims: &[usize], s: usize) -> Result<ValueId> {
    if s == 1 {
        return Ok(v);
    }
    let e = g.expand_dims(v, axis as i64 + 1)?;
    let mut pads = vec![(0, 0); rank + 1];
    pads[axis + 1] = (0, s - 1);
    let p = g.pad(e, &pads, PadMode::Constant(0.0))?;
    let mut shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    shape[axis] *= s as i64;
    shape[0] = -1;
    let r = g.reshape(p, &shape)?;
    let mut size = vec![-1i64; rank];
    size[axis] = ((dims[axis].max(1) - 1) * s + 1) as i64;
    g.slice(r, &vec![0; rank], &size)
}

fn geometry(x: &[usize], f_hw: [usize; 2], out: &[usize], p: Conv2dParams) -> (Axis, Axis) {
    (
        Axis::new(x[1], out[1], f_hw[0], p.strides[0], p.dilations[0], p.padding),
        Axis::new(x[2], out[2], f_hw[1], p.strides[1], p.dilations[1], p.padding),
    )
}

/// `conv2d` with a stacked activation `[n,B,H,W,C]` and a stacked filter `[n,KH,KW,C,O]`.
pub(super) fn conv2d(ctx: &mut ConvertCtx<'_>, params: Conv2dParams) -> Result<Converted> {
    let (Some(xd), Some(fd), Some(od)) = (fixed(ctx, Some(0)), fixed(ctx, Some(1)), fixed(ctx, None)) else {
        return ConvertCtx::unhandled("grouped conv2d with dynamic per-iteration dims");
    };
    let (ay, ax) = geometry(&xd, [fd[0], fd[1]], &od, params);
    let (b, c, o) = (xd[0], xd[3], fd[3]);
    let kk = ay.k * ax.k * c;
    let (x, f) = (ctx.input(0).value, ctx.input(1).value);
    let p = patches(ctx.graph(), x, ay, ax)?;
    let (Some(p), Some(w)) = (to_stacked(ctx, p, &[b * ay.o * ax.o, kk])?, to_stacked(ctx, f, &[kk, o])?) else {
        return ConvertCtx::unhandled("grouped conv2d with an empty per-iteration shape and a dynamic loop length");
    };
    let y = ctx.graph().batch_matmul(p, w)?;
    match to_stacked(ctx, y, &od)? {
        Some(y) => ConvertCtx::done(vec![Wrapped::stacked(y)]),
        None => ConvertCtx::unhandled("grouped conv2d with an empty output and a dynamic loop length"),
    }
}

/// `conv2d_backprop_filter` with a stacked input `[n,B,H,W,C]` and a stacked `dy [n,B,OH,OW,O]`.
pub(super) fn backprop_filter(ctx: &mut ConvertCtx<'_>, params: Conv2dParams, hw: [usize; 2]) -> Result<Converted> {
    let (Some(xd), Some(dd), Some(fd)) = (fixed(ctx, Some(0)), fixed(ctx, Some(1)), fixed(ctx, None)) else {
        return ConvertCtx::unhandled("grouped conv2d_backprop_filter with dynamic per-iteration dims");
    };
    let (ay, ax) = geometry(&xd, hw, &dd, params);
    let (b, c, o) = (xd[0], xd[3], dd[3]);
    let kk = ay.k * ax.k * c;
    let (x, dy) = (ctx.input(0).value, ctx.input(1).value);
    let p = patches(ctx.graph(), x, ay, ax)?;
    let rows = b * ay.o * ax.o;
    let (Some(p), Some(dy)) = (to_stacked(ctx, p, &[rows, kk])?, to_stacked(ctx, dy, &[rows, o])?) else {
        return ConvertCtx::unhandled("grouped conv2d_backprop_filter with an empty shape and a dynamic loop length");
    };
    let dw = ctx.graph().batch_matmul_t(p, dy, true, false)?;
    match to_stacked(ctx, dw, &fd)? {
        Some(y) => ConvertCtx::done(vec![Wrapped::stacked(y)]),
        None => ConvertCtx::unhandled("grouped conv2d_backprop_filter with an empty filter and a dynamic loop length"),
    }
}

/// `conv2d_backprop_input` with a stacked filter `[n,KH,KW,C,O]` and a stacked `dy [n,B,OH,OW,O]`.
pub(super) fn backprop_input(ctx: &mut ConvertCtx<'_>, params: Conv2dParams) -> Result<Converted> {
    let (Some(fd), Some(dd), Some(xd)) = (fixed(ctx, Some(0)), fixed(ctx, Some(1)), fixed(ctx, None)) else {
        return ConvertCtx::unhandled("grouped conv2d_backprop_input with dynamic per-iteration dims");
    };
    let (ay, ax) = geometry(&xd, [fd[0], fd[1]], &dd, params);
    let (b, c, o) = (xd[0], xd[3], dd[3]);
    let kk = ay.k * ax.k * c;
    let rows = b * ay.o * ax.o;
    let (f, dy) = (ctx.input(0).value, ctx.input(1).value);
    let (Some(w), Some(d)) = (to_stacked(ctx, f, &[kk, o])?, to_stacked(ctx, dy, &[rows, o])?) else {
        return ConvertCtx::unhandled("grouped conv2d_backprop_input with an empty shape and a dynamic loop length");
    };
    if rows * kk == 0 {
        return ConvertCtx::unhandled("grouped conv2d_backprop_input with an empty shape");
    }
    let g = ctx.graph();
    let cols = g.batch_matmul_t(d, w, false, true)?; // [n, rows, K]
    let cols = g.reshape(cols, &[-1, b as i64, ay.o as i64, ax.o as i64, kk as i64])?;
    let mut acc: Option<ValueId> = None;
    for a in 0..ay.k {
        for bb in 0..ax.k {
            let t = (a * ax.k + bb) * c;
            let tap = g.slice(cols, &[0, 0, 0, 0, t as i64], &[-1, -1, -1, -1, c as i64])?; // [n,B,OH,OW,C]
            let tap = dilate(g, tap, 2, 5, &[0, b, ay.o, ax.o, c], ay.s)?;
            let tap = dilate(g, tap, 3, 5, &[0, b, ay.span(), ax.o, c], ax.s)?;
            let (y0, x0) = (a * ay.d, bb * ax.d);
            let placed = g.pad(
                tap,
                &[(0, 0), (0, 0), (y0, ay.padded() - y0 - ay.span()), (x0, ax.padded() - x0 - ax.span()), (0, 0)],
                PadMode::Constant(0.0),
            )?;
            acc = Some(match acc {
                Some(s) => g.add(s, placed)?,
                None => placed,
            });
        }
    }
    let Some(full) = acc else { return ConvertCtx::unhandled("grouped conv2d_backprop_input with an empty filter") };
    let dx = g.slice(full, &[0, 0, ay.before as i64, ax.before as i64, 0], &[-1, -1, ay.i as i64, ax.i as i64, -1])?;
    ConvertCtx::done(vec![Wrapped::stacked(dx)])
}
