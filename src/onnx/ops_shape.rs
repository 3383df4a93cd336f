//! ONNX shape, layout and indexing operators: `Constant`, `ConstantOfShape`, `Shape`,
//! `Size`, `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Transpose`, `Concat`, `Split`,
//! `Slice`, `Gather`, `Expand`, `Tile`, `Range`, `Pad`.
//!
//! Invariants: shape operands (`Reshape`'s shape, `Slice`'s starts, axes, ...) must be
//! constants at import time (constant subgraphs are folded before they get here), else the
//! import fails naming the input; axes are normalized against the static rank, never guessed.

use super::convert::{NodeCx, const_value};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::slicing::{PadMode, StridedSliceSpec};
use crate::tensor::{DType, Tensor};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &[
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Expand",
    "Flatten",
    "Gather",
    "Pad",
    "Range",
    "Reshape",
    "Shape",
    "Size",
    "Slice",
    "Split",
    "Squeeze",
    "Tile",
    "Transpose",
    "Unsqueeze",
];

/// Converts `n` if it is a shape op.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(if n.op() == "Split" { split(g, n) } else { convert_one(g, n).map(|v| vec![v]) })
}

/// The static shape of `v`, or an unsupported error naming what needed it.
pub(super) fn fixed_shape(g: &Graph, n: &NodeCx, v: ValueId, what: &str) -> Result<Vec<usize>> {
    g.shape(v)?.as_fixed().ok_or_else(|| n.unsupported(format!("{what} of an input with dynamic dims")))
}

