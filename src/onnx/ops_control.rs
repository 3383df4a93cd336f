//! ONNX control flow: `If`, `Loop` and `Scan`, with subgraphs (`then_branch` / `else_branch`,
//! `body`) converted by the same per-node driver as the main graph.
//!
//! ```text
//! If(c)            c constant → the taken branch inlined; else Graph::cond(c, then, else)
//! Loop(M, c, v..)  no scan outputs → Graph::while_loop over (i, c, v..): i < M && c
//!                  scan outputs    → unrolled M trips (static M, condition constant each trip)
//! Scan(v.., x..)   unrolled over the scan axis (its size is static): slice, body, stack
//! ```
//!
//! Invariants:
//! - Lexical scoping: a subgraph reads outer values by name. Its free names (used, not
//!   defined by its inputs, initializers or nodes, nested subgraphs included) are bound before
//!   it is converted: an outer constant is a constant of the subgraph's graph again (so the
//!   subgraph's constant arithmetic folds there), any other outer value is bound as is and
//!   captured by the `cond` / `while_loop` builder on first use (an extra input of the
//!   control-flow node). A name bound nowhere is an invalid model naming it.
//! - `If` with a run-time condition and `Loop` without scan outputs are our `Cond` / `While`
//!   ops, so under `pfor` the branch becomes the index-subset form and the loop a shrinking
//!   active set (per-example trip counts and conditions), and derivatives are the control-flow
//!   ops' own.
//! - Scan outputs stack one value per trip, so their length must be known when the graph is
//!   built: `Loop` with scan outputs needs a constant trip count `M` and a condition that is a
//!   constant on every trip (it is unrolled, at most [`MAX_UNROLL`] trips); `Scan`'s trip count
//!   is the static size of its scan axis. Anything else is an `Unsupported` error naming the
//!   op, node, opset and what is missing (as are sequence / optional values, `Scan`-8's
//!   `sequence_lens` that differ from the sequence length, and zero-trip scans).
//! - The condition of `If` / `Loop` is a one-element bool tensor; `Loop`'s iteration number is
//!   an i64 scalar (or `[1]` where the body declares it so).

use super::convert::{Env, NodeCx, const_value, run_graph};
use super::proto::{GraphProto, ValueInfo, ValueType};
use super::tensor;
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::tensor::Tensor;
use std::collections::HashSet;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["If", "Loop", "Scan"];

/// The most trips an unrolled `Loop` (scan outputs) or `Scan` may take.
pub(super) const MAX_UNROLL: usize = 4096;

/// Converts `n` if it is an op of this family; `env` resolves its subgraphs' outer names.
pub(super) fn convert(g: &mut Graph, n: &NodeCx, env: &Env) -> Option<Result<Vec<ValueId>>> {
    match n.op() {
        "If" => Some(if_(g, n, env)),
        "Loop" => Some(loop_(g, n, env)),
        "Scan" => Some(scan(g, n, env)),
        _ => None,
    }
}

/// The graph attribute `name`.
fn graph_attr<'a>(n: &'a NodeCx, name: &str) -> Result<&'a GraphProto> {
    n.attr(name).and_then(|a| a.g.as_ref()).ok_or_else(|| n.invalid(format!("graph attribute {name} is missing")))
}

/// The names `body` uses that it does not define (nested subgraphs included), in order.
fn free_names(body: &GraphProto, out: &mut Vec<String>) {
    let mut defined: HashSet<&str> = body.input.iter().map(|v| v.name.as_str()).collect();
    defined.extend(body.initializer.iter().map(|t| t.name.as_str()));
    defined.extend(body.node.iter().flat_map(|nd| nd.output.iter().map(String::as_str)));
    let push = |name: &str, out: &mut Vec<String>| {
        if !name.is_empty() && !defined.contains(name) && !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    };
    for nd in &body.node {
        for i in &nd.input {
            push(i, out);
        }
        for a in &nd.attribute {
            if let Some(sub) = &a.g {
                let mut inner = Vec::new();
                free_names(sub, &mut inner);
                for i in &inner {
                    push(i, out);
                }
            }
        }
    }
    for o in &body.output {
        push(&o.name, out);
    }
}

