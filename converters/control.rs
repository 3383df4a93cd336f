//! Converters for control flow inside pfor (paper §3.5–3.7).
//!
//! - `cond` with a loop-invariant predicate: ONE cond whose branches are converted
//!   recursively (an output is stacked if either branch makes it stacked).
//! - `cond` with a loop-variant predicate:
//!   * `Subset`: partition the active iterations with `nonzero`, gather each stacked input
//!     per side, convert each branch for its subset only (the loop index inside a branch is
//!     the subset's iteration indices), and stitch the results back in iteration order with
//!     `tensor_scatter_update`. An iteration never runs the branch it did not take, and a
//!     branch no iteration takes does not run at all (each side under `cond(rows > 0)`). The
//!     partition runs inside ONE `cond` node (constant predicate, both branches the same
//!     function), so that the form stays one node (see nesting below).
//!   * `Mask`: run both branches on all iterations and `select` — only when neither branch
//!     may raise ([`Function::may_raise`]: no integer division, indexing, factorization,
//!     loop, call or custom op that can fail on values, transitively) or has side effects;
//!     such a cond takes the `Subset` form even in `Mask` mode, since its untaken
//!     iterations would feed the op values the loop never gives it (and no iteration may
//!     take it), or write what the loop never writes.
//!   * `Auto`: `Mask` when both branches are small (≤ 16 nodes), contain no control flow,
//!     may not raise and have no side effects; `Subset` otherwise.
//! - one static iteration (`n = 1` known when converting): a loop-variant cond/while in any
//!   mode is re-emitted on its only row as the loop runs it (`one_row`); the forms below
//!   are for more rows, or for a row count known only at run time.
//! - `while`: carries reach a stackedness fixpoint (an invariant carry becomes stacked when
//!   the body makes it so). With a loop-invariant predicate the loop stays one loop over
//!   converted cond/body. With a loop-variant predicate:
//!   * `Subset` (and `Auto`): the loop carries the set of active positions and the active
//!     rows of each carry (compacted, in position order) beside the full carries; each step
//!     evaluates the converted condition on the active rows, scatters the rows that finish
//!     into the full carries (once, as they finish), keeps the rest and runs the converted
//!     body on them. Finished rows are never touched again, so the body never runs past an
//!     iteration's own trip count.
//!   * `Mask` (without side effects in cond or body, else `Subset`): run until no row is
//!     active, updating carries with `select`. Finished rows
//!     keep running the body (their results discarded) on carries the loop never gave it:
//!     the body is converted as a masked region (the live rows are those whose condition
//!     holds, at least one on every step), where each op that may raise reads, on the
//!     finished rows, the first live row's values of the inputs it may raise on (an index,
//!     a divisor, a matrix), so it fails only if a live row — a real iteration — fails.
//!
//!   Carries the body passes through unchanged stay loop-invariant.
//! - nesting: the function of a Subset-form node (the `while`'s body, the partition `cond`'s
//!   branch) records the per-iteration functions it vectorized (`SubsetForm`). When an
//!   enclosing pfor converts such a node (a pfor in a pfor, at any depth), it rebuilds the
//!   Subset form from that record over the combined iteration space (`combined`) instead
//!   of converting its data-length row lists, which cannot be stacked.
//! - derivatives: the same function carries a derivative hook (`derivative`): autodiff
//!   differentiates a Subset-form node as "pfor over its iterations of the derivative of
//!   the per-iteration loop / cond", never through its shrinking carries. Invariant: every
//!   Subset-form node this module or `combined` emits has both the record and the hook.
//!
//!   A loop's [`IterationCap`] carries over: every iteration stops (or fails with
//!   `Error::IterationLimit`) exactly where its own loop would, because all active
//!   iterations of the vectorized loop have made the same number of trips. The invariant
//!   and `Mask` forms keep the cap as it is (their loop condition holds at trip `t` iff
//!   some iteration's does). A capped `Subset` loop tests "some active row's condition
//!   holds" in its condition (evaluated again in the body) instead of "some row is
//!   active", so it ends after the last trip instead of one step later, and the rows still
//!   active when it ends (finished at that trip, or stopped by the cap) are scattered into
//!   the full carries after the loop.
//!
//! Never failing where the loop succeeds (the driver's part): an op that may raise and reads
//! only loop-invariant values is computed once instead of per iteration — in a branch or
//! body converted for a subset that may be empty, only under `cond(rows > 0)`.
//! - `call` of a non-recursive function: its body is converted in place. A recursive call
//!   is handed off to the auto-batching VM: the function (and everything it calls) is
//!   translated into an autobatch `Program` and ONE `autobatch_call` node runs it on the
//!   stacked arguments (batch = n); declined (per-op fallback) if translation fails.
//! - `for` (a reference loop, e.g. a chunked pfor's chunks) with a loop-invariant trip count:
//!   the loops are interchanged (`for_loop`).

