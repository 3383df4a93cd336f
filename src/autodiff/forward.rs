//! Forward mode: push tangents from `xs` through the nodes that depend on them, in
//! topological order, with each node's JVP rule.
//!
//! Invariants: a tangent has its primal's dtype and shape; nodes that no x reaches are not
//! visited; integer and bool outputs never carry tangents.

use hashbrown::{HashMap, HashSet};

use super::JvpCtx;
use super::rules;
use super::util::checked_like;
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, ValueId};

/// Directional derivatives `d ys[k] / d xs · tangents` as new nodes of `g` (zeros for a
/// `y` that does not depend on any `x`).
/// Each tangent must have its x's type: dtype, rank and fixed dims when the graph is built,
/// dynamic dims when it runs.
///
/// ```
/// use pfor::autodiff::jvp;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::vec1(&[1.0f64, 2.0]));
/// let y = g.mul(x, x)?;                            // y = x²
/// let t = g.constant(Tensor::vec1(&[1.0f64, 0.0])); // the direction e₀
/// let dy = jvp(&mut g, &[y], &[x], &[t])?;          // 2 x · t
/// assert_eq!(run_once(&g, &dy, &[])?[0].to_f64_vec(), [2.0, 0.0]);
/// # Ok(())
/// # }
/// ```
pub fn jvp(g: &mut Graph, ys: &[ValueId], xs: &[ValueId], tangents: &[ValueId]) -> Result<Vec<ValueId>> {
    jvp_seeded(g, ys, xs, tangents, true)
}

/// [`jvp`]; `check_tangents = false` trusts that each tangent has its x's shape (tangents
/// built by the derivative rules themselves) and adds no run-time check.
pub(crate) fn jvp_seeded(
    g: &mut Graph,
    ys: &[ValueId],
    xs: &[ValueId],
    tangents: &[ValueId],
    check_tangents: bool,
) -> Result<Vec<ValueId>> {
    if xs.len() != tangents.len() {
        return Err(Error::InvalidArgument(format!("jvp: {} tangents for {} xs", tangents.len(), xs.len())));
    }
    for v in ys.iter().chain(xs).chain(tangents) {
        g.check_value(*v)?;
    }
    let mut tan: HashMap<ValueId, ValueId> = HashMap::new();
    for (k, (x, t)) in xs.iter().zip(tangents).enumerate() {
        let tx = g.value_type(*x)?.clone();
        if !tx.dtype.is_float() {
            return Err(Error::InvalidArgument(format!(
                "jvp: xs[{k}] has dtype {}; only floats have tangents",
                tx.dtype
            )));
        }
        let t = match check_tangents {
            true => checked_like(g, *t, *x, "jvp", [&format!("tangents[{k}]"), &format!("xs[{k}]")])?,
            false => *t,
        };
        tan.insert(*x, t);
    }
    let anc: HashSet<NodeId> = g.ancestors(ys)?.into_iter().collect();
    for n in g.topo_order()? {
        if !anc.contains(&n) {
            continue;
        }
        let node = g.node(n)?.clone();
        let tangents: Vec<Option<ValueId>> = node.inputs.iter().map(|v| tan.get(v).copied()).collect();
        if tangents.iter().all(Option::is_none) {
            continue;
        }
        let outputs = g.outputs_of(n);
        // Values listed in xs keep the tangent given for them.
        if outputs.iter().all(|o| tan.contains_key(o)) {
            continue;
        }
        let name = node.op.name();
        let mut cx = JvpCtx { g, node: n, inputs: node.inputs.clone(), outputs: outputs.clone(), tangents };
        let touts = rules::jvp(&node.op, &mut cx).map_err(|e| e.at_node(n, name.clone()))?;
        if touts.len() != outputs.len() {
            return Err(Error::InvalidArgument(format!(
                "jvp rule of {name} returned {} tangents for {} outputs",
                touts.len(),
                outputs.len()
            ))
            .at_node(n, name));
        }
        for (o, t) in outputs.iter().zip(touts) {
            if let Some(t) = t
                && g.dtype(*o)?.is_float()
            {
                tan.entry(*o).or_insert(t);
            }
        }
    }
    ys.iter()
        .map(|y| match tan.get(y) {
            Some(t) => Ok(*t),
            None => g.zeros_like(*y),
        })
        .collect()
}
