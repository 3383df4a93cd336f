//! Converters for broadcasting elementwise ops (binary ops, and `select` / `clip` in
//! `elementwise.rs` reuse [`broadcast_elementwise`]).
//!
//! Rule: with per-iteration output rank R, each stacked operand `[n, s...]` of rank r < R
//! becomes `[n, 1^(R-r), s...]`; unstacked operands stay as they are — numpy broadcasting
//! aligns trailing axes, so the result is `[n] + per-iteration output shape`. Invariant
//! operands are never tiled.

use crate::Result;
use crate::ops::{BinaryKind, OpKind};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, Wrapped};

/// Emit the op on aligned operands; the output is stacked.
pub(crate) fn broadcast_elementwise(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let rank = ctx.output_type(0).rank();
    let mut ins = Vec::with_capacity(ctx.num_inputs());
    for k in 0..ctx.num_inputs() {
        ins.push(ctx.expand_for_broadcast(k, rank)?);
    }
    let op = ctx.op().clone();
    let y = ctx.add(op, &ins)?;
    ConvertCtx::done(vec![Wrapped::stacked(y)])
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in BinaryKind::ALL {
        r.register(OpKey::Builtin(OpKind::Binary(*k)), broadcast_elementwise);
    }
}