mod combined;
mod derivative;
mod for_loop;
mod one_row;

use std::sync::Arc;

use combined::SubsetForm;
use derivative::SubsetDerivative;

use crate::ops::{ControlKind, ControlOp, IterationCap, Op, OpKind};
use crate::passes::cost::graph_cost;
use crate::tensor::{DType, Shape, Tensor, TensorType};
use crate::vectorize::{
    ControlFlowMode, ConvertCtx, Converted, LoopInfo, OpKey, PforOptions, Registry, Wrapped, convert_function,
    convert_function_masked, handoff, tile,
};
use crate::{Error, Function, Graph, Result, ValueId};

/// The type of a converted value in `g`.
fn ty(g: &Graph, v: ValueId) -> Result<TensorType> {
    g.value_type(v).cloned()
}

/// Loop-info parameters (`n`, `index`) followed by the given values, as function params.
fn loop_params(g: &Graph, info: &LoopInfo, vals: &[ValueId]) -> Result<Vec<TensorType>> {
    let mut t = vec![ty(g, info.n)?, ty(g, info.index)?];
    for v in vals {
        t.push(ty(g, *v)?);
    }
    Ok(t)
}

fn inner_info(outer: &LoopInfo, n: ValueId, index: ValueId) -> LoopInfo {
    LoopInfo { n_static: outer.n_static, n, index, index_is_iota: outer.index_is_iota }
}

fn rewrap(params: &[ValueId], like: &[Wrapped]) -> Vec<Wrapped> {
    params.iter().zip(like).map(|(p, w)| Wrapped { value: *p, stacked: w.stacked }).collect()
}

/// Stack `w` if `force` (tiling an invariant value).
fn force_stacked(g: &mut Graph, info: &LoopInfo, w: Wrapped, force: bool) -> Result<Wrapped> {
    if force && !w.stacked { Ok(Wrapped::stacked(tile(g, info, w.value)?)) } else { Ok(w) }
}

/// `pred [k]` reshaped to `[k, 1, ...]` for broadcasting against rank `1 + r` values.
fn expand_pred(g: &mut Graph, pred: ValueId, r: usize) -> Result<ValueId> {
    let mut shape = vec![-1i64];
    shape.extend(std::iter::repeat_n(1, r));
    g.reshape(pred, &shape)
}

fn positions(g: &mut Graph, mask: ValueId) -> Result<ValueId> {
    let nz = g.nonzero(mask)?;
    g.reshape(nz, &[-1])
}

fn subset_info(g: &mut Graph, info: &LoopInfo, pos: ValueId) -> Result<LoopInfo> {
    let n = g.size_of(pos)?;
    let index = g.gather(info.index, pos, 0)?;
    Ok(LoopInfo { n_static: None, n, index, index_is_iota: false })
}

fn gather_rows(g: &mut Graph, ws: &[Wrapped], pos: ValueId) -> Result<Vec<Wrapped>> {
    ws.iter().map(|w| Ok(if w.stacked { Wrapped::stacked(g.gather(w.value, pos, 0)?) } else { *w })).collect()
}

/// Zeros of `[n] + tail_of(like)` (per-iteration dims taken from `like`'s static type or
/// its run-time shape).
fn stacked_zeros_like(g: &mut Graph, info: &LoopInfo, per_iter: &TensorType, like: ValueId) -> Result<ValueId> {
    let tail = match per_iter.shape.as_fixed() {
        Some(d) => g.constant(Tensor::vec1(&d.iter().map(|&x| x as i64).collect::<Vec<_>>())),
        None => {
            let s = g.shape_of(like)?;
            g.slice(s, &[1], &[-1])?
        }
    };
    stacked_zeros_of(g, info, per_iter.dtype, tail)
}

/// Zeros of `[n] + tail` (`tail`: the per-iteration dims, an i64 vector value).
fn stacked_zeros_of(g: &mut Graph, info: &LoopInfo, dtype: DType, tail: ValueId) -> Result<ValueId> {
    let n1 = g.reshape(info.n, &[1])?;
    let full = g.concat(&[n1, tail], 0)?;
    let z = g.scalar(dtype, 0.0);
    g.fill_dyn(full, z)
}

fn has_side_effects(f: &Function) -> bool {
    f.graph().node_ids().into_iter().any(|n| f.graph().node(n).map_or(true, |nd| nd.op.has_side_effects()))
}

/// True if `f` may run on iterations that did not reach it (the mask form): none of its ops
/// may raise on values ([`Function::may_raise`]) or has side effects (an iteration's
/// discarded write would land).
fn maskable(f: &Function) -> bool {
    !f.may_raise() && !has_side_effects(f)
}

