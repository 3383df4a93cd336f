//! Elementwise binary math with numpy broadcasting.
//!
//! Invariants:
//! - both inputs have the SAME dtype (no implicit promotion); the output shape is the numpy
//!   broadcast of the two input shapes (checked statically, and again at run time for
//!   dynamic dims);
//! - dtype rules per kind (see [`BinaryKind::dtype_rule`]): arithmetic on f32/f64/i64 keeps
//!   the dtype (`atan2` floats only); comparisons return bool (`equal`/`not_equal` also
//!   accept bool); logical ops are bool only; bitwise ops and shifts are i64 only (integer
//!   ops: no derivative flows through them);
//! - shifts: `shift_left(x, s)` and `shift_right_logical(x, s)` are 0 for a shift count `s`
//!   outside `[0, 64)`, `shift_right` (arithmetic) fills with the sign bit there (0 or -1);
//! - i64 semantics: `div` truncates toward zero (like Rust), `floor_div` rounds toward
//!   negative infinity, `floor_mod` takes the sign of the divisor (Python `%`); division or
//!   modulo by zero and `pow` with a negative exponent are `Error::Numerical` at run time;
//!   overflow wraps (two's complement);
//! - float semantics: IEEE (`x / 0` is ±inf or NaN), `floor_div`/`floor_mod` follow Python's
//!   float `divmod` (`floor_mod(x, y)` = `x - floor(x / y) * y` with the sign of `y`),
//!   `maximum`/`minimum` propagate NaN, `atan2(a, b)` is the angle of the point `(x=b, y=a)`.
//!
//! Kernels write in place into an input whose buffer they own when it already has the output
//! shape and dtype, and run in parallel (rayon) above [`PAR_THRESHOLD`] output elements.

use ndarray::{ArcArray, IxDyn, Zip};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::unary::PAR_THRESHOLD;
use crate::ops::{Batching, Op, Raises, broadcast_shapes, broadcast_static, expect_arity};
use crate::tensor::layout::standard_vec;
use crate::tensor::{DType, Element, Tensor, TensorType};

macro_rules! binary_kinds {
    ($($variant:ident => $name:literal, $rule:ident;)*) => {
        /// Binary elementwise op kinds.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BinaryKind { $(#[doc = $name] $variant,)* }
        impl BinaryKind {
            /// Every kind.
            pub const ALL: &'static [BinaryKind] = &[$(BinaryKind::$variant,)*];
            /// The op name.
            pub fn name(self) -> &'static str { match self { $(BinaryKind::$variant => $name,)* } }
            /// Which dtypes the op accepts and what it returns.
            pub fn dtype_rule(self) -> BinaryDtypeRule {
                match self { $(BinaryKind::$variant => BinaryDtypeRule::$rule,)* }
            }
        }
    };
}

/// Dtype rule of a binary op (both inputs always share one dtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryDtypeRule {
    /// f32/f64/i64 in, same out.
    Numeric,
    /// f32/f64 in, same out.
    Float,
    /// f32/f64/i64 in, bool out.
    Compare,
    /// any dtype in, bool out.
    Equality,
    /// bool in, bool out.
    Logical,
    /// i64 in, i64 out (bitwise ops and shifts).
    Integer,
}

binary_kinds! {
    Add => "add", Numeric;
    Sub => "sub", Numeric;
    Mul => "mul", Numeric;
    Div => "div", Numeric;
    FloorDiv => "floor_div", Numeric;
    FloorMod => "floor_mod", Numeric;
    Pow => "pow", Numeric;
    Maximum => "maximum", Numeric;
    Minimum => "minimum", Numeric;
    SquaredDifference => "squared_difference", Numeric;
    Atan2 => "atan2", Float;
    Equal => "equal", Equality;
    NotEqual => "not_equal", Equality;
    Less => "less", Compare;
    LessEqual => "less_equal", Compare;
    Greater => "greater", Compare;
    GreaterEqual => "greater_equal", Compare;
    LogicalAnd => "logical_and", Logical;
    LogicalOr => "logical_or", Logical;
    LogicalXor => "logical_xor", Logical;
    BitwiseAnd => "bitwise_and", Integer;
    BitwiseOr => "bitwise_or", Integer;
    BitwiseXor => "bitwise_xor", Integer;
    ShiftLeft => "shift_left", Integer;
    ShiftRight => "shift_right", Integer;
    ShiftRightLogical => "shift_right_logical", Integer;
}

