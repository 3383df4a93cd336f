//! Converters for gathers, scatters, segment ops and top_k.
//!
//! - gather: params invariant + stacked indices → one gather whose output axis `axis` holds
//!   the loop (moved to the front if `axis > 0`); `gather(x, i, 0)` over the full loop with
//!   `x.shape[0] == n` is `x` itself (zero cost); stacked params + invariant indices → the
//!   axis shifts by one; both stacked → `batch_dims + 1`, except `x_i[t_i]` (axis 0,
//!   scalar index) on a stacked `x` that is a row gather `gather(C, pos, 0)` (the active
//!   rows of a while / cond subset): one `gather_nd(C, [pos, t])`, so the subset rows of
//!   `C` are never copied (the row gather is then dead and pruned from the plan).
//! - scatters: indices get the iteration's position as an extra leading coordinate and the
//!   scatter targets the stacked `[n] + shape` tensor.
//! - segment ops: segment ids are offset by `position · num_segments` (negative ids stay
//!   dropped, ids `>= num_segments` stay out of range so the error is preserved).
//! - `nonzero` (one-argument `where`), whose result length depends on the data: one more
//!   batch dim. The stacked result is exact when every iteration finds the same number of
//!   elements; otherwise the run fails at that node with an error saying the per-iteration
//!   lengths differ (a ragged result cannot be stacked; no per-op loop fallback, which
//!   would fail the same way).

use crate::ops::{IndexKind, IndexOp, Op, OpKind, norm_axis};
use crate::tensor::Tensor;
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, Wrapped};
use crate::{Error, Result, ValueId};

fn gather(ctx: &mut ConvertCtx<'_>, axis: i64, batch_dims: usize) -> Result<Converted> {
    let a = norm_axis("gather", axis, ctx.input_type(0).rank())?;
    let (p, ix) = (ctx.input(0), ctx.input(1));
    match (p.stacked, ix.stacked) {
        (false, true) if batch_dims == 0 => {
            let info = ctx.loop_info().clone();
            let p_dim0 = ctx.input_type(0).shape.dims().first().and_then(|d| d.value());
            if a == 0
                && info.index_is_iota
                && ix.value == info.index
                && info.n_static.is_some()
                && p_dim0 == info.n_static
            {
                return Converted::stacked(p.value); // gather(x, i, 0) == x, stacked
            }
            let g = ctx.graph();
            let y = g.gather(p.value, ix.value, a as i64)?;
            if a == 0 {
                return Converted::stacked(y);
            }
            // the loop axis sits at position `a`: move it to the front
            let r = g.value_type(y)?.rank();
            let mut perm = vec![a];
            perm.extend((0..r).filter(|&d| d != a));
            Converted::stacked(g.transpose(y, &perm)?)
        }
        (true, false) if batch_dims == 0 => Converted::stacked(ctx.graph().gather(p.value, ix.value, a as i64 + 1)?),
        (true, true) if batch_dims == 0 && a == 0 && ctx.input_type(1).rank() == 0 => {
            // per-iteration `x_i[t_i]` where the stacked `x` is itself a row gather
            // `gather(C, pos, 0)` (the active rows of a while loop / cond branch): read
            // `C[pos_r, t_r]` directly instead of materializing the gathered rows.
            if let Some((c, pos)) = row_gather_source(ctx.graph(), p.value) {
                let g = ctx.graph();
                let ix = g.stack(&[pos, ix.value], 1)?;
                return Converted::stacked(g.gather_nd(c, ix, 0)?);
            }
            Converted::stacked(ctx.graph().gather_batched(p.value, ix.value, 1, 1)?)
        }
        _ => {
            let pv = ctx.stacked(0)?;
            let iv = ctx.stacked(1)?;
            Converted::stacked(ctx.graph().gather_batched(pv, iv, a as i64 + 1, batch_dims + 1)?)
        }
    }
}

/// `(C, pos)` when `v` is `gather(C, pos, axis 0)` with i64 positions `[m]` (rank ≥ 2 `C`).
fn row_gather_source(g: &crate::Graph, v: ValueId) -> Option<(ValueId, ValueId)> {
    let node = g.node(v.node).ok()?;
    let Op::Index(IndexOp::Gather { axis: 0, batch_dims: 0 }) = node.op else { return None };
    let (c, pos) = (*node.inputs.first()?, *node.inputs.get(1)?);
    let pt = g.value_type(pos).ok()?;
    let ok = pt.rank() == 1 && pt.dtype == crate::tensor::DType::I64 && g.value_type(c).ok()?.rank() >= 2;
    ok.then_some((c, pos))
}

