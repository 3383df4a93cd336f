//! Derivative rules of the `indexing` family (`src/ops/indexing.rs`).
//!
//! Index inputs (indices, segment ids, start offsets) are i64 and never get a cotangent.
//! Every rule is built from differentiable graph ops, so gradients can be taken again:
//! - `gather` ↔ `unsorted_segment_sum` are each other's adjoint (duplicate indices sum);
//!   batch dims are folded into the segment ids (`id + batch_row * n`);
//! - `gather_nd` → `tensor_scatter_add` into zeros (batch coordinates prepended to the
//!   indices); `scatter_nd` / `tensor_scatter_add` → `gather_nd` of the cotangent;
//! - `tensor_scatter_update`: the tensor gets the cotangent with the overwritten positions
//!   zeroed; of duplicate updates only the LAST one (the one the forward pass kept) gets a
//!   gradient — a "winner" table is rebuilt by scattering row numbers the same way (the
//!   index depth, the indices' last dim, must be fixed; the rows may be dynamic);
//! - `unsorted_segment_max/min`: the cotangent goes to the elements equal to their
//!   segment's extremum, split equally among ties (like `reduce_max`); `_prod`: times the
//!   product of the other elements of the segment, exact with zeros (one zero: only it gets
//!   a gradient; two or more: none);
//! - segment ids `< 0` drop their rows: those rows get zero cotangent;
//! - `dynamic_update_slice`: the operand gets the cotangent with the window zeroed, the
//!   update gets the window (`dynamic_slice`; for an update shape known only at run time,
//!   one gather of a `range` per axis);
//! - `top_k`: values are a batched gather of the input at the returned indices (so ties
//!   send the cotangent to the element that was returned); indices and `nonzero` are not
//!   differentiable.
//!
//! Forward mode applies the same (linear) op to the tangents, or for the nonlinear segment
//! reductions the segment sum of the weighted tangents.

use crate::autodiff::util::{dim_size, range_along};
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::{IndexKind, IndexOp, Op};
use crate::tensor::{DType, Tensor};

/// Cotangents of the inputs.
pub fn vjp(op: &IndexOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    let mut out = vec![None; n_in];
    if !differentiable(op.kind()) || !cx.needs.iter().any(|b| *b) {
        return Ok(out);
    }
    let dy = cx.dy(0)?;
    let g = &mut *cx.g;
    let needs = cx.needs.clone();
    let (x0, x1) = (cx.inputs[0], cx.inputs.get(1).copied());
    let need = |i: usize| needs.get(i).copied().unwrap_or(false);
    match op {
        IndexOp::Gather { axis, batch_dims } => {
            let idx = x1.ok_or_else(|| arity(op))?;
            let ax = norm(*axis, g.shape(x0)?.rank());
            out[0] = Some(gather_adjoint(g, x0, idx, dy, ax, *batch_dims)?);
        }
        IndexOp::GatherNd { batch_dims } => {
            let idx = x1.ok_or_else(|| arity(op))?;
            let full = batched_nd_indices(g, idx, *batch_dims)?;
            let z = g.zeros_like(x0)?;
            out[0] = Some(g.tensor_scatter_add(z, full, dy)?);
        }
        IndexOp::ScatterNd { .. } => {
            if need(1) {
                out[1] = Some(g.gather_nd(dy, x0, 0)?);
            }
        }
        IndexOp::TensorScatterAdd => {
            let idx = x1.ok_or_else(|| arity(op))?;
            if need(0) {
                out[0] = Some(dy);
            }
            if need(2) {
                out[2] = Some(g.gather_nd(dy, idx, 0)?);
            }
        }
        IndexOp::TensorScatterUpdate => {
            let idx = x1.ok_or_else(|| arity(op))?;
            let upd = cx.inputs[2];
            if need(0) {
                let z = g.zeros_like(upd)?;
                out[0] = Some(g.tensor_scatter_update(dy, idx, z)?);
            }
            if need(2) {
                let d = g.gather_nd(dy, idx, 0)?;
                let won = last_writer_mask(g, x0, idx, upd)?;
                let z = g.zeros_like(d)?;
                out[2] = Some(g.select(won, d, z)?);
            }
        }
        IndexOp::UnsortedSegmentSum { .. } => {
            let ids = x1.ok_or_else(|| arity(op))?;
            out[0] = Some(gather_rows(g, dy, ids)?);
        }
        IndexOp::UnsortedSegmentMax { num_segments }
        | IndexOp::UnsortedSegmentMin { num_segments }
        | IndexOp::UnsortedSegmentProd { num_segments } => {
            let ids = x1.ok_or_else(|| arity(op))?;
            let y = cx.outputs[0];
            let w = segment_weights(g, op, x0, ids, y, *num_segments)?;
            let d = gather_rows(g, dy, ids)?;
            out[0] = Some(g.mul(d, w)?);
        }
        IndexOp::DynamicUpdateSlice => {
            let (upd, start) = (cx.inputs[1], cx.inputs[2]);
            if need(0) {
                let z = g.zeros_like(upd)?;
                out[0] = Some(g.dynamic_update_slice(dy, z, start)?);
            }
            if need(1) {
                out[1] = Some(match g.shape(upd)?.as_fixed() {
                    Some(sizes) => g.dynamic_slice(dy, start, &sizes)?,
                    None => {
                        // An update shape known at run time: per axis, gather its range.
                        let mut d = dy;
                        for ax in 0..g.shape(upd)?.rank() {
                            let a = g.constant(Tensor::scalar(ax as i64));
                            let st = g.gather(start, a, 0)?;
                            let len = dim_size(g, upd, ax)?;
                            d = range_along(g, d, ax, st, len)?;
                        }
                        d
                    }
                });
            }
        }
        IndexOp::TopK { .. } => {
            let idx = cx.outputs[1];
            let r = g.shape(x0)?.rank();
            out[0] = Some(gather_adjoint(g, x0, idx, dy, r - 1, r - 1)?);
        }
        IndexOp::NonZero { .. } => {}
    }
    Ok(out)
}

