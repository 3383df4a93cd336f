//! ONNX quantization and integer-arithmetic operators whose results are exact in our dtypes:
//! `DequantizeLinear`, `QuantizeLinear` (scalar, per-axis or blocked scale and zero point),
//! `DynamicQuantizeLinear` and `MatMulInteger`.
//!
//! Invariants: integer operands are held as i64 (see [`super::tensor`]); `(x - zero_point)` is
//! formed exactly in i64 and rounded once into the scale's float dtype; `MatMulInteger`
//! multiplies in f64, exact while every partial sum stays below 2^53 (8- and 16-bit operands:
//! always for inner sizes below 2^21), and returns i64. `QuantizeLinear` rounds `x / scale`
//! half to even in `x`'s dtype, adds the zero point and saturates to the range of the output
//! element type: the zero point's ONNX type as the file states it (an input, initializer,
//! `Constant` or `Cast` output; otherwise the import fails naming it), else `output_dtype`,
//! else uint8; float8 / float4 outputs and a non-default `precision` are refused by name.
//! A blocked scale (`block_size > 0`) is expanded along `axis` by a constant gather.

use super::convert::NodeCx;
use super::ops_nn::matmul;
use super::ops_shape::{fixed_shape, norm_axis};
use super::tensor::onnx_type_name;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::{DType, Tensor};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "QuantizeLinear"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(match n.op() {
        "QuantizeLinear" => quantize(g, n).map(|v| vec![v]),
        "DynamicQuantizeLinear" => dynamic_quantize(g, n),
        _ => convert_one(g, n).map(|v| vec![v]),
    })
}

/// The integers ONNX element type `t` holds, for the types `QuantizeLinear` produces.
fn int_range(t: i64) -> Option<(f64, f64)> {
    Some(match t {
        2 => (0.0, 255.0),
        3 => (-128.0, 127.0),
        4 => (0.0, 65535.0),
        5 => (-32768.0, 32767.0),
        6 => (f64::from(i32::MIN), f64::from(i32::MAX)),
        12 => (0.0, f64::from(u32::MAX)),
        21 => (0.0, 15.0),
        22 => (-8.0, 7.0),
        _ => return None,
    })
}

/// A scale or zero point `v` shaped to broadcast against `x` (rank `r`): a scalar as it is, a
/// 1-D one along `axis`, a blocked one (`block > 0`, rank `r`, `ceil(d / block)` along `axis`)
/// repeated `block` times along `axis`.
fn expand_param(g: &mut Graph, n: &NodeCx, v: ValueId, x: ValueId, block: i64) -> Result<ValueId> {
    let (vr, r) = (g.shape(v)?.rank(), g.shape(x)?.rank());
    // read even where it does not matter (a scalar scale): an axis is no unread attribute
    let axis = n.attr_i("axis", 1);
    if vr == 0 && block <= 0 {
        return Ok(v);
    }
    let axis = norm_axis(n, axis, r)?;
    if block <= 0 {
        return if vr == 1 {
            along(g, v, axis, r)
        } else {
            Err(n.invalid(format!("a rank-{vr} scale without block_size")))
        };
    }
    let d = fixed_shape(g, n, x, n.op())?[axis];
    let idx: Vec<i64> = (0..d as i64).map(|i| i / block).collect();
    let idx = g.constant(Tensor::vec1(&idx));
    g.gather(v, idx, axis as i64)
}