fn gather_nd(ctx: &mut ConvertCtx<'_>, batch_dims: usize) -> Result<Converted> {
    if !ctx.is_stacked(0) && batch_dims == 0 {
        let (p, ix) = (ctx.input(0).value, ctx.input(1).value);
        return Converted::stacked(ctx.graph().gather_nd(p, ix, 0)?);
    }
    let p = ctx.stacked(0)?;
    let ix = ctx.stacked(1)?;
    Converted::stacked(ctx.graph().gather_nd(p, ix, batch_dims + 1)?)
}

/// Prepend each row's position in the stacked axis as a leading index coordinate:
/// `[n, ..., K] -> [n, ..., K+1]`.
fn with_position(ctx: &mut ConvertCtx<'_>, ix: ValueId) -> Result<ValueId> {
    let r = ctx.graph().value_type(ix)?.rank();
    let n = ctx.loop_len();
    let g = ctx.graph();
    // `[n, ..., 1]` zeros; a sum over the index axis rather than a slice of its first
    // column, which does not exist for depth-0 indices (`[n, ..., 0]`: whole-tensor updates).
    let zeros = g.zeros_like(ix)?;
    let zeros = g.reduce_sum(zeros, Some(&[-1]), true)?;
    let zero = g.constant(Tensor::scalar(0i64));
    let one = g.constant(Tensor::scalar(1i64));
    let pos = g.range(zero, n, one)?;
    let mut shape = vec![-1i64];
    shape.extend(std::iter::repeat_n(1, r - 1));
    let pos = g.reshape(pos, &shape)?;
    let col = g.add(zeros, pos)?;
    g.concat(&[col, ix], -1)
}

fn stacked_zeros(ctx: &mut ConvertCtx<'_>, shape: &[usize]) -> Result<ValueId> {
    let dt = ctx.output_type(0).dtype;
    let n = ctx.loop_len();
    let g = ctx.graph();
    let n1 = g.reshape(n, &[1])?;
    let s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let tail = g.constant(Tensor::vec1(&s));
    let full = g.concat(&[n1, tail], 0)?;
    let z = g.scalar(dt, 0.0);
    g.fill_dyn(full, z)
}

fn scatter_nd(ctx: &mut ConvertCtx<'_>, shape: &[usize]) -> Result<Converted> {
    let ix = ctx.stacked(0)?;
    let upd = ctx.stacked(1)?;
    let ix = with_position(ctx, ix)?;
    let z = stacked_zeros(ctx, shape)?;
    Converted::stacked(ctx.graph().tensor_scatter_add(z, ix, upd)?)
}

fn tensor_scatter(ctx: &mut ConvertCtx<'_>, add: bool) -> Result<Converted> {
    let t = ctx.stacked(0)?;
    let ix = ctx.stacked(1)?;
    let upd = ctx.stacked(2)?;
    let ix = with_position(ctx, ix)?;
    let g = ctx.graph();
    Converted::stacked(if add { g.tensor_scatter_add(t, ix, upd)? } else { g.tensor_scatter_update(t, ix, upd)? })
}

/// Segment sum for a loop length known only at run time: scatter-add each row into the
/// stacked `[n, num, rest...]` zeros at `(position, id)`; negative ids contribute zero.
fn segment_sum_dynamic(ctx: &mut ConvertCtx<'_>, num: usize) -> Result<Converted> {
    let out_t = ctx.output_type(0).clone();
    let Some(out_shape) = out_t.shape.as_fixed() else {
        return ConvertCtx::unhandled("segment sum with dynamic n and dynamic data dims");
    };
    let _ = num;
    let data = ctx.stacked(0)?;
    let ids = ctx.stacked(1)?;
    let data_rank = ctx.input_type(0).rank();
    let ids_rank = ctx.input_type(1).rank();
    let z = stacked_zeros(ctx, &out_shape)?;
    let n = ctx.loop_len();
    let g = ctx.graph();
    let zero = g.constant(Tensor::scalar(0i64));
    let one = g.constant(Tensor::scalar(1i64));
    let neg = g.less(ids, zero)?;
    let clean = g.select(neg, zero, ids)?;
    let pos = g.range(zero, n, one)?;
    let mut shape = vec![-1i64];
    shape.extend(std::iter::repeat_n(1, ids_rank));
    let pos = g.reshape(pos, &shape)?;
    let zs = g.zeros_like(ids)?;
    let pos = g.add(zs, pos)?;
    let ix = g.stack(&[pos, clean], -1)?;
    let mut m = neg;
    for _ in ids_rank..data_rank {
        m = g.expand_dims(m, -1)?;
    }
    let dz = g.zeros_like(data)?;
    let data = g.select(m, dz, data)?;
    Converted::stacked(g.tensor_scatter_add(z, ix, data)?)
}

