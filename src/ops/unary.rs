//! Elementwise unary math.
//!
//! Invariants: output shape == input shape; dtype rules per kind (see [`UnaryKind::dtype_rule`]).
//! Kernels run in place when the executor hands over the only reference to the input buffer,
//! and in parallel (rayon) above [`PAR_THRESHOLD`] elements. f32 `sigmoid` / `tanh` use the
//! vectorized kernels of [`crate::kernels::fastmath`] (relative error < 1e-6).

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::{Batching, Linearity, Op, Raises, expect_arity};
use crate::tensor::{DType, Element, Tensor, TensorType};

pub use crate::kernels::PAR_THRESHOLD;

macro_rules! unary_kinds {
    ($($variant:ident => $name:literal, $rule:ident;)*) => {
        /// Unary elementwise op kinds.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryKind { $(#[doc = $name] $variant,)* }
        impl UnaryKind {
            /// Every kind.
            pub const ALL: &'static [UnaryKind] = &[$(UnaryKind::$variant,)*];
            /// The op name.
            pub fn name(self) -> &'static str { match self { $(UnaryKind::$variant => $name,)* } }
            /// Which dtypes the op accepts and what it returns.
            pub fn dtype_rule(self) -> DtypeRule { match self { $(UnaryKind::$variant => DtypeRule::$rule,)* } }
        }
    };
}

/// Dtype rule of a unary op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtypeRule {
    /// float in, same float out.
    Float,
    /// f32/f64/i64 in, same out.
    Numeric,
    /// bool in, bool out.
    Logical,
    /// float in, bool out.
    FloatPredicate,
}

unary_kinds! {
    Neg => "neg", Numeric;
    Abs => "abs", Numeric;
    Sign => "sign", Numeric;
    Square => "square", Numeric;
    Exp => "exp", Float;
    Expm1 => "expm1", Float;
    Log => "log", Float;
    Log1p => "log1p", Float;
    Sqrt => "sqrt", Float;
    Rsqrt => "rsqrt", Float;
    Reciprocal => "reciprocal", Float;
    Sin => "sin", Float;
    Cos => "cos", Float;
    Tan => "tan", Float;
    Asin => "asin", Float;
    Acos => "acos", Float;
    Atan => "atan", Float;
    Asinh => "asinh", Float;
    Sinh => "sinh", Float;
    Cosh => "cosh", Float;
    Tanh => "tanh", Float;
    Sigmoid => "sigmoid", Float;
    LogSigmoid => "log_sigmoid", Float;
    Relu => "relu", Float;
    Relu6 => "relu6", Float;
    Step => "step", Float;
    Elu => "elu", Float;
    Selu => "selu", Float;
    Softplus => "softplus", Float;
    Softsign => "softsign", Float;
    Silu => "silu", Float;
    Gelu => "gelu", Float;
    Erf => "erf", Float;
    Erfc => "erfc", Float;
    Floor => "floor", Float;
    Ceil => "ceil", Float;
    Round => "round", Float;
    LogicalNot => "logical_not", Logical;
    IsNan => "is_nan", FloatPredicate;
    IsFinite => "is_finite", FloatPredicate;
}

impl UnaryKind {
    /// Which inputs' values can make the op fail ([`Raises`]): none (float math is IEEE,
    /// i64 `neg`/`abs`/`square` wrap).
    ///
    /// ```
    /// use pfor::ops::{Batching, Linearity, Raises, UnaryKind, unary};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(UnaryKind::Log.raises(), Raises::Never); // log(-1) is NaN, never an error
    /// # Ok(())
    /// # }
    /// ```
    pub fn raises(self) -> Raises {
        Raises::Never
    }
    /// How pfor batches the op ([`Batching`]): elementwise, every kind.
    ///
    /// ```
    /// use pfor::ops::{Batching, Linearity, Raises, UnaryKind, unary};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(UnaryKind::Sin.batching(), Batching::Elementwise);
    /// # Ok(())
    /// # }
    /// ```
    pub fn batching(self) -> Batching {
        Batching::Elementwise
    }
    /// Where the op is linear ([`Linearity`]): `neg` only (the others have a local
    /// derivative in `autodiff/rules/unary.rs`).
    ///
    /// ```
    /// use pfor::ops::{Batching, Linearity, Raises, UnaryKind, unary};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(UnaryKind::Neg.linearity(), Linearity::Linear);
    /// assert_eq!(UnaryKind::Sin.linearity(), Linearity::NonLinear);
    /// # Ok(())
    /// # }
    /// ```
    pub fn linearity(self) -> Linearity {
        match self {
            UnaryKind::Neg => Linearity::Linear,
            _ => Linearity::NonLinear,
        }
    }
}

