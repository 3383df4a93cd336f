//! Derivative rules, one file per op family (mirroring `src/ops/`), dispatched by an
//! exhaustive match on [`Op`] — adding an op variant without rules does not compile.
//!
//! Each family file provides:
//! - `vjp(op, cx) -> Result<Vec<Option<ValueId>>>`: one cotangent per input;
//! - `jvp(op, cx) -> Result<Vec<Option<ValueId>>>`: one tangent per output;
//! - `differentiable(kind) -> bool`: `false` for kinds whose rules return `None` by
//!   definition (comparisons, integer ops, arg-reductions, shapes, random keys...).
//!
//! A kind that declares itself linear ([`Linearity`], next to its kind table) gets its JVP
//! derived ([`linear_jvp`]: the op applied to the tangents), so its family's `jvp` never
//! sees it.

pub mod binary;
pub mod control;
pub mod conv;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod linear;
pub mod nn;
pub mod random;
pub mod reduce;
pub mod shape;
pub mod slicing;
pub mod state;
pub mod unary;

use super::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::ValueId;
use crate::ops::{Linearity, Op, OpKind};

/// The cotangent of every input of `op`.
pub fn vjp(op: &Op, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    match op {
        Op::Input { .. } | Op::Const { .. } => Ok(vec![]),
        Op::Unary(k) => unary::vjp(*k, cx),
        Op::Binary(k) => binary::vjp(*k, cx),
        Op::Elementwise(o) => elementwise::vjp(o, cx),
        Op::Reduce(o) => reduce::vjp(o, cx),
        Op::Shape(o) => shape::vjp(o, cx),
        Op::Slicing(o) => slicing::vjp(o, cx),
        Op::Index(o) => indexing::vjp(o, cx),
        Op::Linear(o) => linear::vjp(o, cx),
        Op::Conv(o) => conv::vjp(o, cx),
        Op::Nn(o) => nn::vjp(o, cx),
        Op::Linalg(o) => linalg::vjp(o, cx),
        Op::Random(o) => random::vjp(o, cx),
        Op::State(o) => state::vjp(o, cx),
        Op::Control(o) => control::vjp(o, cx),
        Op::Custom(c) => c.vjp(cx),
    }
}

/// The tangent of every output of `op`.
pub fn jvp(op: &Op, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let linearity = op.linearity();
    if linearity.is_linear() {
        return linear_jvp(op, linearity, cx);
    }
    match op {
        Op::Input { .. } | Op::Const { .. } => Ok(vec![None]),
        Op::Unary(k) => unary::jvp(*k, cx),
        Op::Binary(k) => binary::jvp(*k, cx),
        Op::Elementwise(o) => elementwise::jvp(o, cx),
        Op::Reduce(o) => reduce::jvp(o, cx),
        Op::Shape(o) => shape::jvp(o, cx),
        Op::Slicing(o) => slicing::jvp(o, cx),
        Op::Index(o) => indexing::jvp(o, cx),
        Op::Linear(o) => linear::jvp(o, cx),
        Op::Conv(o) => conv::jvp(o, cx),
        Op::Nn(o) => nn::jvp(o, cx),
        Op::Linalg(o) => linalg::jvp(o, cx),
        Op::Random(o) => random::jvp(o, cx),
        Op::State(o) => state::jvp(o, cx),
        Op::Control(o) => control::jvp(o, cx),
        Op::Custom(c) => c.jvp(cx),
    }
}

/// The JVP of an op linear in the inputs `linearity` names: the op applied to their
/// tangents (zeros for an absent one), the other inputs held at their primal values; no
/// tangent when none of them has one.
pub fn linear_jvp(op: &Op, linearity: Linearity, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n = cx.inputs.len();
    if !(0..n).any(|k| linearity.linear_in(k) && cx.t(k).is_some()) {
        return Ok(vec![None; cx.outputs.len()]);
    }
    let mut ins = cx.inputs.clone();
    for (k, v) in ins.iter_mut().enumerate() {
        if linearity.linear_in(k) {
            *v = cx.t_or_zero(k)?;
        }
    }
    let outs = cx.g.add_op_multi(op.clone(), &ins)?;
    Ok(outs.into_iter().map(Some).collect())
}

/// Whether derivatives flow through ops of this kind (`false`: the rules return `None`
/// by definition). Custom ops answer through their own `vjp`/`jvp`.
pub fn is_differentiable(kind: OpKind) -> bool {
    match kind {
        OpKind::Input | OpKind::Const => false,
        OpKind::Unary(k) => unary::differentiable(k),
        OpKind::Binary(k) => binary::differentiable(k),
        OpKind::Elementwise(k) => elementwise::differentiable(k),
        OpKind::Reduce(k) => reduce::differentiable(k),
        OpKind::Shape(k) => shape::differentiable(k),
        OpKind::Slicing(k) => slicing::differentiable(k),
        OpKind::Index(k) => indexing::differentiable(k),
        OpKind::Linear(k) => linear::differentiable(k),
        OpKind::Conv(k) => conv::differentiable(k),
        OpKind::Nn(k) => nn::differentiable(k),
        OpKind::Linalg(k) => linalg::differentiable(k),
        OpKind::Random(k) => random::differentiable(k),
        OpKind::State(k) => state::differentiable(k),
        OpKind::Control(k) => control::differentiable(k),
        OpKind::Custom => true,
    }
}
