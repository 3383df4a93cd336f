//! ONNX `AffineGrid` (opset 20), the sampling grid of a batch of affine transforms, as one
//! matrix product of the transforms with a constant grid of homogeneous coordinates; and
//! `GridSample` (opsets 16 to 22), which samples an image at such a grid.
//!
//! `theta` is `[N, 2, 3]` (2-D) or `[N, 3, 4]` (3-D); `size` (a constant: bind it if it is a
//! graph input) is `[N, C, H, W]` or `[N, C, D, H, W]`; the output is `[N, H, W, 2]` or
//! `[N, D, H, W, 3]`, each point `theta @ (x, y[, z], 1)` with `x` along W, `y` along H, `z`
//! along D, in [-1, 1]: pixel centres (`-1 + (2 i + 1) / n`), or the corners with
//! `align_corners` (`-1 + 2 i / (n - 1)`).
//!
//! `GridSample`: `X` `[N, C, *S]` (2 or 3 spatial dims), `grid` `[N, *O, k]` with coordinates
//! `(x, y[, z])` in [-1, 1] (x along the last spatial dim); the output is `[N, C, *O]`. Each
//! coordinate is mapped to pixel units (ONNX's denormalization for `align_corners`), rounded
//! half to even for `nearest`, then, when outside the borders (`[0, L - 1]` with
//! `align_corners`, else `[-0.5, L - 0.5]`), clamped into `[0, L - 1]` (`border`) or reflected
//! at the borders (`reflection`); the pixels read are `floor(u) + {0, 1}` (`linear`, weights
//! `1 - t`, `t`), `floor(u) + {-1, 0, 1, 2}` (`cubic`, Keys' coefficients, A = -0.75) or
//! `trunc(u)` (`nearest`), each per dim, and a pixel index outside `[0, L - 1]` reads 0
//! (`zeros`), the clamped index (`border`) or the reflected one (`reflection`), as ONNX's
//! reference does.
//!
//! Invariants: static shapes; the grid constant is built in f64 and cast to `theta`'s dtype;
//! the product is a 2-D matmul between reshapes and a transpose, so derivatives w.r.t.
//! `theta` and pfor come from those ops. `GridSample` is a sum over the pixels read of a
//! weight times one `gather` of `X` flattened to `[N prod(S), C]` (indices computed in the
//! float dtype, exact, then cast), so derivatives w.r.t. `X` come from the gather and
//! w.r.t. `grid` from the weights (rounding and flooring have zero derivative).

use super::convert::NodeCx;
use super::ops_shape::fixed_shape;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::{DType, Tensor};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["AffineGrid", "GridSample"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    let r = if n.op() == "AffineGrid" { affine_grid(g, n) } else { grid_sample(g, n) };
    Some(r.map(|v| vec![v]))
}

/// The `i`-th of `len` normalized coordinates.
fn coord(i: usize, len: usize, align_corners: bool) -> f64 {
    match (align_corners, len) {
        (true, 1) => -1.0,
        (true, _) => -1.0 + 2.0 * i as f64 / (len - 1) as f64,
        (false, _) => -1.0 + (2 * i + 1) as f64 / len as f64,
    }
}

fn affine_grid(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let theta = n.input(0)?;
    let td = fixed_shape(g, n, theta, "AffineGrid")?;
    let size = n.const_ints(g, 1)?.ok_or_else(|| n.invalid("size is missing"))?;
    let align = n.attr_i("align_corners", 0) != 0;
    let k = size.len().saturating_sub(2); // spatial rank
    if !(k == 2 || k == 3) || td.len() != 3 || td[1] != k || td[2] != k + 1 || size[0] != td[0] as i64 {
        return Err(n.invalid(format!(
            "theta {td:?} and size {size:?} (expected [N, k, k + 1] and [N, C, k sizes], k = 2 or 3)"
        )));
    }
    if size[2..].iter().any(|&d| d < 1) {
        return Err(n.invalid(format!("size {size:?} has an empty spatial dim")));
    }
    let spatial: Vec<usize> = size[2..].iter().map(|&d| d as usize).collect();
    let p: usize = spatial.iter().product();
    // rows (x, y[, z], 1) over the points in row-major order of (D,) H, W; stored transposed:
    // [k + 1, P]
    let mut base = vec![0.0; (k + 1) * p];
    for q in 0..p {
        let mut rest = q;
        let mut idx = vec![0; k];
        for d in (0..k).rev() {
            idx[d] = rest % spatial[d];
            rest /= spatial[d];
        }
        // coordinate c (x = 0, y = 1, z = 2) runs along spatial dim k - 1 - c
        for c in 0..k {
            let d = k - 1 - c;
            base[c * p + q] = coord(idx[d], spatial[d], align);
        }
        base[k * p + q] = 1.0;
    }
    let dt = g.dtype(theta)?;
    let bm = g.constant(Tensor::from_vec(&[k + 1, p], base)?.cast(dt));
    let n_batch = td[0] as i64;
    let t2 = g.reshape(theta, &[n_batch * k as i64, k as i64 + 1])?;
    let y = g.matmul(t2, bm)?; // [N k, P]
    let y = g.reshape(y, &[n_batch, k as i64, p as i64])?;
    let y = g.transpose(y, &[0, 2, 1])?;
    let mut out = vec![n_batch];
    out.extend(spatial.iter().map(|&d| d as i64));
    out.push(k as i64);
    g.reshape(y, &out)
}

