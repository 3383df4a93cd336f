//! [`Session`]: a compiled [`Plan`] of a graph's fetches plus the state its runs share —
//! variables, the buffer pool, the function-body plans, the profile and the worker hand-off.
//!
//! Invariants: the plan is compiled once (with the session's [`ExecOptions`]) and never
//! changes; every run checks its feeds at the edge before any step runs; a run's outputs
//! are owned by the caller (the session recycles them at the next run only when the caller
//! dropped them); the profile is printed on drop only when `profile_report` asks for it.

use super::*;

/// A compiled graph plus variable state: compile once, run many times.
pub struct Session {
    plan: Arc<Plan>,
    library: Library,
    vars: HashMap<String, Tensor>,
    options: ExecOptions,
    profile: Profile,
    pool: BufferPool,
    /// Plans of the function bodies run so far, compiled with `options`.
    plans: FunctionPlans,
    /// The pool runs are handed to (see [`ExecOptions::on_workers`]).
    workers: Arc<Workers>,
    /// The last run's outputs (recycled at the next run if the caller dropped them).
    last_outputs: Vec<Tensor>,
    /// How long the last run took (decides whether the next one is handed to a worker).
    last_run: Option<Duration>,
    /// The fetched values, in order, and their names (see [`Session::named`]).
    fetches: Vec<ValueId>,
    fetch_names: Vec<Option<String>>,
}

