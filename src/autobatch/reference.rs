//! The unbatched reference interpreter: one thread at a time, plain recursion.
//!
//! For each batch member it runs the (unlowered) program sequentially — every primop on a
//! batch of one row, every call a recursive interpretation with its own environment,
//! branches on the thread's own condition — and stacks the outputs. It shares nothing with
//! the batched interpreters but [`PrimOp::run`](super::PrimOp::run) (no masks, layouts,
//! allocation or stacks), which makes it their correctness oracle, and it is the
//! "unbatched loop" baseline of the benchmarks. Its limits are the batched interpreters'
//! (see the crate-level `autobatch` docs): a self tail call is a jump (parallel copy into
//! the parameters, back to the entry block); calls deeper than `max_stack_depth` are
//! `Error::RecursionLimit`; backward jumps count against `max_iterations` per activation;
//! the deadline and token are checked before every block.

use super::program::{Instruction, Program, Terminator};
use super::segment::self_tail_call;
use super::{ExecConfig, RunCounters, Trips, block_at, check_inputs, empty_outputs, graph_name};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Run `program` on `inputs` one batch member at a time, with default options.
///
/// ```
/// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, reference};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut pb = ProgramBuilder::new();
/// let inc = pb.function("inc", &["x"], &["y"], |f| {
///     let x = f.param(0)?;
///     let y = f.add(x, 1i64)?;
///     f.ret(&[y])
/// })?;
/// let program = pb.build(inc, &[VarType::scalar(DType::I64)])?;
/// // the oracle: thread after thread, no batching
/// assert_eq!(reference::execute(&program, &[Tensor::vec1(&[1i64, 2])])?[0].to_vec::<i64>()?, [2, 3]);
/// # Ok(())
/// # }
/// ```
pub fn execute(program: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    execute_with(program, inputs, &ExecConfig::default())
}

/// Run one batch member at a time (the limits of `config`; its modes do not apply).
///
/// ```
/// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, reference};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// // depth(n) = n == 0 ? 0 : 1 + depth(n - 1): n + 1 nested calls
/// let mut pb = ProgramBuilder::new();
/// let depth = pb.declare("depth", &["n"], &["d"])?;
/// pb.define(depth, |f| {
///     let n = f.param(0)?;
///     let zero = f.eq(n, 0i64)?;
///     f.if_else(zero, |f| f.ret(&[n]), |f| {
///         let m = f.sub(n, 1i64)?;
///         let d = f.call(depth, &[m])?;
///         let d = f.add(d[0], 1i64)?; // not a tail call: the stack grows
///         f.ret(&[d])
///     })
/// })?;
/// let program = pb.build(depth, &[VarType::scalar(DType::I64)])?;
/// let config = ExecConfig { max_stack_depth: 4, ..ExecConfig::default() };
/// let n = |v: i64| Tensor::vec1(&[v]);
/// assert_eq!(reference::execute_with(&program, &[n(2)], &config)?[0].to_vec::<i64>()?, [2]);
/// let e = reference::execute_with(&program, &[n(10)], &config).unwrap_err();
/// assert!(matches!(e.root(), Error::RecursionLimit { .. }));
/// # Ok(())
/// # }
/// ```
pub fn execute_with(program: &Program, inputs: &[Tensor], config: &ExecConfig) -> Result<Vec<Tensor>> {
    super::lower::check_runnable(program, false)?;
    let batch = check_inputs(program, inputs)?;
    if batch == 0 {
        return empty_outputs(program);
    }
    let mut per_out: Vec<Vec<Tensor>> = vec![Vec::with_capacity(batch); program.vars_out.len()];
    let mut run = RunCounters::new(0, config);
    for i in 0..batch {
        let row: Vec<Tensor> = inputs.iter().map(|t| t.slice_axis0(i, i + 1)).collect::<Result<_>>()?;
        for (acc, t) in per_out.iter_mut().zip(run_one(program, &row, config, &mut run)?) {
            acc.push(t.index_axis0(0)?);
        }
    }
    per_out
        .into_iter()
        .zip(&program.vars_out)
        .map(|(rows, v)| {
            let ty = program.var_type(*v)?;
            Tensor::stack(&rows, ty.dtype, &ty.shape)
        })
        .collect()
}

/// Run one thread: `inputs` are `[1] + event shape`; so are the outputs.
///
/// ```
/// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, reference};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut pb = ProgramBuilder::new();
/// let neg = pb.function("neg", &["x"], &["y"], |f| {
///     let x = f.param(0)?;
///     let y = f.mul(x, -1.0f64)?;
///     f.ret(&[y])
/// })?;
/// let program = pb.build(neg, &[VarType::new(DType::F64, &[2])])?;
/// let one = Tensor::from_vec(&[1, 2], vec![1.0f64, -2.0])?; // one thread: [1] + its shape
/// assert_eq!(reference::execute_one(&program, &[one], 256)?[0].to_vec::<f64>()?, [-1.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn execute_one(program: &Program, inputs: &[Tensor], max_depth: usize) -> Result<Vec<Tensor>> {
    let config = ExecConfig { max_stack_depth: max_depth, ..ExecConfig::default() };
    run_one(program, inputs, &config, &mut RunCounters::new(0, &config))
}

