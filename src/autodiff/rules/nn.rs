//! Derivative rules of the `nn` family (`src/ops/nn.rs`).
//!
//! Every rule is built from differentiable primitives (and `softmax` / `log_softmax`,
//! whose own rules are here), so second derivatives work:
//! - `bias_add`: identity in `x`, sum over the leading axes for `b`;
//! - `softmax`: `y * (v - sum(v*y))`; `log_softmax`: `v - exp(y) * sum(v)` (VJP) and
//!   `v - sum(exp(y) * v)` (JVP), along the op's axis;
//! - `softmax_cross_entropy(l, z)`: `d l = dy * (softmax(l) * sum(z) - z)` (labels need not
//!   sum to 1), `d z = -dy * log_softmax(l)`;
//! - `sparse_softmax_cross_entropy(l, i)`: `d l = dy * (softmax(l) - one_hot(i))`; the
//!   integer labels get no derivative (a class count known only at run time builds the
//!   one-hot as `labels == range(classes)`);
//! - `sigmoid_cross_entropy(x, z)`: `d x = sigmoid(x) - z`, `d z = -x`;
//! - `l2_loss`: `d x = dy * x`;
//! - `layer_norm` and (inference) `batch_norm`: the usual formulas with `r = rsqrt(var+eps)`,
//!   `xhat = (x - mean) * r`; layer norm's mean/variance are functions of `x` (biased
//!   variance over the last axis), batch norm's are inputs.

use crate::autodiff::util::{add_opt, broadcast_like, dim_size, sum_to};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::{NnKind, NnOp};
use crate::tensor::Tensor;

/// Cotangents of the inputs.
pub fn vjp(op: &NnOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let needs: Vec<bool> = (0..cx.inputs.len()).map(|i| cx.need(i)).collect();
    let dy = cx.dy(0)?;
    let (xs, y) = (cx.inputs.clone(), cx.y(0));
    let g = &mut *cx.g;
    let need = |i: usize| needs.get(i).copied().unwrap_or(false);
    let x = xs[0];
    match *op {
        NnOp::BiasAdd => {
            let db = if need(1) { Some(sum_to(g, dy, xs[1])?) } else { None };
            Ok(vec![need(0).then_some(dy), db])
        }
        NnOp::Softmax { axis } => Ok(vec![Some(softmax_lin(g, y, dy, axis)?)]),
        NnOp::LogSoftmax { axis } => {
            let s = g.reduce_sum(dy, Some(&[axis]), true)?;
            let p = g.exp(y)?;
            let ps = g.mul(p, s)?;
            Ok(vec![Some(g.sub(dy, ps)?)])
        }
        NnOp::SoftmaxCrossEntropy => {
            let z = xs[1];
            let dye = g.expand_dims(dy, -1)?;
            let dl = if need(0) {
                let p = g.softmax(x, -1)?;
                let zs = g.reduce_sum(z, Some(&[-1]), true)?;
                let pz = g.mul(p, zs)?;
                let d = g.sub(pz, z)?;
                Some(g.mul(dye, d)?)
            } else {
                None
            };
            let dz = if need(1) {
                let ls = g.log_softmax(x, -1)?;
                let m = g.mul(dye, ls)?;
                Some(g.neg(m)?)
            } else {
                None
            };
            Ok(vec![dl, dz])
        }
        NnOp::SparseSoftmaxCrossEntropy => {
            if !need(0) {
                return Ok(vec![None, None]);
            }
            let d = sparse_weights(g, x, xs[1])?;
            let dye = g.expand_dims(dy, -1)?;
            Ok(vec![Some(g.mul(dye, d)?), None])
        }
        NnOp::SigmoidCrossEntropy => {
            let z = xs[1];
            let dx = if need(0) {
                let s = g.sigmoid(x)?;
                let d = g.sub(s, z)?;
                Some(g.mul(dy, d)?)
            } else {
                None
            };
            let dz = if need(1) {
                let m = g.mul(dy, x)?;
                Some(g.neg(m)?)
            } else {
                None
            };
            Ok(vec![dx, dz])
        }
        NnOp::L2Loss => Ok(vec![Some(g.mul(x, dy)?)]),
        NnOp::LayerNorm { epsilon } => {
            let (gamma, beta) = (xs[1], xs[2]);
            let (xhat, r) = layer_norm_parts(g, x, epsilon)?;
            let dgamma = if need(1) {
                let m = g.mul(dy, xhat)?;
                Some(sum_to(g, m, gamma)?)
            } else {
                None
            };
            let dbeta = if need(2) { Some(sum_to(g, dy, beta)?) } else { None };
            let dx = if need(0) {
                // r * (v - mean(v) - xhat * mean(v * xhat)), v = dy * gamma
                let v = g.mul(dy, gamma)?;
                Some(layer_norm_project(g, v, xhat, r)?)
            } else {
                None
            };
            Ok(vec![dx, dgamma, dbeta])
        }
        NnOp::BatchNorm { epsilon } => {
            let (mean, var, offset, scale) = (xs[1], xs[2], xs[3], xs[4]);
            let r = rsqrt_eps(g, var, epsilon)?;
            let rs = g.mul(r, scale)?;
            let xc = g.sub(x, mean)?;
            let mut out = vec![None; 5];
            let dxs = g.mul(dy, rs)?; // dy * r * scale
            if need(0) {
                out[0] = Some(dxs);
            }
            if need(1) {
                let s = sum_to(g, dxs, mean)?;
                out[1] = Some(g.neg(s)?);
            }
            if need(2) {
                // d/dvar of r = -r^3 / 2
                let a = g.mul(dxs, xc)?;
                let s = sum_to(g, a, var)?;
                let r2 = g.square(r)?;
                let f = g.mul_scalar(r2, -0.5)?;
                out[2] = Some(g.mul(s, f)?);
            }
            if need(3) {
                out[3] = Some(sum_to(g, dy, offset)?);
            }
            if need(4) {
                let xr = g.mul(xc, r)?;
                let a = g.mul(dy, xr)?;
                out[4] = Some(sum_to(g, a, scale)?);
            }
            Ok(out)
        }
    }
}

