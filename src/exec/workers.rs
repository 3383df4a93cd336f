//! Where a run executes: on the caller's thread, or handed whole to a pfor worker thread.
//!
//! A parallel kernel issued from a thread outside the rayon pool injects its job and puts the
//! caller to sleep until the workers finish it: two cross-thread wake-ups per kernel, measured
//! at ~20 µs a round trip on the project's 2-core VM (`examples/workers_probe.rs`) — a tenth
//! of an LSTM step's `[128,1024]x[1024,384]` GEMM. A run that issues several parallel kernels
//! is therefore faster as ONE job on a pool thread: that thread takes part in every parallel
//! kernel, the other workers steal their share, and nobody sleeps between kernels (W5: +8-15 %,
//! W3: +10 %). A plan that issues at most one (small graphs, GEMVs) stays on the caller, whom the
//! hand-off would cost one round trip per run.
//!
//! The pool is a value, [`Workers`]: a session holds an `Arc` of one, the process-wide
//! [`Workers::shared`] (created on first use) unless replaced
//! (`Session::set_workers`), so an application can give sessions a pool of its own.
//!
//! Invariants:
//! - results are identical either way: the same kernels run in the same order, and the
//!   shared pool has the thread count of the caller's rayon pool, so work splits are the
//!   same (a replacement pool with another thread count splits work as a rayon pool of
//!   that many threads would);
//! - a run hands off only from a thread outside pfor's pool (a nested run, e.g. a custom op
//!   running a session, stays where it is), only when [`ExecOptions::on_workers`] allows it
//!   and the plan's estimate of the parallel kernels it issues ([`op_estimate`]) is at least
//!   two;
//! - pool threads have [`STACK_BYTES`] stacks (reserved, committed as touched), so `call`
//!   recursion to the default depth limit fits as it does on a main thread;
//! - if the shared pool cannot be built, runs stay on the caller.
//! - while a handed-off run goes, the pool's other threads poll for its jobs
//!   ([`ExecOptions::warm_workers`], see [`keep_warm`]) instead of sleeping after rayon's
//!   short spin: they run only jobs the pool would run anyway (so results are unchanged),
//!   stop when the run ends (on unwind too) or after [`IDLE_LIMIT`] without work, and one
//!   that lands on the run's own thread returns at once (it cannot block the run).
//!
//! [`ExecOptions::on_workers`]: super::ExecOptions::on_workers
//! [`ExecOptions::warm_workers`]: super::ExecOptions::warm_workers

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hashbrown::HashSet;

use crate::error::{Error, Result};
use crate::ir::{Graph, Library};
use crate::ops::{ControlOp, Op};
use crate::passes::cost::{Work, op_cost};
use crate::tensor::{Tensor, TensorType};

/// Stack of each pool thread.
pub const STACK_BYTES: usize = 64 << 20;
/// Elements from which an elementwise-like kernel may split over threads (the smallest
/// parallel threshold among the crate's kernels, rounded down).
const PAR_ELEMS: usize = 1 << 15;
/// Batch from which the auto-batching interpreters run on a pool thread (a run at batch
/// 256 takes milliseconds and issues hundreds of kernels).
const VM_HAND_OFF_BATCH: usize = 256;
/// Estimates saturate here: "several".
pub(crate) const SEVERAL: usize = 2;

/// A pool of worker threads that whole runs are handed to (see the module docs).
pub struct Workers {
    /// `None`: the pool could not be built; runs stay on the caller.
    pool: Option<rayon::ThreadPool>,
}

impl fmt::Debug for Workers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Workers({} threads)", self.threads())
    }
}

fn build(threads: usize, name: &str) -> std::result::Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    let name = name.to_string();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .stack_size(STACK_BYTES)
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
}

