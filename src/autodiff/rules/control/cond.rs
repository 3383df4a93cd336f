//! `cond` derivatives: a `Cond` on the same predicate whose branches are the VJPs (JVPs)
//! of the original branches. Each derivative branch recomputes its own forward values, so
//! only the taken branch runs and an untaken branch never sees the other's values. The
//! predicate is an input like any other, so inside `pfor` a loop-variant predicate is
//! handled by the `cond` converter (subset / mask) exactly as for the forward `Cond`.

use std::sync::Arc;

use super::{float_results_with_cotangent, floats, jvp_function, vjp_function};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Function, ValueId};
use crate::ops::{ControlOp, Op};

/// Cotangents of `(pred, args...)`: the predicate gets none, each needed float argument
/// the cotangent from the taken branch.
pub fn vjp(then: &Arc<Function>, else_: &Arc<Function>, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    let ptypes = then.param_types();
    // Arguments that need a cotangent (input i+1 is parameter i).
    let wrt: Vec<usize> = floats(&ptypes).into_iter().filter(|&p| cx.need(p + 1)).collect();
    // Results with a cotangent (absent ones are zero and are left out).
    let dres = float_results_with_cotangent(cx);
    let mut out = vec![None; n_in];
    if wrt.is_empty() || dres.is_empty() {
        return Ok(out);
    }
    let tf = vjp_function(cx.g, then, &dres, &wrt)?;
    let ef = vjp_function(cx.g, else_, &dres, &wrt)?;
    let mut inputs = cx.inputs.clone();
    for &r in &dres {
        inputs.push(cx.dy(r)?);
    }
    let op = Op::Control(ControlOp::Cond { then: Arc::new(tf), else_: Arc::new(ef) });
    let ds = cx.g.add_op_multi(op, &inputs)?;
    for (&p, d) in wrt.iter().zip(ds) {
        out[p + 1] = Some(d);
    }
    Ok(out)
}

/// Tangents of the outputs: a `Cond` whose branches compute the branch JVPs.
pub fn jvp(then: &Arc<Function>, else_: &Arc<Function>, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_out = cx.outputs.len();
    let ptypes = then.param_types();
    let tan: Vec<usize> = floats(&ptypes).into_iter().filter(|&p| cx.t(p + 1).is_some()).collect();
    let otypes = cx.outputs.iter().map(|o| cx.g.value_type(*o).cloned()).collect::<Result<Vec<_>>>()?;
    let out_f = floats(&otypes);
    let mut out = vec![None; n_out];
    if tan.is_empty() || out_f.is_empty() {
        return Ok(out);
    }
    let tf = jvp_function(cx.g, then, &tan, &out_f, false)?;
    let ef = jvp_function(cx.g, else_, &tan, &out_f, false)?;
    let mut inputs = cx.inputs.clone();
    for &p in &tan {
        inputs.push(cx.t_or_zero(p + 1)?);
    }
    let op = Op::Control(ControlOp::Cond { then: Arc::new(tf), else_: Arc::new(ef) });
    let ts = cx.g.add_op_multi(op, &inputs)?;
    for (&r, t) in out_f.iter().zip(ts) {
        out[r] = Some(t);
    }
    Ok(out)
}
