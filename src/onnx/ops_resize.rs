//! ONNX `Resize` (versions 11 to 19) and `Upsample` (7 and 9; nearest with integer scales,
//! each element repeated, as ONNX's reference; other modes are refused): nearest, linear and cubic interpolation, every
//! `coordinate_transformation_mode`, `exclude_outside`, `antialias`, `axes`,
//! `keep_aspect_ratio_policy` and `tf_crop_and_resize` extrapolation.
//!
//! Why a composition and no new kind: resizing is separable, so each resized axis is one
//! linear map from `in` to `out` positions whose weights depend only on the static sizes and
//! attributes. They are computed here once, at import: a nearest resize is a `gather` of the
//! picked source index per output position (exact, any dtype), a linear / cubic one a
//! contraction with a constant `[in, out]` weight matrix (a `matmul`, so the VJP and the
//! `pfor` converter are matmul's). Axes are resized one after another in the order ONNX's
//! reference does, and `tf_crop_and_resize`'s out-of-range positions are replaced by the
//! extrapolation value after their axis (a `select` with a constant mask), as the reference
//! does. Invariants: weights follow ONNX's reference formulas (computed in f64, cast to the
//! input's float dtype); linear / cubic need a float input; scales or sizes must be
//! constants.

use super::convert::NodeCx;
use super::ops_shape::{fixed_shape, norm_axis};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::Tensor;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["Resize", "Upsample"];

/// Converts `n` if it is a `Resize`.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(if n.op() == "Upsample" { upsample(g, n) } else { resize(g, n) }.map(|v| vec![v]))
}

/// The attributes that shape one axis's weights.
struct Attrs {
    mode: String,
    coord: String,
    nearest: String,
    cubic_a: f64,
    exclude_outside: bool,
    antialias: bool,
}

