//! The converter derived from an op's declared [`Batching`] class: one converter for every
//! kind that declares a class other than [`Batching::Custom`] (see `src/ops/signature.rs`),
//! registered for the built-in kinds by `converters::register_all` and used for a custom op
//! that declares a class and has no converter of its own.
//!
//! Invariants (paper §3.4): an invariant operand of a broadcasting op is never tiled; the
//! other classes stack only operands whose per-iteration shapes must agree with a stacked
//! one; the emitted op has exactly the per-iteration output types with the loop axis
//! prepended (the driver checks it).

use super::{ConvertCtx, Converted, Wrapped};
use crate::error::Result;
use crate::ops::Batching;

/// Shift a per-iteration axis past the loop axis: non-negative axes move by one, negative
/// axes count from the end and stay.
pub fn shift_axis(axis: i64) -> i64 {
    if axis >= 0 { axis + 1 } else { axis }
}

/// Convert the node by its op's declared [`Batching`] class.
pub fn derived_convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let op = ctx.op().clone();
    match op.batching() {
        Batching::Elementwise => emit_stacked(ctx, op),
        Batching::Broadcasting => broadcast_convert(ctx),
        Batching::AxisMapped => match op.map_axes(&shift_axis) {
            Some(mapped) => emit_stacked(ctx, mapped),
            None => ConvertCtx::unhandled(format!("{} declares AxisMapped but has no axes to map", op.name())),
        },
        Batching::BatchFolding { batched } => fold_batch(ctx, batched),
        Batching::Custom => ConvertCtx::unhandled(format!("{} has no converter", op.name())),
    }
}

/// [`Batching::Broadcasting`] (also for ops that broadcast without declaring it, e.g. a
/// random op with a loop-variant key): with per-iteration output rank R, each stacked
/// operand `[n, s...]` of rank r < R becomes `[n, 1^(R-r), s...]`; invariant operands stay
/// as they are (numpy broadcasting aligns trailing axes).
pub fn broadcast_convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let rank = ctx.output_type(0).rank();
    let ins = (0..ctx.num_inputs()).map(|k| ctx.expand_for_broadcast(k, rank)).collect::<Result<Vec<_>>>()?;
    let op = ctx.op().clone();
    let outs = ctx.emit(op, &ins)?;
    ConvertCtx::done(outs.into_iter().map(Wrapped::stacked).collect())
}

/// `op` on every input stacked (an invariant one tiled); every output stacked.
fn emit_stacked(ctx: &mut ConvertCtx<'_>, op: crate::ops::Op) -> Result<Converted> {
    let ins = (0..ctx.num_inputs()).map(|k| ctx.stacked(k)).collect::<Result<Vec<_>>>()?;
    let outs = ctx.emit(op, &ins)?;
    ConvertCtx::done(outs.into_iter().map(Wrapped::stacked).collect())
}

/// [`Batching::BatchFolding`]: `[n, b, ..] -> [n*b, ..]` on the batched inputs, the op,
/// then `[n*b, ..] -> [n, b, ..]` on every output.
fn fold_batch(ctx: &mut ConvertCtx<'_>, batched: &[usize]) -> Result<Converted> {
    let op = ctx.op().clone();
    if let Some(k) = (0..ctx.num_inputs()).find(|k| ctx.is_stacked(*k) && !batched.contains(k)) {
        return ConvertCtx::unhandled(format!("input {k} of {} is loop-variant but carries no batch axis", op.name()));
    }
    let Some(&first) = batched.iter().find(|&&k| k < ctx.num_inputs()) else {
        return ConvertCtx::unhandled(format!("{} declares no batched input", op.name()));
    };
    let b = ctx.input_type(first).shape.dims().first().and_then(|d| d.value());
    let mut ins = Vec::with_capacity(ctx.num_inputs());
    for k in 0..ctx.num_inputs() {
        if batched.contains(&k) {
            let x = ctx.stacked(k)?;
            ins.push(ctx.flatten_first_two(x)?);
        } else {
            ins.push(ctx.input(k).value);
        }
    }
    let mut outs = Vec::new();
    for y in ctx.emit(op, &ins)? {
        let y = match b {
            Some(b) => ctx.unflatten_first_known(y, b)?,
            None => ctx.unflatten_first(y)?,
        };
        outs.push(Wrapped::stacked(y));
    }
    ConvertCtx::done(outs)
}
