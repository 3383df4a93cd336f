//! Constant folding for the simplification pass: a pure op whose inputs are all constants
//! is evaluated once, at rewrite time, and becomes a constant.
//!
//! In pfor output this is what the loop index turns into when it only meets constants: a
//! jacobian's seed rows `one_hot(range(n))` times a constant weight (W5: the first backward
//! product `[n, out] x [out, h]`) become one constant instead of a GEMM on every run.
//!
//! Invariants:
//! - only ops without effects or randomness fold (no `Input`, `Const`, state, random, custom
//!   or control-flow op), with one output of a fully static type, and only when the kernel's
//!   result has exactly that type — so a value keeps its type and its elements (the same
//!   kernel computes it, once instead of per run);
//! - a kernel error leaves the node as it is (the run then raises it, at this node);
//! - results larger than [`MAX_ELEMENTS`], or larger than all inputs together when above
//!   [`FREE_ELEMENTS`], are not folded (a folded broadcast must not bloat the graph).

use super::pattern::const_value;
use crate::error::Result;
use crate::ir::{Graph, NodeId};
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
    if out_len > MAX_ELEMENTS || (out_len > FREE_ELEMENTS && out_len > in_len) {
        return Ok(None);
    }
    let Ok(mut outs) = crate::exec::eval_detached(&node.op, ins) else { return Ok(None) };
    let Some(t) = outs.pop() else { return Ok(None) };
    let ty = &node.outputs[0];
    Ok((outs.is_empty() && t.dtype() == ty.dtype && ty.shape.matches(t.shape())).then_some(t))
}
