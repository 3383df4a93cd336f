//! ONNX linear-algebra, neural-network and reduction operators: `MatMul`, `Gemm`, `Conv`
//! (1-D and 2-D, any group count), `MaxPool` / `AveragePool` (1-D and 2-D), global pools,
//! `BatchNormalization` (inference), `Softmax` / `LogSoftmax`, `Dropout` (inference), the
//! `Reduce*` family and `ArgMax` / `ArgMin`.
//!
//! Invariants: ONNX's NCHW layout is transposed to our NHWC around each conv / pool and back
//! (the simplifier folds adjacent transposes; an operand computed from an earlier layer's
//! NHWC result through layout-free ops is rebuilt in NHWC instead, see `layout`); explicit pads become a `pad` (zeros for conv,
//! -inf for max pooling) followed by a VALID window, and average pooling that does not count
//! padding divides by the pooled count of ones, so no padding mode is approximated.

use super::convert::NodeCx;
use super::layout;
use super::ops_shape::{fixed_shape, norm_axis};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::slicing::PadMode;
use crate::ops::{Conv2dParams, Padding};
use crate::tensor::DType;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &[
    "ArgMax",
    "ArgMin",
    "AveragePool",
    "BatchNormalization",
    "Conv",
    "Dropout",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "LogSoftmax",
    "MatMul",
    "MaxPool",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Softmax",
];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(match n.op() {
        "Dropout" => dropout(g, n),
        "MaxPool" | "AveragePool" => pool(g, n).map(|v| vec![v]),
        "Conv" => conv(g, n).map(|v| vec![v]),
        op if op.starts_with("Reduce") => reduce(g, n).map(|v| vec![v]),
        _ => convert_one(g, n).map(|v| vec![v]),
    })
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    match n.op() {
        "MatMul" => matmul(g, n, x, n.input(1)?),
        "Gemm" => {
            let alpha = n.attr_f("alpha", 1.0);
            let beta = n.attr_f("beta", 1.0);
            let ta = n.attr_i("transA", 0) != 0;
            let tb = n.attr_i("transB", 0) != 0;
            let mut y = g.matmul_t(x, n.input(1)?, ta, tb)?;
            if alpha != 1.0 {
                y = g.mul_scalar(y, alpha)?;
            }
            if let Some(c) = n.opt_input(2) {
                let c = if beta != 1.0 { g.mul_scalar(c, beta)? } else { c };
                y = g.add(y, c)?;
            }
            Ok(y)
        }
        "Softmax" | "LogSoftmax" => {
            let r = g.shape(x)?.rank();
            let log = n.op() == "LogSoftmax";
            if n.opset >= 13 {
                let axis = n.attr_i("axis", -1);
                return if log { g.log_softmax(x, axis) } else { g.softmax(x, axis) };
            }
            // opset < 13: the input is coerced to 2-D at `axis`
            let axis = n.attr_i("axis", 1);
            let a = if axis < 0 { axis + r as i64 } else { axis } as usize;
            let dims = fixed_shape(g, n, x, n.op())?;
            let lead: usize = dims[..a.min(r)].iter().product();
            let flat = g.reshape(x, &[lead as i64, -1])?;
            let y = if log { g.log_softmax(flat, 1)? } else { g.softmax(flat, 1)? };
            let back: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            g.reshape(y, &back)
        }
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let r = g.shape(x)?.rank();
            let axes: Vec<i64> = (2..r as i64).collect();
            if n.op() == "GlobalAveragePool" {
                g.reduce_mean(x, Some(&axes), true)
            } else {
                g.reduce_max(x, Some(&axes), true)
            }
        }
        "BatchNormalization" => {
            n.attr_i_only("training_mode", 0)?;
            n.attr_i_only("spatial", 1)?;
            let _ = n.attr("momentum");
            if n.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err(n.unsupported("training outputs (running mean / variance)"));
            }
            let eps = n.attr_f("epsilon", 1e-5);
            if let Some(c) = layout::conv_result(g, x)? {
                // folded into the conv: s = scale / sqrt(var + eps), t = bias - mean * s
                let v = g.add_scalar(n.input(4)?, eps)?;
                let s = g.rsqrt(v)?;
                let s = g.mul(s, n.input(1)?)?;
                let ms = g.mul(n.input(3)?, s)?;
                let t = g.sub(n.input(2)?, ms)?;
                return layout::fold_batch_norm(g, &c, s, t);
            }
            let r = g.shape(x)?.rank();
            // per-channel operands [C] broadcast as [C, 1, ...]
            let chan = |g: &mut Graph, k: usize| -> Result<ValueId> {
                let v = n.input(k)?;
                let mut shape = vec![-1i64];
                shape.extend(std::iter::repeat_n(1, r.saturating_sub(2)));
                g.reshape(v, &shape)
            };
            let (scale, bias, mean, var) = (chan(g, 1)?, chan(g, 2)?, chan(g, 3)?, chan(g, 4)?);
            let d = g.sub(x, mean)?;
            let v = g.add_scalar(var, eps)?;
            let s = g.rsqrt(v)?;
            let s = g.mul(s, scale)?;
            let y = g.mul(d, s)?;
            g.add(y, bias)
        }
        "ArgMax" | "ArgMin" => {
            let r = g.shape(x)?.rank();
            let axis = norm_axis(n, n.attr_i("axis", 0), r)?;
            let keep = n.attr_i("keepdims", 1) != 0;
            let last = n.attr_i("select_last_index", 0) != 0;
            let src = if last { g.reverse(x, &[axis as i64])? } else { x };
            let mut y = if n.op() == "ArgMax" { g.argmax(src, axis as i64)? } else { g.argmin(src, axis as i64)? };
            if last {
                let d = fixed_shape(g, n, x, n.op())?[axis];
                let ny = g.neg(y)?;
                y = g.add_scalar(ny, d as f64 - 1.0)?;
            }
            if keep { g.expand_dims(y, axis as i64) } else { Ok(y) }
        }
        _ => Err(n.unsupported("the op type")),
    }
}

