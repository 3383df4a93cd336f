//! The hand-off from pfor to the auto-batching VM: a (recursive) named graph function and
//! everything it calls become an auto-batching [`Program`], run by one [`AutobatchCall`]
//! node on the stacked inputs of all iterations at once.
//!
//! Translation ([`translate`]):
//! - every library function reachable from the entry through `Call` (transitively, also
//!   inside branch and loop bodies) becomes one program function (declared first, so
//!   recursion and mutual recursion work);
//! - each maximal run of ordinary (non-control-flow) ops between control-flow nodes becomes
//!   ONE graph primop: the run is extracted into a per-thread function and vectorized with
//!   pfor's converters (all inputs stacked, batch = however many rows the VM computes);
//! - `Cond` becomes `if_else` with both branch functions translated inline (their
//!   parameters bound to the Cond's argument variables), each branch copying its results
//!   into the Cond's output variables;
//! - `Call` becomes a program call; `While` becomes `while_loop_with` (its
//!   `IterationCap`, if any, per thread) over fresh carry variables;
//! - anything else (`For`, stateful ops, types that are not fully static) is an
//!   [`Error::Unsupported`] naming the construct, so the caller can fall back.
//!
//! Variable types are the graph's per-thread value types (no batch axis).
//!
//! This module owns the hand-off (the control-flow converter calls it for a recursive
//! call): it depends on `autobatch` (the program builder and the VM) and on the vectorizer,
//! while `autobatch` depends on neither, so there is no module cycle.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use super::{LoopInfo, PforOptions, Wrapped, convert_function, tile};
use crate::autobatch::vm::Vm;
use crate::autobatch::{ExecConfig, FuncId, FunctionBuilder, PrimOp, Program, ProgramBuilder, Var, VarType};
use crate::error::{Error, Result};
use crate::ir::{Function, Graph, NodeId, ValueId};
use crate::ops::{ControlOp, CustomOp, EvalCtx, Op};
use crate::tensor::{DType, Dim, Shape, Tensor, TensorType};

const OP: &str = "autobatch hand-off";

fn unsupported(what: impl Into<String>) -> Error {
    Error::unsupported(OP, what)
}

/// The per-thread [`VarType`] of a graph type (its shape must be fully static).
fn var_type(t: &TensorType) -> Result<VarType> {
    t.shape
        .as_fixed()
        .map(|s| VarType::new(t.dtype, &s))
        .ok_or_else(|| unsupported(format!("value of type {t}: auto-batched variables need static shapes")))
}

/// A variable defined in every thread reaching the code, with its per-thread type.
type Witness = (Var, TensorType);

/// Translation state shared by every function body.
struct Cx {
    /// Parent graph for the primop functions (shares the library).
    parent: Graph,
    ids: HashMap<String, FuncId>,
    options: PforOptions,
    /// Straight-line runs emitted so far (numbers their primops uniquely).
    runs: Cell<usize>,
}

/// Translate the library function `name` of `g` (and everything it calls) into a
/// [`Program`] whose inputs have the per-thread types `input_types`. Straight-line runs are
/// vectorized with `options` (its registry and fallback policy).
pub fn translate(g: &Graph, name: &str, input_types: &[TensorType], options: &PforOptions) -> Result<Program> {
    // Every reachable function, in discovery order (the entry first).
    let funcs = g.library().reachable(name)?;
    let mut pb = ProgramBuilder::new();
    let mut ids = HashMap::new();
    for (fname, f) in &funcs {
        let params: Vec<String> = (0..f.params.len()).map(|k| format!("{fname}.x{k}")).collect();
        let results: Vec<String> = (0..f.results.len()).map(|k| format!("{fname}.r{k}")).collect();
        let p: Vec<&str> = params.iter().map(String::as_str).collect();
        let r: Vec<&str> = results.iter().map(String::as_str).collect();
        ids.insert(fname.clone(), pb.declare(fname, &p, &r)?);
    }
    let cx = Cx { parent: g.new_child(), ids, options: options.clone(), runs: Cell::new(0) };
    for (fname, f) in &funcs {
        pb.define(cx.ids[fname], |fb| {
            let params = fb.params();
            let res = emit_function(&cx, fb, fname, f, &params, None)?;
            fb.ret(&res)
        })?;
    }
    let types = input_types.iter().map(var_type).collect::<Result<Vec<_>>>()?;
    pb.build(cx.ids[name], &types)
}

