//! Opt-in per-node timing of plan execution.
//!
//! Enabled by [`ExecOptions::profile`](super::ExecOptions::profile) (which
//! `ExecOptions::from_env` turns on when the environment variable `PFOR_PROFILE` is set).
//! Every executed step adds its wall
//! time to an entry keyed by (plan, step): the op, its node, its input shapes (of the first
//! run) and its output shapes. [`Profile::report`] prints the most expensive nodes and a
//! total per op name. A [`Session`](super::Session) prints its report to stderr when dropped
//! if [`ExecOptions::profile_report`](super::ExecOptions::profile_report) is set, as
//! `PFOR_PROFILE` does (so benchmarks and examples need no code change: `PFOR_PROFILE=30 cargo run --release --example ...` prints the top 30 nodes).
//!
//! Invariants: profiling never changes results; when off, the executor does no timing (one
//! branch per step). Steps of functions (control-flow bodies, calls) are recorded under their
//! own plan, so a loop body's nodes appear once with the total over all its trips.

use std::fmt::Write as _;
use std::time::Duration;

use hashbrown::HashMap;

use crate::ir::NodeId;
use crate::tensor::Tensor;

/// One profiled step.
#[derive(Clone, Debug)]
pub struct ProfileEntry {
    /// The node that ran.
    pub node: NodeId,
    /// The op, as printed in graph dumps.
    pub op: String,
    /// The op's family name (e.g. `batch_matmul`), for per-op totals.
    pub kind: String,
    /// Input shapes (of the first run).
    pub input_shapes: Vec<Vec<usize>>,
    /// Output shapes (of the first run).
    pub output_shapes: Vec<Vec<usize>>,
    /// Number of executions.
    pub count: u64,
    /// Total wall time.
    pub total: Duration,
    /// Wall time of the fastest execution (on a noisy host, steadier than the mean).
    pub best: Duration,
}

/// Accumulated per-step timings.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    entries: HashMap<(usize, usize), ProfileEntry>,
    runs: u64,
}

impl Profile {
    /// Record one execution of step `step` of the plan at address `plan`.
    pub(crate) fn record(
        &mut self,
        key: (usize, usize),
        node: NodeId,
        label: impl FnOnce() -> (String, String),
        inputs: &[Vec<usize>],
        outputs: &[Tensor],
        dt: Duration,
    ) {
        let e = self.entries.entry(key).or_insert_with(|| {
            let (op, kind) = label();
            ProfileEntry {
                node,
                op,
                kind,
                input_shapes: inputs.to_vec(),
                output_shapes: outputs.iter().map(|t| t.shape().to_vec()).collect(),
                count: 0,
                total: Duration::ZERO,
                best: Duration::MAX,
            }
        });
        e.count += 1;
        e.total += dt;
        e.best = e.best.min(dt);
    }

    /// Count one top-level run (for per-run averages).
    pub(crate) fn count_run(&mut self) {
        self.runs += 1;
    }

    /// Number of top-level runs recorded.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [32, 32]);
    /// let y = g.matmul(x, x)?;
    /// let mut s = Session::with_options(&g, &[y], ExecOptions { profile: true, ..ExecOptions::builtin() })?;
    /// for _ in 0..2 {
    ///     s.run(&[(x, Tensor::randn(&[32, 32], 0)?)])?;
    /// }
    /// assert_eq!(s.profile().runs(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// All entries, most expensive first.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [32, 32]);
    /// let y = g.matmul(x, x)?;
    /// let mut s = Session::with_options(&g, &[y], ExecOptions { profile: true, ..ExecOptions::builtin() })?;
    /// for _ in 0..2 {
    ///     s.run(&[(x, Tensor::randn(&[32, 32], 0)?)])?;
    /// }
    /// let top = s.profile().entries()[0]; // the most expensive node
    /// println!("{} ({}): {} calls", top.op, top.kind, top.count);
    /// # Ok(())
    /// # }
    /// ```
    pub fn entries(&self) -> Vec<&ProfileEntry> {
        let mut v: Vec<&ProfileEntry> = self.entries.values().collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.total));
        v
    }

    /// Forget everything recorded so far.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::exec::Profile;
    ///
    /// let mut p = Profile::default();
    /// p.clear();
    /// assert_eq!((p.runs(), p.entries().len()), (0, 0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear(&mut self) {
        self.entries.clear();
        self.runs = 0;
    }

    /// A text report: the `top` most expensive nodes, then totals per op name (times are
    /// per top-level run; `best ms` is a node's fastest single execution).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [32, 32]);
    /// let y = g.matmul(x, x)?;
    /// let mut s = Session::with_options(&g, &[y], ExecOptions { profile: true, ..ExecOptions::builtin() })?;
    /// for _ in 0..2 {
    ///     s.run(&[(x, Tensor::randn(&[32, 32], 0)?)])?;
    /// }
    /// let text = s.profile().report(3);
    /// assert!(text.starts_with("profile: 2 runs"), "{text}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn report(&self, top: usize) -> String {
        let runs = self.runs.max(1) as f64;
        let entries = self.entries();
        let total: f64 = entries.iter().map(|e| e.total.as_secs_f64()).sum::<f64>() / runs;
        let mut s = String::new();
        let _ = writeln!(s, "profile: {} runs, {:.3} ms per run in {} steps", self.runs, total * 1e3, entries.len());
        let _ = writeln!(s, "{:>9} {:>6} {:>6} {:>8}  node  op  inputs -> outputs", "ms/run", "%", "calls", "best ms");
        for e in entries.iter().take(top) {
            let t = e.total.as_secs_f64() / runs;
            let _ = writeln!(
                s,
                "{:>9.3} {:>6.1} {:>6} {:>8.3}  {}  {}  {:?} -> {:?}",
                t * 1e3,
                100.0 * t / total.max(1e-12),
                e.count as f64 / runs,
                e.best.as_secs_f64() * 1e3,
                e.node,
                e.op,
                e.input_shapes,
                e.output_shapes
            );
        }
        let mut by_kind: HashMap<&str, (f64, u64)> = HashMap::new();
        for e in &entries {
            let k = by_kind.entry(e.kind.as_str()).or_default();
            k.0 += e.total.as_secs_f64() / runs;
            k.1 += e.count;
        }
        let mut kinds: Vec<_> = by_kind.into_iter().collect();
        kinds.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
        let _ = writeln!(s, "per op:");
        for (k, (t, c)) in kinds {
            let _ = writeln!(s, "{:>9.3} {:>6.1} {:>6}  {k}", t * 1e3, 100.0 * t / total.max(1e-12), c as f64 / runs);
        }
        s
    }
}

/// The number of nodes to print for `PFOR_PROFILE=value` (the value, default 25).
pub(crate) fn report_top(value: &str) -> usize {
    value.parse().unwrap_or(25)
}