const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// Scalar definition in f64 (the f32 kernel computes in f32 where precision allows it).
#[inline]
fn f_f64(k: UnaryKind, x: f64) -> f64 {
    use UnaryKind::*;
    match k {
        Neg => -x,
        Abs => x.abs(),
        Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x // keeps 0 and NaN
            }
        }
        Square => x * x,
        Exp => x.exp(),
        Expm1 => x.exp_m1(),
        Log => x.ln(),
        Log1p => x.ln_1p(),
        Sqrt => x.sqrt(),
        Rsqrt => 1.0 / x.sqrt(),
        Reciprocal => 1.0 / x,
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Asinh => x.asinh(),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Tanh => x.tanh(),
        Sigmoid => {
            if x >= 0.0 {
                1.0 / (1.0 + (-x).exp())
            } else {
                let e = x.exp();
                e / (1.0 + e)
            }
        }
        LogSigmoid => -softplus(-x),
        Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        Relu6 => {
            if x.is_nan() {
                x
            } else {
                x.clamp(0.0, 6.0)
            }
        }
        Step => {
            if x > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        Elu => {
            if x > 0.0 {
                x
            } else {
                x.exp_m1()
            }
        }
        Selu => {
            if x > 0.0 {
                SELU_SCALE * x
            } else {
                SELU_SCALE * SELU_ALPHA * x.exp_m1()
            }
        }
        Softplus => softplus(x),
        Softsign => x / (1.0 + x.abs()),
        Silu => x * f_f64(Sigmoid, x),
        Gelu => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
        Erf => libm::erf(x),
        Erfc => libm::erfc(x),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round_ties_even(),
        LogicalNot | IsNan | IsFinite => f64::NAN,
    }
}

fn softplus(x: f64) -> f64 {
    // log(1 + e^x), stable for large |x|.
    if x > 0.0 { x + (-x).exp().ln_1p() } else { x.exp().ln_1p() }
}

