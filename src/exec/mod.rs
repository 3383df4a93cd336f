//! Executing graphs: [`Session`] compiles a [`Plan`] once and runs it many times.
//!
//! Invariants of a plan:
//! - it contains exactly the ancestors of the fetches (plus, for function bodies, every
//!   node with side effects), in [`Graph::topo_order`] — deterministic, program order for
//!   independent stateful ops;
//! - every value has a slot; a slot is released right after its last consumer runs, and
//!   that consumer receives the tensor by value, so a kernel holding the only reference may
//!   write in place (constants and fetched values are never handed over);
//! - every kernel output is checked against its inferred static type (dtype, rank, fixed
//!   dims), so a kernel bug or a dynamic-dim mismatch is an error naming the node, never a
//!   silently wrong answer;
//! - a run with a deadline or a cancel token ([`RunOptions`]) checks them before every
//!   step, at every loop iteration and every call (see `limits`); a `call` also checks the
//!   native stack left, so deep recursion is an error, never a stack overflow;
//! - feeds are checked at the edge (dtype, declared shape, named dims agreeing across the
//!   inputs of one run) and, with [`ExecOptions::max_tensor_bytes`], every tensor of a run
//!   against the budget — each step's outputs before its kernel allocates them where their
//!   sizes are known (see `checks`);
//! - with [`ExecOptions::fuse`] (the default), `conv2d → bias_add → relu` chains and
//!   connected groups of f32 elementwise ops run as one fused step each (see `fuse`);
//!   results are bit-identical to the unfused plan;
//! - a `matmul` whose right operand is a constant reads a row-major copy of it, made once
//!   at compile time (see `pretranspose`).

mod checks;
mod fuse;
pub mod limits;

mod pool;
mod pretranspose;
mod profile;
pub(crate) mod workers;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hashbrown::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::ir::{Function, Graph, Library, NodeId, ValueId};
use crate::ops::Op;
use crate::tensor::{Tensor, TensorType};
pub use limits::{CancelToken, RunOptions};
use pool::BufferPool;
pub use profile::{Profile, ProfileEntry};

/// Execution options.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// Maximum nesting of `Call`s (recursion depth) before `Error::RecursionLimit`. A depth
    /// the thread's native stack cannot hold is `Error::StackExhausted` (see
    /// `exec::limits`).
    pub max_call_depth: usize,
    /// A cap on the trips of every `while` loop that has no
    /// [`IterationCap`](crate::ops::IterationCap) of its own: a loop whose condition still
    /// holds after this many trips is `Error::IterationLimit` (a "must terminate" safety
    /// net; it counts every `while` node as it runs, loops that pfor or autodiff built
    /// included, but not loops inside a recursive function pfor hands to the auto-batching
    /// VM). `None` (the default): no cap.
    pub max_while_iterations: Option<u64>,
    /// Check every kernel output against its static type.
    pub check_types: bool,
    /// Time every executed node (see [`Profile`]); on by default when the environment
    /// variable `PFOR_PROFILE` is set.
    pub profile: bool,
    /// Recycle large buffers (≥ 4 MiB) between kernels of a run and from the previous run's
    /// outputs once the caller has dropped them (see `exec::pool`): avoids page-faulting
    /// big fresh allocations on every run.
    pub recycle_buffers: bool,
    /// Fuse `conv2d → [reshape] → bias_add → [reshape] → relu` chains, and connected groups
    /// of f32 unary / binary / `bias_add` ops of one shape, into one step each (a value is
    /// fused away only when it is not fetched and nothing else reads it; results are
    /// bit-identical). On by default unless the environment variable `PFOR_NO_FUSE` is set.
    pub fuse: bool,
    /// Hand a run whose plan issues several parallel kernels to one of pfor's worker threads
    /// (it then takes part in every parallel kernel instead of sleeping between them; see
    /// `exec::workers`); results are identical. Only when the session's previous run took at
    /// least [`HAND_OFF_MIN_RUN`] (the hand-off itself costs a cross-thread round trip). On by
    /// default unless the environment variable `PFOR_ON_CALLER` is set.
    pub on_workers: bool,
    /// Run f32 convs with 5x5 stride-1 filters and channel counts that are multiples of 16
    /// by Winograd F(2x2, 5x5) on AVX-512 CPUs (2.8x fewer multiplies; rounding differs from
    /// a direct sum's, see `ops::conv`). On by default unless the environment variable
    /// `PFOR_NO_WINOGRAD` is set; off, those convs run as im2col + GEMM.
    pub winograd: bool,
    /// Memory budget: the largest tensor, in bytes, a run may hold — feeds, constants,
    /// variables and kernel outputs. A step whose output would exceed it fails with
    /// [`Error::OutOfMemory`] naming the node, checked before its kernel allocates wherever
    /// the output's size follows from the shapes (always for fixed static shapes; for dynamic
    /// ones through shape inference on the concrete inputs, or inside kernels that size
    /// their output from data), and after the kernel otherwise. `None` (the default): no
    /// budget; an allocation the system refuses is still an `OutOfMemory` error for every
    /// output of a fixed size and every data-sized one, not an abort. Linux overcommits
    /// memory, so an allocation that succeeds may still exhaust it when written: the budget
    /// is the reliable guard.
    pub max_tensor_bytes: Option<usize>,
}

