//! Derivative rules of the `nn` family (`src/ops/nn.rs`).

use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{NnKind, NnOp};

/// Cotangents of the inputs.
pub fn vjp(op: &NnOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Err(cx.unsupported(format!("no VJP rule yet for {}", op.kind().name())))
}

/// Tangents of the outputs.
pub fn jvp(op: &NnOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    Err(cx.unsupported(format!("no JVP rule yet for {}", op.kind().name())))
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: NnKind) -> bool {
    true
}
