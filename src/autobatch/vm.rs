//! The full auto-batching VM: runs a [lowered](super::lower) program with one register per
//! variable, one per-thread stack per Full variable, and a per-thread stack of return
//! addresses (the Full `pc`).
//!
//! Scheduling is "lowest pc first": a wait queue maps each pc to the threads waiting
//! there (OR-coalesced); each step dequeues the smallest pc and runs its block for all
//! those threads at once, whatever their recursion depth. So threads at different depths
//! of the same recursion share every primop run — what the stackless executor cannot do.
//!
//! Storage: a Full variable's top of stack is its register (the "cached top"); `push`
//! copies the register rows of the active threads to `stack[sp[t], t]` and increments their
//! stack pointers, `pop` does the reverse. A stack is `[depth, batch] + event shape`,
//! allocated lazily and grown by doubling up to `max_stack_depth`; a push beyond it (or a
//! `PushGoto` beyond it on the pc stack) is `Error::RecursionLimit` naming the function —
//! never a panic or an out-of-bounds write. Every stack is allocated fallibly: a batch too
//! large for memory is `Error::OutOfMemory`, never an abort. (A variable is saved at most
//! once per frame and main saves nothing, so a variable stack never fills before the pc
//! stack: a call one level too deep names the callee, as the other interpreters do.) With
//! `max_iterations`, each thread's backward-jump count of the current activation is saved
//! beside its return address at a call and restored at the return. Per-thread correctness: every instruction
//! touches only the rows of the threads running it, and lowering keeps every call
//! stack-neutral, so each thread sees exactly its sequential semantics.

use super::lower::{check_runnable, lower_with_entries};
use super::mask::{Mask, WaitQueue};
use super::primop::BlockRun;
use super::program::{Program, Terminator, Var};
use super::run_loop::{Machine, run_blocks, run_program};
use super::segment::{PlanCache, Step};
use super::{ExecConfig, Execution, RunCounters, Trips, block_at, rows};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The per-thread stack of one Full variable.
struct VarStack {
    store: Tensor,
    depth: usize,
    sp: Vec<usize>,
}

/// Machine state of one run.
struct State<'a> {
    prog: &'a Program,
    vm: &'a Vm,
    batch: usize,
    max_depth: usize,
    regs: Vec<Option<Tensor>>,
    stacks: Vec<Option<VarStack>>,
    ret: Vec<usize>,
    ret_sp: Vec<usize>,
    /// Backward jumps of each thread's current activation (with `max_iterations`), and the
    /// callers' counts, laid out like `ret`.
    trips: Option<Trips>,
    ret_trips: Vec<u64>,
}

