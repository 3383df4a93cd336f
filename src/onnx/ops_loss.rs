//! ONNX loss operators: `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss` (with
//! class weights, `ignore_index` and the `none` / `sum` / `mean` reductions, any number of
//! trailing dims `[N, C, d1, ...]`).
//!
//! Composition, not a kind: the picked entry `input[n, target[n, d...], d...]` is a `select`
//! with a one-hot mask of the targets over the class axis followed by a sum over that axis
//! (exact: every other term is a selected zero, so no `0 * inf` arises); class weights are
//! picked the same way. Derivatives come from the parts (one-hot of an integer target is
//! constant). Invariants: an ignored target contributes neither loss nor weight; `mean`
//! divides by the summed weights of the targets that are not ignored, as ONNX specifies; a
//! target outside `[0, C)` that is not ignored gives a zero loss and weight (ONNX leaves it
//! undefined).

use super::convert::NodeCx;
use super::ops_shape::fixed_shape;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::DType;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"];

/// Converts `n` if it is a loss op.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_inner(g, n))
}

fn convert_inner(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let x = n.input(0)?;
    let target = n.input(1)?;
    let weight = n.opt_input(2);
    let reduction = n.attr_choice("reduction", &["mean", "none", "sum"])?;
    let ignore = n.attr("ignore_index").map(|a| a.i);
    if n.op() == "NegativeLogLikelihoodLoss" {
        return Ok(vec![nll(g, n, x, target, weight, &reduction, ignore)?]);
    }
    let logp = g.log_softmax(x, 1)?;
    let loss = nll(g, n, logp, target, weight, &reduction, ignore)?;
    Ok(vec![loss, logp])
}

/// The negative log-likelihood of `x` ([N, C, d...] log-probabilities) at `target`
/// ([N, d...] class indices), see the module doc.
fn nll(
    g: &mut Graph,
    n: &NodeCx,
    x: ValueId,
    target: ValueId,
    weight: Option<ValueId>,
    reduction: &str,
    ignore: Option<i64>,
) -> Result<ValueId> {
    let xd = fixed_shape(g, n, x, n.op())?;
    let td = fixed_shape(g, n, target, n.op())?;
    if xd.len() < 2 || td.len() + 1 != xd.len() || td[0] != xd[0] || td[1..] != xd[2..] {
        return Err(n.invalid(format!("input {xd:?} and target {td:?} (expected [N, C, d...] and [N, d...])")));
    }
    let dt = g.dtype(x)?;
    let t = if g.dtype(target)? == DType::I64 { target } else { g.cast(target, DType::I64)? };
    let c = xd[1];
    let hot = g.one_hot(t, c, 1, 1.0, 0.0, DType::Bool)?;
    let zero = g.scalar_like(x, 0.0)?;
    let picked = g.select(hot, x, zero)?;
    let picked = g.reduce_sum(picked, Some(&[1]), false)?;
    let mut w = match weight {
        Some(w) => {
            if fixed_shape(g, n, w, n.op())? != [c] {
                return Err(n.invalid(format!("weight of shape {:?} for {c} classes", g.shape(w)?)));
            }
            let mut shape = vec![1i64, c as i64];
            shape.extend(std::iter::repeat_n(1, xd.len() - 2));
            let wb = g.reshape(w, &shape)?;
            let z = g.scalar_like(wb, 0.0)?;
            let pw = g.select(hot, wb, z)?;
            Some(g.reduce_sum(pw, Some(&[1]), false)?)
        }
        None => None,
    };
    if let Some(ig) = ignore {
        let igv = g.scalar_like(t, ig as f64)?;
        let is_ig = g.equal(t, igv)?;
        let keep = g.logical_not(is_ig)?;
        let keep = g.cast(keep, dt)?;
        w = Some(match w {
            Some(w) => g.mul(w, keep)?,
            None => keep,
        });
    }
    let neg = g.neg(picked)?;
    let loss = match w {
        Some(w) => g.mul(neg, w)?,
        None => neg,
    };
    match reduction {
        "none" => Ok(loss),
        "sum" => g.sum_all(loss),
        _ => match w {
            Some(w) => {
                let s = g.sum_all(loss)?;
                let ws = g.sum_all(w)?;
                g.div(s, ws)
            }
            None => g.mean_all(loss),
        },
    }
}
