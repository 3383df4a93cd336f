//! Derivative rules of the `control` family (`src/ops/control.rs`): `cond`, `while`,
//! `call` and `for`.
//!
//! Every rule builds ordinary graph nodes — new `Cond` / `While` nodes whose functions hold
//! the derivative of the original functions — so the result can be executed, vectorized by
//! `pfor` (jacobians) and differentiated again (hessians). No rule relies on runtime side
//! tables: whatever the backward pass needs from the forward pass is recomputed or
//! recorded into ordinary tensors.
//!
//! - `cond` (`cond`): a `Cond` on the same predicate whose branches are the branch VJPs
//!   (JVPs); each branch recomputes its own forward values, so only the taken branch runs.
//! - `while` (`loops`): count the trip count `T`, re-run the loop for `U = loop_max(T)`
//!   steps (`U == T` outside pfor, the largest `T` inside) recording every carry into
//!   preallocated `[U, ...]` buffers with `dynamic_update_slice` (in place: O(T) total
//!   copying), then a backward `While` for `s = U-1 .. 0` applies the body's VJP to the
//!   recorded carries; steps past `T` are no-ops, so the gradient does not depend on `U`
//!   and vectorizes when `T` differs per pfor iteration. Captures accumulate their
//!   cotangents. JVP: one `While` carrying primal and tangent carries.
//! - `call` (`call`): the callee's VJP / JVP inlined at the call site (recursive callees
//!   are `Unsupported`).
//! - `for` (`loops`): iterations are independent (no carries), so the VJP is a `While`
//!   over `j` applying the body's VJP to row `j` of the output cotangents and summing the
//!   capture cotangents; the JVP is a `For` over the body's JVP.
//!
//! A node whose function carries a derivative hook (pfor's Subset-form `while` and
//! `cond`, see `ir/derivative.rs`) is differentiated by the hook, which gets
//! `vjp_function` / `jvp_function` to differentiate the per-iteration function it
//! stands for; its results are given their primals' static shapes here.
//!
//! Invariants: integer and bool values (loop counters, predicates) never carry
//! derivatives; the functions built here take the original functions' parameter types, so
//! they type-check exactly where the originals did.

mod call;
mod cond;
mod loops;

use std::sync::Arc;

use hashbrown::HashMap;

use crate::autodiff::forward::jvp_seeded;
use crate::autodiff::reverse::gradients_seeded;
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::{Error, Result};
use crate::ir::{DerivativeHook, Function, FunctionDerivatives, Graph, HookNode, ValueId};
use crate::ops::{ControlKind, ControlOp, Op};
use crate::tensor::TensorType;

/// Cotangents of the inputs.
pub fn vjp(op: &ControlOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if let Some(hook) = hook(op) {
        let node = HookNode { inputs: &cx.inputs, outputs: &cx.outputs };
        let ds = hook.vjp(&Builders, cx.g, node, &cx.dys, &cx.needs)?;
        return typed_like(cx.g, ds, &cx.inputs);
    }
    match op {
        ControlOp::Cond { then, else_ } => cond::vjp(then, else_, cx),
        ControlOp::While { cond, body, num_carries, max_iterations } => {
            loops::while_vjp(cond, body, *num_carries, *max_iterations, cx)
        }
        ControlOp::Call { function, .. } => call::vjp(function, cx),
        ControlOp::For { body, .. } => loops::for_vjp(body, cx),
    }
}

/// Tangents of the outputs.
pub fn jvp(op: &ControlOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if let Some(hook) = hook(op) {
        let node = HookNode { inputs: &cx.inputs, outputs: &cx.outputs };
        let ts = hook.jvp(&Builders, cx.g, node, &cx.tangents)?;
        return typed_like(cx.g, ts, &cx.outputs);
    }
    match op {
        ControlOp::Cond { then, else_ } => cond::jvp(then, else_, cx),
        ControlOp::While { cond, body, num_carries, max_iterations } => {
            loops::while_jvp(cond, body, *num_carries, *max_iterations, cx)
        }
        ControlOp::Call { function, .. } => call::jvp(function, cx),
        ControlOp::For { body, static_n } => loops::for_jvp(body, *static_n, cx),
    }
}

/// The derivative hook of a node built by a pass that said how to differentiate it (the
/// `while` body's or the `cond` then-branch's, see `ir/derivative.rs`).
fn hook(op: &ControlOp) -> Option<Arc<dyn DerivativeHook>> {
    match op {
        ControlOp::While { body: f, .. } | ControlOp::Cond { then: f, .. } => f.derivative().cloned(),
        ControlOp::Call { .. } | ControlOp::For { .. } => None,
    }
}

/// The derivative builders a hook differentiates per-iteration functions with.
struct Builders;

impl FunctionDerivatives for Builders {
    fn vjp_function(&self, parent: &Graph, f: &Function, dres: &[usize], wrt: &[usize]) -> Result<Function> {
        vjp_function(parent, f, dres, wrt)
    }
    fn jvp_function(&self, parent: &Graph, f: &Function, tan: &[usize], out: &[usize]) -> Result<Function> {
        jvp_function(parent, f, tan, out, false)
    }
}

/// A hook's derivatives, each given the static shape of its primal (`like[i]`) where that
/// is fully fixed and the hook's value has dynamic dims.
fn typed_like(g: &mut Graph, ds: Vec<Option<ValueId>>, like: &[ValueId]) -> Result<Vec<Option<ValueId>>> {
    if ds.len() != like.len() {
        return Err(Error::InvalidArgument(format!(
            "derivative hook returned {} derivatives for {} values",
            ds.len(),
            like.len()
        )));
    }
    ds.into_iter()
        .zip(like)
        .map(|(d, v)| {
            let Some(d) = d else { return Ok(None) };
            let ty = g.value_type(*v)?.clone();
            Ok(Some(loops::restore_type(g, d, &ty)?))
        })
        .collect()
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: ControlKind) -> bool {
    true
}

