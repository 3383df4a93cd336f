//! Derivative rules of the reduce family (`src/ops/reduce.rs`).
//!
//! Reductions broadcast the cotangent back over the reduced axes ([`unreduce`]); `mean`
//! divides by the count; `max`/`min` share it equally among the tied maxima (like TF);
//! `prod` multiplies by the product of the OTHER elements (exclusive cumulative products
//! from both ends, so zeros are handled exactly); `logsumexp` weights by the softmax;
//! `variance` by `2 (x - mean) / n`. Every axis reduction's VJP and JVP come from its ONE
//! `local_derivative` arm;
//! scans run the adjoint scan in the opposite direction. `cumprod` splits each scanned line
//! at its first zero (`ZeroSplit`) so its derivatives never divide by zero and are exact
//! with zeros (also those of `prod`, whose rule uses exclusive `cumprod`s). `all`, `any`,
//! `argmax`, `argmin` are non-differentiable.

use crate::autodiff::util::{inverse_perm, norm_axes, reshape_like, unreduce};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::{Op, ReduceKind, ReduceOp};

/// Cotangents of the inputs.
pub fn vjp(op: &ReduceOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if !differentiable(op.kind()) || !cx.need(0) {
        return Ok(vec![None]);
    }
    let (x, y) = (cx.x(0), cx.y(0));
    let dy = cx.dy(0)?;
    let g = &mut *cx.g;
    let d = match op {
        ReduceOp::Axes { kind, axes, keep_dims } => {
            let d = unreduce(g, dy, x, axes, *keep_dims)?;
            local_derivative(*kind, g, x, y, axes, *keep_dims, d)?
        }
        &ReduceOp::Scan { kind: ReduceKind::CumSum, axis, exclusive, reverse } => {
            g.cumsum(dy, axis, exclusive, !reverse)?
        }
        &ReduceOp::Scan { kind: ReduceKind::CumProd, axis, exclusive, reverse } => {
            let z = ZeroSplit::new(g, x, axis, exclusive, reverse)?;
            let d = z.vjp_value(g, y, dy, axis, exclusive, reverse)?;
            // j > z: d x_j = x_z · (the same gradient for x with x_z replaced by 1). Zero in
            // value, but it carries the derivative with respect to x_z (second order).
            let z1 = ZeroSplit::new(g, z.x1, axis, exclusive, reverse)?;
            let d1 = z1.vjp_value(g, z.y1, dy, axis, exclusive, reverse)?;
            let xz = g.mul(x, z.first)?;
            let xz = g.reduce_sum(xz, Some(&[axis]), true)?;
            let after = g.mul(d1, z.after)?;
            let after = g.mul(after, xz)?;
            g.add(d, after)?
        }
        ReduceOp::Scan { kind, .. } => return Err(no_rule(*kind)),
        ReduceOp::Arg { .. } => return Ok(vec![None]),
    };
    Ok(vec![Some(d)])
}

/// Tangents of the outputs.
pub fn jvp(op: &ReduceOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let Some(t) = cx.t(0) else { return Ok(vec![None]) };
    if !differentiable(op.kind()) {
        return Ok(vec![None]);
    }
    // sum, mean and cumsum are linear ([`ReduceKind::linearity`]): derived
    let linearity = op.kind().linearity();
    if linearity.is_linear() {
        return super::linear_jvp(&Op::Reduce(op.clone()), linearity, cx);
    }
    let (x, y) = (cx.x(0), cx.y(0));
    let g = &mut *cx.g;
    let out = match op {
        ReduceOp::Axes { kind, axes, keep_dims } => {
            // Σ over the group of t · ∂y/∂x.
            let p = local_derivative(*kind, g, x, y, axes, *keep_dims, t)?;
            g.reduce_sum(p, Some(axes), *keep_dims)?
        }
        &ReduceOp::Scan { kind: ReduceKind::CumProd, axis, exclusive, reverse } => {
            let z = ZeroSplit::new(g, x, axis, exclusive, reverse)?;
            // Before the first zero (tm): y Σ t_k / x_k; after it: t_z y'.
            let r = g.div(t, z.x_safe)?;
            let r = g.mul(r, z.bm)?;
            let s = g.cumsum(r, axis, exclusive, reverse)?;
            let s = g.mul(s, z.tm)?;
            let tz = g.mul(t, z.first)?;
            let tz = g.reduce_sum(tz, Some(&[axis]), true)?;
            let one = g.scalar_like(z.tm, 1.0)?;
            let after = g.sub(one, z.tm)?;
            let tz = g.mul(tz, after)?;
            let s = g.add(s, tz)?;
            g.mul(z.y1, s)?
        }
        ReduceOp::Scan { kind, .. } => return Err(no_rule(*kind)),
        ReduceOp::Arg { .. } => return Ok(vec![None]),
    };
    Ok(vec![Some(out)])
}

