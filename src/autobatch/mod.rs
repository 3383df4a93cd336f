//! The auto-batching interpreter: recursive, control-flow-heavy programs run for a whole
//! batch of logical threads at once, batching every primitive operation across the
//! threads that reach it together (the design of TensorFlow Probability's
//! `auto_batching`, after Bradbury & Fu, "Automatic Batching as a Compiler Pass in
//! PyTorch").
//!
//! Pipeline:
//! 1. Write a [`Program`] with the [`ProgramBuilder`] DSL (functions, parameters, primops,
//!    constants, if/else, while, calls — mutual recursion via declare-then-define — and
//!    return). [`ProgramBuilder::build`] validates it, infers every variable's type
//!    (to a fixpoint through recursion), checks definite assignment and infers
//!    each variable's [`VariableAllocation`] by liveness.
//! 2. Run it with one of three interpreters, which agree exactly:
//!    - [`stackless::execute`]: one recursive interpretation per call with an active-thread
//!      mask; threads re-converge only within one activation;
//!    - [`vm::execute`]: the program is [`lower`](lower::lower)ed to explicit per-variable
//!      stacks, `PushGoto` and `IndirectGoto`, and run "lowest pc first", so threads at
//!      DIFFERENT recursion depths share every primop run;
//!    - [`reference::execute`]: one thread at a time, no batching (the oracle and the
//!      "unbatched loop" baseline).
//!
//!    The two batching interpreters share one block loop (`run_loop`: run a block for its
//!    active threads, follow its terminator, dequeue the lowest waiting pc); what differs —
//!    calls by recursive interpretation vs. pushes, pops and return addresses — is each
//!    one's `Machine`.
//!
//! Layering: this module depends on `ir`, `ops`, `exec`, `kernels` and `tensor` only. pfor's
//! hand-off of recursive calls to the VM lives above it, in [`crate::vectorize::handoff`];
//! nothing here imports the vectorizer or the converters (a test checks it).
//!
//! Invariants: every logical thread follows exactly the sequential semantics of the
//! program (the interpreters only choose which threads run together); inputs and outputs
//! are `[batch] + event shape`; every failure (bad program, type mismatch, stack overflow,
//! a primop returning the wrong shape) is an `Err`, never a panic.
//!
//! Limits, identical in the three interpreters ([`ExecConfig`]): a self tail call is a
//! jump in all three (it never deepens any stack); a call nested deeper than
//! `max_stack_depth` is `Error::RecursionLimit` naming the callee; with `max_iterations`,
//! a thread making more than that many backward jumps (loop trips, self tail calls) in
//! one function activation is `Error::IterationLimit` naming the function; `deadline` and
//! `cancel` are checked before every block execution. The stackless and reference
//! interpreters recurse on the native stack: a level the thread's stack cannot hold is
//! `Error::StackExhausted` (see `exec::limits`), never a stack overflow; the VM's stacks
//! are heap tensors.
//!
//! Primops run in one of two modes per block execution ([`ExecConfig::gather_threshold`],
//! default 0.75): *masked* (compute every row, then `where` into the registers) when at
//! least that fraction of the batch is active, *gather/scatter* (compute only the active rows)
//! otherwise; when every thread is active, values replace registers without a `where`.

mod alloc;
mod arith;
pub mod builder;
pub mod lower;
mod mask;
pub mod primop;
pub mod program;
pub mod reference;
mod rows;
mod run_loop;
mod segment;
pub mod stackless;
mod types;
pub mod vm;

use std::collections::BTreeMap;
use std::time::Instant;

pub use arith::Operand;
pub use builder::{FunctionBuilder, ProgramBuilder};
pub use primop::{PrimFn, PrimKind, PrimOp};
pub use program::{
    Block, BlockId, ControlFlowGraph, FuncId, FunctionCallOp, FunctionDef, Instruction, PopOp, Program, PushOp,
    Terminator, Var, VarDef, VarType, VariableAllocation,
};

use crate::error::{Error, Result};
use crate::exec::CancelToken;
use crate::exec::limits::{Interrupt, StackGuard};
use crate::ops::FunctionRunner;
use crate::tensor::Tensor;

/// Which primop execution mode the interpreters use for partially active blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecMode {
    /// Gather/scatter below [`ExecConfig::gather_threshold`] active fraction, masked above.
    Auto,
    /// Always masked: compute all rows, `where` into registers.
    Masked,
    /// Always gather/scatter: compute only the active rows.
    Gather,
}

