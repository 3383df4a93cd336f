//! Reverse mode: walk the nodes between `xs` and `ys` in reverse topological order, call
//! each node's VJP rule with the summed cotangents of its outputs, and accumulate the
//! cotangents of its inputs.
//!
//! Invariants: only nodes that are both ancestors of `ys` and descendants of `xs` are
//! visited; a value's cotangent is summed (in consumer order) before its producer is
//! visited; the forward graph is never modified, only extended.

use hashbrown::{HashMap, HashSet};

use super::VjpCtx;
use super::rules;
use super::util::checked_like;
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, ValueId};

/// `d(sum_k <grad_ys[k], ys[k]>) / d xs` as new nodes of `g`. `grad_ys` defaults to ones
/// (each `y` is then usually a scalar loss). A `x` that no `y` depends on gets zeros.
///
/// Errors name the node and op of any op without a gradient rule, and reject non-float
/// `xs` and `grad_ys` whose types differ from their `ys`: dtype, rank and fixed dims when
/// the graph is built, dynamic dims when it runs.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F64, [3]);
/// let w = g.constant(Tensor::vec1(&[1.0f64, 2.0, 3.0]));
/// let xw = g.mul(x, w)?;
/// let loss = g.sum_all(xw)?;
/// let d = gradients(&mut g, &[loss], &[x], None)?; // d loss / d x = w
/// let r = run_once(&g, &d, &[(x, Tensor::vec1(&[0.5f64, 0.5, 0.5]))])?;
/// assert_eq!(r[0].to_f64_vec(), [1.0, 2.0, 3.0]);
/// # Ok(())
/// # }
/// ```
pub fn gradients(g: &mut Graph, ys: &[ValueId], xs: &[ValueId], grad_ys: Option<&[ValueId]>) -> Result<Vec<ValueId>> {
    let out = gradients_with(g, ys, xs, grad_ys)?;
    out.into_iter()
        .zip(xs)
        .map(|(d, x)| match d {
            Some(d) => Ok(d),
            None => g.zeros_like(*x),
        })
        .collect()
}

/// Like [`gradients`], but `None` for an `x` that no `y` depends on (no zeros are built).
///
/// ```
/// use pfor::autodiff::gradients_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F64, [3]);
/// let unused = g.input("u", DType::F64, [3]);
/// let loss = g.sum_all(x)?;
/// let d = gradients_with(&mut g, &[loss], &[x, unused], None)?;
/// assert!(d[0].is_some() && d[1].is_none()); // no zeros built for `unused`
/// # Ok(())
/// # }
/// ```
pub fn gradients_with(
    g: &mut Graph,
    ys: &[ValueId],
    xs: &[ValueId],
    grad_ys: Option<&[ValueId]>,
) -> Result<Vec<Option<ValueId>>> {
    gradients_seeded(g, ys, xs, grad_ys, true)
}

/// [`gradients_with`]; `check_seeds = false` trusts that each `grad_ys[k]` has the shape of
/// `ys[k]` (seeds built by the derivative rules themselves) and adds no run-time check.
pub(crate) fn gradients_seeded(
    g: &mut Graph,
    ys: &[ValueId],
    xs: &[ValueId],
    grad_ys: Option<&[ValueId]>,
    check_seeds: bool,
) -> Result<Vec<Option<ValueId>>> {
    for v in ys.iter().chain(xs) {
        g.check_value(*v)?;
    }
    for x in xs {
        let dt = g.dtype(*x)?;
        if !dt.is_float() {
            return Err(Error::InvalidArgument(format!(
                "gradients: x {x} has dtype {dt}; only float values have gradients"
            )));
        }
    }
    if let Some(gy) = grad_ys
        && gy.len() != ys.len()
    {
        return Err(Error::InvalidArgument(format!("gradients: {} grad_ys for {} ys", gy.len(), ys.len())));
    }

    // Nodes on a path xs -> ys, in topological order.
    let anc: HashSet<NodeId> = g.ancestors(ys)?.into_iter().collect();
    let xset: HashSet<ValueId> = xs.iter().copied().collect();
    let mut on_path_values: HashSet<ValueId> = xset.clone();
    let mut path: Vec<NodeId> = Vec::new();
    for n in g.topo_order()? {
        if !anc.contains(&n) {
            continue;
        }
        let node = g.node(n)?;
        if node.inputs.iter().any(|v| on_path_values.contains(v)) {
            path.push(n);
            for v in g.outputs_of(n) {
                // A value that is itself an x keeps its own entry.
                on_path_values.insert(v);
            }
        }
    }

    // Seed cotangents.
    let mut pending: HashMap<ValueId, Vec<ValueId>> = HashMap::new();
    for (k, y) in ys.iter().enumerate() {
        if !on_path_values.contains(y) {
            continue;
        }
        let dt = g.dtype(*y)?;
        if !dt.is_float() {
            continue;
        }
        let seed = match grad_ys {
            Some(gy) if check_seeds => {
                checked_like(g, gy[k], *y, "gradients", [&format!("grad_ys[{k}]"), &format!("ys[{k}]")])?
            }
            Some(gy) => gy[k],
            None => g.ones_like(*y)?,
        };
        pending.entry(*y).or_default().push(seed);
    }

    let mut done: HashMap<ValueId, ValueId> = HashMap::new();
    for &n in path.iter().rev() {
        let outputs = g.outputs_of(n);
        let mut dys = Vec::with_capacity(outputs.len());
        let mut any = false;
        for o in &outputs {
            let d = take_sum(g, &mut pending, *o)?;
            if let Some(d) = d {
                // An x that is also an intermediate value: record its total cotangent.
                if xset.contains(o) {
                    done.insert(*o, d);
                }
                any = true;
            }
            dys.push(d);
        }
        if !any {
            continue;
        }
        let node = g.node(n)?.clone();
        let needs: Vec<bool> = node
            .inputs
            .iter()
            .map(|v| on_path_values.contains(v) && g.dtype(*v).map(|d| d.is_float()).unwrap_or(false))
            .collect();
        if !needs.iter().any(|b| *b) {
            continue;
        }
        let name = node.op.name();
        let mut cx = VjpCtx { g, node: n, inputs: node.inputs.clone(), outputs, dys, needs: needs.clone() };
        let dxs = rules::vjp(&node.op, &mut cx).map_err(|e| e.at_node(n, name.clone()))?;
        if dxs.len() != node.inputs.len() {
            return Err(Error::InvalidArgument(format!(
                "vjp rule of {name} returned {} cotangents for {} inputs",
                dxs.len(),
                node.inputs.len()
            ))
            .at_node(n, name));
        }
        for ((v, d), need) in node.inputs.iter().zip(dxs).zip(needs) {
            if let (Some(d), true) = (d, need) {
                pending.entry(*v).or_default().push(d);
            }
        }
    }

    let mut out = Vec::with_capacity(xs.len());
    for x in xs {
        if let Some(d) = done.get(x) {
            out.push(Some(*d));
        } else {
            out.push(take_sum(g, &mut pending, *x)?);
        }
    }
    Ok(out)
}

/// Sum the pending cotangents of `v` (removing them).
fn take_sum(g: &mut Graph, pending: &mut HashMap<ValueId, Vec<ValueId>>, v: ValueId) -> Result<Option<ValueId>> {
    let Some(parts) = pending.remove(&v) else { return Ok(None) };
    let mut it = parts.into_iter();
    let Some(mut acc) = it.next() else { return Ok(None) };
    for p in it {
        acc = g.add(acc, p)?;
    }
    Ok(Some(acc))
}
