//! The optimizers of ONNX's `ai.onnx.preview.training` domain (version 1): `Adagrad`, `Adam`
//! and `Momentum` (standard and Nesterov), composed from our elementwise ops.
//!
//! Each updates n tensors at once: inputs `R` (learning rate), `T` (update count, int64), then
//! the n tensors `X`, their gradients `G` and their state (`H` for Adagrad; `V` for Momentum;
//! `V`, `H` for Adam), each group n long; outputs the new `X`s, then the new states, group by
//! group. The formulas are ONNX's (`onnx/defs/training/defs.cc`).
//!
//! Invariants: computed in the dtype of the `X`s (`R` and `T` cast to it); the count `T` is a
//! run-time value (`T > 0` selects Momentum's and Adam's first-step forms, not a constant),
//! and Adam's bias correction is computed at `max(T, 1)` so its unselected branch stays finite
//! (no NaN from `0 * inf` in a derivative).

use super::convert::NodeCx;
use crate::error::Result;
use crate::ir::{Graph, ValueId};

/// The domain of these ops.
pub(super) const DOMAIN: &str = "ai.onnx.preview.training";

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["Adagrad", "Adam", "Momentum"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) || n.proto.domain != DOMAIN {
        return None;
    }
    Some(convert_one(g, n))
}

/// A required float attribute.
fn required_f(n: &NodeCx, name: &str) -> Result<f64> {
    n.attr(name).map(|a| f64::from(a.f)).ok_or_else(|| n.invalid(format!("attribute {name} is missing")))
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let groups = if n.op() == "Adam" { 4 } else { 3 };
    let ins = n.all_inputs();
    if ins.len() < 2 + groups || !(ins.len() - 2).is_multiple_of(groups) {
        return Err(n.invalid(format!(
            "{} inputs given; it takes R, T and {groups} groups of equal length (X, G and the state)",
            ins.len()
        )));
    }
    let k = (ins.len() - 2) / groups;
    let group = |j: usize| &ins[2 + j * k..2 + (j + 1) * k];
    let dt = g.dtype(ins[2])?;
    let r = g.cast(ins[0], dt)?;
    let t = g.cast(ins[1], dt)?;
    let zero = g.scalar(dt, 0.0);
    let first = g.greater(t, zero)?; // T > 0: not the first update
    let lambda = n.attr_f("norm_coefficient", 0.0);
    // G + lambda X: the gradient of 0.5 lambda |X|^2 added
    let regularized = |g: &mut Graph, x: ValueId, grad: ValueId| -> Result<ValueId> {
        let lx = g.mul_scalar(x, lambda)?;
        g.add(lx, grad)
    };
    let mut xs = Vec::with_capacity(k);
    let mut states: Vec<Vec<ValueId>> = vec![Vec::with_capacity(k); groups - 2];
    match n.op() {
        "Adagrad" => {
            let (decay, eps) = (n.attr_f("decay_factor", 0.0), n.attr_f("epsilon", 1e-6));
            // r = R / (1 + T decay)
            let td = g.mul_scalar(t, decay)?;
            let den = g.add_scalar(td, 1.0)?;
            let rate = g.div(r, den)?;
            for i in 0..k {
                let (x, gr, h) = (group(0)[i], group(1)[i], group(2)[i]);
                let gr = regularized(g, x, gr)?;
                let sq = g.mul(gr, gr)?;
                let h_new = g.add(h, sq)?;
                let root = g.sqrt(h_new)?;
                let hs = g.add_scalar(root, eps)?;
                let step = g.mul(rate, gr)?;
                let step = g.div(step, hs)?;
                xs.push(g.sub(x, step)?);
                states[0].push(h_new);
            }
        }
        "Momentum" => {
            let (alpha, beta) = (required_f(n, "alpha")?, required_f(n, "beta")?);
            if n.attr("mode").is_none() {
                return Err(n.invalid("attribute mode is missing"));
            }
            let nesterov = n.attr_choice("mode", &["standard", "nesterov"])? == "nesterov";
            // the gradient's coefficient is 1 at the first update
            let b = g.scalar(dt, beta);
            let one = g.scalar(dt, 1.0);
            let b = g.select(first, b, one)?;
            for i in 0..k {
                let (x, gr, v) = (group(0)[i], group(1)[i], group(2)[i]);
                let gr = regularized(g, x, gr)?;
                let av = g.mul_scalar(v, alpha)?;
                let bg = g.mul(b, gr)?;
                let v_new = g.add(av, bg)?;
                let dir = if nesterov {
                    let av = g.mul_scalar(v_new, alpha)?;
                    g.add(gr, av)?
                } else {
                    v_new
                };
                let step = g.mul(r, dir)?;
                xs.push(g.sub(x, step)?);
                states[0].push(v_new);
            }
        }
        _ => {
            let (alpha, beta) = (n.attr_f("alpha", 0.9), n.attr_f("beta", 0.999));
            let (eps, post) = (n.attr_f("epsilon", 1e-6), n.attr_f("norm_coefficient_post", 0.0));
            // after the first update: R sqrt(1 - beta^T) / (1 - alpha^T), at max(T, 1)
            let one = g.scalar(dt, 1.0);
            let t1 = g.maximum(t, one)?;
            let (a, b) = (g.scalar(dt, alpha), g.scalar(dt, beta));
            let at = g.pow(a, t1)?;
            let bt = g.pow(b, t1)?;
            let num = g.sub(one, bt)?;
            let num = g.sqrt(num)?;
            let den = g.sub(one, at)?;
            let corr = g.div(num, den)?;
            let corrected = g.mul(r, corr)?;
            let rate = g.select(first, corrected, r)?;
            for i in 0..k {
                let (x, gr, v, h) = (group(0)[i], group(1)[i], group(2)[i], group(3)[i]);
                let gr = regularized(g, x, gr)?;
                let av = g.mul_scalar(v, alpha)?;
                let ag = g.mul_scalar(gr, 1.0 - alpha)?;
                let v_new = g.add(av, ag)?;
                let bh = g.mul_scalar(h, beta)?;
                let sq = g.mul(gr, gr)?;
                let bg = g.mul_scalar(sq, 1.0 - beta)?;
                let h_new = g.add(bh, bg)?;
                let root = g.sqrt(h_new)?;
                let hs = g.add_scalar(root, eps)?;
                let q = g.div(v_new, hs)?;
                let step = g.mul(rate, q)?;
                let x_new = g.sub(x, step)?;
                xs.push(g.mul_scalar(x_new, 1.0 - post)?);
                states[0].push(v_new);
                states[1].push(h_new);
            }
        }
    }
    xs.extend(states.into_iter().flatten());
    Ok(xs)
}
