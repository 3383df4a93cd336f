//! Derivative rules of the reduce family (`src/ops/reduce.rs`).
//!
//! Reductions broadcast the cotangent back over the reduced axes ([`unreduce`]); `mean`
//! divides by the count; `max`/`min` share it equally among the tied maxima (like TF);
//! `prod` multiplies by the product of the OTHER elements (exclusive cumulative products
//! from both ends, so zeros are handled exactly); `logsumexp` weights by the softmax;
//! scans run the adjoint scan in the opposite direction. `all`, `any`, `argmax`, `argmin`
//! are non-differentiable.

use crate::autodiff::util::{inverse_perm, norm_axes, reshape_like, unreduce};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::{ReduceKind, ReduceOp};

/// Cotangents of the inputs.
pub fn vjp(op: &ReduceOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if !differentiable(op.kind()) || !cx.need(0) {
        return Ok(vec![None]);
    }
    let (x, y) = (cx.x(0), cx.y(0));
    let dy = cx.dy(0)?;
    let g = &mut *cx.g;
    let d = match op {
        ReduceOp::Sum { axes, keep_dims } => unreduce(g, dy, x, axes, *keep_dims)?,
        ReduceOp::Mean { axes, keep_dims } => {
            let d = unreduce(g, dy, x, axes, *keep_dims)?;
            let c = count(g, x, y)?;
            g.div(d, c)?
        }
        ReduceOp::Prod { axes, keep_dims } => {
            let d = unreduce(g, dy, x, axes, *keep_dims)?;
            let others = prod_of_others(g, x, y, axes, *keep_dims)?;
            g.mul(d, others)?
        }
        ReduceOp::Max { axes, keep_dims } | ReduceOp::Min { axes, keep_dims } => {
            let w = tie_weights(g, x, y, axes, *keep_dims)?;
            let d = unreduce(g, dy, x, axes, *keep_dims)?;
            g.mul(d, w)?
        }
        ReduceOp::LogSumExp { axes, keep_dims } => {
            let w = softmax_weights(g, x, y, axes, *keep_dims)?;
            let d = unreduce(g, dy, x, axes, *keep_dims)?;
            g.mul(d, w)?
        }
        ReduceOp::CumSum { axis, exclusive, reverse } => g.cumsum(dy, *axis, *exclusive, !*reverse)?,
        ReduceOp::CumProd { axis, exclusive, reverse } => {
            // d x_j = Σ_{i ≥ j} dy_i y_i / x_j (exact for nonzero x).
            let p = g.mul(dy, y)?;
            let s = g.cumsum(p, *axis, *exclusive, !*reverse)?;
            g.div(s, x)?
        }
        ReduceOp::All { .. } | ReduceOp::Any { .. } | ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => {
            return Ok(vec![None]);
        }
    };
    Ok(vec![Some(d)])
}

/// Tangents of the outputs.
pub fn jvp(op: &ReduceOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let Some(t) = cx.t(0) else { return Ok(vec![None]) };
    if !differentiable(op.kind()) {
        return Ok(vec![None]);
    }
    let (x, y) = (cx.x(0), cx.y(0));
    let g = &mut *cx.g;
    let out = match op {
        ReduceOp::Sum { axes, keep_dims } => g.reduce_sum(t, axes, *keep_dims)?,
        ReduceOp::Mean { axes, keep_dims } => g.reduce_mean(t, axes, *keep_dims)?,
        ReduceOp::Prod { axes, keep_dims } => {
            let others = prod_of_others(g, x, y, axes, *keep_dims)?;
            let p = g.mul(t, others)?;
            g.reduce_sum(p, axes, *keep_dims)?
        }
        ReduceOp::Max { axes, keep_dims } | ReduceOp::Min { axes, keep_dims } => {
            let w = tie_weights(g, x, y, axes, *keep_dims)?;
            let p = g.mul(t, w)?;
            g.reduce_sum(p, axes, *keep_dims)?
        }
        ReduceOp::LogSumExp { axes, keep_dims } => {
            let w = softmax_weights(g, x, y, axes, *keep_dims)?;
            let p = g.mul(t, w)?;
            g.reduce_sum(p, axes, *keep_dims)?
        }
        ReduceOp::CumSum { axis, exclusive, reverse } => g.cumsum(t, *axis, *exclusive, *reverse)?,
        ReduceOp::CumProd { axis, exclusive, reverse } => {
            let r = g.div(t, x)?;
            let s = g.cumsum(r, *axis, *exclusive, *reverse)?;
            g.mul(y, s)?
        }
        ReduceOp::All { .. } | ReduceOp::Any { .. } | ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => {
            return Ok(vec![None]);
        }
    };
    Ok(vec![Some(out)])
}