/// Options of the interpreters.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// Maximum call depth (stackless and reference: nested interpretations; VM: the
    /// capacity of every per-thread stack). Exceeding it is `Error::RecursionLimit`.
    /// Default 256. Self tail calls run as jumps and do not count. The stackless and
    /// reference interpreters recurse on the Rust stack (a few KiB per level): a depth the
    /// thread's stack cannot hold is `Error::StackExhausted`; the VM's stacks are heap
    /// tensors grown on demand.
    pub max_stack_depth: usize,
    /// Mode selection.
    pub mode: ExecMode,
    /// In [`ExecMode::Auto`], a block runs in gather/scatter mode when fewer than this
    /// fraction of the batch's threads are active, masked otherwise. Default 0.75: gathering
    /// `k` active rows and scattering the results costs about two row copies per variable,
    /// while masked mode computes all `n` rows and copies `k` rows back per written variable;
    /// measured on W6 (scalar primops) and W7 (a heavy leaf), gather mode is as fast or
    /// faster up to ~75-80% active, and heavy primops favour it even more.
    pub gather_threshold: f64,
    /// Per thread, at most this many backward jumps (loop trips and self tail calls) in one
    /// function activation; one more is `Error::IterationLimit` naming the function.
    /// Default `None`: no cap (a non-terminating program then stops only at its deadline
    /// or cancellation).
    pub max_iterations: Option<u64>,
    /// Stop with `Error::DeadlineExceeded` once this instant has passed (checked before
    /// every block execution).
    pub deadline: Option<Instant>,
    /// Stop with `Error::Cancelled` once this token is cancelled (checked likewise).
    pub cancel: Option<CancelToken>,
    /// How graph-function primops ([`PrimKind::Function`]) run: with the options of the
    /// session or interpreter that runs the program. `None`: [`crate::exec::run_function`]
    /// (the built-in options). Outside a session, `Some(options.function_runner())`
    /// ([`ExecOptions::function_runner`](crate::ExecOptions::function_runner)); pfor's
    /// hand-off sets the session's (`EvalCtx::function_runner`).
    pub functions: Option<FunctionRunner>,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            max_stack_depth: 256,
            mode: ExecMode::Auto,
            gather_threshold: 0.75,
            max_iterations: None,
            deadline: None,
            cancel: None,
            functions: None,
        }
    }
}

impl ExecConfig {
    /// The run's interrupt check (deadline and token), if any.
    pub(crate) fn interrupt(&self) -> Option<Interrupt> {
        Interrupt::new(self.deadline, self.cancel.clone())
    }
}

/// Per-thread backward-jump counts of one function activation ([`ExecConfig::max_iterations`]);
/// `None` without a cap, so counting costs nothing then.
pub(crate) struct Trips {
    counts: Vec<u64>,
    limit: u64,
}

impl Trips {
    /// Counters for `width` threads, if `config` caps iterations.
    pub(crate) fn new(config: &ExecConfig, width: usize) -> Option<Trips> {
        config.max_iterations.map(|limit| Trips { counts: vec![0; width], limit })
    }

    /// The threads `threads()` jump from block `from` to block `to` (of one function, in
    /// source or lowered numbering, which keep a function's block order): a backward jump
    /// (`to <= from`) counts one trip each; `Err(IterationLimit)` past the cap. Without a
    /// cap, neither closure runs.
    pub(crate) fn jump<I: IntoIterator<Item = usize>>(
        this: &mut Option<Trips>,
        threads: impl FnOnce() -> I,
        from: usize,
        to: usize,
        function: impl FnOnce() -> String,
    ) -> Result<()> {
        let Some(tr) = this.as_mut().filter(|_| to <= from) else { return Ok(()) };
        let mut over = false;
        for t in threads() {
            if let Some(c) = tr.counts.get_mut(t) {
                *c += 1;
                over |= *c > tr.limit;
            }
        }
        if over {
            return Err(Error::IterationLimit {
                what: format!("autobatch function '{}'", function()),
                limit: tr.limit,
            });
        }
        Ok(())
    }

    /// Thread `t`'s count, to save at a call; zeroed for the callee's activation.
    pub(crate) fn enter(&mut self, t: usize) -> u64 {
        std::mem::take(&mut self.counts[t])
    }

    /// Restore thread `t`'s count on return.
    pub(crate) fn leave(&mut self, t: usize, saved: u64) {
        self.counts[t] = saved;
    }
}

