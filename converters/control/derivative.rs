//! Derivatives of the Subset forms: the derivative of "pfor over i of `while_i`" is "pfor
//! over i of the derivative of `while_i`" (the same for `cond`).
//!
//! A Subset-form `while` carries the active rows compacted, so its carries shrink from step
//! to step and the generic `while` VJP (which records every carry into one `[U, ...]`
//! buffer) cannot differentiate the node itself. Instead, every Subset-form node (the
//! `while` of [`while_subset`](super::while_subset), the partition `cond` of
//! [`cond_subset`](super::cond_subset), at one level or rebuilt over a combined iteration
//! space) carries a [`SubsetDerivative`] hook (`ir/derivative.rs`) that:
//!
//! 1. builds the **per-iteration function** `W` the node vectorizes: one `While` (with the
//!    loop's own cond, body and iteration cap) or one `Cond` of the recorded per-iteration
//!    functions ([`SubsetForm`]), on parameters bound to the node's inputs, each stacked
//!    or not in the node's loop;
//! 2. asks autodiff for the VJP / JVP function of `W` (autodiff's generic rules apply to
//!    the per-iteration loop: count, record, run backward);
//! 3. vectorizes that function with `convert_function` over the node's own iteration space
//!    (its `n` and `index` inputs, the options of the conversion that built it).
//!
//! The result is an ordinary vectorized graph — its loops are again Subset forms carrying
//! this hook — so it is executable, vectorized again by an enclosing pfor (nested forms),
//! and differentiated again (hessians), in every control-flow mode.
//!
//! Meaning of a Subset `while` node (inputs `[active, rows.., full.., n, index, captures..]`,
//! outputs `[active, rows.., full..]`), which the hook differentiates: a carry the body
//! updates (stacked, not passed through) starts as `rows` (row `r` = iteration `r`); its
//! `full` output holds each finished iteration's final carry and, for the rows still
//! `active` at the end (only a capped loop ends with any), the `full` input's row, while
//! the `rows` output holds those active rows' carries. A pass-through carry's `full`
//! output is its `full` input and its `rows` output the input `rows` at the `active`
//! positions. Cotangents of an invariant input are summed over the iterations.

use std::sync::Arc;

use super::combined::SubsetForm;
use super::force_stacked;
use crate::ir::{DerivativeHook, FunctionDerivatives, HookNode};
use crate::ops::{ControlOp, Op};
use crate::tensor::{DType, TensorType};
use crate::vectorize::{LoopInfo, PforOptions, Wrapped, convert_function};
use crate::{Error, Function, Graph, Result, ValueId};

/// The derivative hook of a Subset-form node (see the module docs).
pub(super) struct SubsetDerivative {
    /// What the node vectorizes.
    pub(super) form: Arc<SubsetForm>,
    /// The options of the conversion that built the node (used for its derivatives).
    pub(super) options: PforOptions,
    /// The node's loop length, when known at build time.
    pub(super) n_static: Option<usize>,
    /// Whether the node's loop index is `0..n`.
    pub(super) index_is_iota: bool,
}

/// The per-iteration function of a node and where its parameters come from.
struct PerIteration {
    w: Function,
    /// For each parameter of `w`: the node input bound to it and whether it is stacked.
    args: Vec<(usize, bool)>,
}

/// Add `d` to the accumulated derivative `acc`.
fn accumulate(g: &mut Graph, acc: &mut Option<ValueId>, d: ValueId) -> Result<()> {
    *acc = Some(match *acc {
        Some(a) => g.add(a, d)?,
        None => d,
    });
    Ok(())
}

fn is_float(g: &Graph, v: ValueId) -> bool {
    g.dtype(v).is_ok_and(|d| d.is_float())
}

/// `zeros_like(like)` with `d` written at rows `ix` (`[m, 1]`).
fn rows_into_zeros(g: &mut Graph, like: ValueId, ix: ValueId, d: ValueId) -> Result<ValueId> {
    let z = g.zeros_like(like)?;
    g.tensor_scatter_update(z, ix, d)
}

impl SubsetDerivative {
    /// The position of the node's `n` input (its `index` follows).
    fn loop_at(&self) -> usize {
        match &*self.form {
            SubsetForm::While { pass, .. } => 2 * pass.len() + 1,
            SubsetForm::Cond { args, .. } => args.len() + 2,
        }
    }

    /// The node's loop, from its `n` and `index` inputs.
    fn info(&self, inputs: &[ValueId]) -> Result<LoopInfo> {
        let at = self.loop_at();
        match inputs.get(at..at + 2) {
            Some(&[n, index]) => Ok(LoopInfo { n_static: self.n_static, n, index, index_is_iota: self.index_is_iota }),
            _ => Err(Error::Verify(format!("Subset-form derivative: unexpected input count {}", inputs.len()))),
        }
    }

