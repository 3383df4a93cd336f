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
//!   silently wrong answer; small f32 unary / binary steps of fixed types run on the slots
//!   directly, their operands checked and their result typed by construction (see `fast`:
//!   no per-step vectors, type check or reference-count traffic, the result written into a
//!   dead operand), bit-identical to the generic kernels;
//! - a run with a deadline or a cancel token ([`RunOptions`]) checks them before every
//!   step, at every loop iteration and every call (see `limits`); a `call` also checks the
//!   native stack left, so deep recursion is an error, never a stack overflow;
//! - feeds are checked at the edge (dtype, declared shape, named dims agreeing across the
//!   inputs of one run) and, with [`ExecOptions::max_tensor_bytes`], every tensor of a run
//!   against the budget — each step's outputs before its kernel allocates them where their
//!   sizes are known (see `checks`);
//! - with [`ExecOptions::fuse`] (the default), `conv2d → bias_add → relu` chains (and a
//!   channel concat of them, each conv writing its slice of the output) and connected groups
//!   of f32 elementwise ops run as one fused step each (see `fuse`);
//!   results are bit-identical to the unfused plan;
//! - a `matmul` whose right operand is a constant reads a row-major copy of it, made once
//!   at compile time (see `pretranspose`; [`ExecOptions::pretranspose`]);
//! - every knob is a field of [`ExecOptions`], held by the session and handed to ops and
//!   kernels through the [`EvalCtx`](crate::ops::EvalCtx) it implements; function bodies
//!   are compiled with the session's options (see `plans`); nothing reads the environment
//!   except [`ExecOptions::from_env`] (which [`Default`] calls).

mod checks;
mod ctx;
mod fast;
mod fetch;
mod fuse;
pub mod limits;

mod plans;
mod pool;
mod pretranspose;
mod profile;
mod session;
pub(crate) mod workers;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hashbrown::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::ir::{Function, Graph, Library, NodeId, ValueId};
use crate::kernels::{KernelOptions, WinogradSchedule};
use crate::ops::{FunctionRunner, Op};
use crate::tensor::{Tensor, TensorType};
pub use ctx::ExecCtx;
pub use fetch::Fetched;
pub use limits::{CancelToken, RunOptions};
use plans::FunctionPlans;
use pool::BufferPool;
pub use profile::{Profile, ProfileEntry};
pub use session::Session;
pub use workers::Workers;