/// Refuses a non-tensor value of a subgraph (`what` says which).
fn tensor_only(n: &NodeCx, what: &str, vi: &ValueInfo) -> Result<()> {
    match &vi.ty {
        ValueType::Other(k) => {
            Err(n.unsupported(format!("{what} '{}' is a {k} (only tensors are supported)", vi.name)))
        }
        _ => Ok(()),
    }
}

/// Converts subgraph `body` into `g` (a `cond` / `while_loop` builder's graph, or the
/// enclosing graph itself) with its inputs bound to `params` and its free names resolved in
/// `outer` (see the module doc); returns its outputs as values of `g`.
fn inline_graph(g: &mut Graph, n: &NodeCx, outer: &Env, body: &GraphProto, params: &[ValueId]) -> Result<Vec<ValueId>> {
    if params.len() != body.input.len() {
        return Err(n.invalid(format!(
            "subgraph '{}' declares {} inputs, the op gives it {}",
            body.name,
            body.input.len(),
            params.len()
        )));
    }
    if body.sparse_initializers > 0 {
        return Err(n.unsupported(format!("sparse initializers in subgraph '{}'", body.name)));
    }
    for vi in body.input.iter() {
        tensor_only(n, "subgraph input", vi)?;
    }
    for vi in body.output.iter() {
        tensor_only(n, "subgraph output", vi)?;
    }
    let mut env = outer.child(body);
    let mut free = Vec::new();
    free_names(body, &mut free);
    for name in &free {
        let v = outer.lookup(name).ok_or_else(|| {
            n.invalid(format!("subgraph '{}' reads '{name}', which no enclosing graph defines", body.name))
        })?;
        let v = match const_value(g, v) {
            Some(t) => g.constant(t),
            None => v,
        };
        env.bind(name, v);
    }
    for t in &body.initializer {
        let c = g.constant(tensor::to_tensor(t)?);
        env.bind(&t.name, c);
    }
    for (vi, &p) in body.input.iter().zip(params) {
        env.bind(&vi.name, p);
    }
    run_graph(g, &mut env, &body.node)?;
    body.output.iter().map(|o| env.get(g, &o.name).and_then(|v| g.capture(v))).collect()
}

/// `v` (one element) as a scalar.
fn scalar(g: &mut Graph, n: &NodeCx, v: ValueId, what: &str) -> Result<ValueId> {
    let s = g.shape(v)?;
    match s.rank() {
        0 => Ok(v),
        _ if s.as_fixed().is_some_and(|d| d.iter().product::<usize>() == 1) => g.reshape(v, &[]),
        _ => Err(n.invalid(format!("{what} must have one element, it is {s}"))),
    }
}

/// Scalar `v` in the rank the subgraph input `vi` declares (`[1]` for rank 1).
fn as_declared(g: &mut Graph, v: ValueId, vi: &ValueInfo) -> Result<ValueId> {
    match &vi.ty {
        ValueType::Tensor { shape: Some(d), .. } if d.len() == 1 => g.reshape(v, &[1]),
        _ => Ok(v),
    }
}

/// The truth of a constant one-element tensor.
fn truth(t: &Tensor) -> bool {
    t.to_f64_vec().first().is_some_and(|x| *x != 0.0)
}

/// `If`: the taken branch inlined when the condition is a constant, else our `cond`.
fn if_(g: &mut Graph, n: &NodeCx, env: &Env) -> Result<Vec<ValueId>> {
    let c = n.input(0)?;
    let then = graph_attr(n, "then_branch")?;
    let else_ = graph_attr(n, "else_branch")?;
    if then.output.len() != else_.output.len() {
        return Err(n.invalid(format!("the branches return {} and {} values", then.output.len(), else_.output.len())));
    }
    if let Some(t) = const_value(g, c) {
        let taken = if truth(&t) { then } else { else_ };
        return inline_graph(g, n, env, taken, &[]);
    }
    let c = scalar(g, n, c, "the condition")?;
    let built = g.cond(c, &[], |g, _| inline_graph(g, n, env, then, &[]), |g, _| inline_graph(g, n, env, else_, &[]));
    built.map_err(|e| match n.const_input(g, 0) {
        // branches that cannot be one `cond` (results of different ranks): with the model
        // inputs the condition is computed from bound, the taken branch is inlined
        Err(needs) if !matches!(e, Error::Unsupported { .. }) => {
            n.unsupported(format!("the branches cannot form one cond ({e}), and {needs}"))
        }
        _ => e,
    })
}

