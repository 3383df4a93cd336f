//! ONNX normalization operators: `LayerNormalization` (with its optional `Mean` and
//! `InvStdDev` outputs), `RMSNormalization`, `InstanceNormalization`, `GroupNormalization`
//! (versions 18 and 21), `LpNormalization` and `MeanVarianceNormalization`.
//!
//! Compositions of reductions and elementwise ops (no new kinds): each is a mean, a variance
//! (or mean square) over a set of axes and a broadcasting scale, so the parts' converters and
//! derivatives apply and nothing is approximated. Invariants: the variance is the biased one
//! (`mean((x - mean)^2)`), as ONNX specifies; `stash_type` must be 1 (float): float16 /
//! bfloat16 are computed in f32 as that asks, f32 / f64 in their own precision; scale and bias
//! broadcast as the ONNX definitions say (per normalized shape, per channel or per group).

use super::convert::NodeCx;
use super::ops_shape::{fixed_shape, norm_axis};
use crate::error::Result;
use crate::ir::{Graph, ValueId};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &[
    "GroupNormalization",
    "InstanceNormalization",
    "LayerNormalization",
    "LpNormalization",
    "MeanVarianceNormalization",
    "RMSNormalization",
];

/// Converts `n` if it is a normalization op.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_inner(g, n))
}

/// `(x - mean, 1 / sqrt(var + eps), mean)` over `axes` (kept as unit dims).
fn standardize(g: &mut Graph, x: ValueId, axes: &[i64], eps: f64) -> Result<(ValueId, ValueId, ValueId)> {
    let mean = g.reduce_mean(x, Some(axes), true)?;
    let d = g.sub(x, mean)?;
    let sq = g.mul(d, d)?;
    let var = g.reduce_mean(sq, Some(axes), true)?;
    let v = g.add_scalar(var, eps)?;
    let inv = g.rsqrt(v)?;
    Ok((d, inv, mean))
}

/// Refuses a `stash_type` other than 1 (float).
fn stash(n: &NodeCx) -> Result<()> {
    n.attr_i_only("stash_type", 1)
}

/// `v` (shape `[C]`) reshaped to `[C, 1, ...]` with `trailing` unit dims.
fn per_channel(g: &mut Graph, v: ValueId, trailing: usize) -> Result<ValueId> {
    let mut shape = vec![-1i64];
    shape.extend(std::iter::repeat_n(1, trailing));
    g.reshape(v, &shape)
}

fn convert_inner(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let x = n.input(0)?;
    let r = g.shape(x)?.rank();
    let eps = n.attr_f("epsilon", 1e-5);
    match n.op() {
        "LayerNormalization" | "RMSNormalization" => {
            stash(n)?;
            let axis = norm_axis(n, n.attr_i("axis", -1), r)?;
            let axes: Vec<i64> = (axis as i64..r as i64).collect();
            if n.op() == "RMSNormalization" {
                let sq = g.mul(x, x)?;
                let ms = g.reduce_mean(sq, Some(&axes), true)?;
                let v = g.add_scalar(ms, eps)?;
                let inv = g.rsqrt(v)?;
                let y = g.mul(x, inv)?;
                return Ok(vec![g.mul(y, n.input(1)?)?]);
            }
            let (d, inv, mean) = standardize(g, x, &axes, eps)?;
            let y = g.mul(d, inv)?;
            let mut y = g.mul(y, n.input(1)?)?;
            if let Some(b) = n.opt_input(2) {
                y = g.add(y, b)?;
            }
            Ok(vec![y, mean, inv])
        }
        "InstanceNormalization" => {
            let axes: Vec<i64> = (2..r as i64).collect();
            let (d, inv, _) = standardize(g, x, &axes, eps)?;
            let y = g.mul(d, inv)?;
            let s = per_channel(g, n.input(1)?, r - 2)?;
            let b = per_channel(g, n.input(2)?, r - 2)?;
            let y = g.mul(y, s)?;
            Ok(vec![g.add(y, b)?])
        }
        "GroupNormalization" => {
            stash(n)?;
            let dims = fixed_shape(g, n, x, "GroupNormalization")?;
            let groups = n.attr_i("num_groups", 0);
            let c = dims.get(1).copied().unwrap_or(0);
            if groups < 1 || c % groups as usize != 0 {
                return Err(n.invalid(format!("num_groups {groups} for input {dims:?}")));
            }
            let gs = groups as usize;
            let xg = g.reshape(x, &[dims[0] as i64, groups, -1])?;
            let (d, inv, _) = standardize(g, xg, &[2], eps)?;
            let y = g.mul(d, inv)?;
            let back: Vec<i64> = dims.iter().map(|&v| v as i64).collect();
            let y = g.reshape(y, &back)?;
            // version 18: scale and bias per group; 21: per channel
            let (s, b) = (n.input(1)?, n.input(2)?);
            let (s, b) = if n.opset < 21 {
                let rep = |g: &mut Graph, v: ValueId| -> Result<ValueId> {
                    let v = g.reshape(v, &[groups, 1])?;
                    let v = g.broadcast_to(v, &[gs, c / gs])?;
                    g.reshape(v, &[c as i64])
                };
                (rep(g, s)?, rep(g, b)?)
            } else {
                (s, b)
            };
            let s = per_channel(g, s, r - 2)?;
            let b = per_channel(g, b, r - 2)?;
            let y = g.mul(y, s)?;
            Ok(vec![g.add(y, b)?])
        }
        "LpNormalization" => {
            let axis = norm_axis(n, n.attr_i("axis", -1), r)? as i64;
            let norm = match n.attr_i("p", 2) {
                1 => {
                    let a = g.abs(x)?;
                    g.reduce_sum(a, Some(&[axis]), true)?
                }
                2 => {
                    let sq = g.mul(x, x)?;
                    let s = g.reduce_sum(sq, Some(&[axis]), true)?;
                    g.sqrt(s)?
                }
                p => return Err(n.unsupported(format!("attribute p = {p} (1 or 2)"))),
            };
            // a zero norm gives zeros (ONNX's reference), not 0 / 0
            let z = g.scalar_like(norm, 0.0)?;
            let zero = g.equal(norm, z)?;
            let one = g.scalar_like(norm, 1.0)?;
            let safe = g.select(zero, one, norm)?;
            let y = g.div(x, safe)?;
            let zx = g.scalar_like(y, 0.0)?;
            Ok(vec![g.select(zero, zx, y)?])
        }
        _ => {
            // MeanVarianceNormalization: (x - mean) / sqrt(var), no epsilon
            let axes = n.attr_ints("axes").unwrap_or_else(|| vec![0, 2, 3]);
            let axes: Vec<i64> = axes.iter().map(|&a| norm_axis(n, a, r).map(|v| v as i64)).collect::<Result<_>>()?;
            let (d, inv, _) = standardize(g, x, &axes, 0.0)?;
            Ok(vec![g.mul(d, inv)?])
        }
    }
}
