//! Derivative rules of the unary family (`src/ops/unary.rs`).
//!
//! Every differentiable unary op is `y = f(x)` elementwise, so both modes multiply by the
//! same local derivative `f'(x)`, built from differentiable ops (second derivatives work).
//! `sign`, `step`, `floor`, `ceil`, `round` have zero derivative almost everywhere and are
//! treated as non-differentiable (like TF and JAX), as are the predicates. `relu`'s
//! derivative is `step(y)` of its OUTPUT (`y > 0` exactly where `x > 0`; 0 at NaN), so the
//! backward pass does not keep the pre-activation alive and the forward `conv → bias →
//! relu` chain still fuses.

use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::UnaryKind;

const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// Cotangents of the inputs.
pub fn vjp(k: UnaryKind, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    if !differentiable(k) || !cx.need(0) {
        return Ok(vec![None]);
    }
    let dy = cx.dy(0)?;
    let d = scale(cx.g, k, cx.inputs[0], cx.outputs[0], dy)?;
    Ok(vec![Some(d)])
}

/// Tangents of the outputs.
pub fn jvp(k: UnaryKind, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let Some(t) = cx.t(0) else { return Ok(vec![None]) };
    if !differentiable(k) {
        return Ok(vec![None]);
    }
    Ok(vec![Some(scale(cx.g, k, cx.inputs[0], cx.outputs[0], t)?)])
}

/// Whether derivatives flow through this kind.
pub fn differentiable(k: UnaryKind) -> bool {
    use UnaryKind::*;
    !matches!(k, Sign | Step | Floor | Ceil | Round | LogicalNot | IsNan | IsFinite)
}

/// `v * f'(x)` (`y = f(x)` is reused where it is cheaper).
fn scale(g: &mut Graph, k: UnaryKind, x: ValueId, y: ValueId, v: ValueId) -> Result<ValueId> {
    use UnaryKind::*;
    match k {
        Neg => g.neg(v),
        Exp => g.mul(v, y),
        Log => g.div(v, x),
        Reciprocal => {
            // -v * y^2
            let y2 = g.square(y)?;
            let p = g.mul(v, y2)?;
            g.neg(p)
        }
        Sqrt => {
            // v / (2 y)
            let two_y = g.mul_scalar(y, 2.0)?;
            g.div(v, two_y)
        }
        _ => {
            let d = local_derivative(g, k, x, y)?;
            g.mul(v, d)
        }
    }
}

/// `f'(x)` as a graph value of `x`'s shape.
fn local_derivative(g: &mut Graph, k: UnaryKind, x: ValueId, y: ValueId) -> Result<ValueId> {
    use UnaryKind::*;
    let dt = g.dtype(x)?;
    match k {
        Abs => {
            // sign(x), as a float mask difference so it is differentiable (zero) itself.
            let z = g.scalar_like(x, 0.0)?;
            let pos = g.greater(x, z)?;
            let neg = g.less(x, z)?;
            let (p, n) = (g.cast(pos, dt)?, g.cast(neg, dt)?);
            g.sub(p, n)
        }
        Square => g.mul_scalar(x, 2.0),
        Expm1 => g.add_scalar(y, 1.0),
        Log1p => {
            let xp1 = g.add_scalar(x, 1.0)?;
            g.reciprocal(xp1)
        }
        Rsqrt => {
            // -0.5 * y^3
            let y2 = g.square(y)?;
            let y3 = g.mul(y2, y)?;
            g.mul_scalar(y3, -0.5)
        }
        Sin => g.cos(x),
        Cos => {
            let s = g.sin(x)?;
            g.neg(s)
        }
        Tan => {
            let y2 = g.square(y)?;
            g.add_scalar(y2, 1.0)
        }
        Asin | Acos => {
            let x2 = g.square(x)?;
            let one = g.scalar_like(x, 1.0)?;
            let r = g.sub(one, x2)?;
            let r = g.rsqrt(r)?;
            if k == Acos { g.neg(r) } else { Ok(r) }
        }
        Atan => {
            let x2 = g.square(x)?;
            let d = g.add_scalar(x2, 1.0)?;
            g.reciprocal(d)
        }
        Asinh => {
            // 1 / sqrt(x² + 1)
            let x2 = g.square(x)?;
            let d = g.add_scalar(x2, 1.0)?;
            g.rsqrt(d)
        }
        Sinh => g.cosh(x),
        Cosh => g.sinh(x),
        Tanh => {
            let y2 = g.square(y)?;
            let one = g.scalar_like(y, 1.0)?;
            g.sub(one, y2)
        }
        Sigmoid => {
            let one = g.scalar_like(y, 1.0)?;
            let om = g.sub(one, y)?;
            g.mul(y, om)
        }
        LogSigmoid => {
            let nx = g.neg(x)?;
            g.sigmoid(nx)
        }
        Softplus => g.sigmoid(x),
        Relu => g.step(y),
        Relu6 => {
            let (z, six) = (g.scalar_like(x, 0.0)?, g.scalar_like(x, 6.0)?);
            let (a, b) = (g.greater(x, z)?, g.less(x, six)?);
            let m = g.logical_and(a, b)?;
            g.cast(m, dt)
        }
        Elu | Selu => {
            let z = g.scalar_like(x, 0.0)?;
            let m = g.greater(x, z)?;
            let e = g.exp(x)?;
            let (pos, neg) = if k == Elu {
                (g.ones_like(x)?, e)
            } else {
                let ones = g.ones_like(x)?;
                (g.mul_scalar(ones, SELU_SCALE)?, g.mul_scalar(e, SELU_SCALE * SELU_ALPHA)?)
            };
            g.select(m, pos, neg)
        }
        Softsign => {
            let a = g.abs(x)?;
            let d = g.add_scalar(a, 1.0)?;
            let d2 = g.square(d)?;
            g.reciprocal(d2)
        }
        Silu => {
            // s + x s (1 - s)
            let s = g.sigmoid(x)?;
            let one = g.scalar_like(x, 1.0)?;
            let om = g.sub(one, s)?;
            let xs = g.mul(x, s)?;
            let t = g.mul(xs, om)?;
            g.add(s, t)
        }
        Gelu => {
            // Φ(x) + x φ(x)
            let xr = g.mul_scalar(x, std::f64::consts::FRAC_1_SQRT_2)?;
            let e = g.erf(xr)?;
            let e1 = g.add_scalar(e, 1.0)?;
            let cdf = g.mul_scalar(e1, 0.5)?;
            let x2 = g.square(x)?;
            let h = g.mul_scalar(x2, -0.5)?;
            let pdf = g.exp(h)?;
            let pdf = g.mul_scalar(pdf, 1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
            let xp = g.mul(x, pdf)?;
            g.add(cdf, xp)
        }
        Erf | Erfc => {
            let x2 = g.square(x)?;
            let nx2 = g.neg(x2)?;
            let e = g.exp(nx2)?;
            let c = std::f64::consts::FRAC_2_SQRT_PI;
            g.mul_scalar(e, if k == Erf { c } else { -c })
        }
        Neg | Exp | Log | Reciprocal | Sqrt => {
            let one = g.ones_like(x)?;
            scale(g, k, x, y, one)
        }
        Sign | Step | Floor | Ceil | Round | LogicalNot | IsNan | IsFinite => g.zeros_like(x),
    }
}
