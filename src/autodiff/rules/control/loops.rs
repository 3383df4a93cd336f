//! `while` and `for` derivatives.
//!
//! # `while` VJP: count, record, run backward
//! The forward `While` node is left as it is; its VJP adds three loops:
//! 1. **count**: the same loop with an extra i64 counter carry, giving the trip count `T`,
//!    and a step bound `U = loop_max(T)` (`src/ops/shape.rs`): `U == T` outside pfor; inside
//!    pfor, the largest `T` of all iterations — loop-invariant, while `T` is per-iteration;
//! 2. **record**: `U` steps (`t < U`) that first write every carry (the state *before*
//!    step `t`) into row `t` of a buffer `[U, ...carry]` allocated once with `fill_dyn`,
//!    using `dynamic_update_slice`, then apply the body only if `t < T` (a `Cond`; past
//!    `T` the carries stay as they are). The buffer is a carry whose only consumer in the
//!    body is that `dynamic_update_slice`, so the executor hands the uniquely owned buffer
//!    to the kernel, which writes the row in place (`src/exec/mod.rs` hands a value over
//!    at its last use; the kernel writes into an `ArcArray` that is copied only when
//!    shared): each step copies one carry, O(T) in total, never O(T²);
//! 3. **backward**: a `While` for `s = U-1 .. 0` that reads row `s` of every buffer
//!    (`gather`) and, only if `s < T` (a `Cond`), applies the body's VJP (which recomputes
//!    the step's intermediates from the recorded carry) to the carry cotangents and
//!    accumulates the cotangents of the float captures.
//!
//! **Invariant (why any `U >= T` gives the same gradients)**: the record loop's carries
//! after step `t` equal the forward loop's for `t < T` and stay at the final carries for
//! `T <= t < U`, so rows `0..T` hold exactly the forward states and rows `T..U` hold
//! copies of the final state; the backward loop is the identity for `s >= T` and reads
//! only rows `s < T`. Nothing reads the buffers' lead dim or the rows past `T`. Hence the
//! results do not depend on `U` beyond `U >= T`, which is all `loop_max` promises.
//!
//! **Inside `pfor`** this is what makes per-example gradients of a loop with per-example
//! trip counts vectorize: `T` is stacked but `U` is not, so the buffers have one shape
//! `[n, U, ...]` (no ragged buffer ever exists), both the record and the backward loop
//! have a loop-invariant predicate (one loop of `U` steps; `t`, `s` and the
//! `dynamic_update_slice` start stay unstacked, so each step writes row `t` of all `n`
//! buffers in place), and the per-example `t < T` / `s < T` conds are converted per step
//! (`Subset`: the body or its VJP runs only on the examples still inside their own trip
//! count; `Mask`: on all, then `select`). The cond arguments are one row per buffer, never
//! whole buffers, so a step costs O(n · carry), not O(n · U · carry).
//!
//! Integer and bool carries (counters, flags) are recorded too — the body's behavior may
//! depend on them — but never get cotangents. Each loop is an ordinary `While` built from
//! ops with derivative rules and pfor converters, so the gradient is itself vectorizable
//! (jacobians, per-example gradients) and differentiable (hessians). Costs: the forward
//! body runs 3·T times (original, count, record) and once more inside each backward step;
//! memory is U carries.
//!
//! Limits: a carry whose shape changes between iterations cannot be recorded in one
//! buffer; for carries with dynamic dims a `reshape_dyn` to the initial shape makes a
//! size change a run-time error (inside pfor, a per-iteration carry shape cannot be
//! stacked anyway). pfor's Subset-form `while`, whose carries shrink as rows finish, is
//! never differentiated by this rule: its derivative hook differentiates the per-iteration
//! loop with it and vectorizes the result (see `rules/control/mod.rs`). Second-order derivatives are correct but not O(T): the cotangent of a
//! recorded buffer is a full `[U, ...]` tensor per backward step.
//!
//! # `while` JVP
//! One `While` carrying the primal carries and the tangents of the float carries.
//!
//! # `for`
//! `For` iterations are independent (`body(j, captures)`, no carries), so nothing needs
//! recording: the VJP is a `While` over `j` applying the body's VJP to row `j` of the
//! output cotangents and summing the capture cotangents; the JVP is a `For` over the
//! body's JVP.

use std::sync::Arc;

use super::{float_results_with_cotangent, floats, inline, jvp_function, vjp_function};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Function, Graph, ValueId};
use crate::ops::{ControlOp, IterationCap, Op};
use crate::tensor::{DType, Tensor, TensorType};

