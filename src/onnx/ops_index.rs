//! ONNX indexing and layout operators beyond `Gather` / `Slice`: `GatherElements`,
//! `GatherND`, `OneHot`, `Hardmax`, `TopK`, `Trilu`, `EyeLike`, `CumSum`, `CumProd`,
//! `DepthToSpace`, `SpaceToDepth`.
//!
//! Why compositions and no new kinds: `GatherElements` is a `gather_nd` whose coordinate
//! tuples are the index tensor stacked with constant iotas of the other axes (one gather, the
//! same cost as a dedicated kernel, and `gather_nd`'s converter and VJP apply); `Trilu` is a
//! `select` with a constant band mask (exact for inf / NaN entries, unlike a multiply);
//! `Hardmax` is `argmax` + `one_hot`; `TopK` on another axis or for the smallest is a
//! transpose / negation around our last-axis `top_k`; `CumSum` / `CumProd` map onto our
//! kinds. Invariants: index operands may be negative (counted from the end, as ONNX allows):
//! constants are normalized at import, run-time indices by a `select`; shape and count
//! operands (`k`, `depth`, `axis`) must be constants.

use super::convert::{NodeCx, const_value};
use super::ops_scatter::element_coords;
use super::ops_shape::{fixed_shape, norm_axis};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::{DType, Tensor};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &[
    "CumProd",
    "CumSum",
    "DepthToSpace",
    "EyeLike",
    "GatherElements",
    "GatherND",
    "Hardmax",
    "OneHot",
    "SpaceToDepth",
    "TopK",
    "Trilu",
];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(match n.op() {
        "TopK" => top_k(g, n),
        _ => convert_one(g, n).map(|v| vec![v]),
    })
}