impl Workers {
    /// A pool of its own: `threads` threads (at least 1) named `name-0`, `name-1`, ..., with
    /// `STACK_BYTES` stacks.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let pool = Workers::new(2, "inference")?; // threads inference-0, inference-1
    /// assert_eq!(pool.threads(), 2);
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let y = g.exp(x)?;
    /// let (mut a, mut b) = (Session::new(&g, &[y])?, Session::new(&g, &[y])?);
    /// a.set_workers(pool.clone()); // two sessions share one pool
    /// b.set_workers(pool);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(threads: usize, name: &str) -> Result<Arc<Workers>> {
        let pool = build(threads.max(1), name)
            .map_err(|e| Error::InvalidArgument(format!("Workers::new: cannot start {threads} threads: {e}")))?;
        Ok(Arc::new(Workers { pool: Some(pool) }))
    }

    /// The process-wide default pool (`pfor-worker-i`, as many threads as the global rayon
    /// pool), created on first use; every session holds it unless given another.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pfor::prelude::*;
    ///
    /// assert!(Arc::ptr_eq(&Workers::shared(), &Workers::shared())); // one per process
    /// ```
    pub fn shared() -> Arc<Workers> {
        static SHARED: OnceLock<Arc<Workers>> = OnceLock::new();
        SHARED
            .get_or_init(|| Arc::new(Workers { pool: build(rayon::current_num_threads(), "pfor-worker").ok() }))
            .clone()
    }

    /// Number of threads (0 when the pool could not be built).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Workers::new(3, "w")?.threads(), 3);
    /// assert_eq!(Workers::new(0, "w")?.threads(), 1); // at least one
    /// # Ok(())
    /// # }
    /// ```
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(0, rayon::ThreadPool::current_num_threads)
    }

    /// True if a run with this estimate would be handed to this pool from the current thread.
    pub(crate) fn would_hand_off(&self, estimate: usize) -> bool {
        estimate >= SEVERAL
            && rayon::current_num_threads() > 1
            && self.pool.as_ref().is_some_and(|p| p.current_num_threads() > 1 && p.current_thread_index().is_none())
    }

    /// Run `f` on a pool thread when [`would_hand_off`](Self::would_hand_off), else here;
    /// `warm`: the pool's other threads stay awake while `f` runs (see [`keep_warm`]).
    pub(crate) fn run<R: Send>(&self, estimate: usize, warm: bool, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) if self.would_hand_off(estimate) && warm => p.install(|| keep_warm(f)),
            Some(p) if self.would_hand_off(estimate) => p.install(f),
            _ => f(),
        }
    }
}

/// Longest a kept-warm thread polls for work without finding any before it leaves the run
/// to rayon's own spin-then-sleep (a run blocked on something slow does not keep a core
/// spinning).
const IDLE_LIMIT: Duration = Duration::from_millis(2);

/// Run `f` (a whole run, on a pool thread) while the pool's other threads stay awake: each
/// polls for work (`rayon::yield_now`: its own jobs, then stealing) until `f` returns,
/// instead of going to sleep after rayon's short spin, so the next parallel kernel's jobs are
/// stolen at once rather than after a futex wake-up. A plan of many short parallel steps (an
/// image model at n = 1: ~80 steps of 10-400 µs) otherwise pays a wake-up for most of them
/// (ONNX Runtime's pool spins the same way). The pollers only ever run jobs the pool would
/// run anyway, so results are those of a plain run; one that the run's own thread picks up
/// (while it waits on a join) returns at once, and each gives up after [`IDLE_LIMIT`]
/// without work. Panic-safe: `f`'s end is signalled on unwind too.
fn keep_warm<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let (done, runner) = (AtomicBool::new(false), rayon::current_thread_index());
    let mut out = None;
    rayon::scope(|s| {
        for _ in 1..rayon::current_num_threads() {
            s.spawn(|_| poll(&done, runner));
        }
        let _done = Done(&done);
        out = Some(f());
    });
    out.expect("the scope ran the run")
}

