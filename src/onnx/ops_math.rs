//! ONNX math operators composed from ours: `Shrink`, `Swish` (opset 24), `SwiGLU` (opset 28)
//! and `Det`.
//!
//! Invariants: compositions in the input's dtype, so derivatives come from the parts;
//! `SwiGLU`'s two operands must have one shape (ONNX applies no broadcasting there).

use super::convert::NodeCx;
use crate::error::Result;
use crate::ir::{Graph, ValueId};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["Det", "Shrink", "SwiGLU", "Swish"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_one(g, n).map(|v| vec![v]))
}

/// `a * sigmoid(alpha * a)`.
fn swish(g: &mut Graph, a: ValueId, alpha: f64) -> Result<ValueId> {
    let s = if alpha == 1.0 { a } else { g.mul_scalar(a, alpha)? };
    let s = g.sigmoid(s)?;
    g.mul(a, s)
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    match n.op() {
        "Det" => g.determinant(x),
        "Swish" => swish(g, x, n.attr_f("alpha", 1.0)),
        "SwiGLU" => {
            let b = n.input(1)?;
            let (sa, sb) = (g.shape(x)?.clone(), g.shape(b)?.clone());
            if sa != sb {
                return Err(n.invalid(format!("A {sa} and B {sb} differ in shape")));
            }
            let s = swish(g, x, n.attr_f("alpha", 1.0))?;
            g.mul(s, b)
        }
        _ => {
            // Shrink: x + bias below -lambd, x - bias above lambd, else 0
            let lambd = n.attr_f("lambd", 0.5);
            let bias = n.attr_f("bias", 0.0);
            let lo = g.scalar_like(x, -lambd)?;
            let hi = g.scalar_like(x, lambd)?;
            let below = g.less(x, lo)?;
            let above = g.greater(x, hi)?;
            let up = g.add_scalar(x, bias)?;
            let down = g.add_scalar(x, -bias)?;
            let z = g.scalar_like(x, 0.0)?;
            let y = g.select(above, down, z)?;
            g.select(below, up, y)
        }
    }
}
