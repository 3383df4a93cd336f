//! Automatic differentiation on the graph: reverse mode ([`gradients`]) and forward mode
//! ([`jvp`]). Both ADD nodes to the same graph, so the derivative graph can itself be
//! executed, differentiated again (hessians) or vectorized by `pfor` (jacobians,
//! per-example gradients).
//!
//! # Rules
//! One VJP and one JVP rule per op kind, in `rules/<family>.rs` mirroring `ops/<family>.rs`,
//! dispatched by an exhaustive match on `Op`. A rule sees a [`VjpCtx`] / [`JvpCtx`]: the
//! node's inputs and outputs (values of the forward graph) and the incoming cotangents /
//! tangents, and returns one optional cotangent per input / tangent per output.
//!
//! # Invariants
//! - A cotangent has the dtype and the (static) shape of its primal value; rules for
//!   broadcasting ops reduce back with [`util::sum_to`].
//! - `None` means "zero": rules never have to build zeros for inputs that do not need a
//!   gradient ([`VjpCtx::needs`]) or for outputs nothing depends on.
//! - Only float values carry derivatives; integer and bool values always get `None`.
//! - Non-differentiable ops (comparisons, argmax, integer ops, random keys, shapes) return
//!   `None` explicitly — [`is_differentiable`] lists them — and `stop_gradient` stops.
//! - Rules never consume state: gradients of gradients work (hessians), and a gradient of a
//!   `While` re-runs the loop with recording instead of relying on runtime side tables.
//! - Rules are symbolic: a derivative is built from the node's inputs, outputs and incoming
//!   (co)tangents only, never from a value, an input's producer, or constants matched by
//!   value, so derivatives w.r.t. a `Graph::constant` equal those w.r.t. an input fed the
//!   same value, at every order. Layout choices (reading a constant weight pre-transposed)
//!   are made after differentiation, by the session (`exec::pretranspose`).

pub mod forward;
pub mod reverse;
pub mod rules;
pub mod util;

pub use forward::jvp;
pub use reverse::{gradients, gradients_with};
pub use rules::is_differentiable;

use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, ValueId};

/// What a VJP rule sees: one forward node and the cotangents of its outputs.
pub struct VjpCtx<'a> {
    /// The graph (rules add their nodes here).
    pub g: &'a mut Graph,
    /// The forward node.
    pub node: NodeId,
    /// Its inputs.
    pub inputs: Vec<ValueId>,
    /// Its outputs.
    pub outputs: Vec<ValueId>,
    /// Cotangent of each output; `None` is zero.
    pub dys: Vec<Option<ValueId>>,
    /// Which inputs need a cotangent (a rule may return `None` for the others).
    pub needs: Vec<bool>,
}

impl VjpCtx<'_> {
    /// Input `i`.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what reverse mode hands an `exp` rule (rules are called by `gradients`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = VjpCtx { g: &mut g, node: y.node, inputs, outputs, dys: vec![None], needs: vec![true] };
    ///
    /// assert_eq!(ctx.x(0), x);
    /// # Ok(())
    /// # }
    /// ```
    pub fn x(&self, i: usize) -> ValueId {
        self.inputs[i]
    }
    /// Output `i`.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what reverse mode hands an `exp` rule (rules are called by `gradients`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = VjpCtx { g: &mut g, node: y.node, inputs, outputs, dys: vec![None], needs: vec![true] };
    ///
    /// assert_eq!(ctx.y(0), y);
    /// # Ok(())
    /// # }
    /// ```
    pub fn y(&self, i: usize) -> ValueId {
        self.outputs[i]
    }
    /// Whether input `i` needs a cotangent.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what reverse mode hands an `exp` rule (rules are called by `gradients`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = VjpCtx { g: &mut g, node: y.node, inputs, outputs, dys: vec![None], needs: vec![true] };
    ///
    /// assert!(ctx.need(0) && !ctx.need(1)); // out of range: not needed
    /// # Ok(())
    /// # }
    /// ```
    pub fn need(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false)
    }
    /// The cotangent of output `i`, materialized as zeros when absent.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what reverse mode hands an `exp` rule (rules are called by `gradients`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = VjpCtx { g: &mut g, node: y.node, inputs, outputs, dys: vec![None], needs: vec![true] };
    ///
    /// let dy = ctx.dy(0)?; // no cotangent: zeros of y's type
    /// let dx = ctx.g.mul(dy, y)?; // d exp(x) = exp(x) dx
    /// assert_eq!(run_once(&g, &[dx], &[(x, Tensor::vec1(&[0.0f32, 1.0]))])?[0].to_vec::<f32>()?, [0.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn dy(&mut self, i: usize) -> Result<ValueId> {
        match self.dys.get(i).copied().flatten() {
            Some(d) => Ok(d),
            None => {
                let y = *self
                    .outputs
                    .get(i)
                    .ok_or_else(|| Error::InvalidArgument(format!("vjp: node {} has no output {i}", self.node)))?;
                self.g.zeros_like(y)
            }
        }
    }
    /// An error naming this node: "no gradient for ...".
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what reverse mode hands an `exp` rule (rules are called by `gradients`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = VjpCtx { g: &mut g, node: y.node, inputs, outputs, dys: vec![None], needs: vec![true] };
    ///
    /// let e = ctx.unsupported("its second input");
    /// assert!(e.to_string().contains("exp"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn unsupported(&self, what: impl Into<String>) -> Error {
        let name = self.g.node(self.node).map(|n| n.op.name()).unwrap_or_default();
        Error::unsupported(&name, what)
    }
}