/// Tangents of the outputs.
pub fn jvp(op: &IndexOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_out = cx.outputs.len();
    if !differentiable(op.kind()) {
        return Ok(vec![None; n_out]);
    }
    let same_op = |cx: &mut JvpCtx<'_>, ins: &[ValueId]| cx.g.add_op(Op::Index(op.clone()), ins);
    let t = match op {
        IndexOp::Gather { .. } | IndexOp::GatherNd { .. } | IndexOp::UnsortedSegmentSum { .. } => {
            let Some(t) = cx.t(0) else { return Ok(vec![None]) };
            let idx = cx.x(1);
            same_op(cx, &[t, idx])?
        }
        IndexOp::ScatterNd { .. } => {
            let Some(t) = cx.t(1) else { return Ok(vec![None]) };
            let idx = cx.x(0);
            same_op(cx, &[idx, t])?
        }
        IndexOp::TensorScatterUpdate | IndexOp::TensorScatterAdd => {
            if cx.t(0).is_none() && cx.t(2).is_none() {
                return Ok(vec![None]);
            }
            let (a, b) = (cx.t_or_zero(0)?, cx.t_or_zero(2)?);
            let idx = cx.x(1);
            same_op(cx, &[a, idx, b])?
        }
        IndexOp::DynamicUpdateSlice => {
            if cx.t(0).is_none() && cx.t(1).is_none() {
                return Ok(vec![None]);
            }
            let (a, b) = (cx.t_or_zero(0)?, cx.t_or_zero(1)?);
            let start = cx.x(2);
            same_op(cx, &[a, b, start])?
        }
        IndexOp::UnsortedSegmentMax { num_segments }
        | IndexOp::UnsortedSegmentMin { num_segments }
        | IndexOp::UnsortedSegmentProd { num_segments } => {
            let Some(t) = cx.t(0) else { return Ok(vec![None]) };
            let (x, ids, y) = (cx.x(0), cx.x(1), cx.y(0));
            let g = &mut *cx.g;
            let w = segment_weights(g, op, x, ids, y, *num_segments)?;
            let tw = g.mul(t, w)?;
            g.unsorted_segment_sum(tw, ids, *num_segments)?
        }
        IndexOp::TopK { .. } => {
            let Some(t) = cx.t(0) else { return Ok(vec![None, None]) };
            let (x, idx) = (cx.x(0), cx.y(1));
            let r = cx.g.shape(x)?.rank();
            let v = cx.g.gather_batched(t, idx, r as i64 - 1, r - 1)?;
            return Ok(vec![Some(v), None]);
        }
        IndexOp::NonZero { .. } => return Ok(vec![None]),
    };
    Ok(vec![Some(t)])
}