/// Tangents of the outputs.
pub fn jvp(op: &NnOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let ts: Vec<Option<ValueId>> = (0..cx.inputs.len()).map(|i| cx.t(i)).collect();
    let (xs, y) = (cx.inputs.clone(), cx.y(0));
    let g = &mut *cx.g;
    let x = xs[0];
    let t = |i: usize| ts.get(i).copied().flatten();
    let out = match *op {
        NnOp::BiasAdd => {
            let tb = t(1).map(|tb| broadcast_like(g, tb, y)).transpose()?;
            add_opt(g, t(0), tb)?
        }
        NnOp::Softmax { axis } => t(0).map(|v| softmax_lin(g, y, v, axis)).transpose()?,
        NnOp::LogSoftmax { axis } => match t(0) {
            Some(v) => {
                let p = g.exp(y)?;
                let pv = g.mul(p, v)?;
                let s = g.reduce_sum(pv, Some(&[axis]), true)?;
                Some(g.sub(v, s)?)
            }
            None => None,
        },
        NnOp::SoftmaxCrossEntropy => {
            let z = xs[1];
            let a = match t(0) {
                Some(tl) => {
                    let p = g.softmax(x, -1)?;
                    let zs = g.reduce_sum(z, Some(&[-1]), true)?;
                    let pz = g.mul(p, zs)?;
                    let d = g.sub(pz, z)?;
                    let m = g.mul(d, tl)?;
                    Some(g.reduce_sum(m, Some(&[-1]), false)?)
                }
                None => None,
            };
            let b = match t(1) {
                Some(tz) => {
                    let ls = g.log_softmax(x, -1)?;
                    let m = g.mul(ls, tz)?;
                    let s = g.reduce_sum(m, Some(&[-1]), false)?;
                    Some(g.neg(s)?)
                }
                None => None,
            };
            add_opt(g, a, b)?
        }
        NnOp::SparseSoftmaxCrossEntropy => match t(0) {
            Some(tl) => {
                let d = sparse_weights(g, x, xs[1])?;
                let m = g.mul(d, tl)?;
                Some(g.reduce_sum(m, Some(&[-1]), false)?)
            }
            None => None,
        },
        NnOp::SigmoidCrossEntropy => {
            let a = match t(0) {
                Some(tx) => {
                    let s = g.sigmoid(x)?;
                    let d = g.sub(s, xs[1])?;
                    Some(g.mul(d, tx)?)
                }
                None => None,
            };
            let b = match t(1) {
                Some(tz) => {
                    let m = g.mul(x, tz)?;
                    Some(g.neg(m)?)
                }
                None => None,
            };
            add_opt(g, a, b)?
        }
        NnOp::L2Loss => match t(0) {
            Some(tx) => {
                let m = g.mul(x, tx)?;
                Some(g.sum_all(m)?)
            }
            None => None,
        },
        NnOp::LayerNorm { epsilon } => {
            let (xhat, r) = layer_norm_parts(g, x, epsilon)?;
            let a = match t(0) {
                Some(tx) => {
                    let txhat = layer_norm_project(g, tx, xhat, r)?;
                    Some(g.mul(txhat, xs[1])?)
                }
                None => None,
            };
            let b = t(1).map(|tg| g.mul(xhat, tg)).transpose()?;
            let c = t(2).map(|tb| broadcast_like(g, tb, y)).transpose()?;
            let ab = add_opt(g, a, b)?;
            add_opt(g, ab, c)?
        }
        NnOp::BatchNorm { epsilon } => {
            let (mean, var, scale) = (xs[1], xs[2], xs[4]);
            let r = rsqrt_eps(g, var, epsilon)?;
            let xc = g.sub(x, mean)?;
            // t(xc) * r * scale + xc * t(r) * scale + xc * r * t(scale) + t(offset)
            let txc = match (t(0), t(1)) {
                (Some(tx), Some(tm)) => Some(g.sub(tx, tm)?),
                (Some(tx), None) => Some(tx),
                (None, Some(tm)) => Some(g.neg(tm)?),
                (None, None) => None,
            };
            let rs = g.mul(r, scale)?;
            let a = txc.map(|v| g.mul(v, rs)).transpose()?;
            let b = match t(2) {
                Some(tv) => {
                    let r3 = g.square(r)?;
                    let r3 = g.mul(r3, r)?;
                    let f = g.mul_scalar(r3, -0.5)?;
                    let tr = g.mul(f, tv)?;
                    let trs = g.mul(tr, scale)?;
                    Some(g.mul(xc, trs)?)
                }
                None => None,
            };
            let c = match t(4) {
                Some(ts) => {
                    let rt = g.mul(r, ts)?;
                    Some(g.mul(xc, rt)?)
                }
                None => None,
            };
            let d = t(3).map(|to| broadcast_like(g, to, y)).transpose()?;
            let ab = add_opt(g, a, b)?;
            let abc = add_opt(g, ab, c)?;
            let s = add_opt(g, abc, d)?;
            // a sum of broadcast terms may miss the output shape when only params vary
            s.map(|s| broadcast_like(g, s, y)).transpose()?
        }
    };
    Ok(vec![out])
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: NnKind) -> bool {
    true
}