impl BinaryKind {
    /// True for the kinds whose output is bool.
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Raises, binary};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(BinaryKind::Less.returns_bool() && BinaryKind::LogicalAnd.returns_bool());
    /// assert!(!BinaryKind::Add.returns_bool());
    /// # Ok(())
    /// # }
    /// ```
    pub fn returns_bool(self) -> bool {
        matches!(self.dtype_rule(), BinaryDtypeRule::Compare | BinaryDtypeRule::Equality | BinaryDtypeRule::Logical)
    }

    /// Which inputs' values can make the op fail on operands of `dtype` ([`Raises`]): the
    /// divisor of i64 `div`, `floor_div`, `floor_mod` (zero) and the exponent of i64 `pow`
    /// (negative); nothing else (float math is IEEE, i64 overflow wraps).
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Raises, binary};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(BinaryKind::Div.raises(Some(DType::I64)), Raises::On(&[1])); // a zero divisor
    /// assert_eq!(BinaryKind::Div.raises(Some(DType::F32)), Raises::Never); // IEEE: inf or NaN
    /// # Ok(())
    /// # }
    /// ```
    pub fn raises(self, dtype: Option<DType>) -> Raises {
        use BinaryKind::*;
        match self {
            Div | FloorDiv | FloorMod | Pow if dtype.is_none_or(|d| d == DType::I64) => Raises::On(&[1]),
            _ => Raises::Never,
        }
    }

    /// How pfor batches the op ([`Batching`]): numpy broadcasting, every kind.
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Raises, binary};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(BinaryKind::Mul.batching(), Batching::Broadcasting);
    /// # Ok(())
    /// # }
    /// ```
    pub fn batching(self) -> Batching {
        Batching::Broadcasting
    }
}

/// Error for two inputs of different dtypes (names both).
fn dtype_mismatch(op: &str, a: DType, b: DType) -> Error {
    Error::dtype(op, format!("{a} (the dtype of input 0; no implicit promotion) for input 1"), b)
}

fn check_dtype(k: BinaryKind, a: DType, b: DType) -> Result<DType> {
    let op = k.name();
    if a != b {
        return Err(dtype_mismatch(op, a, b));
    }
    let (ok, want) = match k.dtype_rule() {
        BinaryDtypeRule::Numeric | BinaryDtypeRule::Compare => (a.is_numeric(), "a numeric type (f32, f64 or i64)"),
        BinaryDtypeRule::Float => (a.is_float(), "a float type (f32 or f64)"),
        BinaryDtypeRule::Equality => (true, ""),
        BinaryDtypeRule::Logical => (a == DType::Bool, "bool"),
        BinaryDtypeRule::Integer => (a == DType::I64, "i64"),
    };
    if !ok {
        return Err(Error::dtype(op, want, a));
    }
    Ok(if k.returns_bool() { DType::Bool } else { a })
}

/// Shape and dtype inference.
///
/// ```
/// use pfor::ops::{Batching, BinaryKind, Raises, binary};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let (a, b) = (TensorType::new(DType::F64, [3, 1]), TensorType::new(DType::F64, [4]));
/// assert_eq!(binary::infer(BinaryKind::Mul, &[a.clone(), b.clone()])?, [TensorType::new(DType::F64, [3, 4])]);
/// assert_eq!(binary::infer(BinaryKind::Less, &[a, b])?[0].dtype, DType::Bool);
/// # Ok(())
/// # }
/// ```
pub fn infer(k: BinaryKind, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
    let op = k.name();
    expect_arity(op, inputs, 2)?;
    let (a, b) = (&inputs[0], &inputs[1]);
    let dtype = check_dtype(k, a.dtype, b.dtype)?;
    let shape = broadcast_static(op, &a.shape, &b.shape)?;
    Ok(vec![TensorType { dtype, shape }])
}

/// NaN-propagating maximum (any `PartialOrd`; for non-floats the plain maximum).
pub(crate) fn nan_max<T: PartialOrd + Copy>(x: T, y: T) -> T {
    if x > y || x.partial_cmp(&x).is_none() { x } else { y }
}

/// NaN-propagating minimum.
pub(crate) fn nan_min<T: PartialOrd + Copy>(x: T, y: T) -> T {
    if x < y || x.partial_cmp(&x).is_none() { x } else { y }
}

