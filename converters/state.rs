//! Converters for variables (paper §3.8).
//!
//! Reads take no inputs, so they never depend on the loop index: they stay loop-invariant
//! by construction. `assign_add` of a stacked value is a commutative accumulation: reduce
//! over the loop axis, then apply once. `assign` of a stacked value has no meaningful
//! parallel semantics (which iteration wins?) and is an error; `assign` of an invariant
//! value inside the loop writes the same value each iteration, so it is applied once.

use crate::ops::{Op, OpKind, StateKind, StateOp};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, Wrapped};
use crate::{Error, Result};

fn assign(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    if ctx.is_stacked(0) {
        return Err(Error::unsupported(
            "assign",
            "assigning a loop-variant value to a variable inside pfor (iterations would race); use assign_add",
        ));
    }
    let op = ctx.op().clone();
    let v = ctx.unstacked(0)?;
    let y = ctx.add(op, &[v])?;
    ConvertCtx::done(vec![Wrapped::unstacked(y)])
}

fn assign_add(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::State(StateOp::AssignAdd { var }) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not assign_add");
    };
    let w = ctx.input(0);
    // Each iteration adds its value: the loop adds the sum over iterations (or n·v).
    let total = if w.stacked {
        ctx.graph().reduce_sum(w.value, Some(&[0]), false)?
    } else {
        let n = ctx.loop_len();
        let dt = ctx.input_type(0).dtype;
        let g = ctx.graph();
        let nf = g.cast(n, dt)?;
        g.mul(w.value, nf)?
    };
    let y = ctx.graph().assign_add(&var, total)?;
    ConvertCtx::done(vec![Wrapped::unstacked(y)])
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in StateKind::ALL {
        let key = OpKey::Builtin(OpKind::State(*k));
        match k {
            StateKind::Read => {} // no inputs: never loop-variant (see module docs)
            StateKind::Assign => r.register(key, assign),
            StateKind::AssignAdd => r.register(key, assign_add),
        }
    }
}
