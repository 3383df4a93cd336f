//! The stackless executor: one recursive interpretation per function call.
//!
//! Algorithm (per activation, i.e. per recursive interpretation of one call): a current pc, the
//! active-thread mask and a wait queue of `(pc, mask)` waiting points.
//! 1. Run the block at pc for the active threads (its primops in masked or gather/scatter
//!    mode, see [`super::ExecConfig`]). A call runs the callee by a recursive interpretation
//!    for exactly the threads active here — compacted to those rows in gather mode — in a
//!    fresh variable environment (the Rust stack holds the caller's: no Full variables).
//! 2. `Goto` enqueues the target with the active mask; `Branch` splits the mask by the
//!    condition and enqueues both parts; `Return` retires the threads. Empty masks are
//!    never enqueued, and entries at the same pc are OR-coalesced (re-convergence).
//! 3. Dequeue the smallest pc and make its threads active; stop when the queue is empty.
//!
//! Every thread executes exactly its sequential program, because each thread's rows are
//! touched only when it is active and the masks of one activation are disjoint. Threads
//! re-converge within one activation but not across call depths (the full VM does that).
//! A self tail call is run as a jump (parallel copy into the parameters, goto entry), so
//! tail recursion does not deepen the Rust stack; other calls deeper than
//! `max_stack_depth` are `Error::RecursionLimit`. Block plans are compiled once and cached
//! in the executor (across depths and runs).

use super::mask::{Mask, WaitQueue};
use super::primop::{BlockRun, Layout};
use super::program::{Program, Terminator, VariableAllocation};
use super::run_loop::{Machine, run_blocks, run_program};
use super::segment::{PlanCache, Step};
use super::{ExecConfig, Execution, RunCounters, Trips, block_at, graph_name};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A stackless executor for one program, holding the block-plan cache.
pub struct Executor {
    program: Program,
    cache: PlanCache,
}

impl Executor {
    /// An executor for a built (typed and allocated) program that still has its calls.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, stackless};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let sq = pb.function("sq", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, x)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(sq, &[VarType::scalar(DType::I64)])?;
    /// let exec = stackless::Executor::new(&program)?; // reused: its block plans are cached
    /// for batch in [vec![1i64, 2], vec![3, 4, 5]] {
    ///     let want: Vec<i64> = batch.iter().map(|v| v * v).collect();
    ///     let out = exec.run(&[Tensor::vec1(&batch)], &ExecConfig::default())?;
    ///     assert_eq!(out.outputs[0].to_vec::<i64>()?, want);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(program: &Program) -> Result<Executor> {
        super::lower::check_runnable(program, false)?;
        Ok(Executor { program: program.clone(), cache: PlanCache::new(program, true) })
    }

    /// Run on inputs of shape `[batch] + event shape` each.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, stackless};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let max0 = pb.function("max0", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.maximum(x, 0i64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let exec = stackless::Executor::new(&pb.build(max0, &[VarType::scalar(DType::I64)])?)?;
    /// let out = exec.run(&[Tensor::vec1(&[-3i64, 3])], &ExecConfig::default())?;
    /// assert_eq!(out.outputs[0].to_vec::<i64>()?, [0, 3]);
    /// assert_eq!(out.stats.runs("maximum"), 1); // one batched run for both threads
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(&self, inputs: &[Tensor], config: &ExecConfig) -> Result<Execution> {
        run_program(&self.program, &self.cache, inputs, config, |mut regs, batch, counters| {
            self.interpret(0, &mut regs, Mask::all(batch), 0, config, counters)?;
            Ok(regs)
        })
    }

    /// Interpret graph `gi` (0 = main, f + 1 = function f) for the threads in `mask`, with
    /// `regs` as this activation's variable environment.
    fn interpret(
        &self,
        gi: usize,
        regs: &mut [Option<Tensor>],
        mask: Mask,
        depth: usize,
        config: &ExecConfig,
        counters: &mut RunCounters,
    ) -> Result<()> {
        let p = &self.program;
        if depth > config.max_stack_depth {
            let function = p.functions.get(gi.wrapping_sub(1)).map(|f| f.name.clone()).unwrap_or_default();
            return Err(Error::RecursionLimit { function, limit: config.max_stack_depth });
        }
        if depth > 0 {
            counters.stack.check(|| graph_name(p, gi), depth)?;
        }
        counters.max_depth = counters.max_depth.max(depth);
        let trips = Trips::new(config, mask.len());
        let mut act = Activation { exec: self, regs, trips, gi, depth, config };
        run_blocks(&mut act, p, &self.cache, gi, 0, mask, config, counters)
    }
}

/// One function activation: its variable environment and trip counts.
struct Activation<'a> {
    exec: &'a Executor,
    regs: &'a mut [Option<Tensor>],
    trips: Option<Trips>,
    gi: usize,
    depth: usize,
    config: &'a ExecConfig,
}