/// `Loop(M, cond, v_initial...)` with body `(iter_num, cond_in, v_in...) -> (cond_out,
/// v_out..., scan_outputs...)`.
fn loop_(g: &mut Graph, n: &NodeCx, env: &Env) -> Result<Vec<ValueId>> {
    let body = graph_attr(n, "body")?;
    let carried = n.proto.input.len().saturating_sub(2);
    if body.input.len() != carried + 2 || body.output.len() < carried + 1 {
        return Err(n.invalid(format!(
            "the body takes {} inputs and returns {} outputs for {carried} loop-carried values \
             (it must take 2 + {carried} and return 1 + {carried} + scan outputs)",
            body.input.len(),
            body.output.len()
        )));
    }
    let scans = body.output.len() - 1 - carried;
    let init: Vec<ValueId> = (0..carried).map(|k| n.input(k + 2)).collect::<Result<_>>()?;
    if scans > 0 {
        return loop_unrolled(g, n, env, body, &init, scans);
    }
    let i0 = g.constant(Tensor::scalar(0i64));
    let c0 = match n.opt_input(1) {
        Some(c) => scalar(g, n, c, "the condition")?,
        None => g.constant(Tensor::scalar(true)),
    };
    let m = n.opt_input(0).map(|m| scalar(g, n, m, "the trip count M")).transpose()?;
    let mut carries = vec![i0, c0];
    carries.extend(&init);
    let captures: Vec<ValueId> = m.into_iter().collect();
    let last = 2 + carried;
    let outs = g.while_loop(
        &carries,
        &captures,
        |g, a| match m {
            Some(_) => {
                let more = g.less(a[0], a[last])?;
                g.logical_and(more, a[1])
            }
            None => Ok(a[1]),
        },
        |g, a| {
            let iter = as_declared(g, a[0], &body.input[0])?;
            let cond = as_declared(g, a[1], &body.input[1])?;
            let mut params = vec![iter, cond];
            params.extend(&a[2..last]);
            let outs = inline_graph(g, n, env, body, &params)?;
            let mut next = vec![g.add_scalar(a[0], 1.0)?, scalar(g, n, outs[0], "the body's condition")?];
            next.extend(&outs[1..]);
            Ok(next)
        },
    )?;
    Ok(outs[2..].to_vec())
}

/// A `Loop` with scan outputs: unrolled, trip by trip, while its condition is a constant.
fn loop_unrolled(
    g: &mut Graph,
    n: &NodeCx,
    env: &Env,
    body: &GraphProto,
    init: &[ValueId],
    scans: usize,
) -> Result<Vec<ValueId>> {
    let why = "(a Loop with scan outputs is unrolled: the number of scan rows must be known when the graph is built)";
    let Some(m) = n.const_ints(g, 0)? else {
        return Err(n.unsupported(format!("scan outputs without a trip count M {why}")));
    };
    let m = m.first().copied().unwrap_or(0).max(0) as usize;
    let mut go = match n.const_input(g, 1)? {
        Some(t) => truth(&t),
        None => true,
    };
    if go && m > MAX_UNROLL {
        return Err(n.unsupported(format!("scan outputs over {m} trips (at most {MAX_UNROLL}) {why}")));
    }
    let mut vs = init.to_vec();
    let mut rows: Vec<Vec<ValueId>> = vec![Vec::new(); scans];
    let mut t = 0;
    while go && t < m {
        let iter = g.constant(Tensor::scalar(t as i64));
        let iter = as_declared(g, iter, &body.input[0])?;
        let cond = g.constant(Tensor::scalar(true));
        let cond = as_declared(g, cond, &body.input[1])?;
        let mut params = vec![iter, cond];
        params.extend(&vs);
        let outs = inline_graph(g, n, env, body, &params)?;
        go = match const_value(g, outs[0]) {
            Some(c) => truth(&c),
            None => {
                return Err(n.unsupported(format!("scan outputs with a condition computed at run time {why}")));
            }
        };
        vs = outs[1..1 + vs.len()].to_vec();
        for (r, &o) in rows.iter_mut().zip(&outs[1 + vs.len()..]) {
            r.push(o);
        }
        t += 1;
    }
    let mut results = vs;
    for r in &rows {
        results.push(stack_rows(g, n, r, 0)?);
    }
    Ok(results)
}

