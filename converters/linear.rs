//! Converters for matmul / batch_matmul (paper §3.4: loop invariance).
//!
//! The 4 stacked/unstacked patterns of `matmul(a, b)` (each with both transpose flags):
//! - both invariant: never reaches the converter (reused as is);
//! - stacked `a` `[n,m,k]`, invariant `b`: ONE matmul `[n*m,k] x [k,p]` reshaped to `[n,m,p]`
//!   (a transposed stacked `a` goes through batch_matmul with a broadcast rhs instead);
//! - invariant `a`, stacked `b` `[n,k,p]`: the transposed form `a x [k, n*p]` — one GEMM,
//!   the weight is never tiled;
//! - both stacked: one batch_matmul over the loop axis.

use crate::Result;
use crate::ops::{LinearKind, LinearOp, Op, OpKind};
use crate::tensor::Dim;
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry};

fn fixed(d: &Dim) -> Option<i64> {
    d.value().map(|v| v as i64)
}

fn matmul(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Linear(LinearOp::MatMul { transpose_a: ta, transpose_b: tb }) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a matmul");
    };
    let (a, b) = (ctx.input(0), ctx.input(1));
    let out_t = ctx.output_type(0).clone();
    let (m, p) = (out_t.shape.dim(0).clone(), out_t.shape.dim(1).clone());
    let y = match (a.stacked, b.stacked) {
        (true, true) => ctx.graph().batch_matmul_t(a.value, b.value, ta, tb)?,
        (true, false) if !ta => {
            let a2 = ctx.flatten_first_two(a.value)?;
            let y = ctx.graph().matmul_t(a2, b.value, false, tb)?;
            match m.value() {
                Some(mv) => ctx.unflatten_first_known(y, mv)?,
                None => ctx.unflatten_first(y)?,
            }
        }
        (true, false) => ctx.graph().batch_matmul_t(a.value, b.value, true, tb)?,
        (false, true) => {
            // y_i = op(a) · op(b_i): gather the loop into b's columns.
            let (Some(mv), Some(pv)) = (fixed(&m), fixed(&p)) else {
                let y = ctx.graph().batch_matmul_t(a.value, b.value, ta, tb)?;
                return Converted::stacked(y);
            };
            let g = ctx.graph();
            let y = if tb {
                // b_i is [p, k]: rows of all iterations stack into [n*p, k].
                let b2 = merge(g, b.value)?;
                g.matmul_t(a.value, b2, ta, true)?
            } else {
                // b_i is [k, p]: [n, k, p] -> [k, n, p] -> [k, n*p].
                let bt = g.transpose(b.value, &[1, 0, 2])?;
                let kdim = ctx_dim(g, b.value, 1)?;
                let b2 = g.reshape(bt, &[kdim, -1])?;
                g.matmul_t(a.value, b2, ta, false)?
            };
            // [m, n*p] -> [m, n, p] -> [n, m, p]
            let y3 = g.reshape(y, &[mv, -1, pv])?;
            g.transpose(y3, &[1, 0, 2])?
        }
        (false, false) => return ConvertCtx::unhandled("no stacked input"),
    };
    Converted::stacked(y)
}

fn merge(g: &mut crate::Graph, v: crate::ValueId) -> Result<crate::ValueId> {
    crate::vectorize::flatten_first_two(g, v)
}

fn ctx_dim(g: &crate::Graph, v: crate::ValueId, axis: usize) -> Result<i64> {
    let t = g.value_type(v)?;
    Ok(t.shape.dim(axis).value().map_or(-1, |d| d as i64))
}

fn batch_matmul(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let op = ctx.op().clone();
    // Align the loop axis against the other operand's batch dims.
    let rank = ctx.input_type(0).rank().max(ctx.input_type(1).rank());
    let a = ctx.expand_for_broadcast(0, rank)?;
    let b = ctx.expand_for_broadcast(1, rank)?;
    let y = ctx.add(op, &[a, b])?;
    Converted::stacked(y)
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in LinearKind::ALL {
        let key = OpKey::Builtin(OpKind::Linear(*k));
        match k {
            LinearKind::MatMul => r.register(key, matmul),
            LinearKind::BatchMatMul => r.register(key, batch_matmul),
        }
    }
}