/// Emit `func`'s body with its parameters bound to `args`; returns the variables holding
/// its results. `witness` is a variable defined in every thread reaching this code (its
/// rows give primops without inputs their batch width).
fn emit_function(
    cx: &Cx,
    fb: &mut FunctionBuilder<'_>,
    fname: &str,
    func: &Function,
    args: &[Var],
    witness: Option<Witness>,
) -> Result<Vec<Var>> {
    if args.len() != func.params.len() {
        return Err(Error::arity(OP, func.params.len().to_string(), args.len()));
    }
    let witness = match args.first() {
        Some(a) => Some((*a, func.graph.value_type(func.params[0])?.clone())),
        None => witness,
    };
    let g = &func.graph;
    let mut env: HashMap<ValueId, Var> = func.params.iter().copied().zip(args.iter().copied()).collect();
    let needed: HashSet<NodeId> = g.ancestors(&func.results)?.into_iter().collect();
    let order: Vec<NodeId> = g.topo_order()?.into_iter().filter(|n| needed.contains(n)).collect();
    // Segment id of each ordinary node: the number of control-flow nodes before it.
    let mut seg_of: HashMap<NodeId, usize> = HashMap::new();
    let mut k = 0;
    for &n in &order {
        match &g.node(n)?.op {
            Op::Control(_) => k += 1,
            Op::Input { .. } => {}
            op => {
                if op.is_stateful() || op.has_side_effects() {
                    return Err(unsupported(format!("stateful op {} in function '{fname}'", op.name())));
                }
                seg_of.insert(n, k);
            }
        }
    }
    // Values of ordinary nodes used outside their segment (or returned).
    let mut escapes: HashSet<ValueId> = func.results.iter().copied().collect();
    for &n in &order {
        for v in &g.node(n)?.inputs {
            if seg_of.contains_key(&v.node) && seg_of.get(&n) != seg_of.get(&v.node) {
                escapes.insert(*v);
            }
        }
    }
    let mut seg: Vec<NodeId> = Vec::new();
    for &n in &order {
        let node = g.node(n)?;
        match &node.op {
            Op::Input { .. } => {
                if !env.contains_key(&ValueId { node: n, slot: 0 }) {
                    return Err(unsupported(format!("input {n} of function '{fname}' is not a parameter")));
                }
            }
            Op::Control(c) => {
                flush(cx, fb, fname, g, &mut seg, &escapes, &mut env, &witness)?;
                let ins = node.inputs.iter().map(|v| lookup(&env, *v)).collect::<Result<Vec<_>>>()?;
                let outs = emit_control(cx, fb, fname, c, &ins, &node.outputs, &witness)?;
                for (slot, v) in outs.into_iter().enumerate() {
                    env.insert(ValueId { node: n, slot: slot as u32 }, v);
                }
            }
            _ => seg.push(n),
        }
    }
    flush(cx, fb, fname, g, &mut seg, &escapes, &mut env, &witness)?;
    func.results.iter().map(|r| lookup(&env, *r)).collect()
}

fn lookup(env: &HashMap<ValueId, Var>, v: ValueId) -> Result<Var> {
    env.get(&v).copied().ok_or_else(|| Error::Verify(format!("{OP}: value {v} has no variable")))
}

