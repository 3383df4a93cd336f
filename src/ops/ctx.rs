//! What an op needs from the executor that runs it: the [`EvalCtx`] trait. `ops` owns it
//! and `exec` implements it (`exec::ExecCtx`), so ops never name the executor.
//!
//! Invariants:
//! - every knob an op or kernel reads inside a run comes through the context
//!   ([`EvalCtx::kernel_options`], [`EvalCtx::max_while_iterations`], ...), i.e. from the
//!   session's `ExecOptions`; outside a run (`XOp::eval`) kernels take
//!   [`KernelOptions::default`]; function bodies run away from the context (auto-batching
//!   primops) take the session's options through [`EvalCtx::function_runner`];
//! - a buffer from `recycled` has stale content: the kernel that takes
//!   it overwrites every element;
//! - `check_interrupt` is one branch when the run has neither a
//!   deadline nor a cancel token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::error::Result;
use crate::ir::Function;
use crate::kernels::KernelOptions;
use crate::tensor::{DType, Element, Tensor};

/// Cancels runs from any thread: clones share one flag, and every run given the token (or
/// a clone) stops at its next check with [`Error::Cancelled`](crate::Error::Cancelled).
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    ///
    /// ```
    /// use pfor::ops::FunctionRunner;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let token = CancelToken::new();
    /// assert!(!token.is_cancelled());
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancel every run holding this token (now or later: cancellation is sticky).
    ///
    /// ```
    /// use pfor::ops::FunctionRunner;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let token = CancelToken::new();
    /// let clone = token.clone(); // e.g. moved to another thread
    /// clone.cancel();
    /// assert!(token.is_cancelled()); // clones share one flag
    /// # Ok(())
    /// # }
    /// ```
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`cancel`](Self::cancel) was called.
    ///
    /// ```
    /// use pfor::ops::FunctionRunner;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let token = CancelToken::new();
    /// token.cancel();
    /// token.cancel(); // sticky and idempotent
    /// assert!(token.is_cancelled());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Runs graph functions away from the borrow of the run that made it (on any thread), with
/// that run's options, deadline and cancel token: how the auto-batching interpreters run
/// graph-function primops ([`EvalCtx::function_runner`]; outside a run,
/// `ExecOptions::function_runner`).
#[derive(Clone)]
pub struct FunctionRunner(Arc<RunFn>);

/// The function a [`FunctionRunner`] calls.
type RunFn = dyn Fn(&Function, Vec<Tensor>) -> Result<Vec<Tensor>> + Send + Sync;

impl FunctionRunner {
    /// A runner calling `f`.
    ///
    /// ```
    /// use pfor::ops::FunctionRunner;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // a runner that evaluates with the built-in options (see ExecOptions::function_runner)
    /// let runner = FunctionRunner::new(|f, args| pfor::exec::run_function(f, args));
    /// let ty = [TensorType::new(DType::F64, [2])];
    /// let f = Function::build(&Graph::new(), &ty, |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// assert_eq!(runner.run(&f, vec![Tensor::vec1(&[1.0f64, 2.0])])?[0].to_vec::<f64>()?, [-1.0, -2.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(f: impl Fn(&Function, Vec<Tensor>) -> Result<Vec<Tensor>> + Send + Sync + 'static) -> FunctionRunner {
        FunctionRunner(Arc::new(f))
    }

    /// Run `f` on `args`.
    ///
    /// ```
    /// use pfor::ops::FunctionRunner;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let runner = ExecOptions::builtin().function_runner();
    /// let ty = [TensorType::new(DType::I64, Shape::scalar())];
    /// let f = Function::build(&Graph::new(), &ty, |g, p| Ok(vec![g.add(p[0], p[0])?]))?;
    /// assert_eq!(runner.run(&f, vec![Tensor::scalar(21i64)])?[0].scalar_i64()?, 42);
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(&self, f: &Function, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
        (self.0)(f, args)
    }
}

impl std::fmt::Debug for FunctionRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FunctionRunner")
    }
}

/// The runtime context of one evaluation inside a run (variables, the function library,
/// the session's options, the run's limits, its buffer pool).
pub trait EvalCtx {
    /// The optional kernels the session allows (`ExecOptions::winograd`, `atb`).
    fn kernel_options(&self) -> KernelOptions;
    /// The session's limit on nested calls (`ExecOptions::max_call_depth`).
    fn max_call_depth(&self) -> usize;
    /// The session's cap on the trips of a `while` without a cap of its own
    /// (`ExecOptions::max_while_iterations`).
    fn max_while_iterations(&self) -> Option<u64>;
    /// Run a function on arguments, with the session's options (compiled on first use).
    fn run_function(&mut self, f: &Function, args: Vec<Tensor>) -> Result<Vec<Tensor>>;
    /// A [`FunctionRunner`] with the session's options and the run's deadline and cancel
    /// token, for work that runs functions away from this context (the auto-batching VM).
    fn function_runner(&self) -> FunctionRunner;
    /// Call a named library function, enforcing the recursion limit, the native stack left
    /// and the run's deadline and cancel token.
    fn call(&mut self, name: &str, args: Vec<Tensor>) -> Result<Vec<Tensor>>;
    /// Current value of a variable.
    fn read_variable(&self, name: &str) -> Result<Tensor>;
    /// Replace a variable's value.
    fn write_variable(&mut self, name: &str, v: Tensor) -> Result<()>;
    /// The run's deadline and cancel token (`None, None` when it has neither).
    fn limits(&self) -> (Option<Instant>, Option<&CancelToken>);
    /// `Err(Cancelled | DeadlineExceeded)` if the run was cancelled or is past its deadline
    /// (`at` says where: called only then).
    fn check_interrupt_dyn(&self, at: &mut dyn FnMut() -> String) -> Result<()>;
    /// Offer a tensor a kernel no longer needs (kept only if large and uniquely owned).
    fn recycle(&mut self, t: Tensor);
    /// A pooled tensor of `dtype` with exactly `len` elements, if the run's pool has one.
    fn take_recycled(&mut self, dtype: DType, len: usize) -> Option<Tensor>;
}

impl dyn EvalCtx + '_ {
    /// [`EvalCtx::check_interrupt_dyn`] with a one-shot message.
    pub fn check_interrupt(&self, at: impl FnOnce() -> String) -> Result<()> {
        let mut at = Some(at);
        self.check_interrupt_dyn(&mut || at.take().map_or_else(String::new, |f| f()))
    }

    /// A recycled buffer of exactly `len` elements with STALE content (the caller must
    /// overwrite every element), or `None`: then allocate as usual.
    pub fn recycled<T: Element>(&mut self, len: usize) -> Option<Vec<T>> {
        self.take_recycled(T::DTYPE, len)?.into_buffer(len)
    }
}

/// The optional kernels a call may take: the session's choice inside a run (`ctx`),
/// [`KernelOptions::default`] outside one.
pub(crate) fn kernel_options(ctx: Option<&(dyn EvalCtx + '_)>) -> KernelOptions {
    ctx.map_or_else(KernelOptions::default, |c| c.kernel_options())
}