/// Largest branch (nodes, by the one cost estimate) Auto runs in the mask form.
const MASK_MAX_NODES: usize = 16;

/// Auto's choice of the mask form for a branch: small (≤ [`MASK_MAX_NODES`] nodes),
/// without control flow (both by [`graph_cost`]), and [`maskable`].
fn small_and_safe(f: &Function) -> bool {
    let cost = graph_cost(f.graph());
    cost.nodes <= MASK_MAX_NODES && cost.control == 0 && maskable(f)
}

fn cond(ctx: &mut ConvertCtx<'_>, then: &Arc<Function>, else_: &Arc<Function>) -> Result<Converted> {
    if let Some(form) = then.origin::<SubsetForm>() {
        return combined::convert(ctx, form);
    }
    let pred = ctx.input(0);
    let args: Vec<Wrapped> = ctx.inputs()[1..].to_vec();
    let info = ctx.loop_info().clone();
    let options = ctx.options().clone();
    let out_types: Vec<TensorType> = (0..then.results().len()).map(|k| ctx.output_type(k).clone()).collect();
    let g = ctx.graph();
    if !pred.stacked {
        return cond_invariant(g, &info, &options, pred.value, &args, then, else_);
    }
    let mask = match options.control_flow {
        ControlFlowMode::Mask => maskable(then) && maskable(else_),
        ControlFlowMode::Subset => false,
        ControlFlowMode::Auto => small_and_safe(then) && small_and_safe(else_),
    };
    if mask {
        let t = convert_function(g, then, &args, &info, &options)?;
        let e = convert_function(g, else_, &args, &info, &options)?;
        let mut outs = Vec::with_capacity(t.len());
        for ((tw, ew), ot) in t.iter().zip(&e).zip(&out_types) {
            let p = expand_pred(g, pred.value, ot.rank())?;
            let tv = force_stacked(g, &info, *tw, true)?;
            outs.push(Wrapped::stacked(g.select(p, tv.value, ew.value)?));
        }
        return ConvertCtx::done(outs);
    }
    // Subset: ONE node partitions, converts each branch on its rows and stitches.
    ConvertCtx::done(cond_subset(g, &info, &options, pred.value, &args, then, else_, &out_types)?)
}

/// The Subset form of a cond whose predicate `pred [n]` is loop-variant: one `Cond` node
/// (predicate constant true, both branches the same function) running [`partition`] on
/// `(pred, args.., n, index)`. Being one node that records `then` / `else_`
/// ([`SubsetForm::Cond`]), an enclosing pfor rebuilds it over the combined iteration space
/// instead of converting the partition's ragged row lists (see [`combined`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn cond_subset(
    g: &mut Graph,
    info: &LoopInfo,
    options: &PforOptions,
    pred: ValueId,
    args: &[Wrapped],
    then: &Arc<Function>,
    else_: &Arc<Function>,
    out_types: &[TensorType],
) -> Result<Vec<Wrapped>> {
    let m = args.len();
    let mut inputs = vec![pred];
    inputs.extend(args.iter().map(|w| w.value));
    inputs.push(info.n);
    inputs.push(info.index);
    let types = inputs.iter().map(|v| ty(g, *v)).collect::<Result<Vec<_>>>()?;
    let f = Function::build(g, &types, |sub, p| {
        let inner = inner_info(info, p[m + 1], p[m + 2]);
        partition(sub, &inner, options, p[0], &rewrap(&p[1..=m], args), then, else_, out_types)
    })?;
    let form = SubsetForm::Cond {
        then: then.clone(),
        else_: else_.clone(),
        args: args.iter().map(|w| w.stacked).collect(),
        out_types: out_types.to_vec(),
    };
    let f = Arc::new(with_form(f, form, info, options));
    inputs.insert(0, g.constant(Tensor::scalar(true)));
    let outs = g.add_op_multi(Op::Control(ControlOp::Cond { then: f.clone(), else_: f }), &inputs)?;
    Ok(outs.into_iter().map(Wrapped::stacked).collect())
}

/// `f` (the function of a Subset-form node on the loop `info`) with its record `form` and
/// the derivative hook that differentiates the node through `form` ([`derivative`]).
fn with_form(f: Function, form: SubsetForm, info: &LoopInfo, options: &PforOptions) -> Function {
    let form = Arc::new(form);
    let hook = SubsetDerivative {
        form: form.clone(),
        options: options.clone(),
        n_static: info.n_static,
        index_is_iota: info.index_is_iota,
    };
    f.with_origin(form).with_derivative(Arc::new(hook))
}