/// Runs shorter than this stay on the caller's thread (see [`ExecOptions::on_workers`]).
pub const HAND_OFF_MIN_RUN: Duration = Duration::from_micros(100);

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            max_call_depth: 200,
            max_while_iterations: None,
            check_types: true,
            profile: profile::env_top().is_some(),
            recycle_buffers: true,
            fuse: fuse_by_default(),
            on_workers: std::env::var_os("PFOR_ON_CALLER").is_none(),
            winograd: crate::ops::conv::winograd_by_default(),
            max_tensor_bytes: None,
        }
    }
}

/// Fusion is on unless the environment variable `PFOR_NO_FUSE` is set (for A/B timing;
/// function bodies, whose plans are cached with the function, follow it too).
fn fuse_by_default() -> bool {
    std::env::var_os("PFOR_NO_FUSE").is_none()
}

#[derive(Debug)]
struct Step {
    node: NodeId,
    op: Op,
    /// (slot, hand over ownership).
    inputs: Vec<(usize, bool)>,
    outputs: Vec<usize>,
    out_types: Vec<TensorType>,
    /// Slots to release after this step (values whose last consumer it is).
    release: Vec<usize>,
    /// A fused group run in place of `op` (which is then the group's last op).
    fused: Option<Box<fuse::Fused>>,
}

#[derive(Debug)]
struct InputSlot {
    value: ValueId,
    name: String,
    ty: TensorType,
    slot: usize,
}

/// A compiled execution plan for a set of fetches.
#[derive(Debug)]
pub struct Plan {
    steps: Vec<Step>,
    n_slots: usize,
    inputs: Vec<InputSlot>,
    fetch_slots: Vec<usize>,
    /// All Input nodes of the graph (for feed validation), by value.
    graph_inputs: HashSet<ValueId>,
    /// Named dynamic dims of `inputs` (one size per name across the feeds of a run).
    named_dims: Vec<checks::NamedDim>,
    /// Per step: the size of its largest output by the static types.
    out_sizes: Vec<checks::OutSize>,
    /// Parallel kernels a run may issue (0, 1, or 2 = several; see `exec::workers`).
    parallel_kernels: usize,
}

impl Plan {
    /// Compile a plan for `fetches` (with `keep_effects`, side-effecting nodes always run),
    /// with fusion.
    pub fn compile(g: &Graph, fetches: &[ValueId], keep_effects: bool) -> Result<Plan> {
        Plan::compile_with(g, fetches, keep_effects, fuse_by_default())
    }

