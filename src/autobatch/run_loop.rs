//! The block loop the two batching interpreters share ([`super::stackless`] runs it once per
//! function activation, [`super::vm`] once per run of the lowered program).
//!
//! From a start block and its active threads: check the interrupt, count the threads as
//! calls when the block is a function's entry, run the block's plan for the active threads (primops here; calls, pushes and pops by the [`Machine`]), then
//! follow its terminator — `Goto` enqueues the target with the active mask, `Branch` splits
//! the mask by the condition and enqueues both parts (both counting backward jumps against
//! `max_iterations`), `Return` retires the threads, and the lowered terminators (`PushGoto`,
//! `IndirectGoto`) go to the machine. Then dequeue the smallest waiting pc (OR-coalesced
//! masks: re-convergence) and repeat until the queue is empty.
//!
//! Invariants: the masks of one loop are disjoint, so each thread's rows are touched only
//! while it is active and it follows exactly its sequential program; empty masks are never
//! enqueued; the order of block executions depends only on the program and the data, so the
//! two interpreters built on this loop agree bit for bit with what they computed before it
//! was shared.

use super::mask::{Mask, WaitQueue};
use super::primop::BlockRun;
use super::program::{Program, Terminator};
use super::segment::{PlanCache, Step};
use super::{ExecConfig, Execution, RunCounters, check_inputs, collect_outputs, empty_outputs, rows};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// What differs between the interpreters: where registers and trip counts live, how calls
/// and the lowered stack operations run, and how a pc is named in errors.
pub(crate) trait Machine {
    /// The register file of the running code (one slot per program variable).
    fn regs(&mut self) -> &mut [Option<Tensor>];
    /// `Trips::jump` on the running activation(s)' counts, naming the function whose code
    /// block `from` is.
    fn jump<I: IntoIterator<Item = usize>>(
        &mut self,
        threads: impl FnOnce() -> I,
        from: usize,
        to: usize,
    ) -> Result<()>;
    /// Where block `pc` is (deadline and cancellation errors).
    fn block_at(&self, pc: usize) -> String;
    /// The function whose entry block `pc` of the running graph is, if it is one (the
    /// threads running it start an activation: the call counters).
    fn entered(&self, pc: usize) -> Option<&str>;
    /// Run a `Call`, `Push` or `Pop` step of a block running for `active`.
    fn step(&mut self, step: &Step, run: &mut BlockRun<'_>, active: &Mask, counters: &mut RunCounters) -> Result<()>;
    /// Follow a `PushGoto` or `IndirectGoto` terminator for the threads `idx` (mask `active`).
    fn lowered_terminator(
        &mut self,
        t: &Terminator,
        idx: &[usize],
        active: Mask,
        queue: &mut WaitQueue,
        counters: &mut RunCounters,
    ) -> Result<()>;
}

/// One run of `p` on `inputs` (each `[batch] + event shape`; on the worker pool when the batch
/// is large enough to pay for the hand-off): check the inputs, answer an empty batch, else give
/// `interpret` the registers holding the inputs and the batch size, and read the outputs from
/// the registers it returns.
pub(crate) fn run_program(
    p: &Program,
    cache: &PlanCache,
    inputs: &[Tensor],
    config: &ExecConfig,
    interpret: impl FnOnce(Vec<Option<Tensor>>, usize, &mut RunCounters) -> Result<Vec<Option<Tensor>>> + Send,
) -> Result<Execution> {
    crate::exec::workers::run_batched(inputs, || {
        let batch = check_inputs(p, inputs)?;
        let mut counters = RunCounters::new(cache.names().len(), config);
        if batch == 0 {
            return Ok(Execution { outputs: empty_outputs(p)?, stats: counters.into_stats(cache.names()) });
        }
        let mut regs: Vec<Option<Tensor>> = vec![None; p.var_defs.len()];
        for (v, t) in p.vars_in.iter().zip(inputs) {
            regs[v.0] = Some(t.clone());
        }
        let regs = interpret(regs, batch, &mut counters)?;
        let outputs = collect_outputs(p, &regs)?;
        Ok(Execution { outputs, stats: counters.into_stats(cache.names()) })
    })
}

/// Run graph `gi` of `p` (0 = main, f + 1 = function f) from block `pc` for the threads in
/// `active` until every thread has returned (see the module docs).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_blocks<M: Machine>(
    m: &mut M,
    p: &Program,
    cache: &PlanCache,
    gi: usize,
    mut pc: usize,
    mut active: Mask,
    config: &ExecConfig,
    counters: &mut RunCounters,
) -> Result<()> {
    let mut queue = WaitQueue::default();
    let mut locals = Default::default();
    loop {
        counters.check_interrupt(|| m.block_at(pc))?;
        let plan = cache.get(p, gi, pc, &mut counters.plans_compiled)?;
        if let Some(f) = m.entered(pc) {
            counters.count_calls(f, active.count());
        }
        let mut run = BlockRun::new(p, &active, config, &mut locals);
        counters.count_layout(run.layout());
        for step in &plan.steps {
            match step {
                Step::Prim { op, out_types, counter } => run.run_prim(m.regs(), op, out_types, *counter, counters)?,
                _ => m.step(step, &mut run, &active, counters)?,
            }
        }
        let idx = run.finish(m.regs())?;
        match &plan.terminator {
            Terminator::Goto(t) => {
                m.jump(|| idx.iter().copied(), pc, t.0)?;
                queue.enqueue(t.0, active)
            }
            Terminator::Branch { cond, if_true, if_false } => {
                let c = m.regs().get(cond.0).and_then(|c| c.as_ref()).ok_or_else(|| {
                    Error::InvalidArgument(format!("autobatch: branch condition '{}' is unset", p.var_name(*cond)))
                })?;
                let bools = rows::bools(c)?;
                let (yes, no) = Mask::split(active.len(), &idx, &bools);
                m.jump(|| yes.indices(), pc, if_true.0)?;
                m.jump(|| no.indices(), pc, if_false.0)?;
                queue.enqueue(if_true.0, yes);
                queue.enqueue(if_false.0, no);
            }
            Terminator::Return => {}
            t => m.lowered_terminator(t, &idx, active, &mut queue, counters)?,
        }
        match queue.pop_min() {
            Some((next, mask)) => {
                pc = next;
                active = mask;
            }
            None => return Ok(()),
        }
    }
}