/// `idx` with negative entries shifted by `dims` (broadcast against `idx`): constants at
/// import, run-time values by a `select`.
pub(super) fn wrap_negative(g: &mut Graph, idx: ValueId, dims: &Tensor) -> Result<ValueId> {
    let idx = if g.dtype(idx)? == DType::I64 { idx } else { g.cast(idx, DType::I64)? };
    if let Some(t) = const_value(g, idx) {
        let d = dims.to_f64_vec();
        let v: Vec<i64> = t
            .to_f64_vec()
            .iter()
            .enumerate()
            .map(|(k, &i)| if i < 0.0 { (i + d[k % d.len()]) as i64 } else { i as i64 })
            .collect();
        return Ok(g.constant(Tensor::from_vec(t.shape(), v)?));
    }
    let z = g.scalar(DType::I64, 0.0);
    let neg = g.less(idx, z)?;
    let dv = g.constant(dims.clone());
    let shifted = g.add(idx, dv)?;
    g.select(neg, shifted, idx)
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    match n.op() {
        "GatherElements" => gather_elements(g, n, x),
        "GatherND" => {
            let b = n.attr_i("batch_dims", 0).max(0) as usize;
            let xd = fixed_shape(g, n, x, "GatherND")?;
            let idx = n.input(1)?;
            let id = fixed_shape(g, n, idx, "GatherND")?;
            let k = *id.last().ok_or_else(|| n.invalid("indices of rank 0"))?;
            if b + k > xd.len() {
                return Err(n.invalid(format!("indices {id:?} with batch_dims {b} for data {xd:?}")));
            }
            let dims: Vec<i64> = xd[b..b + k].iter().map(|&d| d as i64).collect();
            let idx = wrap_negative(g, idx, &Tensor::vec1(&dims))?;
            g.gather_nd(x, idx, b)
        }
        "OneHot" => {
            let depth = n.const_input(g, 1)?.ok_or_else(|| n.invalid("depth is missing"))?;
            let depth = depth.to_f64_vec().first().copied().unwrap_or(0.0) as i64;
            if depth < 1 {
                return Err(n.invalid(format!("depth {depth}")));
            }
            let values = n.const_input(g, 2)?.ok_or_else(|| n.invalid("values is missing"))?;
            let vv = values.to_f64_vec();
            if vv.len() != 2 {
                return Err(n.invalid(format!("values of {} elements (2: off, on)", vv.len())));
            }
            let idx = if g.dtype(x)?.is_float() {
                // ONNX casts float indices to integers (truncation)
                g.cast(x, DType::I64)?
            } else {
                x
            };
            let idx = wrap_negative(g, idx, &Tensor::vec1(&[depth]))?;
            g.one_hot(idx, depth as usize, n.attr_i("axis", -1), vv[1], vv[0], values.dtype())
        }
        "Hardmax" => {
            let dims = fixed_shape(g, n, x, "Hardmax")?;
            let r = dims.len();
            if n.opset >= 13 {
                let axis = norm_axis(n, n.attr_i("axis", -1), r)?;
                let i = g.argmax(x, axis as i64)?;
                return g.one_hot(i, dims[axis], axis as i64, 1.0, 0.0, g.dtype(x)?);
            }
            // before version 13 the input is coerced to 2-D at `axis`
            let axis = n.attr_i("axis", 1);
            let a = if axis < 0 { axis + r as i64 } else { axis }.clamp(0, r as i64) as usize;
            let lead: usize = dims[..a].iter().product();
            let rest: usize = dims[a..].iter().product();
            let flat = g.reshape(x, &[lead as i64, rest as i64])?;
            let i = g.argmax(flat, 1)?;
            let y = g.one_hot(i, rest, 1, 1.0, 0.0, g.dtype(x)?)?;
            let back: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            g.reshape(y, &back)
        }
        "Trilu" => {
            let dims = fixed_shape(g, n, x, "Trilu")?;
            if dims.len() < 2 {
                return Err(n.invalid(format!("input {dims:?} of rank below 2")));
            }
            let k = n.const_ints(g, 1)?.and_then(|v| v.first().copied()).unwrap_or(0);
            let upper = n.attr_i("upper", 1) != 0;
            let (rows, cols) = (dims[dims.len() - 2], dims[dims.len() - 1]);
            let mask: Vec<bool> = (0..rows * cols)
                .map(|p| {
                    let d = (p % cols) as i64 - (p / cols) as i64;
                    if upper { d >= k } else { d <= k }
                })
                .collect();
            let m = g.constant(Tensor::from_vec(&[rows, cols], mask)?);
            let z = g.scalar_like(x, 0.0)?;
            g.select(m, x, z)
        }
        "EyeLike" => {
            let dims = fixed_shape(g, n, x, "EyeLike")?;
            if dims.len() != 2 {
                return Err(n.invalid(format!("input {dims:?} (rank 2 expected)")));
            }
            let dt = match n.attr("dtype") {
                Some(_) => n.attr_dtype("dtype")?,
                None => g.dtype(x)?,
            };
            let k = n.attr_i("k", 0);
            let v: Vec<f64> = (0..dims[0] * dims[1])
                .map(|p| f64::from(u8::from((p % dims[1]) as i64 - (p / dims[1]) as i64 == k)))
                .collect();
            Ok(g.constant(Tensor::from_vec(&dims, v)?.cast(dt)))
        }
        "CumSum" | "CumProd" => {
            let r = g.shape(x)?.rank();
            let axis = n.const_ints(g, 1)?.and_then(|v| v.first().copied()).ok_or_else(|| n.invalid("axis missing"))?;
            let axis = norm_axis(n, axis, r)? as i64;
            let excl = n.attr_i("exclusive", 0) != 0;
            let rev = n.attr_i("reverse", 0) != 0;
            if n.op() == "CumSum" { g.cumsum(x, axis, excl, rev) } else { g.cumprod(x, axis, excl, rev) }
        }
        _ => depth_space(g, n, x),
    }
}

