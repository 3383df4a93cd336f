//! Converters for select / cast / clip.

use super::binary::broadcast_elementwise;
use crate::Result;
use crate::ops::{ElementwiseKind, OpKind};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, Wrapped};

fn cast(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let op = ctx.op().clone();
    let x = ctx.stacked(0)?;
    let y = ctx.add(op, &[x])?;
    ConvertCtx::done(vec![Wrapped::stacked(y)])
}

/// clip's output has x's shape, so a stacked bound needs a stacked x (tiled if invariant).
fn clip(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let rank = ctx.input_type(0).rank();
    let x = ctx.stacked(0)?;
    let lo = ctx.expand_for_broadcast(1, rank)?;
    let hi = ctx.expand_for_broadcast(2, rank)?;
    let op = ctx.op().clone();
    let y = ctx.add(op, &[x, lo, hi])?;
    ConvertCtx::done(vec![Wrapped::stacked(y)])
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in ElementwiseKind::ALL {
        let key = OpKey::Builtin(OpKind::Elementwise(*k));
        match k {
            ElementwiseKind::Select => r.register(key, broadcast_elementwise),
            ElementwiseKind::Cast => r.register(key, cast),
            ElementwiseKind::Clip => r.register(key, clip),
        }
    }
}
