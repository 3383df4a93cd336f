//! Constant folding: a pure op whose inputs are all constants is evaluated once and becomes
//! a constant.
//!
//! In pfor output this is what the loop index turns into when it only meets constants: a
//! jacobian's seed rows `one_hot(range(n))` times a constant weight (W5: the first backward
//! product `[n, out] x [out, h]`) become one constant instead of a GEMM on every run.
//!
//! WHERE it runs matters: a folded node no longer depends on the constants it was computed
//! from, so a derivative taken LATER w.r.t. one of them (a graph constant is a point to
//! differentiate at: `hessian` of a function of a constant is the jacobian of a jacobian)
//! would silently lose that path. So folding is not part of the simplification that `pfor`
//! runs on the user's graph; a plan folds its own copy of the graph when it compiles
//! ([`folded_copy`], from `Plan::compile_options`), where no derivative follows, and
//! [`fold_constants`](super::fold_constants) folds a graph on request.
//!
//! Invariants:
//! - only ops without effects or randomness fold (no `Input`, `Const`, state, random, custom
//!   or control-flow op), with one output of a fully static type, and only when the kernel's
//!   result has exactly that type — so a value keeps its type and its elements (the same
//!   kernel computes it, once instead of per run);
//! - a kernel error leaves the node as it is (the run then raises it, at this node);
//! - a result larger than its largest input is not folded above [`MAX_ELEMENTS`], nor above
//!   [`FREE_ELEMENTS`] when larger than all inputs together (a folded broadcast must not bloat
//!   the graph); a result no larger than its largest input folds whatever its size (weight
//!   preprocessing: an imported conv's filter transposed to our layout and scaled by a batch
//!   norm is computed once, not per run — the graph holds at most one more tensor of that
//!   size, and plans bound each result by the session's memory budget, see [`folded_copy`]);
//! - a folded constant is stored in standard layout (a transpose kernel returns a strided
//!   view, which every reader would otherwise copy again on every run).

use hashbrown::HashSet;

use super::pattern::const_value;
use super::{Pass, PassCtx};
use crate::error::Result;
use crate::ir::{Graph, NodeId, ValueId};
use crate::ops::Op;
use crate::tensor::Tensor;

/// Largest folded result (elements).
pub const MAX_ELEMENTS: usize = 1 << 20;
/// Results up to this size fold even when larger than their inputs (e.g. `one_hot`).
pub const FREE_ELEMENTS: usize = 1 << 16;

/// The constant node `n` evaluates to, if it folds (see the module invariants).
pub(super) fn fold(g: &Graph, n: NodeId) -> Result<Option<Tensor>> {
    let node = g.node(n)?;
    let foldable_op = !matches!(
        node.op,
        Op::Input { .. } | Op::Const { .. } | Op::State(_) | Op::Random(_) | Op::Custom(_) | Op::Control(_)
    ) && !node.op.has_side_effects()
        && !node.op.is_stateful();
    if !foldable_op || node.outputs.len() != 1 || node.inputs.is_empty() {
        return Ok(None);
    }
    let Some(out_len) = node.outputs[0].shape.num_elements() else { return Ok(None) };
    let mut ins = Vec::with_capacity(node.inputs.len());
    for &v in &node.inputs {
        let Some(value) = const_value(g, v) else { return Ok(None) };
        ins.push(value.clone());
    }
    let in_len: usize = ins.iter().map(Tensor::len).sum();
    let in_max = ins.iter().map(Tensor::len).max().unwrap_or(0);
    if out_len > in_max && (out_len > MAX_ELEMENTS || (out_len > FREE_ELEMENTS && out_len > in_len)) {
        return Ok(None);
    }
    let Ok(mut outs) = crate::exec::eval_detached(&node.op, ins) else { return Ok(None) };
    let Some(t) = outs.pop() else { return Ok(None) };
    let ty = &node.outputs[0];
    if !(outs.is_empty() && t.dtype() == ty.dtype && ty.shape.matches(t.shape())) {
        return Ok(None);
    }
    let standard = crate::dispatch!(&t, a => a.is_standard_layout());
    Ok(Some(if standard { t } else { t.reshape(t.shape())? }))
}

/// The `fold` pass: every region node that folds becomes its constant (producers first).
pub(super) struct Fold;

impl Pass for Fold {
    fn name(&self) -> &str {
        "fold"
    }

    fn run(&self, g: &mut Graph, cx: &mut PassCtx) -> Result<()> {
        for n in g.topo_order()? {
            if cx.in_region(g, n)
                && let Some(value) = fold(g, n)?
            {
                g.rewrite_node(n, Op::Const { value }, &[])?;
                cx.report.constants_folded += 1;
            }
        }
        Ok(())
    }
}

/// A copy of `g` in which every ancestor of `roots` that folds is its constant (producers
/// first, so chains fold whole), or `None` when nothing folds (no copy made). Handles of
/// `g` are handles of the copy. A node whose result is larger than `max_bytes` (the
/// session's budget) is left to the run, which reports it as `OutOfMemory` at that node.
pub(crate) fn folded_copy(g: &Graph, roots: &[ValueId], max_bytes: Option<usize>) -> Result<Option<Graph>> {
    let needed: HashSet<NodeId> = g.ancestors(roots)?.into_iter().collect();
    let mut copy: Option<Graph> = None;
    for n in g.topo_order()? {
        if !needed.contains(&n) {
            continue;
        }
        if let Some(limit) = max_bytes {
            let ty = &g.node(n)?.outputs;
            let bytes = ty.iter().map(|t| t.shape.num_elements().map(|e| e.saturating_mul(t.dtype.size())));
            if bytes.into_iter().any(|b| b.is_none_or(|b| b > limit)) {
                continue;
            }
        }
        if let Some(value) = fold(copy.as_ref().unwrap_or(g), n)? {
            copy.get_or_insert_with(|| g.clone()).rewrite_node(n, Op::Const { value }, &[])?;
        }
    }
    Ok(copy)
}
