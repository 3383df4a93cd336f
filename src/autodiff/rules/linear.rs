//! Derivative rules of the `linear` family (`src/ops/linear.rs`).
//!
//! `C = op(A) · op(B)` (`op` transposes the last two dims when its flag is set) is bilinear:
//! - VJP: `Ā` and `B̄` are products of `C̄` with the other operand, with the transpose flags
//!   chosen so that no explicit transpose node is needed (table in `vjp_operands`);
//! - JVP: `Ċ = op(Ȧ) · op(B) + op(A) · op(Ḃ)` with the op's own flags.
//!
//! Both are built from `matmul` / `batch_matmul` nodes of the op's own inputs, so they are
//! differentiable again (hessians), w.r.t. constants as much as inputs. The rules are
//! symbolic: they never look at an operand's value or producer (a weight read transposed
//! by `C̄ Wᵀ` is read through the transpose flag; making a constant's copy row-major is
//! the session's job, `exec::pretranspose`). For `batch_matmul` the batch dims broadcast,
//! so each cotangent is computed at the broadcast batch shape and summed back to its
//! operand's shape with [`sum_to`]. Integer products have no derivatives (only floats
//! carry them).

use crate::autodiff::util::{add_opt, sum_to};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::{LinearKind, LinearOp, Op};

/// Cotangents of the inputs.
pub fn vjp(op: &LinearOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if !cx.need(0) && !cx.need(1) {
        return Ok(vec![None, None]);
    }
    let (a, b) = (cx.x(0), cx.x(1));
    let dc = cx.dy(0)?;
    let (ta, tb) = flags(op);
    let (need_a, need_b) = (cx.need(0), cx.need(1));
    let g = &mut *cx.g;
    let operands = vjp_operands(ta, tb, a, b, dc);
    [(need_a, a), (need_b, b)]
        .into_iter()
        .zip(operands)
        .map(|((need, x), (l, r, (fl, fr)))| {
            need.then(|| product(g, op, l, r, fl, fr).and_then(|d| reduce_batch(g, op, d, x))).transpose()
        })
        .collect()
}

/// Tangents of the outputs.
pub fn jvp(op: &LinearOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let (a, b) = (cx.x(0), cx.x(1));
    let (ta, tb) = (cx.t(0), cx.t(1));
    let g = &mut *cx.g;
    let from_a = ta.map(|t| g.add_op(Op::Linear(op.clone()), &[t, b])).transpose()?;
    let from_b = tb.map(|t| g.add_op(Op::Linear(op.clone()), &[a, t])).transpose()?;
    Ok(vec![add_opt(g, from_a, from_b)?])
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: LinearKind) -> bool {
    true
}

fn flags(op: &LinearOp) -> (bool, bool) {
    match *op {
        LinearOp::MatMul { transpose_a, transpose_b } => (transpose_a, transpose_b),
        LinearOp::BatchMatMul { adj_a, adj_b } => (adj_a, adj_b),
    }
}

/// `(lhs, rhs, (flag_lhs, flag_rhs))` of the products giving `Ā` and `B̄`:
///
/// | `C =`     | `Ā`       | `B̄`       |
/// |-----------|-----------|-----------|
/// | `A B`     | `C̄ Bᵀ`    | `Aᵀ C̄`    |
/// | `A Bᵀ`    | `C̄ B`     | `C̄ᵀ A`    |
/// | `Aᵀ B`    | `B C̄ᵀ`    | `A C̄`     |
/// | `Aᵀ Bᵀ`   | `Bᵀ C̄ᵀ`   | `C̄ᵀ Aᵀ`   |
#[allow(clippy::type_complexity)]
fn vjp_operands(ta: bool, tb: bool, a: ValueId, b: ValueId, dc: ValueId) -> [(ValueId, ValueId, (bool, bool)); 2] {
    match (ta, tb) {
        (false, false) => [(dc, b, (false, true)), (a, dc, (true, false))],
        (false, true) => [(dc, b, (false, false)), (dc, a, (true, false))],
        (true, false) => [(b, dc, (false, true)), (a, dc, (false, false))],
        (true, true) => [(b, dc, (true, true)), (dc, a, (true, true))],
    }
}

/// The same kind of product as `op`, with the given flags.
fn product(g: &mut Graph, op: &LinearOp, l: ValueId, r: ValueId, fl: bool, fr: bool) -> Result<ValueId> {
    match op {
        LinearOp::MatMul { .. } => g.matmul_t(l, r, fl, fr),
        LinearOp::BatchMatMul { .. } => g.batch_matmul_t(l, r, fl, fr),
    }
}

/// Sum a `batch_matmul` cotangent (at the broadcast batch shape) back to the operand's
/// batch shape; `matmul` cotangents already have the operand's shape.
fn reduce_batch(g: &mut Graph, op: &LinearOp, d: ValueId, x: ValueId) -> Result<ValueId> {
    match op {
        LinearOp::MatMul { .. } => Ok(d),
        LinearOp::BatchMatMul { .. } => sum_to(g, d, x),
    }
}