impl Machine for Activation<'_> {
    fn regs(&mut self) -> &mut [Option<Tensor>] {
        self.regs
    }

    fn jump<I: IntoIterator<Item = usize>>(
        &mut self,
        threads: impl FnOnce() -> I,
        from: usize,
        to: usize,
    ) -> Result<()> {
        let p = &self.exec.program;
        Trips::jump(&mut self.trips, threads, from, to, || graph_name(p, self.gi))
    }

    fn block_at(&self, pc: usize) -> String {
        let p = &self.exec.program;
        let g = p.graphs().nth(self.gi);
        let block = g.and_then(|g| g.blocks.get(pc)).map_or(String::new(), |b| b.name.clone());
        block_at(&graph_name(p, self.gi), &block)
    }

    fn entered(&self, pc: usize) -> Option<&str> {
        let f = self.gi.checked_sub(1)?;
        (pc == 0).then(|| self.exec.program.functions.get(f).map(|f| f.name.as_str())).flatten()
    }

    /// A call runs the callee by a recursive interpretation for the threads active here (the
    /// block's rows: compacted in gather mode) in a fresh variable environment.
    fn step(&mut self, step: &Step, run: &mut BlockRun<'_>, active: &Mask, counters: &mut RunCounters) -> Result<()> {
        let p = &self.exec.program;
        let Step::Call { function, inputs, outputs } = step else {
            return Err(Error::InvalidArgument(
                "autobatch stackless: push/pop found: run the program before lowering".into(),
            ));
        };
        let callee = p.function(*function)?;
        let mut callee_regs: Vec<Option<Tensor>> = vec![None; p.var_defs.len()];
        for (prm, a) in callee.params.iter().zip(inputs) {
            let t = run.read(self.regs, *a)?;
            if p.alloc(*prm) != VariableAllocation::Null {
                callee_regs[prm.0] = Some(t);
            }
        }
        let callee_mask = match run.layout() {
            Layout::Masked => active.clone(),
            _ => Mask::all(run.width()),
        };
        self.exec.interpret(function.0 + 1, &mut callee_regs, callee_mask, self.depth + 1, self.config, counters)?;
        for (o, r) in outputs.iter().zip(&callee.results) {
            let t = callee_regs[r.0].take().ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "autobatch: function '{}' returned without writing its result '{}'",
                    callee.name,
                    p.var_name(*r)
                ))
            })?;
            run.write(*o, t);
        }
        Ok(())
    }

    fn lowered_terminator(
        &mut self,
        _: &Terminator,
        _: &[usize],
        _: Mask,
        _: &mut WaitQueue,
        _: &mut RunCounters,
    ) -> Result<()> {
        Err(Error::InvalidArgument(
            "autobatch stackless: lowered terminator found: run the program before lowering".into(),
        ))
    }
}

/// Run `program` on `inputs` (each `[batch] + event shape`) with default options.
///
/// ```
/// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, stackless};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut pb = ProgramBuilder::new();
/// let parity = pb.function("parity", &["n"], &["odd"], |f| {
///     let n = f.param(0)?;
///     let r = f.prim("odd", &[n], |t| Ok(t[0].array::<i64>()?.mapv(|v| v % 2 != 0).into()))?;
///     f.ret(&[r])
/// })?;
/// let program = pb.build(parity, &[VarType::scalar(DType::I64)])?;
/// let out = stackless::execute(&program, &[Tensor::vec1(&[3i64, 4])])?;
/// assert_eq!(out[0].to_vec::<bool>()?, [true, false]);
/// # Ok(())
/// # }
/// ```
pub fn execute(program: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    Ok(execute_with(program, inputs, &ExecConfig::default())?.outputs)
}

/// Run with options, returning outputs and statistics.
///
/// ```
/// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, stackless};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut pb = ProgramBuilder::new();
/// let collatz = pb.declare("steps", &["n"], &["s"])?;
/// pb.define(collatz, |f| {
///     let n = f.param(0)?;
///     let one = f.le(n, 1i64)?;
///     f.if_else(one, |f| {
///         let z = f.constant("zero", 0i64)?;
///         f.ret(&[z])
///     }, |f| {
///         let h = f.div(n, 2i64)?; // (a halving sequence: n, n/2, ..., 1)
///         let s = f.call(collatz, &[h])?;
///         let s = f.add(s[0], 1i64)?;
///         f.ret(&[s])
///     })
/// })?;
/// let program = pb.build(collatz, &[VarType::scalar(DType::I64)])?;
/// let out = stackless::execute_with(&program, &[Tensor::vec1(&[8i64, 1])], &ExecConfig::default())?;
/// assert_eq!(out.outputs[0].to_vec::<i64>()?, [3, 0]);
/// assert_eq!(out.stats.calls("steps"), 4 + 1); // 8, 4, 2, 1 and 1
/// # Ok(())
/// # }
/// ```
pub fn execute_with(program: &Program, inputs: &[Tensor], config: &ExecConfig) -> Result<Execution> {
    Executor::new(program)?.run(inputs, config)
}
