//! The `rewrite` pass of the simplification pipeline ([`super::simplify`]): the converters
//! emit local rewrites (fold the loop axis into a batch axis and back, move it with
//! transposes, tile an invariant operand) that often cancel across neighbouring ops. This
//! pass removes what cancels; the `dead` pass then drops what nothing reads.
//! [`pfor`](crate::vectorize::pfor) runs the pipeline on its own output unless
//! [`PforOptions::simplify`](crate::vectorize::PforOptions::simplify) is off;
//! [`simplify`](super::simplify) runs it on any graph.
//!
//! Rewrites (each fires only when every type involved is fully static; dynamic dims skip):
//! - `identity(x)` and `cast(x)` to `x`'s own dtype → `x` (`stop_gradient` is kept: it
//!   changes gradients);
//! - a view op (`reshape`, `expand_dims`, `squeeze`) whose output type equals its input's →
//!   its input;
//! - a chain of view ops with a `reshape` in it → one `reshape` of the chain's source, or
//!   the source itself when the types agree (view ops never move elements in row-major
//!   order, so the chain is the reshape to its final shape);
//! - `transpose{p2}(transpose{p1}(x))` → `transpose{p1∘p2}(x)`, or `x` when that is the
//!   identity; an identity `transpose` → its input;
//! - a `broadcast_to`, or a `tile` that only repeats size-1 axes (a broadcast), feeding an
//!   op that broadcasts its operands anyway (binary math, `select`, `clip`) → the
//!   un-broadcast operand, when the op's output type stays the same (broadcasting twice
//!   is broadcasting once);
//! - a `matmul` whose result reaches a last-axis `split` (through reshapes keeping that
//!   axis) of which one piece is read → a `matmul` of just that piece's columns (see
//!   `narrow`, its own pass; its invariants hold there);
//! - (not here: constant folding, a pure op of constants → its value, is the separate
//!   `fold` pass, run by plans on their own copy of the graph; see `fold` for why);
//! - dead nodes: nodes no output (and no kept node) reads (the `dead` pass).
//!
//! Invariants, and why they hold:
//! - every value keeps its meaning: a node is rewritten in place only into an op that
//!   infers exactly its old output types ([`Graph::rewrite_node`](crate::ir::Graph::rewrite_node)), and a value is replaced
//!   by another only when both have the same static type and, by the rules above, the same
//!   elements;
//! - ops with side effects or randomness ([`Op::has_side_effects`](crate::ops::Op::has_side_effects), [`Op::is_stateful`](crate::ops::Op::is_stateful))
//!   and graph inputs are never removed, rewritten or merged; nothing is merged at all
//!   (no common-subexpression elimination), so two draws stay two draws;
//! - only nodes in the region (all nodes, or those added since a [`Graph::mark`](crate::ir::Graph::mark)) are
//!   rewritten or removed; older nodes are only read;
//! - rewritten nodes read only values older than themselves, so creation order stays a
//!   topological order — except the readers the narrowing rewires to its new (younger)
//!   matmul; every consumer of graph order uses [`Graph::topo_order`](crate::ir::Graph::topo_order), which is exact; this pass is one
//!   forward sweep visiting every region node once (linear in the graph size).

use hashbrown::HashMap;

use super::pattern::{is_identity_perm, is_static};
use super::{Pass, PassCtx};

use crate::error::Result;
use crate::ir::{Graph, NodeId, ValueId};
use crate::ops::{ElementwiseOp, Op, ShapeOp};
use crate::tensor::TensorType;

/// What [`simplify`](super::simplify) did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimplifyReport {
    /// The outputs after the pass (an output may now be an earlier, equal value).
    pub outputs: Vec<ValueId>,
    /// Values replaced by an equal earlier value (identities, no-op casts and views,
    /// cancelling view or transpose chains).
    pub forwarded: usize,
    /// Chains of two view ops or two transposes folded into one op.
    pub folded: usize,
    /// Broadcasts (`broadcast_to`, `tile`) bypassed by a broadcasting consumer.
    pub broadcasts_dropped: usize,
    /// Nodes removed because nothing read them.
    pub removed: usize,
    /// Matmuls narrowed to the one column range a split of their result reads (see
    /// `narrow`).
    pub narrowed: usize,
    /// Nodes replaced by the constant they evaluate to (all inputs constant): only by
    /// [`fold_constants`](super::fold_constants); `simplify` and `pfor` never fold.
    pub constants_folded: usize,
}