/// What a JVP rule sees: one forward node and the tangents of its inputs.
pub struct JvpCtx<'a> {
    /// The graph (rules add their nodes here).
    pub g: &'a mut Graph,
    /// The forward node.
    pub node: NodeId,
    /// Its inputs.
    pub inputs: Vec<ValueId>,
    /// Its outputs.
    pub outputs: Vec<ValueId>,
    /// Tangent of each input; `None` is zero.
    pub tangents: Vec<Option<ValueId>>,
}

impl JvpCtx<'_> {
    /// Input `i`.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what forward mode hands an `exp` rule (rules are called by `jvp`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = JvpCtx { g: &mut g, node: y.node, inputs, outputs, tangents: vec![None] };
    ///
    /// assert_eq!(ctx.x(0), x);
    /// # Ok(())
    /// # }
    /// ```
    pub fn x(&self, i: usize) -> ValueId {
        self.inputs[i]
    }
    /// Output `i`.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what forward mode hands an `exp` rule (rules are called by `jvp`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = JvpCtx { g: &mut g, node: y.node, inputs, outputs, tangents: vec![None] };
    ///
    /// assert_eq!(ctx.y(0), y);
    /// # Ok(())
    /// # }
    /// ```
    pub fn y(&self, i: usize) -> ValueId {
        self.outputs[i]
    }
    /// The tangent of input `i`, if any.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what forward mode hands an `exp` rule (rules are called by `jvp`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = JvpCtx { g: &mut g, node: y.node, inputs, outputs, tangents: vec![None] };
    ///
    /// assert_eq!(ctx.t(0), None); // x has no tangent (zero)
    /// # Ok(())
    /// # }
    /// ```
    pub fn t(&self, i: usize) -> Option<ValueId> {
        self.tangents.get(i).copied().flatten()
    }
    /// The tangent of input `i`, materialized as zeros when absent.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what forward mode hands an `exp` rule (rules are called by `jvp`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = JvpCtx { g: &mut g, node: y.node, inputs, outputs, tangents: vec![None] };
    ///
    /// let t = ctx.t_or_zero(0)?; // zeros of x's type
    /// let ty = ctx.g.mul(t, y)?; // the tangent of exp(x): exp(x) t
    /// assert_eq!(run_once(&g, &[ty], &[(x, Tensor::vec1(&[1.0f32, 2.0]))])?[0].to_vec::<f32>()?, [0.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn t_or_zero(&mut self, i: usize) -> Result<ValueId> {
        match self.t(i) {
            Some(t) => Ok(t),
            None => {
                let x = self.inputs[i];
                self.g.zeros_like(x)
            }
        }
    }
    /// An error naming this node.
    ///
    /// ```
    /// use pfor::autodiff::{JvpCtx, VjpCtx};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// // what forward mode hands an `exp` rule (rules are called by `jvp`)
    /// let (inputs, outputs) = (vec![x], vec![y]);
    /// let mut ctx = JvpCtx { g: &mut g, node: y.node, inputs, outputs, tangents: vec![None] };
    ///
    /// let e = ctx.unsupported("forward mode");
    /// assert!(e.to_string().contains("exp"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn unsupported(&self, what: impl Into<String>) -> Error {
        let name = self.g.node(self.node).map(|n| n.op.name()).unwrap_or_default();
        Error::unsupported(&name, what)
    }
}