/// numpy `matmul`: 1-D operands get a unit dim that is removed again.
pub(super) fn matmul(g: &mut Graph, _n: &NodeCx, a: ValueId, b: ValueId) -> Result<ValueId> {
    let (ra, rb) = (g.shape(a)?.rank(), g.shape(b)?.rank());
    let a2 = if ra == 1 { g.expand_dims(a, 0)? } else { a };
    let b2 = if rb == 1 { g.expand_dims(b, 1)? } else { b };
    let y = if ra <= 2 && rb <= 2 { g.matmul(a2, b2)? } else { g.batch_matmul(a2, b2)? };
    let ry = g.shape(y)?.rank() as i64;
    let mut drop = Vec::new();
    if ra == 1 {
        drop.push(ry - 2);
    }
    if rb == 1 {
        drop.push(ry - 1);
    }
    if drop.is_empty() { Ok(y) } else { g.squeeze(y, Some(&drop)) }
}

fn dropout(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let x = n.input(0)?;
    let _ = (n.attr("seed"), n.attr("ratio"), n.attr("is_test"));
    let training = if n.opset >= 12 { n.const_input(g, 2)? } else { None };
    if training.is_some_and(|t| t.to_f64_vec().iter().any(|&v| v != 0.0)) {
        return Err(n.unsupported("training_mode = true"));
    }
    let y = g.identity(x)?;
    let ones = g.ones_like(x)?;
    let mask = g.cast(ones, DType::Bool)?;
    Ok(vec![y, mask])
}

/// Window attributes of a conv or pool over `spatial` dims: kernel, strides, dilations and
/// (before, after) pads, after `auto_pad`.
pub(super) struct Window {
    pub(super) kernel: Vec<usize>,
    pub(super) strides: Vec<usize>,
    pub(super) dilations: Vec<usize>,
    pub(super) pads: Vec<(usize, usize)>,
}

/// The (before, after) padding of `auto_pad` SAME_UPPER (`upper`; TF's and our
/// [`Padding::Same`]) or SAME_LOWER for one spatial dim: the output has `ceil(in / stride)`
/// elements.
fn same_pads(in_dim: usize, kernel: usize, stride: usize, dilation: usize, upper: bool) -> (usize, usize) {
    let eff = (kernel - 1) * dilation + 1;
    let out = in_dim.div_ceil(stride);
    let total = ((out - 1) * stride + eff).saturating_sub(in_dim);
    let small = total / 2;
    if upper { (small, total - small) } else { (total - small, small) }
}