/// How `GridSample` reads outside the image.
#[derive(Clone, Copy, PartialEq)]
enum Pad {
    Zeros,
    Border,
    Reflection,
}

/// `u` reflected into `[lo, hi]` (ONNX's `_gs_reflect`): by the distance past the near border,
/// folded an even or odd number of times.
fn reflect(g: &mut Graph, u: ValueId, lo: f64, hi: f64) -> Result<ValueId> {
    let range = hi - lo;
    // past hi: d = u - hi; past lo: d = lo - u
    let fold = |g: &mut Graph, d: ValueId, near: f64, far: f64| -> Result<ValueId> {
        let q = g.mul_scalar(d, 1.0 / range)?;
        let k = g.floor(q)?;
        let kr = g.mul_scalar(k, range)?;
        let r = g.sub(d, kr)?;
        let odd_c = g.scalar_like(k, 2.0)?;
        let odd = g.floor_mod(k, odd_c)?;
        let odd_c = g.scalar_like(k, 0.5)?;
        let odd = g.greater(odd, odd_c)?;
        // even: near border moved inwards by r; odd: far border moved back by r
        let sign = if near > far { -1.0 } else { 1.0 };
        let rs = g.mul_scalar(r, sign)?;
        let even_v = g.add_scalar(rs, near)?;
        let rn = g.mul_scalar(r, -sign)?;
        let odd_v = g.add_scalar(rn, far)?;
        g.select(odd, odd_v, even_v)
    };
    let above = g.add_scalar(u, -hi)?;
    let below = g.mul_scalar(u, -1.0)?;
    let below = g.add_scalar(below, lo)?;
    let from_hi = fold(g, above, hi, lo)?;
    let from_lo = fold(g, below, lo, hi)?;
    let is_hi_c = g.scalar_like(u, hi)?;
    let is_hi = g.greater(u, is_hi_c)?;
    let is_lo_c = g.scalar_like(u, lo)?;
    let is_lo = g.less(u, is_lo_c)?;
    let v = g.select(is_hi, from_hi, u)?;
    g.select(is_lo, from_lo, v)
}

/// `u` clamped to `[lo, hi]`.
fn clamp(g: &mut Graph, u: ValueId, lo: f64, hi: f64) -> Result<ValueId> {
    let v_c = g.scalar_like(u, lo)?;
    let v = g.maximum(u, v_c)?;
    let hi = g.scalar_like(u, hi)?;
    g.minimum(v, hi)
}

/// The pixel index read for integer-valued `i` along a dim of `len` (with borders `lo`,
/// `hi`), and its validity mask (1 / 0; `zeros` only).
fn pixel(g: &mut Graph, i: ValueId, len: usize, pad: Pad, lo: f64, hi: f64) -> Result<(ValueId, Option<ValueId>)> {
    let last = len as f64 - 1.0;
    match pad {
        Pad::Border => Ok((clamp(g, i, 0.0, last)?, None)),
        Pad::Reflection => {
            let r = reflect(g, i, lo, hi)?;
            // int(): toward zero; then in range (a reflected index is within the borders)
            let t = trunc(g, r)?;
            Ok((clamp(g, t, 0.0, last)?, None))
        }
        Pad::Zeros => {
            let ok_lo_c = g.scalar_like(i, 0.0)?;
            let ok_lo = g.greater_equal(i, ok_lo_c)?;
            let ok_hi_c = g.scalar_like(i, last)?;
            let ok_hi = g.less_equal(i, ok_hi_c)?;
            let ok = g.logical_and(ok_lo, ok_hi)?;
            let dt = g.dtype(i)?;
            let mask = g.cast(ok, dt)?;
            Ok((clamp(g, i, 0.0, last)?, Some(mask)))
        }
    }
}

