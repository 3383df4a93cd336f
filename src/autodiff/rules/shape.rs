//! Derivative rules of the shape family (`src/ops/shape.rs`).
//!
//! Shape ops move elements without arithmetic, so each rule applies the adjoint movement:
//! reshape back, transpose by the inverse permutation, sum over broadcast / tiled copies,
//! unstack what was stacked. Ops that produce shapes, ranges, one-hots or constants of a
//! shape are non-differentiable; `stop_gradient` stops by definition. Forward mode is
//! derived from the kinds' declared linearity (the same op applied to the tangent).

use crate::autodiff::util::{inverse_perm, reshape_like, sum_to};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{Op, ShapeKind, ShapeOp};

/// Cotangents of the inputs.
pub fn vjp(op: &ShapeOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    // Any input may be the differentiable one (`fill_dyn`: input 1; `stack`: all of them).
    if !differentiable(op.kind()) || !(0..n_in).any(|i| cx.need(i)) {
        return Ok(vec![None; n_in]);
    }
    let x = cx.x(0);
    let mut out = vec![None; n_in];
    let d = match op {
        ShapeOp::Reshape { .. } | ShapeOp::ReshapeDyn | ShapeOp::ExpandDims { .. } | ShapeOp::Squeeze { .. } => {
            let dy = cx.dy(0)?;
            reshape_like(cx.g, dy, x)?
        }
        ShapeOp::Identity | ShapeOp::MatchShape { .. } => cx.dy(0)?,
        ShapeOp::Transpose { perm } => {
            let dy = cx.dy(0)?;
            cx.g.transpose(dy, &inverse_perm(perm))?
        }
        ShapeOp::BroadcastTo { .. } | ShapeOp::BroadcastToDyn => {
            let dy = cx.dy(0)?;
            sum_to(cx.g, dy, x)?
        }
        ShapeOp::Fill { .. } | ShapeOp::FillDyn => {
            // The fill value (input 0 for Fill, input 1 for FillDyn) receives the sum.
            let dy = cx.dy(0)?;
            let s = cx.g.sum_all(dy)?;
            let pos = if matches!(op, ShapeOp::FillDyn) { 1 } else { 0 };
            out[pos] = Some(s);
            return Ok(out);
        }
        ShapeOp::Tile { multiples } => {
            // [m0*x0, m1*x1, ...] -> [m0, x0, m1, x1, ...] -> sum over the m axes.
            let dy = cx.dy(0)?;
            let g = &mut *cx.g;
            let r = match g.shape(x)?.as_fixed() {
                Some(xs) => {
                    let mut split = Vec::with_capacity(2 * xs.len());
                    for (m, s) in multiples.iter().zip(&xs) {
                        split.push(*m as i64);
                        split.push(*s as i64);
                    }
                    g.reshape(dy, &split)?
                }
                None => {
                    // Dims known at run time: the same split, built from shape_of(x).
                    let s = g.shape_of(x)?;
                    let mut parts = Vec::with_capacity(2 * multiples.len());
                    for (i, m) in multiples.iter().enumerate() {
                        parts.push(g.constant(crate::tensor::Tensor::vec1(&[*m as i64])));
                        parts.push(g.slice(s, &[i as i64], &[1])?);
                    }
                    let split = g.concat(&parts, 0)?;
                    g.reshape_dyn(dy, split)?
                }
            };
            let axes: Vec<i64> = (0..multiples.len()).map(|i| 2 * i as i64).collect();
            let d = g.reduce_sum(r, Some(&axes), false)?;
            reshape_like(g, d, x)?
        }
        ShapeOp::Stack { axis } => {
            let dy = cx.dy(0)?;
            let parts = cx.g.unstack(dy, *axis)?;
            return Ok(parts.into_iter().zip(&cx.needs).map(|(p, n)| n.then_some(p)).collect());
        }
        ShapeOp::Unstack { axis, .. } => {
            let mut parts = Vec::with_capacity(cx.outputs.len());
            for i in 0..cx.outputs.len() {
                parts.push(cx.dy(i)?);
            }
            cx.g.stack(&parts, *axis)?
        }
        ShapeOp::StopGradient
        | ShapeOp::ZerosLike
        | ShapeOp::OnesLike
        | ShapeOp::ShapeOf
        | ShapeOp::Size
        | ShapeOp::Rank
        | ShapeOp::LoopMax
        | ShapeOp::OneHot { .. }
        | ShapeOp::Range => return Ok(out),
    };
    out[0] = Some(d);
    Ok(out)
}

/// Tangents of the outputs.
pub fn jvp(op: &ShapeOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    // every differentiable shape op is linear in its data ([`ShapeKind::linearity`])
    match op.kind().linearity() {
        l if l.is_linear() => super::linear_jvp(&Op::Shape(op.clone()), l, cx),
        _ => Ok(vec![None; cx.outputs.len()]),
    }
}

/// Whether derivatives flow through this kind.
pub fn differentiable(k: ShapeKind) -> bool {
    k.linearity().is_linear()
}
