//! Converters for the elementwise family: `select` (broadcasting) and `cast` (elementwise)
//! are derived from their declared batching class; `clip` is written here.

use crate::Result;
use crate::ops::{ElementwiseKind, OpKind};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry};

/// clip's output has x's shape, so a stacked bound needs a stacked x (tiled if invariant).
fn clip(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let rank = ctx.input_type(0).rank();
    let x = ctx.stacked(0)?;
    let lo = ctx.expand_for_broadcast(1, rank)?;
    let hi = ctx.expand_for_broadcast(2, rank)?;
    let op = ctx.op().clone();
    let y = ctx.add(op, &[x, lo, hi])?;
    Converted::stacked(y)
}

/// Register the family's hand-written converters.
pub fn register(r: &mut Registry) {
    r.register(OpKey::Builtin(OpKind::Elementwise(ElementwiseKind::Clip)), clip);
}