/// Whether derivatives flow through this kind.
pub fn differentiable(k: ReduceKind) -> bool {
    use ReduceKind::*;
    !matches!(k, All | Any | ArgMax | ArgMin)
}

/// Number of reduced elements per output element, as a scalar of `x`'s dtype.
fn count(g: &mut Graph, x: ValueId, y: ValueId) -> Result<ValueId> {
    let (sx, sy) = (g.shape(x)?, g.shape(y)?);
    if let (Some(a), Some(b)) = (sx.num_elements(), sy.num_elements()) {
        let c = if b == 0 { 1.0 } else { a as f64 / b as f64 };
        return g.scalar_like(x, c.max(1.0));
    }
    let dt = g.dtype(x)?;
    let (na, nb) = (g.size_of(x)?, g.size_of(y)?);
    let (na, nb) = (g.cast(na, dt)?, g.cast(nb, dt)?);
    g.div(na, nb)
}

/// `1 / (number of ties)` where `x` equals the (broadcast) extremum, else 0.
fn tie_weights(g: &mut Graph, x: ValueId, y: ValueId, axes: &[i64], keep_dims: bool) -> Result<ValueId> {
    let yb = unreduce(g, y, x, axes, keep_dims)?;
    let eq = g.equal(x, yb)?;
    let dt = g.dtype(x)?;
    let m = g.cast(eq, dt)?;
    let n = g.reduce_sum(m, axes, true)?;
    g.div(m, n)
}

/// `exp(x - logsumexp(x))` broadcast over the reduced axes.
fn softmax_weights(g: &mut Graph, x: ValueId, y: ValueId, axes: &[i64], keep_dims: bool) -> Result<ValueId> {
    let yb = unreduce(g, y, x, axes, keep_dims)?;
    let d = g.sub(x, yb)?;
    g.exp(d)
}

/// For every element of `x`, the product of the other elements of its reduction group.
/// Uses exclusive cumulative products from both ends over the flattened reduced axes when
/// their sizes are static (exact with zeros); otherwise `prod / x`.
fn prod_of_others(g: &mut Graph, x: ValueId, y: ValueId, axes: &[i64], keep_dims: bool) -> Result<ValueId> {
    let sx = g.shape(x)?;
    let rank = sx.rank();
    let red = norm_axes(axes, rank);
    let k: Option<usize> = red.iter().map(|&a| sx.dim(a).value()).product::<Option<usize>>();
    let Some(k) = k else {
        let yb = unreduce(g, y, x, axes, keep_dims)?;
        return g.div(yb, x);
    };
    let keep: Vec<usize> = (0..rank).filter(|a| !red.contains(a)).collect();
    let perm: Vec<usize> = keep.iter().chain(red.iter()).copied().collect();
    let xt = g.transpose(x, &perm)?;
    let flat = g.reshape(xt, &[-1, k as i64])?;
    let left = g.cumprod(flat, 1, true, false)?;
    let right = g.cumprod(flat, 1, true, true)?;
    let o = g.mul(left, right)?;
    let o = reshape_like(g, o, xt)?;
    g.transpose(o, &inverse_perm(&perm))
}
