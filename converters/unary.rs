//! Converters for unary elementwise ops: the op applies to the stacked value unchanged.

use crate::Result;
use crate::ops::{Op, OpKind, UnaryKind};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, Wrapped};

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let op = ctx.op().clone();
    let x = ctx.stacked(0)?;
    let y = ctx.add(op, &[x])?;
    ConvertCtx::done(vec![Wrapped::stacked(y)])
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in UnaryKind::ALL {
        r.register(OpKey::Builtin(OpKind::Unary(*k)), convert);
    }
    let _ = Op::Unary;
}