fn while_op(cond: Function, body: Function, num_carries: usize, max_iterations: Option<IterationCap>) -> Op {
    Op::Control(ControlOp::While { cond: Arc::new(cond), body: Arc::new(body), num_carries, max_iterations })
}

fn i64_scalar() -> TensorType {
    TensorType::scalar(DType::I64)
}

/// Give `v` the static shape of `ty` when that shape is fully fixed (values read back from
/// a buffer have dynamic dims).
pub(super) fn restore_type(g: &mut Graph, v: ValueId, ty: &TensorType) -> Result<ValueId> {
    match ty.shape.as_fixed() {
        Some(dims) if g.shape(v)?.as_fixed().as_deref() != Some(&dims[..]) => {
            let d: Vec<i64> = dims.iter().map(|&x| x as i64).collect();
            g.reshape(v, &d)
        }
        _ => Ok(v),
    }
}

/// Row `t` of `buf` (axis 0), typed like `ty`.
fn read_row(g: &mut Graph, buf: ValueId, t: ValueId, ty: &TensorType) -> Result<ValueId> {
    let r = g.gather(buf, t, 0)?;
    restore_type(g, r, ty)
}

/// `[1, shape(x)...]` with the leading 1 replaced by `lead` (an i64 scalar), built from
/// elementwise ops only.
fn shape_with_lead(g: &mut Graph, x: ValueId, lead: ValueId) -> Result<ValueId> {
    let r = g.shape(x)?.rank();
    let ex = g.expand_dims(x, 0)?;
    let s = g.shape_of(ex)?;
    let mut e0 = vec![0i64; r + 1];
    e0[0] = 1;
    let e0 = g.constant(Tensor::from_vec(&[r + 1], e0)?);
    let lm1 = g.add_scalar(lead, -1.0)?;
    let d = g.mul(e0, lm1)?;
    g.add(s, d)
}

/// The trip count of the loop `(cond, body)` on `carries`, `captures`.
fn count_trips(
    g: &mut Graph,
    cond: &Function,
    body: &Function,
    k: usize,
    max_iterations: Option<IterationCap>,
    carries: &[ValueId],
    captures: &[ValueId],
) -> Result<ValueId> {
    let ptypes = body.param_types();
    let mut types = ptypes[..k].to_vec();
    types.push(i64_scalar());
    types.extend_from_slice(&ptypes[k..]);
    let primal = |a: &[ValueId]| -> Vec<ValueId> {
        let mut v = a[..k].to_vec();
        v.extend_from_slice(&a[k + 1..]);
        v
    };
    let cf = Function::build(g, &types, |h, a| inline(h, cond, &primal(a)))?;
    let bf = Function::build(g, &types, |h, a| {
        let mut r = inline(h, body, &primal(a))?;
        r.push(h.add_scalar(a[k], 1.0)?);
        Ok(r)
    })?;
    let mut inputs = carries.to_vec();
    inputs.push(g.constant(Tensor::scalar(0i64)));
    inputs.extend_from_slice(captures);
    let outs = g.add_op_multi(while_op(cf, bf, k + 1, max_iterations), &inputs)?;
    Ok(outs[k])
}

