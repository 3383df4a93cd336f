//! Limits of a run: a deadline and a cancellation token, and the native-stack guard of
//! recursion. (Loop caps are per op: [`IterationCap`](crate::ops::IterationCap),
//! [`ExecOptions::max_while_iterations`](super::ExecOptions::max_while_iterations).)
//!
//! Invariants:
//! - an interrupt check is one branch when the run has neither a deadline nor a token;
//!   with them, a relaxed atomic load and one clock read. Sessions check before every plan
//!   step (also inside function bodies), at every `while` / `for` iteration and every
//!   `call`; the auto-batching interpreters before every block execution (which covers
//!   their loop back-edges, tail-call jumps and call entries). So a run that does not
//!   terminate (a loop, runaway recursion) always stops at its deadline or cancellation,
//!   with an error naming where; a single kernel is never interrupted;
//! - cancellation is sticky: a cancelled token stays cancelled (give the next run a new
//!   one); the token is checked before the deadline, so a run both cancelled and late
//!   reports `Cancelled`;
//! - the stack guard runs at every recursion level whose depth is data-dependent (a
//!   session's `call`, an auto-batching stackless or reference activation): when the
//!   thread has less than [`STACK_RESERVE`] bytes of native stack left, the call fails
//!   with [`Error::StackExhausted`] (naming the depth and the bytes used and left) instead
//!   of overflowing the stack. The reserve covers one more recursion level and the deepest
//!   kernel: a level costs ~6.5 KiB in a session (a `call` and the `cond` around it) and
//!   ~1 KiB in the interpreters, in a test build (`tests/robustness/stack.rs` measures it
//!   and checks it stays under a quarter of the reserve). Where the platform cannot tell
//!   the remaining stack, only the depth limits apply;
//! - the session-wide `ExecOptions::max_while_iterations` counts the trips of each `while`
//!   node as it runs, including loops that transformations build (a pfor'd loop in Subset
//!   form makes one trip more than its longest iteration; a `for` loop's VJP loops `n`
//!   times): a safety net with some margin, where an [`IterationCap`] on the loop itself is
//!   exact and kept by every transformation.
//!
//! [`IterationCap`]: crate::ops::IterationCap

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
pub use crate::ops::CancelToken;

/// Native stack the recursion guard keeps free on the thread (see the module docs).
pub const STACK_RESERVE: usize = 256 << 10;

/// Options of one session run ([`Session::run_with`](super::Session::run_with)).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Stop with [`Error::DeadlineExceeded`] once this instant has passed.
    pub deadline: Option<Instant>,
    /// Stop with [`Error::Cancelled`] once this token is cancelled.
    pub cancel: Option<CancelToken>,
}

impl RunOptions {
    /// A deadline `timeout` from now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let c0 = g.constant(Tensor::scalar(0i64));
    /// let out = g.while_loop(&[c0], &[], |g, a| {
    ///     let z = g.constant(Tensor::scalar(0i64));
    ///     g.greater_equal(a[0], z) // never false
    /// }, |g, a| Ok(vec![g.add_scalar(a[0], 1.0)?]))?;
    /// let mut sess = Session::new(&g, &out)?;
    /// let err = sess.run_with(&[], &RunOptions::timeout(Duration::ZERO)).unwrap_err();
    /// assert!(matches!(err.root(), Error::DeadlineExceeded { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn timeout(timeout: Duration) -> RunOptions {
        RunOptions { deadline: Instant::now().checked_add(timeout), cancel: None }
    }

    /// Cancellable through `token`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.neg(x)?;
    /// let mut sess = Session::new(&g, &[y])?;
    /// let token = CancelToken::new();
    /// let feeds = [(x, Tensor::vec1(&[1.0f32, 2.0]))];
    /// assert!(sess.run_with(&feeds, &RunOptions::cancellable(&token)).is_ok());
    /// token.cancel(); // e.g. from another thread; a cancelled token stays cancelled
    /// let err = sess.run_with(&feeds, &RunOptions::cancellable(&token)).unwrap_err();
    /// assert!(matches!(err.root(), Error::Cancelled { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn cancellable(token: &CancelToken) -> RunOptions {
        RunOptions { deadline: None, cancel: Some(token.clone()) }
    }

    /// The run's interrupt check, `None` when nothing can interrupt it.
    pub(crate) fn interrupt(&self) -> Option<Interrupt> {
        Interrupt::new(self.deadline, self.cancel.clone())
    }
}

/// The deadline and token of one run, checked at the points listed in the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Interrupt {
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancel: Option<CancelToken>,
}

impl Interrupt {
    /// `None` when there is neither a deadline nor a token.
    pub(crate) fn new(deadline: Option<Instant>, cancel: Option<CancelToken>) -> Option<Interrupt> {
        (deadline.is_some() || cancel.is_some()).then_some(Interrupt { deadline, cancel })
    }

    /// `Err` if the run was cancelled or is past its deadline; `at` says where it stopped.
    pub(crate) fn check(&self, at: impl FnOnce() -> String) -> Result<()> {
        if self.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
            return Err(Error::Cancelled { at: at() });
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::DeadlineExceeded { at: at() });
        }
        Ok(())
    }
}

/// [`Interrupt::check`] when there is an interrupt (the cheap path is one branch).
#[inline]
pub(crate) fn check(interrupt: Option<&Interrupt>, at: impl FnOnce() -> String) -> Result<()> {
    match interrupt {
        Some(i) => i.check(at),
        None => Ok(()),
    }
}

/// An address in the current stack frame.
#[inline(never)]
fn stack_pointer() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// The native-stack guard of one recursive run: remembers the stack position of its first
/// check (on the thread the run executes on) to report how much the recursion used.
#[derive(Debug, Default)]
pub(crate) struct StackGuard {
    base: usize,
}

impl StackGuard {
    /// `Err(StackExhausted)` when less than [`STACK_RESERVE`] bytes of native stack are left
    /// at call depth `depth`, calling `function` (named only then).
    pub(crate) fn check(&mut self, function: impl FnOnce() -> String, depth: usize) -> Result<()> {
        let sp = stack_pointer();
        if self.base == 0 {
            self.base = sp;
        }
        match stacker::remaining_stack() {
            Some(remaining) if remaining < STACK_RESERVE => Err(Error::StackExhausted {
                function: function(),
                depth,
                used: self.base.saturating_sub(sp),
                remaining,
                reserve: STACK_RESERVE,
            }),
            _ => Ok(()),
        }
    }
}