/// Scalar arithmetic per numeric dtype (i64 wraps).
trait Arith: Element + PartialOrd {
    fn add(x: Self, y: Self) -> Self;
    fn sub(x: Self, y: Self) -> Self;
    fn mul(x: Self, y: Self) -> Self;
    fn div(x: Self, y: Self) -> Self;
    fn floor_div(x: Self, y: Self) -> Self;
    fn floor_mod(x: Self, y: Self) -> Self;
    fn pow(x: Self, y: Self) -> Self;
    /// Whether [`Arith::check`] can reject anything (else it is skipped).
    const CHECKED: bool = false;
    /// Reject operands without a defined result (checked before the kernel runs).
    fn check(_k: BinaryKind, _b: &ArcArray<Self, IxDyn>) -> Result<()> {
        Ok(())
    }
}

macro_rules! float_arith {
    ($t:ty) => {
        impl Arith for $t {
            fn add(x: $t, y: $t) -> $t {
                x + y
            }
            fn sub(x: $t, y: $t) -> $t {
                x - y
            }
            fn mul(x: $t, y: $t) -> $t {
                x * y
            }
            fn div(x: $t, y: $t) -> $t {
                x / y
            }
            // Python's float divmod: exact remainder (fmod), quotient rounded consistently.
            fn floor_div(x: $t, y: $t) -> $t {
                if y == 0.0 {
                    return x / y;
                }
                let m = x % y;
                let mut div = (x - m) / y;
                if m != 0.0 && ((y < 0.0) != (m < 0.0)) {
                    div -= 1.0;
                }
                if div != 0.0 {
                    let f = div.floor();
                    if div - f > 0.5 { f + 1.0 } else { f }
                } else {
                    (0.0 as $t).copysign(x / y)
                }
            }
            fn floor_mod(x: $t, y: $t) -> $t {
                let m = x % y;
                if m == 0.0 {
                    (0.0 as $t).copysign(y)
                } else if (y < 0.0) != (m < 0.0) {
                    m + y
                } else {
                    m
                }
            }
            fn pow(x: $t, y: $t) -> $t {
                x.powf(y)
            }
        }
    };
}
float_arith!(f32);
float_arith!(f64);