/// One rewrite decided for a node.
enum Action {
    /// Replace the node's (single) output by this equal value.
    Forward(ValueId),
    /// Rewrite the node in place into this op on these inputs.
    Fold(Op, Vec<ValueId>),
    /// Rewrite the node in place to read these inputs (a broadcast bypassed).
    Rewire(Vec<ValueId>),
}

/// The `rewrite` pass (see the module docs).
pub(super) struct Rewrite;

impl Pass for Rewrite {
    fn name(&self) -> &str {
        "rewrite"
    }

    fn run(&self, g: &mut Graph, cx: &mut PassCtx) -> Result<()> {
        let region = cx.region(g);
        let report = &mut cx.report;
        // `repl` maps a replaced value to the equal value replacing it (already final:
        // producers are visited before consumers).
        let mut repl: HashMap<ValueId, ValueId> = HashMap::new();
        for n in region {
            let Some(node) = g.find_node(n) else { continue };
            // Stateful ops keep their op; their inputs are forwarded like any other's (an
            // equal value), so the intermediate that was bypassed can go.
            let fixed_op = node.op.has_side_effects() || node.op.is_stateful();
            let inputs: Vec<ValueId> = node.inputs.iter().map(|v| repl.get(v).copied().unwrap_or(*v)).collect();
            if inputs != node.inputs {
                let op = node.op.clone();
                g.rewrite_node(n, op, &inputs)?;
            }
            let action = if fixed_op { None } else { decide(g, n)? };
            match action {
                None => {}
                Some(Action::Forward(v)) => {
                    repl.insert(ValueId { node: n, slot: 0 }, v);
                    report.forwarded += 1;
                }
                Some(Action::Fold(op, ins)) => {
                    g.rewrite_node(n, op, &ins)?;
                    report.folded += 1;
                }
                Some(Action::Rewire(ins)) => {
                    let op = g.node(n)?.op.clone();
                    g.rewrite_node(n, op, &ins)?;
                    report.broadcasts_dropped += 1;
                }
            }
        }
        for o in &mut cx.outputs {
            *o = repl.get(o).copied().unwrap_or(*o);
        }
        Ok(())
    }
}

/// How many view ops up a chain the pass looks (keeps the pass linear).
const MAX_CHAIN: usize = 8;

/// The single input of a single-input view op (`reshape`, `expand_dims`, `squeeze`).
fn view_input(g: &Graph, v: ValueId) -> Result<Option<(ValueId, bool)>> {
    let p = g.node(v.node)?;
    let is_reshape = match &p.op {
        Op::Shape(ShapeOp::Reshape { .. }) => true,
        Op::Shape(ShapeOp::ExpandDims { .. } | ShapeOp::Squeeze { .. }) => false,
        _ => return Ok(None),
    };
    Ok(p.inputs.first().map(|&x| (x, is_reshape)))
}

/// The un-broadcast source of `v` if `v` is a `broadcast_to`, or a `tile` that only
/// repeats size-1 axes; `None` otherwise.
fn broadcast_source(g: &Graph, v: ValueId) -> Result<Option<ValueId>> {
    let p = g.node(v.node)?;
    let Some(&x) = p.inputs.first() else { return Ok(None) };
    match &p.op {
        Op::Shape(ShapeOp::BroadcastTo { .. }) => Ok(Some(x)),
        Op::Shape(ShapeOp::Tile { multiples }) => {
            let xs = g.shape(x)?;
            let Some(dims) = xs.as_fixed() else { return Ok(None) };
            let only_size_one =
                dims.len() == multiples.len() && dims.iter().zip(multiples).all(|(&d, &m)| m == 1 || d == 1);
            Ok(only_size_one.then_some(x))
        }
        _ => Ok(None),
    }
}