    fn per_iteration(&self, g: &Graph, n_inputs: usize) -> Result<PerIteration> {
        let (w, args) = match &*self.form {
            SubsetForm::While { cond, body, pass, carries, captures, max_iterations } => {
                let k = pass.len();
                let mut args: Vec<(usize, bool)> = (0..k)
                    .map(|j| if carries[j] && !pass[j] { (1 + j, true) } else { (k + 1 + j, carries[j]) })
                    .collect();
                args.extend(captures.iter().enumerate().map(|(c, &s)| (2 * k + 3 + c, s)));
                let op = ControlOp::While {
                    cond: cond.clone(),
                    body: body.clone(),
                    num_carries: k,
                    max_iterations: *max_iterations,
                };
                let w = Function::build(g, &body.param_types(), |h, a| h.add_op_multi(Op::Control(op), a))?;
                (w, args)
            }
            SubsetForm::Cond { then, else_, args: stacked, .. } => {
                let mut types = vec![TensorType::scalar(DType::Bool)];
                types.extend(then.param_types());
                let mut args = vec![(1, true)];
                args.extend(stacked.iter().enumerate().map(|(a, &s)| (2 + a, s)));
                let op = ControlOp::Cond { then: then.clone(), else_: else_.clone() };
                let w = Function::build(g, &types, |h, a| h.add_op_multi(Op::Control(op), a))?;
                (w, args)
            }
        };
        if args.iter().any(|(i, _)| *i >= n_inputs) {
            return Err(Error::Verify(format!("Subset-form derivative: unexpected input count {n_inputs}")));
        }
        Ok(PerIteration { w, args })
    }

    /// The `while` outputs `[active, rows.., full..]`: which carries the body updates.
    fn tracked(&self) -> Vec<bool> {
        match &*self.form {
            SubsetForm::While { pass, carries, .. } => pass.iter().zip(carries).map(|(p, c)| *c && !*p).collect(),
            SubsetForm::Cond { .. } => vec![],
        }
    }

    fn capped(&self) -> bool {
        matches!(&*self.form, SubsetForm::While { max_iterations: Some(_), .. })
    }
}

impl DerivativeHook for SubsetDerivative {
    fn vjp(
        &self,
        d: &dyn FunctionDerivatives,
        g: &mut Graph,
        node: HookNode<'_>,
        dys: &[Option<ValueId>],
        needs: &[bool],
    ) -> Result<Vec<Option<ValueId>>> {
        let (inputs, outputs) = (node.inputs, node.outputs);
        let info = self.info(inputs)?;
        let pi = self.per_iteration(g, inputs.len())?;
        let need = |i: usize| needs.get(i).copied().unwrap_or(false);
        let dy = |r: usize| dys.get(r).copied().flatten();
        let mut out: Vec<Option<ValueId>> = vec![None; inputs.len()];
        // the per-iteration results with a cotangent, and their (stacked) cotangents
        let (mut dres, mut seeds) = (Vec::new(), Vec::new());
        match &*self.form {
            SubsetForm::Cond { .. } => {
                for (r, &y) in outputs.iter().enumerate() {
                    if let (Some(d), true) = (dy(r), is_float(g, y)) {
                        dres.push(r);
                        seeds.push(d);
                    }
                }
            }
            SubsetForm::While { carries, .. } => {
                let k = carries.len();
                let active = outputs[0];
                let ix = g.reshape(active, &[-1, 1])?;
                for (j, tracked) in self.tracked().into_iter().enumerate() {
                    let (drows, dfull) = (dy(1 + j), dy(k + 1 + j));
                    if !is_float(g, outputs[k + 1 + j]) || (drows.is_none() && dfull.is_none()) {
                        continue;
                    }
                    if !tracked {
                        // pass-through: full = full input, rows = rows input at `active`
                        if let (Some(d), true) = (dfull, need(k + 1 + j)) {
                            accumulate(g, &mut out[k + 1 + j], d)?;
                        }
                        if let (Some(d), true) = (drows, need(1 + j)) {
                            let d = if carries[j] { rows_into_zeros(g, inputs[1 + j], ix, d)? } else { d };
                            accumulate(g, &mut out[1 + j], d)?;
                        }
                        continue;
                    }
                    let seed = match (dfull, self.capped()) {
                        (Some(d), false) => d,
                        (None, false) => continue, // the rows output of a finished loop is empty
                        (dfull, true) => {
                            // rows still active at the cap: their carries are in `rows`, and
                            // `full` keeps the full input's row there
                            let rows = match drows {
                                Some(r) => r,
                                None => g.zeros_like(outputs[1 + j])?,
                            };
                            let base = match dfull {
                                Some(d) => d,
                                None => g.zeros_like(outputs[k + 1 + j])?,
                            };
                            if let (Some(d), true) = (dfull, need(k + 1 + j)) {
                                let stale = g.gather(d, active, 0)?;
                                let stale = rows_into_zeros(g, inputs[k + 1 + j], ix, stale)?;
                                accumulate(g, &mut out[k + 1 + j], stale)?;
                            }
                            g.tensor_scatter_update(base, ix, rows)?
                        }
                    };
                    dres.push(j);
                    seeds.push(seed);
                }
            }
        }
        let ptypes = pi.w.param_types();
        let wrt: Vec<usize> =
            (0..pi.args.len()).filter(|&p| ptypes[p].dtype.is_float() && need(pi.args[p].0)).collect();
        if dres.is_empty() || wrt.is_empty() {
            return Ok(out);
        }
        let vf = d.vjp_function(g, &pi.w, &dres, &wrt)?;
        let mut args: Vec<Wrapped> = pi.args.iter().map(|&(i, s)| Wrapped { value: inputs[i], stacked: s }).collect();
        args.extend(seeds.into_iter().map(Wrapped::stacked));
        let res = convert_function(g, &vf, &args, &info, &self.options)?;
        for (&p, w) in wrt.iter().zip(res) {
            let (i, stacked) = pi.args[p];
            let per_row = force_stacked(g, &info, w, true)?.value;
            // an invariant input's cotangent is the sum of every iteration's
            let d = if stacked { per_row } else { g.reduce_sum(per_row, Some(&[0]), false)? };
            accumulate(g, &mut out[i], d)?;
        }
        Ok(out)
    }

