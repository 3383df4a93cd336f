//! ONNX channel / spatial operators composed from ours: `LRN`, `GlobalLpPool`, `LpPool` and
//! `CenterCropPad`.
//!
//! Invariants: `LRN` sums the squares of a window of `size` channels (`floor((size - 1) / 2)`
//! before, `ceil((size - 1) / 2)` after, zeros outside) as a channel pad and a sum of shifted
//! slices, then divides by `(bias + alpha / size * sum) ^ beta`; `GlobalLpPool` is
//! `(sum |x|^p)^(1/p)` over the spatial axes (kept as unit dims), `LpPool` the same over
//! each window (an average pool of `|x|^p` times the window size; padded windows are refused:
//! ONNX's reference scales the average over the unpadded elements, its text sums, and we do
//! not pick one silently); `CenterCropPad` crops or
//! zero-pads each listed axis to its target size, centred with the extra element at the end
//! (ONNX's reference: start at `floor(diff / 2)`). Target shapes must be constants.

use super::convert::NodeCx;
use super::ops_nn::{as_2d, from_nhwc, to_nhwc, window};
use super::ops_shape::{fixed_shape, norm_axis};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::Padding;
use crate::ops::slicing::PadMode;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["CenterCropPad", "GlobalLpPool", "LRN", "LpPool"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_one(g, n).map(|v| vec![v]))
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    let d = fixed_shape(g, n, x, n.op())?;
    let r = d.len();
    match n.op() {
        "LRN" => {
            let size = n.attr_i("size", 0);
            if size < 1 || r < 2 {
                return Err(n.invalid(format!("size {size} for input {d:?}")));
            }
            let size = size as usize;
            let (alpha, beta, bias) = (n.attr_f("alpha", 1e-4), n.attr_f("beta", 0.75), n.attr_f("bias", 1.0));
            let sq = g.mul(x, x)?;
            let mut p = vec![(0, 0); r];
            p[1] = ((size - 1) / 2, (size - 1).div_ceil(2));
            let padded = g.pad(sq, &p, PadMode::Constant(0.0))?;
            let mut sum = None;
            for k in 0..size {
                let mut begin = vec![0i64; r];
                let mut len = vec![-1i64; r];
                begin[1] = k as i64;
                len[1] = d[1] as i64;
                let s = g.slice(padded, &begin, &len)?;
                sum = Some(match sum {
                    Some(acc) => g.add(acc, s)?,
                    None => s,
                });
            }
            let sum = sum.ok_or_else(|| n.invalid("size 0"))?;
            let scaled = g.mul_scalar(sum, alpha / size as f64)?;
            let base = g.add_scalar(scaled, bias)?;
            let e = g.scalar_like(base, beta)?;
            let den = g.pow(base, e)?;
            g.div(x, den)
        }
        "LpPool" => lp_pool(g, n, x),
        "GlobalLpPool" => {
            let p = n.attr_i("p", 2);
            if p < 1 {
                return Err(n.invalid(format!("p = {p}")));
            }
            let axes: Vec<i64> = (2..r as i64).collect();
            let a = g.abs(x)?;
            if p == 1 {
                return g.reduce_sum(a, Some(&axes), true);
            }
            let e = g.scalar_like(a, p as f64)?;
            let ap = g.pow(a, e)?;
            let s = g.reduce_sum(ap, Some(&axes), true)?;
            let inv = g.scalar_like(s, 1.0 / p as f64)?;
            g.pow(s, inv)
        }
        _ => {
            // CenterCropPad
            let target = n.const_ints(g, 1)?.ok_or_else(|| n.invalid("shape is missing"))?;
            let axes: Vec<usize> = match n.attr_ints("axes") {
                Some(a) => a.iter().map(|&v| norm_axis(n, v, r)).collect::<Result<_>>()?,
                None => (0..r).collect(),
            };
            if target.len() != axes.len() || target.iter().any(|&t| t < 0) {
                return Err(n.invalid(format!("shape {target:?} for axes {axes:?}")));
            }
            let mut begin = vec![0i64; r];
            let mut len: Vec<i64> = d.iter().map(|&v| v as i64).collect();
            let mut pads = vec![(0usize, 0usize); r];
            for (&a, &t) in axes.iter().zip(&target) {
                let (dim, t) = (d[a] as i64, t);
                if t < dim {
                    begin[a] = (dim - t) / 2;
                    len[a] = t;
                } else if t > dim {
                    let lo = ((t - dim) / 2) as usize;
                    pads[a] = (lo, (t - dim) as usize - lo);
                }
            }
            let y = g.slice(x, &begin, &len)?;
            if pads.iter().all(|&p| p == (0, 0)) { Ok(y) } else { g.pad(y, &pads, PadMode::Constant(0.0)) }
        }
    }
}

fn lp_pool(g: &mut Graph, n: &NodeCx, x: ValueId) -> Result<ValueId> {
    let d = fixed_shape(g, n, x, "LpPool")?;
    let p = n.attr_i("p", 2);
    if p < 1 {
        return Err(n.invalid(format!("p = {p}")));
    }
    let kernel = super::ops_nn::kernel_shape(n, &d)?;
    let w = window(n, &d[2..], kernel, n.attr_i("ceil_mode", 0) != 0)?;
    if w.pads.iter().any(|&q| q != (0, 0)) {
        return Err(n.unsupported(format!("padded windows (pads {:?})", w.pads)));
    }
    if w.dilations.iter().any(|&v| v != 1) {
        return Err(n.unsupported(format!("attribute dilations = {:?} (only 1)", w.dilations)));
    }
    let a = g.abs(x)?;
    let e = g.scalar_like(a, p as f64)?;
    let ap = if p == 1 { a } else { g.pow(a, e)? };
    let (xh, spatial) = to_nhwc(g, n, ap)?;
    let (k, s) = (as_2d(&w.kernel, 1), as_2d(&w.strides, 1));
    let avg = g.avg_pool(xh, k, s, Padding::Valid)?;
    let sum = g.mul_scalar(avg, (k[0] * k[1]) as f64)?;
    let y = if p == 1 {
        sum
    } else {
        let inv = g.scalar_like(sum, 1.0 / p as f64)?;
        g.pow(sum, inv)?
    };
    from_nhwc(g, y, spatial)
}