/// Whether derivatives flow through this kind: everything but `nonzero` (integer output).
pub fn differentiable(k: IndexKind) -> bool {
    !matches!(k, IndexKind::NonZero)
}

fn arity(op: &IndexOp) -> Error {
    Error::arity(op.kind().name(), "an index input", 1)
}

fn norm(axis: i64, rank: usize) -> usize {
    if axis < 0 { (axis + rank as i64).max(0) as usize } else { axis as usize }
}

fn static_dims(g: &Graph, v: ValueId, op: &str) -> Result<Vec<usize>> {
    g.shape(v)?.as_fixed().ok_or_else(|| Error::unsupported(op, "gradient with batch_dims needs static shapes"))
}

/// The adjoint of `gather(params, indices, axis = ax, batch_dims = b)` applied to `dy`:
/// move the index dims of `dy` first, segment-sum them into the `n` rows of the gathered
/// axis (batch rows get their own block of `n` segments), move the axis back.
fn gather_adjoint(
    g: &mut Graph,
    params: ValueId,
    indices: ValueId,
    dy: ValueId,
    ax: usize,
    b: usize,
) -> Result<ValueId> {
    let sp = g.shape(params)?;
    let (rp, ri) = (sp.rank(), g.shape(indices)?.rank());
    let (o, ii, j) = (ax - b, ri - b, rp - ax - 1);
    // dy: [B | O | I | J] -> [B | I | O | J]
    let perm1: Vec<usize> = (0..b).chain(b + o..b + o + ii).chain(b..b + o).chain(b + o + ii..b + o + ii + j).collect();
    let dyt = transpose_if(g, dy, &perm1)?;
    let Some(n) = sp.dim(ax).value() else {
        if b > 0 {
            return Err(Error::unsupported(
                "gather",
                "gradient with batch_dims needs a static size of the gathered axis",
            ));
        }
        // A gathered axis known only at run time (e.g. a loop's recorded history):
        // scatter-add into zeros of the params' (run-time) shape, gathered axis first.
        let perm0: Vec<usize> = [ax].into_iter().chain(0..ax).chain(ax + 1..rp).collect();
        let pt = transpose_if(g, params, &perm0)?; // [n | O | J]
        let z = g.zeros_like(pt)?;
        let idx = g.expand_dims(indices, -1)?;
        let s = g.tensor_scatter_add(z, idx, dyt)?;
        let perm2: Vec<usize> = (1..1 + o).chain([0]).chain(1 + o..1 + o + j).collect();
        return transpose_if(g, s, &perm2);
    };
    if b == 0 {
        let s = g.unsorted_segment_sum(dyt, indices, n)?; // [n | O | J]
        let perm2: Vec<usize> = (1..1 + o).chain([0]).chain(1 + o..1 + o + j).collect();
        return transpose_if(g, s, &perm2);
    }
    let pdims = static_dims(g, params, "gather")?;
    let bprod: usize = pdims[..b].iter().product();
    // Segment id = index + (flat batch row) * n.
    let mut oshape: Vec<usize> = pdims[..b].to_vec();
    oshape.extend(std::iter::repeat_n(1, ii));
    let offs: Vec<i64> = (0..bprod as i64).map(|r| r * n as i64).collect();
    let offs = g.constant(Tensor::from_vec(&oshape, offs)?);
    let ids = g.add(indices, offs)?;
    let s = g.unsorted_segment_sum(dyt, ids, bprod * n)?; // [B*n | O | J]
    let mut shape: Vec<i64> = pdims[..b].iter().map(|&d| d as i64).collect();
    shape.push(n as i64);
    shape.extend(pdims[b..ax].iter().chain(&pdims[ax + 1..]).map(|&d| d as i64));
    let s = g.reshape(s, &shape)?; // [B | n | O | J]
    let perm2: Vec<usize> = (0..b).chain(b + 1..b + 1 + o).chain([b]).chain(b + 1 + o..b + 1 + o + j).collect();
    transpose_if(g, s, &perm2)
}

