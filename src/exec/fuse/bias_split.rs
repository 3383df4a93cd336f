//! `split(bias_add(z, b))` along the last axis → `bias_add(split(z)_i, split(b)_i)`: each
//! piece's bias moves next to the elementwise ops reading that piece, so it joins their fused
//! group instead of making a pass of its own over the whole of `z` (an LSTM step's gate
//! pre-activations: `[m, 4h]` written once by the GEMM, read once by the gate group).
//!
//! Fires when `y = bias_add(z, b)` is read only by one `split` along its last axis, `y` is not
//! fetched, `y`'s last dim and `b`'s shape `[D]` are fixed, and every piece that is read has
//! a reader that elementwise fusion can take (otherwise the rewrite would only add steps).
//!
//! Invariants: the pieces hold the same values as before (`bias_add` adds `b[j]` to column
//! `j`; the split of `b` at the same sizes pairs each column with its own bias entry), keep
//! their slots and types, and are produced at the split's position, after `z` and `b`; a
//! piece nothing reads gets no `bias_add`. The new `split` of `z` is attributed to the old
//! split's node, the `split` of `b` and the per-piece adds to the old `bias_add`'s node.

use hashbrown::HashSet;

use super::super::Step;
use super::PlanView;
use crate::ops::{NnOp, Op, SlicingOp};
use crate::passes::pattern::{Dataflow, sole_reader};
use crate::tensor::{Dim, Shape, TensorType};

/// Rewrite every eligible `split(bias_add(..))` in `steps` (before elementwise grouping);
/// new slots are numbered from `*n_slots` on. `fusable` says whether elementwise fusion can
/// take a step.
pub(crate) fn split_biases(
    steps: &mut Vec<Step>,
    n_slots: &mut usize,
    pinned: &HashSet<usize>,
    fusable: impl Fn(&Step) -> bool,
) {
    let view = PlanView::new(steps, pinned);
    // (bias step, split step) pairs, by index in the old order
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (si, st) in steps.iter().enumerate() {
        let Some(Op::Nn(NnOp::BiasAdd)) = view.op(si) else { continue };
        if st.inputs.len() != 2 || st.outputs.len() != 1 {
            continue;
        }
        let y = st.outputs[0];
        let Some(sp) = sole_reader(&view, y) else { continue };
        let split = &steps[sp];
        let Op::Slicing(SlicingOp::Split { axis, sizes }) = &split.op else { continue };
        let ty = &st.out_types[0];
        let rank = ty.shape.rank() as i64;
        let Some(Dim::Fixed(d)) = ty.shape.dims().last().cloned() else { continue };
        let last_axis = rank >= 1 && (*axis == rank - 1 || *axis == -1);
        let b_fixed = view.value_type(st.inputs[1].0).is_some_and(|t| t.shape.dims() == [Dim::Fixed(d)]);
        let pieces_fuse = split.outputs.iter().all(|&slot| {
            let rs = view.readers(slot);
            (rs.is_empty() && !view.pinned(slot)) || rs.iter().any(|&r| fusable(&steps[r]))
        });
        if last_axis && b_fixed && split.fused.is_none() && sizes.iter().sum::<usize>() == d && pieces_fuse {
            pairs.push((si, sp));
        }
    }
    if pairs.is_empty() {
        return;
    }
    let mut replace: Vec<Option<Vec<Step>>> = (0..steps.len()).map(|_| None).collect();
    let mut removed = vec![false; steps.len()];
    for (bi, sp) in pairs {
        let (bias, split) = (&steps[bi], &steps[sp]);
        let Op::Slicing(SlicingOp::Split { sizes, .. }) = &split.op else { continue };
        let (z, b) = (bias.inputs[0].0, bias.inputs[1].0);
        let mut fresh = |k: usize| -> Vec<usize> {
            let s: Vec<usize> = (*n_slots..*n_slots + k).collect();
            *n_slots += k;
            s
        };
        let k = sizes.len();
        let (z_slots, b_slots) = (fresh(k), fresh(k));
        let b_dtype = bias.out_types[0].dtype;
        let mut new = vec![
            Step {
                node: split.node,
                op: split.op.clone(),
                inputs: vec![(z, false)],
                outputs: z_slots.clone(),
                out_types: split.out_types.clone(),
                release: Vec::new(),
                fused: None,
            },
            Step {
                node: bias.node,
                op: Op::Slicing(SlicingOp::Split { axis: 0, sizes: sizes.clone() }),
                inputs: vec![(b, false)],
                outputs: b_slots.clone(),
                out_types: sizes.iter().map(|&n| TensorType::new(b_dtype, Shape::fixed(&[n]))).collect(),
                release: Vec::new(),
                fused: None,
            },
        ];
        for (i, &piece) in split.outputs.iter().enumerate() {
            if view.readers(piece).is_empty() && !view.pinned(piece) {
                continue;
            }
            new.push(Step {
                node: bias.node,
                op: bias.op.clone(),
                inputs: vec![(z_slots[i], false), (b_slots[i], false)],
                outputs: vec![piece],
                out_types: vec![split.out_types[i].clone()],
                release: Vec::new(),
                fused: None,
            });
        }
        removed[bi] = true;
        replace[sp] = Some(new);
    }
    let old = std::mem::take(steps);
    for (i, st) in old.into_iter().enumerate() {
        match replace[i].take() {
            Some(new) => steps.extend(new),
            None if !removed[i] => steps.push(st),
            None => {}
        }
    }
}
