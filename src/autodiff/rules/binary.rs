//! Derivative rules of the binary family (`src/ops/binary.rs`).
//!
//! Inputs broadcast, so every cotangent is reduced back to its input's shape with
//! [`sum_to`], and a tangent of one side alone is broadcast to the output's shape.
//! Comparisons, logical ops and `floor_div` are non-differentiable.

use crate::autodiff::util::{add_opt, broadcast_like, sum_to};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::BinaryKind;

/// Cotangents of the inputs.
pub fn vjp(k: BinaryKind, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if !differentiable(k) {
        return Ok(vec![None, None]);
    }
    let (a, b, y) = (cx.x(0), cx.x(1), cx.y(0));
    let dy = cx.dy(0)?;
    let (pa, pb) = partials(cx.g, k, a, b, y)?;
    let g = &mut *cx.g;
    let da = if cx.needs[0] { Some(apply(g, pa, dy, a)?) } else { None };
    let db = if cx.needs[1] { Some(apply(g, pb, dy, b)?) } else { None };
    Ok(vec![da, db])
}

/// Tangents of the outputs.
pub fn jvp(k: BinaryKind, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if !differentiable(k) {
        return Ok(vec![None]);
    }
    let (a, b, y) = (cx.x(0), cx.x(1), cx.y(0));
    let (ta, tb) = (cx.t(0), cx.t(1));
    let (pa, pb) = partials(cx.g, k, a, b, y)?;
    let g = &mut *cx.g;
    let ca = match ta {
        Some(t) => Some(mul_partial(g, pa, t)?),
        None => None,
    };
    let cb = match tb {
        Some(t) => Some(mul_partial(g, pb, t)?),
        None => None,
    };
    let t = add_opt(g, ca, cb)?;
    t.map(|t| broadcast_like(g, t, y)).transpose().map(|t| vec![t])
}

/// Whether derivatives flow through this kind.
pub fn differentiable(k: BinaryKind) -> bool {
    use BinaryKind::*;
    matches!(k, Add | Sub | Mul | Div | FloorMod | Pow | Maximum | Minimum | SquaredDifference | Atan2)
}

/// A partial derivative `∂y/∂input`: the identity, its negation, or a value (broadcastable
/// to `y`) to multiply with.
#[derive(Clone, Copy)]
enum Partial {
    One,
    MinusOne,
    Times(ValueId),
}

fn mul_partial(g: &mut Graph, p: Partial, v: ValueId) -> Result<ValueId> {
    match p {
        Partial::One => Ok(v),
        Partial::MinusOne => g.neg(v),
        Partial::Times(d) => g.mul(v, d),
    }
}

fn apply(g: &mut Graph, p: Partial, dy: ValueId, x: ValueId) -> Result<ValueId> {
    let d = mul_partial(g, p, dy)?;
    sum_to(g, d, x)
}

fn mask(g: &mut Graph, m: ValueId, like: ValueId) -> Result<ValueId> {
    let dt = g.dtype(like)?;
    g.cast(m, dt)
}

/// `(∂y/∂a, ∂y/∂b)` of `y = k(a, b)`.
fn partials(g: &mut Graph, k: BinaryKind, a: ValueId, b: ValueId, y: ValueId) -> Result<(Partial, Partial)> {
    use BinaryKind::*;
    use Partial::*;
    Ok(match k {
        Add => (One, One),
        Sub => (One, MinusOne),
        Mul => (Times(b), Times(a)),
        Div => {
            // ∂/∂a = 1/b, ∂/∂b = -y/b
            let rb = g.reciprocal(b)?;
            let yb = g.div(y, b)?;
            (Times(rb), Times(g.neg(yb)?))
        }
        FloorMod => {
            // a - floor(a/b) b
            let q = g.div(a, b)?;
            let q = g.floor(q)?;
            (One, Times(g.neg(q)?))
        }
        Pow => {
            // ∂/∂a = b a^(b-1); ∂/∂b = y log(a) (0 where a <= 0, with a safe log argument).
            let bm1 = g.add_scalar(b, -1.0)?;
            let p = g.pow(a, bm1)?;
            let da = g.mul(b, p)?;
            let z = g.scalar_like(a, 0.0)?;
            let pos = g.greater(a, z)?;
            let one = g.ones_like(a)?;
            let safe = g.select(pos, a, one)?;
            let la = g.log(safe)?;
            let zero = g.zeros_like(a)?;
            let la = g.select(pos, la, zero)?;
            (Times(da), Times(g.mul(y, la)?))
        }
        Maximum | Minimum => {
            // Ties go to `a` (like TF).
            let m = if k == Maximum { g.greater_equal(a, b)? } else { g.less_equal(a, b)? };
            let ma = mask(g, m, a)?;
            let one = g.scalar_like(a, 1.0)?;
            let mb = g.sub(one, ma)?;
            (Times(ma), Times(mb))
        }
        SquaredDifference => {
            let d = g.sub(a, b)?;
            let d2 = g.mul_scalar(d, 2.0)?;
            (Times(d2), Times(g.neg(d2)?))
        }
        Atan2 => {
            // atan2(a, b): ∂/∂a = b / (a² + b²), ∂/∂b = -a / (a² + b²)
            let (a2, b2) = (g.square(a)?, g.square(b)?);
            let r = g.add(a2, b2)?;
            let da = g.div(b, r)?;
            let db = g.div(a, r)?;
            (Times(da), Times(g.neg(db)?))
        }
        // integer and boolean results: no derivative flows through them
        FloorDiv | Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual | LogicalAnd | LogicalOr
        | LogicalXor | BitwiseAnd | BitwiseOr | BitwiseXor | ShiftLeft | ShiftRight | ShiftRightLogical => {
            let (za, zb) = (g.zeros_like(a)?, g.zeros_like(b)?);
            (Times(za), Times(zb))
        }
    })
}