/// Re-run the loop for `bound` steps (`bound >= trips`), writing the carries before step
/// `t` into row `t` of one `[bound, ...]` buffer per carry; step `t` applies the body only
/// when `t < trips` (a `Cond`), so rows `trips..` repeat the final carries. Returns the
/// buffers.
fn record(
    g: &mut Graph,
    body: &Function,
    k: usize,
    carries: &[ValueId],
    captures: &[ValueId],
    trips: ValueId,
    bound: ValueId,
) -> Result<Vec<ValueId>> {
    let ptypes = body.param_types();
    let m = ptypes.len() - k;
    let mut bufs = Vec::with_capacity(k);
    for &c in carries {
        let shape = shape_with_lead(g, c, bound)?;
        let zero = g.scalar_like(c, 0.0)?;
        bufs.push(g.fill_dyn(shape, zero)?);
    }
    let buf_types = bufs.iter().map(|b| g.value_type(*b).cloned()).collect::<Result<Vec<_>>>()?;
    // Carries [t, c.., bufs..], captures [z.., T, U].
    let mut types = vec![i64_scalar()];
    types.extend_from_slice(&ptypes[..k]);
    types.extend(buf_types);
    types.extend_from_slice(&ptypes[k..]);
    types.push(i64_scalar());
    types.push(i64_scalar());
    let cf = Function::build(g, &types, |h, a| Ok(vec![h.less(a[0], a[2 + 2 * k + m])?]))?;
    let bf = Function::build(g, &types, |h, a| {
        let t = a[0];
        let zero = h.constant(Tensor::scalar(0i64));
        let mut res = vec![h.add_scalar(t, 1.0)?];
        let mut new_bufs = Vec::with_capacity(k);
        for i in 0..k {
            let (c, buf) = (a[1 + i], a[1 + k + i]);
            let r = h.shape(c)?.rank();
            let mut upd = h.expand_dims(c, 0)?;
            if ptypes[i].shape.as_fixed().is_none() {
                // Guard: a carry whose size changes cannot be recorded in one buffer;
                // reshape to [1, buffer row shape] fails at run time if it does.
                let bs = h.shape_of(buf)?;
                let mut tail_mask = vec![1i64; r + 1];
                tail_mask[0] = 0;
                let mut lead = vec![0i64; r + 1];
                lead[0] = 1;
                let tail_mask = h.constant(Tensor::from_vec(&[r + 1], tail_mask)?);
                let lead = h.constant(Tensor::from_vec(&[r + 1], lead)?);
                let tail = h.mul(bs, tail_mask)?;
                let want = h.add(tail, lead)?;
                upd = h.reshape_dyn(upd, want)?;
            }
            let mut start = vec![t];
            start.extend(std::iter::repeat_n(zero, r));
            let start = h.stack(&start, 0)?;
            new_bufs.push(h.dynamic_update_slice(buf, upd, start)?);
        }
        // Step t runs the body only while t < T: past its own trip count an iteration's
        // carries stay as they are (inside pfor, U is the largest T of all iterations).
        let mut args = a[1..1 + k].to_vec();
        args.extend_from_slice(&a[1 + 2 * k..1 + 2 * k + m]);
        let live = h.less(t, a[1 + 2 * k + m])?;
        let next = h.cond(live, &args, |b, p| inline(b, body, p), |_, p| Ok(p[..k].to_vec()))?;
        for (i, v) in next.into_iter().enumerate() {
            res.push(restore_type(h, v, &ptypes[i])?);
        }
        res.extend(new_bufs);
        Ok(res)
    })?;
    let mut inputs = vec![g.constant(Tensor::scalar(0i64))];
    inputs.extend_from_slice(carries);
    inputs.extend(bufs);
    inputs.extend_from_slice(captures);
    inputs.push(trips);
    inputs.push(bound);
    let outs = g.add_op_multi(while_op(cf, bf, 1 + 2 * k, None), &inputs)?;
    Ok(outs[1 + k..1 + 2 * k].to_vec())
}