impl State<'_> {
    fn overflow(&self, what: String) -> Error {
        Error::RecursionLimit { function: what, limit: self.max_depth }
    }

    fn push(&mut self, v: Var, idx: &[usize]) -> Result<()> {
        let ty = self.prog.var_type(v)?.clone();
        let reg = self.regs[v.0].as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "autobatch vm: saving variable '{}' before it is written",
                self.prog.var_name(v)
            ))
        })?;
        let batch = self.batch;
        let st = match &mut self.stacks[v.0] {
            Some(st) => st,
            empty => empty.insert(VarStack { store: Tensor::zeros(ty.dtype, &[0])?, depth: 0, sp: vec![0; batch] }),
        };
        let need = idx.iter().map(|&t| st.sp[t] + 1).max().unwrap_or(0);
        if need > self.max_depth {
            let name = self.prog.var_name(v);
            return Err(Error::RecursionLimit {
                function: format!("(saving variable '{name}': its per-thread stack is full)"),
                limit: self.max_depth,
            });
        }
        if need > st.depth {
            let new_depth = (st.depth * 2).max(need).max(4).min(self.max_depth);
            st.store = if st.depth == 0 {
                let mut shape = vec![new_depth];
                shape.extend(ty.batched_shape(batch));
                Tensor::full_for("autobatch vm: stack", ty.dtype, &shape, 0.0)?
            } else {
                rows::stack_grow(&st.store, &ty, batch, new_depth)?
            };
            st.depth = new_depth;
        }
        let moves: Vec<(usize, usize)> = idx.iter().map(|&t| (t, st.sp[t])).collect();
        rows::stack_push(&mut st.store, reg, &moves)?;
        for &t in idx {
            st.sp[t] += 1;
        }
        Ok(())
    }

    fn pop(&mut self, v: Var, idx: &[usize]) -> Result<()> {
        let name = self.prog.var_name(v);
        let underflow = || Error::InvalidArgument(format!("autobatch vm: stack of '{name}' underflows"));
        let st = self.stacks[v.0].as_mut().ok_or_else(underflow)?;
        let reg = self.regs[v.0].as_mut().ok_or_else(underflow)?;
        let mut moves = Vec::with_capacity(idx.len());
        for &t in idx {
            let d = st.sp[t].checked_sub(1).ok_or_else(underflow)?;
            moves.push((t, d));
        }
        rows::stack_pop(reg, &st.store, &moves)?;
        for (t, d) in moves {
            st.sp[t] = d;
        }
        Ok(())
    }

    fn push_return(&mut self, idx: &[usize], return_to: usize, callee: &str) -> Result<usize> {
        let batch = self.batch;
        let mut deepest = 0;
        for &t in idx {
            let sp = self.ret_sp[t];
            if sp >= self.max_depth {
                return Err(self.overflow(callee.to_string()));
            }
            let at = sp * batch + t;
            if at >= self.ret.len() {
                let new_depth = ((self.ret.len() / batch.max(1)) * 2).max(sp + 1).max(4).min(self.max_depth);
                let len = crate::kernels::alloc::checked_len("autobatch vm: pc stack", &[new_depth, batch])?;
                let mut grown = crate::kernels::alloc::try_vec("autobatch vm: pc stack", len)?;
                grown.extend_from_slice(&self.ret);
                grown.resize(len, 0);
                self.ret = grown;
            }
            self.ret[at] = return_to;
            if let Some(tr) = self.trips.as_mut() {
                if at >= self.ret_trips.len() {
                    self.ret_trips.resize(self.ret.len(), 0);
                }
                self.ret_trips[at] = tr.enter(t);
            }
            self.ret_sp[t] = sp + 1;
            deepest = deepest.max(sp + 1);
        }
        Ok(deepest)
    }

    fn pop_returns(&mut self, idx: &[usize], queue: &mut WaitQueue) -> Result<()> {
        let mut groups: Vec<(usize, Mask)> = Vec::new();
        for &t in idx {
            let sp = self.ret_sp[t]
                .checked_sub(1)
                .ok_or_else(|| Error::InvalidArgument("autobatch vm: return with an empty pc stack".into()))?;
            self.ret_sp[t] = sp;
            let to = self.ret[sp * self.batch + t];
            if let Some(tr) = self.trips.as_mut() {
                tr.leave(t, self.ret_trips[sp * self.batch + t]);
            }
            match groups.iter_mut().find(|(pc, _)| *pc == to) {
                Some((_, m)) => m.set(t),
                None => {
                    let mut m = Mask::none(self.batch);
                    m.set(t);
                    groups.push((to, m));
                }
            }
        }
        for (pc, m) in groups {
            queue.enqueue(pc, m);
        }
        Ok(())
    }
}

/// The full VM for one program: the lowered program and its block-plan cache.
pub struct Vm {
    lowered: Program,
    entries: Vec<Option<String>>,
    /// Per pc, the function whose code it is ("main" before the first function).
    functions: Vec<String>,
    cache: PlanCache,
}

impl Vm {
    /// Lower a built program and prepare to run it.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let half = pb.function("half", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.div(x, 2.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let machine = vm::Vm::new(&pb.build(half, &[VarType::scalar(DType::F64)])?)?; // lowers once
    /// for x in [1.0f64, 8.0] {
    ///     let out = machine.run(&[Tensor::vec1(&[x])], &ExecConfig::default())?;
    ///     assert_eq!(out.outputs[0].to_vec::<f64>()?, [x / 2.0]);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(program: &Program) -> Result<Vm> {
        let (lowered, entries) = lower_with_entries(program)?;
        check_runnable(&lowered, true)?;
        let cache = PlanCache::new(&lowered, false);
        let mut cur = "main".to_string();
        let functions = entries
            .iter()
            .map(|e| {
                if let Some(name) = e {
                    cur.clone_from(name);
                }
                cur.clone()
            })
            .collect();
        Ok(Vm { lowered, entries, functions, cache })
    }

    /// The lowered program this VM runs.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let id = pb.function("id", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     f.ret(&[x])
    /// })?;
    /// let program = pb.build(id, &[VarType::scalar(DType::I64)])?;
    /// let machine = vm::Vm::new(&program)?;
    /// assert!(program.has_calls()); // main calls id
    /// assert!(!machine.lowered().has_calls()); // calls became stack pushes, pops and jumps
    /// # Ok(())
    /// # }
    /// ```
    pub fn lowered(&self) -> &Program {
        &self.lowered
    }

    /// Run on inputs of shape `[batch] + event shape` each.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let clip = pb.function("clip", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.minimum(x, 1.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let machine = vm::Vm::new(&pb.build(clip, &[VarType::scalar(DType::F64)])?)?;
    /// let out = machine.run(&[Tensor::vec1(&[0.5f64, 2.0])], &ExecConfig::default())?;
    /// assert_eq!(out.outputs[0].to_vec::<f64>()?, [0.5, 1.0]);
    /// assert!(out.stats.blocks() > 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(&self, inputs: &[Tensor], config: &ExecConfig) -> Result<Execution> {
        let p = &self.lowered;
        run_program(p, &self.cache, inputs, config, |regs, batch, counters| {
            let mut st = State {
                prog: p,
                vm: self,
                batch,
                max_depth: config.max_stack_depth,
                stacks: (0..regs.len()).map(|_| None).collect(),
                regs,
                ret: vec![],
                ret_sp: vec![0; batch],
                trips: Trips::new(config, batch),
                ret_trips: vec![],
            };
            run_blocks(&mut st, p, &self.cache, 0, 0, Mask::all(batch), config, counters)?;
            Ok(st.regs)
        })
    }
}

