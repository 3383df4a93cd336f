//! Window patches as GRAPH values: the building blocks that derivative rules and converters
//! use where the fused kernels have no op of their own (the max-pool tangent selection,
//! batched per-example convolutions and their gradients). [`patches`] and [`col2im`] are one
//! `extract_patches` / `extract_patches_grad` kernel each (plus a free reshape);
//! [`taps_depthwise`] and [`max_pool_select`] are built from depthwise convs and
//! elementwise ops so that they can be differentiated again.
//!
//! Layout: `patches(x [M,H,W,C]) -> [M,OH,OW,KH*KW,C]`, tap `ky*KW + kx` (row-major in the
//! window, the order of the filter's `[KH,KW,C,O]` layout and of `max_pool_grad`'s tie rule).
//! Padded positions hold zero; [`valid_taps`] tells them apart. [`col2im`] is the exact
//! adjoint of [`patches`] (scatter-add of every tap back to its input position).
//!
//! Invariants: `H`, `W` and `C` must be fixed (the geometry is decided at build time; a
//! dynamic one is an `Unsupported` error naming the caller); `M` may be dynamic.

use super::{Conv2dParams, Padding, window};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::tensor::{DType, Tensor};

/// Geometry of a window applied to a `[M,H,W,C]` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowGeom {
    /// Input spatial size.
    pub hw: [usize; 2],
    /// Channels.
    pub c: usize,
    /// Window size.
    pub k: [usize; 2],
    /// Strides.
    pub s: [usize; 2],
    /// Dilations.
    pub d: [usize; 2],
    /// Output spatial size.
    pub out: [usize; 2],
    /// Padding before (top, left).
    pub before: [usize; 2],
    /// Padding after (bottom, right), so that every tap of every window is inside.
    pub after: [usize; 2],
    /// The padding mode the geometry was computed for.
    pub padding: Padding,
}

impl WindowGeom {
    /// The geometry of window `k` (stride `s`, dilation `d`, padding `p`) over the fixed
    /// spatial dims and channels of `x [M,H,W,C]`; `op` names the caller in errors.
    pub fn of(
        g: &Graph,
        op: &str,
        x: ValueId,
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        p: Padding,
    ) -> Result<WindowGeom> {
        let shape = g.shape(x)?;
        if shape.rank() != 4 {
            return Err(Error::shape(op, format!("input must have rank 4 (N,H,W,C), got {shape}")));
        }
        let fixed: Option<Vec<usize>> = shape.dims()[1..].iter().map(|d| d.value()).collect();
        let Some(f) = fixed else {
            return Err(Error::unsupported(op, format!("window patches need fixed H, W, C, got {shape}")));
        };
        WindowGeom::new(op, [f[0], f[1]], f[2], k, s, d, p)
    }
    /// The geometry of window `k` over spatial size `hw` with `c` channels.
    pub fn new(
        op: &str,
        hw: [usize; 2],
        c: usize,
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        p: Padding,
    ) -> Result<WindowGeom> {
        if s.contains(&0) || d.contains(&0) {
            return Err(Error::InvalidArgument(format!("{op}: strides {s:?} and dilations {d:?} must be ≥ 1")));
        }
        let ctx = || format!("input spatial size {hw:?}, window {k:?}");
        let mut out = [0; 2];
        let mut before = [0; 2];
        let mut after = [0; 2];
        for a in 0..2 {
            let (o, pb) = window(op, &ctx, a, hw[a], k[a], s[a], d[a], p)?;
            let span = o.saturating_sub(1) * s[a] + (k[a] - 1) * d[a] + 1;
            out[a] = o;
            before[a] = pb;
            after[a] = span.saturating_sub(hw[a] + pb);
        }
        Ok(WindowGeom { hw, c, k, s, d, out, before, after, padding: p })
    }
    /// Number of taps `KH*KW`.
    pub fn taps(&self) -> usize {
        self.k[0] * self.k[1]
    }
    /// The conv params (strides, padding, dilations) of this window.
    pub fn params(&self) -> Conv2dParams {
        Conv2dParams { strides: self.s, padding: self.padding, dilations: self.d }
    }
}

/// `x [M,H,W,C] -> [M,OH,OW,KH*KW,C]`: every window's taps (zero at padded positions).
/// One [`Graph::extract_patches`] kernel, its channel axis split into `[KH*KW, C]`.
pub fn patches(g: &mut Graph, x: ValueId, w: &WindowGeom) -> Result<ValueId> {
    let m = leading(g, x)?;
    let p = g.extract_patches(x, w.k, w.params())?;
    let [oh, ow] = w.out;
    g.reshape(p, &[m, oh as i64, ow as i64, w.taps() as i64, w.c as i64])
}