/// Partition the active rows by `pred`, convert each branch for its rows only (the loop
/// index inside a branch is its rows' iteration indices), stitch the results back in row
/// order with `tensor_scatter_update`.
#[allow(clippy::too_many_arguments)]
fn partition(
    g: &mut Graph,
    info: &LoopInfo,
    options: &PforOptions,
    pred: ValueId,
    args: &[Wrapped],
    then: &Function,
    else_: &Function,
    out_types: &[TensorType],
) -> Result<Vec<ValueId>> {
    let not_p = g.logical_not(pred)?;
    let mut parts = Vec::with_capacity(2);
    for (f, m) in [(then, pred), (else_, not_p)] {
        let pos = positions(g, m)?;
        let sinfo = subset_info(g, info, pos)?;
        let sargs = gather_rows(g, args, pos)?;
        // the branch runs only when some row takes it (the loop never runs a branch no
        // iteration takes, and its ops may fail on the empty rows' attributes alone);
        // with no rows its results are empty, `[0]` + per-iteration dims (dynamic ones 0)
        let zero = g.constant(Tensor::scalar(0i64));
        let taken = g.greater(sinfo.n, zero)?;
        let types = std::cell::RefCell::new(Vec::new());
        let stacked = g.cond(
            taken,
            &[],
            |g, _| {
                let res = convert_function(g, f, &sargs, &sinfo, options)?;
                let mut out = Vec::with_capacity(res.len());
                for w in res {
                    out.push(force_stacked(g, &sinfo, w, true)?.value);
                }
                *types.borrow_mut() = out.iter().map(|v| ty(g, *v)).collect::<Result<Vec<_>>>()?;
                Ok(out)
            },
            |g, _| {
                let mut out = Vec::new();
                for (t, ot) in types.borrow().iter().zip(out_types) {
                    // per-iteration dims: the branch's where static, else the cond's
                    let mut dims = vec![0usize];
                    let own = t.shape.dims().iter().skip(1);
                    dims.extend(own.zip(ot.shape.dims()).map(|(d, o)| d.value().or(o.value()).unwrap_or(0)));
                    out.push(g.constant(Tensor::zeros(t.dtype, &dims)?));
                }
                Ok(out)
            },
        )?;
        parts.push((pos, stacked));
    }
    let mut outs = Vec::with_capacity(out_types.len());
    for (k, ot) in out_types.iter().enumerate() {
        let ragged = ot.shape.as_fixed().is_none();
        let mut acc = if ragged {
            let tail = taken_branch_tail(g, &parts, k)?;
            stacked_zeros_of(g, info, ot.dtype, tail)?
        } else {
            stacked_zeros_like(g, info, ot, parts[0].1[k])?
        };
        for (pos, vals) in &parts {
            let ix = g.reshape(*pos, &[-1, 1])?;
            let upd = if ragged { empty_as(g, vals[k], acc)? } else { vals[k] };
            acc = g.tensor_scatter_update(acc, ix, upd)?;
        }
        outs.push(acc);
    }
    Ok(outs)
}

/// The per-iteration dims of result `k` of a branch some row took: the then-branch's
/// unless it has no rows. The branches' per-iteration shapes may differ where the output
/// type has dynamic dims; the loop fails only when rows take both (the scatter then fails
/// too), so the stitched result takes the taken branch's shape.
fn taken_branch_tail(g: &mut Graph, parts: &[(ValueId, Vec<ValueId>)], k: usize) -> Result<ValueId> {
    let (ts, es) = (g.shape_of(parts[0].1[k])?, g.shape_of(parts[1].1[k])?);
    let rows = g.slice(ts, &[0], &[1])?;
    let zero = g.constant(Tensor::vec1(&[0i64]));
    let taken = g.greater(rows, zero)?;
    let taken = g.reshape(taken, &[])?;
    let shape = g.select(taken, ts, es)?;
    g.slice(shape, &[1], &[-1])
}

/// `vals` (`[rows, ...]`) as is when it has rows, else reshaped to `[0]` + `acc`'s
/// per-iteration dims (an untaken branch's empty result must not constrain the shape).
fn empty_as(g: &mut Graph, vals: ValueId, acc: ValueId) -> Result<ValueId> {
    let own = g.shape_of(vals)?;
    let rows = g.slice(own, &[0], &[1])?;
    let zero = g.constant(Tensor::vec1(&[0i64]));
    let has_rows = g.greater(rows, zero)?;
    let has_rows = g.reshape(has_rows, &[])?;
    let own_tail = g.slice(own, &[1], &[-1])?;
    let acc_shape = g.shape_of(acc)?;
    let acc_tail = g.slice(acc_shape, &[1], &[-1])?;
    let tail = g.select(has_rows, own_tail, acc_tail)?;
    let full = g.concat(&[rows, tail], 0)?;
    g.reshape_dyn(vals, full)
}