impl Machine for State<'_> {
    fn regs(&mut self) -> &mut [Option<Tensor>] {
        &mut self.regs
    }

    fn jump<I: IntoIterator<Item = usize>>(
        &mut self,
        threads: impl FnOnce() -> I,
        from: usize,
        to: usize,
    ) -> Result<()> {
        let functions = &self.vm.functions;
        Trips::jump(&mut self.trips, threads, from, to, || functions.get(from).cloned().unwrap_or_default())
    }

    fn block_at(&self, pc: usize) -> String {
        block_at("", self.prog.graph.blocks.get(pc).map_or("", |b| b.name.as_str()))
    }

    fn entered(&self, pc: usize) -> Option<&str> {
        self.vm.entries.get(pc).and_then(|e| e.as_deref())
    }

    /// Pushes and pops move the active threads' rows between registers and stacks.
    fn step(&mut self, step: &Step, run: &mut BlockRun<'_>, _: &Mask, _: &mut RunCounters) -> Result<()> {
        match step {
            Step::Push(vars) => {
                for v in vars {
                    run.flush_var(&mut self.regs, *v)?;
                    self.push(*v, run.indices())?;
                }
            }
            Step::Pop(vars) => {
                for v in vars {
                    run.flush_var(&mut self.regs, *v)?;
                    self.pop(*v, run.indices())?;
                }
            }
            _ => return Err(Error::InvalidArgument("autobatch vm: unlowered call found".into())),
        }
        Ok(())
    }

    /// A call pushes the return address and jumps to the callee's entry; a return pops it.
    fn lowered_terminator(
        &mut self,
        t: &Terminator,
        idx: &[usize],
        active: Mask,
        queue: &mut WaitQueue,
        counters: &mut RunCounters,
    ) -> Result<()> {
        match t {
            Terminator::PushGoto { return_to, target } => {
                let d = self.push_return(idx, return_to.0, &self.vm.callee(target.0))?;
                counters.max_depth = counters.max_depth.max(d);
                queue.enqueue(target.0, active);
                Ok(())
            }
            Terminator::IndirectGoto => self.pop_returns(idx, queue),
            _ => Ok(()),
        }
    }
}

impl Vm {
    /// The name of the function whose entry block is at `pc`.
    fn callee(&self, pc: usize) -> String {
        self.entries.get(pc).cloned().flatten().unwrap_or_default()
    }
}

/// Lower and run `program` on `inputs` (each `[batch] + event shape`) with default options.
///
/// ```
/// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, vm};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// // pow2(n) = n == 0 ? 1 : 2 * pow2(n - 1), threads at different recursion depths
/// let mut pb = ProgramBuilder::new();
/// let pow2 = pb.declare("pow2", &["n"], &["p"])?;
/// pb.define(pow2, |f| {
///     let n = f.param(0)?;
///     let base = f.eq(n, 0i64)?;
///     f.if_else(base, |f| {
///         let one = f.constant("one", 1i64)?;
///         f.ret(&[one])
///     }, |f| {
///         let m = f.sub(n, 1i64)?;
///         let p = f.call(pow2, &[m])?;
///         let p = f.mul(p[0], 2i64)?;
///         f.ret(&[p])
///     })
/// })?;
/// let program = pb.build(pow2, &[VarType::scalar(DType::I64)])?;
/// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[0i64, 3, 10])])?[0].to_vec::<i64>()?, [1, 8, 1024]);
/// # Ok(())
/// # }
/// ```
pub fn execute(program: &Program, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    Ok(execute_with(program, inputs, &ExecConfig::default())?.outputs)
}

/// Lower and run with options, returning outputs and statistics.
///
/// ```
/// use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, vm};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut pb = ProgramBuilder::new();
/// let f = pb.function("f", &["x"], &["y"], |f| {
///     let x = f.param(0)?;
///     let y = f.add(x, x)?;
///     f.ret(&[y])
/// })?;
/// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
/// let token = CancelToken::new();
/// token.cancel();
/// let config = ExecConfig { cancel: Some(token), ..ExecConfig::default() };
/// let e = vm::execute_with(&program, &[Tensor::vec1(&[1i64])], &config).unwrap_err();
/// assert!(matches!(e.root(), Error::Cancelled { .. }));
/// # Ok(())
/// # }
/// ```
pub fn execute_with(program: &Program, inputs: &[Tensor], config: &ExecConfig) -> Result<Execution> {
    Vm::new(program)?.run(inputs, config)
}