/// The per-trip values `rows` stacked along `axis`.
fn stack_rows(g: &mut Graph, n: &NodeCx, rows: &[ValueId], axis: i64) -> Result<ValueId> {
    if rows.is_empty() {
        return Err(n.unsupported("scan outputs of zero trips (their element shape is unknown)"));
    }
    g.stack(rows, axis)
}

/// An axis attribute entry normalized against `rank`.
fn norm_axis(n: &NodeCx, a: i64, rank: usize, what: &str) -> Result<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(n.invalid(format!("{what} {a} is out of range for rank {rank}")));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// `Scan`: states and scan inputs in, final states and stacked scan outputs out. Opset 8
/// has a leading batch axis (and `sequence_lens`): each batch row is scanned on its own.
fn scan(g: &mut Graph, n: &NodeCx, env: &Env) -> Result<Vec<ValueId>> {
    let body = graph_attr(n, "body")?;
    let num_scan = n.attr("num_scan_inputs").map(|a| a.i).ok_or_else(|| n.invalid("num_scan_inputs is missing"))?;
    let first = usize::from(n.opset < 9);
    let given = n.proto.input.len().saturating_sub(first);
    if num_scan < 1 || num_scan as usize > given {
        return Err(n.invalid(format!("num_scan_inputs = {num_scan} with {given} state and scan inputs")));
    }
    let num_scan = num_scan as usize;
    let states = given - num_scan;
    let inputs: Vec<ValueId> = (first..first + given).map(|k| n.input(k)).collect::<Result<_>>()?;
    if body.input.len() != given || body.output.len() < states {
        return Err(n.invalid(format!(
            "the body takes {} inputs and returns {} outputs for {states} states and {num_scan} scan inputs",
            body.input.len(),
            body.output.len()
        )));
    }
    let scan_outs = body.output.len() - states;
    let spec = |name: &str, len: usize| -> Vec<i64> { n.attr_ints(name).unwrap_or_else(|| vec![0; len]) };
    if n.opset < 9 {
        let dirs = spec("directions", num_scan);
        let lens = n.const_ints(g, 0)?;
        let (states0, xs) = inputs.split_at(states);
        return scan_batched(g, n, env, body, states0, xs, &dirs, lens, scan_outs);
    }
    let in_axes = spec("scan_input_axes", num_scan);
    let in_dirs = spec("scan_input_directions", num_scan);
    let out_axes = spec("scan_output_axes", scan_outs);
    let out_dirs = spec("scan_output_directions", scan_outs);
    if in_axes.len() != num_scan
        || in_dirs.len() != num_scan
        || out_axes.len() != scan_outs
        || out_dirs.len() != scan_outs
    {
        return Err(n.invalid("a scan axes / directions attribute has the wrong length"));
    }
    let (states0, xs) = inputs.split_at(states);
    let mut axes = Vec::with_capacity(num_scan);
    for (&x, &a) in xs.iter().zip(&in_axes) {
        axes.push(norm_axis(n, a, g.shape(x)?.rank(), "scan_input_axes entry")?);
    }
    let (finals, rows) = scan_trips(g, n, env, body, states0, xs, &axes, &in_dirs, scan_outs)?;
    let mut results = finals;
    for (k, mut r) in rows.into_iter().enumerate() {
        if out_dirs[k] != 0 {
            r.reverse();
        }
        let elem_rank = g.shape(r[0])?.rank();
        let axis = norm_axis(n, out_axes[k], elem_rank + 1, "scan_output_axes entry")?;
        results.push(g.stack(&r, axis as i64)?);
    }
    Ok(results)
}

/// `x[.., at, ..]` (index `at` of `axis`, which goes away).
fn index_along(g: &mut Graph, x: ValueId, axis: usize, at: usize) -> Result<ValueId> {
    let r = g.shape(x)?.rank();
    let mut begin = vec![0i64; r];
    let mut size = vec![-1i64; r];
    begin[axis] = at as i64;
    size[axis] = 1;
    let s = g.slice(x, &begin, &size)?;
    g.squeeze(s, Some(&[axis as i64]))
}

