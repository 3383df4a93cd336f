//! Converters for shape ops.
//!
//! The one-axis ops (`expand_dims`, `one_hot`, `stack`, `unstack`), `identity` and
//! `stop_gradient` are derived from their declared batching class (`src/ops/signature.rs`).
//! Squeezed axes and permutations shift past the loop axis; shape attributes get the loop
//! dim prepended
//! (`[n] + shape`, or a dynamic shape tensor when n is only known at run time);
//! `shape_of` / `size` / `rank` / `zeros_like` / `ones_like` of a stacked value are
//! loop-invariant (stacked values are rectangular), so they stay unstacked.
//! `loop_max` of a stacked value is its maximum over the loop axis (0 for an empty loop),
//! wrapped in another `loop_max` so that enclosing pfor loops reduce over their iterations
//! too: the result is loop-invariant and `>=` every iteration's own value, which is all
//! the op promises (`src/ops/shape.rs`).

use crate::ops::{Batching, Op, OpKind, ShapeKind, ShapeOp};
use crate::tensor::{Tensor, TensorType};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, shift_axis as shift};
use crate::{Graph, Result, ValueId};

/// `concat([n], tail)` as an i64 shape vector (tail: an i64 1-D value).
fn with_loop_dim(ctx: &mut ConvertCtx<'_>, tail: ValueId) -> Result<ValueId> {
    let n = ctx.loop_len();
    let g = ctx.graph();
    let n1 = g.reshape(n, &[1])?;
    g.concat(&[n1, tail], 0)
}

/// Resolve a static reshape target against a per-iteration input type (-1 → its value,
/// when the input's element count is fixed).
fn resolve_shape(shape: &[i64], input: &TensorType) -> Option<Vec<i64>> {
    if !shape.contains(&-1) {
        return Some(shape.to_vec());
    }
    let total = i64::try_from(input.shape.num_elements()?).ok()?;
    let known = shape.iter().filter(|&&d| d != -1).try_fold(1i64, |a, &d| a.checked_mul(d))?;
    if known == 0 {
        return None;
    }
    Some(shape.iter().map(|&d| if d == -1 { total / known } else { d }).collect())
}

/// A per-iteration reshape target with its `-1` (if any) resolved at run time from the
/// stacked `x`'s per-iteration dims (valid with zero iterations too).
fn resolved_tail(ctx: &mut ConvertCtx<'_>, x: ValueId, shape: &[i64]) -> Result<ValueId> {
    let g = ctx.graph();
    let Some(at) = shape.iter().position(|&d| d == -1) else {
        return Ok(g.constant(Tensor::vec1(shape)));
    };
    // The per-iteration reshape was built, so the other entries' product is a nonzero i64.
    let known: i64 = shape.iter().filter(|&&d| d != -1).product();
    let dims = g.shape_of(x)?;
    let per = g.slice(dims, &[1], &[-1])?;
    let count = g.reduce_prod(per, Some(&[0]), true)?;
    let known = g.constant(Tensor::vec1(&[known]));
    let inferred = g.floor_div(count, known)?;
    let before = g.constant(Tensor::vec1(&shape[..at]));
    let after = g.constant(Tensor::vec1(&shape[at + 1..]));
    g.concat(&[before, inferred, after], 0)
}

/// Broadcast a stacked value `[n, s...]` to `[n] + shape` (s aligned to the right).
fn broadcast_stacked(ctx: &mut ConvertCtx<'_>, x: ValueId, shape: &[usize]) -> Result<ValueId> {
    let xr = ctx.graph().value_type(x)?.rank() - 1;
    let mut v = x;
    for _ in xr..shape.len() {
        v = ctx.graph().expand_dims(v, 1)?;
    }
    match ctx.loop_info().n_static {
        Some(n) => {
            let mut full = vec![n];
            full.extend_from_slice(shape);
            ctx.graph().broadcast_to(v, &full)
        }
        None => {
            let s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            let tail = ctx.graph().constant(Tensor::vec1(&s));
            let full = with_loop_dim(ctx, tail)?;
            ctx.graph().broadcast_to_dyn(v, full)
        }
    }
}