/// Where an interpreter stopped: function `function`, block `block` (the VM's lowered block
/// names already start with the function's).
pub(crate) fn block_at(function: &str, block: &str) -> String {
    if function.is_empty() { format!("at block '{block}'") } else { format!("at block '{function}.{block}'") }
}

/// The name of graph `gi` of `p` (0 = main, f + 1 = function f).
pub(crate) fn graph_name(p: &Program, gi: usize) -> String {
    match gi.checked_sub(1) {
        Some(f) => p.functions.get(f).map(|f| f.name.clone()).unwrap_or_default(),
        None => "main".to_string(),
    }
}

/// What one execution did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecStats {
    /// Batched executions per primop name (one per block run that reached the op).
    pub prim_runs: BTreeMap<String, u64>,
    /// Thread rows computed by primops (all rows in masked mode, active rows otherwise).
    pub rows_computed: u64,
    /// Block executions with every thread active.
    pub dense_blocks: u64,
    /// Block executions in masked mode.
    pub masked_blocks: u64,
    /// Block executions in gather/scatter mode.
    pub gather_blocks: u64,
    /// Deepest call nesting reached.
    pub max_depth: usize,
    /// Straight-line block plans compiled during this execution (cached across executions
    /// of one executor and across recursion depths).
    pub plans_compiled: usize,
    /// Activations per function name, summed over threads: how many (thread, call) pairs
    /// entered the function, the entry call from `main` and self tail calls included — what
    /// the sequential program's call count would be, however the run batched them.
    pub calls: BTreeMap<String, u64>,
}

impl ExecStats {
    /// Batched executions of primops named `name`.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.add(x, 1i64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// let stats = vm::execute_with(&program, &[Tensor::vec1(&[1i64, 2, 3])], &Default::default())?.stats;
    /// assert_eq!(stats.runs("add"), 1); // three threads, one batched `add`
    /// assert_eq!(stats.runs("mul"), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn runs(&self, name: &str) -> u64 {
        self.prim_runs.get(name).copied().unwrap_or(0)
    }
    /// Activations of the function named `name`, summed over threads (see the `calls` field).
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // count(n) calls itself until n == 0: n + 1 activations per thread
    /// let mut pb = ProgramBuilder::new();
    /// let count = pb.declare("count", &["n"], &["r"])?;
    /// pb.define(count, |f| {
    ///     let n = f.param(0)?;
    ///     let done = f.eq(n, 0i64)?;
    ///     f.if_else(done, |f| f.ret(&[n]), |f| {
    ///         let m = f.sub(n, 1i64)?;
    ///         let r = f.call(count, &[m])?;
    ///         f.ret(&r)
    ///     })
    /// })?;
    /// let program = pb.build(count, &[VarType::scalar(DType::I64)])?;
    /// let stats = vm::execute_with(&program, &[Tensor::vec1(&[2i64, 5])], &Default::default())?.stats;
    /// assert_eq!(stats.calls("count"), 3 + 6); // what the sequential program makes, however batched
    /// # Ok(())
    /// # }
    /// ```
    pub fn calls(&self, name: &str) -> u64 {
        self.calls.get(name).copied().unwrap_or(0)
    }
    /// Total block executions.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("sign", &["x"], &["s"], |f| {
    ///     let (x, s) = (f.param(0)?, f.result(0)?);
    ///     let neg = f.lt(x, 0i64)?;
    ///     f.if_else(neg, |f| {
    ///         f.constant_into(s, -1i64)?;
    ///         f.ret(&[s])
    ///     }, |f| {
    ///         f.constant_into(s, 1i64)?;
    ///         f.ret(&[s])
    ///     })
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// let stats = vm::execute_with(&program, &[Tensor::vec1(&[-1i64, 1])], &Default::default())?.stats;
    /// // dense, masked and gather/scatter executions together
    /// assert_eq!(stats.blocks(), stats.dense_blocks + stats.masked_blocks + stats.gather_blocks);
    /// assert!(stats.blocks() >= 3); // at least the entry block and both branches
    /// # Ok(())
    /// # }
    /// ```
    pub fn blocks(&self) -> u64 {
        self.dense_blocks + self.masked_blocks + self.gather_blocks
    }
}

/// Outputs and statistics of one execution.
#[derive(Clone, Debug)]
pub struct Execution {
    /// Output tensors, `[batch] + event shape`, in `vars_out` order.
    pub outputs: Vec<Tensor>,
    /// Statistics.
    pub stats: ExecStats,
}