/// Cotangents of a `While`'s `(carries.., captures..)`.
pub fn while_vjp(
    cond: &Arc<Function>,
    body: &Arc<Function>,
    k: usize,
    max_iterations: Option<IterationCap>,
    cx: &mut VjpCtx<'_>,
) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    let ptypes = body.param_types();
    let m = ptypes.len() - k;
    let fc = floats(&ptypes[..k]);
    let nz: Vec<usize> = floats(&ptypes[k..]).into_iter().map(|j| j + k).filter(|&j| cx.need(j)).collect();
    let mut out = vec![None; n_in];
    let any_dy = fc.iter().any(|&i| cx.dys.get(i).copied().flatten().is_some());
    if !any_dy || (fc.iter().all(|&i| !cx.need(i)) && nz.is_empty()) {
        return Ok(out);
    }
    let dc0 = fc.iter().map(|&i| cx.dy(i)).collect::<Result<Vec<_>>>()?;
    let (carries, captures) = (cx.inputs[..k].to_vec(), cx.inputs[k..].to_vec());
    let g = &mut *cx.g;

    let trips = count_trips(g, cond, body, k, max_iterations, &carries, &captures)?;
    // U >= T, loop-invariant inside pfor (the largest T of all iterations).
    let bound = g.loop_max(trips)?;
    let bufs = record(g, body, k, &carries, &captures, trips, bound)?;

    // The body's VJP: params (c.., z.., dc[fc]..) -> (dc[fc].., dz[nz]..).
    let mut wrt = fc.clone();
    wrt.extend(&nz);
    let vf = vjp_function(g, body, &fc, &wrt)?;

    // Backward loop: carries [s, dc[fc].., dz[nz]..], captures [bufs.., z.., T]; steps
    // s = U-1 .. 0, each a no-op unless s < T.
    let (nf, nn) = (fc.len(), nz.len());
    let buf_types = bufs.iter().map(|b| g.value_type(*b).cloned()).collect::<Result<Vec<_>>>()?;
    let mut types = vec![i64_scalar()];
    types.extend(fc.iter().map(|&i| ptypes[i].clone()));
    types.extend(nz.iter().map(|&j| ptypes[j].clone()));
    types.extend(buf_types);
    types.extend_from_slice(&ptypes[k..]);
    types.push(i64_scalar());
    let cf = Function::build(g, &types, |h, a| {
        let zero = h.constant(Tensor::scalar(0i64));
        Ok(vec![h.greater_equal(a[0], zero)?])
    })?;
    let bf = Function::build(g, &types, |h, a| {
        let s = a[0];
        let base = 1 + nf + nn;
        // Cond args: [rows.., z.., dc[fc].., dz[nz]..]. The rows are read outside the
        // cond, so a pfor'd cond gathers rows, not whole buffers.
        let mut args = Vec::with_capacity(k + m + nf + nn);
        for (i, ty) in ptypes[..k].iter().enumerate() {
            args.push(read_row(h, a[base + i], s, ty)?);
        }
        args.extend_from_slice(&a[base + k..base + k + m]);
        args.extend_from_slice(&a[1..1 + nf + nn]);
        let live = h.less(s, a[base + k + m])?;
        let step = |b: &mut Graph, p: &[ValueId]| -> Result<Vec<ValueId>> {
            let ds = inline(b, &vf, &p[..k + m + nf])?;
            let mut r = ds[..nf].to_vec();
            for (acc, d) in p[k + m + nf..].iter().zip(&ds[nf..]) {
                r.push(b.add(*acc, *d)?);
            }
            Ok(r)
        };
        let next = h.cond(live, &args, step, |_, p| Ok(p[k + m..].to_vec()))?;
        let mut res = vec![h.add_scalar(s, -1.0)?];
        for (v, ty) in next.into_iter().zip(&types[1..base]) {
            res.push(restore_type(h, v, ty)?);
        }
        Ok(res)
    })?;
    let mut inputs = vec![g.add_scalar(bound, -1.0)?];
    inputs.extend(dc0);
    for &j in &nz {
        inputs.push(g.zeros_like(cx.inputs[j])?);
    }
    inputs.extend(bufs);
    inputs.extend(captures);
    inputs.push(trips);
    let outs = g.add_op_multi(while_op(cf, bf, 1 + nf + nn, None), &inputs)?;
    for (pos, &i) in fc.iter().enumerate() {
        if cx.needs.get(i).copied().unwrap_or(false) {
            out[i] = Some(outs[1 + pos]);
        }
    }
    for (pos, &j) in nz.iter().enumerate() {
        out[j] = Some(outs[1 + nf + pos]);
    }
    Ok(out)
}

/// Tangents of a `While`'s final carries: one loop over primal and tangent carries.
pub fn while_jvp(
    cond: &Arc<Function>,
    body: &Arc<Function>,
    k: usize,
    max_iterations: Option<IterationCap>,
    cx: &mut JvpCtx<'_>,
) -> Result<Vec<Option<ValueId>>> {
    let ptypes = body.param_types();
    let m = ptypes.len() - k;
    let fc = floats(&ptypes[..k]);
    let tz: Vec<usize> = floats(&ptypes[k..]).into_iter().map(|j| j + k).filter(|&j| cx.t(j).is_some()).collect();
    let mut out = vec![None; k];
    if fc.is_empty() || (fc.iter().all(|&i| cx.t(i).is_none()) && tz.is_empty()) {
        return Ok(out);
    }
    let (nf, nt) = (fc.len(), tz.len());
    let mut tan = fc.clone();
    tan.extend(&tz);
    // Body JVP: params (c.., z.., tc[fc].., tz..) -> (c'.., tc'[fc]..).
    let jf = jvp_function(cx.g, body, &tan, &fc, true)?;
    // New loop: carries [c.., tc[fc]..], captures [z.., tz..].
    let mut types = ptypes[..k].to_vec();
    types.extend(fc.iter().map(|&i| ptypes[i].clone()));
    types.extend_from_slice(&ptypes[k..]);
    types.extend(tz.iter().map(|&j| ptypes[j].clone()));
    let g = &mut *cx.g;
    let cf = Function::build(g, &types, |h, a| {
        let mut args = a[..k].to_vec();
        args.extend_from_slice(&a[k + nf..k + nf + m]);
        inline(h, cond, &args)
    })?;
    let bf = Function::build(g, &types, |h, a| {
        let mut args = a[..k].to_vec();
        args.extend_from_slice(&a[k + nf..k + nf + m]);
        args.extend_from_slice(&a[k..k + nf]);
        args.extend_from_slice(&a[k + nf + m..k + nf + m + nt]);
        inline(h, &jf, &args)
    })?;
    let mut inputs = cx.inputs[..k].to_vec();
    for &i in &fc {
        inputs.push(cx.t_or_zero(i)?);
    }
    inputs.extend_from_slice(&cx.inputs[k..]);
    for &j in &tz {
        inputs.push(cx.t_or_zero(j)?);
    }
    let outs = cx.g.add_op_multi(while_op(cf, bf, k + nf, max_iterations), &inputs)?;
    for (pos, &i) in fc.iter().enumerate() {
        out[i] = Some(outs[k + pos]);
    }
    Ok(out)
}

