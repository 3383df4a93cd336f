//! The static one-row form: at a loop length known to be 1, pfor emits the per-iteration
//! body itself, applied to iteration 0, and prepends the loop axis to its outputs.
//!
//! Invariants:
//! - it is chosen only after the normal conversion of the same body succeeded, so every
//!   error of the conversion (a missing converter under [`Fallback::Error`](super::Fallback),
//!   [`Randomness::Error`](super::Randomness), a converter's type check) is still raised at
//!   n = 1; the conversion's nodes are then left unread (the simplification removes them);
//! - the form is the traced body with the loop index replaced by the constant `0`: every
//!   node that reads the index is re-emitted unchanged with that constant, the nodes that do
//!   not are used as they are. So the program is the loop's body without the loop's
//!   bookkeeping (no stacking of the results), and it runs exactly the ops, with exactly
//!   the values, that the loop's single iteration runs — except that a row gathered by the
//!   index from a value of one row is that value squeezed (a view, not a copy);
//! - a body with a per-iteration effect (a stateful random op, a variable write, a stateful
//!   custom op: at top level, inside control flow or in a called function) keeps the normal
//!   conversion: its draws and writes follow [`Randomness`](super::Randomness), which the
//!   one-row form does not model;
//! - an output asked unbatched that the conversion found loop-invariant stays the
//!   conversion's unstacked value; every other output is the row's value with a leading
//!   axis of length 1.

use hashbrown::{HashMap, HashSet};

use super::ctx::{LoopInfo, i64_scalar};
use super::driver::{Scope, convert_graph};
use super::{PforOptions, PforReport, Wrapped};
use crate::error::Result;
use crate::ir::{Graph, Library, ValueId};
use crate::ops::{ControlOp, IndexOp, Op};

/// The one-row form of the body traced between `index` (the loop index placeholder, added at
/// `body_start`) and `outs`, or `None` when the body has a per-iteration effect. `converted`
/// is the normal conversion's outputs and whether each is stacked.
pub(crate) fn one_row_outputs(
    g: &mut Graph,
    index: ValueId,
    body_start: u64,
    outs: &[ValueId],
    converted: &[(ValueId, bool)],
    options: &PforOptions,
) -> Result<Option<Vec<(ValueId, bool)>>> {
    if body_has_effect(g, body_start, outs)? {
        return Ok(None);
    }
    let src = g.clone();
    let zero = i64_scalar(g, 0);
    let one = i64_scalar(g, 1);
    // One row, known at build time: no guard for an empty loop, no masked rows.
    let info = LoopInfo { n_static: Some(1), n: one, index: zero, index_is_iota: false };
    let mut map: HashMap<ValueId, Wrapped> = HashMap::from([(index, Wrapped::unstacked(zero))]);
    squeeze_row_gathers(&src, g, index, body_start, outs, &mut map)?;
    let scope = Scope { copy_invariant: false, body_start: Some(body_start), live: None };
    let rows = convert_graph(&src, g, map, scope, &info, options, outs, &mut PforReport::default())?;
    let mut res = Vec::with_capacity(outs.len());
    for (row, &(conv, stacked)) in rows.iter().zip(converted) {
        res.push(if stacked { (g.expand_dims(row.value, 0)?, true) } else { (conv, false) });
    }
    Ok(Some(res))
}

/// The body's `gather(x, index, axis 0)` of a value `x` from outside the body whose axis 0
/// is statically 1 reads row 0 of `x`: a view (`squeeze`), not a copy of the row. With the
/// `expand_dims` of the outputs, the simplification then cancels the pair where the body
/// keeps the row's shape (a W2 body becomes the network on `x` itself).
fn squeeze_row_gathers(
    src: &Graph,
    g: &mut Graph,
    index: ValueId,
    body_start: u64,
    outs: &[ValueId],
    map: &mut HashMap<ValueId, Wrapped>,
) -> Result<()> {
    for n in src.ancestors(outs)? {
        let node = src.node(n)?;
        let (Op::Index(IndexOp::Gather { axis: 0, batch_dims: 0 }), [x, i]) = (&node.op, node.inputs.as_slice()) else {
            continue;
        };
        let one_row = src.value_type(*x)?.shape.dims().first().is_some_and(|d| d.value() == Some(1));
        if *i == index && one_row && !src.added_since(x.node, body_start) {
            let row = g.squeeze(*x, Some(&[0])).map_err(|e| e.at_node(n, node.op.to_string()))?;
            map.insert(ValueId { node: n, slot: 0 }, Wrapped::unstacked(row));
        }
    }
    Ok(())
}

/// True if a node of the traced body (added at or after `body_start`) that `outs` read has
/// a per-iteration effect, itself or in a function it runs.
fn body_has_effect(g: &Graph, body_start: u64, outs: &[ValueId]) -> Result<bool> {
    let mut seen = HashSet::new();
    for n in g.ancestors(outs)? {
        if g.added_since(n, body_start) && op_has_effect(&g.node(n)?.op, g.library(), &mut seen) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A stateful random op, a variable write or a stateful custom op, or a control-flow op
/// running one (`seen`: the called functions already checked, so recursion ends).
fn op_has_effect(op: &Op, lib: &Library, seen: &mut HashSet<String>) -> bool {
    let graph_has = |g: &Graph, seen: &mut HashSet<String>| {
        g.node_ids().into_iter().any(|n| g.node(n).map_or(true, |nd| op_has_effect(&nd.op, g.library(), seen)))
    };
    match op {
        Op::Random(r) => r.is_stateful(),
        Op::State(s) => s.has_side_effects(),
        Op::Custom(c) => c.is_stateful(),
        Op::Control(ControlOp::Cond { then, else_ }) => graph_has(&then.graph, seen) || graph_has(&else_.graph, seen),
        Op::Control(ControlOp::While { cond, body, .. }) => {
            graph_has(&cond.graph, seen) || graph_has(&body.graph, seen)
        }
        Op::Control(ControlOp::For { body, .. }) => graph_has(&body.graph, seen),
        Op::Control(ControlOp::Call { function, .. }) => {
            if !seen.insert(function.clone()) {
                return false;
            }
            // an unknown function: assume the worst
            lib.get(function).map_or(true, |f| graph_has(&f.graph, seen))
        }
        _ => false,
    }
}