    /// [`Plan::compile`], fusing conv chains only when `fuse`.
    pub fn compile_with(g: &Graph, fetches: &[ValueId], keep_effects: bool, fuse: bool) -> Result<Plan> {
        let mut roots: Vec<ValueId> = fetches.to_vec();
        if keep_effects {
            for n in g.node_ids() {
                if g.node(n)?.op.has_side_effects() {
                    roots.push(ValueId { node: n, slot: 0 });
                }
            }
        }
        let needed: HashSet<NodeId> = g.ancestors(&roots)?.into_iter().collect();
        let order: Vec<NodeId> = g.topo_order()?.into_iter().filter(|n| needed.contains(n)).collect();

        let mut slot_of: HashMap<ValueId, usize> = HashMap::new();
        let mut n_slots = 0;
        for &n in &order {
            for v in g.outputs_of(n) {
                slot_of.insert(v, n_slots);
                n_slots += 1;
            }
        }
        let fetch_slots: Vec<usize> = fetches.iter().map(|f| slot_of[f]).collect();
        let pinned: HashSet<usize> = fetch_slots.iter().copied().collect();

        let mut steps = Vec::with_capacity(order.len());
        let mut inputs = Vec::new();
        for &n in &order {
            let node = g.node(n)?;
            let outputs: Vec<usize> = g.outputs_of(n).iter().map(|v| slot_of[v]).collect();
            if let Op::Input { name } = &node.op {
                inputs.push(InputSlot {
                    value: ValueId { node: n, slot: 0 },
                    name: name.clone(),
                    ty: node.outputs[0].clone(),
                    slot: outputs[0],
                });
            }
            steps.push(Step {
                node: n,
                op: node.op.clone(),
                inputs: node.inputs.iter().map(|v| (slot_of[v], false)).collect(),
                outputs,
                out_types: node.outputs.clone(),
                release: Vec::new(),
                fused: None,
            });
        }
        if pretranspose::by_default() {
            pretranspose::pretranspose_constants(&mut steps, &mut n_slots, &pinned);
        }
        if fuse {
            fuse::conv_chains(&mut steps, &pinned);
            fuse::patch_products(&mut steps, &pinned);
            fuse::split_biases(&mut steps, &mut n_slots, &pinned, fuse::fusable);
            fuse::elementwise_groups(&mut steps, &pinned);
        }

        // Last use of each slot: (step index, input position).
        let mut last_use: HashMap<usize, (usize, usize)> = HashMap::new();
        for (si, st) in steps.iter().enumerate() {
            for (pos, &(s, _)) in st.inputs.iter().enumerate() {
                last_use.insert(s, (si, pos));
            }
        }
        for (si, st) in steps.iter_mut().enumerate() {
            for (pos, (s, take)) in st.inputs.iter_mut().enumerate() {
                *take = last_use.get(s) == Some(&(si, pos)) && !pinned.contains(s);
                if *take {
                    st.release.push(*s);
                }
            }
            // Outputs nobody reads are released immediately (unless fetched).
            for &s in &st.outputs {
                if !last_use.contains_key(&s) && !pinned.contains(&s) {
                    st.release.push(s);
                }
            }
        }
        let parallel_kernels = estimate_parallel(&steps, n_slots, g.library());
        Ok(Plan {
            out_sizes: steps.iter().map(|st| checks::OutSize::of(&st.out_types)).collect(),
            steps,
            n_slots,
            named_dims: checks::named_dims(&inputs),
            inputs,
            fetch_slots,
            graph_inputs: g.inputs().into_iter().collect(),
            parallel_kernels,
        })
    }