fn transpose_if(g: &mut Graph, v: ValueId, perm: &[usize]) -> Result<ValueId> {
    if perm.iter().enumerate().all(|(i, &p)| i == p) { Ok(v) } else { g.transpose(v, perm) }
}

/// `gather_nd` indices with the `b` batch coordinates prepended (depth `b + K`), so that a
/// plain (`batch_dims = 0`) scatter into `params`' shape is the adjoint.
fn batched_nd_indices(g: &mut Graph, indices: ValueId, b: usize) -> Result<ValueId> {
    if b == 0 {
        return Ok(indices);
    }
    let Some(idims) = g.shape(indices)?.as_fixed() else {
        return batched_nd_indices_dyn(g, indices, b);
    };
    let ri = idims.len();
    let bdims = &idims[..b];
    let bprod: usize = bdims.iter().product();
    // coords[B..., 1 (ri - 1 - b times), b]
    let mut coords = Vec::with_capacity(bprod * b);
    for r in 0..bprod {
        let mut rem = r;
        let mut c = vec![0i64; b];
        for d in (0..b).rev() {
            c[d] = (rem % bdims[d]) as i64;
            rem /= bdims[d];
        }
        coords.extend(c);
    }
    let mut cshape = bdims.to_vec();
    cshape.extend(std::iter::repeat_n(1, ri - 1 - b));
    cshape.push(b);
    let c = g.constant(Tensor::from_vec(&cshape, coords)?);
    let mut full = idims[..ri - 1].to_vec();
    full.push(b);
    let c = g.broadcast_to(c, &full)?;
    g.concat(&[c, indices], -1)
}

/// [`batched_nd_indices`] for indices whose shape is known only at run time (the rows of a
/// pfor'd Subset form): the batch coordinates are `range`s broadcast over the index dims.
fn batched_nd_indices_dyn(g: &mut Graph, indices: ValueId, b: usize) -> Result<ValueId> {
    let ri = g.shape(indices)?.rank();
    let s = g.shape_of(indices)?;
    let lead = g.slice(s, &[0], &[ri as i64 - 1])?;
    let (zero, one) = (g.scalar(DType::I64, 0.0), g.scalar(DType::I64, 1.0));
    let mut parts = Vec::with_capacity(b + 1);
    for d in 0..b {
        let at = g.scalar(DType::I64, d as f64);
        let nd = g.gather(s, at, 0)?;
        let r = g.range(zero, nd, one)?;
        let mut shape = vec![1i64; ri - 1];
        shape[d] = -1;
        let r = g.reshape(r, &shape)?;
        let r = g.broadcast_to_dyn(r, lead)?;
        parts.push(g.expand_dims(r, -1)?);
    }
    parts.push(indices);
    g.concat(&parts, -1)
}

/// Rows `v[ids[r]]` (shape `ids.shape ++ v.shape[1..]`), zero where `ids[r] < 0` (rows a
/// segment op dropped).
fn gather_rows(g: &mut Graph, v: ValueId, ids: ValueId) -> Result<ValueId> {
    let zero = g.scalar(DType::I64, 0.0);
    let safe = g.maximum(ids, zero)?;
    let rows = g.gather(v, safe, 0)?;
    let valid = valid_mask(g, v, ids)?;
    let z = g.zeros_like(rows)?;
    g.select(valid, rows, z)
}

/// `ids >= 0` with trailing unit dims for the inner dims of segment data (of rank
/// `rank(ids) + rank(v) - 1`), ready to broadcast.
fn valid_mask(g: &mut Graph, v: ValueId, ids: ValueId) -> Result<ValueId> {
    let zero = g.scalar(DType::I64, 0.0);
    let mut m = g.greater_equal(ids, zero)?;
    for _ in 1..g.shape(v)?.rank() {
        m = g.expand_dims(m, -1)?;
    }
    Ok(m)
}

