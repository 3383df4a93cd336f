//! Derivative rules of the `state` family (`src/ops/state.rs`): none flow, by decision.
//!
//! - `read_variable` has no graph inputs: its value comes from the session, so there is
//!   nothing to send a cotangent to. A variable is NOT an implicit differentiation target
//!   (unlike TF's resource variables): to differentiate w.r.t. a variable, pass the read's
//!   output value as an `x` to `gradients` / `jvp` — the drivers then treat it like any
//!   other value (its own rule is never consulted).
//! - `assign` / `assign_add` are writes: their output (the new value) exists for ordering
//!   and convenience, but a derivative graph never re-runs a side effect, and a gradient
//!   "through" a write would describe a value that a later read need not see. So, as in TF
//!   (where `Assign`/`AssignAdd` are registered not differentiable), no cotangent reaches
//!   the written value and no tangent leaves the write: to differentiate a computation,
//!   differentiate the value before it is assigned.
//!
//! Every rule returns explicit `None`s and [`differentiable`] is `false` for all kinds.

use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{StateKind, StateOp};

/// Cotangents of the inputs: none (see the module doc).
pub fn vjp(_op: &StateOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Ok(vec![None; cx.inputs.len()])
}

/// Tangents of the outputs: none (see the module doc).
pub fn jvp(_op: &StateOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Ok(vec![None; cx.outputs.len()])
}

/// Whether derivatives flow through this kind: never (reads have no inputs, writes are
/// side effects).
pub fn differentiable(_k: StateKind) -> bool {
    false
}