fn invariant_shape_of(ctx: &mut ConvertCtx<'_>) -> Result<ValueId> {
    let t = ctx.input_type(0).clone();
    if let Some(d) = t.shape.as_fixed() {
        let v: Vec<i64> = d.iter().map(|&x| x as i64).collect();
        return Ok(ctx.graph().constant(Tensor::vec1(&v)));
    }
    let x = ctx.input(0).value;
    let g = ctx.graph();
    let s = g.shape_of(x)?;
    g.slice(s, &[1], &[-1])
}

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Shape(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a shape op");
    };
    let x_st = ctx.is_stacked(0);
    match op {
        ShapeOp::Reshape { shape } => {
            let x = ctx.stacked(0)?;
            let in_t = ctx.input_type(0).clone();
            let resolved = resolve_shape(&shape, &in_t);
            if let Some(n) = ctx.loop_info().n_static
                && (n > 0 || resolved.is_some())
            {
                let mut s = vec![n as i64];
                s.extend(resolved.unwrap_or(shape));
                return Converted::one(ctx.graph().reshape(x, &s)?, true);
            }
            // The loop dim is never left to a `-1`: with zero active iterations (an empty
            // loop, a branch no iteration takes) the stacked value is empty and a `-1`
            // next to it would be ambiguous.
            let tail = match resolved {
                Some(r) if !r.contains(&0) => {
                    let mut s = vec![-1];
                    s.extend(r);
                    return Converted::one(ctx.graph().reshape(x, &s)?, true);
                }
                Some(r) => ctx.graph().constant(Tensor::vec1(&r)),
                None => resolved_tail(ctx, x, &shape)?,
            };
            let full = with_loop_dim(ctx, tail)?;
            Converted::one(ctx.graph().reshape_dyn(x, full)?, true)
        }
        ShapeOp::ReshapeDyn => {
            if ctx.is_stacked(1) {
                return ConvertCtx::unhandled("reshape_dyn with a loop-variant shape");
            }
            let x = ctx.stacked(0)?;
            let s = ctx.input(1).value;
            let full = with_loop_dim(ctx, s)?;
            Converted::one(ctx.graph().reshape_dyn(x, full)?, true)
        }
        ShapeOp::Transpose { perm } => {
            let mut p = vec![0];
            p.extend(perm.iter().map(|&a| a + 1));
            let x = ctx.stacked(0)?;
            Converted::one(ctx.graph().transpose(x, &p)?, true)
        }
        ShapeOp::Squeeze { axes } => {
            let t = ctx.input_type(0).clone();
            let axes: Vec<i64> = if axes.is_empty() {
                (0..t.rank()).filter(|&a| t.shape.dim(a).value() == Some(1)).map(|a| a as i64 + 1).collect()
            } else {
                axes.into_iter().map(shift).collect()
            };
            let x = ctx.stacked(0)?;
            if axes.is_empty() {
                return Converted::one(x, true);
            }
            Converted::one(ctx.graph().squeeze(x, Some(&axes))?, true)
        }
        ShapeOp::BroadcastTo { shape } => {
            let x = ctx.stacked(0)?;
            let y = broadcast_stacked(ctx, x, &shape)?;
            Converted::one(y, true)
        }
        ShapeOp::BroadcastToDyn => {
            if ctx.is_stacked(1) {
                return ConvertCtx::unhandled("broadcast_to_dyn with a loop-variant shape");
            }
            let x = ctx.stacked(0)?;
            let r = ctx.output_type(0).rank();
            let xr = ctx.input_type(0).rank();
            let mut v = x;
            for _ in xr..r {
                v = ctx.graph().expand_dims(v, 1)?;
            }
            let s = ctx.input(1).value;
            let full = with_loop_dim(ctx, s)?;
            Converted::one(ctx.graph().broadcast_to_dyn(v, full)?, true)
        }
        ShapeOp::Tile { multiples } => {
            let mut m = vec![1];
            m.extend(multiples);
            let x = ctx.stacked(0)?;
            Converted::one(ctx.graph().tile(x, &m)?, true)
        }
        ShapeOp::Fill { shape } => {
            // value is a stacked scalar [n]: broadcast it to [n] + shape.
            let v = ctx.stacked(0)?;
            let y = broadcast_stacked(ctx, v, &shape)?;
            Converted::one(y, true)
        }
        ShapeOp::FillDyn => {
            if ctx.is_stacked(0) {
                return ConvertCtx::unhandled("fill_dyn with a loop-variant shape");
            }
            let s = ctx.input(0).value;
            let v = ctx.stacked(1)?;
            let r = ctx.output_type(0).rank();
            let mut e = v;
            for _ in 0..r {
                e = ctx.graph().expand_dims(e, 1)?;
            }
            let full = with_loop_dim(ctx, s)?;
            Converted::one(ctx.graph().broadcast_to_dyn(e, full)?, true)
        }
        ShapeOp::ZerosLike | ShapeOp::OnesLike => {
            let t = ctx.input_type(0).clone();
            let v = if matches!(op, ShapeOp::ZerosLike) { 0.0 } else { 1.0 };
            match t.shape.as_fixed() {
                Some(d) => Converted::one(ctx.graph().constant(Tensor::full(t.dtype, &d, v)?), false),
                None => {
                    let x = ctx.input(0).value;
                    Converted::one(ctx.add(Op::Shape(op), &[x])?, x_st)
                }
            }
        }
        ShapeOp::ShapeOf => {
            let y = invariant_shape_of(ctx)?;
            Converted::one(y, false)
        }
        ShapeOp::Size => {
            let t = ctx.input_type(0).clone();
            let y = match t.shape.num_elements() {
                Some(k) => ctx.graph().constant(Tensor::scalar(k as i64)),
                None => {
                    let s = invariant_shape_of(ctx)?;
                    ctx.graph().reduce_prod(s, Some(&[0]), false)?
                }
            };
            Converted::one(y, false)
        }
        ShapeOp::LoopMax => {
            let x = ctx.input(0).value;
            let g = ctx.graph();
            let m = g.reduce_max(x, Some(&[0]), false)?;
            // reduce_max over no iterations is i64::MIN; sizes are >= 0.
            let zero = g.constant(Tensor::scalar(0i64));
            let m = g.maximum(m, zero)?;
            Converted::one(g.loop_max(m)?, false)
        }
        ShapeOp::Rank => {
            let r = ctx.input_type(0).rank() as i64;
            Converted::one(ctx.graph().constant(Tensor::scalar(r)), false)
        }
        ShapeOp::MatchShape { x_lead, like_lead } => {
            let (x, like) = (ctx.input(0), ctx.input(1));
            let op = ShapeOp::MatchShape {
                x_lead: x_lead + x.stacked as usize,
                like_lead: like_lead + like.stacked as usize,
            };
            Converted::one(ctx.add(Op::Shape(op), &[x.value, like.value])?, x.stacked)
        }
        ShapeOp::Range => ConvertCtx::unhandled("range with loop-variant bounds has a per-iteration length"),
        ShapeOp::Identity
        | ShapeOp::StopGradient
        | ShapeOp::ExpandDims { .. }
        | ShapeOp::OneHot { .. }
        | ShapeOp::Stack { .. }
        | ShapeOp::Unstack { .. } => ConvertCtx::unhandled("derived from the declared batching class"),
    }
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    // identity, stop_gradient and the one-axis ops are derived from their batching class
    for k in ShapeKind::ALL.iter().filter(|k| k.batching() == Batching::Custom) {
        r.register(OpKey::Builtin(OpKind::Shape(*k)), convert);
    }
    let _ = Graph::new;
}