/// `axis` (negative counts from the end) as an index below `rank`.
pub(super) fn norm_axis(n: &NodeCx, axis: i64, rank: usize) -> Result<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        return Err(n.invalid(format!("axis {axis} out of range for rank {rank}")));
    }
    Ok(a as usize)
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    match n.op() {
        "Constant" => constant(g, n),
        "ConstantOfShape" => {
            let shape = n.const_ints(g, 0)?.unwrap_or_default();
            let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
            let value = match n.attr("value").and_then(|a| a.t.as_ref()) {
                Some(t) => super::tensor::to_tensor(t)?,
                None => Tensor::scalar(0.0f32),
            };
            let v = value.to_f64_vec().first().copied().unwrap_or(0.0);
            Ok(g.constant(Tensor::full(value.dtype(), &shape, v)?))
        }
        "Shape" => {
            let dims = fixed_shape(g, n, n.input(0)?, "Shape")?;
            let r = dims.len() as i64;
            let clampi = |x: i64| (if x < 0 { x + r } else { x }).clamp(0, r) as usize;
            let start = clampi(n.attr_i("start", 0));
            let end = clampi(n.attr_i("end", r));
            let part: Vec<i64> = dims[start..end.max(start)].iter().map(|&d| d as i64).collect();
            Ok(g.constant(Tensor::vec1(&part)))
        }
        "Size" => {
            let dims = fixed_shape(g, n, n.input(0)?, "Size")?;
            Ok(g.constant(Tensor::scalar(dims.iter().product::<usize>() as i64)))
        }
        "Reshape" => {
            let x = n.input(0)?;
            let dims = fixed_shape(g, n, x, "Reshape")?;
            let allowzero = n.attr_i("allowzero", 0) != 0;
            let target = if n.opset < 5 {
                n.attr_ints("shape").unwrap_or_default()
            } else {
                n.const_ints(g, 1)?.unwrap_or_default()
            };
            let target: Vec<i64> = target
                .iter()
                .enumerate()
                .map(|(i, &d)| if d == 0 && !allowzero { dims.get(i).map_or(0, |&v| v as i64) } else { d })
                .collect();
            g.reshape(x, &target)
        }
        "Flatten" => {
            let x = n.input(0)?;
            let dims = fixed_shape(g, n, x, "Flatten")?;
            let a = n.attr_i("axis", 1);
            let a = if a < 0 { a + dims.len() as i64 } else { a };
            if a < 0 || a > dims.len() as i64 {
                return Err(n.invalid(format!("axis {a} out of range for rank {}", dims.len())));
            }
            let lead: usize = dims[..a as usize].iter().product();
            let rest: usize = dims[a as usize..].iter().product();
            g.reshape(x, &[lead as i64, rest as i64])
        }
        "Squeeze" | "Unsqueeze" => {
            let x = n.input(0)?;
            let axes = if n.opset < 13 { n.attr_ints("axes") } else { n.const_ints(g, 1)? };
            let dims = fixed_shape(g, n, x, n.op())?;
            if n.op() == "Squeeze" {
                let axes = match axes {
                    Some(a) => a,
                    None => (0..dims.len() as i64).filter(|&i| dims[i as usize] == 1).collect(),
                };
                let axes: Vec<i64> =
                    axes.iter().map(|&a| norm_axis(n, a, dims.len()).map(|a| a as i64)).collect::<Result<_>>()?;
                if axes.is_empty() { g.identity(x) } else { g.squeeze(x, Some(&axes)) }
            } else {
                let axes = axes.ok_or_else(|| n.invalid("axes missing"))?;
                let out_rank = dims.len() + axes.len();
                let mut axes: Vec<usize> = axes.iter().map(|&a| norm_axis(n, a, out_rank)).collect::<Result<_>>()?;
                axes.sort_unstable();
                let mut shape = Vec::with_capacity(out_rank);
                let mut src = dims.iter();
                for i in 0..out_rank {
                    shape.push(if axes.contains(&i) { 1 } else { *src.next().unwrap_or(&1) as i64 });
                }
                g.reshape(x, &shape)
            }
        }
        "Transpose" => {
            let x = n.input(0)?;
            let r = g.shape(x)?.rank();
            let perm: Vec<usize> = match n.attr_ints("perm") {
                Some(p) => p.iter().map(|&a| norm_axis(n, a, r)).collect::<Result<_>>()?,
                None => (0..r).rev().collect(),
            };
            g.transpose(x, &perm)
        }
        "Concat" => {
            let xs = n.all_inputs();
            let axis = n.attr_i("axis", 0);
            if xs.len() == 1 { g.identity(xs[0]) } else { g.concat(&xs, axis) }
        }
        "Gather" => {
            let x = n.input(0)?;
            let r = g.shape(x)?.rank();
            let axis = norm_axis(n, n.attr_i("axis", 0), r)?;
            let dim = fixed_shape(g, n, x, "Gather")?[axis] as i64;
            let mut idx = n.input(1)?;
            // negative indices count from the end
            if let Some(t) = const_value(g, idx) {
                let v: Vec<i64> =
                    t.to_f64_vec().iter().map(|&i| if i < 0.0 { i as i64 + dim } else { i as i64 }).collect();
                idx = g.constant(Tensor::from_vec(t.shape(), v)?);
            } else {
                let z = g.scalar(DType::I64, 0.0);
                let neg = g.less(idx, z)?;
                let shifted = g.add_scalar(idx, dim as f64)?;
                idx = g.select(neg, shifted, idx)?;
            }
            g.gather(x, idx, axis as i64)
        }
        "Expand" => {
            let x = n.input(0)?;
            let dims = fixed_shape(g, n, x, "Expand")?;
            let target = n.const_ints(g, 1)?.unwrap_or_default();
            // bidirectional broadcasting: the result's rank is the larger one; 1s take the other
            let r = dims.len().max(target.len());
            let pad = |v: &[usize], i: usize| if i + v.len() >= r { v[i + v.len() - r] } else { 1 };
            let t: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
            let out: Vec<usize> = (0..r).map(|i| pad(&dims, i).max(pad(&t, i))).collect();
            g.broadcast_to(x, &out)
        }
        "Tile" => {
            let x = n.input(0)?;
            let reps = n.const_ints(g, 1)?.unwrap_or_default();
            g.tile(x, &reps.iter().map(|&r| r.max(0) as usize).collect::<Vec<_>>())
        }
        "Range" => {
            let (s, l, d) = (n.input(0)?, n.input(1)?, n.input(2)?);
            // the output's length is its bounds' function: run-time bounds would make it data
            // dependent (ragged under pfor), so they must be constants
            let mut bounds = [s, l, d];
            for (k, b) in bounds.iter_mut().enumerate() {
                // ONNX's reference also takes one-element [1] bounds
                if n.const_input(g, k)?.is_some_and(|t| t.shape() == [1]) {
                    *b = g.reshape(*b, &[])?;
                }
            }
            let [s, l, d] = bounds;
            // Range-27: float16 / bfloat16 (held as f32) are computed in f32, which is
            // stash_type = 1; 0 (accumulate in the narrow type) is not modelled
            if n.attr_i("stash_type", 1) != 1 && g.dtype(s)? == DType::F32 {
                return Err(n.unsupported("attribute stash_type = 0 on a float (possibly float16) input"));
            }
            g.range(s, l, d)
        }
        "Slice" => slice(g, n),
        "Pad" => pad(g, n),
        _ => Err(n.unsupported("the op type")),
    }
}