#[inline]
fn f_f32(k: UnaryKind, x: f32) -> f32 {
    use UnaryKind::*;
    match k {
        Neg => -x,
        Abs => x.abs(),
        Square => x * x,
        Exp => x.exp(),
        Log => x.ln(),
        Sqrt => x.sqrt(),
        Reciprocal => 1.0 / x,
        Tanh => x.tanh(),
        Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        Step => {
            if x > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        Sigmoid => {
            if x >= 0.0 {
                1.0 / (1.0 + (-x).exp())
            } else {
                let e = x.exp();
                e / (1.0 + e)
            }
        }
        Sin => x.sin(),
        Cos => x.cos(),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round_ties_even(),
        Erf => libm::erff(x),
        _ => f_f64(k, x as f64) as f32,
    }
}

fn f_i64(k: UnaryKind, x: i64) -> i64 {
    match k {
        UnaryKind::Neg => x.wrapping_neg(),
        UnaryKind::Abs => x.wrapping_abs(),
        UnaryKind::Sign => x.signum(),
        UnaryKind::Square => x.wrapping_mul(x),
        _ => 0, // excluded by inference
    }
}

/// Shape and dtype inference.
///
/// ```
/// use pfor::ops::{Batching, Linearity, Raises, UnaryKind, unary};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let t = TensorType::new(DType::F32, [2, 3]);
/// assert_eq!(unary::infer(UnaryKind::Exp, &[t.clone()])?, [t]);
/// // float-only kinds refuse integers, naming the op
/// let e = unary::infer(UnaryKind::Exp, &[TensorType::new(DType::I64, [2])]).unwrap_err();
/// assert!(e.to_string().contains("exp"));
/// # Ok(())
/// # }
/// ```
pub fn infer(k: UnaryKind, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
    let op = k.name();
    expect_arity(op, inputs, 1)?;
    let t = &inputs[0];
    let out_dtype = match (k.dtype_rule(), t.dtype) {
        (DtypeRule::Float, d) if d.is_float() => d,
        (DtypeRule::Numeric, d) if d.is_numeric() => d,
        (DtypeRule::Logical, DType::Bool) => DType::Bool,
        (DtypeRule::FloatPredicate, d) if d.is_float() => DType::Bool,
        (rule, d) => {
            let want = match rule {
                DtypeRule::Float | DtypeRule::FloatPredicate => "a float type (f32 or f64)",
                DtypeRule::Numeric => "a numeric type (f32, f64 or i64)",
                DtypeRule::Logical => "bool",
            };
            return Err(Error::dtype(op, want, d));
        }
    };
    Ok(vec![TensorType { dtype: out_dtype, shape: t.shape.clone() }])
}

/// `f` over every element, written in place when the buffer is uniquely owned and contiguous
/// (one pass over a slice, vectorizable), into a fresh buffer otherwise (never clone-then-map).
fn map_inplace<T: Element>(mut a: ndarray::ArcArray<T, ndarray::IxDyn>, f: impl Fn(T) -> T + Sync + Send) -> Tensor {
    const CHUNK: usize = 1 << 14;
    let par = a.len() >= PAR_THRESHOLD && rayon::current_num_threads() > 1;
    if a.is_unique()
        && let Some(s) = a.as_slice_memory_order_mut()
    {
        if par {
            s.par_chunks_mut(CHUNK).for_each(|c| c.iter_mut().for_each(|v| *v = f(*v)));
        } else {
            s.iter_mut().for_each(|v| *v = f(*v));
        }
        return T::wrap(a);
    }
    if par {
        let mut out = a.to_owned();
        out.par_mapv_inplace(f);
        return T::wrap(out.into_shared());
    }
    T::wrap(a.mapv(f).into_shared())
}

/// [`map_inplace`] with the kind fixed at compile time for the cheap, common kinds (so the
/// per-element `match` folds away and the loop vectorizes); other kinds dispatch per element.
macro_rules! map_kind {
    ($a:expr, $k:expr, $f:ident, [$($kind:ident),*]) => {
        match $k {
            $(UnaryKind::$kind => map_inplace($a, |v| $f(UnaryKind::$kind, v)),)*
            k => map_inplace($a, move |v| $f(k, v)),
        }
    };
}

/// `f32` sigmoid / tanh through the vectorized slice kernels: in place when the buffer is
/// uniquely owned and contiguous; otherwise (a shared buffer, or a strided view such as one
/// gate of a `split`) into a fresh buffer, one cache-resident piece at a time — each piece
/// is copied and transformed while it sits in L1, so the data makes one pass over memory,
/// not two (copy everything, then transform everything).
fn fast_f32(mut a: ndarray::ArcArray<f32, ndarray::IxDyn>, kernel: fn(&mut [f32])) -> Result<Tensor> {
    const CHUNK: usize = 1 << 14;
    let n = a.len();
    let par = n >= PAR_THRESHOLD && rayon::current_num_threads() > 1;
    if a.is_unique()
        && let Some(xs) = a.as_slice_memory_order_mut()
    {
        if par {
            xs.par_chunks_mut(CHUNK).for_each(kernel);
        } else {
            kernel(xs);
        }
        return Ok(Tensor::F32(a));
    }
    let shape = a.shape().to_vec();
    let mut out: Vec<f32> = Vec::with_capacity(n);
    if let Some(xs) = a.as_slice() {
        // shared, contiguous: piecewise copy + transform
        for piece in xs.chunks(CHUNK) {
            let at = out.len();
            out.extend_from_slice(piece);
            kernel(&mut out[at..]);
        }
    } else if let Some(last) = shape.len().checked_sub(1)
        && a.strides()[last] == 1
        && shape[last] > 0
    {
        // a strided view with contiguous rows (e.g. a split of the last axis): row by row
        for lane in a.lanes(ndarray::Axis(last)) {
            let at = out.len();
            match lane.as_slice() {
                Some(row) => out.extend_from_slice(row),
                None => out.extend(lane.iter().copied()),
            }
            kernel(&mut out[at..]);
        }
    } else {
        out.extend(a.iter().copied());
        kernel(&mut out);
    }
    // `out` holds exactly one element per index of `shape`, in row-major order
    ndarray::ArcArray::from_shape_vec(ndarray::IxDyn(&shape), out)
        .map(Tensor::F32)
        .map_err(|e| Error::shape("unary", format!("internal: output of shape {shape:?}: {e}")))
}

/// Evaluate.
///
/// ```
/// use pfor::ops::{Batching, Linearity, Raises, UnaryKind, unary};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let out = unary::eval(UnaryKind::Abs, vec![Tensor::vec1(&[-2.0f32, 3.0])])?;
/// assert_eq!(out[0].to_vec::<f32>()?, [2.0, 3.0]);
/// # Ok(())
/// # }
/// ```
pub fn eval(k: UnaryKind, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    expect_arity(k.name(), &inputs, 1)?;
    let x = inputs.into_iter().next().expect("arity checked");
    let out = match x {
        Tensor::F32(a) => match k {
            UnaryKind::IsNan => Tensor::from_array(a.mapv(|v| v.is_nan())),
            UnaryKind::IsFinite => Tensor::from_array(a.mapv(|v| v.is_finite())),
            UnaryKind::Sigmoid => fast_f32(a, crate::kernels::fastmath::sigmoid_f32)?,
            UnaryKind::Tanh => fast_f32(a, crate::kernels::fastmath::tanh_f32)?,
            _ => map_kind!(a, k, f_f32, [Neg, Abs, Square, Exp, Log, Sqrt, Reciprocal, Relu, Step, Floor, Ceil]),
        },
        Tensor::F64(a) => match k {
            UnaryKind::IsNan => Tensor::from_array(a.mapv(|v| v.is_nan())),
            UnaryKind::IsFinite => Tensor::from_array(a.mapv(|v| v.is_finite())),
            _ => {
                map_kind!(
                    a,
                    k,
                    f_f64,
                    [Neg, Abs, Square, Exp, Log, Sqrt, Reciprocal, Tanh, Relu, Step, Sigmoid, Floor, Ceil]
                )
            }
        },
        Tensor::I64(a) => map_inplace(a, move |v| f_i64(k, v)),
        Tensor::Bool(a) => map_inplace(a, |v| !v),
    };
    Ok(vec![out])
}

/// `x ← k(x)` over an f32 slice, element for element exactly what [`eval`] computes on an
/// f32 tensor (exec's elementwise fusion runs it on cache-resident pieces); `false`, with
/// the slice untouched, for kinds whose result is not f32.
pub(crate) fn f32_in_place(k: UnaryKind, xs: &mut [f32]) -> bool {
    macro_rules! slice_kind {
        ($($kind:ident),*) => {
            match k {
                $(UnaryKind::$kind => xs.iter_mut().for_each(|v| *v = f_f32(UnaryKind::$kind, *v)),)*
                k => xs.iter_mut().for_each(|v| *v = f_f32(k, *v)),
            }
        };
    }
    if !f32_to_f32(k) {
        return false;
    }
    match k {
        UnaryKind::Sigmoid => crate::kernels::fastmath::sigmoid_f32(xs),
        UnaryKind::Tanh => crate::kernels::fastmath::tanh_f32(xs),
        _ => slice_kind!(Neg, Abs, Square, Exp, Log, Sqrt, Reciprocal, Relu, Step, Floor, Ceil),
    }
    true
}

/// Whether `k` maps f32 to f32 (what [`f32_in_place`] computes).
pub(crate) fn f32_to_f32(k: UnaryKind) -> bool {
    matches!(k.dtype_rule(), DtypeRule::Float | DtypeRule::Numeric)
}

macro_rules! unary_builders {
    ($($fn_name:ident => $variant:ident),* $(,)?) => {
        impl Graph {
            /// Apply any unary op.
            pub fn unary(&mut self, kind: UnaryKind, x: ValueId) -> Result<ValueId> {
                self.add_op(Op::Unary(kind), &[x])
            }
            $(
                #[doc = concat!("Elementwise `", stringify!($fn_name), "`.")]
                pub fn $fn_name(&mut self, x: ValueId) -> Result<ValueId> {
                    self.unary(UnaryKind::$variant, x)
                }
            )*
        }
    };
}

unary_builders! {
    neg => Neg, abs => Abs, sign => Sign, square => Square, exp => Exp, expm1 => Expm1,
    log => Log, log1p => Log1p, sqrt => Sqrt, rsqrt => Rsqrt, reciprocal => Reciprocal,
    sin => Sin, cos => Cos, tan => Tan, asin => Asin, acos => Acos, atan => Atan, asinh => Asinh,
    sinh => Sinh, cosh => Cosh, tanh => Tanh, sigmoid => Sigmoid, log_sigmoid => LogSigmoid,
    relu => Relu, relu6 => Relu6, step => Step, elu => Elu, selu => Selu, softplus => Softplus,
    softsign => Softsign, silu => Silu, gelu => Gelu, erf => Erf, erfc => Erfc,
    floor => Floor, ceil => Ceil, round => Round, logical_not => LogicalNot,
    is_nan => IsNan, is_finite => IsFinite,
}