/// Run the pool's jobs as they appear until `done`, for at most [`IDLE_LIMIT`] without any;
/// at once when on the `runner`'s thread.
fn poll(done: &AtomicBool, runner: Option<usize>) {
    if rayon::current_thread_index() == runner {
        return;
    }
    let mut idle_since: Option<Instant> = None;
    while !done.load(Ordering::Acquire) {
        if rayon::yield_now() == Some(rayon::Yield::Executed) {
            idle_since = None;
        } else if idle_since.get_or_insert_with(Instant::now).elapsed() > IDLE_LIMIT {
            return;
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Run an auto-batching interpreter's `f` on `inputs` (`[batch] + event shape` each) on a
/// thread of the shared pool from batch [`VM_HAND_OFF_BATCH`] on, else here.
pub(crate) fn run_batched<R: Send>(inputs: &[Tensor], f: impl FnOnce() -> R + Send) -> R {
    let batch = inputs.first().and_then(|t| t.shape().first().copied()).unwrap_or(0);
    Workers::shared().run(if batch >= VM_HAND_OFF_BATCH { SEVERAL } else { 0 }, true, f)
}

/// Parallel kernels (saturating at "several") one evaluation of `op` may issue, from its
/// cost ([`crate::passes::cost::op_cost`]): dynamic shapes count as large; control flow
/// counts what its functions may issue, loops as several times that; a call to a function
/// already being estimated (recursion) as several.
pub(crate) fn op_estimate(
    op: &Op,
    ins: &[&TensorType],
    outs: &[TensorType],
    lib: &Library,
    seen: &mut HashSet<String>,
) -> usize {
    let cost = op_cost(op, ins, outs);
    match (cost.work, op) {
        (Work::Free, _) => 0,
        (Work::Control, Op::Control(c)) => control_estimate(c, lib, seen),
        (Work::Contraction, _) => {
            if cost.dynamic {
                return 1;
            }
            // a product of 16x the parallel threshold runs long enough (~0.1 ms) that the
            // hand-off is cheap next to it, and runs faster on a pool thread (sliced GEMM)
            let madds = usize::try_from(cost.multiply_adds()).unwrap_or(usize::MAX);
            let par = crate::kernels::gemm::PAR_FLOPS;
            if madds >= 16 * par { SEVERAL } else { usize::from(madds >= par) }
        }
        _ => usize::from(cost.dynamic || cost.largest >= PAR_ELEMS),
    }
}

fn control_estimate(c: &ControlOp, lib: &Library, seen: &mut HashSet<String>) -> usize {
    let mut f = |g: &Graph| graph_estimate(g, lib, seen);
    let est = match c {
        ControlOp::Cond { then, else_ } => f(&then.graph) + f(&else_.graph),
        // a loop body runs many times: anything it issues, it issues several times
        ControlOp::While { cond, body, .. } => SEVERAL * (f(&cond.graph) + f(&body.graph)),
        ControlOp::For { body, .. } => SEVERAL * f(&body.graph),
        ControlOp::Call { function, .. } => {
            if !seen.insert(function.clone()) {
                return SEVERAL;
            }
            let est = lib.get(function).map_or(SEVERAL, |func| graph_estimate(&func.graph, lib, seen));
            seen.remove(function);
            est
        }
    };
    est.min(SEVERAL)
}

/// [`op_estimate`] summed over the nodes of `g` (saturating).
pub(crate) fn graph_estimate(g: &Graph, lib: &Library, seen: &mut HashSet<String>) -> usize {
    let mut total = 0;
    for n in g.node_ids() {
        let Ok(node) = g.node(n) else { continue };
        let ins: Vec<&TensorType> = node.inputs.iter().filter_map(|v| g.value_type(*v).ok()).collect();
        total += op_estimate(&node.op, &ins, &node.outputs, lib, seen);
        if total >= SEVERAL {
            return SEVERAL;
        }
    }
    total
}
