//! The `narrow` pass of the simplification pipeline ([`simplify`](super::simplify)): a `matmul` whose result
//! reaches a `split` of its last axis (through `reshape`s that keep that axis) of which only
//! ONE piece is read computes just that piece's columns — `matmul(a, b[:, c0..c1])` — instead
//! of all of them. Reverse mode produces this shape: the cotangent of `concat(x_t, h)` in
//! `concat(x_t, h) · W` is computed whole and split, and for the first step of an unrolled
//! recurrence (a constant initial `h`) only the `x_t` columns are ever read; in the W5 LSTM
//! jacobian that skips two thirds of one of the ten backward GEMMs.
//!
//! Invariants:
//! - only fully static types; the matmul and every reshape in the chain have exactly one
//!   reader (the next link) and are no outputs, and every reshape keeps the last dim, so in
//!   row-major order column `c` of the matmul is column `c` of the reshaped value;
//! - the narrowed operand is `b`'s column range (`b` stored `[k, n]`) or row range (`b`
//!   stored `[n, k]` with `transpose_b`), folded into a new constant when `b` is one;
//! - every element of the live piece is the same dot product as before, over the same `k`
//!   terms (the GEMM's internal blocking may group the sum differently, as any GEMM of a
//!   different width may);
//! - new nodes read only values older than the split, and every reader of the live piece is
//!   rewired to the narrowed value (same static type); the old chain is left unread for the
//!   dead-node sweep.

use hashbrown::HashSet;

use super::pattern::{GraphView, const_value, redirect_uses, sole_producer};
use super::{Pass, PassCtx};
use crate::error::Result;
use crate::ir::{Graph, NodeId, ValueId};
use crate::ops::{LinearOp, Op, ShapeOp, SlicingOp};
use crate::tensor::Tensor;

/// Longest reshape chain followed between the matmul and the split.
const MAX_CHAIN: usize = 8;

/// The `narrow` pass (see the module docs).
pub(super) struct Narrow;

impl Pass for Narrow {
    fn name(&self) -> &str {
        "narrow"
    }

    /// Narrow every eligible matmul feeding a split in the region; the live piece's readers
    /// (and outputs) move to the narrowed value, the old chain is left for `dead`.
    fn run(&self, g: &mut Graph, cx: &mut PassCtx) -> Result<()> {
        // Only nodes of the region as it was before this pass (so nothing is narrowed twice).
        let region = cx.region(g);
        let in_region: HashSet<NodeId> = region.iter().copied().collect();
        for s in region {
            let Some(plan) = plan_for(g, s, &in_region, &cx.outputs)? else { continue };
            let Plan { live, c0, width, chain, matmul } = plan;
            let mm = g.node(matmul)?.clone();
            let Op::Linear(LinearOp::MatMul { transpose_a, transpose_b }) = mm.op else { continue };
            let (a, b) = (mm.inputs[0], mm.inputs[1]);
            let (begin, size) =
                if transpose_b { ([c0 as i64, 0], [width as i64, -1]) } else { ([0, c0 as i64], [-1, width as i64]) };
            let b_narrow = match const_value(g, b) {
                Some(value) => {
                    let value = slice_constant(value, &begin, &size)?;
                    g.constant(value)
                }
                None => g.slice(b, &begin, &size)?,
            };
            let mut v = g.matmul_t(a, b_narrow, transpose_a, transpose_b)?;
            for &r in chain.iter().rev() {
                let mut dims: Vec<i64> = g
                    .value_type(ValueId { node: r, slot: 0 })?
                    .shape
                    .as_fixed()
                    .map(|d| d.iter().map(|&x| x as i64).collect())
                    .unwrap_or_default();
                if let Some(last) = dims.last_mut() {
                    *last = width as i64;
                }
                v = g.reshape(v, &dims)?;
            }
            redirect_uses(g, ValueId { node: s, slot: live as u32 }, v, &mut cx.outputs)?;
            cx.report.narrowed += 1;
        }
        Ok(())
    }
}

/// What to narrow for split `s`.
struct Plan {
    /// The one read output of the split.
    live: usize,
    /// Its first column and width.
    c0: usize,
    width: usize,
    /// The reshapes between matmul and split, split side first.
    chain: Vec<NodeId>,
    matmul: NodeId,
}

fn plan_for(g: &Graph, s: NodeId, in_region: &HashSet<NodeId>, outputs: &[ValueId]) -> Result<Option<Plan>> {
    let Some(node) = g.find_node(s) else { return Ok(None) };
    let Op::Slicing(SlicingOp::Split { axis, sizes }) = &node.op else { return Ok(None) };
    let Some(&x) = node.inputs.first() else { return Ok(None) };
    let Some(xd) = g.value_type(x)?.shape.as_fixed() else { return Ok(None) };
    let rank = xd.len() as i64;
    if rank == 0 || (*axis != rank - 1 && *axis != -1) {
        return Ok(None);
    }
    let n = xd[xd.len() - 1];
    // the read outputs of the split
    let mut live: HashSet<usize> = outputs.iter().filter(|o| o.node == s).map(|o| o.slot as usize).collect();
    for c in g.consumers(s) {
        live.extend(g.node(c)?.inputs.iter().filter(|v| v.node == s).map(|v| v.slot as usize));
    }
    let Some(&k) = live.iter().next() else { return Ok(None) };
    if live.len() != 1 || sizes.get(k).is_none_or(|&w| w == n) {
        return Ok(None);
    }
    let (c0, width) = (sizes[..k].iter().sum(), sizes[k]);
    // Walk up input 0 (of the split, then of each reshape): a reshape or the matmul in the
    // region whose result only the node below reads (once) and that is no output.
    let view = GraphView { graph: g, outputs };
    let link = |op: &Op| matches!(op, Op::Shape(ShapeOp::Reshape { .. }) | Op::Linear(LinearOp::MatMul { .. }));
    let (mut reader, mut chain) = (s, Vec::new());
    loop {
        let Some(pn) = sole_producer(&view, reader, 0, link).filter(|p| in_region.contains(p)) else {
            return Ok(None);
        };
        let p = g.node(pn)?;
        match &p.op {
            Op::Shape(ShapeOp::Reshape { .. }) if chain.len() < MAX_CHAIN => {
                let keeps_last = g.value_type(p.inputs[0])?.shape.as_fixed().is_some_and(|d| d.last() == Some(&n));
                if !keeps_last {
                    return Ok(None);
                }
                chain.push(pn);
                reader = pn;
            }
            Op::Linear(LinearOp::MatMul { .. }) => {
                let static_b = g.value_type(p.inputs[1])?.shape.as_fixed().is_some_and(|d| d.len() == 2);
                return Ok(static_b.then_some(Plan { live: k, c0, width, chain, matmul: pn }));
            }
            _ => return Ok(None),
        }
    }
}

/// `value[begin .. begin + size]` (size `-1` = to the end), evaluated now.
fn slice_constant(value: &Tensor, begin: &[i64], size: &[i64]) -> Result<Tensor> {
    let mut g = Graph::new();
    let c = g.constant(value.clone());
    let out = g.slice(c, begin, size)?;
    let mut res = crate::exec::run_once(&g, &[out], &[])?;
    Ok(res.remove(0))
}