fn run_one(program: &Program, inputs: &[Tensor], config: &ExecConfig, run: &mut RunCounters) -> Result<Vec<Tensor>> {
    let mut env: Vec<Option<Tensor>> = vec![None; program.var_defs.len()];
    for (v, t) in program.vars_in.iter().zip(inputs) {
        env[v.0] = Some(t.clone());
    }
    interpret(program, 0, &mut env, 0, config, run)?;
    program
        .vars_out
        .iter()
        .map(|v| {
            env[v.0].clone().ok_or_else(|| {
                Error::InvalidArgument(format!("autobatch: output '{}' was never written", program.var_name(*v)))
            })
        })
        .collect()
}

fn read(p: &Program, env: &[Option<Tensor>], v: super::Var) -> Result<Tensor> {
    env.get(v.0).cloned().flatten().ok_or_else(|| {
        Error::InvalidArgument(format!("autobatch: variable '{}' is read before it is written", p.var_name(v)))
    })
}

fn interpret(
    p: &Program,
    gi: usize,
    env: &mut [Option<Tensor>],
    depth: usize,
    config: &ExecConfig,
    run: &mut RunCounters,
) -> Result<()> {
    let g = if gi == 0 { &p.graph } else { &p.function(super::FuncId(gi - 1))?.graph };
    if depth > config.max_stack_depth {
        let function = p.functions.get(gi.wrapping_sub(1)).map(|f| f.name.clone()).unwrap_or_default();
        return Err(Error::RecursionLimit { function, limit: config.max_stack_depth });
    }
    if depth > 0 {
        run.stack.check(|| graph_name(p, gi), depth)?;
    }
    let mut trips = Trips::new(config, 1);
    let mut pc = 0;
    loop {
        let b = g.blocks.get(pc).ok_or_else(|| Error::InvalidArgument(format!("autobatch: no block {pc}")))?;
        run.check_interrupt(|| block_at(&graph_name(p, gi), &b.name))?;
        let tail = self_tail_call(p, gi, pc);
        for (oi, op) in b.ops.iter().enumerate() {
            match op {
                Instruction::Call(c) if Some(oi) == tail => {
                    // a self tail call is a jump: parallel copy into the parameters
                    let args = c.inputs.iter().map(|v| read(p, env, *v)).collect::<Result<Vec<_>>>()?;
                    for (prm, a) in p.function(c.function)?.params.iter().zip(args) {
                        env[prm.0] = Some(a);
                    }
                    break;
                }
                Instruction::Prim(o) => {
                    let ins = o.inputs.iter().map(|v| read(p, env, *v)).collect::<Result<Vec<_>>>()?;
                    let types = o.outputs.iter().map(|v| p.var_type(*v).cloned()).collect::<Result<Vec<_>>>()?;
                    for (v, t) in o.outputs.iter().zip(o.run(ins, 1, &types, config)?) {
                        env[v.0] = Some(t);
                    }
                }
                Instruction::Call(c) => {
                    let f = p.function(c.function)?;
                    let args = c.inputs.iter().map(|v| read(p, env, *v)).collect::<Result<Vec<_>>>()?;
                    let mut callee: Vec<Option<Tensor>> = vec![None; p.var_defs.len()];
                    for (prm, a) in f.params.iter().zip(args) {
                        callee[prm.0] = Some(a);
                    }
                    interpret(p, c.function.0 + 1, &mut callee, depth + 1, config, run)?;
                    for (o, r) in c.outputs.iter().zip(&f.results) {
                        env[o.0] = Some(read(p, &callee, *r)?);
                    }
                }
                Instruction::Push(_) | Instruction::Pop(_) => {
                    return Err(Error::InvalidArgument("autobatch reference: the program is lowered".into()));
                }
            }
        }
        let next = match &b.terminator {
            _ if tail.is_some() => 0,
            Terminator::Goto(t) => t.0,
            Terminator::Branch { cond, if_true, if_false } => {
                let c = read(p, env, *cond)?;
                let v = c.to_vec::<bool>()?;
                if v.first().copied().unwrap_or(false) { if_true.0 } else { if_false.0 }
            }
            Terminator::Return => return Ok(()),
            other => {
                return Err(Error::InvalidArgument(format!("autobatch reference: lowered terminator {other:?}")));
            }
        };
        Trips::jump(&mut trips, || [0], pc, next, || graph_name(p, gi))?;
        pc = next;
    }
}
