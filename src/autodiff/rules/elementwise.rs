//! Derivative rules of the elementwise family (`src/ops/elementwise.rs`): select, cast,
//! clip. `select` routes the cotangent by the predicate (the predicate has none); a cast
//! between float types casts the cotangent back, any other cast stops derivatives; `clip`
//! passes the cotangent where `lo <= x <= hi` and to the bound that was hit elsewhere.

use crate::autodiff::util::{broadcast_like, sum_to};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::{ElementwiseKind, ElementwiseOp};

/// Cotangents of the inputs.
pub fn vjp(op: &ElementwiseOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    match op {
        ElementwiseOp::Select => {
            let (c, x, y) = (cx.x(0), cx.x(1), cx.x(2));
            let dy = cx.dy(0)?;
            let g = &mut *cx.g;
            let zero = g.zeros_like(dy)?;
            let dx = if cx.needs[1] {
                let d = g.select(c, dy, zero)?;
                Some(sum_to(g, d, x)?)
            } else {
                None
            };
            let dyy = if cx.needs[2] {
                let d = g.select(c, zero, dy)?;
                Some(sum_to(g, d, y)?)
            } else {
                None
            };
            Ok(vec![None, dx, dyy])
        }
        ElementwiseOp::Cast { to } => {
            let x = cx.x(0);
            let from = cx.g.dtype(x)?;
            if !(from.is_float() && to.is_float() && cx.need(0)) {
                return Ok(vec![None]);
            }
            let dy = cx.dy(0)?;
            Ok(vec![Some(cx.g.cast(dy, from)?)])
        }
        ElementwiseOp::Clip => {
            let (x, lo, hi) = (cx.x(0), cx.x(1), cx.x(2));
            let dy = cx.dy(0)?;
            let g = &mut *cx.g;
            let (below, above, inside) = clip_masks(g, x, lo, hi)?;
            let zero = g.zeros_like(dy)?;
            let mut out = vec![None, None, None];
            if cx.needs[0] {
                let d = g.select(inside, dy, zero)?;
                out[0] = Some(sum_to(g, d, x)?);
            }
            if cx.needs[1] {
                let d = g.select(below, dy, zero)?;
                out[1] = Some(sum_to(g, d, lo)?);
            }
            if cx.needs[2] {
                let d = g.select(above, dy, zero)?;
                out[2] = Some(sum_to(g, d, hi)?);
            }
            Ok(out)
        }
    }
}

/// Tangents of the outputs.
pub fn jvp(op: &ElementwiseOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let y = cx.y(0);
    match op {
        ElementwiseOp::Select => {
            if cx.t(1).is_none() && cx.t(2).is_none() {
                return Ok(vec![None]);
            }
            let c = cx.x(0);
            let (tx, ty) = (cx.t_or_zero(1)?, cx.t_or_zero(2)?);
            let g = &mut *cx.g;
            let t = g.select(c, tx, ty)?;
            Ok(vec![Some(broadcast_like(g, t, y)?)])
        }
        ElementwiseOp::Cast { to } => {
            let from = cx.g.dtype(cx.x(0))?;
            match cx.t(0) {
                Some(t) if from.is_float() && to.is_float() => Ok(vec![Some(cx.g.cast(t, *to)?)]),
                _ => Ok(vec![None]),
            }
        }
        ElementwiseOp::Clip => {
            if (0..3).all(|i| cx.t(i).is_none()) {
                return Ok(vec![None]);
            }
            let (x, lo, hi) = (cx.x(0), cx.x(1), cx.x(2));
            let (tx, tlo, thi) = (cx.t_or_zero(0)?, cx.t_or_zero(1)?, cx.t_or_zero(2)?);
            let g = &mut *cx.g;
            let (below, above, _) = clip_masks(g, x, lo, hi)?;
            let t = g.select(above, thi, tx)?;
            let t = g.select(below, tlo, t)?;
            Ok(vec![Some(broadcast_like(g, t, y)?)])
        }
    }
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: ElementwiseKind) -> bool {
    true
}

/// `(x < lo, x > hi & !(x < lo), lo <= x <= hi)` — the same precedence as the kernel
/// (`min(max(x, lo), hi)`: when `lo > hi` the result is `hi`).
fn clip_masks(g: &mut Graph, x: ValueId, lo: ValueId, hi: ValueId) -> Result<(ValueId, ValueId, ValueId)> {
    // y = min(max(x, lo), hi): hi wins whenever max(x, lo) > hi.
    let m = g.maximum(x, lo)?;
    let above = g.greater(m, hi)?;
    let below0 = g.less(x, lo)?;
    let not_above = g.logical_not(above)?;
    let below = g.logical_and(below0, not_above)?;
    let out = g.logical_or(below, above)?;
    let inside = g.logical_not(out)?;
    Ok((below, above, inside))
}
