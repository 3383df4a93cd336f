//! Control flow in Subset form inside the body of an enclosing pfor (nested pfor, any depth).
//!
//! The Subset form of a `cond` or `while` with a loop-variant predicate works on lists of
//! the active rows of its loop (`nonzero` of the predicate), whose lengths depend on the
//! data. Inside an enclosing pfor every outer iteration has its own lists, of different
//! lengths: they cannot be stacked, so the form must never be converted op by op. Instead
//! the form is one node — the `while` itself, or the one `cond` wrapping the partition
//! (`cond_subset`) — whose function records the per-iteration functions it vectorized
//! ([`SubsetForm`], attached with `Function::with_origin`), and the enclosing pfor rebuilds
//! the Subset form from those functions directly over the **combined iteration space**:
//!
//! - row `r = a·m + b` of the combined loop is outer iteration `a` (of the enclosing loop's
//!   `N`) and row `b` of the inner form's loop (of its `m`, an input of the node);
//! - an input stacked over both loops (`[N, m, ...]`) is merged to `[N·m, ...]`; stacked
//!   over one loop only, it is gathered by `a` or `b`; over neither, it stays invariant;
//! - the combined loop's index is `outer_index[a]·s + inner_index[b]` with `s` one more than
//!   the largest inner index: distinct for every (outer, inner) pair, so random ops draw
//!   per pair;
//! - results `[N·m, ...]` are read back as `[N, m, ...]` (a gather by the `[N, m]` grid of
//!   row numbers, which keeps their static per-row dims);
//! - the rebuilt form records itself again, so a third enclosing pfor combines once more,
//!   and carries the derivative hook again (over the combined rows, see [`super::derivative`]);
//! - the inner form's `m` and index must be loop-invariant in the enclosing loop (an inner
//!   loop whose length depends on the outer iteration is declined).
//!
//! Each step of a rebuilt `while` compacts the active rows of all outer iterations together,
//! so no iteration runs its body past its own trip count and none runs an untaken branch,
//! exactly as at one level.

use std::sync::Arc;

use super::{cond_subset, while_subset};
use crate::ops::{IterationCap, Op};
use crate::tensor::{Tensor, TensorType};
use crate::vectorize::{ConvertCtx, Converted, LoopInfo, Wrapped, flatten_first_two};
use crate::{Error, Function, Graph, Result, ValueId};

/// What a Subset-form node vectorizes: the per-iteration functions and the stackedness (in
/// the node's own loop) of their inputs.
pub(crate) enum SubsetForm {
    /// A `while` whose inputs are `[active, rows.., full.., n, index, captures..]`.
    While {
        /// The per-iteration condition.
        cond: Arc<Function>,
        /// The per-iteration body.
        body: Arc<Function>,
        /// Carries the body passes through unchanged.
        pass: Vec<bool>,
        /// Stacked carries.
        carries: Vec<bool>,
        /// Stacked captures.
        captures: Vec<bool>,
        /// The loop's own iteration cap (kept by the rebuilt loop).
        max_iterations: Option<IterationCap>,
    },
    /// A `cond` whose inputs are `[true, pred, args.., n, index]`.
    Cond {
        /// The per-iteration branches.
        then: Arc<Function>,
        /// The else branch.
        else_: Arc<Function>,
        /// Stacked arguments.
        args: Vec<bool>,
        /// Per-iteration result types.
        out_types: Vec<TensorType>,
    },
}

/// The combined iteration space of an enclosing loop and a Subset form's loop.
struct Combined {
    /// The combined loop (`N·m` rows).
    info: LoopInfo,
    /// The enclosing loop.
    outer: LoopInfo,
    /// The inner form's loop length.
    m: ValueId,
    m_static: Option<usize>,
    /// Outer iteration `a` of each combined row.
    outer_of: ValueId,
    /// Inner row `b` of each combined row.
    inner_of: ValueId,
}

/// The value of a scalar i64 constant node, as a length.
fn const_len(g: &Graph, v: ValueId) -> Option<usize> {
    match &g.node(v.node).ok()?.op {
        Op::Const { value } => usize::try_from(value.scalar_i64().ok()?).ok(),
        _ => None,
    }
}

impl Combined {
    fn new(g: &mut Graph, outer: &LoopInfo, m: ValueId, index: ValueId) -> Result<Combined> {
        let m_static = const_len(g, m);
        let total = outer.n_static.zip(m_static).and_then(|(n, m)| n.checked_mul(m));
        // a = r / m and b = r % m for r < N·m, as broadcasts of `range(N)` and `range(m)`
        // over the `[N, m]` grid (no division: m may be 0); static shapes when N, m are
        let (zero, one) = (g.constant(Tensor::scalar(0i64)), g.constant(Tensor::scalar(1i64)));
        let ra = g.range(zero, outer.n, one)?;
        let ra = g.expand_dims(ra, 1)?;
        let rb = g.range(zero, m, one)?;
        let rb = g.expand_dims(rb, 0)?;
        let (n, a, b) = match (outer.n_static, m_static, total) {
            (Some(n), Some(mm), Some(t)) => {
                let (a, b) = (g.broadcast_to(ra, &[n, mm])?, g.broadcast_to(rb, &[n, mm])?);
                (g.constant(Tensor::scalar(t as i64)), a, b)
            }
            _ => {
                let shape = grid_shape(g, outer.n, m)?;
                let (a, b) = (g.broadcast_to_dyn(ra, shape)?, g.broadcast_to_dyn(rb, shape)?);
                (g.mul(outer.n, m)?, a, b)
            }
        };
        let (outer_of, inner_of) = (g.reshape(a, &[-1])?, g.reshape(b, &[-1])?);
        // index: outer_index[a]·s + inner_index[b], s = max(inner index) + 1 (1 when empty)
        let s = g.reduce_max(index, Some(&[0]), false)?;
        let s = g.maximum(s, zero)?;
        let s = g.add_scalar(s, 1.0)?;
        let oi = g.gather(outer.index, outer_of, 0)?;
        let oi = g.mul(oi, s)?;
        let ii = g.gather(index, inner_of, 0)?;
        let index = g.add(oi, ii)?;
        let info = LoopInfo { n_static: total, n, index, index_is_iota: false };
        Ok(Combined { info, outer: outer.clone(), m, m_static, outer_of, inner_of })
    }

