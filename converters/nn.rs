//! Converters for neural-network layers.
//!
//! Per-channel parameters that are loop-invariant keep the fused kernel on the stacked
//! activations (bias_add, layer_norm, batch_norm fold n into their leading dims); stacked
//! parameters decompose into broadcasting elementwise ops; l2_loss becomes a reduction over
//! the per-iteration axes. Softmaxes and losses are derived (`src/ops/signature.rs`).

use crate::ops::{Batching, NnKind, NnOp, Op, OpKind};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry};
use crate::{Result, ValueId};

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Nn(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not an nn op");
    };
    let rank = ctx.input_type(0).rank();
    match op {
        NnOp::BiasAdd => {
            if !ctx.is_stacked(1) {
                let x = ctx.stacked(0)?;
                let b = ctx.input(1).value;
                return Converted::stacked(ctx.graph().bias_add(x, b)?);
            }
            let x = ctx.expand_for_broadcast(0, rank)?;
            let b = ctx.expand_for_broadcast(1, rank)?;
            Converted::stacked(ctx.graph().add(x, b)?)
        }
        NnOp::L2Loss => {
            let x = ctx.stacked(0)?;
            let axes: Vec<i64> = (1..=rank as i64).collect();
            let g = ctx.graph();
            let sq = g.square(x)?;
            let s = g.reduce_sum(sq, Some(&axes), false)?;
            Converted::stacked(g.mul_scalar(s, 0.5)?)
        }
        NnOp::LayerNorm { epsilon } => {
            if !ctx.is_stacked(1) && !ctx.is_stacked(2) {
                let x = ctx.stacked(0)?;
                let (gm, bt) = (ctx.input(1).value, ctx.input(2).value);
                return Converted::stacked(ctx.graph().layer_norm(x, gm, bt, epsilon)?);
            }
            // stacked scale or offset: the builder's broadcast form (unit-scale node, then a
            // broadcasting mul and add), which needs a fixed channel dim
            if ctx.input_type(0).shape.dims().last().and_then(|d| d.value()).is_none() {
                return ConvertCtx::unhandled("layer_norm with stacked parameters of dynamic size");
            }
            let x = ctx.stacked(0)?;
            let gm = ctx.expand_for_broadcast(1, rank)?;
            let bt = ctx.expand_for_broadcast(2, rank)?;
            Converted::stacked(ctx.graph().layer_norm(x, gm, bt, epsilon)?)
        }
        NnOp::BatchNorm { epsilon } => {
            if (1..5).all(|k| !ctx.is_stacked(k)) {
                let x = ctx.stacked(0)?;
                let p: Vec<ValueId> = (1..5).map(|k| ctx.input(k).value).collect();
                return Converted::stacked(ctx.graph().batch_norm(x, p[0], p[1], p[2], p[3], epsilon)?);
            }
            let x = ctx.expand_for_broadcast(0, rank)?;
            let mean = ctx.expand_for_broadcast(1, rank)?;
            let var = ctx.expand_for_broadcast(2, rank)?;
            let off = ctx.expand_for_broadcast(3, rank)?;
            let scale = ctx.expand_for_broadcast(4, rank)?;
            let g = ctx.graph();
            let c = g.sub(x, mean)?;
            let v = g.add_scalar(var, epsilon)?;
            let r = g.rsqrt(v)?;
            let y = g.mul(c, r)?;
            let y = g.mul(y, scale)?;
            Converted::stacked(g.add(y, off)?)
        }
        NnOp::Softmax { .. }
        | NnOp::LogSoftmax { .. }
        | NnOp::SoftmaxCrossEntropy
        | NnOp::SparseSoftmaxCrossEntropy
        | NnOp::SigmoidCrossEntropy => ConvertCtx::unhandled("derived from the declared batching class"),
    }
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    // softmaxes and losses are derived from their declared batching class
    for k in NnKind::ALL.iter().filter(|k| k.batching() == Batching::Custom) {
        r.register(OpKey::Builtin(OpKind::Nn(*k)), convert);
    }
}