/// Copy `f`'s body into `g` with its parameters bound to `args`; returns its results.
/// Nodes are re-added through the builder, so shape inference runs on the actual
/// argument types.
pub(crate) fn inline(g: &mut Graph, f: &Function, args: &[ValueId]) -> Result<Vec<ValueId>> {
    if args.len() != f.params.len() {
        return Err(Error::arity("inline", f.params.len().to_string(), args.len()));
    }
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    for (p, a) in f.params.iter().zip(args) {
        map.insert(*p, *a);
    }
    for n in f.graph.topo_order()? {
        let node = f.graph.node(n)?;
        let outs = f.graph.outputs_of(n);
        if outs.iter().all(|o| map.contains_key(o)) && !outs.is_empty() {
            continue; // a parameter
        }
        if matches!(node.op, Op::Input { .. }) {
            return Err(Error::InvalidArgument(format!(
                "inline: input {n} of a function is not one of its parameters"
            )));
        }
        let ins = node
            .inputs
            .iter()
            .map(|v| {
                map.get(v).copied().ok_or_else(|| Error::unknown_value(*v, "not computed by the inlined function"))
            })
            .collect::<Result<Vec<_>>>()?;
        let new = g.add_op_multi(node.op.clone(), &ins)?;
        for (o, nv) in outs.into_iter().zip(new) {
            map.insert(o, nv);
        }
    }
    f.results
        .iter()
        .map(|r| map.get(r).copied().ok_or_else(|| Error::unknown_value(*r, "not computed by the inlined function")))
        .collect()
}

/// A function computing the VJP of `f`: parameters `f.params ++ [cotangent of result r for
/// r in dres]`, results `[cotangent of parameter p for p in wrt]` (zeros where a parameter
/// does not reach the listed results). `dres` and `wrt` must name float values.
pub(crate) fn vjp_function(parent: &Graph, f: &Function, dres: &[usize], wrt: &[usize]) -> Result<Function> {
    let ptypes = f.param_types();
    let rtypes = f.result_types();
    let mut types = ptypes.clone();
    for &r in dres {
        types.push(
            rtypes.get(r).cloned().ok_or_else(|| Error::InvalidArgument(format!("vjp_function: no result {r}")))?,
        );
    }
    let np = ptypes.len();
    let (dres, wrt) = (dres.to_vec(), wrt.to_vec());
    Function::build(parent, &types, move |g, args| {
        let prim = &args[..np];
        let ys = inline(g, f, prim)?;
        vjp_of(g, &ys, prim, &dres, &wrt, &args[np..])
    })
}

/// `d <dys, ys[dres]> / d prim[wrt]` inside a function body (zeros for independent ones).
fn vjp_of(
    g: &mut Graph,
    ys: &[ValueId],
    prim: &[ValueId],
    dres: &[usize],
    wrt: &[usize],
    dys: &[ValueId],
) -> Result<Vec<ValueId>> {
    let ysel: Vec<ValueId> = dres.iter().map(|&r| ys[r]).collect();
    let xsel: Vec<ValueId> = wrt.iter().map(|&p| prim[p]).collect();
    let grads = if ysel.is_empty() || xsel.is_empty() {
        vec![None; xsel.len()]
    } else {
        gradients_seeded(g, &ysel, &xsel, Some(dys), false)?
    };
    grads.into_iter().zip(&xsel).map(|(d, x)| d.map_or_else(|| g.zeros_like(*x), Ok)).collect()
}

/// A function computing the JVP of `f`: parameters `f.params ++ [tangent of parameter p for
/// p in tan]`, results `(f.results if with_primal) ++ [tangent of result r for r in out]`.
pub(crate) fn jvp_function(
    parent: &Graph,
    f: &Function,
    tan: &[usize],
    out: &[usize],
    with_primal: bool,
) -> Result<Function> {
    let ptypes = f.param_types();
    let mut types = ptypes.clone();
    types.extend(tan.iter().map(|&p| ptypes[p].clone()));
    let np = ptypes.len();
    let (tan, out) = (tan.to_vec(), out.to_vec());
    Function::build(parent, &types, move |g, args| {
        let prim = &args[..np];
        let ys = inline(g, f, prim)?;
        let ysel: Vec<ValueId> = out.iter().map(|&r| ys[r]).collect();
        let xsel: Vec<ValueId> = tan.iter().map(|&p| prim[p]).collect();
        let ts = if xsel.is_empty() {
            ysel.iter().map(|y| g.zeros_like(*y)).collect::<Result<Vec<_>>>()?
        } else {
            jvp_seeded(g, &ysel, &xsel, &args[np..], false)?
        };
        let mut res = if with_primal { ys } else { vec![] };
        res.extend(ts);
        Ok(res)
    })
}

/// Indices of the float types.
/// The float results of the node whose cotangent is present (absent ones are zero).
pub(crate) fn float_results_with_cotangent(cx: &VjpCtx<'_>) -> Vec<usize> {
    (0..cx.outputs.len())
        .filter(|&r| cx.dys.get(r).copied().flatten().is_some() && cx.g.dtype(cx.y(r)).is_ok_and(|d| d.is_float()))
        .collect()
}

fn floats(types: &[TensorType]) -> Vec<usize> {
    types.iter().enumerate().filter(|(_, t)| t.dtype.is_float()).map(|(i, _)| i).collect()
}