/// Rounds toward zero.
fn trunc(g: &mut Graph, u: ValueId) -> Result<ValueId> {
    let a = g.abs(u)?;
    let f = g.floor(a)?;
    let s = g.sign(u)?;
    g.mul(s, f)
}

/// Keys' cubic convolution weights (A = -0.75) of the 4 pixels around a point at offset `t`
/// in [0, 1) past the second.
fn cubic_weights(g: &mut Graph, t: ValueId) -> Result<[ValueId; 4]> {
    const A: f64 = -0.75;
    // far: ((A d - 5A) d + 8A) d - 4A at d = t + 1, 2 - t; near: ((A + 2) d - (A + 3)) d^2 + 1
    let far = |g: &mut Graph, d: ValueId| -> Result<ValueId> {
        let p = g.mul_scalar(d, A)?;
        let p = g.add_scalar(p, -5.0 * A)?;
        let p = g.mul(p, d)?;
        let p = g.add_scalar(p, 8.0 * A)?;
        let p = g.mul(p, d)?;
        g.add_scalar(p, -4.0 * A)
    };
    let near = |g: &mut Graph, d: ValueId| -> Result<ValueId> {
        let p = g.mul_scalar(d, A + 2.0)?;
        let p = g.add_scalar(p, -(A + 3.0))?;
        let d2 = g.mul(d, d)?;
        let p = g.mul(p, d2)?;
        g.add_scalar(p, 1.0)
    };
    let t1 = g.add_scalar(t, 1.0)?;
    let mt = g.mul_scalar(t, -1.0)?;
    let one_t = g.add_scalar(mt, 1.0)?;
    let two_t = g.add_scalar(mt, 2.0)?;
    Ok([far(g, t1)?, near(g, t)?, near(g, one_t)?, far(g, two_t)?])
}