    /// The slots of a run's feeds, checked (see `checks`): every feed is for an input of the
    /// graph and matches its type and the budget, every needed input is fed, and named dims
    /// agree.
    fn bind_feeds(&self, feeds: &[(ValueId, Tensor)], limit: Option<usize>) -> Result<Vec<(usize, Tensor)>> {
        let mut fed: Vec<Option<&Tensor>> = vec![None; self.inputs.len()];
        for (v, t) in feeds {
            match self.inputs.iter().position(|is| is.value == *v) {
                Some(i) => {
                    checks::check_feed(&self.inputs[i], t, limit)?;
                    fed[i] = Some(t);
                }
                None if self.graph_inputs.contains(v) => {} // an input these fetches do not need
                None => return Err(self.unknown_feed(*v)),
            }
        }
        checks::check_named_dims(&self.named_dims, &self.inputs, &fed)?;
        self.inputs
            .iter()
            .zip(fed)
            .map(|(is, t)| match t {
                Some(t) => Ok((is.slot, t.clone())),
                None => Err(Error::MissingFeed { name: is.name.clone(), value: is.value.to_string() }),
            })
            .collect()
    }

    /// The error for a feed that is not one of the graph's inputs: a handle with an input's
    /// slot but another stamp is stale or foreign, and must not be taken for that input.
    fn unknown_feed(&self, v: ValueId) -> Error {
        match self.graph_inputs.iter().find(|i| i.node.index() == v.node.index() && i.slot == v.slot) {
            Some(i) => Error::unknown_value(
                v,
                format!(
                    "feed for a node that is not in the graph this session runs (a handle of another graph or \
                     of a removed node; this graph's {i} is another input)"
                ),
            ),
            None => Error::UnknownFeed { value: v.to_string() },
        }
    }

    /// Whether a run of this plan from the current thread would be handed to a pfor worker
    /// thread (see [`ExecOptions::on_workers`]; the session also requires its previous run to
    /// have taken [`HAND_OFF_MIN_RUN`]).
    pub fn hands_off(&self) -> bool {
        workers::would_hand_off(self.parallel_kernels)
    }

    /// Number of steps (nodes that run).
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True if the plan runs nothing.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    fn run(&self, slots_init: Vec<(usize, Tensor)>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let limit = ctx.options.max_tensor_bytes;
        let _budget = crate::kernels::alloc::budget_scope(limit);
        let mut slots: Vec<Option<Tensor>> = vec![None; self.n_slots];
        for (s, t) in slots_init {
            slots[s] = Some(t);
        }
        for (si, step) in self.steps.iter().enumerate() {
            if matches!(step.op, Op::Input { .. }) {
                continue; // fed
            }
            limits::check(ctx.interrupt.as_ref(), || format!("before node {} ({})", step.node, step.op))?;
            let mut ins = Vec::with_capacity(step.inputs.len());
            for &(s, take) in &step.inputs {
                let t = if take { slots[s].take() } else { slots[s].clone() };
                ins.push(t.ok_or_else(|| Error::Verify(format!("{}: input slot {s} empty", step.node)))?);
            }
            checks::before_step(step, self.out_sizes[si], &ins, limit)?;
            let timing = ctx.profile.is_some().then(|| {
                let shapes: Vec<Vec<usize>> = ins.iter().map(|t| t.shape().to_vec()).collect();
                (shapes, Instant::now())
            });
            let outs = match &step.fused {
                Some(fused) => fused.eval(ins, ctx)?,
                None => step.op.eval(ins, ctx).map_err(|e| e.at_node(step.node, step.op.to_string()))?,
            };
            if let Some(l) = limit {
                checks::after_step(step, &outs, l)?;
            }
            if let (Some((shapes, t0)), Some(p)) = (timing, ctx.profile.as_deref_mut()) {
                let key = (self as *const Plan as usize, si);
                let label = || match &step.fused {
                    Some(f) => f.label(),
                    None => (step.op.to_string(), step.op.name().to_string()),
                };
                p.record(key, step.node, label, &shapes, &outs, t0.elapsed());
            }
            if outs.len() != step.outputs.len() {
                return Err(Error::Verify(format!(
                    "{} ({}): kernel returned {} outputs, expected {}",
                    step.node,
                    step.op,
                    outs.len(),
                    step.outputs.len()
                )));
            }
            for ((t, &s), ty) in outs.into_iter().zip(&step.outputs).zip(&step.out_types) {
                if ctx.options.check_types && (t.dtype() != ty.dtype || !ty.shape.matches(t.shape())) {
                    return Err(Error::RuntimeType {
                        op: step.op.name(),
                        expected: Box::new(ty.clone()),
                        got_dtype: t.dtype(),
                        got_shape: t.shape().to_vec(),
                    }
                    .at_node(step.node, step.op.to_string()));
                }
                slots[s] = Some(t);
            }
            for &s in &step.release {
                if let (Some(t), Some(pool)) = (slots[s].take(), ctx.pool.as_deref_mut()) {
                    pool.donate(t);
                }
            }
        }
        self.fetch_slots
            .iter()
            .map(|&s| slots[s].clone().ok_or_else(|| Error::Verify(format!("fetch slot {s} empty"))))
            .collect()
    }
}

