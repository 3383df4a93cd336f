//! [`ExecCtx`]: the runtime context of one run, the executor's implementation of
//! [`EvalCtx`] (the trait `ops` owns, so ops never name the executor).
//!
//! Invariants: a context carries the session's options and hands them to every op and
//! kernel it evaluates (kernel choices through [`EvalCtx::kernel_options`]); function bodies
//! run with plans compiled with those options, from the session's cache (or, outside a
//! session, the process-wide one; see `plans`); every `call` checks the depth limit, the
//! native stack left and the run's deadline and cancel token before it runs.

use std::time::Instant;

use hashbrown::HashMap;

use super::plans::{self, FunctionPlans};
use super::pool::BufferPool;
use super::{ExecOptions, Profile, limits};
use crate::error::{Error, Result};
use crate::ir::{Function, Library};
use crate::kernels::KernelOptions;
use crate::ops::{CancelToken, EvalCtx, FunctionRunner};
use crate::tensor::{DType, Tensor};

/// Runtime context handed to stateful and control-flow kernels.
pub struct ExecCtx<'a> {
    pub(super) vars: &'a mut HashMap<String, Tensor>,
    pub(super) library: &'a Library,
    pub(super) options: &'a ExecOptions,
    pub(super) depth: usize,
    pub(super) profile: Option<&'a mut Profile>,
    pub(super) pool: Option<&'a mut BufferPool>,
    /// The session's function plans; `None`: the process-wide cache.
    pub(super) plans: Option<&'a mut FunctionPlans>,
    /// The run's deadline and cancel token, if any.
    pub(super) interrupt: Option<limits::Interrupt>,
    pub(super) stack: limits::StackGuard,
}

impl ExecCtx<'_> {
    /// Run a function on arguments (compiling and caching its plan on first use).
    pub fn run_function(&mut self, f: &Function, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let plan = match self.plans.as_deref_mut() {
            Some(cache) => cache.get(f, self.options)?,
            None => plans::shared(f, self.options)?,
        };
        if args.len() != f.params.len() {
            return Err(Error::arity("function", f.params.len().to_string(), args.len()));
        }
        let mut init = Vec::with_capacity(args.len());
        for (p, a) in f.params.iter().zip(args) {
            if let Some(is) = plan.inputs.iter().find(|is| is.value == *p) {
                init.push((is.slot, a));
            }
        }
        plan.run(init, self)
    }

    /// Call a named library function, enforcing the recursion limit, the native stack left
    /// and the run's deadline and cancel token.
    pub fn call(&mut self, name: &str, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
        if self.depth >= self.options.max_call_depth {
            return Err(Error::RecursionLimit { function: name.to_string(), limit: self.options.max_call_depth });
        }
        self.stack.check(|| name.to_string(), self.depth + 1)?;
        self.check_interrupt(|| format!("calling function '{name}' at depth {}", self.depth + 1))?;
        let f = self.library.get(name)?;
        self.depth += 1;
        let r = self.run_function(&f, args);
        self.depth -= 1;
        r
    }

    /// Current value of a variable.
    pub fn read_variable(&self, name: &str) -> Result<Tensor> {
        self.vars.get(name).cloned().ok_or_else(|| Error::UnknownVariable { name: name.to_string() })
    }

    /// Replace a variable's value.
    pub fn write_variable(&mut self, name: &str, v: Tensor) -> Result<()> {
        match self.vars.get_mut(name) {
            Some(slot) => {
                *slot = v;
                Ok(())
            }
            None => Err(Error::UnknownVariable { name: name.to_string() }),
        }
    }

    /// The execution options.
    pub fn options(&self) -> &ExecOptions {
        self.options
    }

    /// `Err(Cancelled | DeadlineExceeded)` if the run was cancelled or is past its deadline
    /// (`at` says where: called only then). One branch when the run has neither.
    pub fn check_interrupt(&self, at: impl FnOnce() -> String) -> Result<()> {
        limits::check(self.interrupt.as_ref(), at)
    }

    /// Offer a tensor a kernel no longer needs (kept only if large and uniquely owned).
    pub(crate) fn recycle(&mut self, t: Tensor) {
        if let Some(pool) = self.pool.as_deref_mut() {
            pool.donate(t);
        }
    }

    /// A recycled buffer of exactly `len` elements with STALE content (the caller must
    /// overwrite every element), or `None`: then allocate as usual.
    pub(crate) fn recycled<T: crate::tensor::Element>(&mut self, len: usize) -> Option<Vec<T>> {
        (self as &mut dyn EvalCtx).recycled(len)
    }
}

impl EvalCtx for ExecCtx<'_> {
    #[inline]
    fn kernel_options(&self) -> KernelOptions {
        self.options.kernel_options()
    }

    fn max_call_depth(&self) -> usize {
        self.options.max_call_depth
    }

    fn max_while_iterations(&self) -> Option<u64> {
        self.options.max_while_iterations
    }

    fn run_function(&mut self, f: &Function, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
        ExecCtx::run_function(self, f, args)
    }

    fn function_runner(&self) -> FunctionRunner {
        super::runner(self.options.clone(), self.interrupt.clone())
    }

    fn call(&mut self, name: &str, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
        ExecCtx::call(self, name, args)
    }

    fn read_variable(&self, name: &str) -> Result<Tensor> {
        ExecCtx::read_variable(self, name)
    }

    fn write_variable(&mut self, name: &str, v: Tensor) -> Result<()> {
        ExecCtx::write_variable(self, name, v)
    }

    fn limits(&self) -> (Option<Instant>, Option<&CancelToken>) {
        self.interrupt.as_ref().map_or((None, None), |i| (i.deadline, i.cancel.as_ref()))
    }

    #[inline]
    fn check_interrupt_dyn(&self, at: &mut dyn FnMut() -> String) -> Result<()> {
        limits::check(self.interrupt.as_ref(), at)
    }

    fn recycle(&mut self, t: Tensor) {
        ExecCtx::recycle(self, t)
    }

    fn take_recycled(&mut self, dtype: DType, len: usize) -> Option<Tensor> {
        self.pool.as_deref_mut()?.take(dtype, len)
    }
}

impl<'a> ExecCtx<'a> {
    /// A context outside any session: no profile, pool, deadline or token; function plans
    /// from the process-wide cache.
    pub(super) fn detached(
        vars: &'a mut HashMap<String, Tensor>,
        library: &'a Library,
        options: &'a ExecOptions,
    ) -> Self {
        ExecCtx {
            vars,
            library,
            options,
            depth: 0,
            profile: None,
            pool: None,
            plans: None,
            interrupt: None,
            stack: limits::StackGuard::default(),
        }
    }
}
