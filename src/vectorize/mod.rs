//! The pfor engine: converts a loop body traced for ONE iteration into a graph that
//! computes all iterations at once (paper §3).
//!
//! Invariants:
//! - every converted value is a [`Wrapped`]: `stacked` values have a leading axis of length
//!   n (the loop length, or the active subset's size inside control flow); unstacked
//!   values are loop-invariant, have their per-iteration shape and are NEVER tiled unless an
//!   op truly needs a stacked operand;
//! - the driver visits only nodes that depend on the loop index, in topological order; a
//!   node whose converted inputs are all unstacked and that is stateless is re-emitted as is
//!   (converters never see it);
//! - converters come from a [`Registry`] value passed in through [`PforOptions`] — never a
//!   global; a converter may decline an input pattern ([`Converted::Unhandled`]), and then
//!   the per-op loop fallback runs that op only, with a warning — or an error under
//!   [`Fallback::Error`], which tests use so a missing converter fails loudly.
//!
//! Layering: `vectorize` (with the converters it registers) sits above [`crate::autobatch`].
//! The recursion hand-off ([`handoff`]: a recursive call becomes one node running an
//! auto-batching program) lives here, because it needs both the converters (to vectorize
//! straight-line runs) and the auto-batching VM; `autobatch` imports neither `vectorize`
//! nor `converters`, so the modules form no cycle.

mod ctx;
mod derived;
mod driver;
pub mod handoff;
mod one_row;
mod products;
mod registry;

pub use crate::passes::{SimplifyReport, simplify, simplify_since};
pub use ctx::{ConvertCtx, LoopInfo, flatten_first_two, tile};
pub use derived::{broadcast_convert, derived_convert, shift_axis};
pub(crate) use driver::pfor_outputs;
pub use driver::{
    FallbackRecord, PforReport, convert_body, convert_function, convert_function_masked, pfor, pfor_with,
    pfor_with_report,
};
pub use products::{ProductReport, contract_since};
pub use registry::{Converted, Converter, OpKey, Registry};

use std::sync::Arc;

use crate::ir::ValueId;

/// A converted value: the value in the output graph and whether it is stacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wrapped {
    /// The value.
    pub value: ValueId,
    /// True if it has a leading axis of length n.
    pub stacked: bool,
}

impl Wrapped {
    /// A stacked value.
    pub fn stacked(value: ValueId) -> Wrapped {
        Wrapped { value, stacked: true }
    }
    /// A loop-invariant value.
    pub fn unstacked(value: ValueId) -> Wrapped {
        Wrapped { value, stacked: false }
    }
}

/// What to do when no converter handles an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Fail with `Error::NoConverter` naming the op and node (use in tests).
    Error,
    /// Loop over iterations for that op only, printing a warning to stderr.
    #[default]
    Warn,
    /// Loop over iterations for that op only, silently (the warning is still recorded
    /// in the conversion report).
    Silent,
}

/// How conditionals and while loops with a loop-variant predicate are vectorized. In every
/// mode pfor fails only where the loop fails: no op that may raise on values
/// ([`Op::raises`](crate::ops::Op::raises)) runs on values of an iteration the loop would not
/// run it for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ControlFlowMode {
    /// Partition the active iterations; run each branch / loop step only on the iterations
    /// that take it (never evaluates an untaken branch).
    Subset,
    /// Run every branch on all iterations and select (cheap branches, no gathers); a cond
    /// with a branch that may raise or has side effects takes the subset form. While loops
    /// (without side effects) run until no iteration is active; finished iterations'
    /// raising ops read an active one's inputs.
    Mask,
    /// Mask for conds whose branches are small, free of control flow and side effects, and
    /// cannot raise; subset otherwise (while loops: subset).
    #[default]
    Auto,
}

/// How random ops behave inside pfor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Randomness {
    /// Each iteration draws differently (its key is folded with the iteration index).
    #[default]
    Different,
    /// Every iteration draws the same values (as the unvectorized loop with one key).
    Same,
    /// Random ops inside pfor are an error.
    Error,
}

/// Options of a pfor conversion.
#[derive(Clone)]
pub struct PforOptions {
    /// Fallback policy.
    pub fallback: Fallback,
    /// Convert in chunks of this many iterations (bounds peak memory, like TF's
    /// `parallel_iterations`); `None` = all at once.
    pub chunk_size: Option<usize>,
    /// Control-flow conversion mode.
    pub control_flow: ControlFlowMode,
    /// Randomness policy.
    pub randomness: Randomness,
    /// Converters (default: [`Registry::builtin`]).
    pub registry: Arc<Registry>,
    /// Run [`simplify_since`] on the conversion (default: on): cancel reshape/transpose
    /// chains, drop identities and redundant broadcasts, remove the nodes the result does
    /// not read (the traced body included, so handles to body values taken inside the
    /// body closure may become invalid; turn this off to keep them).
    pub simplify: bool,
    /// With `simplify`, also run the product rewrites [`contract_since`] (default: on):
    /// sums over the pfor axis and squared norms of per-iteration matrix products (e.g.
    /// per-example dense-layer gradients) computed without the stacked products.
    pub products: bool,
    /// At a loop length statically 1, emit the body itself on iteration 0 (default: on;
    /// see [`PforReport::one_row`]): the loop's program without its bookkeeping, never
    /// slower than the loop. The conversion still runs first, so its errors are raised.
    pub one_row: bool,
}

