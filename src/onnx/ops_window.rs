//! ONNX window generators: `HannWindow`, `HammingWindow`, `BlackmanWindow` (opset 17).
//!
//! Their only operand is the window length, which must be a constant (it is the output's
//! shape), so the window is computed here, in f64, and becomes a constant of
//! `output_datatype` (float by default). Invariants: `periodic = 1` (the default) divides by
//! the length, `0` by the length minus one, as ONNX specifies.

use super::convert::NodeCx;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::{DType, Tensor};
use std::f64::consts::PI;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["BlackmanWindow", "HammingWindow", "HannWindow"];

/// Converts `n` if it is a window generator.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(window(g, n).map(|v| vec![v]))
}

fn window(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let size = n.const_ints(g, 0)?.and_then(|v| v.first().copied()).ok_or_else(|| n.invalid("size is missing"))?;
    if size < 0 {
        return Err(n.invalid(format!("size {size}")));
    }
    let dt = match n.attr("output_datatype") {
        Some(_) => n.attr_dtype("output_datatype")?,
        None => DType::F32,
    };
    let periodic = n.attr_i("periodic", 1) != 0;
    let denom = if periodic { size as f64 } else { size as f64 - 1.0 };
    let v: Vec<f64> = (0..size)
        .map(|i| {
            let x = i as f64 / denom;
            match n.op() {
                "HannWindow" => (PI * x).sin().powi(2),
                "HammingWindow" => 25.0 / 46.0 - (2.0 * PI * x).cos() * (21.0 / 46.0),
                _ => 0.42 - 0.5 * (2.0 * PI * x).cos() + 0.08 * (4.0 * PI * x).cos(),
            }
        })
        .collect();
    Ok(g.constant(Tensor::from_vec(&[size as usize], v)?.cast(dt)))
}