/// [`workers::op_estimate`] summed over the plan's steps (a fused step counts once).
fn estimate_parallel(steps: &[Step], n_slots: usize, lib: &Library) -> usize {
    let mut slot_ty: Vec<Option<&TensorType>> = vec![None; n_slots];
    let mut seen = HashSet::new();
    let mut total = 0;
    for st in steps {
        for (&s, t) in st.outputs.iter().zip(&st.out_types) {
            slot_ty[s] = Some(t);
        }
        let ins: Vec<&TensorType> = st.inputs.iter().filter_map(|&(s, _)| slot_ty[s]).collect();
        total += workers::op_estimate(&st.op, &ins, &st.out_types, lib, &mut seen);
    }
    total.min(workers::SEVERAL)
}

/// Runtime context handed to stateful and control-flow kernels.
pub struct ExecCtx<'a> {
    vars: &'a mut HashMap<String, Tensor>,
    library: &'a Library,
    options: &'a ExecOptions,
    depth: usize,
    profile: Option<&'a mut Profile>,
    pool: Option<&'a mut BufferPool>,
    /// The run's deadline and cancel token, if any.
    interrupt: Option<limits::Interrupt>,
    stack: limits::StackGuard,
}

impl ExecCtx<'_> {
    /// Run a function on arguments (compiling and caching its plan on first use).
    pub fn run_function(&mut self, f: &Function, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let plan = match f.plan.get() {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(Plan::compile(&f.graph, &f.results, true)?);
                f.plan.get_or_init(|| p).clone()
            }
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

    /// The run's deadline and cancel token, if it has either.
    pub(crate) fn interrupt(&self) -> Option<&limits::Interrupt> {
        self.interrupt.as_ref()
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
        self.pool.as_deref_mut()?.take(len)
    }
}

impl<'a> ExecCtx<'a> {
    /// A context outside any session: no profile, pool, deadline or token.
    fn detached(vars: &'a mut HashMap<String, Tensor>, library: &'a Library, options: &'a ExecOptions) -> Self {
        ExecCtx {
            vars,
            library,
            options,
            depth: 0,
            profile: None,
            pool: None,
            interrupt: None,
            stack: limits::StackGuard::default(),
        }
    }
}

/// A compiled graph plus variable state: compile once, run many times.
pub struct Session {
    plan: Arc<Plan>,
    library: Library,
    vars: HashMap<String, Tensor>,
    options: ExecOptions,
    profile: Profile,
    pool: BufferPool,
    /// The last run's outputs (recycled at the next run if the caller dropped them).
    last_outputs: Vec<Tensor>,
    /// How long the last run took (decides whether the next one is handed to a worker).
    last_run: Option<Duration>,
}

impl Session {
    /// Compile `fetches` of `graph` with default options.
    pub fn new(graph: &Graph, fetches: &[ValueId]) -> Result<Session> {
        Session::with_options(graph, fetches, ExecOptions::default())
    }

    /// Compile with options.
    pub fn with_options(graph: &Graph, fetches: &[ValueId], options: ExecOptions) -> Result<Session> {
        for f in fetches {
            graph.check_value(*f)?;
        }
        let plan = Arc::new(Plan::compile_with(graph, fetches, false, options.fuse)?);
        let library = graph.library().clone();
        let vars = library.variables().into_iter().map(|v| (v.name, v.init)).collect();
        Ok(Session {
            plan,
            library,
            vars,
            options,
            profile: Profile::default(),
            pool: BufferPool::default(),
            last_outputs: Vec::new(),
            last_run: None,
        })
    }

