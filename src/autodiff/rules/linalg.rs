//! Derivative rules of the `linalg` family (`src/ops/linalg.rs`).

use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{LinalgKind, LinalgOp};

/// Cotangents of the inputs.
pub fn vjp(op: &LinalgOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Err(cx.unsupported(format!("no VJP rule yet for {}", op.kind().name())))
}

/// Tangents of the outputs.
pub fn jvp(op: &LinalgOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Err(cx.unsupported(format!("no JVP rule yet for {}", op.kind().name())))
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: LinalgKind) -> bool {
    true
}
