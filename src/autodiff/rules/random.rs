//! Derivative rules of the `random` family (`src/ops/random.rs`).
//!
//! - `dropout(key, x)` is linear in `x` for a fixed key: `y = x * mask / (1 - rate)`. The
//!   mask depends only on the key values, the key shape and `x`'s shape (stream = key
//!   element, counter = row-major position), so `dropout(key, dy)` with the SAME key node
//!   and rate rebuilds exactly the forward mask: that is the VJP, and `dropout(key, t)` the
//!   JVP. Both are again dropouts, so higher derivatives work too.
//! - The samplers (`random_uniform`, `random_normal`, `random_bernoulli`,
//!   `random_categorical`) are non-differentiable: their only float input (bernoulli's `p`,
//!   categorical's logits) selects discrete outcomes (bool / i64 outputs), and the
//!   distribution parameters of uniform and normal are attributes, not inputs. To
//!   differentiate w.r.t. a mean or scale, reparameterize explicitly:
//!   `mean + stddev * random_normal(key, .., 0, 1)` — the gradient then flows through the
//!   arithmetic. `fold_in` is integer key arithmetic. Keys (i64) never get gradients.

use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{RandomKind, RandomOp};

/// Cotangents of the inputs.
pub fn vjp(op: &RandomOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    match op {
        RandomOp::Dropout { rate } if cx.need(1) => {
            let (key, dy) = (cx.x(0), cx.dy(0)?);
            Ok(vec![None, Some(cx.g.dropout(dy, key, *rate)?)])
        }
        _ => Ok(vec![None; n_in]),
    }
}

/// Tangents of the outputs.
pub fn jvp(op: &RandomOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    match op {
        RandomOp::Dropout { rate } => {
            let Some(t) = cx.t(1) else { return Ok(vec![None]) };
            let key = cx.x(0);
            Ok(vec![Some(cx.g.dropout(t, key, *rate)?)])
        }
        _ => Ok(vec![None; cx.outputs.len()]),
    }
}

/// Whether derivatives flow through this kind: only `dropout` (w.r.t. `x`).
pub fn differentiable(k: RandomKind) -> bool {
    matches!(k, RandomKind::Dropout)
}