impl Default for PforOptions {
    fn default() -> Self {
        PforOptions {
            fallback: Fallback::default(),
            chunk_size: None,
            control_flow: ControlFlowMode::default(),
            randomness: Randomness::default(),
            registry: Arc::new(Registry::builtin()),
            simplify: true,
            products: true,
            one_row: true,
        }
    }
}

impl PforOptions {
    /// Options for tests: fallback is an error.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let xs = g.constant(Tensor::randn_f64(&[4, 3], 0)?);
    /// // an op without a converter would be an error naming it, not a silent per-op loop
    /// let out = pfor_with(&mut g, 4, &PforOptions::strict(), |g, i| {
    ///     let x = g.gather(xs, i, 0)?;
    ///     Ok(vec![g.sin(x)?])
    /// })?;
    /// # let _ = out;
    /// # Ok(())
    /// # }
    /// ```
    pub fn strict() -> PforOptions {
        PforOptions { fallback: Fallback::Error, ..PforOptions::default() }
    }
    /// With a fallback policy.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// let quiet = PforOptions::default().with_fallback(Fallback::Silent); // loop without a warning
    /// assert_eq!(quiet.fallback, Fallback::Silent);
    /// ```
    pub fn with_fallback(mut self, f: Fallback) -> Self {
        self.fallback = f;
        self
    }
    /// With a chunk size.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// // 1000 iterations converted as a loop of 10 vectorized chunks of 100
    /// let opts = PforOptions::default().with_chunk_size(100);
    /// assert_eq!(opts.chunk_size, Some(100));
    /// ```
    pub fn with_chunk_size(mut self, c: usize) -> Self {
        self.chunk_size = Some(c);
        self
    }
    /// With a control-flow mode.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// use pfor::vectorize::ControlFlowMode;
    ///
    /// // run both branches of a loop-variant `cond` on every iteration and select
    /// let opts = PforOptions::default().with_control_flow(ControlFlowMode::Mask);
    /// assert_eq!(opts.control_flow, ControlFlowMode::Mask);
    /// ```
    pub fn with_control_flow(mut self, m: ControlFlowMode) -> Self {
        self.control_flow = m;
        self
    }
    /// With a randomness policy.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// use pfor::vectorize::Randomness;
    ///
    /// // every iteration draws the same numbers, as the loop with one key would
    /// let opts = PforOptions::default().with_randomness(Randomness::Same);
    /// assert_eq!(opts.randomness, Randomness::Same);
    /// ```
    pub fn with_randomness(mut self, r: Randomness) -> Self {
        self.randomness = r;
        self
    }
    /// With the post-conversion simplification pass on or off.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// // keep the traced body's nodes (and the handles taken inside the body) alive
    /// let opts = PforOptions::default().with_simplify(false);
    /// assert!(!opts.simplify);
    /// ```
    pub fn with_simplify(mut self, on: bool) -> Self {
        self.simplify = on;
        self
    }
    /// With the product rewrites (see [`PforOptions::products`]) on or off.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// let opts = PforOptions::default().with_products(false); // materialize per-example products
    /// assert!(opts.simplify && !opts.products);
    /// ```
    pub fn with_products(mut self, on: bool) -> Self {
        self.products = on;
        self
    }
    /// With the static one-row form (see [`PforOptions::one_row`]) on or off.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// // at n = 1, keep the vectorized conversion (e.g. to test a converter at one row)
    /// let opts = PforOptions::strict().with_one_row(false);
    /// assert!(!opts.one_row);
    /// ```
    pub fn with_one_row(mut self, on: bool) -> Self {
        self.one_row = on;
        self
    }
    /// With a registry.
    ///
    /// ```
    /// use pfor::prelude::*;
    /// use pfor::vectorize::Registry;
    ///
    /// // the built-in converters (a value: add or replace converters before passing it)
    /// let opts = PforOptions::strict().with_registry(Registry::builtin());
    /// # let _ = opts;
    /// ```
    pub fn with_registry(mut self, r: Registry) -> Self {
        self.registry = Arc::new(r);
        self
    }
}