/// Cotangents of a `For`'s `(n, captures..)`.
pub fn for_vjp(body: &Arc<Function>, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    let ptypes = body.param_types();
    let m = ptypes.len() - 1;
    // Parameter p is input p (parameter 0 is the index, input 0 the trip count).
    let nz: Vec<usize> = floats(&ptypes).into_iter().filter(|&p| p >= 1 && cx.need(p)).collect();
    let dres = float_results_with_cotangent(cx);
    let mut out = vec![None; n_in];
    if nz.is_empty() || dres.is_empty() {
        return Ok(out);
    }
    let rtypes = body.result_types();
    let vf = vjp_function(cx.g, body, &dres, &nz)?;
    let dys = dres.iter().map(|&r| cx.dy(r)).collect::<Result<Vec<_>>>()?;
    let nn = nz.len();
    let g = &mut *cx.g;
    let dy_types = dys.iter().map(|d| g.value_type(*d).cloned()).collect::<Result<Vec<_>>>()?;
    // Carries [j, acc[nz]..], captures [n, z.., dY[dres]..].
    let mut types = vec![i64_scalar()];
    types.extend(nz.iter().map(|&p| ptypes[p].clone()));
    types.push(i64_scalar());
    types.extend_from_slice(&ptypes[1..]);
    types.extend(dy_types);
    let cf = Function::build(g, &types, |h, a| Ok(vec![h.less(a[0], a[1 + nn])?]))?;
    let bf = Function::build(g, &types, |h, a| {
        let j = a[0];
        let mut args = vec![j];
        args.extend_from_slice(&a[2 + nn..2 + nn + m]);
        for (pos, &r) in dres.iter().enumerate() {
            args.push(read_row(h, a[2 + nn + m + pos], j, &rtypes[r])?);
        }
        let ds = inline(h, &vf, &args)?;
        let mut res = vec![h.add_scalar(j, 1.0)?];
        for (acc, d) in a[1..1 + nn].iter().zip(&ds) {
            res.push(h.add(*acc, *d)?);
        }
        Ok(res)
    })?;
    let mut inputs = vec![g.constant(Tensor::scalar(0i64))];
    for &p in &nz {
        inputs.push(g.zeros_like(cx.inputs[p])?);
    }
    inputs.extend_from_slice(&cx.inputs);
    inputs.extend(dys);
    let outs = g.add_op_multi(while_op(cf, bf, 1 + nn, None), &inputs)?;
    for (pos, &p) in nz.iter().enumerate() {
        out[p] = Some(outs[1 + pos]);
    }
    Ok(out)
}

/// Tangents of a `For`'s stacked results: a `For` over the body's JVP.
pub fn for_jvp(body: &Arc<Function>, static_n: Option<usize>, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let ptypes = body.param_types();
    let tan: Vec<usize> = floats(&ptypes).into_iter().filter(|&p| p >= 1 && cx.t(p).is_some()).collect();
    let out_f = floats(&body.result_types());
    let mut out = vec![None; cx.outputs.len()];
    if tan.is_empty() || out_f.is_empty() {
        return Ok(out);
    }
    let jf = jvp_function(cx.g, body, &tan, &out_f, false)?;
    let mut inputs = cx.inputs.clone();
    for &p in &tan {
        inputs.push(cx.t_or_zero(p)?);
    }
    let op = Op::Control(ControlOp::For { body: Arc::new(jf), static_n });
    let ts = cx.g.add_op_multi(op, &inputs)?;
    for (&r, t) in out_f.iter().zip(ts) {
        out[r] = Some(t);
    }
    Ok(out)
}