/// Whether `op` on `inputs` infers exactly `want` (all static).
fn infers_same(g: &Graph, op: &Op, inputs: &[ValueId], want: &[TensorType]) -> Result<bool> {
    let mut tys = Vec::with_capacity(inputs.len());
    for &v in inputs {
        let t = g.value_type(v)?;
        if !is_static(t) {
            return Ok(false);
        }
        tys.push(t.clone());
    }
    Ok(op.infer(&tys).is_ok_and(|o| o == want))
}

/// Decide the rewrite of node `n` (inputs already forwarded), if any.
fn decide(g: &Graph, n: NodeId) -> Result<Option<Action>> {
    let node = g.node(n)?;
    if node.outputs.len() != 1 || !is_static(&node.outputs[0]) {
        return Ok(None);
    }
    let out = &node.outputs[0];
    let same_type = |v: ValueId| -> Result<bool> { Ok(g.value_type(v)? == out) };
    match &node.op {
        Op::Shape(ShapeOp::Identity) | Op::Elementwise(ElementwiseOp::Cast { .. }) => {
            let x = node.inputs[0];
            Ok(same_type(x)?.then_some(Action::Forward(x)))
        }
        Op::Shape(ShapeOp::Reshape { .. } | ShapeOp::ExpandDims { .. } | ShapeOp::Squeeze { .. }) => {
            let x = node.inputs[0];
            if same_type(x)? {
                return Ok(Some(Action::Forward(x)));
            }
            // Walk up the chain of view ops feeding this one (a bounded number of steps: inside
            // the region chains are already folded, so this only crosses its boundary).
            let mut any_reshape = matches!(node.op, Op::Shape(ShapeOp::Reshape { .. }));
            let (mut cur, mut forward, mut fold) = (x, None, None);
            for _ in 0..MAX_CHAIN {
                let Some((y, prev_reshape)) = view_input(g, cur)? else { break };
                if !is_static(g.value_type(y)?) {
                    break;
                }
                any_reshape |= prev_reshape;
                if same_type(y)? {
                    forward = Some(y);
                }
                // Only chains with a reshape in them fold: a chain of zero-copy views folded
                // into a reshape could add a copy (for a non-contiguous input).
                if any_reshape {
                    fold = Some(y);
                }
                cur = y;
            }
            if let Some(y) = forward {
                return Ok(Some(Action::Forward(y)));
            }
            let Some(y) = fold else { return Ok(None) };
            let shape: Vec<i64> = out.shape.dims().iter().filter_map(|d| d.value().map(|v| v as i64)).collect();
            let op = Op::Shape(ShapeOp::Reshape { shape });
            Ok(infers_same(g, &op, &[y], std::slice::from_ref(out))?.then_some(Action::Fold(op, vec![y])))
        }
        Op::Shape(ShapeOp::Transpose { perm }) => {
            let x = node.inputs[0];
            if is_identity_perm(perm) && same_type(x)? {
                return Ok(Some(Action::Forward(x)));
            }
            let p = g.node(x.node)?;
            let (Op::Shape(ShapeOp::Transpose { perm: p1 }), Some(&y)) = (&p.op, p.inputs.first()) else {
                return Ok(None);
            };
            // Output axis i of the chain is axis perm[i] of the middle, i.e. p1[perm[i]] of y.
            let Some(composed) = perm.iter().map(|&a| p1.get(a).copied()).collect::<Option<Vec<usize>>>() else {
                return Ok(None);
            };
            if is_identity_perm(&composed) {
                return Ok(same_type(y)?.then_some(Action::Forward(y)));
            }
            let op = Op::Shape(ShapeOp::Transpose { perm: composed });
            Ok(infers_same(g, &op, &[y], std::slice::from_ref(out))?.then_some(Action::Fold(op, vec![y])))
        }
        Op::Binary(_) | Op::Elementwise(ElementwiseOp::Select | ElementwiseOp::Clip) => {
            let mut ins = node.inputs.clone();
            let mut changed = false;
            for pos in 0..ins.len() {
                let Some(src) = broadcast_source(g, ins[pos])? else { continue };
                let mut trial = ins.clone();
                trial[pos] = src;
                if infers_same(g, &node.op, &trial, &node.outputs)? {
                    ins = trial;
                    changed = true;
                }
            }
            Ok(changed.then_some(Action::Rewire(ins)))
        }
        _ => Ok(None),
    }
}
