//! Graph passes, run as ONE pipeline: each pass is a [`Pass`] with a name, a [`Pipeline`]
//! runs them in a declared order, and — in debug builds, or when asked — verifies the graph
//! ([`Graph::verify`]) before the first pass and after each, so a pass that breaks an IR
//! invariant is named in the error instead of surfacing later as a wrong shape or a panic
//! somewhere else.
//!
//! The passes (the [`simplify`] pipeline, in this order):
//! - `dead` (`dead.rs`): drop the region nodes nothing reads;
//! - `rewrite` (`simplify.rs`): one forward sweep of local rewrites — forward
//!   identities and no-op views, fold view and transpose chains, bypass redundant
//!   broadcasts (pure ops on constants are not folded here: [`fold_constants`] does that,
//!   and plans run it on their own copy of the graph, see `fold.rs`);
//! - `narrow` (`narrow.rs`): narrow a matmul to the one column range a split of its result
//!   reads;
//! - `dead` again: what the rewrites left unread.
//!
//! Every pass matches its patterns through [`pattern`] (the toolkit the plan-level fusions in
//! `exec::fuse` use too) and every cost decision goes through [`cost`].
//!
//! Invariants of the pipeline:
//! - a pass sees the region (all nodes, or those added since a [`Graph::mark`]) and the
//!   current outputs in a [`PassCtx`]; it rewrites or removes only region nodes and keeps
//!   [`PassCtx::outputs`] pointing at equal values;
//! - with verification on, the graph verifies before and after every pass; a failure
//!   after pass `p` is `Error::Verify` naming `p` (the input is checked first, so a graph
//!   that was already broken is not blamed on the first pass);
//! - verification is on by default only with `debug_assertions` (release runs pay nothing).

pub mod cost;
mod dead;
mod fold;
mod narrow;
pub mod pattern;
mod simplify;

pub use simplify::SimplifyReport;

use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, ValueId};

/// What a pass works on besides the graph: the region, the outputs, and the counters.
#[derive(Clone, Debug, Default)]
pub struct PassCtx {
    /// The values that must keep their meaning (updated when a pass replaces one).
    pub outputs: Vec<ValueId>,
    /// Only nodes added at or after this [`Graph::mark`] are rewritten or removed (`None`:
    /// every node).
    pub since: Option<u64>,
    /// What the passes did so far.
    pub report: SimplifyReport,
}

impl PassCtx {
    /// Whether node `n` is in the region.
    pub fn in_region(&self, g: &Graph, n: NodeId) -> bool {
        self.since.is_none_or(|m| g.added_since(n, m))
    }

    /// The region's nodes, in creation order.
    pub fn region(&self, g: &Graph) -> Vec<NodeId> {
        g.node_ids().into_iter().filter(|&n| self.in_region(g, n)).collect()
    }
}

/// One graph pass.
pub trait Pass {
    /// Its name, as errors and reports show it.
    fn name(&self) -> &str;
    /// Run on `g` (see the [module](self) invariants).
    fn run(&self, g: &mut Graph, cx: &mut PassCtx) -> Result<()>;
}

/// Passes run in a declared order (see the [module](self) docs).
pub struct Pipeline {
    passes: Vec<Box<dyn Pass + Send + Sync>>,
    verify: bool,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new()
    }
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").field("passes", &self.names()).field("verify", &self.verify).finish()
    }
}