impl Arith for i64 {
    fn add(x: i64, y: i64) -> i64 {
        x.wrapping_add(y)
    }
    fn sub(x: i64, y: i64) -> i64 {
        x.wrapping_sub(y)
    }
    fn mul(x: i64, y: i64) -> i64 {
        x.wrapping_mul(y)
    }
    // Divisors are checked nonzero by `check`; the `0` arms only keep the kernel total.
    fn div(x: i64, y: i64) -> i64 {
        if y == 0 { 0 } else { x.wrapping_div(y) }
    }
    fn floor_div(x: i64, y: i64) -> i64 {
        if y == 0 {
            return 0;
        }
        let q = x.wrapping_div(y);
        if x.wrapping_rem(y) != 0 && ((x < 0) != (y < 0)) { q.wrapping_sub(1) } else { q }
    }
    fn floor_mod(x: i64, y: i64) -> i64 {
        if y == 0 {
            return 0;
        }
        let r = x.wrapping_rem(y);
        if r != 0 && ((r < 0) != (y < 0)) { r.wrapping_add(y) } else { r }
    }
    fn pow(mut base: i64, mut e: i64) -> i64 {
        let mut r: i64 = 1;
        while e > 0 {
            if e & 1 == 1 {
                r = r.wrapping_mul(base);
            }
            base = base.wrapping_mul(base);
            e >>= 1;
        }
        r
    }
    const CHECKED: bool = true;
    fn check(k: BinaryKind, b: &ArcArray<i64, IxDyn>) -> Result<()> {
        let op = k.name();
        match k {
            BinaryKind::Div | BinaryKind::FloorDiv | BinaryKind::FloorMod if b.iter().any(|&v| v == 0) => {
                Err(Error::Numerical { op: op.into(), msg: "integer division by zero".into() })
            }
            BinaryKind::Pow => match b.iter().find(|&&v| v < 0) {
                Some(e) => {
                    Err(Error::Numerical { op: op.into(), msg: format!("negative exponent {e} in integer pow") })
                }
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

fn out_shape<A, B>(op: &str, a: &ArcArray<A, IxDyn>, b: &ArcArray<B, IxDyn>) -> Result<Vec<usize>> {
    if a.shape() == b.shape() { Ok(a.shape().to_vec()) } else { broadcast_shapes(op, a.shape(), b.shape()) }
}

fn bcast_err(op: &str, from: &[usize], to: &[usize]) -> Error {
    Error::shape(op, format!("cannot broadcast {from:?} to {to:?}"))
}

/// `f` over broadcast operands with output dtype = input dtype; in place when an owned
/// input already has the output shape.
fn same<T: Element>(
    op: &str,
    mut a: ArcArray<T, IxDyn>,
    mut b: ArcArray<T, IxDyn>,
    f: impl Fn(T, T) -> T + Sync + Send,
) -> Result<Tensor> {
    // equal shapes (most elementwise steps): the first two paths below without the
    // broadcast shape (no allocation: this is the per-op cost of small tensors)
    if a.shape() == b.shape() && !a.is_empty() {
        let par = a.len() >= PAR_THRESHOLD;
        if a.is_unique()
            && let (Some(ys), Some(xs)) = (b.as_slice(), a.as_slice_mut())
        {
            periodic(xs, ys, par, |x, y| *x = f(*x, y));
            return Ok(T::wrap(a));
        }
        if b.is_unique()
            && let (Some(xs), Some(ys)) = (a.as_slice(), b.as_slice_mut())
        {
            periodic(ys, xs, par, |y, x| *y = f(x, *y));
            return Ok(T::wrap(b));
        }
    }
    let shape = out_shape(op, &a, &b)?;
    let par = shape.iter().product::<usize>() >= PAR_THRESHOLD;
    // contiguous fast paths: the owned operand is updated in place over flat slices while
    // the other one repeats with a period (same shape, or a row broadcast such as [1,256])
    if a.shape() == shape.as_slice()
        && a.is_unique()
        && repeats_along(&shape, &b)
        && let (Some(ys), Some(xs)) = (b.as_slice(), a.as_slice_mut())
    {
        periodic(xs, ys, par, |x, y| *x = f(*x, y));
        return Ok(T::wrap(a));
    }
    if b.shape() == shape.as_slice()
        && b.is_unique()
        && repeats_along(&shape, &a)
        && let (Some(xs), Some(ys)) = (a.as_slice(), b.as_slice_mut())
    {
        periodic(ys, xs, par, |y, x| *y = f(x, *y));
        return Ok(T::wrap(b));
    }
    // shared or strided operands: copy the full-shape one into row-major order (a `memcpy`,
    // or a tiled copy of a transposed view: a filter permuted to our layout), then the same
    // in-place pass
    if a.shape() == shape.as_slice()
        && repeats_along(&shape, &b)
        && let Some(ys) = b.as_slice()
    {
        let mut out = standard_vec(&a.view());
        periodic(&mut out, ys, par, |x, y| *x = f(*x, y));
        return from_vec(op, &shape, out);
    }
    if b.shape() == shape.as_slice()
        && repeats_along(&shape, &a)
        && let Some(xs) = a.as_slice()
    {
        let mut out = standard_vec(&b.view());
        periodic(&mut out, xs, par, |y, x| *y = f(x, *y));
        return from_vec(op, &shape, out);
    }
    if a.shape() == shape.as_slice() && a.is_unique() {
        let bv = b.broadcast(IxDyn(&shape)).ok_or_else(|| bcast_err(op, b.shape(), &shape))?;
        let z = Zip::from(a.view_mut()).and(&bv);
        if par {
            z.par_for_each(|x, &y| *x = f(*x, y))
        } else {
            z.for_each(|x, &y| *x = f(*x, y))
        }
        return Ok(T::wrap(a));
    }
    if b.shape() == shape.as_slice() && b.is_unique() {
        let av = a.broadcast(IxDyn(&shape)).ok_or_else(|| bcast_err(op, a.shape(), &shape))?;
        let z = Zip::from(b.view_mut()).and(&av);
        if par {
            z.par_for_each(|y, &x| *y = f(x, *y))
        } else {
            z.for_each(|y, &x| *y = f(x, *y))
        }
        return Ok(T::wrap(b));
    }
    collect(op, &a, &b, &shape, par, f)
}

/// True when `src` (standard layout) broadcast to `out` repeats its own buffer with period
/// `src.len()`: its shape without leading 1s is a suffix of `out`.
fn repeats_along<T>(out: &[usize], src: &ArcArray<T, IxDyn>) -> bool {
    let s = src.shape();
    let lead = s.iter().take_while(|&&d| d == 1).count();
    let s = &s[lead..];
    src.is_standard_layout() && !src.is_empty() && s.len() <= out.len() && out[out.len() - s.len()..] == *s
}

/// `g(dst[i], src[i % src.len()])` over flat slices (`dst.len()` a multiple of `src.len()`),
/// compiled for the widest vector unit, on rayon in pieces of whole periods when `par`.
fn periodic<T: Element>(dst: &mut [T], src: &[T], par: bool, g: impl Fn(&mut T, T) + Sync + Send) {
    let p = src.len();
    let run = |d: &mut [T]| {
        crate::kernels::simd::widest(
            #[inline(always)]
            || {
                for chunk in d.chunks_exact_mut(p) {
                    for (x, &y) in chunk.iter_mut().zip(src) {
                        g(x, y);
                    }
                }
            },
        )
    };
    if par && rayon::current_num_threads() > 1 {
        let per = p * (1usize << 14).div_ceil(p);
        dst.par_chunks_mut(per).for_each(run);
    } else {
        run(dst);
    }
}

fn from_vec<T: Element>(op: &str, shape: &[usize], v: Vec<T>) -> Result<Tensor> {
    ArcArray::from_shape_vec(IxDyn(shape), v)
        .map(T::wrap)
        .map_err(|e| Error::shape(op, format!("internal: output of shape {shape:?}: {e}")))
}

/// `f` over broadcast operands into a new array.
fn collect<T: Element, R: Element>(
    op: &str,
    a: &ArcArray<T, IxDyn>,
    b: &ArcArray<T, IxDyn>,
    shape: &[usize],
    par: bool,
    f: impl Fn(T, T) -> R + Sync + Send,
) -> Result<Tensor> {
    let av = a.broadcast(IxDyn(shape)).ok_or_else(|| bcast_err(op, a.shape(), shape))?;
    let bv = b.broadcast(IxDyn(shape)).ok_or_else(|| bcast_err(op, b.shape(), shape))?;
    let z = Zip::from(&av).and(&bv);
    let out = if par { z.par_map_collect(|&x, &y| f(x, y)) } else { z.map_collect(|&x, &y| f(x, y)) };
    Ok(R::wrap(out.into_shared()))
}

/// A predicate over broadcast operands (bool output).
fn to_bool<T: Element>(
    op: &str,
    a: ArcArray<T, IxDyn>,
    b: ArcArray<T, IxDyn>,
    f: impl Fn(T, T) -> bool + Sync + Send,
) -> Result<Tensor> {
    let shape = out_shape(op, &a, &b)?;
    let par = shape.iter().product::<usize>() >= PAR_THRESHOLD;
    collect(op, &a, &b, &shape, par, f)
}

fn numeric<T: Arith>(k: BinaryKind, a: ArcArray<T, IxDyn>, b: ArcArray<T, IxDyn>) -> Result<Tensor> {
    use BinaryKind::*;
    let op = k.name();
    // Operand checks only matter when some element is computed.
    if T::CHECKED && out_shape(op, &a, &b)?.iter().product::<usize>() > 0 {
        T::check(k, &b)?;
    }
    match k {
        Add => same(op, a, b, T::add),
        Sub => same(op, a, b, T::sub),
        Mul => same(op, a, b, T::mul),
        Div => same(op, a, b, T::div),
        FloorDiv => same(op, a, b, T::floor_div),
        FloorMod => same(op, a, b, T::floor_mod),
        Pow => same(op, a, b, T::pow),
        Maximum => same(op, a, b, nan_max),
        Minimum => same(op, a, b, nan_min),
        SquaredDifference => same(op, a, b, |x, y| {
            let d = T::sub(x, y);
            T::mul(d, d)
        }),
        Equal => to_bool(op, a, b, |x, y| x == y),
        NotEqual => to_bool(op, a, b, |x, y| x != y),
        Less => to_bool(op, a, b, |x, y| x < y),
        LessEqual => to_bool(op, a, b, |x, y| x <= y),
        Greater => to_bool(op, a, b, |x, y| x > y),
        GreaterEqual => to_bool(op, a, b, |x, y| x >= y),
        Atan2 | LogicalAnd | LogicalOr | LogicalXor | BitwiseAnd | BitwiseOr | BitwiseXor | ShiftLeft | ShiftRight
        | ShiftRightLogical => Err(Error::dtype(op, "see BinaryKind::dtype_rule", T::DTYPE)),
    }
}

/// The bitwise ops and shifts on i64 (shift counts outside `[0, 64)`: see the module doc).
fn integer(k: BinaryKind, a: ArcArray<i64, IxDyn>, b: ArcArray<i64, IxDyn>) -> Result<Tensor> {
    use BinaryKind::*;
    let op = k.name();
    let count = |s: i64| u32::try_from(s).ok().filter(|&s| s < 64);
    match k {
        BitwiseAnd => same(op, a, b, |x, y| x & y),
        BitwiseOr => same(op, a, b, |x, y| x | y),
        BitwiseXor => same(op, a, b, |x, y| x ^ y),
        ShiftLeft => same(op, a, b, move |x, s| count(s).map_or(0, |s| x << s)),
        ShiftRight => same(op, a, b, move |x, s| x >> count(s).unwrap_or(63)),
        ShiftRightLogical => same(op, a, b, move |x, s| count(s).map_or(0, |s| ((x as u64) >> s) as i64)),
        _ => numeric::<i64>(k, a, b),
    }
}

fn logical(k: BinaryKind, a: ArcArray<bool, IxDyn>, b: ArcArray<bool, IxDyn>) -> Result<Tensor> {
    let op = k.name();
    match k {
        BinaryKind::LogicalAnd => same(op, a, b, |x, y| x && y),
        BinaryKind::LogicalOr => same(op, a, b, |x, y| x || y),
        BinaryKind::LogicalXor | BinaryKind::NotEqual => same(op, a, b, |x, y| x != y),
        BinaryKind::Equal => same(op, a, b, |x, y| x == y),
        _ => Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", DType::Bool)),
    }
}

/// One operand of [`f32_apply`]: a slice as long as the output, or one value for all.
#[derive(Clone, Copy, Debug)]
pub(crate) enum F32Arg<'a> {
    /// One value per output element.
    Slice(&'a [f32]),
    /// The same value for every element.
    Scalar(f32),
    /// The destination's own values (the operation runs in place).
    Dst,
}

/// Whether [`f32_apply`] computes `k` (f32 operands, f32 result).
pub(crate) fn f32_fusable(k: BinaryKind) -> bool {
    use BinaryKind::*;
    matches!(k, Add | Sub | Mul | Div | FloorDiv | FloorMod | Pow | Maximum | Minimum | SquaredDifference)
}

/// `dst[i] = k(a[i], b[i])`, element for element exactly what [`eval`] computes on f32
/// tensors (exec's elementwise fusion runs it on cache-resident pieces, exec's fast steps on
/// whole small tensors); slices are as long as `dst`, [`F32Arg::Dst`] reads `dst[i]` itself.
/// `false`, with `dst` untouched, for kinds outside [`f32_fusable`].
pub(crate) fn f32_apply(k: BinaryKind, dst: &mut [f32], a: F32Arg<'_>, b: F32Arg<'_>) -> bool {
    use BinaryKind::*;
    #[inline(always)]
    fn zip(dst: &mut [f32], a: F32Arg<'_>, b: F32Arg<'_>, f: impl Fn(f32, f32) -> f32) {
        crate::kernels::simd::widest(
            #[inline(always)]
            || match (a, b) {
                (F32Arg::Slice(x), F32Arg::Slice(y)) => {
                    dst.iter_mut().zip(x).zip(y).for_each(|((d, &x), &y)| *d = f(x, y))
                }
                (F32Arg::Slice(x), F32Arg::Scalar(y)) => dst.iter_mut().zip(x).for_each(|(d, &x)| *d = f(x, y)),
                (F32Arg::Scalar(x), F32Arg::Slice(y)) => dst.iter_mut().zip(y).for_each(|(d, &y)| *d = f(x, y)),
                (F32Arg::Scalar(x), F32Arg::Scalar(y)) => dst.fill(f(x, y)),
                (F32Arg::Dst, F32Arg::Slice(y)) => dst.iter_mut().zip(y).for_each(|(d, &y)| *d = f(*d, y)),
                (F32Arg::Dst, F32Arg::Scalar(y)) => dst.iter_mut().for_each(|d| *d = f(*d, y)),
                (F32Arg::Slice(x), F32Arg::Dst) => dst.iter_mut().zip(x).for_each(|(d, &x)| *d = f(x, *d)),
                (F32Arg::Scalar(x), F32Arg::Dst) => dst.iter_mut().for_each(|d| *d = f(x, *d)),
                (F32Arg::Dst, F32Arg::Dst) => dst.iter_mut().for_each(|d| *d = f(*d, *d)),
            },
        )
    }
    match k {
        Add => zip(dst, a, b, <f32 as Arith>::add),
        Sub => zip(dst, a, b, <f32 as Arith>::sub),
        Mul => zip(dst, a, b, <f32 as Arith>::mul),
        Div => zip(dst, a, b, <f32 as Arith>::div),
        FloorDiv => zip(dst, a, b, <f32 as Arith>::floor_div),
        FloorMod => zip(dst, a, b, <f32 as Arith>::floor_mod),
        Pow => zip(dst, a, b, <f32 as Arith>::pow),
        Maximum => zip(dst, a, b, nan_max),
        Minimum => zip(dst, a, b, nan_min),
        SquaredDifference => zip(dst, a, b, |x, y| {
            let d = <f32 as Arith>::sub(x, y);
            <f32 as Arith>::mul(d, d)
        }),
        _ => return false,
    }
    true
}

/// Evaluate.
///
/// ```
/// use pfor::ops::{Batching, BinaryKind, Raises, binary};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let out = binary::eval(BinaryKind::Sub, vec![Tensor::vec1(&[5i64, 7]), Tensor::scalar(1i64)])?;
/// assert_eq!(out[0].to_vec::<i64>()?, [4, 6]);
/// let e = binary::eval(BinaryKind::Div, vec![Tensor::vec1(&[1i64]), Tensor::vec1(&[0i64])]);
/// assert!(e.is_err()); // i64 division by zero is an error, not a panic
/// # Ok(())
/// # }
/// ```
pub fn eval(k: BinaryKind, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    let op = k.name();
    expect_arity(op, &inputs, 2)?;
    let mut it = inputs.into_iter();
    let (a, b) = match (it.next(), it.next()) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(Error::arity(op, "2", 0)),
    };
    let dt = a.dtype();
    check_dtype(k, dt, b.dtype())?;
    let out = if dt == DType::Bool {
        logical(k, a.into_array()?, b.into_array()?)?
    } else if k.dtype_rule() == BinaryDtypeRule::Integer {
        integer(k, a.into_array()?, b.into_array()?)?
    } else if k == BinaryKind::Atan2 {
        crate::dispatch_float!(dt, T => same(op, a.into_array::<T>()?, b.into_array::<T>()?, T::atan2)?,
            _ => return Err(Error::dtype(op, "a float type (f32 or f64)", dt)))
    } else {
        crate::dispatch_numeric!(dt, T => numeric::<T>(k, a.into_array()?, b.into_array()?)?,
            _ => return Err(Error::dtype(op, "a numeric type", dt)))
    };
    Ok(vec![out])
}

macro_rules! binary_builders {
    ($($fn_name:ident => $variant:ident),* $(,)?) => {
        impl Graph {
            /// Apply any binary op (numpy broadcasting, both inputs of one dtype).
            pub fn binary(&mut self, kind: BinaryKind, a: ValueId, b: ValueId) -> Result<ValueId> {
                self.add_op(Op::Binary(kind), &[a, b])
            }
            $(
                #[doc = concat!("Elementwise `", stringify!($fn_name), "(a, b)` with broadcasting.")]
                pub fn $fn_name(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
                    self.binary(BinaryKind::$variant, a, b)
                }
            )*
        }
    };
}

binary_builders! {
    add => Add, sub => Sub, mul => Mul, div => Div, floor_div => FloorDiv, floor_mod => FloorMod,
    pow => Pow, maximum => Maximum, minimum => Minimum, squared_difference => SquaredDifference,
    atan2 => Atan2, equal => Equal, not_equal => NotEqual, less => Less, less_equal => LessEqual,
    greater => Greater, greater_equal => GreaterEqual, logical_and => LogicalAnd,
    logical_or => LogicalOr, logical_xor => LogicalXor, bitwise_and => BitwiseAnd, bitwise_or => BitwiseOr,
    bitwise_xor => BitwiseXor, shift_left => ShiftLeft, shift_right => ShiftRight,
    shift_right_logical => ShiftRightLogical,
}
