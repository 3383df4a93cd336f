//! ONNX integer-arithmetic operators whose results are exact in our dtypes:
//! `DequantizeLinear` (scalar or per-axis scale and zero point) and `MatMulInteger`.
//!
//! Invariants: integer operands are held as i64 (see [`super::tensor`]); `(x - zero_point)` is
//! formed exactly in i64 and rounded once into the scale's float dtype; `MatMulInteger`
//! multiplies in f64, exact while every partial sum stays below 2^53 (8- and 16-bit operands:
//! always for inner sizes below 2^21), and returns i64. Blocked quantization
//! (`block_size > 0`) and other output dtypes are refused by name. `QuantizeLinear` is not
//! converted: its saturation range depends on the zero point's element type, which is not
//! kept once integers are widened.

use super::convert::NodeCx;
use super::ops_nn::matmul;
use super::ops_shape::norm_axis;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::DType;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["DequantizeLinear", "MatMulInteger"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_one(g, n).map(|v| vec![v]))
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
    if n.attr_i("block_size", 0) != 0 {
        return Err(n.unsupported("attribute block_size (blocked quantization)"));
    }
    if n.attr("output_dtype").is_some_and(|a| a.i != 0) {
        return Err(n.unsupported("attribute output_dtype"));
    }
    let scale = n.input(1)?;
    let r = g.shape(x)?.rank();
    // the axis matters only for a per-axis (1-D) scale
    let per_axis = g.shape(scale)?.rank() == 1;
    let axis = if per_axis { norm_axis(n, n.attr_i("axis", 1), r)? } else { 0 };
    let dt = g.dtype(scale)?;
    let d = match n.opt_input(2) {
        Some(z) => {
            let z = along(g, z, axis, r)?;
            g.sub(x, z)?
        }
        None => x,
    };
    let d = g.cast(d, dt)?;
    let s = along(g, scale, axis, r)?;
    g.mul(d, s)
}
