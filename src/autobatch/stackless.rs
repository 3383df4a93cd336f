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
use super::primop::{BlockRun, Layout, Locals};
use super::program::{Program, Terminator, VariableAllocation};
use super::segment::{PlanCache, Step};
use super::{
    ExecConfig, Execution, RunCounters, Trips, block_at, check_inputs, collect_outputs, empty_outputs, graph_name, rows,
};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A stackless executor for one program, holding the block-plan cache.
pub struct Executor {
    program: Program,
    cache: PlanCache,
}

impl Executor {
    /// An executor for a built (typed and allocated) program that still has its calls.
    pub fn new(program: &Program) -> Result<Executor> {
        super::lower::check_runnable(program, false)?;
        Ok(Executor { program: program.clone(), cache: PlanCache::new(program, true) })
    }

    /// Run on inputs of shape `[batch] + event shape` each.
    pub fn run(&self, inputs: &[Tensor], config: &ExecConfig) -> Result<Execution> {
        crate::exec::workers::run_batched(inputs, || self.run_here(inputs, config))
    }

    fn run_here(&self, inputs: &[Tensor], config: &ExecConfig) -> Result<Execution> {
        let p = &self.program;
        let batch = check_inputs(p, inputs)?;
        let mut counters = RunCounters::new(self.cache.names().len(), config);
        if batch == 0 {
            return Ok(Execution { outputs: empty_outputs(p)?, stats: counters.into_stats(self.cache.names()) });
        }
        let mut regs: Vec<Option<Tensor>> = vec![None; p.var_defs.len()];
        for (v, t) in p.vars_in.iter().zip(inputs) {
            regs[v.0] = Some(t.clone());
        }
        self.interpret(0, &mut regs, Mask::all(batch), 0, config, &mut counters)?;
        let outputs = collect_outputs(p, &regs)?;
        Ok(Execution { outputs, stats: counters.into_stats(self.cache.names()) })
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
        let mut queue = WaitQueue::default();
        let mut locals = Locals::default();
        let mut trips = Trips::new(config, mask.len());
        let (mut pc, mut active) = (0usize, mask);
        loop {
            counters.check_interrupt(|| {
                let g = p.graphs().nth(gi);
                let block = g.and_then(|g| g.blocks.get(pc)).map_or(String::new(), |b| b.name.clone());
                block_at(&graph_name(p, gi), &block)
            })?;
            let plan = self.cache.get(p, gi, pc, &mut counters.plans_compiled)?;
            let mut run = BlockRun::new(p, &active, config, &mut locals);
            counters.count_layout(run.layout());
            for step in &plan.steps {
                match step {
                    Step::Prim { op, out_types, counter } => run.run_prim(regs, op, out_types, *counter, counters)?,
                    Step::Call { function, inputs, outputs } => {
                        let callee = p.function(*function)?;
                        let mut callee_regs: Vec<Option<Tensor>> = vec![None; p.var_defs.len()];
                        for (prm, a) in callee.params.iter().zip(inputs) {
                            let t = run.read(regs, *a)?;
                            if p.alloc(*prm) != VariableAllocation::Null {
                                callee_regs[prm.0] = Some(t);
                            }
                        }
                        let callee_mask = match run.layout() {
                            Layout::Masked => active.clone(),
                            _ => Mask::all(run.width()),
                        };
                        self.interpret(function.0 + 1, &mut callee_regs, callee_mask, depth + 1, config, counters)?;
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
                    }
                    Step::Push(_) | Step::Pop(_) => {
                        return Err(Error::InvalidArgument(
                            "autobatch stackless: push/pop found: run the program before lowering".into(),
                        ));
                    }
                }
            }
            let idx = run.finish(regs)?;
            let function = || graph_name(p, gi);
            match &plan.terminator {
                Terminator::Goto(t) => {
                    Trips::jump(&mut trips, || idx.iter().copied(), pc, t.0, function)?;
                    queue.enqueue(t.0, active)
                }
                Terminator::Branch { cond, if_true, if_false } => {
                    let c = regs.get(cond.0).and_then(|c| c.as_ref()).ok_or_else(|| {
                        Error::InvalidArgument(format!("autobatch: branch condition '{}' is unset", p.var_name(*cond)))
                    })?;
                    let bools = rows::bools(c)?;
                    let (yes, no) = Mask::split(active.len(), &idx, &bools);
                    Trips::jump(&mut trips, || yes.indices(), pc, if_true.0, function)?;
                    Trips::jump(&mut trips, || no.indices(), pc, if_false.0, function)?;
                    queue.enqueue(if_true.0, yes);
                    queue.enqueue(if_false.0, no);
                }
                Terminator::Return => {}
                Terminator::PushGoto { .. } | Terminator::IndirectGoto => {
                    return Err(Error::InvalidArgument(
                        "autobatch stackless: lowered terminator found: run the program before lowering".into(),
                    ));
                }
            }
            match queue.pop_min() {
                Some((next, m)) => {
                    pc = next;
                    active = m;
                }
                None => return Ok(()),
            }
        }
    }
}

/// Run `program` on `inputs` (each `[batch] + event shape`) with default options.
pub fn execute(program: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    Ok(execute_with(program, inputs, &ExecConfig::default())?.outputs)
}

/// Run with options, returning outputs and statistics.
pub fn execute_with(program: &Program, inputs: &[Tensor], config: &ExecConfig) -> Result<Execution> {
    Executor::new(program)?.run(inputs, config)
}
