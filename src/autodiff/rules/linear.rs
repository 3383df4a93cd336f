//! Derivative rules of the `linear` family (`src/ops/linear.rs`).
//!
//! `C = op(A) · op(B)` (`op` transposes the last two dims when its flag is set) is bilinear:
//! - VJP: `Ā` and `B̄` are products of `C̄` with the other operand, with the transpose flags
//!   chosen so that no explicit transpose node is needed (table in [`vjp_operands`]);
//! - JVP: `Ċ = op(Ȧ) · op(B) + op(A) · op(Ḃ)` with the op's own flags.
//!
//! Both are built from `matmul` / `batch_matmul` nodes, so they are differentiable again
//! (hessians). For `batch_matmul` the batch dims broadcast, so each cotangent is computed
//! at the broadcast batch shape and summed back to its operand's shape with [`sum_to`].
//! Integer products have no derivatives (only floats carry them).

use crate::autodiff::util::{add_opt, sum_to};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::{LinearKind, LinearOp, Op};
use crate::tensor::Tensor;

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
    let [(la, ra, fa), (lb, rb, fb)] = vjp_operands(ta, tb, a, b, dc);
    let da = if need_a {
        let (ra, fr) = pretransposed(g, op, ra, fa.1)?;
        let d = product(g, op, la, ra, fa.0, fr)?;
        Some(reduce_batch(g, op, d, a)?)
    } else {
        None
    };
    let db = if need_b {
        let d = product(g, op, lb, rb, fb.0, fb.1)?;
        Some(reduce_batch(g, op, d, b)?)
    } else {
        None
    };
    Ok(vec![da, db])
}

/// `(Bᵀ as a new constant, false)` for a rank-2 float constant `B` that a `matmul` would
/// read transposed (`flag`); otherwise `(b, flag)` unchanged.
///
/// A GEMM reading its right operand transposed runs ~15% slower than one reading it in
/// row-major order (W5: `C̄ Wᵀ` with a constant LSTM weight, ten times per step). The
/// transposed constant is built once, at graph-build time, and shared by value: an existing
/// constant of the graph equal to `Bᵀ` is reused, so unrolled steps add one copy in all.
fn pretransposed(g: &mut Graph, op: &LinearOp, b: ValueId, flag: bool) -> Result<(ValueId, bool)> {
    if !flag || !matches!(op, LinearOp::MatMul { .. }) {
        return Ok((b, flag));
    }
    let value = match &g.node(b.node)?.op {
        Op::Const { value } if value.rank() == 2 && value.dtype().is_float() => value.clone(),
        _ => return Ok((b, flag)),
    };
    let t = crate::dispatch_float!(value.dtype(), T => {
        let a = value.to_array::<T>()?;
        Tensor::from_array(a.t().as_standard_layout().into_owned())
    }, _ => return Ok((b, flag)));
    for n in g.node_ids() {
        if let Op::Const { value } = &g.node(n)?.op
            && value.shape() == t.shape()
            && value.dtype() == t.dtype()
            && *value == t
        {
            return Ok((ValueId { node: n, slot: 0 }, false));
        }
    }
    Ok((g.constant(t), false))
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
