//! ONNX `ConvTranspose` (1-D and 2-D, any group count, strides, dilations, explicit pads,
//! `output_padding`, `output_shape` and `auto_pad`).
//!
//! A transposed convolution is the gradient of a convolution w.r.t. its input, so it maps onto
//! our `conv2d_backprop_input` kind (which has its own converter and VJP / JVP) instead of a
//! new kind: the full, unpadded output `(in - 1) * stride + (k - 1) * dilation + 1 +
//! output_padding` is computed as the input gradient of a VALID convolution (the
//! `output_padding` rows receive no contribution, as in ONNX), then the pads are cropped.
//! ONNX's weight `[C_in, C_out / group, k...]` is our filter `[k..., C_out / group, C_in]`
//! (the convolution being transposed maps output channels to input channels).
//! Invariants: layout NCHW outside, NHWC inside (as `Conv`); groups are split along the
//! channel axis and concatenated; pads are non-negative.

use super::convert::NodeCx;
use super::ops_nn::{as_2d, explicit_pads, from_nhwc, to_nhwc};
use super::ops_shape::fixed_shape;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::slicing::StridedSliceSpec;
use crate::ops::{Conv2dParams, Padding};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["ConvTranspose"];

/// Converts `n` if it is a `ConvTranspose`.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(conv_transpose(g, n).map(|v| vec![v]))
}

fn conv_transpose(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let (x, w) = (n.input(0)?, n.input(1)?);
    let xd = fixed_shape(g, n, x, "ConvTranspose")?;
    let wd = fixed_shape(g, n, w, "ConvTranspose")?;
    if wd.len() != xd.len() || xd.len() < 3 || wd[0] != xd[1] {
        return Err(n.invalid(format!("input {xd:?} and weight {wd:?}")));
    }
    let s = xd.len() - 2;
    let ints = |name: &str, default: usize| -> Result<Vec<usize>> {
        match n.attr_ints(name) {
            None => Ok(vec![default; s]),
            Some(v) if v.len() == s && v.iter().all(|&x| x >= 0) => Ok(v.iter().map(|&x| x as usize).collect()),
            Some(v) => Err(n.invalid(format!("attribute {name} = {v:?} for {s} spatial dims"))),
        }
    };
    let kernel = match n.attr_ints("kernel_shape") {
        Some(k) => k.iter().map(|&v| v.max(1) as usize).collect(),
        None => wd[2..].to_vec(),
    };
    let strides = ints("strides", 1)?;
    let dil = ints("dilations", 1)?;
    let out_pad = ints("output_padding", 0)?;
    let group = n.attr_i("group", 1).max(1) as usize;
    let cin = xd[1];
    if cin % group != 0 {
        return Err(n.invalid(format!("group {group} does not divide {cin} input channels")));
    }
    // the full output per spatial dim, then (begin, end) crops
    let mut full: Vec<usize> =
        (0..s).map(|i| (xd[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 + out_pad[i]).collect();
    let auto_pad = n.attr_choice("auto_pad", &["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])?;
    let explicit = n.attr_ints("pads");
    let out_shape = n.attr_ints("output_shape");
    let mut pads = vec![(0usize, 0usize); s];
    if let Some(os) = out_shape {
        let os = &os[os.len().saturating_sub(s)..];
        for i in 0..s {
            let total = full[i] as i64 - os[i];
            if total < 0 {
                // a larger output_shape is an implicit output padding (at most stride - 1)
                if -total >= strides[i] as i64 {
                    return Err(n.invalid(format!("output_shape {os:?} for the full output {full:?}")));
                }
                full[i] = os[i] as usize;
                continue;
            }
            let t = total as usize;
            pads[i] = if auto_pad == "SAME_UPPER" { (t / 2, t - t / 2) } else { (t - t / 2, t / 2) };
        }
    } else {
        match auto_pad.as_str() {
            "NOTSET" => pads = explicit_pads(n, explicit, s)?,
            "VALID" => {}
            same => {
                // output = input * stride
                for i in 0..s {
                    let t = full[i].saturating_sub(xd[2 + i] * strides[i]);
                    pads[i] = if same == "SAME_UPPER" { (t / 2, t - t / 2) } else { (t - t / 2, t / 2) };
                }
            }
        }
    }
    let (xh, spatial) = to_nhwc(g, n, x)?;
    // weight [C_in, C_out/g, k...] → filter [KH, KW, C_out/g, C_in]
    let w4 = if spatial == 1 { g.reshape(w, &[wd[0] as i64, wd[1] as i64, 1, wd[2] as i64])? } else { w };
    let f = g.transpose(w4, &[2, 3, 1, 0])?;
    let params = Conv2dParams { strides: as_2d(&strides, 1), padding: Padding::Valid, dilations: as_2d(&dil, 1) };
    let hw = as_2d(&full, 1);
    let y = if group == 1 {
        g.conv2d_backprop_input(f, xh, params, hw)?
    } else {
        let xs = g.split(xh, 3, &vec![cin / group; group])?;
        let fs = g.split(f, 3, &vec![cin / group; group])?;
        let ys: Vec<ValueId> =
            xs.iter().zip(&fs).map(|(&xi, &fi)| g.conv2d_backprop_input(fi, xi, params, hw)).collect::<Result<_>>()?;
        g.concat(&ys, 3)?
    };
    let y = if pads.iter().any(|&p| p != (0, 0)) {
        let p2 = if s == 1 { [(0, 0), pads[0]] } else { [pads[0], pads[1]] };
        let mut spec = StridedSliceSpec {
            begin: vec![0; 4],
            end: vec![0; 4],
            strides: vec![1; 4],
            begin_mask: 0b1001,
            end_mask: 0b1001,
            ..Default::default()
        };
        for a in 0..2 {
            spec.begin[a + 1] = p2[a].0 as i64;
            spec.end[a + 1] = (hw[a] - p2[a].1) as i64;
            if p2[a].0 + p2[a].1 > hw[a] {
                return Err(n.invalid(format!("pads {pads:?} larger than the full output {full:?}")));
            }
        }
        g.strided_slice(y, &spec)?
    } else {
        y
    };
    let y = match n.opt_input(2) {
        Some(b) => g.add(y, b)?,
        None => y,
    };
    from_nhwc(g, y, spatial)
}