/// Emit one straight-line run of ordinary nodes as ONE graph primop (or constants).
#[allow(clippy::too_many_arguments)]
fn flush(
    cx: &Cx,
    fb: &mut FunctionBuilder<'_>,
    fname: &str,
    g: &Graph,
    seg: &mut Vec<NodeId>,
    escapes: &HashSet<ValueId>,
    env: &mut HashMap<ValueId, Var>,
    witness: &Option<Witness>,
) -> Result<()> {
    if seg.is_empty() {
        return Ok(());
    }
    let nodes = std::mem::take(seg);
    let in_seg: HashSet<NodeId> = nodes.iter().copied().collect();
    let mut inputs: Vec<ValueId> = Vec::new();
    let mut outputs: Vec<ValueId> = Vec::new();
    for &n in &nodes {
        let node = g.node(n)?;
        for v in &node.inputs {
            if !in_seg.contains(&v.node) && !inputs.contains(v) {
                inputs.push(*v);
            }
        }
        for v in g.outputs_of(n) {
            if escapes.contains(&v) {
                outputs.push(v);
            }
        }
    }
    if outputs.is_empty() {
        return Ok(());
    }
    let out_types = outputs.iter().map(|v| var_type(g.value_type(*v)?)).collect::<Result<Vec<_>>>()?;
    // Constants only: per-thread constants need no graph run.
    if inputs.is_empty() && nodes.iter().all(|n| g.node(*n).is_ok_and(|nd| matches!(nd.op, Op::Const { .. }))) {
        for v in &outputs {
            let Op::Const { value } = &g.node(v.node)?.op else { unreachable!("checked above") };
            let var = fb.constant(&format!("{fname}.const"), value.clone())?;
            env.insert(*v, var);
        }
        return Ok(());
    }
    let mut in_vars = inputs.iter().map(|v| lookup(env, *v)).collect::<Result<Vec<_>>>()?;
    let mut in_types = inputs.iter().map(|v| g.value_type(*v).cloned()).collect::<Result<Vec<_>>>()?;
    if in_vars.is_empty() {
        // The batch width comes from the witness (an unused parameter).
        let (w, t) = witness
            .clone()
            .ok_or_else(|| unsupported(format!("ops without inputs in function '{fname}', which has no parameters")))?;
        in_vars.push(w);
        in_types.push(t);
    }
    // The run as a per-thread function.
    let per_thread = Function::build(&cx.parent, &in_types, |sub, p| {
        let mut map: HashMap<ValueId, ValueId> = inputs.iter().copied().zip(p.iter().copied()).collect();
        for &n in &nodes {
            let node = g.node(n)?;
            let ins = node.inputs.iter().map(|v| map[v]).collect::<Vec<_>>();
            let new = sub.add_op_multi(node.op.clone(), &ins)?;
            for (slot, v) in new.into_iter().enumerate() {
                map.insert(ValueId { node: n, slot: slot as u32 }, v);
            }
        }
        Ok(outputs.iter().map(|v| map[v]).collect())
    })?;
    // ... vectorized over the rows the VM computes.
    let batched_types: Vec<TensorType> =
        in_types.iter().map(|t| TensorType::new(t.dtype, t.shape.prepend(Dim::Dynamic(None)))).collect();
    let batched = Function::build(&cx.parent, &batched_types, |sub, p| {
        let s = sub.shape_of(p[0])?;
        let s0 = sub.slice(s, &[0], &[1])?;
        let n = sub.reshape(s0, &[])?;
        let zero = sub.constant(Tensor::scalar(0i64));
        let one = sub.constant(Tensor::scalar(1i64));
        let index = sub.range(zero, n, one)?;
        let info = LoopInfo { n_static: None, n, index, index_is_iota: true };
        let args: Vec<Wrapped> = p.iter().map(|v| Wrapped::stacked(*v)).collect();
        let res = convert_function(sub, &per_thread, &args, &info, &cx.options)?;
        res.into_iter().map(|w| if w.stacked { Ok(w.value) } else { tile(sub, &info, w.value) }).collect()
    })
    .map_err(|e| unsupported(format!("vectorizing a straight-line run of function '{fname}': {e}")))?;
    let name = format!("{fname}.ops{}", cx.runs.get());
    cx.runs.set(cx.runs.get() + 1);
    let out_vars: Vec<Var> = outputs.iter().map(|_| fb.local(&name)).collect();
    fb.op(PrimOp::function(&name, &in_vars, &out_vars, batched).with_types(out_types))?;
    for (v, var) in outputs.iter().zip(out_vars) {
        env.insert(*v, var);
    }
    Ok(())
}

