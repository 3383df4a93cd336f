//! ONNX scatter and data-dependent selection operators: `ScatterElements` (and its
//! deprecated alias `Scatter`), `ScatterND`, `Compress`, `NonZero`, `ReverseSequence`.
//!
//! Compositions (no new kinds): `ScatterElements` is our `tensor_scatter_update` /
//! `tensor_scatter_add` with coordinate tuples built as `GatherElements`' (the index stacked
//! with constant iotas); `ScatterND` maps onto the same kinds directly; `Compress` and
//! `ReverseSequence` are gathers with index vectors computed at import from their constant
//! condition / lengths; `NonZero` is our `nonzero` transposed to ONNX's `[rank, count]`.
//! Invariants: the reductions `mul` / `max` / `min` are refused by name (no kind computes
//! them); `Compress`'s condition and `ReverseSequence`'s lengths must be constants (their
//! output shapes depend on them); duplicate indices under `none` follow our kinds (the last
//! update wins), where ONNX leaves the result undefined.

use super::convert::NodeCx;
use super::ops_index::wrap_negative;
use super::ops_shape::{fixed_shape, norm_axis};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::Tensor;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["Compress", "NonZero", "ReverseSequence", "Scatter", "ScatterElements", "ScatterND"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_one(g, n).map(|v| vec![v]))
}

/// Coordinates `[..., r]` addressing `x` at `idx` along `axis` and at the own position along
/// every other axis (`idx`'s shape `id`).
pub(super) fn element_coords(g: &mut Graph, idx: ValueId, id: &[usize], axis: usize) -> Result<ValueId> {
    let count: usize = id.iter().product();
    let mut coords = Vec::with_capacity(id.len());
    for a in 0..id.len() {
        if a == axis {
            coords.push(idx);
            continue;
        }
        let stride: usize = id[a + 1..].iter().product();
        let v: Vec<i64> = (0..count).map(|p| ((p / stride) % id[a]) as i64).collect();
        coords.push(g.constant(Tensor::from_vec(id, v)?));
    }
    g.stack(&coords, -1)
}

fn reduction(n: &NodeCx) -> Result<bool> {
    let r = n.attr_choice("reduction", &["none", "add", "mul", "max", "min"])?;
    match r.as_str() {
        "none" => Ok(false),
        "add" => Ok(true),
        other => Err(n.unsupported(format!("attribute reduction = '{other}' (none, add)"))),
    }
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    match n.op() {
        "Scatter" | "ScatterElements" => {
            let add = reduction(n)?;
            let xd = fixed_shape(g, n, x, n.op())?;
            let (idx, upd) = (n.input(1)?, n.input(2)?);
            let id = fixed_shape(g, n, idx, n.op())?;
            if id.len() != xd.len() {
                return Err(n.invalid(format!("data {xd:?} and indices {id:?} differ in rank")));
            }
            let axis = norm_axis(n, n.attr_i("axis", 0), xd.len())?;
            let idx = wrap_negative(g, idx, &Tensor::scalar(xd[axis] as i64))?;
            let c = element_coords(g, idx, &id, axis)?;
            if add { g.tensor_scatter_add(x, c, upd) } else { g.tensor_scatter_update(x, c, upd) }
        }
        "ScatterND" => {
            let add = reduction(n)?;
            let xd = fixed_shape(g, n, x, "ScatterND")?;
            let idx = n.input(1)?;
            let id = fixed_shape(g, n, idx, "ScatterND")?;
            let k = *id.last().ok_or_else(|| n.invalid("indices of rank 0"))?;
            if k > xd.len() {
                return Err(n.invalid(format!("indices {id:?} for data {xd:?}")));
            }
            let dims: Vec<i64> = xd[..k].iter().map(|&d| d as i64).collect();
            let idx = wrap_negative(g, idx, &Tensor::vec1(&dims))?;
            let upd = n.input(2)?;
            if add { g.tensor_scatter_add(x, idx, upd) } else { g.tensor_scatter_update(x, idx, upd) }
        }
        "NonZero" => {
            let c = g.nonzero(x)?;
            g.transpose(c, &[1, 0])
        }
        "Compress" => {
            let cond = n.const_input(g, 1)?.ok_or_else(|| n.invalid("condition is missing"))?;
            let keep: Vec<i64> =
                cond.to_f64_vec().iter().enumerate().filter(|&(_, &c)| c != 0.0).map(|(i, _)| i as i64).collect();
            let (src, axis) = match n.attr("axis").map(|a| a.i) {
                Some(a) => {
                    let r = g.shape(x)?.rank();
                    (x, norm_axis(n, a, r)?)
                }
                None => (g.reshape(x, &[-1])?, 0),
            };
            let dim = fixed_shape(g, n, src, "Compress")?[axis];
            if keep.iter().any(|&i| i as usize >= dim) {
                return Err(n.invalid(format!("condition of {} entries for an axis of {dim}", cond.to_f64_vec().len())));
            }
            let iv = g.constant(Tensor::vec1(&keep));
            g.gather(src, iv, axis as i64)
        }
        _ => reverse_sequence(g, n, x),
    }
}

/// `ReverseSequence`: each batch entry's first `len` steps reversed, the rest kept, as one
/// `gather_nd` with constant coordinates.
fn reverse_sequence(g: &mut Graph, n: &NodeCx, x: ValueId) -> Result<ValueId> {
    let xd = fixed_shape(g, n, x, "ReverseSequence")?;
    if xd.len() < 2 {
        return Err(n.invalid(format!("input {xd:?} of rank below 2")));
    }
    let ta = n.attr_i("time_axis", 0) as usize;
    let ba = n.attr_i("batch_axis", 1) as usize;
    if ta > 1 || ba > 1 || ta == ba {
        return Err(n.invalid(format!("time_axis {ta} and batch_axis {ba} (0 and 1, distinct)")));
    }
    let lens = n.const_ints(g, 1)?.ok_or_else(|| n.invalid("sequence_lens is missing"))?;
    let (steps, batch) = (xd[ta], xd[ba]);
    if lens.len() != batch || lens.iter().any(|&l| l < 0 || l as usize > steps) {
        return Err(n.invalid(format!("sequence_lens {lens:?} for batch {batch} and {steps} steps")));
    }
    // coordinates over the first two axes: [d0, d1, 2]
    let mut v = Vec::with_capacity(xd[0] * xd[1] * 2);
    for i in 0..xd[0] {
        for j in 0..xd[1] {
            let (t, b) = if ta == 0 { (i, j) } else { (j, i) };
            let l = lens[b] as usize;
            let src = if t < l { l - 1 - t } else { t };
            let (a0, a1) = if ta == 0 { (src, b) } else { (b, src) };
            v.push(a0 as i64);
            v.push(a1 as i64);
        }
    }
    let c = g.constant(Tensor::from_vec(&[xd[0], xd[1], 2], v)?);
    g.gather_nd(x, c, 0)
}
