//! Robustness: bad input through the public API is an `Err`, never a panic, an abort, a
//! hang, another node's value or a silently wrong answer (issue 16): stale and foreign
//! handles, shapes at API edges, memory exhaustion and
//! budgets, size overflows, runs that would not terminate or would overflow the native
//! stack (iteration caps, deadlines, cancellation, the stack guard, identically in every
//! interpreter), the crash-class harness that runs abort-prone cases in a child process,
//! and pfor against the reference loop where the loop succeeds only because control flow
//! keeps an iteration away from an op that would fail on its values.
//! `fuzz` drives every public entry point on random malformed graphs and feeds (proptest,
//! 2,000 cases: no panic, no hang, pfor equal to the loop where the loop runs); what it
//! found has a named regression test in the module of its class (`loop_agreement` for
//! pfor failing where the loop runs).

mod crash;
mod fuzz;
mod fuzz_ops;
mod handles;
mod limits;
mod limits_autobatch;
mod loop_agreement;
mod memory;
mod panics;
pub mod pfor_vs_loop;
mod shapes;
mod stack;

use std::thread::{self, JoinHandle};
use std::time::Duration;

use pfor::prelude::*;

/// Cancel `token` from another thread a little later (the run it guards must stop with
/// `Error::Cancelled` whether the cancellation comes before or during it).
pub fn cancel_soon(token: &CancelToken) -> JoinHandle<()> {
    let token = token.clone();
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        token.cancel();
    })
}

/// A graph with the recursive function `name(n: i64) -> i64 = n > 0 ? more(g, n) : base(g,
/// n)` (`more` may call `name`).
pub fn recursive_i64(
    name: &str,
    more: impl FnOnce(&mut Graph, ValueId) -> Result<ValueId>,
    base: impl FnOnce(&mut Graph, ValueId) -> Result<ValueId>,
) -> Graph {
    let mut g = Graph::new();
    let i64s = TensorType::scalar(DType::I64);
    g.declare_function(name, std::slice::from_ref(&i64s), std::slice::from_ref(&i64s)).unwrap();
    g.define_function(name, |g, p| {
        let zero = g.constant(Tensor::scalar(0i64));
        let pos = g.greater(p[0], zero)?;
        g.cond(pos, &[p[0]], |g, a| Ok(vec![more(g, a[0])?]), |g, a| Ok(vec![base(g, a[0])?]))
    })
    .unwrap();
    g
}
