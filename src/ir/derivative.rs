//! Derivative hooks: how a pass that generated a function tells autodiff to differentiate
//! the node owning it, without autodiff knowing that pass.
//!
//! A pass (pfor's Subset-form control flow) may emit a node whose own structure cannot be
//! differentiated by the generic rule of its op (a `while` whose carries shrink from step
//! to step), but whose meaning is simple (the per-iteration loop, vectorized). It attaches
//! a [`DerivativeHook`] to the node's function ([`Function::with_derivative`]); the
//! autodiff rule of the op consults the hook before its generic rule. The hook builds the
//! derivative from the meaning, with the derivative functions autodiff hands it
//! ([`FunctionDerivatives`]): autodiff never imports the pass, and the pass never imports
//! autodiff.
//!
//! Invariants: a hook's derivatives equal those of the node as a function of its inputs
//! (the same values the generic rule would give, where it works); a hook returns one
//! cotangent per input (VJP) or one tangent per output (JVP), `None` for zero, and only for
//! float values; like the origin record, a hook is not inherited by a deep copy of the
//! function or by anything derived from it.

use super::{Function, Graph, ValueId};
use crate::error::Result;

/// Derivative functions of a function, built by autodiff (the same builders its `cond` /
/// `while` rules use).
pub trait FunctionDerivatives {
    /// A function with parameters `f.params ++ [cotangent of result r for r in dres]` and
    /// results `[cotangent of parameter p for p in wrt]` (zeros where independent).
    fn vjp_function(&self, parent: &Graph, f: &Function, dres: &[usize], wrt: &[usize]) -> Result<Function>;
    /// A function with parameters `f.params ++ [tangent of parameter p for p in tan]` and
    /// results `[tangent of result r for r in out]`.
    fn jvp_function(&self, parent: &Graph, f: &Function, tan: &[usize], out: &[usize]) -> Result<Function>;
}

/// The node a hook differentiates: its inputs and outputs (values of `g`).
pub struct HookNode<'a> {
    /// The inputs of the node.
    pub inputs: &'a [ValueId],
    /// The outputs of the node.
    pub outputs: &'a [ValueId],
}

/// Differentiates the node owning the function it is attached to (see the module docs).
pub trait DerivativeHook: Send + Sync {
    /// One cotangent per input of `node` (`needs[i]`: input `i` needs one) given one per
    /// output (`dys`, `None` = zero).
    fn vjp(
        &self,
        d: &dyn FunctionDerivatives,
        g: &mut Graph,
        node: HookNode<'_>,
        dys: &[Option<ValueId>],
        needs: &[bool],
    ) -> Result<Vec<Option<ValueId>>>;
    /// One tangent per output of `node` given one per input (`None` = zero).
    fn jvp(
        &self,
        d: &dyn FunctionDerivatives,
        g: &mut Graph,
        node: HookNode<'_>,
        tangents: &[Option<ValueId>],
    ) -> Result<Vec<Option<ValueId>>>;
}