/// Internal counters of one run (converted to [`ExecStats`] at the end), and its limits.
#[derive(Default)]
pub(crate) struct RunCounters {
    pub(crate) prim_counts: Vec<u64>,
    pub(crate) rows_computed: u64,
    pub(crate) layouts: [u64; 3],
    pub(crate) max_depth: usize,
    pub(crate) plans_compiled: usize,
    /// Activations per function (the `calls` field of `ExecStats`).
    pub(crate) calls: BTreeMap<String, u64>,
    /// The run's deadline and cancel token.
    pub(crate) interrupt: Option<Interrupt>,
    /// The native-stack guard of recursive interpretations.
    pub(crate) stack: StackGuard,
}

impl RunCounters {
    pub(crate) fn new(n_names: usize, config: &ExecConfig) -> RunCounters {
        RunCounters { prim_counts: vec![0; n_names], interrupt: config.interrupt(), ..Default::default() }
    }

    /// [`Interrupt::check`] before running a block (`at` says which).
    pub(crate) fn check_interrupt(&self, at: impl FnOnce() -> String) -> Result<()> {
        crate::exec::limits::check(self.interrupt.as_ref(), at)
    }
    /// `threads` threads entered function `name`.
    pub(crate) fn count_calls(&mut self, name: &str, threads: usize) {
        match self.calls.get_mut(name) {
            Some(c) => *c += threads as u64,
            None => {
                self.calls.insert(name.to_string(), threads as u64);
            }
        }
    }
    pub(crate) fn count_layout(&mut self, l: &primop::Layout) {
        let i = match l {
            primop::Layout::Dense => 0,
            primop::Layout::Masked => 1,
            primop::Layout::Compact => 2,
        };
        self.layouts[i] += 1;
    }
    pub(crate) fn into_stats(self, names: &[String]) -> ExecStats {
        let mut prim_runs = BTreeMap::new();
        for (n, c) in names.iter().zip(&self.prim_counts) {
            if *c > 0 {
                *prim_runs.entry(n.clone()).or_insert(0) += c;
            }
        }
        ExecStats {
            prim_runs,
            rows_computed: self.rows_computed,
            dense_blocks: self.layouts[0],
            masked_blocks: self.layouts[1],
            gather_blocks: self.layouts[2],
            max_depth: self.max_depth,
            plans_compiled: self.plans_compiled,
            calls: self.calls,
        }
    }
}

/// Check program inputs against `vars_in` types; returns the batch size.
pub(crate) fn check_inputs(p: &Program, inputs: &[Tensor]) -> Result<usize> {
    if inputs.len() != p.vars_in.len() {
        return Err(Error::arity("autobatch execute", p.vars_in.len().to_string(), inputs.len()));
    }
    let mut batch = None;
    for (i, (t, v)) in inputs.iter().zip(&p.vars_in).enumerate() {
        let ty = p.var_type(*v)?;
        if t.rank() == 0 {
            return Err(Error::shape("autobatch execute", format!("input {i} is a scalar; inputs need a batch axis")));
        }
        if t.dtype() != ty.dtype || t.shape()[1..] != ty.shape[..] {
            return Err(Error::FeedType {
                name: p.var_name(*v),
                expected: Box::new(ty.batched_tensor_type()),
                got_dtype: t.dtype(),
                got_shape: t.shape().to_vec(),
            });
        }
        match batch {
            None => batch = Some(t.shape()[0]),
            Some(b) if b != t.shape()[0] => {
                return Err(Error::shape(
                    "autobatch execute",
                    format!("input {i} has batch {}, input 0 has batch {b}", t.shape()[0]),
                ));
            }
            _ => {}
        }
    }
    Ok(batch.unwrap_or(0))
}

/// Outputs for an empty batch.
pub(crate) fn empty_outputs(p: &Program) -> Result<Vec<Tensor>> {
    p.vars_out.iter().map(|v| rows::zeros(p.var_type(*v)?, 0)).collect()
}

/// Read the program outputs from a register file.
pub(crate) fn collect_outputs(p: &Program, regs: &[Option<Tensor>]) -> Result<Vec<Tensor>> {
    p.vars_out
        .iter()
        .map(|v| {
            regs.get(v.0).cloned().flatten().ok_or_else(|| {
                Error::InvalidArgument(format!("autobatch: output variable '{}' was never written", p.var_name(*v)))
            })
        })
        .collect()
}