/// `[1,OH,OW,KH*KW,1]` of `dtype`: 1 where the tap lies inside the input, 0 in the padding.
pub fn valid_taps(w: &WindowGeom, dtype: DType) -> Result<Tensor> {
    let (oh, ow, k) = (w.out[0], w.out[1], w.taps());
    let mut v = Vec::with_capacity(oh * ow * k);
    for oy in 0..oh {
        for ox in 0..ow {
            for ky in 0..w.k[0] {
                for kx in 0..w.k[1] {
                    let iy = (oy * w.s[0] + ky * w.d[0]).checked_sub(w.before[0]).filter(|&i| i < w.hw[0]);
                    let ix = (ox * w.s[1] + kx * w.d[1]).checked_sub(w.before[1]).filter(|&i| i < w.hw[1]);
                    v.push(if iy.is_some() && ix.is_some() { 1.0 } else { 0.0 });
                }
            }
        }
    }
    Ok(Tensor::from_vec(&[1, oh, ow, k, 1], v)?.cast(dtype))
}

/// The adjoint of [`patches`]: `dcol [M,OH,OW,KH*KW,C] -> [M,H,W,C]`, every tap added back
/// at its input position (padding dropped). One [`Graph::extract_patches_grad`] kernel.
pub fn col2im(g: &mut Graph, dcol: ValueId, w: &WindowGeom) -> Result<ValueId> {
    let m = leading(g, dcol)?;
    let [oh, ow] = w.out;
    let kc = w.taps().checked_mul(w.c).ok_or_else(|| Error::shape("col2im", "window taps x channels overflow"))?;
    let d = g.reshape(dcol, &[m, oh as i64, ow as i64, kc as i64])?;
    g.extract_patches_grad(d, w.k, w.params(), w.hw)
}

/// The leading dim of `v` for a reshape target: its size when fixed, else `-1` (inferred).
fn leading(g: &Graph, v: ValueId) -> Result<i64> {
    let s = g.shape(v)?;
    Ok(s.dims().first().and_then(|d| d.value()).map_or(-1, |m| m as i64))
}

/// `x [M,H,W,C] -> [M,OH,OW,C,KH*KW]`: the window taps as a depthwise convolution with
/// one-hot filters. Costs `KH*KW` times more than [`patches`], but is differentiable with the
/// conv family's own rules (so derivatives built on it can be differentiated again).
pub fn taps_depthwise(g: &mut Graph, x: ValueId, w: &WindowGeom) -> Result<ValueId> {
    let (k, c) = (w.taps(), w.c);
    let mut f = vec![0.0; k * c * k];
    for t in 0..k {
        for ch in 0..c {
            f[(t * c + ch) * k + t] = 1.0;
        }
    }
    let dt = g.dtype(x)?;
    let f = g.constant(Tensor::from_vec(&[w.k[0], w.k[1], c, k], f)?.cast(dt));
    let y = g.depthwise_conv2d(x, f, w.params())?;
    g.reshape(y, &[-1, w.out[0] as i64, w.out[1] as i64, c as i64, k as i64])
}

/// For every window of a max pool over `x` (forward output `y`), `v` at the FIRST maximal
/// tap (row-major in the window, padding excluded): `v [M,H,W,C] -> [M,OH,OW,C]`. This is
/// the adjoint of `max_pool_grad` in its gradient argument and the tangent of `max_pool`.
/// A window whose maximum is NaN selects nothing (NaN never compares equal). Built on
/// [`taps_depthwise`], so it is itself differentiable.
pub fn max_pool_select(g: &mut Graph, x: ValueId, y: ValueId, v: ValueId, w: &WindowGeom) -> Result<ValueId> {
    let dt = g.dtype(x)?;
    let px = taps_depthwise(g, x, w)?;
    let pv = taps_depthwise(g, v, w)?;
    let yb = g.expand_dims(y, 4)?;
    let eq = g.equal(px, yb)?;
    let m = g.cast(eq, dt)?;
    // valid taps: [1,OH,OW,K,1] -> [1,OH,OW,1,K]
    let valid = valid_taps(w, dt)?;
    let valid = Tensor::from_vec(&[1, w.out[0], w.out[1], 1, w.taps()], valid.to_f64_vec())?.cast(dt);
    let valid = g.constant(valid);
    let m = g.mul(m, valid)?;
    // first maximal tap: no maximal tap before it
    let before = g.cumsum(m, 4, true, false)?;
    let zero = g.scalar_like(before, 0.0)?;
    let none_before = g.equal(before, zero)?;
    let none_before = g.cast(none_before, dt)?;
    let first = g.mul(m, none_before)?;
    let sel = g.mul(first, pv)?;
    g.reduce_sum(sel, Some(&[4]), false)
}
