//! The one-row form: control flow in a pfor of statically ONE iteration.
//!
//! With `n = 1` known when converting, a loop-variant predicate selects between nothing:
//! the only iteration takes its branch, and a while loop's active set is that row until it
//! finishes. The Subset form's per-step partition (`nonzero`, gathers of the active rows and
//! captures, scatters of finished rows) and the Mask form's `select`s are pure overhead
//! there, so the op is re-emitted as it is on its only row: each stacked input `[1, ...]`
//! loses its leading axis, the original cond/while runs once per run (exactly as the loop
//! runs it for iteration 0: the same branch, the same trips, the same cap, the same side
//! effects and errors), and each output gets the leading axis back (stacked).
//!
//! Invariant: applies only when `LoopInfo::n_static == Some(1)`; the results are the loop's
//! row 0 bit for bit (no op is evaluated in a different form), and the emitted node is a
//! plain per-iteration cond/while, which autodiff and an enclosing pfor treat as any other.

use super::SubsetForm;
use crate::Result;
use crate::ops::{ControlOp, Op, ShapeOp};
use crate::vectorize::{ConvertCtx, Converted, Wrapped};

/// True if the node should take the one-row form: a cond or while (not a Subset-form node an
/// inner pfor emitted, which [`combined`](super::combined) rebuilds over the combined rows
/// whatever the outer loop's size), one static iteration and some stacked input.
pub(super) fn applies(ctx: &ConvertCtx<'_>, op: &ControlOp) -> bool {
    let emitted = match op {
        ControlOp::Cond { then, .. } => then.origin::<SubsetForm>().is_some(),
        ControlOp::While { body, .. } => body.origin::<SubsetForm>().is_some(),
        _ => return false,
    };
    !emitted && ctx.loop_info().n_static == Some(1) && ctx.any_stacked()
}

/// Re-emit the node on the only row (see the module docs).
pub(super) fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let op = ctx.op().clone();
    let inputs = ctx.inputs().to_vec();
    let g = ctx.graph();
    let mut args = Vec::with_capacity(inputs.len());
    for w in inputs {
        args.push(if w.stacked {
            g.add_op(Op::Shape(ShapeOp::Squeeze { axes: vec![0] }), &[w.value])?
        } else {
            w.value
        });
    }
    let outs = g.add_op_multi(op, &args)?;
    let mut stacked = Vec::with_capacity(outs.len());
    for v in outs {
        stacked.push(Wrapped::stacked(g.expand_dims(v, 0)?));
    }
    ConvertCtx::done(stacked)
}