/// `y * (v - sum(v * y, axis))`: the softmax Jacobian (symmetric) applied to `v`.
fn softmax_lin(g: &mut Graph, y: ValueId, v: ValueId, axis: i64) -> Result<ValueId> {
    let vy = g.mul(v, y)?;
    let s = g.reduce_sum(vy, Some(&[axis]), true)?;
    let d = g.sub(v, s)?;
    g.mul(y, d)
}

/// `softmax(logits) - one_hot(labels)` over the class axis (a class count known only at
/// run time compares the labels with `range(classes)`; out-of-range labels match no class,
/// as in `one_hot`).
fn sparse_weights(g: &mut Graph, logits: ValueId, labels: ValueId) -> Result<ValueId> {
    let sl = g.shape(logits)?;
    let dt = g.dtype(logits)?;
    let oh = match sl.dims().last().and_then(|d| d.value()) {
        Some(depth) => g.one_hot(labels, depth, -1, 1.0, 0.0, dt)?,
        None => {
            let c = dim_size(g, logits, sl.rank().saturating_sub(1))?;
            let (zero, one) = (g.constant(Tensor::scalar(0i64)), g.constant(Tensor::scalar(1i64)));
            let classes = g.range(zero, c, one)?;
            let l = g.expand_dims(labels, -1)?;
            let eq = g.equal(l, classes)?;
            g.cast(eq, dt)?
        }
    };
    let p = g.softmax(logits, -1)?;
    g.sub(p, oh)
}

/// `rsqrt(v + epsilon)`.
fn rsqrt_eps(g: &mut Graph, v: ValueId, epsilon: f64) -> Result<ValueId> {
    let ve = g.add_scalar(v, epsilon)?;
    g.rsqrt(ve)
}

/// `(xhat, r)` of layer norm over the last axis: `r = rsqrt(var + eps)`, `xhat = (x-mu)*r`.
fn layer_norm_parts(g: &mut Graph, x: ValueId, epsilon: f64) -> Result<(ValueId, ValueId)> {
    let mu = g.reduce_mean(x, Some(&[-1]), true)?;
    let xc = g.sub(x, mu)?;
    let sq = g.square(xc)?;
    let var = g.reduce_mean(sq, Some(&[-1]), true)?;
    let r = rsqrt_eps(g, var, epsilon)?;
    Ok((g.mul(xc, r)?, r))
}

/// `r * (v - mean(v) - xhat * mean(v * xhat))` over the last axis: the derivative of
/// `xhat` (symmetric, so the same for both modes).
fn layer_norm_project(g: &mut Graph, v: ValueId, xhat: ValueId, r: ValueId) -> Result<ValueId> {
    let mv = g.reduce_mean(v, Some(&[-1]), true)?;
    let vx = g.mul(v, xhat)?;
    let mvx = g.reduce_mean(vx, Some(&[-1]), true)?;
    let c = g.sub(v, mv)?;
    let p = g.mul(xhat, mvx)?;
    let c = g.sub(c, p)?;
    g.mul(c, r)
}