fn constant(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    if let Some(a) = n.attr("value") {
        let t = a.t.as_ref().ok_or_else(|| n.invalid("attribute value holds no tensor"))?;
        return Ok(g.constant(super::tensor::to_tensor(t)?));
    }
    if let Some(a) = n.attr("value_float") {
        return Ok(g.constant(Tensor::scalar(a.f)));
    }
    if let Some(a) = n.attr("value_floats") {
        return Ok(g.constant(Tensor::vec1(&a.floats)));
    }
    if let Some(a) = n.attr("value_int") {
        return Ok(g.constant(Tensor::scalar(a.i)));
    }
    if let Some(a) = n.attr("value_ints") {
        return Ok(g.constant(Tensor::vec1(&a.ints)));
    }
    Err(n.unsupported("a Constant without value / value_float(s) / value_int(s) (sparse or string values)"))
}

fn slice(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    let dims = fixed_shape(g, n, x, "Slice")?;
    let r = dims.len();
    let (starts, ends, axes, steps) = if n.opset < 10 {
        (n.attr_ints("starts").unwrap_or_default(), n.attr_ints("ends").unwrap_or_default(), n.attr_ints("axes"), None)
    } else {
        (
            n.const_ints(g, 1)?.unwrap_or_default(),
            n.const_ints(g, 2)?.unwrap_or_default(),
            n.const_ints(g, 3)?,
            n.const_ints(g, 4)?,
        )
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(n.invalid("starts, ends, axes and steps differ in length"));
    }
    let mut spec = StridedSliceSpec {
        begin: vec![0; r],
        end: vec![0; r],
        strides: vec![1; r],
        begin_mask: (1u64 << r) - 1,
        end_mask: (1u64 << r) - 1,
        ..Default::default()
    };
    for k in 0..starts.len() {
        let a = norm_axis(n, axes[k], r)?;
        let d = dims[a] as i64;
        let step = steps[k];
        if step == 0 {
            return Err(n.invalid("a step of 0"));
        }
        // clamp as ONNX does: to [0, d] for positive steps, [-1, d - 1] for negative ones
        let fix = |v: i64| if v < 0 { v + d } else { v };
        let (s, e) = if step > 0 {
            (fix(starts[k]).clamp(0, d), fix(ends[k]).clamp(0, d))
        } else {
            (fix(starts[k]).clamp(-1, d - 1), fix(ends[k]).clamp(-1, d - 1))
        };
        spec.strides[a] = step;
        spec.begin[a] = s;
        spec.begin_mask &= !(1 << a);
        if e == -1 {
            // before the first element, walking backwards: to the start
            spec.end[a] = 0;
        } else {
            spec.end[a] = e;
            spec.end_mask &= !(1 << a);
        }
        if s == -1 {
            // empty slice walking backwards from before the start
            spec.begin[a] = 0;
            spec.end[a] = 0;
            spec.end_mask &= !(1 << a);
        }
    }
    g.strided_slice(x, &spec)
}

fn pad(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    let r = g.shape(x)?.rank();
    let mode = n.attr_choice("mode", &["constant", "reflect", "edge", "wrap"])?;
    let (pads, value, axes) = if n.opset < 11 {
        (n.attr_ints("pads").unwrap_or_default(), n.attr_f("value", 0.0), None)
    } else {
        let v = n.const_input(g, 2)?.map(|t| t.to_f64_vec().first().copied().unwrap_or(0.0)).unwrap_or(0.0);
        (n.const_ints(g, 1)?.unwrap_or_default(), v, n.const_ints(g, 3)?)
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| norm_axis(n, a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(n.invalid(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    if pads.iter().any(|&p| p < 0) {
        return Err(n.unsupported("negative pads (cropping)"));
    }
    let mut p = vec![(0usize, 0usize); r];
    for (k, &a) in axes.iter().enumerate() {
        p[a] = (pads[k] as usize, pads[k + axes.len()] as usize);
    }
    let mode = match mode.as_str() {
        "constant" => PadMode::Constant(value),
        "reflect" => PadMode::Reflect,
        m => return super::ops_pad::edge_or_wrap(g, n, x, &p, m),
    };
    g.pad(x, &p, mode)
}

fn split(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let x = n.input(0)?;
    let dims = fixed_shape(g, n, x, "Split")?;
    let axis = norm_axis(n, n.attr_i("axis", 0), dims.len())?;
    let d = dims[axis];
    let given = if n.opset < 13 { n.attr_ints("split") } else { n.const_ints(g, 1)? };
    let outs = n.proto.output.len();
    let num_outputs = n.attr_i("num_outputs", 0);
    let sizes: Vec<usize> = match given {
        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
        None => {
            let k = if num_outputs > 0 { num_outputs as usize } else { outs.max(1) };
            let chunk = d.div_ceil(k);
            (0..k).map(|i| chunk.min(d.saturating_sub(i * chunk))).collect()
        }
    };
    g.split(x, axis as i64, &sizes)
}