fn segment(ctx: &mut ConvertCtx<'_>, kind: IndexKind, num: usize) -> Result<Converted> {
    let Some(n) = ctx.loop_info().n_static else {
        if kind == IndexKind::UnsortedSegmentSum {
            return segment_sum_dynamic(ctx, num);
        }
        return ConvertCtx::unhandled("segment max/min/prod with a dynamic loop length (num_segments must be static)");
    };
    // The flattened segment count `n * num` must be an i64 (ids are i64).
    let total = n.checked_mul(num).filter(|t| i64::try_from(*t).is_ok()).ok_or_else(|| {
        Error::shape(kind.name(), format!("{num} segments x {n} iterations overflow the i64 segment ids"))
    })?;
    let data = ctx.stacked(0)?;
    let ids = ctx.stacked(1)?;
    let r = ctx.graph().value_type(ids)?.rank();
    let g = ctx.graph();
    let pos = g.constant(Tensor::arange(n)?);
    let mut shape = vec![n as i64];
    shape.extend(std::iter::repeat_n(1, r - 1));
    let pos = g.reshape(pos, &shape)?;
    let numv = g.constant(Tensor::scalar(num as i64));
    let off = g.mul(pos, numv)?;
    let shifted = g.add(ids, off)?;
    let zero = g.constant(Tensor::scalar(0i64));
    let neg = g.less(ids, zero)?;
    let big = g.greater_equal(ids, numv)?;
    let minus1 = g.constant(Tensor::scalar(-1i64));
    let oob = g.constant(Tensor::scalar(total as i64));
    let s1 = g.select(big, oob, shifted)?;
    let ids2 = g.select(neg, minus1, s1)?;
    let y = match kind {
        IndexKind::UnsortedSegmentSum => g.unsorted_segment_sum(data, ids2, total)?,
        IndexKind::UnsortedSegmentMax => g.unsorted_segment_max(data, ids2, total)?,
        IndexKind::UnsortedSegmentMin => g.unsorted_segment_min(data, ids2, total)?,
        _ => g.unsorted_segment_prod(data, ids2, total)?,
    };
    let y = ctx.unflatten_first_known(y, num)?;
    Converted::stacked(y)
}

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Index(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not an indexing op");
    };
    match op {
        IndexOp::Gather { axis, batch_dims } => gather(ctx, axis, batch_dims),
        IndexOp::GatherNd { batch_dims } => gather_nd(ctx, batch_dims),
        IndexOp::ScatterNd { shape } => scatter_nd(ctx, &shape),
        IndexOp::TensorScatterUpdate => tensor_scatter(ctx, false),
        IndexOp::TensorScatterAdd => tensor_scatter(ctx, true),
        IndexOp::UnsortedSegmentSum { num_segments } => segment(ctx, IndexKind::UnsortedSegmentSum, num_segments),
        IndexOp::UnsortedSegmentMax { num_segments } => segment(ctx, IndexKind::UnsortedSegmentMax, num_segments),
        IndexOp::UnsortedSegmentMin { num_segments } => segment(ctx, IndexKind::UnsortedSegmentMin, num_segments),
        IndexOp::UnsortedSegmentProd { num_segments } => segment(ctx, IndexKind::UnsortedSegmentProd, num_segments),
        IndexOp::DynamicUpdateSlice => {
            if ctx.is_stacked(2) {
                return ConvertCtx::unhandled("dynamic_update_slice with a loop-variant start");
            }
            let x = ctx.stacked(0)?;
            let u = ctx.stacked(1)?;
            let s = ctx.input(2).value;
            let g = ctx.graph();
            let zero = g.constant(Tensor::vec1(&[0i64]));
            let s2 = g.concat(&[zero, s], 0)?;
            Converted::stacked(g.dynamic_update_slice(x, u, s2)?)
        }
        IndexOp::TopK { .. } => {
            let x = ctx.stacked(0)?;
            let outs = ctx.add_multi(Op::Index(op), &[x])?;
            ConvertCtx::done(outs.into_iter().map(Wrapped::stacked).collect())
        }
        IndexOp::NonZero { batch_dims } => {
            // one batch dim more: stacks when every iteration finds as many elements (a
            // run-time error at this node otherwise, see `src/ops/indexing/nonzero.rs`)
            let x = ctx.stacked(0)?;
            Converted::stacked(ctx.add(Op::Index(IndexOp::NonZero { batch_dims: batch_dims + 1 }), &[x])?)
        }
    }
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in IndexKind::ALL {
        r.register(OpKey::Builtin(OpKind::Index(*k)), convert);
    }
}
