//! The greedy conversion driver and the `pfor` entry points.

use std::sync::Arc;

use hashbrown::{HashMap, HashSet};

use super::ctx::{LoopInfo, i64_scalar, merge_first_two, stacked_type, tile};
use super::{
    ConvertCtx, Converted, Converter, Fallback, OpKey, PforOptions, SimplifyReport, Wrapped, derived_convert,
    simplify_since,
};
use crate::error::{Error, Result};
use crate::ir::{Function, Graph, NodeId, ValueId};
use crate::ops::{Batching, Op};
use crate::reference::{LoopLen, for_loop_from_traced};
use crate::tensor::{DType, Shape, Tensor, TensorType};

/// One op that ran through the per-iteration loop fallback.
#[derive(Clone, Debug, PartialEq)]
pub struct FallbackRecord {
    /// The body node.
    pub node: NodeId,
    /// Its op name.
    pub op: String,
    /// Why no converter handled it.
    pub reason: String,
}

/// What a conversion did.
#[derive(Clone, Debug, Default)]
pub struct PforReport {
    /// Ops converted by a converter.
    pub converted: usize,
    /// Ops re-emitted unchanged (all inputs loop-invariant).
    pub reused: usize,
    /// Ops that fell back to a per-iteration loop.
    pub fallbacks: Vec<FallbackRecord>,
    /// What the simplification pass did (`None` when [`PforOptions::simplify`] is off).
    pub simplified: Option<SimplifyReport>,
    /// True when the loop length is statically 1 and the result is the body itself applied
    /// to iteration 0 (the one-row form: the loop's body without its bookkeeping), chosen
    /// after the normal conversion succeeded; false for a body with a per-iteration effect
    /// (a stateful random op, a variable write), which keeps the conversion.
    pub one_row: bool,
}

/// Vectorize `body` over `n` iterations with default options. The body is traced once
/// with a scalar i64 loop index; the result has one stacked value (`[n] + shape`) per
/// body output.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[6, 3], 0)?);
/// // the body for ONE iteration i; pfor turns it into one graph for all 6
/// let out = pfor(&mut g, 6, |g, i| {
///     let x = g.gather(xs, i, 0)?;
///     let sq = g.mul(x, x)?;
///     Ok(vec![g.sum_all(sq)?])
/// })?;
/// let want = for_loop(&mut g, 6, |g, i| {
///     let x = g.gather(xs, i, 0)?;
///     let sq = g.mul(x, x)?;
///     Ok(vec![g.sum_all(sq)?])
/// })?;
/// let r = run_once(&g, &[out[0], want[0]], &[])?;
/// assert!(r[0].allclose(&r[1], 1e-12, 1e-12));
/// # Ok(())
/// # }
/// ```
pub fn pfor(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    pfor_with(g, n, &PforOptions::default(), body)
}

/// Vectorize with options.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[10, 3], 0)?);
/// // chunks of 4 iterations (peak memory of 4), and an error rather than a fallback loop
/// let opts = PforOptions::strict().with_chunk_size(4);
/// let out = pfor_with(&mut g, 10, &opts, |g, i| {
///     let x = g.gather(xs, i, 0)?;
///     Ok(vec![g.tanh(x)?])
/// })?;
/// assert_eq!(run_once(&g, &out, &[])?[0].shape(), &[10, 3]);
/// # Ok(())
/// # }
/// ```
pub fn pfor_with(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    options: &PforOptions,
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    pfor_with_report(g, n, options, body).map(|(v, _)| v)
}