/// `∂y[ids[r]] / ∂x[r]` of a segment max / min / prod, with the shape of `x` (zero for
/// dropped rows).
fn segment_weights(g: &mut Graph, op: &IndexOp, x: ValueId, ids: ValueId, y: ValueId, n: usize) -> Result<ValueId> {
    let dt = g.dtype(x)?;
    let valid = valid_mask(g, y, ids)?;
    if let IndexOp::UnsortedSegmentProd { .. } = op {
        let zero = g.zeros_like(x)?;
        let one = g.ones_like(x)?;
        let nz = g.not_equal(x, zero)?;
        let xs = g.select(nz, x, one)?;
        let pn = g.unsorted_segment_prod(xs, ids, n)?; // product of the nonzeros
        let isz = g.logical_not(nz)?;
        let zf = g.cast(isz, dt)?;
        let zc = g.unsorted_segment_sum(zf, ids, n)?; // zeros per segment
        let (pnr, zr) = (gather_rows(g, pn, ids)?, gather_rows(g, zc, ids)?);
        let others_nz = g.div(pnr, xs)?;
        let c0 = g.scalar(dt, 0.0);
        let c1 = g.scalar(dt, 1.0);
        let (no_zero, one_zero) = (g.equal(zr, c0)?, g.equal(zr, c1)?);
        let a = g.select(no_zero, others_nz, zero)?;
        let b = g.select(one_zero, pnr, zero)?;
        let w = g.select(nz, a, b)?;
        return g.select(valid, w, zero);
    }
    let yr = gather_rows(g, y, ids)?;
    let eq = g.equal(x, yr)?;
    let eq = g.logical_and(eq, valid)?;
    let m = g.cast(eq, dt)?;
    let count = g.unsorted_segment_sum(m, ids, n)?;
    let cr = gather_rows(g, count, ids)?;
    let c1 = g.scalar(dt, 1.0);
    let cr = g.maximum(cr, c1)?;
    g.div(m, cr)
}

/// For `tensor_scatter_update(t, idx[..., K], upd)`: true for the rows of `idx` whose update
/// survived (the last write to each position), with unit dims for `upd`'s inner dims.
fn last_writer_mask(g: &mut Graph, t: ValueId, idx: ValueId, upd: ValueId) -> Result<ValueId> {
    let ishape = g.shape(idx)?;
    let ri = ishape.rank();
    let Some(k) = ishape.dims().last().and_then(|d| d.value()) else {
        return Err(Error::unsupported(
            "tensor_scatter_update",
            format!("gradient needs a fixed index depth (last dim), indices have shape {ishape}"),
        ));
    };
    let nrows_dims = ri - 1;
    let row_ids = match ishape.as_fixed() {
        Some(idims) => {
            let rows = &idims[..nrows_dims];
            let nrows: usize = rows.iter().product();
            g.constant(Tensor::from_vec(rows, (0..nrows as i64).collect::<Vec<i64>>())?)
        }
        None => {
            // Index rows known at run time: range(rows) reshaped to the index rows' shape.
            let si = g.shape_of(idx)?;
            let rows = g.slice(si, &[0], &[nrows_dims as i64])?;
            let nrows = g.reduce_prod(rows, Some(&[0]), false)?;
            let (zero, one) = (g.constant(Tensor::scalar(0i64)), g.constant(Tensor::scalar(1i64)));
            let ids = g.range(zero, nrows, one)?;
            g.reshape_dyn(ids, rows)?
        }
    };
    // A table over t's first K dims holding the row that wrote each position last.
    let s = g.shape_of(t)?;
    let s = g.slice(s, &[0], &[k as i64])?;
    let minus1 = g.scalar(DType::I64, -1.0);
    let table = g.fill_dyn(s, minus1)?;
    let table = g.tensor_scatter_update(table, idx, row_ids)?;
    let winner = g.gather_nd(table, idx, 0)?;
    let mut m = g.equal(winner, row_ids)?;
    let inner = g.shape(upd)?.rank() - nrows_dims;
    for _ in 0..inner {
        m = g.expand_dims(m, -1)?;
    }
    Ok(m)
}