    fn jvp(
        &self,
        d: &dyn FunctionDerivatives,
        g: &mut Graph,
        node: HookNode<'_>,
        tangents: &[Option<ValueId>],
    ) -> Result<Vec<Option<ValueId>>> {
        let (inputs, outputs) = (node.inputs, node.outputs);
        let info = self.info(inputs)?;
        let pi = self.per_iteration(g, inputs.len())?;
        let t = |i: usize| tangents.get(i).copied().flatten();
        let mut out: Vec<Option<ValueId>> = vec![None; outputs.len()];
        let tracked = self.tracked();
        // the per-iteration results with a tangent: every float result of a cond, the
        // float carries the body updates of a while
        let res_of: Vec<usize> = match &*self.form {
            SubsetForm::Cond { .. } => (0..outputs.len()).filter(|&r| is_float(g, outputs[r])).collect(),
            SubsetForm::While { .. } => {
                let k = tracked.len();
                (0..k).filter(|&j| tracked[j] && is_float(g, outputs[k + 1 + j])).collect()
            }
        };
        if let SubsetForm::While { carries, .. } = &*self.form {
            // pass-through carries: full = full input, rows = rows input at `active`
            let k = carries.len();
            for j in (0..k).filter(|&j| !tracked[j]) {
                out[k + 1 + j] = t(k + 1 + j);
                out[1 + j] = match t(1 + j) {
                    Some(tr) if carries[j] => Some(g.gather(tr, outputs[0], 0)?),
                    other => other,
                };
            }
        }
        let ptypes = pi.w.param_types();
        let tan: Vec<usize> =
            (0..pi.args.len()).filter(|&p| ptypes[p].dtype.is_float() && t(pi.args[p].0).is_some()).collect();
        if tan.is_empty() || res_of.is_empty() {
            return Ok(out);
        }
        let jf = d.jvp_function(g, &pi.w, &tan, &res_of)?;
        let mut args: Vec<Wrapped> = pi.args.iter().map(|&(i, s)| Wrapped { value: inputs[i], stacked: s }).collect();
        for &p in &tan {
            let (i, stacked) = pi.args[p];
            let value = t(i).ok_or_else(|| Error::Verify("Subset-form derivative: tangent vanished".into()))?;
            args.push(Wrapped { value, stacked });
        }
        let res = convert_function(g, &jf, &args, &info, &self.options)?;
        let k = tracked.len();
        for (&r, w) in res_of.iter().zip(res) {
            let tw = force_stacked(g, &info, w, true)?.value;
            if matches!(&*self.form, SubsetForm::Cond { .. }) {
                out[r] = Some(tw);
                continue;
            }
            let active = outputs[0];
            out[1 + r] = Some(g.gather(tw, active, 0)?);
            out[k + 1 + r] = Some(if self.capped() {
                // rows still active at the cap keep the full input's row in `full`
                let ix = g.reshape(active, &[-1, 1])?;
                let stale = match t(k + 1 + r) {
                    Some(tf) => g.gather(tf, active, 0)?,
                    None => g.zeros_like(outputs[1 + r])?,
                };
                g.tensor_scatter_update(tw, ix, stale)?
            } else {
                tw
            });
        }
        Ok(out)
    }
}