#[allow(clippy::too_many_arguments)]
fn build_branch(
    g: &Graph,
    info: &LoopInfo,
    options: &PforOptions,
    param_types: &[TensorType],
    args: &[Wrapped],
    f: &Function,
    force: &[bool],
) -> Result<(Function, Vec<bool>)> {
    let mut stackedness = Vec::new();
    let func = Function::build(g, param_types, |sub, p| {
        let i2 = inner_info(info, p[0], p[1]);
        let res = convert_function(sub, f, &rewrap(&p[2..], args), &i2, options)?;
        let mut vals = Vec::with_capacity(res.len());
        for (k, w) in res.into_iter().enumerate() {
            let w = force_stacked(sub, &i2, w, force.get(k).copied().unwrap_or(false))?;
            stackedness.push(w.stacked);
            vals.push(w.value);
        }
        Ok(vals)
    })?;
    Ok((func, stackedness))
}

fn cond_invariant(
    g: &mut Graph,
    info: &LoopInfo,
    options: &PforOptions,
    pred: ValueId,
    args: &[Wrapped],
    then: &Function,
    else_: &Function,
) -> Result<Converted> {
    let vals: Vec<ValueId> = args.iter().map(|w| w.value).collect();
    let types = loop_params(g, info, &vals)?;
    let (_, st) = build_branch(g, info, options, &types, args, then, &[])?;
    let (_, se) = build_branch(g, info, options, &types, args, else_, &[])?;
    let union: Vec<bool> = st.iter().zip(&se).map(|(a, b)| *a || *b).collect();
    let (tf, _) = build_branch(g, info, options, &types, args, then, &union)?;
    let (ef, _) = build_branch(g, info, options, &types, args, else_, &union)?;
    let mut inputs = vec![pred, info.n, info.index];
    inputs.extend(vals);
    let outs = g.add_op_multi(Op::Control(ControlOp::Cond { then: Arc::new(tf), else_: Arc::new(ef) }), &inputs)?;
    ConvertCtx::done(outs.into_iter().zip(union).map(|(v, s)| Wrapped { value: v, stacked: s }).collect())
}

/// Stackedness of the body's results given carries' stackedness, by converting into a
/// scratch graph.
fn body_stackedness(
    g: &Graph,
    info: &LoopInfo,
    options: &PforOptions,
    f: &Function,
    carries: &[(TensorType, bool)],
    captures: &[Wrapped],
) -> Result<Vec<bool>> {
    let mut scratch = g.new_child();
    let n = scratch.input("n", DType::I64, Shape::scalar());
    let index = scratch.input("index", DType::I64, Shape::from_dims([info.dim()]));
    let i2 = inner_info(info, n, index);
    let mut args = Vec::new();
    for (k, (t, s)) in carries.iter().enumerate() {
        let shape = if *s { t.shape.prepend(info.dim()) } else { t.shape.clone() };
        args.push(Wrapped { value: scratch.input(&format!("c{k}"), t.dtype, shape), stacked: *s });
    }
    for (k, w) in captures.iter().enumerate() {
        let t = ty(g, w.value)?;
        args.push(Wrapped { value: scratch.input(&format!("k{k}"), t.dtype, t.shape), stacked: w.stacked });
    }
    Ok(convert_function(&mut scratch, f, &args, &i2, options)?.into_iter().map(|w| w.stacked).collect())
}

fn while_loop(
    ctx: &mut ConvertCtx<'_>,
    cond_f: &Arc<Function>,
    body: &Arc<Function>,
    k: usize,
    max_iterations: Option<IterationCap>,
) -> Result<Converted> {
    if let Some(form) = body.origin::<SubsetForm>() {
        return combined::convert(ctx, form);
    }
    let info = ctx.loop_info().clone();
    let options = ctx.options().clone();
    let carries: Vec<Wrapped> = ctx.inputs()[..k].to_vec();
    let captures: Vec<Wrapped> = ctx.inputs()[k..].to_vec();
    let per_iter: Vec<TensorType> = (0..k).map(|j| ctx.input_type(j).clone()).collect();
    // Pass-through carries (the body returns its own parameter) never change.
    let pass: Vec<bool> = (0..k).map(|j| body.results()[j] == body.params()[j]).collect();
    let g = ctx.graph();
    // Stackedness fixpoint over the body.
    let mut st: Vec<bool> = carries.iter().map(|w| w.stacked).collect();
    loop {
        let cs: Vec<(TensorType, bool)> = per_iter.iter().cloned().zip(st.iter().copied()).collect();
        let out = body_stackedness(g, &info, &options, body, &cs, &captures)?;
        let next: Vec<bool> = st.iter().zip(&out).map(|(a, b)| *a || *b).collect();
        if next == st {
            break;
        }
        st = next;
    }
    let cs: Vec<(TensorType, bool)> = per_iter.iter().cloned().zip(st.iter().copied()).collect();
    let pred_stacked = body_stackedness(g, &info, &options, cond_f, &cs, &captures)?[0];
    if pred_stacked {
        // Diverging iterations: every carry the body updates must be per-iteration.
        for j in 0..k {
            st[j] = st[j] || !pass[j];
        }
    }
    // Initial carries with their final stackedness.
    let mut init = Vec::with_capacity(k);
    for (w, s) in carries.iter().zip(&st) {
        init.push(force_stacked(g, &info, *w, *s)?);
    }
    let cap_vals: Vec<ValueId> = captures.iter().map(|w| w.value).collect();
    let outs = if !pred_stacked {
        while_invariant(g, &info, &options, cond_f, body, &init, &captures, &cap_vals, &st, max_iterations)?
    } else if options.control_flow == ControlFlowMode::Mask && !has_side_effects(cond_f) && !has_side_effects(body) {
        while_mask(g, &info, &options, cond_f, body, &init, &captures, &cap_vals, &pass, max_iterations)?
    } else {
        while_subset(g, &info, &options, cond_f, body, &init, &captures, &cap_vals, &pass, max_iterations)?
    };
    ConvertCtx::done(outs.into_iter().zip(st).map(|(v, s)| Wrapped { value: v, stacked: s }).collect())
}