/// Execution options: every knob of the executor and its kernels (the README's knob table
/// lists them with their environment variables).
///
/// [`ExecOptions::builtin`] is the built-in configuration; [`ExecOptions::from_env`] is that
/// with the `PFOR_*` environment variables applied (read once per call, nowhere else); and
/// [`Default`] is `from_env()`, so `Session::new` honours the A/B switches without code
/// changes. Ops evaluated outside any session (`XOp::eval`, constant folding) take the
/// built-in kernel choices.
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
    /// Time every executed node (see [`Profile`]). Off built in; `PFOR_PROFILE` turns it on.
    pub profile: bool,
    /// Print the profile's `k` most expensive nodes to stderr when the session is dropped
    /// (if it ran). `None` built in; `PFOR_PROFILE=k` sets it (25 when `k` is not a number).
    pub profile_report: Option<usize>,
    /// Recycle large buffers (≥ 4 MiB) between kernels of a run and from the previous run's
    /// outputs once the caller has dropped them (see `exec::pool`): avoids page-faulting
    /// big fresh allocations on every run.
    pub recycle_buffers: bool,
    /// Fuse `conv2d → [reshape] → bias_add → [reshape] → relu` chains (and a channel
    /// `concat` of their results, each conv writing its slice of the output), and connected
    /// groups of f32 unary / binary / `bias_add` ops of one shape, into one step each (a value is
    /// fused away only when it is not fetched and nothing else reads it; results are
    /// bit-identical). Function bodies follow it too. On built in; `PFOR_NO_FUSE` turns it
    /// off.
    pub fuse: bool,
    /// Hand a run whose plan issues several parallel kernels to one of pfor's worker threads
    /// (it then takes part in every parallel kernel instead of sleeping between them; see
    /// `exec::workers`); results are identical. Only when the session's previous run took at
    /// least [`HAND_OFF_MIN_RUN`] (the hand-off itself costs a cross-thread round trip). The
    /// pool is the session's [`Workers`] ([`Session::set_workers`]). On built in;
    /// `PFOR_ON_CALLER` turns it off.
    pub on_workers: bool,
    /// While a run handed to the workers (see [`on_workers`](Self::on_workers)) is going,
    /// keep the pool's other threads polling for its parallel kernels' jobs instead of
    /// sleeping between kernels (`exec::workers`: a wake-up per kernel otherwise; a core
    /// stays busy for the run's length, as with ONNX Runtime's spinning pool); results are
    /// identical. On built in; `PFOR_NO_SPIN` turns it off.
    pub warm_workers: bool,
    /// Run f32 convs with 5x5 stride-1 filters and channel counts that are multiples of 16
    /// by Winograd F(2x2, 5x5) on AVX-512 CPUs (2.8x fewer multiplies; rounding differs from
    /// a direct sum's, see `ops::conv`). On built in; `PFOR_NO_WINOGRAD` turns it off; off,
    /// those convs run as im2col + GEMM.
    pub winograd: bool,
    /// Run batched `Aᵀ B` products of depth-major items (per-example weight gradients, the
    /// fused patch product) with the crate's AVX-512 depth-major GEMM kernel where it takes
    /// the shapes (see `kernels::gemm::atb_batched`), else with faer. On built in;
    /// `PFOR_NO_ATB` turns it off.
    pub atb: bool,
    /// Run f32 convs over more than 4 input channels that Winograd does not take by the
    /// implicit-GEMM kernel on AVX-512 CPUs (the taps read from the input, no patch matrix;
    /// see `kernels::conv::implicit`): the same sum in the same order for every batch size
    /// and filter form. On built in; `PFOR_NO_IMPLICIT_GEMM` turns it off; off, those convs
    /// run as im2col + GEMM.
    pub implicit_gemm: bool,
    /// The Winograd kernel's schedule ([`WinogradSchedule`]: tile- or point-major, `Auto`
    /// by its rule); the same bits whichever runs. `Auto` built in;
    /// `PFOR_WINOGRAD_SCHEDULE=tile|point` forces one (for measuring the rule).
    pub winograd_schedule: WinogradSchedule,
    /// Run 3x3 convs by Winograd F(4x4, 3x3) only where its cost rule picks it (enough
    /// tiles; see `kernels::conv::winograd`); off, wherever the kernel takes them (for
    /// measuring the rule). On built in; `PFOR_WINOGRAD3=always` turns it off.
    pub winograd3_rule: bool,
    /// Give every `matmul` whose right operand is a constant a row-major copy of it, made
    /// once when the plan compiles (see `exec::pretranspose`). On built in;
    /// `PFOR_NO_PRETRANSPOSE` turns it off.
    pub pretranspose: bool,
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

impl ExecOptions {
    /// The built-in options: no environment variable read.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// // the built-in configuration, whatever the environment says, with a memory budget
    /// let opts = ExecOptions { max_tensor_bytes: Some(1 << 30), ..ExecOptions::builtin() };
    /// assert!(opts.fuse && opts.recycle_buffers && !opts.profile);
    /// ```
    pub const fn builtin() -> ExecOptions {
        ExecOptions {
            max_call_depth: 200,
            max_while_iterations: None,
            check_types: true,
            profile: false,
            profile_report: None,
            recycle_buffers: true,
            fuse: true,
            on_workers: true,
            warm_workers: true,
            winograd: true,
            atb: true,
            implicit_gemm: true,
            winograd_schedule: WinogradSchedule::Auto,
            winograd3_rule: true,
            pretranspose: true,
            max_tensor_bytes: None,
        }
    }