/// Runs the body over the scan inputs `xs` (trip `t` reads index `t` of axis `axes[j]`, or the
/// mirrored index where `dirs[j]` is 1): the final states and, per scan output, one value per
/// trip (never empty).
#[allow(clippy::too_many_arguments)]
fn scan_trips(
    g: &mut Graph,
    n: &NodeCx,
    env: &Env,
    body: &GraphProto,
    states: &[ValueId],
    xs: &[ValueId],
    axes: &[usize],
    dirs: &[i64],
    scan_outs: usize,
) -> Result<(Vec<ValueId>, Vec<Vec<ValueId>>)> {
    let mut trips = None;
    for (&x, &a) in xs.iter().zip(axes) {
        let s = g.shape(x)?;
        let Some(d) = s.dims().get(a).and_then(|d| d.value()) else {
            return Err(n.unsupported(format!("a scan input of shape {s} (the scan axis {a} must have a static size)")));
        };
        if *trips.get_or_insert(d) != d {
            return Err(n.invalid(format!("scan inputs differ in length along their scan axes ({trips:?} and {d})")));
        }
    }
    let trips = trips.unwrap_or(0);
    if trips == 0 {
        return Err(n.unsupported("a scan of zero trips (the scan outputs' element shape is unknown)"));
    }
    if trips > MAX_UNROLL {
        return Err(n.unsupported(format!("a scan of {trips} trips (it is unrolled: at most {MAX_UNROLL})")));
    }
    let mut cur = states.to_vec();
    let mut rows: Vec<Vec<ValueId>> = vec![Vec::new(); scan_outs];
    for t in 0..trips {
        let mut params = cur.clone();
        for (j, &x) in xs.iter().enumerate() {
            let at = if dirs.get(j).copied().unwrap_or(0) != 0 { trips - 1 - t } else { t };
            params.push(index_along(g, x, axes[j], at)?);
        }
        let outs = inline_graph(g, n, env, body, &params)?;
        cur = outs[..states.len()].to_vec();
        for (r, &o) in rows.iter_mut().zip(&outs[states.len()..]) {
            r.push(o);
        }
    }
    Ok((cur, rows))
}

/// `Scan`-8: a leading batch axis on states and scan inputs (scan axis 1), each row scanned on
/// its own; `sequence_lens` must be absent or the full length for every row.
#[allow(clippy::too_many_arguments)]
fn scan_batched(
    g: &mut Graph,
    n: &NodeCx,
    env: &Env,
    body: &GraphProto,
    states: &[ValueId],
    xs: &[ValueId],
    dirs: &[i64],
    lens: Option<Vec<i64>>,
    scan_outs: usize,
) -> Result<Vec<ValueId>> {
    let batch_of = |g: &Graph, v: ValueId| -> Result<usize> {
        let s = g.shape(v)?;
        s.as_fixed().and_then(|d| d.first().copied()).ok_or_else(|| {
            n.unsupported(format!("a state or scan input of shape {s} (Scan-8's batch axis must be static)"))
        })
    };
    let batch = match xs.first() {
        Some(&x) => batch_of(g, x)?,
        None => return Err(n.invalid("no scan inputs")),
    };
    for &v in states.iter().chain(xs) {
        if batch_of(g, v)? != batch {
            return Err(n.invalid("states and scan inputs differ in batch size"));
        }
    }
    if let Some(lens) = &lens {
        let full = g.shape(xs[0])?.as_fixed().map_or(0, |d| d.get(1).copied().unwrap_or(0)) as i64;
        if lens.iter().any(|&l| l != full) {
            return Err(n.unsupported(format!("sequence_lens {lens:?} shorter than the sequence length {full}")));
        }
    }
    let row = |g: &mut Graph, v: ValueId, b: usize| index_along(g, v, 0, b);
    let mut finals: Vec<Vec<ValueId>> = vec![Vec::new(); states.len()];
    let mut outs: Vec<Vec<ValueId>> = vec![Vec::new(); scan_outs];
    for b in 0..batch {
        let st: Vec<ValueId> = states.iter().map(|&v| row(g, v, b)).collect::<Result<_>>()?;
        let x: Vec<ValueId> = xs.iter().map(|&v| row(g, v, b)).collect::<Result<_>>()?;
        let axes = vec![0; x.len()];
        let (f, rows) = scan_trips(g, n, env, body, &st, &x, &axes, dirs, scan_outs)?;
        for (acc, v) in finals.iter_mut().zip(f) {
            acc.push(v);
        }
        for (acc, r) in outs.iter_mut().zip(rows) {
            acc.push(g.stack(&r, 0)?);
        }
    }
    finals.iter().chain(&outs).map(|r| stack_rows(g, n, r, 0)).collect()
}