impl Session {
    /// Compile `fetches` of `graph` with default options.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let y = g.mul(x, x)?;
    /// let mut s = Session::new(&g, &[y])?; // compile once ...
    /// for k in 0..3 {                      // ... run many times
    ///     let r = s.run(&[(x, Tensor::from_vec(&[2], vec![k as f64, 2.0])?)])?;
    ///     assert_eq!(r[0].to_f64_vec(), [(k * k) as f64, 4.0]);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(graph: &Graph, fetches: &[ValueId]) -> Result<Session> {
        Session::with_options(graph, fetches, ExecOptions::default())
    }

    /// Compile with options.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// let opts = ExecOptions { profile: true, fuse: false, ..ExecOptions::builtin() };
    /// let mut s = Session::with_options(&g, &[y], opts)?;
    /// s.run(&[(x, Tensor::zeros(DType::F32, &[2])?)])?;
    /// assert!(s.options().profile);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_options(graph: &Graph, fetches: &[ValueId], options: ExecOptions) -> Result<Session> {
        for f in fetches {
            graph.check_value(*f)?;
        }
        let plan = Arc::new(Plan::compile_options(graph, fetches, false, &options)?);
        let library = graph.library().clone();
        let vars = library.variables().into_iter().map(|v| (v.name, v.init)).collect();
        Ok(Session {
            plan,
            library,
            vars,
            options,
            profile: Profile::default(),
            pool: BufferPool::default(),
            plans: FunctionPlans::default(),
            workers: Workers::shared(),
            last_outputs: Vec::new(),
            last_run: None,
            fetches: fetches.to_vec(),
            fetch_names: vec![None; fetches.len()],
        })
    }

    /// Compile named fetches (default options): [`run_fetched`](Self::run_fetched) results
    /// can then be read by name (`out.by_name("loss")`) or as a map. Names must be unique.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let sq = g.mul(x, x)?;
    /// let loss = g.sum_all(sq)?;
    /// let mut s = Session::named(&g, &[("loss", loss), ("squares", sq)])?;
    /// let out = s.run_fetched(&[(x, Tensor::from_vec(&[2], vec![1.0f64, 2.0])?)])?;
    /// assert_eq!(out.by_name("loss")?.scalar_f64()?, 5.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn named(graph: &Graph, fetches: &[(&str, ValueId)]) -> Result<Session> {
        let mut seen = HashSet::new();
        if let Some((dup, _)) = fetches.iter().find(|(n, _)| !seen.insert(*n)) {
            return Err(Error::InvalidArgument(format!("Session::named: fetch name '{dup}' is given twice")));
        }
        let values: Vec<ValueId> = fetches.iter().map(|&(_, v)| v).collect();
        let mut s = Session::new(graph, &values)?;
        s.fetch_names = fetches.iter().map(|(n, _)| Some(n.to_string())).collect();
        Ok(s)
    }

    /// [`run`](Self::run), returning the outputs keyed by fetched value and name instead of
    /// by position (`out.get(loss)?`, `out.by_name("loss")?`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [2]);
    /// let (s, p) = (g.sum_all(x)?, g.reduce_prod(x, None, false)?);
    /// let mut sess = Session::new(&g, &[s, p])?;
    /// let out = sess.run_fetched(&[(x, Tensor::from_vec(&[2], vec![2.0f64, 3.0])?)])?;
    /// assert_eq!((out.get(s)?.scalar_f64()?, out.get(p)?.scalar_f64()?), (5.0, 6.0)); // by value, not position
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_fetched(&mut self, feeds: &[(ValueId, Tensor)]) -> Result<Fetched> {
        let outs = self.run(feeds)?;
        Ok(Fetched::new(self.fetches.clone(), self.fetch_names.clone(), outs))
    }

    /// Run with feeds given by input value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.input("a", DType::F32, [2]);
    /// let b = g.input("b", DType::F32, [2]);
    /// let c = g.add(a, b)?;
    /// let mut s = Session::new(&g, &[c])?;
    /// let r = s.run(&[(a, Tensor::vec1(&[1.0f32, 2.0])), (b, Tensor::vec1(&[10.0f32, 20.0]))])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [11.0, 22.0]);
    /// // a missing feed is an error naming the input
    /// assert!(s.run(&[(a, Tensor::vec1(&[1.0f32, 2.0]))]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(&mut self, feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
        self.run_with(feeds, &RunOptions::default())
    }

    /// [`run`](Self::run) with a deadline and/or a cancel token: the run stops with
    /// `Error::DeadlineExceeded` / `Error::Cancelled` at the next check after either fires
    /// (before a step, at a loop iteration or a call; see `exec::limits`). Variables written
    /// before the stop keep their new values.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// let mut s = Session::new(&g, &[y])?;
    /// // a run that must finish within a second (Error::DeadlineExceeded otherwise)
    /// let r = s.run_with(&[(x, Tensor::zeros(DType::F32, &[2])?)], &RunOptions::timeout(Duration::from_secs(1)))?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [1.0, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_with(&mut self, feeds: &[(ValueId, Tensor)], run: &RunOptions) -> Result<Vec<Tensor>> {
        let init = self.plan.bind_feeds(feeds, self.options.max_tensor_bytes)?;
        let plan = self.plan.clone();
        let recycle = self.options.recycle_buffers;
        for t in std::mem::take(&mut self.last_outputs) {
            self.pool.donate(t);
        }
        self.pool.start_run();
        let hand_off = self.may_hand_off();
        let profile = self.options.profile.then_some(&mut self.profile);
        let pool = recycle.then_some(&mut self.pool);
        let mut ctx = ExecCtx {
            vars: &mut self.vars,
            library: &self.library,
            options: &self.options,
            depth: 0,
            profile,
            pool,
            plans: Some(&mut self.plans),
            interrupt: run.interrupt(),
            stack: limits::StackGuard::default(),
        };
        let t0 = Instant::now();
        let r = if hand_off {
            self.workers.run(plan.parallel_kernels, self.options.warm_workers, || plan.run(init, &mut ctx))
        } else {
            plan.run(init, &mut ctx)
        };
        self.last_run = Some(t0.elapsed());
        self.pool.end_run();
        if self.options.profile {
            self.profile.count_run();
        }
        if let (true, Ok(outs)) = (recycle, &r) {
            self.last_outputs = outs.iter().filter(|t| t.len() * 4 >= pool::MIN_BYTES).cloned().collect();
        }
        r
    }

    /// Run with feeds given by input name.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.neg(x)?;
    /// let mut s = Session::new(&g, &[y])?;
    /// let r = s.run_named(&[("x", Tensor::vec1(&[1.0f32, -2.0]))])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [-1.0, 2.0]);
    /// assert!(s.run_named(&[("nope", Tensor::vec1(&[1.0f32, 2.0]))]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_named(&mut self, feeds: &[(&str, Tensor)]) -> Result<Vec<Tensor>> {
        let mut by_value = Vec::with_capacity(feeds.len());
        for (name, t) in feeds {
            let is = self
                .plan
                .inputs
                .iter()
                .find(|is| is.name == *name)
                .ok_or_else(|| Error::UnknownFeed { value: format!("input '{name}'") })?;
            by_value.push((is.value, t.clone()));
        }
        self.run(&by_value)
    }

    /// Current value of a variable.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.variable("w", Tensor::vec1(&[1.0f32, 2.0]))?;
    /// let mut s = Session::new(&g, &[w])?;
    /// assert_eq!(s.variable("w")?.to_vec::<f32>()?, [1.0, 2.0]);
    /// s.set_variable("w", Tensor::vec1(&[5.0f32, 6.0]))?;
    /// assert_eq!(s.run(&[])?[0].to_vec::<f32>()?, [5.0, 6.0]);
    /// assert!(s.variable("v").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn variable(&self, name: &str) -> Result<Tensor> {
        self.vars.get(name).cloned().ok_or_else(|| Error::UnknownVariable { name: name.to_string() })
    }

    /// Set a variable (same dtype and shape as its definition).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.variable("w", Tensor::vec1(&[0.0f64; 3]))?;
    /// let mut s = Session::new(&g, &[w])?;
    /// s.set_variable("w", Tensor::vec1(&[1.0f64, 2.0, 3.0]))?;
    /// // another dtype or shape than the definition: an error naming the variable
    /// let e = s.set_variable("w", Tensor::vec1(&[1.0f64])).unwrap_err();
    /// assert!(e.to_string().contains("'w'"), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_variable(&mut self, name: &str, v: Tensor) -> Result<()> {
        let slot = self.vars.get_mut(name).ok_or_else(|| Error::UnknownVariable { name: name.to_string() })?;
        if slot.dtype() != v.dtype() || slot.shape() != v.shape() {
            return Err(Error::shape(
                "set_variable",
                format!("variable '{name}' is {}{:?}, got {}{:?}", slot.dtype(), slot.shape(), v.dtype(), v.shape()),
            ));
        }
        *slot = v;
        Ok(())
    }

    /// Whether the next run from this thread would be handed to a thread of the session's
    /// [`Workers`] (see [`ExecOptions::on_workers`]).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let y = g.exp(x)?;
    /// let s = Session::with_options(&g, &[y], ExecOptions { on_workers: false, ..ExecOptions::builtin() })?;
    /// assert!(!s.hands_off()); // always on the caller's thread
    /// # Ok(())
    /// # }
    /// ```
    pub fn hands_off(&self) -> bool {
        self.may_hand_off() && self.workers.would_hand_off(self.plan.parallel_kernels)
    }

    /// The pool this session hands runs to ([`Workers::shared`] unless replaced).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let s = Session::new(&g, &[x])?;
    /// assert!(Arc::ptr_eq(s.workers(), &Workers::shared())); // the default pool
    /// # Ok(())
    /// # }
    /// ```
    pub fn workers(&self) -> &Arc<Workers> {
        &self.workers
    }

    /// Hand this session's runs to `workers` from now on (e.g. a pool of its own, or one
    /// shared by a group of sessions) instead of the shared default.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let y = g.exp(x)?;
    /// let mut s = Session::new(&g, &[y])?;
    /// s.set_workers(Workers::new(2, "my-model")?); // threads my-model-0, my-model-1
    /// assert_eq!(s.workers().threads(), 2);
    /// s.run(&[(x, Tensor::zeros(DType::F32, &[4])?)])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_workers(&mut self, workers: Arc<Workers>) {
        self.workers = workers;
    }

    /// Bytes of the recycled buffers this session holds between runs (see
    /// [`ExecOptions::recycle_buffers`]): at most 8 buffers of 4 MiB or more, each taken by a
    /// kernel during the last run, released by it or returned by it, never one that a whole
    /// run left unused.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [1024, 1024]);
    /// let y = g.exp(x)?;
    /// let mut s = Session::new(&g, &[y])?;
    /// for _ in 0..3 {
    ///     s.run(&[(x, Tensor::zeros(DType::F32, &[1024, 1024])?)])?; // outputs dropped
    /// }
    /// assert!(s.pooled_bytes() <= 2 * 4 << 20); // no more than a run's worth (4 MiB each)
    /// # Ok(())
    /// # }
    /// ```
    pub fn pooled_bytes(&self) -> usize {
        self.pool.bytes()
    }

    /// The session's options.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let s = Session::with_options(&g, &[x], ExecOptions { max_call_depth: 50, ..ExecOptions::builtin() })?;
    /// assert_eq!(s.options().max_call_depth, 50);
    /// # Ok(())
    /// # }
    /// ```
    pub fn options(&self) -> &ExecOptions {
        &self.options
    }

    /// The session's side of the hand-off rule: allowed, and the last run was long enough.
    fn may_hand_off(&self) -> bool {
        self.options.on_workers && self.last_run.is_none_or(|d| d >= HAND_OFF_MIN_RUN)
    }

    /// Number of nodes the plan runs.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [4]);
    /// let y = g.exp(x)?;
    /// let z = g.sin(y)?;
    /// let s = Session::with_options(&g, &[z], ExecOptions { fuse: false, ..ExecOptions::builtin() })?;
    /// assert_eq!(s.num_steps(), 3); // x, exp, sin
    /// # Ok(())
    /// # }
    /// ```
    pub fn num_steps(&self) -> usize {
        self.plan.len()
    }

    /// Per-node timings recorded so far (empty unless [`ExecOptions::profile`] is on).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [64, 64]);
    /// let y = g.matmul(x, x)?;
    /// let mut s = Session::with_options(&g, &[y], ExecOptions { profile: true, ..ExecOptions::builtin() })?;
    /// s.run(&[(x, Tensor::randn(&[64, 64], 0)?)])?;
    /// println!("{}", s.profile().report(5)); // the 5 most expensive nodes and totals per op
    /// # Ok(())
    /// # }
    /// ```
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Forget the timings recorded so far (e.g. after warm-up runs).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [8]);
    /// let y = g.exp(x)?;
    /// let mut s = Session::with_options(&g, &[y], ExecOptions { profile: true, ..ExecOptions::builtin() })?;
    /// s.run(&[(x, Tensor::zeros(DType::F32, &[8])?)])?; // warm-up
    /// s.clear_profile();
    /// assert_eq!(s.profile().runs(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear_profile(&mut self) {
        self.profile.clear();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.profile.runs() > 0
            && let Some(top) = self.options.profile_report
        {
            eprintln!("{}", self.profile.report(top));
        }
    }
}