    /// [`builtin`](Self::builtin) with the `PFOR_*` environment variables applied (see the
    /// README's knob table): the one place the executor reads the environment.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let y = g.exp(x)?;
    /// // what `Session::new` uses: the PFOR_* variables (PFOR_PROFILE, PFOR_NO_FUSE, ...) applied
    /// let mut s = Session::with_options(&g, &[y], ExecOptions::from_env())?;
    /// s.run(&[(x, Tensor::zeros(DType::F32, &[3])?)])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_env() -> ExecOptions {
        ExecOptions::from_vars(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// [`builtin`](Self::builtin) with the `PFOR_*` variables that `var` returns applied
    /// (`var(name)` is the variable's value, `None` when unset): [`from_env`](Self::from_env)
    /// with another source.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// // as if PFOR_NO_FUSE and PFOR_PROFILE=10 were set
    /// let opts = ExecOptions::from_vars(|name| match name {
    ///     "PFOR_NO_FUSE" => Some(String::new()),
    ///     "PFOR_PROFILE" => Some("10".into()),
    ///     _ => None,
    /// });
    /// assert!(!opts.fuse && opts.profile && opts.profile_report == Some(10));
    /// ```
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> ExecOptions {
        let set = |name: &str| var(name).is_some();
        let profile_report = var("PFOR_PROFILE").map(|v| profile::report_top(&v));
        ExecOptions {
            profile: profile_report.is_some(),
            profile_report,
            fuse: !set("PFOR_NO_FUSE"),
            on_workers: !set("PFOR_ON_CALLER"),
            warm_workers: !set("PFOR_NO_SPIN"),
            winograd: !set("PFOR_NO_WINOGRAD"),
            atb: !set("PFOR_NO_ATB"),
            implicit_gemm: !set("PFOR_NO_IMPLICIT_GEMM"),
            winograd_schedule: var("PFOR_WINOGRAD_SCHEDULE")
                .map_or(WinogradSchedule::Auto, |v| WinogradSchedule::from_name(&v)),
            winograd3_rule: var("PFOR_WINOGRAD3").is_none_or(|v| v != "always"),
            pretranspose: !set("PFOR_NO_PRETRANSPOSE"),
            ..ExecOptions::builtin()
        }
    }

    /// The kernel-level knobs, as kernels take them.
    #[inline]
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// let k = ExecOptions { winograd: false, ..ExecOptions::builtin() }.kernel_options();
    /// assert!(!k.winograd && k.atb);
    /// ```
    pub fn kernel_options(&self) -> KernelOptions {
        KernelOptions {
            winograd: self.winograd,
            atb: self.atb,
            implicit_gemm: self.implicit_gemm,
            winograd_schedule: self.winograd_schedule,
            winograd3_rule: self.winograd3_rule,
        }
    }
}

impl Default for ExecOptions {
    /// [`ExecOptions::from_env`].
    fn default() -> Self {
        ExecOptions::from_env()
    }
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
    /// Per step: its fast form, if it has one (see `fast`).
    fast: Vec<Option<fast::FastStep>>,
}

impl Plan {
    /// Compile a plan for `fetches` (with `keep_effects`, side-effecting nodes always run),
    /// with the default options ([`ExecOptions::default`]).
    ///
    /// ```
    /// use pfor::exec::Plan;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let unused = g.sin(x)?; // not fetched: pruned
    /// let y = g.exp(x)?;
    /// let plan = Plan::compile(&g, &[y], false)?;
    /// assert_eq!(plan.len(), 2); // the input and the exp
    /// # let _ = unused;
    /// # Ok(())
    /// # }
    /// ```
    pub fn compile(g: &Graph, fetches: &[ValueId], keep_effects: bool) -> Result<Plan> {
        Plan::compile_options(g, fetches, keep_effects, &ExecOptions::default())
    }

    /// [`Plan::compile`], fusing only when `fuse`.
    ///
    /// ```
    /// use pfor::exec::Plan;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let y = g.exp(x)?;
    /// let y = g.sin(y)?;
    /// let plain = Plan::compile_with(&g, &[y], false, false)?; // no fusion: one step per node
    /// assert_eq!(plain.len(), 3); // the input, exp and sin
    /// # Ok(())
    /// # }
    /// ```
    pub fn compile_with(g: &Graph, fetches: &[ValueId], keep_effects: bool, fuse: bool) -> Result<Plan> {
        Plan::compile_options(g, fetches, keep_effects, &ExecOptions { fuse, ..ExecOptions::default() })
    }

    /// [`Plan::compile`] with `options` (those that shape a plan: `fuse`, `pretranspose`).
    ///
    /// ```
    /// use pfor::exec::Plan;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let y = g.exp(x)?;
    /// let plan = Plan::compile_options(&g, &[y], false, &ExecOptions::builtin())?;
    /// assert!(!plan.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn compile_options(g: &Graph, fetches: &[ValueId], keep_effects: bool, options: &ExecOptions) -> Result<Plan> {
        let mut roots: Vec<ValueId> = fetches.to_vec();
        if keep_effects {
            for n in g.node_ids() {
                if g.node(n)?.op.has_side_effects() {
                    roots.push(ValueId { node: n, slot: 0 });
                }
            }
        }
        // Constant folding happens here, on a copy: the user's graph stays differentiable
        // w.r.t. its constants (see `passes::fold`).
        match crate::passes::folded_copy(g, &roots, options.max_tensor_bytes)? {
            Some(folded) => Self::compile_roots(&folded, fetches, &roots, options),
            None => Self::compile_roots(g, fetches, &roots, options),
        }
    }

