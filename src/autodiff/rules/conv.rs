//! Derivative rules of the `conv` family (`src/ops/conv.rs`).

use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{ConvKind, ConvOp};

/// Cotangents of the inputs.
pub fn vjp(op: &ConvOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Err(cx.unsupported(format!("no VJP rule yet for {}", op.kind().name())))
}

/// Tangents of the outputs.
pub fn jvp(op: &ConvOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Err(cx.unsupported(format!("no JVP rule yet for {}", op.kind().name())))
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: ConvKind) -> bool {
    true
}