/// `DepthToSpace` (DCR / CRD) and `SpaceToDepth`: a reshape, a transpose and a reshape.
fn depth_space(g: &mut Graph, n: &NodeCx, x: ValueId) -> Result<ValueId> {
    let d = fixed_shape(g, n, x, n.op())?;
    let b = n.attr_i("blocksize", 0);
    if d.len() != 4 || b < 1 {
        return Err(n.invalid(format!("input {d:?} with blocksize {b} (NCHW and blocksize >= 1 expected)")));
    }
    let (nn, c, h, w) = (d[0] as i64, d[1] as i64, d[2] as i64, d[3] as i64);
    if n.op() == "SpaceToDepth" {
        if h % b != 0 || w % b != 0 {
            return Err(n.invalid(format!("blocksize {b} does not divide {h}x{w}")));
        }
        // SpaceToDepth-28 adds mode (DCR by default, the order of the versions before it)
        let perm =
            if n.attr_choice("mode", &["DCR", "CRD"])? == "DCR" { [0, 3, 5, 1, 2, 4] } else { [0, 1, 3, 5, 2, 4] };
        let y = g.reshape(x, &[nn, c, h / b, b, w / b, b])?;
        let y = g.transpose(y, &perm)?;
        return g.reshape(y, &[nn, c * b * b, h / b, w / b]);
    }
    if c % (b * b) != 0 {
        return Err(n.invalid(format!("blocksize {b} squared does not divide {c} channels")));
    }
    let cc = c / (b * b);
    let y = if n.attr_choice("mode", &["DCR", "CRD"])? == "DCR" {
        let y = g.reshape(x, &[nn, b, b, cc, h, w])?;
        g.transpose(y, &[0, 3, 4, 1, 5, 2])?
    } else {
        let y = g.reshape(x, &[nn, cc, b, b, h, w])?;
        g.transpose(y, &[0, 1, 4, 2, 5, 3])?
    };
    g.reshape(y, &[nn, cc, h * b, w * b])
}

/// `GatherElements`: `out[i...] = x[i... with i[axis] = idx[i...]]` as one `gather_nd`.
fn gather_elements(g: &mut Graph, n: &NodeCx, x: ValueId) -> Result<ValueId> {
    let xd = fixed_shape(g, n, x, "GatherElements")?;
    let idx = n.input(1)?;
    let id = fixed_shape(g, n, idx, "GatherElements")?;
    let r = xd.len();
    if id.len() != r {
        return Err(n.invalid(format!("data {xd:?} and indices {id:?} differ in rank")));
    }
    let axis = norm_axis(n, n.attr_i("axis", 0), r)?;
    let idx = wrap_negative(g, idx, &Tensor::scalar(xd[axis] as i64))?;
    let c = element_coords(g, idx, &id, axis)?;
    g.gather_nd(x, c, 0)
}

fn top_k(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let x = n.input(0)?;
    let r = g.shape(x)?.rank();
    let k = if n.opset < 10 {
        n.attr_i("k", 0)
    } else {
        n.const_ints(g, 1)?.and_then(|v| v.first().copied()).ok_or_else(|| n.invalid("K is missing"))?
    };
    if k < 0 {
        return Err(n.invalid(format!("K = {k}")));
    }
    let axis = norm_axis(n, n.attr_i("axis", -1), r)?;
    let largest = n.attr_i("largest", 1) != 0;
    // sorted = 0 leaves the order unspecified: the sorted order is one
    let _ = n.attr("sorted");
    let last = r - 1;
    let perm: Vec<usize> = (0..r)
        .map(|i| {
            if i == axis {
                last
            } else if i == last {
                axis
            } else {
                i
            }
        })
        .collect();
    let xt = if axis == last { x } else { g.transpose(x, &perm)? };
    let src = if largest { xt } else { g.neg(xt)? };
    let (v, i) = g.top_k(src, k as usize)?;
    let v = if largest { v } else { g.neg(v)? };
    if axis == last {
        return Ok(vec![v, i]);
    }
    Ok(vec![g.transpose(v, &perm)?, g.transpose(i, &perm)?])
}