pub(super) fn window(n: &NodeCx, in_dims: &[usize], kernel: Vec<usize>, ceil_mode: bool) -> Result<Window> {
    let s = in_dims.len();
    let ints = |name: &str| -> Result<Vec<usize>> {
        match n.attr_ints(name) {
            None => Ok(vec![1; s]),
            Some(v) if v.len() == s && v.iter().all(|&x| x >= 1) => Ok(v.iter().map(|&x| x as usize).collect()),
            Some(v) => Err(n.invalid(format!("attribute {name} = {v:?} for {s} spatial dims"))),
        }
    };
    let strides = ints("strides")?;
    let dilations = ints("dilations")?;
    let auto_pad = n.attr_choice("auto_pad", &["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])?;
    let explicit = n.attr_ints("pads");
    let mut pads = vec![(0usize, 0usize); s];
    match auto_pad.as_str() {
        "NOTSET" => pads = explicit_pads(n, explicit, s)?,
        "VALID" => {}
        same => {
            for i in 0..s {
                pads[i] = same_pads(in_dims[i], kernel[i], strides[i], dilations[i], same == "SAME_UPPER");
            }
        }
    }
    if ceil_mode {
        // extra padding at the end so that a VALID window yields the ceil-mode count, as long
        // as the last window starts inside the input or its left padding
        for i in 0..s {
            let eff = (kernel[i] - 1) * dilations[i] + 1;
            let padded = in_dims[i] + pads[i].0 + pads[i].1;
            if padded >= eff {
                let mut out = (padded - eff).div_ceil(strides[i]) + 1;
                if (out - 1) * strides[i] >= in_dims[i] + pads[i].0 {
                    out -= 1;
                }
                let need = (out - 1) * strides[i] + eff;
                pads[i].1 += need.saturating_sub(padded);
            }
        }
    }
    Ok(Window { kernel, strides, dilations, pads })
}

/// The explicit `pads` attribute `[b1, ..., e1, ...]` as (begin, end) per spatial dim
/// (zeros when absent); negative pads or a wrong length are invalid.
pub(super) fn explicit_pads(n: &NodeCx, explicit: Option<Vec<i64>>, s: usize) -> Result<Vec<(usize, usize)>> {
    let Some(p) = explicit else {
        return Ok(vec![(0, 0); s]);
    };
    if p.len() != 2 * s || p.iter().any(|&v| v < 0) {
        return Err(n.invalid(format!("attribute pads = {p:?} for {s} spatial dims")));
    }
    Ok((0..s).map(|i| (p[i] as usize, p[i + s] as usize)).collect())
}

/// NC[L] or NC[HW] → NHWC with a unit H for 1-D; returns the spatial rank.
pub(super) fn to_nhwc(g: &mut Graph, n: &NodeCx, x: ValueId) -> Result<(ValueId, usize)> {
    let dims = fixed_shape(g, n, x, n.op())?;
    match dims.len() {
        3 => {
            let x4 = g.reshape(x, &[dims[0] as i64, dims[1] as i64, 1, dims[2] as i64])?;
            Ok((g.transpose(x4, &[0, 2, 3, 1])?, 1))
        }
        4 => match layout::nhwc_of(g, &n.layout, x)? {
            Some(y) => Ok((y, 2)),
            None => Ok((g.transpose(x, &layout::TO_NHWC)?, 2)),
        },
        r => {
            Err(n.unsupported(format!("{} over {} spatial dims (1 and 2 are supported)", n.op(), r.saturating_sub(2))))
        }
    }
}

pub(super) fn from_nhwc(g: &mut Graph, y: ValueId, spatial: usize) -> Result<ValueId> {
    let y = g.transpose(y, &[0, 3, 1, 2])?;
    if spatial == 1 { g.squeeze(y, Some(&[2])) } else { Ok(y) }
}

/// The 2-D form of 1-D window attributes (a unit leading dim).
pub(super) fn as_2d(v: &[usize], unit: usize) -> [usize; 2] {
    if v.len() == 1 { [unit, v[0]] } else { [v[0], v[1]] }
}

fn pad_nhwc(g: &mut Graph, x: ValueId, w: &Window, value: f64) -> Result<ValueId> {
    if w.pads.iter().all(|&p| p == (0, 0)) {
        return Ok(x);
    }
    let sp = if w.pads.len() == 1 { [(0, 0), w.pads[0]] } else { [w.pads[0], w.pads[1]] };
    g.pad(x, &[(0, 0), sp[0], sp[1], (0, 0)], PadMode::Constant(value))
}

fn conv(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let (x, w) = (n.input(0)?, n.input(1)?);
    let xd = fixed_shape(g, n, x, "Conv")?;
    let wd = fixed_shape(g, n, w, "Conv")?;
    if wd.len() != xd.len() || xd.len() < 3 {
        return Err(n.invalid(format!("input {xd:?} and weight {wd:?}")));
    }
    let kernel = match n.attr_ints("kernel_shape") {
        Some(k) => k.iter().map(|&v| v.max(1) as usize).collect(),
        None => wd[2..].to_vec(),
    };
    let group = n.attr_i("group", 1).max(1) as usize;
    let win = window(n, &xd[2..], kernel, false)?;
    let (xh, spatial) = to_nhwc(g, n, x)?;
    // pads that SAME would choose need no padded copy: the kernels pad as they read
    let same = (0..win.pads.len())
        .all(|i| win.pads[i] == same_pads(xd[2 + i], win.kernel[i], win.strides[i], win.dilations[i], true));
    let (xh, padding) = if same { (xh, Padding::Same) } else { (pad_nhwc(g, xh, &win, 0.0)?, Padding::Valid) };
    // filter [M, C/g, k...] → [KH, KW, C/g, M]
    let w4 = if spatial == 1 { g.reshape(w, &[wd[0] as i64, wd[1] as i64, 1, wd[2] as i64])? } else { w };
    let params = Conv2dParams { strides: as_2d(&win.strides, 1), padding, dilations: as_2d(&win.dilations, 1) };
    let (c, m) = (xd[1], wd[0]);
    let y = if group == 1 {
        let f = g.transpose(w4, &[2, 3, 1, 0])?;
        g.conv2d(xh, f, params)?
    } else if group == c && wd[1] == 1 && m % c == 0 {
        // depthwise: output channel o = c * mult + k, as ours
        let f = g.transpose(w4, &[2, 3, 0, 1])?;
        let k = as_2d(&win.kernel, 1);
        let f = g.reshape(f, &[k[0] as i64, k[1] as i64, c as i64, (m / c) as i64])?;
        g.depthwise_conv2d(xh, f, params)?
    } else {
        if c % group != 0 || m % group != 0 {
            return Err(n.invalid(format!("group {group} does not divide {c} input and {m} output channels")));
        }
        let xs = g.split(xh, 3, &vec![c / group; group])?;
        let f = g.transpose(w4, &[2, 3, 1, 0])?;
        let fs = g.split(f, 3, &vec![m / group; group])?;
        let ys: Vec<ValueId> = xs.iter().zip(&fs).map(|(&xi, &fi)| g.conv2d(xi, fi, params)).collect::<Result<_>>()?;
        g.concat(&ys, 3)?
    };
    let y = match n.opt_input(2) {
        // B is [M]: channels last, a bias_add (which the plan fuses into the conv)
        Some(b) if g.shape(b)?.rank() == 1 => g.bias_add(y, b)?,
        Some(b) => g.add(y, b)?,
        None => y,
    };
    from_nhwc(g, y, spatial)
}

/// A pooling node's `kernel_shape` (required; one entry per spatial dim of `xd`, NCHW).
pub(super) fn kernel_shape(n: &NodeCx, xd: &[usize]) -> Result<Vec<usize>> {
    let kernel: Vec<usize> = n
        .attr_ints("kernel_shape")
        .ok_or_else(|| n.invalid("attribute kernel_shape is missing"))?
        .iter()
        .map(|&v| v.max(1) as usize)
        .collect();
    if kernel.len() + 2 != xd.len() {
        return Err(n.invalid(format!("kernel_shape {kernel:?} for input {xd:?}")));
    }
    Ok(kernel)
}

fn pool(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    if n.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(n.unsupported("the Indices output of MaxPool"));
    }
    let xd = fixed_shape(g, n, x, n.op())?;
    let kernel = kernel_shape(n, &xd)?;
    let ceil_mode = n.attr_i("ceil_mode", 0) != 0;
    let win = window(n, &xd[2..], kernel, ceil_mode)?;
    if win.dilations.iter().any(|&d| d != 1) {
        return Err(n.unsupported(format!("attribute dilations = {:?} (only 1)", win.dilations)));
    }
    n.attr_i_only("storage_order", 0)?;
    let include_pad = n.attr_i("count_include_pad", 0) != 0;
    let (xh, spatial) = to_nhwc(g, n, x)?;
    let (k, s) = (as_2d(&win.kernel, 1), as_2d(&win.strides, 1));
    let y = if n.op() == "MaxPool" {
        // integers (held as i64, narrow types widened) pool exactly in f64
        let int = g.dtype(xh)? == DType::I64;
        let xf = if int { g.cast(xh, DType::F64)? } else { xh };
        let xp = pad_nhwc(g, xf, &win, f64::NEG_INFINITY)?;
        let y = g.max_pool(xp, k, s, Padding::Valid)?;
        if int { g.cast(y, DType::I64)? } else { y }
    } else {
        let xp = pad_nhwc(g, xh, &win, 0.0)?;
        let sum_avg = g.avg_pool(xp, k, s, Padding::Valid)?;
        let padded = win.pads.iter().any(|&p| p != (0, 0));
        if !padded || include_pad && !ceil_mode {
            sum_avg
        } else if include_pad {
            return Err(n.unsupported("count_include_pad = 1 with ceil_mode = 1"));
        } else {
            // divide by the share of real elements in each window
            let ones = g.ones_like(xh)?;
            let ones = pad_nhwc(g, ones, &win, 0.0)?;
            let share = g.avg_pool(ones, k, s, Padding::Valid)?;
            g.div(sum_avg, share)?
        }
    };
    from_nhwc(g, y, spatial)
}

fn reduce(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    let r = g.shape(x)?.rank();
    let keep = n.attr_i("keepdims", 1) != 0;
    let axes_from_input = n.opset >= 18 || (n.op() == "ReduceSum" && n.opset >= 13);
    let axes = if axes_from_input { n.const_ints(g, 1)? } else { n.attr_ints("axes") };
    let noop = n.attr_i("noop_with_empty_axes", 0) != 0;
    let axes: Vec<i64> = match axes {
        Some(a) if !a.is_empty() => a.iter().map(|&a| norm_axis(n, a, r).map(|v| v as i64)).collect::<Result<_>>()?,
        _ if noop => return g.identity(x),
        _ => (0..r as i64).collect(),
    };
    if g.dtype(x)? == DType::Bool {
        // max / min of booleans: any / all
        return match n.op() {
            "ReduceMax" => g.reduce_any(x, Some(&axes), keep),
            "ReduceMin" => g.reduce_all(x, Some(&axes), keep),
            op => Err(n.unsupported(format!("{op} of bool"))),
        };
    }
    match n.op() {
        "ReduceSum" => g.reduce_sum(x, Some(&axes), keep),
        "ReduceMean" => g.reduce_mean(x, Some(&axes), keep),
        "ReduceMax" => g.reduce_max(x, Some(&axes), keep),
        "ReduceMin" => g.reduce_min(x, Some(&axes), keep),
        "ReduceProd" => g.reduce_prod(x, Some(&axes), keep),
        "ReduceLogSumExp" => g.reduce_logsumexp(x, Some(&axes), keep),
        "ReduceL1" => {
            let a = g.abs(x)?;
            g.reduce_sum(a, Some(&axes), keep)
        }
        "ReduceSumSquare" | "ReduceL2" => {
            let sq = g.mul(x, x)?;
            let s = g.reduce_sum(sq, Some(&axes), keep)?;
            if n.op() == "ReduceL2" { g.sqrt(s) } else { Ok(s) }
        }
        "ReduceLogSum" => {
            let s = g.reduce_sum(x, Some(&axes), keep)?;
            g.log(s)
        }
        _ => Err(n.unsupported("the op type")),
    }
}
