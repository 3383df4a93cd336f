//! `call` derivatives: the callee's VJP / JVP is built as a function and inlined at the
//! call site (it recomputes the callee's forward values it needs). Calls inside the callee
//! are differentiated the same way, recursively.
//!
//! A recursive callee (a cycle in the call graph) has no finite inlined derivative: its
//! rules return a clear `Unsupported` error naming the function. (Differentiating it would
//! need a recursive derivative function with a tape; not built.)

use super::{float_results_with_cotangent, floats, inline, jvp_function, vjp_function};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};

/// Error if `name` can reach itself through calls.
fn check_not_recursive(g: &Graph, name: &str) -> Result<()> {
    match g.library().recursion_via(name)? {
        None => Ok(()),
        Some(fname) => Err(Error::unsupported(
            "call",
            format!(
                "derivatives of the recursive function '{name}' (it calls itself via '{fname}'); \
                 only non-recursive calls are differentiated"
            ),
        )),
    }
}

/// Cotangents of the call's arguments: the callee's VJP, inlined.
pub fn vjp(function: &str, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    let f = cx.g.library().get(function)?;
    let ptypes = f.param_types();
    let wrt: Vec<usize> = floats(&ptypes).into_iter().filter(|&p| cx.need(p)).collect();
    let dres = float_results_with_cotangent(cx);
    let mut out = vec![None; n_in];
    if wrt.is_empty() || dres.is_empty() {
        return Ok(out);
    }
    check_not_recursive(cx.g, function)?;
    let vf = vjp_function(cx.g, &f, &dres, &wrt)?;
    let mut args = cx.inputs.clone();
    for &r in &dres {
        args.push(cx.dy(r)?);
    }
    let ds = inline(cx.g, &vf, &args)?;
    for (&p, d) in wrt.iter().zip(ds) {
        out[p] = Some(d);
    }
    Ok(out)
}

/// Tangents of the call's results: the callee's JVP, inlined.
pub fn jvp(function: &str, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_out = cx.outputs.len();
    let f = cx.g.library().get(function)?;
    let ptypes = f.param_types();
    let tan: Vec<usize> = floats(&ptypes).into_iter().filter(|&p| cx.t(p).is_some()).collect();
    let out_f = floats(&f.result_types());
    let mut out = vec![None; n_out];
    if tan.is_empty() || out_f.is_empty() {
        return Ok(out);
    }
    check_not_recursive(cx.g, function)?;
    let jf = jvp_function(cx.g, &f, &tan, &out_f, false)?;
    let mut args = cx.inputs.clone();
    for &p in &tan {
        args.push(cx.t_or_zero(p)?);
    }
    let ts = inline(cx.g, &jf, &args)?;
    for (&r, t) in out_f.iter().zip(ts) {
        out[r] = Some(t);
    }
    Ok(out)
}