/// Wrapped parameters: carries (with `st`), then `n`, `index`, then captures.
fn split_params(p: &[ValueId], k: usize, carries: &[Wrapped], captures: &[Wrapped]) -> (Vec<Wrapped>, LoopParts) {
    let c = rewrap(&p[..k], carries);
    let caps = rewrap(&p[k + 2..], captures);
    (c, LoopParts { n: p[k], index: p[k + 1], captures: caps })
}

struct LoopParts {
    n: ValueId,
    index: ValueId,
    captures: Vec<Wrapped>,
}

fn while_inputs(
    g: &Graph,
    info: &LoopInfo,
    init: &[ValueId],
    cap_vals: &[ValueId],
) -> Result<(Vec<ValueId>, Vec<TensorType>)> {
    let mut inputs = init.to_vec();
    inputs.push(info.n);
    inputs.push(info.index);
    inputs.extend_from_slice(cap_vals);
    let types = inputs.iter().map(|v| ty(g, *v)).collect::<Result<Vec<_>>>()?;
    Ok((inputs, types))
}

#[allow(clippy::too_many_arguments)]
fn while_invariant(
    g: &mut Graph,
    info: &LoopInfo,
    options: &PforOptions,
    cond_f: &Function,
    body: &Function,
    init: &[Wrapped],
    captures: &[Wrapped],
    cap_vals: &[ValueId],
    st: &[bool],
    max_iterations: Option<IterationCap>,
) -> Result<Vec<ValueId>> {
    let k = init.len();
    let init_vals: Vec<ValueId> = init.iter().map(|w| w.value).collect();
    let (inputs, types) = while_inputs(g, info, &init_vals, cap_vals)?;
    let cf = Function::build(g, &types, |sub, p| {
        let (c, lp) = split_params(p, k, init, captures);
        let i2 = inner_info(info, lp.n, lp.index);
        let mut args = c;
        args.extend(lp.captures);
        let r = convert_function(sub, cond_f, &args, &i2, options)?;
        Ok(vec![r[0].value])
    })?;
    let bf = Function::build(g, &types, |sub, p| {
        let (c, lp) = split_params(p, k, init, captures);
        let i2 = inner_info(info, lp.n, lp.index);
        let mut args = c;
        args.extend(lp.captures);
        let r = convert_function(sub, body, &args, &i2, options)?;
        let mut vals = Vec::with_capacity(k);
        for (w, s) in r.into_iter().zip(st) {
            vals.push(force_stacked(sub, &i2, w, *s)?.value);
        }
        Ok(vals)
    })?;
    let op = ControlOp::While { cond: Arc::new(cf), body: Arc::new(bf), num_carries: init_vals.len(), max_iterations };
    g.add_op_multi(Op::Control(op), &inputs)
}