    /// `w` (a value of the enclosing loop, `inner`: stacked in the form's loop) laid out over
    /// the combined rows.
    fn lay_out(&self, g: &mut Graph, w: Wrapped, inner: bool) -> Result<Wrapped> {
        Ok(match (w.stacked, inner) {
            (true, true) => Wrapped::stacked(flatten_first_two(g, w.value)?),
            (false, true) => Wrapped::stacked(g.gather(w.value, self.inner_of, 0)?),
            (true, false) => Wrapped::stacked(g.gather(w.value, self.outer_of, 0)?),
            (false, false) => w,
        })
    }

    /// Combined rows `[N·m, ...]` read back as `[N, m, ...]`.
    fn split(&self, g: &mut Graph, v: ValueId) -> Result<ValueId> {
        let (zero, one) = (g.constant(Tensor::scalar(0i64)), g.constant(Tensor::scalar(1i64)));
        let rows = g.range(zero, self.info.n, one)?;
        let grid = match (self.outer.n_static, self.m_static) {
            (Some(n), Some(m)) => g.reshape(rows, &[n as i64, m as i64])?,
            _ => {
                let shape = grid_shape(g, self.outer.n, self.m)?;
                g.reshape_dyn(rows, shape)?
            }
        };
        g.gather(v, grid, 0)
    }
}

/// `[n, m]` as an i64 shape vector.
fn grid_shape(g: &mut Graph, n: ValueId, m: ValueId) -> Result<ValueId> {
    let n1 = g.reshape(n, &[1])?;
    let m1 = g.reshape(m, &[1])?;
    g.concat(&[n1, m1], 0)
}

fn layout_error(what: &str, got: usize) -> Error {
    Error::Verify(format!("Subset-form {what}: unexpected input count {got}"))
}

/// Convert a Subset-form node (its function records `form`) for the enclosing loop.
pub(super) fn convert(ctx: &mut ConvertCtx<'_>, form: &SubsetForm) -> Result<Converted> {
    let ins = ctx.inputs().to_vec();
    let outer = ctx.loop_info().clone();
    let options = ctx.options().clone();
    // the form's loop length and index follow its carries / arguments
    let (what, at) = match form {
        SubsetForm::While { pass, .. } => ("while", 2 * pass.len() + 1),
        SubsetForm::Cond { args, .. } => ("cond", args.len() + 2),
    };
    let (m, index) = match ins.get(at..at + 2) {
        Some(&[m, index]) => (m, index),
        _ => return Err(layout_error(what, ins.len())),
    };
    if m.stacked || index.stacked {
        return ConvertCtx::unhandled(format!(
            "{what} in Subset form whose inner loop length or rows depend on the enclosing loop"
        ));
    }
    let g = ctx.graph();
    let c = Combined::new(g, &outer, m.value, index.value)?;
    let outs = match form {
        SubsetForm::While { cond, body, pass, carries, captures, max_iterations } => {
            let k = pass.len();
            let caps_in = &ins[at + 2..];
            if carries.len() != k || caps_in.len() != captures.len() {
                return Err(layout_error(what, ins.len()));
            }
            let full_in = &ins[k + 1..2 * k + 1];
            let init = full_in.iter().zip(carries).map(|(w, &s)| c.lay_out(g, *w, s)).collect::<Result<Vec<_>>>()?;
            let caps = caps_in.iter().zip(captures).map(|(w, &s)| c.lay_out(g, *w, s)).collect::<Result<Vec<_>>>()?;
            let cap_vals: Vec<ValueId> = caps.iter().map(|w| w.value).collect();
            let full = while_subset(g, &c.info, &options, cond, body, &init, &caps, &cap_vals, pass, *max_iterations)?;
            // outputs [active, rows.., full..]: a finished loop has no active rows; carries
            // that are not stacked in the form's loop pass through unchanged
            let empty = g.constant(Tensor::vec1::<i64>(&[]));
            let mut outs = vec![Wrapped::unstacked(empty)];
            for (j, &s) in carries.iter().enumerate() {
                let rows = ins[1 + j];
                outs.push(match s {
                    true => Wrapped { value: g.gather(rows.value, empty, i64::from(rows.stacked))?, ..rows },
                    false => rows,
                });
            }
            for (j, &s) in carries.iter().enumerate() {
                outs.push(if s { Wrapped::stacked(c.split(g, full[j])?) } else { full_in[j] });
            }
            outs
        }
        SubsetForm::Cond { then, else_, args, out_types } => {
            let args_in = &ins[2..at];
            if args_in.len() != args.len() {
                return Err(layout_error(what, ins.len()));
            }
            let pred = c.lay_out(g, ins[1], true)?;
            let a = args_in.iter().zip(args).map(|(w, &s)| c.lay_out(g, *w, s)).collect::<Result<Vec<_>>>()?;
            let res = cond_subset(g, &c.info, &options, pred.value, &a, then, else_, out_types)?;
            res.into_iter().map(|w| Ok(Wrapped::stacked(c.split(g, w.value)?))).collect::<Result<Vec<_>>>()?
        }
    };
    ConvertCtx::done(outs)
}