    /// [`Plan::compile_options`] of the ancestors of `roots` (the fetches and kept effects).
    fn compile_roots(g: &Graph, fetches: &[ValueId], roots: &[ValueId], options: &ExecOptions) -> Result<Plan> {
        let fuse = options.fuse;
        let needed: HashSet<NodeId> = g.ancestors(roots)?.into_iter().collect();
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
        if options.pretranspose {
            pretranspose::pretranspose_constants(&mut steps, &mut n_slots, &pinned);
        }
        if fuse {
            fuse::conv_chains(&mut steps, &pinned, options.kernel_options());
            fuse::concat_slices(&mut steps, &pinned);
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
        let slot_ty = slot_types(&steps, n_slots);
        let fast = steps
            .iter()
            .map(|st| {
                let ins: Vec<Option<&TensorType>> = st.inputs.iter().map(|&(s, _)| slot_ty[s]).collect();
                fast::FastStep::of(st, &ins)
            })
            .collect();
        Ok(Plan {
            fast,
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
    /// have taken [`HAND_OFF_MIN_RUN`]), on the shared default [`Workers`].
    ///
    /// ```
    /// use pfor::exec::Plan;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let y = g.exp(x)?;
    /// // one small elementwise kernel: not worth a cross-thread hand-off
    /// assert!(!Plan::compile(&g, &[y], false)?.hands_off());
    /// # Ok(())
    /// # }
    /// ```
    pub fn hands_off(&self) -> bool {
        Workers::shared().would_hand_off(self.parallel_kernels)
    }

    /// Number of steps (nodes that run).
    ///
    /// ```
    /// use pfor::exec::Plan;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let y = g.exp(x)?;
    /// let z = g.neg(y)?;
    /// assert_eq!(Plan::compile_with(&g, &[z], false, false)?.len(), 3); // x, exp, neg
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True if the plan runs nothing.
    ///
    /// ```
    /// use pfor::exec::Plan;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// assert!(Plan::compile(&g, &[], false)?.is_empty()); // nothing fetched
    /// assert!(!Plan::compile(&g, &[x], false)?.is_empty()); // the input is a step
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    fn run(&self, slots_init: Vec<(usize, Tensor)>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let limit = ctx.options.max_tensor_bytes;
        let _budget = crate::kernels::alloc::budget_scope(limit);
        let fast_ok = ctx.profile.is_none();
        let mut slots: Vec<Option<Tensor>> = vec![None; self.n_slots];
        for (s, t) in slots_init {
            slots[s] = Some(t);
        }
        for (si, step) in self.steps.iter().enumerate() {
            if matches!(step.op, Op::Input { .. }) {
                continue; // fed
            }
            limits::check(ctx.interrupt.as_ref(), || format!("before node {} ({})", step.node, step.op))?;
            if fast_ok
                && let Some(f) = &self.fast[si]
                && f.fits(limit)
                && f.run(&step.inputs, step.outputs[0], &mut slots)
                    .map_err(|e| e.at_node(step.node, step.op.to_string()))?
            {
                release(step, &mut slots, ctx);
                continue;
            }
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
            release(step, &mut slots, ctx);
        }
        self.fetch_slots
            .iter()
            .map(|&s| slots[s].clone().ok_or_else(|| Error::Verify(format!("fetch slot {s} empty"))))
            .collect()
    }
}

/// Release the slots `step` is the last reader of (offering their buffers to the pool).
#[inline]
fn release(step: &Step, slots: &mut [Option<Tensor>], ctx: &mut ExecCtx<'_>) {
    for &s in &step.release {
        if let (Some(t), Some(pool)) = (slots[s].take(), ctx.pool.as_deref_mut()) {
            pool.donate(t);
        }
    }
}

/// The static type of each slot of `steps` (`None`: written by no step).
fn slot_types(steps: &[Step], n_slots: usize) -> Vec<Option<&TensorType>> {
    let mut slot_ty: Vec<Option<&TensorType>> = vec![None; n_slots];
    for st in steps {
        for (&s, t) in st.outputs.iter().zip(&st.out_types) {
            slot_ty[s] = Some(t);
        }
    }
    slot_ty
}

/// [`workers::op_estimate`] summed over the plan's steps (a fused step counts once).
fn estimate_parallel(steps: &[Step], n_slots: usize, lib: &Library) -> usize {
    let slot_ty = slot_types(steps, n_slots);
    let mut seen = HashSet::new();
    let mut total = 0;
    for st in steps {
        let ins: Vec<&TensorType> = st.inputs.iter().filter_map(|&(s, _)| slot_ty[s]).collect();
        total += workers::op_estimate(&st.op, &ins, &st.out_types, lib, &mut seen);
    }
    total.min(workers::SEVERAL)
}

/// Compile and run once: a convenience for tests and one-off evaluation.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F64, [3]);
/// let s = g.sum_all(x)?;
/// let r = run_once(&g, &[s], &[(x, Tensor::vec1(&[1.0f64, 2.0, 3.0]))])?;
/// assert_eq!(r[0].scalar_f64()?, 6.0);
/// # Ok(())
/// # }
/// ```
pub fn run_once(graph: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
    Session::new(graph, fetches)?.run(feeds)
}

/// Evaluate a pure op on concrete inputs outside any run (no variables, no library): for
/// constant folding at graph-rewrite time, with the built-in options.
pub(crate) fn eval_detached(op: &Op, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    const BUILTIN: ExecOptions = ExecOptions::builtin();
    let mut vars = HashMap::new();
    let library = Library::default();
    let options = BUILTIN;
    let mut ctx = ExecCtx::detached(&mut vars, &library, &options);
    op.eval(inputs, &mut ctx)
}

/// Run a function on arguments outside any session (no variables), with the built-in
/// options ([`ExecOptions::builtin`]: no environment read on this path). Plans come from a
/// process-wide cache (see `plans`). Inside a run, functions run with the session's options
/// ([`EvalCtx::run_function`](crate::ops::EvalCtx::run_function), and the auto-batching
/// primops through [`FunctionRunner`]s).
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let g = Graph::new();
/// let t = TensorType::new(DType::F64, [2]);
/// // f(a, b) = a * b
/// let f = Function::build(&g, &[t.clone(), t], |g, p| Ok(vec![g.mul(p[0], p[1])?]))?;
/// let r = pfor::run_function(&f, vec![Tensor::vec1(&[2.0f64, 3.0]), Tensor::vec1(&[4.0f64, 5.0])])?;
/// assert_eq!(r[0].to_f64_vec(), [8.0, 15.0]);
/// # Ok(())
/// # }
/// ```
pub fn run_function(f: &Function, args: Vec<Tensor>) -> Result<Vec<Tensor>> {
    const BUILTIN: ExecOptions = ExecOptions::builtin();
    run_function_with(f, args, &BUILTIN)
}

/// [`run_function`] with `options`.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let g = Graph::new();
/// let f = Function::build(&g, &[TensorType::new(DType::F32, [3])], |g, p| Ok(vec![g.exp(p[0])?]))?;
/// let opts = ExecOptions { max_tensor_bytes: Some(8), ..ExecOptions::builtin() }; // 8 bytes: too small
/// let e = pfor::exec::run_function_with(&f, vec![Tensor::zeros(DType::F32, &[3])?], &opts).unwrap_err();
/// assert!(matches!(e.root(), Error::OutOfMemory { .. }), "{e}");
/// # Ok(())
/// # }
/// ```
pub fn run_function_with(f: &Function, args: Vec<Tensor>, options: &ExecOptions) -> Result<Vec<Tensor>> {
    run_detached(f, args, options, None)
}

/// Run `f` outside any session with `options`, under a run's deadline and cancel token.
fn run_detached(
    f: &Function,
    args: Vec<Tensor>,
    options: &ExecOptions,
    interrupt: Option<limits::Interrupt>,
) -> Result<Vec<Tensor>> {
    let mut vars = HashMap::new();
    let library = f.graph.library().clone();
    let mut ctx = ExecCtx::detached(&mut vars, &library, options);
    ctx.interrupt = interrupt;
    ctx.run_function(f, args)
}

/// A [`FunctionRunner`] with `options` and a run's deadline and cancel token.
fn runner(options: ExecOptions, interrupt: Option<limits::Interrupt>) -> FunctionRunner {
    FunctionRunner::new(move |f, args| run_detached(f, args, &options, interrupt.clone()))
}

impl ExecOptions {
    /// A [`FunctionRunner`] running functions with these options: set it as
    /// [`ExecConfig::functions`](crate::autobatch::ExecConfig::functions) so an
    /// auto-batching program's graph-function primops run with them.
    pub fn function_runner(&self) -> FunctionRunner {
        runner(self.clone(), None)
    }
}