impl Pipeline {
    /// No passes; verification on in debug builds.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::passes::Pipeline;
    ///
    /// assert!(Pipeline::new().names().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Pipeline {
        Pipeline { passes: Vec::new(), verify: cfg!(debug_assertions) }
    }

    /// The simplification pipeline: `dead`, `rewrite`, `narrow`, `dead`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::passes::Pipeline;
    ///
    /// assert_eq!(Pipeline::simplify().names(), ["dead", "rewrite", "narrow", "dead"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn simplify() -> Pipeline {
        Pipeline::new().then(dead::Dead).then(simplify::Rewrite).then(narrow::Narrow).then(dead::Dead)
    }

    /// Append `pass`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::passes::{Pass, PassCtx, Pipeline};
    ///
    /// /// A pass that only counts nodes.
    /// struct Count;
    /// impl Pass for Count {
    ///     fn name(&self) -> &str {
    ///         "count"
    ///     }
    ///     fn run(&self, g: &mut Graph, _: &mut PassCtx) -> Result<()> {
    ///         println!("{} nodes", g.num_nodes());
    ///         Ok(())
    ///     }
    /// }
    /// let p = Pipeline::simplify().then(Count);
    /// assert_eq!(p.names().last(), Some(&"count"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn then(mut self, pass: impl Pass + Send + Sync + 'static) -> Pipeline {
        self.passes.push(Box::new(pass));
        self
    }

    /// Verify before and after every pass (`true`) or never (`false`), whatever the build.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::passes::Pipeline;
    ///
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let t = g.transpose(x, &[0])?; // an identity transpose
    /// let rep = Pipeline::simplify().with_verify(true).run(&mut g, &[t], None)?;
    /// assert_eq!(rep.outputs, [x]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_verify(mut self, on: bool) -> Pipeline {
        self.verify = on;
        self
    }

    /// The passes' names, in order.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::passes::Pipeline;
    ///
    /// assert_eq!(Pipeline::simplify().names().len(), 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn names(&self) -> Vec<&str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Run every pass on `g` for `outputs` (region: nodes added since `since`, or all).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::passes::Pipeline;
    ///
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let mark = g.mark();
    /// let t = g.transpose(x, &[1, 0])?;
    /// let tt = g.transpose(t, &[1, 0])?; // cancels out
    /// let rep = Pipeline::simplify().run(&mut g, &[tt], Some(mark))?;
    /// assert_eq!(rep.outputs, [x]); // use the returned outputs: the transposes are gone
    /// assert!(g.check_value(tt).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(&self, g: &mut Graph, outputs: &[ValueId], since: Option<u64>) -> Result<SimplifyReport> {
        for o in outputs {
            g.check_value(*o)?;
        }
        if self.verify {
            g.verify().map_err(|e| Error::Verify(format!("graph invalid before the pass pipeline: {e}")))?;
        }
        let mut cx = PassCtx { outputs: outputs.to_vec(), since, report: SimplifyReport::default() };
        for p in &self.passes {
            p.run(g, &mut cx)?;
            if self.verify {
                g.verify().map_err(|e| Error::Verify(format!("pass `{}` broke the graph: {e}", p.name())))?;
            }
        }
        cx.report.outputs = cx.outputs;
        Ok(cx.report)
    }
}

/// Simplify the whole graph for `outputs` (the [`Pipeline::simplify`] passes) and remove
/// every node that no output needs (inputs, side effects and random ops are kept). Handles
/// to removed nodes become invalid; use the returned `outputs`.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// use pfor::passes::simplify;
///
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [4]);
/// let r = g.reshape(x, &[2, 2])?;
/// let r = g.reshape(r, &[4])?; // a reshape chain back to the input
/// let dead = g.exp(x)?;         // nothing needs it
/// let rep = simplify(&mut g, &[r])?;
/// assert_eq!(rep.outputs, [x]);
/// assert!(!g.contains(dead.node));
/// # Ok(())
/// # }
/// ```
pub fn simplify(g: &mut Graph, outputs: &[ValueId]) -> Result<SimplifyReport> {
    Pipeline::simplify().run(g, outputs, None)
}

/// Fold every pure op whose inputs are all constants into the constant it evaluates to, then
/// drop what nothing reads (passes `fold`, `dead`). Plans do this on their own copy when
/// they compile; on the user's graph it cuts derivatives taken later w.r.t. the constants
/// folded through (see the `fold` module), which is why `pfor` and [`simplify`] never fold.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let c = g.constant(Tensor::vec1(&[1.0f64, 2.0]));
/// let y = g.exp(c)?;
/// let rep = pfor::passes::fold_constants(&mut g, &[y])?;
/// assert_eq!(rep.constants_folded, 1);
/// assert_eq!(g.node(rep.outputs[0].node)?.op.kind(), OpKind::Const);
/// # Ok(())
/// # }
/// ```
pub fn fold_constants(g: &mut Graph, outputs: &[ValueId]) -> Result<SimplifyReport> {
    Pipeline::new().then(fold::Fold).then(dead::Dead).run(g, outputs, None)
}

pub(crate) use fold::folded_copy;

/// [`simplify`] only the nodes added at or after `mark` (a [`Graph::mark`]): older nodes are
/// read but never rewritten or removed. This is what `pfor` runs on its conversion.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// use pfor::passes::simplify_since;
///
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [4]);
/// let old = g.exp(x)?; // before the mark: kept even if unused
/// let mark = g.mark();
/// let r = g.reshape(x, &[4])?;
/// let rep = simplify_since(&mut g, &[r], mark)?;
/// assert_eq!(rep.outputs, [x]);
/// assert!(g.contains(old.node));
/// # Ok(())
/// # }
/// ```
pub fn simplify_since(g: &mut Graph, outputs: &[ValueId], mark: u64) -> Result<SimplifyReport> {
    Pipeline::simplify().run(g, outputs, Some(mark))
}