    /// Run with feeds given by input value.
    pub fn run(&mut self, feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
        self.run_with(feeds, &RunOptions::default())
    }

    /// [`run`](Self::run) with a deadline and/or a cancel token: the run stops with
    /// `Error::DeadlineExceeded` / `Error::Cancelled` at the next check after either fires
    /// (before a step, at a loop iteration or a call; see `exec::limits`). Variables written
    /// before the stop keep their new values.
    pub fn run_with(&mut self, feeds: &[(ValueId, Tensor)], run: &RunOptions) -> Result<Vec<Tensor>> {
        let init = self.plan.bind_feeds(feeds, self.options.max_tensor_bytes)?;
        let plan = self.plan.clone();
        let recycle = self.options.recycle_buffers;
        for t in std::mem::take(&mut self.last_outputs) {
            self.pool.donate(t);
        }
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
            interrupt: run.interrupt(),
            stack: limits::StackGuard::default(),
        };
        let t0 = Instant::now();
        let r = if hand_off {
            workers::run(plan.parallel_kernels, || plan.run(init, &mut ctx))
        } else {
            plan.run(init, &mut ctx)
        };
        self.last_run = Some(t0.elapsed());
        if self.options.profile {
            self.profile.count_run();
        }
        if let (true, Ok(outs)) = (recycle, &r) {
            self.last_outputs = outs.iter().filter(|t| t.len() * 4 >= pool::MIN_BYTES).cloned().collect();
        }
        r
    }

    /// Run with feeds given by input name.
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
    pub fn variable(&self, name: &str) -> Result<Tensor> {
        self.vars.get(name).cloned().ok_or_else(|| Error::UnknownVariable { name: name.to_string() })
    }

    /// Set a variable (same dtype and shape as its definition).
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

    /// Whether the next run from this thread would be handed to a pfor worker thread
    /// (see [`ExecOptions::on_workers`]).
    pub fn hands_off(&self) -> bool {
        self.may_hand_off() && self.plan.hands_off()
    }

    /// The session's side of the hand-off rule: allowed, and the last run was long enough.
    fn may_hand_off(&self) -> bool {
        self.options.on_workers && self.last_run.is_none_or(|d| d >= HAND_OFF_MIN_RUN)
    }

    /// Number of nodes the plan runs.
    pub fn num_steps(&self) -> usize {
        self.plan.len()
    }

    /// Per-node timings recorded so far (empty unless [`ExecOptions::profile`] is on).
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Forget the timings recorded so far (e.g. after warm-up runs).
    pub fn clear_profile(&mut self) {
        self.profile.clear();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.profile.runs() > 0
            && let Some(top) = profile::env_top()
        {
            eprintln!("{}", self.profile.report(top));
        }
    }
}

/// Compile and run once: a convenience for tests and one-off evaluation.
pub fn run_once(graph: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
    Session::new(graph, fetches)?.run(feeds)
}

/// Evaluate a pure op on concrete inputs outside any run (no variables, no library): for
/// constant folding at graph-rewrite time.
pub(crate) fn eval_detached(op: &Op, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    let mut vars = HashMap::new();
    let library = Library::default();
    let options = ExecOptions::default();
    let mut ctx = ExecCtx::detached(&mut vars, &library, &options);
    op.eval(inputs, &mut ctx)
}

/// Run a function on arguments outside any session (no variables). Used for graph
/// `Function`s as batched primitive ops (e.g. by the auto-batching interpreter).
pub fn run_function(f: &Function, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
    let mut vars = HashMap::new();
    let library = f.graph.library().clone();
    let options = ExecOptions::default();
    let mut ctx = ExecCtx::detached(&mut vars, &library, &options);
    ctx.run_function(f, args)
}
