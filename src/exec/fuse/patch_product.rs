//! Plan-level fusion: `extract_patches → [reshape]* → batch_matmul(adj_a)` (the vectorized
//! per-example conv filter gradient, `patchesᵀ · dy` per example) runs as ONE step whose
//! kernel reads each window tap from the input instead of materializing the patches
//! (`KH*KW` times the input, written and read back: most of the product's time at W4's
//! sizes).
//!
//! Invariants:
//! - the patches and every reshape between are fused away only when each has exactly one
//!   consumer and is not fetched; the batch product's `dy` operand is a different value;
//!   the fused step replaces the product's step (its position in the plan);
//! - results are bit-identical to the unfused plan: the fused kernel runs only where the
//!   reshapes give the product's left operand exactly `[B, E*OH*OW, KH*KW*C]` for `dy [B,
//!   E*OH*OW, O]` and the unfused product would run the depth-major kernel, and computes
//!   the same operations in the same order (`ConvOp::eval_patch_product`); anywhere else
//!   (other dtypes and shapes, a broadcast, one row per item, no AVX-512, a batch that does
//!   not divide into whole examples) the group runs op by op, so every error is the unfused
//!   one, naming the node that raised it.

use hashbrown::HashSet;

use super::PlanView;
use crate::error::{Error, Result};
use crate::exec::{ExecCtx, Step};
use crate::ir::NodeId;
use crate::ops::{ConvOp, LinearOp, Op, ShapeOp};
use crate::passes::pattern::{Dataflow, sole_reader};
use crate::tensor::Tensor;

/// A fused patch product (the plan step's inputs are `[x, dy]`).
#[derive(Clone, Debug)]
pub(crate) struct PatchProduct {
    patches_node: NodeId,
    patches: ConvOp,
    /// The reshapes between, in order.
    reshapes: Vec<(NodeId, Op)>,
    product_node: NodeId,
    product: Op,
}

impl PatchProduct {
    /// The group as text, e.g. `extract_patches{..} → reshape → batch_matmul{..}`.
    pub(crate) fn describe(&self) -> String {
        let mut s = self.patches.to_string();
        s.push_str(&" → reshape".repeat(self.reshapes.len()));
        s.push_str(&format!(" → {}", self.product));
        s
    }

    /// Run the group; errors are attributed to the node that raised them.
    pub(crate) fn eval(&self, ins: Vec<Tensor>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let [x, dy]: [Tensor; 2] = ins
            .try_into()
            .map_err(|v: Vec<Tensor>| Error::Verify(format!("fused patch product: {} inputs, expected 2", v.len())))?;
        let fused = self
            .patches
            .eval_patch_product(&x, &dy, self.reshapes.iter().map(|(_, op)| op), Some(&mut *ctx))
            .map_err(|e| e.at_node(self.product_node, self.product.to_string()))?;
        if let Some(y) = fused {
            ctx.recycle(x);
            ctx.recycle(dy);
            return Ok(vec![y]);
        }
        let op = Op::Conv(self.patches.clone());
        let mut y = op.eval(vec![x], ctx).map_err(|e| e.at_node(self.patches_node, op.to_string()))?;
        for (node, op) in &self.reshapes {
            y = op.eval(y, ctx).map_err(|e| e.at_node(*node, op.to_string()))?;
        }
        y.push(dy);
        self.product.eval(y, ctx).map_err(|e| e.at_node(self.product_node, self.product.to_string()))
    }
}

/// Fuse every eligible patch product in `steps` (before slot releases are computed);
/// `pinned` are the fetched slots.
pub(crate) fn patch_products(steps: &mut Vec<Step>, pinned: &HashSet<usize>) {
    // Match every group first (on the unchanged plan), then rewrite.
    let view = PlanView::new(steps, pinned);
    // (patches step, product step, fused group, the reshape steps between)
    let mut found: Vec<(usize, usize, PatchProduct, Vec<usize>)> = Vec::new();
    for a in 0..steps.len() {
        let Some(Op::Conv(patches @ ConvOp::ExtractPatches { .. })) = view.op(a) else { continue };
        if steps[a].outputs.len() != 1 || steps[a].inputs.len() != 1 {
            continue;
        }
        let (mut cur, mut reshapes, mut chain) = (steps[a].outputs[0], Vec::new(), Vec::new());
        let product = loop {
            let Some(c) = sole_reader(&view, cur) else { break None };
            let st = &steps[c];
            let Some(op) = view.op(c) else { break None };
            if st.outputs.len() != 1 || st.inputs.first().map(|i| i.0) != Some(cur) {
                break None;
            }
            match op {
                Op::Shape(ShapeOp::Reshape { .. }) if st.inputs.len() == 1 => {
                    reshapes.push((st.node, st.op.clone()));
                    chain.push(c);
                    cur = st.outputs[0];
                }
                Op::Linear(LinearOp::BatchMatMul { adj_a: true, adj_b: false })
                    if st.inputs.len() == 2 && st.inputs[1].0 != cur && st.out_types[0].shape.rank() == 3 =>
                {
                    break Some(c);
                }
                _ => break None,
            }
        };
        let Some(p) = product else { continue };
        let fused = PatchProduct {
            patches_node: steps[a].node,
            patches: patches.clone(),
            reshapes,
            product_node: steps[p].node,
            product: steps[p].op.clone(),
        };
        found.push((a, p, fused, chain));
    }
    let mut removed = vec![false; steps.len()];
    for (a, p, fused, chain) in found {
        let inputs = vec![steps[a].inputs[0], steps[p].inputs[1]];
        let st = &mut steps[p];
        st.inputs = inputs;
        st.fused = Some(Box::new(super::Fused::PatchProduct(fused)));
        removed[a] = true;
        for &c in &chain {
            removed[c] = true;
        }
    }
    super::remove_steps(steps, &removed);
}
