//! ONNX elementwise operators: unary math and activations, binary arithmetic, comparisons and
//! logic (numpy broadcasting, as ONNX's multidirectional broadcasting), variadic
//! `Sum`/`Mean`/`Max`/`Min`, `Where`, `Clip`, `Cast`/`CastLike`.
//!
//! Invariants: an op whose ONNX definition has an attribute we do not model reads it and fails
//! on a non-default value; composite activations (`LeakyRelu`, `HardSigmoid`, ...) are built
//! from our ops in the input's dtype, so their derivatives come from the parts.

use super::convert::NodeCx;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::UnaryKind;
use crate::tensor::DType;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "And",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Cosh",
    "Div",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "Greater",
    "GreaterOrEqual",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "IsInf",
    "IsNaN",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "Max",
    "Mean",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "Pow",
    "PRelu",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Sub",
    "Sum",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Where",
    "Xor",
];

fn unary_kind(op: &str) -> Option<UnaryKind> {
    use UnaryKind::*;
    Some(match op {
        "Abs" => Abs,
        "Neg" => Neg,
        "Exp" => Exp,
        "Log" => Log,
        "Sqrt" => Sqrt,
        "Reciprocal" => Reciprocal,
        "Sin" => Sin,
        "Cos" => Cos,
        "Tan" => Tan,
        "Asin" => Asin,
        "Acos" => Acos,
        "Atan" => Atan,
        "Asinh" => Asinh,
        "Sinh" => Sinh,
        "Cosh" => Cosh,
        "Tanh" => Tanh,
        "Sigmoid" => Sigmoid,
        "Relu" => Relu,
        "Softsign" => Softsign,
        "Erf" => Erf,
        "Floor" => Floor,
        "Ceil" => Ceil,
        "Round" => Round,
        "Sign" => Sign,
        "Not" => LogicalNot,
        "IsNaN" => IsNan,
        _ => return None,
    })
}

/// Converts `n` if it is an elementwise op.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_inner(g, n).map(|v| vec![v]))
}

fn scalar_like(g: &mut Graph, x: ValueId, v: f64) -> Result<ValueId> {
    g.scalar_like(x, v)
}

fn convert_inner(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let op = n.op();
    if let Some(k) = unary_kind(op) {
        if op == "Relu" && g.dtype(n.input(0)?)? == DType::I64 {
            let x = n.input(0)?;
            let z = scalar_like(g, x, 0.0)?;
            return g.maximum(x, z);
        }
        return g.unary(k, n.input(0)?);
    }
    let x = n.input(0)?;
    match op {
        "Identity" => g.identity(x),
        "Add" | "Sub" | "Mul" | "Div" | "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And"
        | "Or" | "Xor" => {
            // opset < 7 broadcast attributes are out of our opset range
            let y = n.input(1)?;
            match op {
                "Add" => g.add(x, y),
                "Sub" => g.sub(x, y),
                "Mul" => g.mul(x, y),
                "Div" => g.div(x, y),
                "Equal" => g.equal(x, y),
                "Less" => g.less(x, y),
                "Greater" => g.greater(x, y),
                "LessOrEqual" => g.less_equal(x, y),
                "GreaterOrEqual" => g.greater_equal(x, y),
                "And" => g.logical_and(x, y),
                "Or" => g.logical_or(x, y),
                _ => g.logical_xor(x, y),
            }
        }
        "Pow" => {
            let mut y = n.input(1)?;
            let dt = g.dtype(x)?;
            if g.dtype(y)? != dt {
                y = g.cast(y, dt)?;
            }
            g.pow(x, y)
        }
        "Mod" => {
            let fmod = n.attr_i("fmod", 0);
            let y = n.input(1)?;
            if fmod == 0 {
                g.floor_mod(x, y)
            } else {
                // C fmod: the sign of the dividend, x - trunc(x / y) * y
                let q = g.div(x, y)?;
                let q = if g.dtype(q)?.is_float() {
                    let s = g.sign(q)?;
                    let a = g.abs(q)?;
                    let f = g.floor(a)?;
                    g.mul(s, f)?
                } else {
                    q
                };
                let p = g.mul(q, y)?;
                g.sub(x, p)
            }
        }
        "Sum" | "Mean" | "Max" | "Min" => {
            let xs = n.all_inputs();
            let mut acc = xs[0];
            for &y in &xs[1..] {
                acc = match op {
                    "Max" => g.maximum(acc, y)?,
                    "Min" => g.minimum(acc, y)?,
                    _ => g.add(acc, y)?,
                };
            }
            if op == "Mean" {
                let c = scalar_like(g, acc, xs.len() as f64)?;
                acc = g.div(acc, c)?;
            }
            // a single input still needs every operand's broadcast shape
            if xs.len() == 1 { g.identity(acc) } else { Ok(acc) }
        }
        "Where" => g.select(x, n.input(1)?, n.input(2)?),
        "Clip" => clip(g, n, x),
        "Cast" => {
            n.attr_i_only("saturate", 1)?;
            // Cast-24 round_mode only affects float8e8m0, an element type we refuse
            let _ = n.attr("round_mode");
            let to = n.attr_dtype("to")?;
            g.cast(x, to)
        }
        "CastLike" => {
            n.attr_i_only("saturate", 1)?;
            let _ = n.attr("round_mode");
            let to = g.dtype(n.input(1)?)?;
            g.cast(x, to)
        }
        "PRelu" => {
            let slope = n.input(1)?;
            let z = scalar_like(g, x, 0.0)?;
            let neg = g.less(x, z)?;
            let m = g.mul(x, slope)?;
            g.select(neg, m, x)
        }
        _ => activation(g, n, x),
    }
}