/// Emit a control-flow node on argument variables `ins`; returns its output variables.
fn emit_control(
    cx: &Cx,
    fb: &mut FunctionBuilder<'_>,
    fname: &str,
    op: &ControlOp,
    ins: &[Var],
    out_types: &[TensorType],
    witness: &Option<Witness>,
) -> Result<Vec<Var>> {
    for t in out_types {
        var_type(t)?;
    }
    match op {
        ControlOp::Call { function, .. } => {
            let id = cx.ids.get(function).ok_or_else(|| Error::UnknownFunction { name: function.clone() })?;
            fb.call(*id, ins)
        }
        ControlOp::Cond { then, else_ } => {
            let (pred, args) = ins.split_first().ok_or_else(|| Error::arity(OP, "at least 1", 0))?;
            let outs: Vec<Var> = out_types.iter().map(|_| fb.local(&format!("{fname}.cond"))).collect();
            let branch = |fb: &mut FunctionBuilder<'_>, f: &Function| -> Result<()> {
                let w = witness.clone().or_else(|| Some((*pred, TensorType::new(DType::Bool, Shape::scalar()))));
                let r = emit_function(cx, fb, fname, f, args, w)?;
                if !outs.is_empty() {
                    fb.op(PrimOp::copy("cond_out", &r, &outs))?;
                }
                Ok(())
            };
            fb.if_else(*pred, |fb| branch(fb, then), |fb| branch(fb, else_))?;
            Ok(outs)
        }
        ControlOp::While { cond, body, num_carries, max_iterations } => {
            let k = *num_carries;
            let carries: Vec<Var> = (0..k).map(|_| fb.local(&format!("{fname}.carry"))).collect();
            if k > 0 {
                fb.op(PrimOp::copy("while_init", &ins[..k], &carries))?;
            }
            let mut args = carries.clone();
            args.extend_from_slice(&ins[k..]);
            fb.while_loop_with(
                *max_iterations,
                |fb| {
                    let r = emit_function(cx, fb, fname, cond, &args, witness.clone())?;
                    r.first().copied().ok_or_else(|| Error::Verify(format!("{OP}: while cond has no result")))
                },
                |fb| {
                    let r = emit_function(cx, fb, fname, body, &args, witness.clone())?;
                    if k > 0 {
                        fb.op(PrimOp::copy("while_next", &r, &carries))?;
                    }
                    Ok(())
                },
            )?;
            Ok(carries)
        }
        ControlOp::For { .. } => Err(unsupported(format!("a reference for-loop in function '{fname}'"))),
    }
}

/// One graph node running a recursive function for every iteration at once on the
/// auto-batching VM: inputs are the stacked (`[n] + per-thread type`) arguments, outputs the
/// stacked results.
pub struct AutobatchCall {
    /// The translated program.
    pub program: Arc<Program>,
    /// The graph function it runs.
    pub name: String,
    /// Per-thread result types.
    pub out_types: Vec<TensorType>,
    vm: Arc<Vm>,
}

impl AutobatchCall {
    /// Wrap a program (lowered for the VM once, here).
    pub fn new(program: Program, name: &str, out_types: Vec<TensorType>) -> Result<AutobatchCall> {
        if program.vars_out.len() != out_types.len() {
            return Err(Error::arity(OP, program.vars_out.len().to_string(), out_types.len()));
        }
        let vm = Arc::new(Vm::new(&program)?);
        Ok(AutobatchCall { program: Arc::new(program), name: name.to_string(), out_types, vm })
    }
}

impl fmt::Debug for AutobatchCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AutobatchCall({}, {} functions)", self.name, self.program.functions.len())
    }
}

impl CustomOp for AutobatchCall {
    fn name(&self) -> &str {
        "autobatch_call"
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let p = &self.program;
        if inputs.len() != p.vars_in.len() || inputs.is_empty() {
            return Err(Error::arity("autobatch_call", p.vars_in.len().max(1).to_string(), inputs.len()));
        }
        let mut n: Option<Dim> = None;
        for (i, (t, v)) in inputs.iter().zip(&p.vars_in).enumerate() {
            let want = p.var_type(*v)?.batched_tensor_type();
            if t.dtype != want.dtype || !t.shape.compatible(&want.shape) {
                return Err(Error::shape("autobatch_call", format!("input {i} is {t}, expected {want}")));
            }
            let d = t.shape.dim(0).clone();
            if n.as_ref().is_none_or(|x| x.value().is_none()) {
                n = Some(d);
            }
        }
        let n = n.unwrap_or(Dim::Dynamic(None));
        Ok(self.out_types.iter().map(|t| TensorType::new(t.dtype, t.shape.prepend(n.clone()))).collect())
    }

    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(self.vm.run(inputs, &ExecConfig::default())?.outputs)
    }

    /// The session's call-depth limit (the VM counts depth as sessions do, but runs self
    /// tail calls as jumps), deadline and cancel token; the graph-function primops run with
    /// the session's options.
    fn eval_in(&self, inputs: &[Tensor], ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        let (deadline, cancel) = ctx.limits();
        let config = ExecConfig {
            max_stack_depth: ctx.max_call_depth(),
            deadline,
            cancel: cancel.cloned(),
            functions: Some(ctx.function_runner()),
            ..ExecConfig::default()
        };
        Ok(self.vm.run(inputs, &config)?.outputs)
    }
}