fn grid_sample(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let (x, grid) = (n.input(0)?, n.input(1)?);
    let xd = fixed_shape(g, n, x, "GridSample")?;
    let gd = fixed_shape(g, n, grid, "GridSample")?;
    let k = xd.len().saturating_sub(2);
    if !(k == 2 || k == 3) || gd.len() != k + 2 || gd[0] != xd[0] || gd[k + 1] != k {
        return Err(
            n.invalid(format!("X {xd:?} and grid {gd:?} (expected [N, C, k sizes] and [N, k sizes, k], k = 2 or 3)"))
        );
    }
    // opset 16-19 spell the modes bilinear / bicubic
    let mode = match n.attr_choice("mode", &["linear", "bilinear", "nearest", "cubic", "bicubic"])?.as_str() {
        "linear" | "bilinear" => "linear",
        "cubic" | "bicubic" => "cubic",
        _ => "nearest",
    };
    let pad = match n.attr_choice("padding_mode", &["zeros", "border", "reflection"])?.as_str() {
        "border" => Pad::Border,
        "reflection" => Pad::Reflection,
        _ => Pad::Zeros,
    };
    let align = n.attr_i("align_corners", 0) != 0;
    let (batch, chans) = (xd[0], xd[1]);
    let spatial = &xd[2..];
    let out: &[usize] = &gd[1..k + 1];
    let p: usize = out.iter().product();
    let m: usize = spatial.iter().product();
    let dt = g.dtype(grid)?; // the indices are computed in the grid's dtype
    let flat_grid = g.reshape(grid, &[batch as i64, p as i64, k as i64])?;
    let coords = g.unstack(flat_grid, -1)?; // k values [N, P]: x, y[, z]
    // per spatial dim d (coordinate k - 1 - d): the candidate pixels and their weights
    let mut per_dim: Vec<Vec<(ValueId, Option<ValueId>)>> = Vec::with_capacity(k);
    for (d, &len) in spatial.iter().enumerate() {
        let lf = len as f64;
        let c = coords[k - 1 - d];
        // to pixel units
        let u = if align {
            let u = g.add_scalar(c, 1.0)?;
            g.mul_scalar(u, (lf - 1.0) / 2.0)?
        } else {
            let u = g.add_scalar(c, 1.0)?;
            let u = g.mul_scalar(u, lf / 2.0)?;
            g.add_scalar(u, -0.5)?
        };
        let u = if mode == "nearest" { g.round(u)? } else { u };
        let (lo, hi) = if align { (0.0, lf - 1.0) } else { (-0.5, lf - 0.5) };
        let u = match pad {
            Pad::Zeros => u,
            Pad::Border => {
                let outside = {
                    let a_c = g.scalar_like(u, lo)?;
                    let a = g.less(u, a_c)?;
                    let b_c = g.scalar_like(u, hi)?;
                    let b = g.greater(u, b_c)?;
                    g.logical_or(a, b)?
                };
                let cl = clamp(g, u, 0.0, lf - 1.0)?;
                g.select(outside, cl, u)?
            }
            Pad::Reflection => reflect(g, u, lo, hi)?,
        };
        let mut taps = Vec::new();
        if mode == "nearest" {
            let i = trunc(g, u)?;
            let (idx, mask) = pixel(g, i, len, pad, lo, hi)?;
            taps.push((idx, mask));
        } else {
            let f = g.floor(u)?;
            let t = g.sub(u, f)?;
            let (offsets, weights): (Vec<f64>, Vec<ValueId>) = if mode == "linear" {
                let mt = g.mul_scalar(t, -1.0)?;
                (vec![0.0, 1.0], vec![g.add_scalar(mt, 1.0)?, t])
            } else {
                (vec![-1.0, 0.0, 1.0, 2.0], cubic_weights(g, t)?.to_vec())
            };
            for (off, w) in offsets.into_iter().zip(weights) {
                let i = g.add_scalar(f, off)?;
                let (idx, mask) = pixel(g, i, len, pad, lo, hi)?;
                let w = match mask {
                    Some(mk) => g.mul(w, mk)?,
                    None => w,
                };
                taps.push((idx, Some(w)));
            }
        }
        per_dim.push(taps);
    }
    // X as [N prod(S), C]; a point of example b reads row b prod(S) + the flat pixel index
    let xt = g.reshape(x, &[batch as i64, chans as i64, m as i64])?;
    let xt = g.transpose(xt, &[0, 2, 1])?;
    let xt = g.reshape(xt, &[(batch * m) as i64, chans as i64])?;
    let base: Vec<f64> = (0..batch).flat_map(|b| std::iter::repeat_n((b * m) as f64, p)).collect();
    let base = g.constant(Tensor::from_vec(&[batch, p], base)?.cast(dt));
    let strides: Vec<usize> = (0..k).map(|d| spatial[d + 1..].iter().product()).collect();
    let mut acc: Option<ValueId> = None;
    let counts: Vec<usize> = per_dim.iter().map(Vec::len).collect();
    let combos: usize = counts.iter().product();
    for c in 0..combos {
        let (mut rest, mut flat, mut weight) = (c, base, None::<ValueId>);
        for d in (0..k).rev() {
            let (idx, w) = per_dim[d][rest % counts[d]];
            rest /= counts[d];
            let s = g.mul_scalar(idx, strides[d] as f64)?;
            flat = g.add(flat, s)?;
            weight = match (weight, w) {
                (Some(a), Some(b)) => Some(g.mul(a, b)?),
                (a, b) => a.or(b),
            };
        }
        let flat = g.cast(flat, DType::I64)?;
        let v = g.gather(xt, flat, 0)?; // [N, P, C]
        let v = match weight {
            Some(w) => {
                let w = g.expand_dims(w, 2)?;
                g.mul(v, w)?
            }
            None => v,
        };
        acc = Some(match acc {
            Some(a) => g.add(a, v)?,
            None => v,
        });
    }
    let y = acc.ok_or_else(|| n.invalid("no pixels to read"))?;
    let y = g.transpose(y, &[0, 2, 1])?;
    let mut shape = vec![batch as i64, chans as i64];
    shape.extend(out.iter().map(|&d| d as i64));
    g.reshape(y, &shape)
}