fn clip(g: &mut Graph, n: &NodeCx, x: ValueId) -> Result<ValueId> {
    let (lo, hi) = if n.opset < 11 {
        let lo = n.attr("min").map(|a| f64::from(a.f));
        let hi = n.attr("max").map(|a| f64::from(a.f));
        (lo.map(|v| scalar_like(g, x, v)).transpose()?, hi.map(|v| scalar_like(g, x, v)).transpose()?)
    } else {
        (n.opt_input(1), n.opt_input(2))
    };
    let mut y = x;
    if let Some(lo) = lo {
        y = g.maximum(y, lo)?;
    }
    if let Some(hi) = hi {
        y = g.minimum(y, hi)?;
    }
    if y == x { g.identity(x) } else { Ok(y) }
}

/// The parametrized activations, composed from our ops.
fn activation(g: &mut Graph, n: &NodeCx, x: ValueId) -> Result<ValueId> {
    let zero = scalar_like(g, x, 0.0)?;
    match n.op() {
        "LeakyRelu" => {
            let a = n.attr_f("alpha", 0.01);
            let ax = g.mul_scalar(x, a)?;
            let pos = g.greater_equal(x, zero)?;
            g.select(pos, x, ax)
        }
        "Elu" | "Celu" => {
            let a = n.attr_f("alpha", 1.0);
            // alpha * (exp(x / alpha) - 1) for Celu, alpha * (exp(x) - 1) for Elu
            let arg = if n.op() == "Celu" { g.mul_scalar(x, 1.0 / a)? } else { x };
            let e = g.expm1(arg)?;
            let neg = g.mul_scalar(e, a)?;
            let pos = g.greater(x, zero)?;
            g.select(pos, x, neg)
        }
        "Selu" => {
            let a = n.attr_f("alpha", 1.673_263_2);
            let gamma = n.attr_f("gamma", 1.050_701);
            let e = g.expm1(x)?;
            let neg = g.mul_scalar(e, a)?;
            let pos = g.greater(x, zero)?;
            let y = g.select(pos, x, neg)?;
            g.mul_scalar(y, gamma)
        }
        "ThresholdedRelu" => {
            let a = n.attr_f("alpha", 1.0);
            let t = scalar_like(g, x, a)?;
            let pos = g.greater(x, t)?;
            g.select(pos, x, zero)
        }
        "HardSigmoid" | "HardSwish" => {
            let (a, b) = if n.op() == "HardSigmoid" {
                (n.attr_f("alpha", 0.2), n.attr_f("beta", 0.5))
            } else {
                (1.0 / 6.0, 0.5)
            };
            let ax = g.mul_scalar(x, a)?;
            let y = g.add_scalar(ax, b)?;
            let one = scalar_like(g, x, 1.0)?;
            let y = g.maximum(y, zero)?;
            let y = g.minimum(y, one)?;
            if n.op() == "HardSwish" { g.mul(x, y) } else { Ok(y) }
        }
        "Softplus" => g.softplus(x),
        "Mish" => {
            let sp = g.softplus(x)?;
            let t = g.tanh(sp)?;
            g.mul(x, t)
        }
        "Gelu" => {
            let approx = n.attr_choice("approximate", &["none", "tanh"])?;
            if approx == "none" {
                return g.gelu(x);
            }
            // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            let x3 = g.mul(x, x)?;
            let x3 = g.mul(x3, x)?;
            let inner = g.mul_scalar(x3, 0.044_715)?;
            let inner = g.add(x, inner)?;
            let inner = g.mul_scalar(inner, (2.0 / std::f64::consts::PI).sqrt())?;
            let t = g.tanh(inner)?;
            let t = g.add_scalar(t, 1.0)?;
            let y = g.mul(x, t)?;
            g.mul_scalar(y, 0.5)
        }
        "Acosh" => {
            // log(x + sqrt(x^2 - 1))
            let x2 = g.mul(x, x)?;
            let d = g.add_scalar(x2, -1.0)?;
            let s = g.sqrt(d)?;
            let a = g.add(x, s)?;
            g.log(a)
        }
        "Atanh" => {
            // 0.5 log((1 + x) / (1 - x))
            let p = g.add_scalar(x, 1.0)?;
            let nx = g.neg(x)?;
            let m = g.add_scalar(nx, 1.0)?;
            let q = g.div(p, m)?;
            let l = g.log(q)?;
            g.mul_scalar(l, 0.5)
        }
        "IsInf" => {
            let pos = n.attr_i("detect_positive", 1) != 0;
            let neg = n.attr_i("detect_negative", 1) != 0;
            let pinf = scalar_like(g, x, f64::INFINITY)?;
            let ninf = scalar_like(g, x, f64::NEG_INFINITY)?;
            let p = g.equal(x, pinf)?;
            let m = g.equal(x, ninf)?;
            match (pos, neg) {
                (true, true) => g.logical_or(p, m),
                (true, false) => Ok(p),
                (false, true) => Ok(m),
                (false, false) => g.logical_and(p, m),
            }
        }
        _ => Err(n.unsupported("the op type")),
    }
}
