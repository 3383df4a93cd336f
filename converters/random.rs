//! Converters for random ops under the [`Randomness`] policy.
//!
//! Every generator takes a key whose shape prefixes its output, and key element `k`
//! generates with stream `k` (see `src/ops/random.rs`). So:
//! - a stacked key `[n] + K` is already the vectorized form: one op, row `r` equal to what
//!   the loop draws with key `key[r]`;
//! - an invariant key under `Different` becomes `fold_in(key, i)` per iteration — exactly
//!   the loop body `g.random_*(g.fold_in(key, i), ...)` — and under `Same` it is tiled (or the
//!   op reused as is when nothing else is stacked), i.e. every iteration draws the same values;
//!   `Error` rejects random ops inside pfor.

use crate::ops::Op;
use crate::ops::{OpKind, RandomKind, RandomOp};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Randomness, Registry, Wrapped, broadcast_convert};
use crate::{Error, Result, ValueId};

/// The key, as a stacked `[n] + K` value, following the policy.
fn stacked_key(ctx: &mut ConvertCtx<'_>) -> Result<ValueId> {
    if ctx.is_stacked(0) {
        return Ok(ctx.input(0).value);
    }
    match ctx.options().randomness {
        Randomness::Same => ctx.stacked(0),
        Randomness::Error => Err(Error::unsupported(&ctx.op().name(), "random op inside pfor with Randomness::Error")),
        Randomness::Different => {
            let key = ctx.input(0).value;
            let r = ctx.input_type(0).rank();
            let index = ctx.loop_info().index;
            let g = ctx.graph();
            let mut shape = vec![-1i64];
            shape.extend(std::iter::repeat_n(1, r));
            let idx = g.reshape(index, &shape)?;
            g.fold_in(key, idx)
        }
    }
}

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Random(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a random op");
    };
    if matches!(op, RandomOp::FoldIn) {
        return broadcast_convert(ctx);
    }
    // Same policy with nothing stacked: every iteration draws the same values.
    if ctx.options().randomness == Randomness::Same && !ctx.any_stacked() {
        let ins: Vec<ValueId> = ctx.inputs().iter().map(|w| w.value).collect();
        let y = ctx.add(Op::Random(op), &ins)?;
        return ConvertCtx::done(vec![Wrapped::unstacked(y)]);
    }
    match op {
        RandomOp::RandomUniform { .. } | RandomOp::RandomNormal { .. } => {
            let k = stacked_key(ctx)?;
            let y = ctx.add(Op::Random(op), &[k])?;
            Converted::stacked(y)
        }
        RandomOp::RandomBernoulli { .. } => {
            if ctx.is_stacked(1) {
                return ConvertCtx::unhandled("random_bernoulli with a loop-variant probability");
            }
            let k = stacked_key(ctx)?;
            let p = ctx.input(1).value;
            let y = ctx.add(Op::Random(op), &[k, p])?;
            Converted::stacked(y)
        }
        RandomOp::RandomCategorical { .. } | RandomOp::Dropout { .. } => {
            let k = stacked_key(ctx)?;
            let x = ctx.stacked(1)?;
            let y = ctx.add(Op::Random(op), &[k, x])?;
            Converted::stacked(y)
        }
        RandomOp::FoldIn => broadcast_convert(ctx),
    }
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in RandomKind::ALL {
        r.register(OpKey::Builtin(OpKind::Random(*k)), convert);
    }
}