fn resize(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    if n.opset < 11 {
        return Err(n.unsupported("version 10 of the op (opset < 11)"));
    }
    let dims = fixed_shape(g, n, x, "Resize")?;
    let r = dims.len();
    let a = Attrs {
        mode: n.attr_choice("mode", &["nearest", "linear", "cubic"])?,
        coord: n.attr_choice(
            "coordinate_transformation_mode",
            &[
                "half_pixel",
                "align_corners",
                "asymmetric",
                "pytorch_half_pixel",
                "tf_crop_and_resize",
                "half_pixel_symmetric",
            ],
        )?,
        nearest: n.attr_choice("nearest_mode", &["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])?,
        cubic_a: n.attr_f("cubic_coeff_a", -0.75),
        exclude_outside: n.attr_i("exclude_outside", 0) != 0,
        antialias: n.attr_i("antialias", 0) != 0,
    };
    let extrapolation = n.attr_f("extrapolation_value", 0.0);
    let policy = n.attr_choice("keep_aspect_ratio_policy", &["stretch", "not_larger", "not_smaller"])?;
    if a.antialias && a.mode == "nearest" {
        return Err(n.invalid("antialias with mode nearest"));
    }
    let axes: Vec<usize> = match n.attr_ints("axes") {
        Some(v) => v.iter().map(|&ax| norm_axis(n, ax, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    let roi = n.const_input(g, 1)?.map(|t| t.to_f64_vec()).filter(|v| !v.is_empty());
    let scales = n.const_input(g, 2)?.map(|t| t.to_f64_vec()).filter(|v| !v.is_empty());
    let sizes = n.const_ints(g, 3)?.filter(|v| !v.is_empty());
    let k = axes.len();
    // per listed axis: (scale, output size, roi start, roi end)
    let mut plan: Vec<(f64, usize, f64, f64)> = Vec::with_capacity(k);
    match (scales, sizes) {
        (Some(s), None) => {
            if s.len() != k {
                return Err(n.invalid(format!("{} scales for {k} axes", s.len())));
            }
            for (i, &ax) in axes.iter().enumerate() {
                plan.push((s[i], (s[i] * dims[ax] as f64) as usize, 0.0, 1.0));
            }
        }
        (None, Some(sz)) => {
            if sz.len() != k {
                return Err(n.invalid(format!("{} sizes for {k} axes", sz.len())));
            }
            let mut sc: Vec<f64> = axes.iter().zip(&sz).map(|(&ax, &o)| o as f64 / dims[ax] as f64).collect();
            let mut out: Vec<usize> = sz.iter().map(|&o| o.max(0) as usize).collect();
            if policy != "stretch" {
                let pick = if policy == "not_larger" { f64::min } else { f64::max };
                let s = sc.iter().copied().reduce(pick).unwrap_or(1.0);
                sc = vec![s; k];
                out = axes.iter().map(|&ax| (s * dims[ax] as f64 + 0.5) as usize).collect();
            }
            for i in 0..k {
                plan.push((sc[i], out[i], 0.0, 1.0));
            }
        }
        _ => return Err(n.invalid("exactly one of scales and sizes must be given")),
    }
    if a.coord == "tf_crop_and_resize" {
        let roi = roi.ok_or_else(|| n.invalid("tf_crop_and_resize without roi"))?;
        // roi lists starts then ends, over the listed axes (or every axis)
        let (starts, ends) = roi.split_at(roi.len() / 2);
        if starts.len() != k && starts.len() != r {
            return Err(n.invalid(format!("roi of {} values for {k} axes", roi.len())));
        }
        for (i, &ax) in axes.iter().enumerate() {
            let j = if starts.len() == k { i } else { ax };
            plan[i].2 = starts[j];
            plan[i].3 = ends[j];
        }
    }
    let mut y = x;
    let mut cur = dims.clone();
    for (i, &ax) in axes.iter().enumerate() {
        let (scale, out, r0, r1) = plan[i];
        let crop = a.coord == "tf_crop_and_resize";
        if (scale - 1.0).abs() < 1e-9 && out == cur[ax] && (!crop || (r0.abs() < 1e-9 && (r1 - 1.0).abs() < 1e-9)) {
            continue;
        }
        let (w, outside) = weights(&a, cur[ax], out, scale, (r0, r1));
        y = apply_axis(g, n, y, &cur, ax, &a, &w, out)?;
        cur[ax] = out;
        if outside.iter().any(|&o| o) {
            let mut mshape = vec![1usize; r];
            mshape[ax] = out;
            let m = g.constant(Tensor::from_vec(&mshape, outside)?);
            let e = g.scalar_like(y, extrapolation)?;
            y = g.select(m, e, y)?;
        }
    }
    if y == x { g.identity(x) } else { Ok(y) }
}

/// `Upsample`: every element repeated `scale` times along each axis (integer scales).
fn upsample(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    let dims = fixed_shape(g, n, x, "Upsample")?;
    let mode = n.attr_choice("mode", &["nearest", "linear", "bilinear"])?;
    let scales: Vec<f64> = if n.opset < 9 {
        n.attr("scales").map(|a| a.floats.iter().map(|&f| f64::from(f)).collect()).unwrap_or_default()
    } else {
        n.const_input(g, 1)?.map(|t| t.to_f64_vec()).unwrap_or_default()
    };
    if scales.len() != dims.len() {
        return Err(n.invalid(format!("{} scales for input {dims:?}", scales.len())));
    }
    if mode != "nearest" || scales.iter().any(|&s| s.fract() != 0.0 || s < 1.0) {
        return Err(n.unsupported(format!("mode {mode} with scales {scales:?} (nearest with integer scales)")));
    }
    let mut y = x;
    for (ax, (&s, &d)) in scales.iter().zip(&dims).enumerate() {
        if s == 1.0 {
            continue;
        }
        let idx: Vec<i64> = (0..d * s as usize).map(|o| (o / s as usize) as i64).collect();
        let iv = g.constant(Tensor::vec1(&idx));
        y = g.gather(y, iv, ax as i64)?;
    }
    if y == x { g.identity(x) } else { Ok(y) }
}

/// Applies the `[out, in]` weights `w` (row-major) along axis `ax` of `y` (shape `cur`).
#[allow(clippy::too_many_arguments)]
fn apply_axis(
    g: &mut Graph,
    n: &NodeCx,
    y: ValueId,
    cur: &[usize],
    ax: usize,
    a: &Attrs,
    w: &[f64],
    out: usize,
) -> Result<ValueId> {
    let inw = cur[ax];
    if a.mode == "nearest" {
        // each row holds a single 1: gather the picked source positions
        let idx: Vec<i64> = (0..out).map(|o| (0..inw).find(|&i| w[o * inw + i] != 0.0).unwrap_or(0) as i64).collect();
        let iv = g.constant(Tensor::vec1(&idx));
        return g.gather(y, iv, ax as i64);
    }
    let dt = g.dtype(y)?;
    if !dt.is_float() {
        return Err(n.unsupported(format!("mode {} on a {dt:?} input (float only)", a.mode)));
    }
    // move the axis last, contract with the [in, out] matrix, move it back
    let r = cur.len();
    let perm: Vec<usize> = (0..r).filter(|&i| i != ax).chain([ax]).collect();
    let yt = g.transpose(y, &perm)?;
    let lead: usize = cur.iter().enumerate().filter(|&(i, _)| i != ax).map(|(_, &d)| d).product();
    let flat = g.reshape(yt, &[lead as i64, inw as i64])?;
    let mt: Vec<f64> = (0..inw * out).map(|p| w[(p % out) * inw + p / out]).collect();
    let m = g.constant(Tensor::from_vec(&[inw, out], mt)?.cast(dt));
    let z = g.matmul(flat, m)?;
    let mut shape: Vec<i64> = perm[..r - 1].iter().map(|&i| cur[i] as i64).collect();
    shape.push(out as i64);
    let z = g.reshape(z, &shape)?;
    let mut inv = vec![0usize; r];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    g.transpose(z, &inv)
}

/// The source coordinate of output position `o` (ONNX's reference formulas).
fn source_coord(a: &Attrs, o: f64, inw: usize, outw: usize, scale: f64, roi: (f64, f64)) -> f64 {
    let inf = inw as f64;
    let out_f = scale * inf;
    match a.coord.as_str() {
        "align_corners" => {
            if out_f == 1.0 {
                0.0
            } else {
                o * (inf - 1.0) / (out_f - 1.0)
            }
        }
        "asymmetric" => o / scale,
        "tf_crop_and_resize" => {
            let x = if out_f == 1.0 {
                (roi.1 - roi.0) * (inf - 1.0) / 2.0
            } else {
                o * (roi.1 - roi.0) * (inf - 1.0) / (out_f - 1.0)
            };
            x + roi.0 * (inf - 1.0)
        }
        "pytorch_half_pixel" => {
            if out_f == 1.0 {
                -0.5
            } else {
                (o + 0.5) / scale - 0.5
            }
        }
        "half_pixel_symmetric" => {
            let adjustment = outw as f64 / out_f;
            let offset = inf / 2.0 * (1.0 - adjustment);
            offset + (o + 0.5) / scale - 0.5
        }
        _ => (o + 0.5) / scale - 0.5,
    }
}

/// The interpolation coefficients for fractional offset `ratio`.
fn coeffs(a: &Attrs, ratio: f64, scale: f64) -> Vec<f64> {
    let cubic = |x: f64, aa: f64| {
        let x = x.abs();
        if x <= 1.0 {
            (aa + 2.0) * x * x * x - (aa + 3.0) * x * x + 1.0
        } else if x < 2.0 {
            aa * x * x * x - 5.0 * aa * x * x + 8.0 * aa * x - 4.0 * aa
        } else {
            0.0
        }
    };
    let normalize = |c: Vec<f64>| {
        let s: f64 = c.iter().sum();
        c.into_iter().map(|v| v / s).collect()
    };
    match a.mode.as_str() {
        "nearest" => {
            if ratio.fract() == 0.0 {
                return vec![0.0, 1.0];
            }
            let up = match a.nearest.as_str() {
                "round_prefer_floor" => ratio > 0.5,
                "round_prefer_ceil" => ratio >= 0.5,
                "floor" => false,
                _ => true,
            };
            vec![f64::from(u8::from(!up)), f64::from(u8::from(up))]
        }
        "linear" if a.antialias => {
            let s = scale.min(1.0);
            let start = (-1.0 / s).floor() as i64 + 1;
            let footprint = 2 - 2 * start;
            normalize(
                (start..start + footprint).map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0)).collect(),
            )
        }
        "linear" => vec![1.0 - ratio, ratio],
        _ if a.antialias => {
            let s = scale.min(1.0);
            let start = (-2.0 / s).floor() as i64 + 1;
            let end = 2 - start;
            normalize((start..end).map(|i| cubic(s * (i as f64 - ratio), a.cubic_a)).collect())
        }
        _ => [ratio + 1.0, ratio, 1.0 - ratio, 2.0 - ratio].iter().map(|&d| cubic(d, a.cubic_a)).collect(),
    }
}

/// The `[out, in]` weights of one axis (row-major) and which output positions lie outside the
/// crop region (`tf_crop_and_resize`).
fn weights(a: &Attrs, inw: usize, outw: usize, scale: f64, roi: (f64, f64)) -> (Vec<f64>, Vec<bool>) {
    let mut w = vec![0.0; outw * inw];
    let mut outside = vec![false; outw];
    for o in 0..outw {
        let x = source_coord(a, o as f64, inw, outw, scale, roi);
        if a.coord == "tf_crop_and_resize" && (x < 0.0 || x > inw as f64 - 1.0) {
            outside[o] = true;
            continue;
        }
        let ratio = if x.fract() == 0.0 { 1.0 } else { x - x.floor() };
        let mut c = coeffs(a, ratio, scale);
        let nc = c.len() as i64;
        let pad = (nc + 1) / 2;
        let xp = x + pad as f64;
        let p = xp.floor() as i64;
        let frac = xp - p as f64;
        let offset = if nc % 2 == 0 {
            if frac == 0.0 { -(nc / 2) } else { -(nc / 2) + 1 }
        } else {
            let base = -((nc - 1) / 2);
            if frac <= 0.5 { base } else { base + 1 }
        };
        let start = p + offset - pad;
        if a.exclude_outside {
            for (j, cj) in c.iter_mut().enumerate() {
                let i = start + j as i64;
                if i < 0 || i >= inw as i64 {
                    *cj = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|v| *v /= s);
        }
        for (j, cj) in c.iter().enumerate() {
            let i = (start + j as i64).clamp(0, inw as i64 - 1) as usize;
            w[o * inw + i] += cj;
        }
    }
    (w, outside)
}