#[allow(clippy::too_many_arguments)]
fn while_mask(
    g: &mut Graph,
    info: &LoopInfo,
    options: &PforOptions,
    cond_f: &Function,
    body: &Function,
    init: &[Wrapped],
    captures: &[Wrapped],
    cap_vals: &[ValueId],
    pass: &[bool],
    max_iterations: Option<IterationCap>,
) -> Result<Vec<ValueId>> {
    let k = init.len();
    let init_vals: Vec<ValueId> = init.iter().map(|w| w.value).collect();
    let (inputs, types) = while_inputs(g, info, &init_vals, cap_vals)?;
    let cf = Function::build(g, &types, |sub, p| {
        let (c, lp) = split_params(p, k, init, captures);
        let i2 = inner_info(info, lp.n, lp.index);
        let mut args = c;
        args.extend(lp.captures);
        let r = convert_function(sub, cond_f, &args, &i2, options)?;
        let pr = force_stacked(sub, &i2, r[0], true)?.value;
        Ok(vec![sub.reduce_any(pr, Some(&[0]), false)?])
    })?;
    let bf = Function::build(g, &types, |sub, p| {
        let (c, lp) = split_params(p, k, init, captures);
        let i2 = inner_info(info, lp.n, lp.index);
        let mut args = c.clone();
        args.extend(lp.captures);
        let pr = convert_function(sub, cond_f, &args, &i2, options)?;
        let pr = force_stacked(sub, &i2, pr[0], true)?.value;
        // rows whose condition is false have finished: their body results are discarded
        let r = convert_function_masked(sub, body, &args, &i2, options, pr)?;
        let mut vals = Vec::with_capacity(k);
        for (j, w) in r.into_iter().enumerate() {
            if pass[j] {
                vals.push(c[j].value);
                continue;
            }
            let rank = sub.value_type(c[j].value)?.rank() - 1;
            let m = expand_pred(sub, pr, rank)?;
            vals.push(sub.select(m, w.value, c[j].value)?);
        }
        Ok(vals)
    })?;
    let op = ControlOp::While { cond: Arc::new(cf), body: Arc::new(bf), num_carries: init_vals.len(), max_iterations };
    g.add_op_multi(Op::Control(op), &inputs)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn while_subset(
    g: &mut Graph,
    info: &LoopInfo,
    options: &PforOptions,
    cond_f: &Arc<Function>,
    body: &Arc<Function>,
    init: &[Wrapped],
    captures: &[Wrapped],
    cap_vals: &[ValueId],
    pass: &[bool],
    max_iterations: Option<IterationCap>,
) -> Result<Vec<ValueId>> {
    let k = init.len();
    // carries: [active positions, the active rows of each carry (in `active` order), the full
    // carries (finished rows written as they finish)]; rows of carries that stay invariant
    // (pass-through or unstacked) are not tracked
    let zero = g.constant(Tensor::scalar(0i64));
    let one = g.constant(Tensor::scalar(1i64));
    let active0 = g.range(zero, info.n, one)?;
    let mut init_vals = vec![active0];
    for w in init {
        // the compact rows start as all rows (a gather by the full range, so their type has
        // the dynamic row count the body's results have)
        init_vals.push(if w.stacked { g.gather(w.value, active0, 0)? } else { w.value });
    }
    init_vals.extend(init.iter().map(|w| w.value));
    let (inputs, types) = while_inputs(g, info, &init_vals, cap_vals)?;
    let kk = 2 * k + 1;
    let cf = Function::build(g, &types, |sub, p| {
        if max_iterations.is_some() {
            // capped: "some active row's condition holds" (see the module docs)
            let outer = inner_info(info, p[kk], p[kk + 1]);
            let pr = subset_pred(
                sub,
                &outer,
                options,
                cond_f,
                p[0],
                &rewrap(&p[1..k + 1], init),
                &rewrap(&p[kk + 2..], captures),
            )?;
            return Ok(vec![sub.reduce_any(pr, Some(&[0]), false)?]);
        }
        let sz = sub.size_of(p[0])?;
        let z = sub.constant(Tensor::scalar(0i64));
        Ok(vec![sub.greater(sz, z)?])
    })?;
    let bf = Function::build(g, &types, |sub, p| {
        let active = p[0];
        let rows = rewrap(&p[1..k + 1], init);
        let full = rewrap(&p[k + 1..kk], init);
        let lp = LoopParts { n: p[kk], index: p[kk + 1], captures: rewrap(&p[kk + 2..], captures) };
        let outer = inner_info(info, lp.n, lp.index);
        // the condition, on the active rows
        let pr = subset_pred(sub, &outer, options, cond_f, active, &rows, &lp.captures)?;
        let keep = positions(sub, pr)?;
        let not_pr = sub.logical_not(pr)?;
        let done = positions(sub, not_pr)?;
        let still = sub.gather(active, keep, 0)?;
        let done_ix = sub.gather(active, done, 0)?;
        let done_ix = sub.reshape(done_ix, &[-1, 1])?;
        // finished rows go to the full carries; the rest run the body
        let rows2 = gather_rows(sub, &rows, keep)?;
        let sinfo = subset_info(sub, &outer, still)?;
        let mut args2 = rows2.clone();
        args2.extend(gather_rows(sub, &lp.captures, still)?);
        let r = convert_function(sub, body, &args2, &sinfo, options)?;
        let mut new_rows = Vec::with_capacity(k);
        let mut new_full = Vec::with_capacity(k);
        for (j, w) in r.into_iter().enumerate() {
            if pass[j] || !full[j].stacked {
                // unchanged: invariant, or the kept rows of a stacked pass-through carry
                new_rows.push(rows2[j].value);
                new_full.push(full[j].value);
                continue;
            }
            new_rows.push(force_stacked(sub, &sinfo, w, true)?.value);
            let finished = sub.gather(rows[j].value, done, 0)?;
            new_full.push(sub.tensor_scatter_update(full[j].value, done_ix, finished)?);
        }
        let mut vals = vec![still];
        vals.extend(new_rows);
        vals.extend(new_full);
        Ok(vals)
    })?;
    // the record that lets an enclosing pfor rebuild this loop over the combined rows
    let form = SubsetForm::While {
        cond: cond_f.clone(),
        body: body.clone(),
        pass: pass.to_vec(),
        carries: init.iter().map(|w| w.stacked).collect(),
        captures: captures.iter().map(|w| w.stacked).collect(),
        max_iterations,
    };
    let bf = Arc::new(with_form(bf, form, info, options));
    let op = ControlOp::While { cond: Arc::new(cf), body: bf, num_carries: init_vals.len(), max_iterations };
    let outs = g.add_op_multi(Op::Control(op), &inputs)?;
    if max_iterations.is_none() {
        return Ok(outs[k + 1..kk].to_vec());
    }
    // capped: the rows still active when the loop ended hold their final carries
    let ix = g.reshape(outs[0], &[-1, 1])?;
    let mut full = Vec::with_capacity(k);
    for j in 0..k {
        let f = outs[k + 1 + j];
        full.push(if pass[j] || !init[j].stacked { f } else { g.tensor_scatter_update(f, ix, outs[1 + j])? });
    }
    Ok(full)
}

/// The converted condition `[m] bool` of a subset-mode loop on its `active` rows.
fn subset_pred(
    g: &mut Graph,
    outer: &LoopInfo,
    options: &PforOptions,
    cond_f: &Function,
    active: ValueId,
    rows: &[Wrapped],
    captures: &[Wrapped],
) -> Result<ValueId> {
    let caps = gather_rows(g, captures, active)?;
    let ainfo = subset_info(g, outer, active)?;
    let mut args = rows.to_vec();
    args.extend(caps);
    let pr = convert_function(g, cond_f, &args, &ainfo, options)?;
    Ok(force_stacked(g, &ainfo, pr[0], true)?.value)
}

/// True if `name` can reach itself through calls (an unknown callee is not recursion: the
/// in-place conversion reports it).
fn is_recursive(g: &Graph, name: &str) -> bool {
    matches!(g.library().recursion_via(name), Ok(Some(_)))
}

/// A recursive call: hand the whole call off to the auto-batching VM (one node running
/// every iteration's recursion at once); declined if the function cannot be translated.
fn recursive_call(ctx: &mut ConvertCtx<'_>, function: &str) -> Result<Converted> {
    let k = ctx.num_inputs();
    if k == 0 {
        return ConvertCtx::unhandled(format!("recursive function '{function}' without arguments"));
    }
    let in_types: Vec<TensorType> = (0..k).map(|j| ctx.input_type(j).clone()).collect();
    let out_types: Vec<TensorType> = ctx.output_types().to_vec();
    let options = ctx.options().clone();
    let call = handoff::translate(ctx.graph(), function, &in_types, &options)
        .and_then(|p| handoff::AutobatchCall::new(p, function, out_types));
    let call = match call {
        Ok(c) => c,
        Err(e) => {
            return ConvertCtx::unhandled(format!(
                "recursive function '{function}': auto-batching hand-off failed: {e}"
            ));
        }
    };
    let inputs = (0..k).map(|j| ctx.stacked(j)).collect::<Result<Vec<_>>>()?;
    let outs = ctx.add_multi(Op::Custom(Arc::new(call)), &inputs)?;
    ConvertCtx::done(outs.into_iter().map(Wrapped::stacked).collect())
}

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Control(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a control-flow op");
    };
    if one_row::applies(ctx, &op) {
        return one_row::convert(ctx);
    }
    match op {
        ControlOp::Cond { then, else_ } => cond(ctx, &then, &else_),
        ControlOp::While { cond, body, num_carries, max_iterations } => {
            while_loop(ctx, &cond, &body, num_carries, max_iterations)
        }
        ControlOp::Call { function, .. } => {
            if is_recursive(ctx.graph(), &function) {
                return recursive_call(ctx, &function);
            }
            let f = ctx.graph().library().get(&function)?;
            let info = ctx.loop_info().clone();
            let options = ctx.options().clone();
            let args = ctx.inputs().to_vec();
            let outs = convert_function(ctx.graph(), &f, &args, &info, &options)?;
            ConvertCtx::done(outs)
        }
        ControlOp::For { body, static_n } => for_loop::convert(ctx, &body, static_n),
    }
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in ControlKind::ALL {
        r.register(OpKey::Builtin(OpKind::Control(*k)), convert);
    }
    let _ = Error::Verify;
}