/// Vectorize with options and return the conversion report (fallbacks, counts).
///
/// ```
/// use pfor::prelude::*;
/// use pfor::vectorize::pfor_with_report;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[4, 3], 0)?);
/// let (out, report) = pfor_with_report(&mut g, 4, &PforOptions::default(), |g, i| {
///     let x = g.gather(xs, i, 0)?;
///     Ok(vec![g.exp(x)?])
/// })?;
/// assert!(report.fallbacks.is_empty()); // every op had a converter
/// assert!(report.converted > 0);
/// # let _ = out;
/// # Ok(())
/// # }
/// ```
pub fn pfor_with_report(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    options: &PforOptions,
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<(Vec<ValueId>, PforReport)> {
    let (outs, report) = pfor_outputs(g, n, options, &[], body)?;
    Ok((outs.into_iter().map(|(v, _)| v).collect(), report))
}

/// [`pfor_with_report`] where output `k` with `unbatched[k]` (missing entries: `false`) is
/// returned as it is, unstacked, when the conversion finds it loop-invariant. Each output
/// comes with whether it is stacked: `true` for every output not asked unbatched, and for
/// one asked unbatched that is loop-variant (the caller reports that).
pub(crate) fn pfor_outputs(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    options: &PforOptions,
    unbatched: &[bool],
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<(Vec<(ValueId, bool)>, PforReport)> {
    let n = n.into();
    let n_val = n.to_value(g)?;
    let i = g.input("__pfor_index", DType::I64, Shape::scalar());
    let body_start = g.mark();
    let outs = body(g, i)?;
    let outs = g.capture_all(&outs)?;
    let keep: Vec<bool> = (0..outs.len()).map(|k| unbatched.get(k).copied().unwrap_or(false)).collect();
    let mut report = PforReport::default();
    let res = match (options.chunk_size, n.static_value()) {
        (Some(0), _) => return Err(Error::InvalidArgument("pfor: chunk_size must be > 0".into())),
        (Some(c), Some(k)) if c < k => {
            convert_chunked(g, i, body_start, &outs, &keep, n, n_val, c, options, &mut report)?
        }
        (Some(c), None) => convert_chunked(g, i, body_start, &outs, &keep, n, n_val, c, options, &mut report)?,
        _ => {
            let info = full_loop(g, n.static_value(), n_val)?;
            let w = convert_body_report(g, i, body_start, &info, options, &outs, &mut report)?;
            let res = w.iter().zip(&keep).map(|(w, k)| finish_output(g, &info, *w, *k)).collect::<Result<Vec<_>>>()?;
            match n.static_value() {
                Some(1) if options.one_row => {
                    match super::one_row::one_row_outputs(g, i, body_start, &outs, &res, options)? {
                        Some(rows) => {
                            report.one_row = true;
                            rows
                        }
                        None => res,
                    }
                }
                _ => res,
            }
        }
    };
    let stacked: Vec<bool> = res.iter().map(|(_, s)| *s).collect();
    let mut vals: Vec<ValueId> = res.iter().map(|(v, _)| *v).collect();
    if options.simplify {
        // The region is everything this call added: the traced body and its conversion.
        let mark = g.birth(i.node).unwrap_or(u64::MAX);
        let s = simplify_since(g, &vals, mark)?;
        vals = s.outputs.clone();
        report.simplified = Some(s);
        if options.products {
            vals = super::contract_since(g, &vals, mark)?.outputs;
        }
    }
    Ok((vals.into_iter().zip(stacked).collect(), report))
}

fn full_loop(g: &mut Graph, n_static: Option<usize>, n_val: ValueId) -> Result<LoopInfo> {
    let index = match n_static {
        Some(k) => g.constant(Tensor::arange(k)?),
        None => {
            let zero = i64_scalar(g, 0);
            let one = i64_scalar(g, 1);
            g.range(zero, n_val, one)?
        }
    };
    Ok(LoopInfo { n_static, n: n_val, index, index_is_iota: true })
}

/// A converted output as a stacked value (tiling an invariant one).
pub(crate) fn stack_output(g: &mut Graph, info: &LoopInfo, w: Wrapped) -> Result<ValueId> {
    if w.stacked { Ok(w.value) } else { tile(g, info, w.value) }
}

/// A converted output and whether it is stacked: an invariant one asked unbatched (`keep`)
/// stays as it is, every other one is stacked.
fn finish_output(g: &mut Graph, info: &LoopInfo, w: Wrapped, keep: bool) -> Result<(ValueId, bool)> {
    if keep && !w.stacked { Ok((w.value, false)) } else { Ok((stack_output(g, info, w)?, true)) }
}

#[allow(clippy::too_many_arguments)]
fn convert_chunked(
    g: &mut Graph,
    i: ValueId,
    body_start: u64,
    outs: &[ValueId],
    keep: &[bool],
    n: LoopLen,
    n_val: ValueId,
    c: usize,
    options: &PforOptions,
    report: &mut PforReport,
) -> Result<Vec<(ValueId, bool)>> {
    let c_val = i64_scalar(g, c as i64);
    let (nc_len, nc_val) = match n.static_value() {
        Some(k) => (LoopLen::Static(k / c), i64_scalar(g, (k / c) as i64)),
        None => {
            let v = g.floor_div(n_val, c_val)?;
            (LoopLen::Dynamic(v), v)
        }
    };
    // One chunk: indices k*c + [0, c).
    let k = g.input("__pfor_chunk", DType::I64, Shape::scalar());
    let base = g.mul(k, c_val)?;
    let iota = g.constant(Tensor::arange(c)?);
    let index = g.add(base, iota)?;
    let info = LoopInfo { n_static: Some(c), n: c_val, index, index_is_iota: false };
    let w = convert_body_report(g, i, body_start, &info, options, outs, report)?;
    let chunk = w.iter().zip(keep).map(|(w, k)| finish_output(g, &info, *w, *k)).collect::<Result<Vec<_>>>()?;
    // Only the stacked outputs go through the loop over chunks; an unbatched one is not
    // loop-variant, so it does not read the chunk index and stays outside that loop.
    let chunk_outs: Vec<ValueId> = chunk.iter().filter(|(_, s)| *s).map(|(v, _)| *v).collect();
    if chunk_outs.is_empty() {
        return Ok(chunk);
    }
    let looped = for_loop_from_traced(g, nc_len, nc_val, k, &chunk_outs)?;
    let mut flat = Vec::with_capacity(looped.len());
    for v in looped {
        flat.push(merge_first_two(g, v)?);
    }
    // The remainder: indices [nc*c, n).
    let rem_static = n.static_value().map(|k| k % c);
    let mut flat = flat.into_iter();
    let mut next_flat = || flat.next().ok_or_else(|| Error::Verify("pfor: chunked outputs out of step".into()));
    if rem_static == Some(0) {
        return chunk.iter().map(|&(v, s)| Ok((if s { next_flat()? } else { v }, s))).collect();
    }
    let start = g.mul(nc_val, c_val)?;
    let one = i64_scalar(g, 1);
    let index = g.range(start, n_val, one)?;
    let r_val = match rem_static {
        Some(r) => i64_scalar(g, r as i64),
        None => g.sub(n_val, start)?,
    };
    let info = LoopInfo { n_static: rem_static, n: r_val, index, index_is_iota: false };
    let w = convert_body_report(g, i, body_start, &info, options, outs, report)?;
    let mut res = Vec::with_capacity(w.len());
    for (&(v, stacked), w) in chunk.iter().zip(w) {
        if !stacked {
            res.push((v, false));
            continue;
        }
        let f = next_flat()?;
        let r = stack_output(g, &info, w)?;
        res.push((g.concat(&[f, r], 0)?, true));
    }
    Ok(res)
}

/// Convert the body between `index_placeholder` and `outs` for the loop `info`. Nodes
/// created after the placeholder (the traced body) that are random generators or variable
/// writes run once per iteration even when they do not read the index.
pub fn convert_body(
    g: &mut Graph,
    index_placeholder: ValueId,
    info: &LoopInfo,
    options: &PforOptions,
    outs: &[ValueId],
) -> Result<Vec<Wrapped>> {
    let start = g.birth(index_placeholder.node).map_or(u64::MAX, |b| b + 1);
    convert_body_report(g, index_placeholder, start, info, options, outs, &mut PforReport::default())
}

/// Stateful body ops that are per-iteration even without reading the index: random
/// generators (each iteration draws) and variable writes (each iteration writes).
fn per_iteration_effect(op: &Op) -> bool {
    match op {
        Op::State(s) => s.has_side_effects(),
        Op::Random(r) => r.is_stateful(),
        Op::Custom(c) => c.is_stateful(),
        _ => false,
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn convert_body_report(
    g: &mut Graph,
    index_placeholder: ValueId,
    body_start: u64,
    info: &LoopInfo,
    options: &PforOptions,
    outs: &[ValueId],
    report: &mut PforReport,
) -> Result<Vec<Wrapped>> {
    // The body is read from a snapshot (O(1) tensor clones) while converted nodes are
    // added to `g`: a node never sees the conversion's own output.
    let src = g.clone();
    let mut map: HashMap<ValueId, Wrapped> = HashMap::new();
    map.insert(index_placeholder, Wrapped::stacked(info.index));
    let scope = Scope { copy_invariant: false, body_start: Some(body_start), live: None };
    convert_graph(&src, g, map, scope, info, options, outs, report)
}

/// How a source graph relates to the target of a conversion.
#[derive(Clone, Copy)]
pub(crate) struct Scope {
    /// Copy nodes that do not depend on the seeds (a function body converted into another
    /// graph) instead of referring to them (the traced body inside the target graph itself).
    pub(crate) copy_invariant: bool,
    /// Nodes added at or after this mark of the graph's clock ([`Graph::mark`]) are the
    /// traced body (for per-iteration side effects).
    pub(crate) body_start: Option<u64>,
    /// A masked region: the stacked bool `[n]` of the rows that run a real iteration
    /// (at least one whenever the region runs); the other rows' results are discarded, and
    /// an op that may raise reads the first live row's values on them instead of theirs.
    pub(crate) live: Option<ValueId>,
}

/// Convert the ancestors of `outs` in `src` into `tgt`, starting from `map` (source value →
/// converted value).
#[allow(clippy::too_many_arguments)]
pub(crate) fn convert_graph(
    src: &Graph,
    tgt: &mut Graph,
    mut map: HashMap<ValueId, Wrapped>,
    scope: Scope,
    info: &LoopInfo,
    options: &PforOptions,
    outs: &[ValueId],
    report: &mut PforReport,
) -> Result<Vec<Wrapped>> {
    let needed: HashSet<NodeId> = src.ancestors(outs)?.into_iter().collect();
    let order: Vec<NodeId> = src.topo_order()?.into_iter().filter(|n| needed.contains(n)).collect();
    // rows for the masked region's raising ops (built on first use)
    let mut live_rows: Option<ValueId> = None;
    for n in order {
        if map.contains_key(&ValueId { node: n, slot: 0 }) {
            continue; // a seed (loop index or function parameter)
        }
        let node = src.node(n)?;
        let in_body = scope.body_start.is_some_and(|b| src.added_since(n, b)) || scope.copy_invariant;
        let variant = node.inputs.iter().any(|v| map.get(v).is_some_and(|w| w.stacked))
            || (in_body && per_iteration_effect(&node.op));
        if !variant && !scope.copy_invariant && !node.inputs.iter().any(|v| map.contains_key(v)) {
            continue; // loop-invariant: used as is
        }
        let mut inputs: Vec<Wrapped> =
            node.inputs.iter().map(|v| map.get(v).copied().unwrap_or(Wrapped::unstacked(*v))).collect();
        let in_types = || node.inputs.iter().map(|v| src.value_type(*v).cloned()).collect::<Result<Vec<_>>>();
        let outs_w = if !variant && (!node.op.is_stateful() || matches!(node.op, Op::State(_))) {
            report.reused += 1;
            let vals: Vec<ValueId> = inputs.iter().map(|w| w.value).collect();
            let new = if may_have_no_rows(info) && node.op.may_raise(&in_types()?, src.library()) {
                guarded(tgt, info, &node.op, &vals, &node.outputs)
            } else {
                tgt.add_op_multi(node.op.clone(), &vals)
            };
            new.map_err(|e| e.at_node(n, node.op.to_string()))?.into_iter().map(Wrapped::unstacked).collect()
        } else {
            let in_types = in_types()?;
            // (a loop known to have at most one row has no finished rows when it runs)
            if let Some(live) = scope.live.filter(|_| info.n_static.is_none_or(|n| n > 1)) {
                let raises = node.op.raises(&in_types, src.library());
                for (k, w) in inputs.iter_mut().enumerate() {
                    if w.stacked && raises.on(k) {
                        let rows = match live_rows {
                            Some(r) => r,
                            None => *live_rows.insert(first_live_rows(tgt, info, live)?),
                        };
                        w.value = tgt.gather(w.value, rows, 0)?;
                    }
                }
            }
            convert_node(tgt, n, &node.op, inputs, in_types, node.outputs.clone(), info, options, report)?
        };
        for (slot, w) in outs_w.into_iter().enumerate() {
            map.insert(ValueId { node: n, slot: slot as u32 }, w);
        }
    }
    Ok(outs.iter().map(|o| map.get(o).copied().unwrap_or(Wrapped::unstacked(*o))).collect())
}

/// Convert a function's body for the loop `info`, with `args` (values of `tgt`) bound to its
/// parameters. Every node of the function is emitted into `tgt`: converted where it depends
/// on a stacked argument, copied otherwise. Used by the control-flow converters.
pub fn convert_function(
    tgt: &mut Graph,
    f: &Function,
    args: &[Wrapped],
    info: &LoopInfo,
    options: &PforOptions,
) -> Result<Vec<Wrapped>> {
    convert_function_in(tgt, f, args, info, options, None)
}

/// [`convert_function`] for a masked region: only the rows where the stacked bool `[n]`
/// `live` is true run a real iteration (at least one whenever the region runs), the others'
/// results are discarded. The stacked inputs of an op that may raise ([`Op::raises`]) read
/// the first live row on the other rows, so they fail only where a live row does.
pub fn convert_function_masked(
    tgt: &mut Graph,
    f: &Function,
    args: &[Wrapped],
    info: &LoopInfo,
    options: &PforOptions,
    live: ValueId,
) -> Result<Vec<Wrapped>> {
    convert_function_in(tgt, f, args, info, options, Some(live))
}

fn convert_function_in(
    tgt: &mut Graph,
    f: &Function,
    args: &[Wrapped],
    info: &LoopInfo,
    options: &PforOptions,
    live: Option<ValueId>,
) -> Result<Vec<Wrapped>> {
    if args.len() != f.params.len() {
        return Err(Error::arity("convert_function", f.params.len().to_string(), args.len()));
    }
    let map: HashMap<ValueId, Wrapped> = f.params.iter().copied().zip(args.iter().copied()).collect();
    let scope = Scope { copy_invariant: true, body_start: None, live };
    convert_graph(&f.graph, tgt, map, scope, info, options, &f.results, &mut PforReport::default())
}

/// Row indices `[n]` that map a live row to itself and any other row to the first live one.
fn first_live_rows(g: &mut Graph, info: &LoopInfo, live: ValueId) -> Result<ValueId> {
    let as_int = g.cast(live, DType::I64)?;
    let first = g.argmax(as_int, 0)?;
    let rows = match info.n_static {
        Some(n) => g.constant(Tensor::arange(n)?),
        None => {
            let zero = i64_scalar(g, 0);
            let one = i64_scalar(g, 1);
            g.range(zero, info.n, one)?
        }
    };
    g.select(live, rows, first)
}

/// True unless the loop is known to have at least one row: a cond branch or while body
/// converted for a subset of the iterations may run on none.
fn may_have_no_rows(info: &LoopInfo) -> bool {
    info.n_static.is_none_or(|n| n == 0)
}

/// An op that may raise whose inputs are all loop-invariant, in a region that may have no
/// rows: the loop runs it once per row, so it runs here under `cond(n > 0)`. With no rows
/// its outputs are zeros of its result types (a dynamic dim 0): every row-wise use of them
/// is empty then, and ops on them that may raise are guarded alike.
fn guarded(
    g: &mut Graph,
    info: &LoopInfo,
    op: &Op,
    vals: &[ValueId],
    out_types: &[TensorType],
) -> Result<Vec<ValueId>> {
    let zero = i64_scalar(g, 0);
    let some = g.greater(info.n, zero)?;
    g.cond(
        some,
        vals,
        |g, p| g.add_op_multi(op.clone(), p),
        |g, _| {
            let mut zeros = Vec::with_capacity(out_types.len());
            for t in out_types {
                let dims: Vec<usize> = t.shape.dims().iter().map(|d| d.value().unwrap_or(0)).collect();
                let z = g.scalar(t.dtype, 0.0);
                zeros.push(g.fill(&dims, z)?);
            }
            Ok(zeros)
        },
    )
}

fn op_key(op: &Op) -> OpKey {
    match op {
        Op::Custom(c) => OpKey::Custom(c.name().to_string()),
        o => OpKey::Builtin(o.kind()),
    }
}

#[allow(clippy::too_many_arguments)]
fn convert_node(
    g: &mut Graph,
    n: NodeId,
    op: &Op,
    inputs: Vec<Wrapped>,
    in_types: Vec<crate::tensor::TensorType>,
    out_types: Vec<crate::tensor::TensorType>,
    info: &LoopInfo,
    options: &PforOptions,
    report: &mut PforReport,
) -> Result<Vec<Wrapped>> {
    // a custom op without a converter of its own may declare how it batches
    let declared = || (op.batching() != Batching::Custom).then(|| Arc::new(derived_convert) as Arc<dyn Converter>);
    let outcome = match options.registry.get(&op_key(op)).or_else(declared) {
        Some(conv) => {
            let mut ctx = ConvertCtx {
                g,
                node: n,
                op: op.clone(),
                inputs: inputs.clone(),
                in_types,
                out_types: out_types.clone(),
                info,
                options,
            };
            conv.convert(&mut ctx).map_err(|e| e.at_node(n, op.to_string()))?
        }
        None => Converted::Unhandled("no converter registered".into()),
    };
    match outcome {
        Converted::Done(outs) => {
            check_converted(g, n, op, &outs, &out_types, info)?;
            report.converted += 1;
            Ok(outs)
        }
        Converted::Unhandled(reason) => {
            match options.fallback {
                Fallback::Error => return Err(Error::NoConverter { op: op.name(), node: n, reason }),
                Fallback::Warn => {
                    eprintln!("pfor warning: op {} at node {n} runs as a per-iteration loop: {reason}", op.name())
                }
                Fallback::Silent => {}
            }
            report.fallbacks.push(FallbackRecord { node: n, op: op.name(), reason });
            fallback_loop(g, op, &inputs, info)
        }
    }
}

/// A converter's outputs must have exactly the per-iteration types (stacked: with the
/// loop axis prepended): a converter bug is an error here, never a wrong answer later.
fn check_converted(
    g: &Graph,
    n: NodeId,
    op: &Op,
    outs: &[Wrapped],
    out_types: &[crate::tensor::TensorType],
    info: &LoopInfo,
) -> Result<()> {
    if outs.len() != out_types.len() {
        return Err(Error::Verify(format!(
            "converter for {} at {n} returned {} outputs, the op has {}",
            op.name(),
            outs.len(),
            out_types.len()
        )));
    }
    for (k, (w, t)) in outs.iter().zip(out_types).enumerate() {
        let got = g.value_type(w.value)?;
        let want = if w.stacked { stacked_type(info, t) } else { t.clone() };
        if got.dtype != want.dtype || !got.shape.compatible(&want.shape) {
            return Err(Error::Verify(format!(
                "converter for {} at {n}: output {k} is {got} (stacked={}), expected {want}",
                op.name(),
                w.stacked
            )));
        }
    }
    Ok(())
}

/// Per-op fallback: run this op once per iteration in a loop and stack its outputs.
fn fallback_loop(g: &mut Graph, op: &Op, inputs: &[Wrapped], info: &LoopInfo) -> Result<Vec<Wrapped>> {
    let j = g.input("__pfor_fallback_index", DType::I64, Shape::scalar());
    let mut ins = Vec::with_capacity(inputs.len());
    for w in inputs {
        ins.push(if w.stacked { g.gather(w.value, j, 0)? } else { w.value });
    }
    let outs = g.add_op_multi(op.clone(), &ins)?;
    let len = match info.n_static {
        Some(k) => LoopLen::Static(k),
        None => LoopLen::Dynamic(info.n),
    };
    let stacked = for_loop_from_traced(g, len, info.n, j, &outs)?;
    Ok(stacked.into_iter().map(Wrapped::stacked).collect())
}