/// `saturate(round(x / scale) + zero_point)` to the output type's range, as i64.
fn quantize(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let (x, scale, zp) = (n.input(0)?, n.input(1)?, n.opt_input(2));
    let out_attr = n.attr_i("output_dtype", 0);
    let ty = match zp {
        Some(_) => n.elem_type(2).ok_or_else(|| {
            n.unsupported("a zero point whose element type the file does not state (its saturation range)")
        })?,
        None if out_attr != 0 => out_attr,
        None => 2,
    };
    if zp.is_some() && out_attr != 0 && out_attr != ty {
        return Err(n.invalid(format!("output_dtype {out_attr} differs from the zero point's type {ty}")));
    }
    let (lo, hi) = int_range(ty).ok_or_else(|| n.unsupported(format!("output element type {}", onnx_type_name(ty))))?;
    n.attr_i("saturate", 1); // applies to float8 outputs only
    if n.attr_i("precision", 0) != 0 {
        return Err(n.unsupported("attribute precision (the division is computed in the scale's type)"));
    }
    let block = n.attr_i("block_size", 0);
    let s = expand_param(g, n, scale, x, block)?;
    // an int32 x (QuantizeLinear-10) is divided in the scale's dtype
    let xf = if g.dtype(x)?.is_float() { x } else { g.cast(x, g.dtype(scale)?)? };
    let q = g.div(xf, s)?;
    let mut q = g.round(q)?;
    if let Some(z) = zp {
        let z = expand_param(g, n, z, x, block)?;
        let z = g.cast(z, g.dtype(q)?)?;
        q = g.add(q, z)?;
    }
    let q = saturate(g, q, lo, hi)?;
    g.cast(q, DType::I64)
}

/// `q` clipped to `[lo, hi]`.
fn saturate(g: &mut Graph, q: ValueId, lo: f64, hi: f64) -> Result<ValueId> {
    let (lo, hi) = (g.scalar_like(q, lo)?, g.scalar_like(q, hi)?);
    let q = g.maximum(q, lo)?;
    g.minimum(q, hi)
}

/// uint8 quantization with the scale and zero point of `x`'s range (widened to hold 0):
/// outputs `y`, `y_scale`, `y_zero_point`.
fn dynamic_quantize(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let x = n.input(0)?;
    let zero = g.scalar_like(x, 0.0)?;
    let lo = g.reduce_min(x, None, false)?;
    let lo = g.minimum(lo, zero)?;
    let hi = g.reduce_max(x, None, false)?;
    let hi = g.maximum(hi, zero)?;
    let range = g.sub(hi, lo)?;
    let scale = g.mul_scalar(range, 1.0 / 255.0)?;
    // zero point: round(clip(0 - lo / scale, 0, 255))
    let z = g.div(lo, scale)?;
    let z = g.neg(z)?;
    let z = saturate(g, z, 0.0, 255.0)?;
    let z = g.round(z)?;
    let q = g.div(x, scale)?;
    let q = g.round(q)?;
    let q = g.add(q, z)?;
    let q = saturate(g, q, 0.0, 255.0)?;
    Ok(vec![g.cast(q, DType::I64)?, scale, g.cast(z, DType::I64)?])
}

/// `v` (rank 0 or 1) shaped to broadcast along `axis` of a rank-`r` tensor.
fn along(g: &mut Graph, v: ValueId, axis: usize, r: usize) -> Result<ValueId> {
    if g.shape(v)?.rank() == 0 {
        return Ok(v);
    }
    let mut shape = vec![1i64; r];
    shape[axis] = -1;
    g.reshape(v, &shape)
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    if n.op() == "MatMulInteger" {
        let b = n.input(1)?;
        let sub = |g: &mut Graph, v: ValueId, zp: Option<ValueId>, row: bool| -> Result<ValueId> {
            let v = match zp {
                // a per-row zero point of A is [M]: broadcast over columns
                Some(z) if row && g.shape(z)?.rank() == 1 => {
                    let z = g.reshape(z, &[-1, 1])?;
                    g.sub(v, z)?
                }
                Some(z) => g.sub(v, z)?,
                None => v,
            };
            g.cast(v, DType::F64)
        };
        let a = sub(g, x, n.opt_input(2), true)?;
        let b = sub(g, b, n.opt_input(3), false)?;
        let y = matmul(g, n, a, b)?;
        return g.cast(y, DType::I64);
    }
    // DequantizeLinear
    if n.attr("output_dtype").is_some_and(|a| a.i != 0) {
        return Err(n.unsupported("attribute output_dtype"));
    }
    let scale = n.input(1)?;
    let block = n.attr_i("block_size", 0);
    let dt = g.dtype(scale)?;
    let d = match n.opt_input(2) {
        Some(z) => {
            let z = expand_param(g, n, z, x, block)?;
            g.sub(x, z)?
        }
        None => x,
    };
    let d = g.cast(d, dt)?;
    let s = expand_param(g, n, scale, x, block)?;
    g.mul(d, s)
}
