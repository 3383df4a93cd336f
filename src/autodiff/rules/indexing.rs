//! Derivative rules of the `indexing` family (`src/ops/indexing.rs`).
//!
//! Implemented so far (what `while` gradients record and read back):
//! - `gather` on axis 0 without batch dims: the cotangent is scattered back with
//!   `tensor_scatter_add` (duplicates add); JVP gathers the tangent;
//! - `dynamic_update_slice`: the operand gets the cotangent with the written window
//!   zeroed, the update gets the window (`dynamic_slice`, needs a static update shape);
//!   JVP updates the operand tangent with the update tangent.
//!
//! Indices and starts are integers and never get cotangents. Other kinds are `Unsupported`.

use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{IndexKind, IndexOp};

/// Cotangents of the inputs.
pub fn vjp(op: &IndexOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    match op {
        IndexOp::Gather { axis: 0, batch_dims: 0 } => {
            if !cx.need(0) {
                return Ok(vec![None, None]);
            }
            let (p, i) = (cx.x(0), cx.x(1));
            let dy = cx.dy(0)?;
            let g = &mut *cx.g;
            let zeros = g.zeros_like(p)?;
            let idx = g.expand_dims(i, -1)?;
            Ok(vec![Some(g.tensor_scatter_add(zeros, idx, dy)?), None])
        }
        IndexOp::DynamicUpdateSlice => {
            let (u, s) = (cx.x(1), cx.x(2));
            let (need_o, need_u) = (cx.need(0), cx.need(1));
            if !need_o && !need_u {
                return Ok(vec![None, None, None]);
            }
            let dy = cx.dy(0)?;
            let g = &mut *cx.g;
            let d_o = if need_o {
                let z = g.zeros_like(u)?;
                Some(g.dynamic_update_slice(dy, z, s)?)
            } else {
                None
            };
            let d_u = if need_u {
                let su = g.shape(u)?;
                let sizes = su.as_fixed().ok_or_else(|| {
                    crate::Error::unsupported(
                        "dynamic_update_slice",
                        format!("the cotangent of an update with a dynamic shape {su}"),
                    )
                })?;
                Some(g.dynamic_slice(dy, s, &sizes)?)
            } else {
                None
            };
            Ok(vec![d_o, d_u, None])
        }
        _ => Err(cx.unsupported(format!("no VJP rule yet for {}", op.kind().name()))),
    }
}

/// Tangents of the outputs.
pub fn jvp(op: &IndexOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    match op {
        IndexOp::Gather { axis, batch_dims } => {
            let Some(t) = cx.t(0) else { return Ok(vec![None]) };
            let i = cx.x(1);
            Ok(vec![Some(cx.g.gather_batched(t, i, *axis, *batch_dims)?)])
        }
        IndexOp::DynamicUpdateSlice => {
            if cx.t(0).is_none() && cx.t(1).is_none() {
                return Ok(vec![None]);
            }
            let (to, tu) = (cx.t_or_zero(0)?, cx.t_or_zero(1)?);
            let s = cx.x(2);
            Ok(vec![Some(cx.g.dynamic_update_slice(to, tu, s)?)])
        }
        _ => Err(cx.unsupported(format!("no JVP rule yet for {}", op.kind().name()))),
    }
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: IndexKind) -> bool {
    true
}