/// The local derivative of an axis reduction `y = kind(x)` applied to `d`, an `x`-shaped
/// cotangent (already broadcast over the reduced axes) or tangent: `d · ∂y/∂x`, built from
/// differentiable graph ops so second derivatives work. The VJP is this of the broadcast
/// `dy`, the JVP (of a non-linear kind) its sum over the reduced axes. A new differentiable
/// axis reduction is one arm here; the match is exhaustive, and a kind without a derivative
/// is listed in [`differentiable`].
fn local_derivative(
    kind: ReduceKind,
    g: &mut Graph,
    x: ValueId,
    y: ValueId,
    axes: &[i64],
    keep_dims: bool,
    d: ValueId,
) -> Result<ValueId> {
    use ReduceKind::*;
    match kind {
        Sum => Ok(d),
        Mean => {
            let c = count(g, x, y)?;
            g.div(d, c)
        }
        Prod => {
            let others = prod_of_others(g, x, y, axes, keep_dims)?;
            g.mul(d, others)
        }
        Max | Min => {
            let w = tie_weights(g, x, y, axes, keep_dims)?;
            g.mul(d, w)
        }
        LogSumExp => {
            let w = softmax_weights(g, x, y, axes, keep_dims)?;
            g.mul(d, w)
        }
        Variance => {
            // 2 (x - mean) / n
            let m = g.reduce_mean(x, Some(axes), true)?;
            let c = count(g, x, y)?;
            let dev = g.sub(x, m)?;
            let w = g.div(dev, c)?;
            let w = g.mul_scalar(w, 2.0)?;
            g.mul(d, w)
        }
        All | Any | ArgMax | ArgMin | CumSum | CumProd => Err(no_rule(kind)),
    }
}

/// The error of a kind reaching a rule that does not handle it (an op whose form is not
/// its kind's is rejected at build time, so this is an internal error).
fn no_rule(kind: ReduceKind) -> Error {
    Error::unsupported(kind.name(), "internal: no derivative rule for this kind in this form")
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
    let n = g.reduce_sum(m, Some(axes), true)?;
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

/// The split of every `cumprod` line at its first zero `z` (in scan order), as float masks
/// of `x`'s shape (locally constant):
/// - `bm`: `[j < z]` (the positions whose `x_j` may be divided by);
/// - `first`: `[j == z]`; `after`: `[j > z]`;
/// - `tm`: the outputs still free of the zero: `[i < z]` (inclusive scan), `[i <= z]`
///   (exclusive scan);
/// - `x_safe`: `x` where `bm`, else 1;
/// - `x1`: `x` with its first zero replaced by 1, and `y1` the op's scan of it.
///
/// Then `∂y_i/∂x_j = y_i / x_j` for `j < z`, `∂y_i/∂x_z = y1_i` for `i` after `z`, and
/// `∂y_i/∂x_j = x_z · (∂y1_i/∂x1_j)` for `j > z` (zero in value) — no division by zero
/// anywhere. The VJP keeps the last term for its derivative with respect to `x_z`, so
/// gradients and hessians are exact with zeros; the JVP is exact to first order.
struct ZeroSplit {
    bm: ValueId,
    first: ValueId,
    after: ValueId,
    tm: ValueId,
    x_safe: ValueId,
    x1: ValueId,
    y1: ValueId,
}

impl ZeroSplit {
    fn new(g: &mut Graph, x: ValueId, axis: i64, exclusive: bool, reverse: bool) -> Result<ZeroSplit> {
        let dt = g.dtype(x)?;
        let zero = g.scalar_like(x, 0.0)?;
        let nz = g.not_equal(x, zero)?;
        let nz = g.cast(nz, dt)?;
        let bm = g.cumprod(nz, axis, false, reverse)?;
        let le = g.cumprod(nz, axis, true, reverse)?;
        let first = g.sub(le, bm)?;
        let one = g.scalar_like(x, 1.0)?;
        let after = g.sub(one, le)?;
        let tm = if exclusive { le } else { bm };
        let xb = g.mul(x, bm)?;
        let not_b = g.sub(one, bm)?;
        let x_safe = g.add(xb, not_b)?;
        // x1 = x (1 - first) + first: its z entry is the constant 1, not x_z + 1.
        let not_first = g.sub(one, first)?;
        let x1 = g.mul(x, not_first)?;
        let x1 = g.add(x1, first)?;
        let y1 = g.cumprod(x1, axis, exclusive, reverse)?;
        Ok(ZeroSplit { bm, first, after, tm, x_safe, x1, y1 })
    }

    /// The exact VALUE of the cumprod cotangent of `x` (`y` its scan), without the
    /// zero-valued `j > z` terms: `bm · Σ dy y / x_safe + first · Σ dy y1`.
    fn vjp_value(&self, g: &mut Graph, y: ValueId, dy: ValueId, axis: i64, excl: bool, rev: bool) -> Result<ValueId> {
        let w = g.mul(dy, y)?;
        let s1 = g.cumsum(w, axis, excl, !rev)?;
        let s1 = g.div(s1, self.x_safe)?;
        let s1 = g.mul(s1, self.bm)?;
        let w1 = g.mul(dy, self.y1)?;
        let s2 = g.cumsum(w1, axis, excl, !rev)?;
        let s2 = g.mul(s2, self.first)?;
        g.add(s1, s2)
    }
}
