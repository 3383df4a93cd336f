//! Reductions, arg-reductions and scans.
//!
//! Semantics:
//! - Axis reductions (`reduce_sum`, `reduce_mean`, `reduce_prod`, `reduce_max`, `reduce_min`,
//!   `reduce_all`, `reduce_any`, `reduce_logsumexp`) take a set of `axes` (negative axes count
//!   from the end; an out-of-range axis is [`Error::Axis`], a repeated axis is
//!   [`Error::Shape`]). Every builder takes `axes: Option<&[i64]>`: `None` reduces every
//!   axis (resolved at build time from the static rank to the explicit list), `Some(&[])`
//!   means no reduction: the op is the identity (like JAX `axis=()`). Reduced dims
//!   disappear, or become 1 with `keep_dims` (a reduced dynamic dim too).
//! - Dtypes: sum/prod/max/min on f32, f64, i64 (i64 arithmetic wraps on overflow); mean and
//!   logsumexp on floats only; all/any on bool only. The output dtype is the input dtype.
//! - Reducing zero elements gives the identity: sum 0, prod 1, mean NaN, max -inf
//!   (`i64::MIN`), min +inf (`i64::MAX`), all true, any false, logsumexp -inf.
//! - Float max/min propagate NaN. logsumexp is computed as `m + ln Σ exp(x - m)` with `m` the
//!   max, so large inputs do not overflow; a slice whose max is not finite (all -inf, +inf,
//!   NaN) returns that max.
//! - `argmax` / `argmin` remove one axis and return i64 indices. Ties resolve to the smallest
//!   index. NaN counts as larger than everything for argmax and smaller than everything for
//!   argmin, so the FIRST NaN wins in both. An empty reduced axis is an [`Error::Shape`]
//!   (at build time when the dim is fixed, at run time when it is dynamic).
//! - `cumsum` / `cumprod` scan along one axis (TF semantics): `exclusive` shifts by one so the
//!   first output is the identity (0 / 1); `reverse` scans from the end. Output type = input
//!   type; numeric dtypes only.
//!
//! Kernels view the (standard-layout) input as `[outer, reduced, inner]`: when the reduced
//! axes are not one contiguous block they are first permuted to the end (one copy). Long
//! contiguous reductions use several accumulators; large inputs are split across rayon
//! threads with a fixed chunking (results do not depend on the thread count). Scans run in
//! place when the executor hands over the only reference to the input buffer.

use std::fmt;

use ndarray::{ArcArray, CowArray, IxDyn};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::unary::PAR_THRESHOLD;
use crate::ops::{Batching, Linearity, Op, Raises, expect_arity, norm_axis};
use crate::tensor::{DType, Dim, Element, Shape, Tensor, TensorType};

/// Ops of the reduce family.
#[derive(Clone, Debug, PartialEq)]
pub enum ReduceOp {
    /// Sum over `axes` (numeric).
    Sum {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Arithmetic mean over `axes` (float).
    Mean {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Product over `axes` (numeric).
    Prod {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Maximum over `axes` (numeric; NaN propagates).
    Max {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Minimum over `axes` (numeric; NaN propagates).
    Min {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Logical and over `axes` (bool).
    All {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Logical or over `axes` (bool).
    Any {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Numerically stable `log(sum(exp(x)))` over `axes` (float).
    LogSumExp {
        /// Axes to reduce (empty: identity).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// Index of the maximum along `axis` (i64 output, axis removed).
    ArgMax {
        /// The reduced axis.
        axis: i64,
    },
    /// Index of the minimum along `axis` (i64 output, axis removed).
    ArgMin {
        /// The reduced axis.
        axis: i64,
    },
    /// Cumulative sum along `axis`.
    CumSum {
        /// The scanned axis.
        axis: i64,
        /// Shift by one: the first output is 0.
        exclusive: bool,
        /// Scan from the end.
        reverse: bool,
    },
    /// Cumulative product along `axis`.
    CumProd {
        /// The scanned axis.
        axis: i64,
        /// Shift by one: the first output is 1.
        exclusive: bool,
        /// Scan from the end.
        reverse: bool,
    },
}

/// Kinds of the reduce family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// `reduce_sum`
    Sum,
    /// `reduce_mean`
    Mean,
    /// `reduce_prod`
    Prod,
    /// `reduce_max`
    Max,
    /// `reduce_min`
    Min,
    /// `reduce_all`
    All,
    /// `reduce_any`
    Any,
    /// `reduce_logsumexp`
    LogSumExp,
    /// `argmax`
    ArgMax,
    /// `argmin`
    ArgMin,
    /// `cumsum`
    CumSum,
    /// `cumprod`
    CumProd,
}

impl ReduceKind {
    /// Every kind.
    pub const ALL: &'static [ReduceKind] = &[
        ReduceKind::Sum,
        ReduceKind::Mean,
        ReduceKind::Prod,
        ReduceKind::Max,
        ReduceKind::Min,
        ReduceKind::All,
        ReduceKind::Any,
        ReduceKind::LogSumExp,
        ReduceKind::ArgMax,
        ReduceKind::ArgMin,
        ReduceKind::CumSum,
        ReduceKind::CumProd,
    ];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Mean => "reduce_mean",
            ReduceKind::Prod => "reduce_prod",
            ReduceKind::Max => "reduce_max",
            ReduceKind::Min => "reduce_min",
            ReduceKind::All => "reduce_all",
            ReduceKind::Any => "reduce_any",
            ReduceKind::LogSumExp => "reduce_logsumexp",
            ReduceKind::ArgMax => "argmax",
            ReduceKind::ArgMin => "argmin",
            ReduceKind::CumSum => "cumsum",
            ReduceKind::CumProd => "cumprod",
        }
    }

    /// Which inputs' values can make the op fail ([`Raises`]): none (an empty reduced axis
    /// is a shape error).
    pub fn raises(self) -> Raises {
        Raises::Never
    }

    /// How pfor batches the op ([`Batching`]): every kind reduces or scans the stacked
    /// value with its axes moved past the loop axis ([`ReduceOp::map_axes`]).
    pub fn batching(self) -> Batching {
        Batching::AxisMapped
    }

    /// Where the op is linear ([`Linearity`]): sum, mean and cumsum.
    pub fn linearity(self) -> Linearity {
        use ReduceKind::*;
        match self {
            Sum | Mean | CumSum => Linearity::Linear,
            _ => Linearity::NonLinear,
        }
    }

    /// Check the input dtype (shared by `infer` and `eval`).
    fn check_dtype(self, d: DType) -> Result<()> {
        use ReduceKind::*;
        let ok = match self {
            Mean | LogSumExp => d.is_float(),
            All | Any => d == DType::Bool,
            _ => d.is_numeric(),
        };
        if ok {
            return Ok(());
        }
        let want = match self {
            Mean | LogSumExp => "a float type (f32 or f64)",
            All | Any => "bool",
            _ => "a numeric type (f32, f64 or i64)",
        };
        Err(Error::dtype(self.name(), want, d))
    }
}

/// The attributes of an op, by shape.
enum Attrs<'a> {
    Axes(&'a [i64], bool),
    Arg(i64),
    Scan(i64, bool, bool),
}

impl ReduceOp {
    /// The kind.
    pub fn kind(&self) -> ReduceKind {
        match self {
            ReduceOp::Sum { .. } => ReduceKind::Sum,
            ReduceOp::Mean { .. } => ReduceKind::Mean,
            ReduceOp::Prod { .. } => ReduceKind::Prod,
            ReduceOp::Max { .. } => ReduceKind::Max,
            ReduceOp::Min { .. } => ReduceKind::Min,
            ReduceOp::All { .. } => ReduceKind::All,
            ReduceOp::Any { .. } => ReduceKind::Any,
            ReduceOp::LogSumExp { .. } => ReduceKind::LogSumExp,
            ReduceOp::ArgMax { .. } => ReduceKind::ArgMax,
            ReduceOp::ArgMin { .. } => ReduceKind::ArgMin,
            ReduceOp::CumSum { .. } => ReduceKind::CumSum,
            ReduceOp::CumProd { .. } => ReduceKind::CumProd,
        }
    }

    /// The op with every axis attribute mapped through `f` (the other attributes kept).
    pub fn map_axes(&self, f: &dyn Fn(i64) -> i64) -> ReduceOp {
        let mut op = self.clone();
        match &mut op {
            ReduceOp::Sum { axes, .. }
            | ReduceOp::Mean { axes, .. }
            | ReduceOp::Prod { axes, .. }
            | ReduceOp::Max { axes, .. }
            | ReduceOp::Min { axes, .. }
            | ReduceOp::All { axes, .. }
            | ReduceOp::Any { axes, .. }
            | ReduceOp::LogSumExp { axes, .. } => axes.iter_mut().for_each(|a| *a = f(*a)),
            ReduceOp::ArgMax { axis }
            | ReduceOp::ArgMin { axis }
            | ReduceOp::CumSum { axis, .. }
            | ReduceOp::CumProd { axis, .. } => *axis = f(*axis),
        }
        op
    }

    /// Build the axis-reduction op of `kind` (`None` for argmax/argmin/cumsum/cumprod).
    pub fn axes_op(kind: ReduceKind, axes: Vec<i64>, keep_dims: bool) -> Option<ReduceOp> {
        Some(match kind {
            ReduceKind::Sum => ReduceOp::Sum { axes, keep_dims },
            ReduceKind::Mean => ReduceOp::Mean { axes, keep_dims },
            ReduceKind::Prod => ReduceOp::Prod { axes, keep_dims },
            ReduceKind::Max => ReduceOp::Max { axes, keep_dims },
            ReduceKind::Min => ReduceOp::Min { axes, keep_dims },
            ReduceKind::All => ReduceOp::All { axes, keep_dims },
            ReduceKind::Any => ReduceOp::Any { axes, keep_dims },
            ReduceKind::LogSumExp => ReduceOp::LogSumExp { axes, keep_dims },
            _ => return None,
        })
    }

    fn attrs(&self) -> Attrs<'_> {
        match self {
            ReduceOp::Sum { axes, keep_dims }
            | ReduceOp::Mean { axes, keep_dims }
            | ReduceOp::Prod { axes, keep_dims }
            | ReduceOp::Max { axes, keep_dims }
            | ReduceOp::Min { axes, keep_dims }
            | ReduceOp::All { axes, keep_dims }
            | ReduceOp::Any { axes, keep_dims }
            | ReduceOp::LogSumExp { axes, keep_dims } => Attrs::Axes(axes, *keep_dims),
            ReduceOp::ArgMax { axis } | ReduceOp::ArgMin { axis } => Attrs::Arg(*axis),
            ReduceOp::CumSum { axis, exclusive, reverse } | ReduceOp::CumProd { axis, exclusive, reverse } => {
                Attrs::Scan(*axis, *exclusive, *reverse)
            }
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let k = self.kind();
        let op = k.name();
        expect_arity(op, inputs, 1)?;
        let t = &inputs[0];
        k.check_dtype(t.dtype)?;
        let dims = t.shape.dims();
        let out = match self.attrs() {
            Attrs::Axes(axes, keep) => {
                let mask = reduced_mask(op, axes, dims.len())?;
                let shape = dims.iter().zip(&mask).filter_map(|(d, &r)| match (r, keep) {
                    (false, _) => Some(d.clone()),
                    (true, true) => Some(Dim::Fixed(1)),
                    (true, false) => None,
                });
                TensorType::new(t.dtype, Shape::from_dims(shape))
            }
            Attrs::Arg(axis) => {
                let ax = norm_axis(op, axis, dims.len())?;
                if dims[ax] == Dim::Fixed(0) {
                    return Err(Error::shape(op, format!("axis {axis} of shape {} is empty", t.shape)));
                }
                let shape = dims.iter().enumerate().filter(|(i, _)| *i != ax).map(|(_, d)| d.clone());
                TensorType::new(DType::I64, Shape::from_dims(shape))
            }
            Attrs::Scan(axis, _, _) => {
                norm_axis(op, axis, dims.len())?;
                t.clone()
            }
        };
        Ok(vec![out])
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let k = self.kind();
        let op = k.name();
        expect_arity(op, &inputs, 1)?;
        let x = inputs.into_iter().next().ok_or_else(|| Error::arity(op, "1", 0))?;
        k.check_dtype(x.dtype())?;
        let out = match self.attrs() {
            Attrs::Axes(axes, keep) => eval_axes(k, axes, keep, x)?,
            Attrs::Arg(axis) => eval_arg(k, axis, &x)?,
            Attrs::Scan(axis, exclusive, reverse) => eval_scan(k, axis, exclusive, reverse, x)?,
        };
        Ok(vec![out])
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        match self.attrs() {
            Attrs::Axes(axes, keep) => write!(f, "{name}{{axes={axes:?}, keep_dims={keep}}}"),
            Attrs::Arg(axis) => write!(f, "{name}{{axis={axis}}}"),
            Attrs::Scan(axis, e, r) => write!(f, "{name}{{axis={axis}, exclusive={e}, reverse={r}}}"),
        }
    }
}

/// Which axes of a rank-`rank` tensor `axes` reduces; errors on out-of-range or repeated axes.
fn reduced_mask(op: &str, axes: &[i64], rank: usize) -> Result<Vec<bool>> {
    let mut mask = vec![false; rank];
    for &a in axes {
        let ax = norm_axis(op, a, rank)?;
        if mask[ax] {
            return Err(Error::shape(op, format!("axis {a} repeated in axes {axes:?} (rank {rank})")));
        }
        mask[ax] = true;
    }
    Ok(mask)
}

// ---------------------------------------------------------------------------------------------
// Element arithmetic

/// Numeric element operations (i64 arithmetic wraps; float max/min propagate NaN).
trait Num: Element + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    /// Identity of max.
    const LOWEST: Self;
    /// Identity of min.
    const HIGHEST: Self;
    fn add(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn is_nan(self) -> bool;
    fn max_nan(self, b: Self) -> Self {
        if b > self || b.is_nan() { b } else { self }
    }
    fn min_nan(self, b: Self) -> Self {
        if b < self || b.is_nan() { b } else { self }
    }
}

/// Float element operations.
trait Float: Num {
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn is_finite(self) -> bool;
    fn sub(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
}

macro_rules! impl_float {
    ($t:ident) => {
        impl Num for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const LOWEST: $t = $t::NEG_INFINITY;
            const HIGHEST: $t = $t::INFINITY;
            fn add(self, b: $t) -> $t {
                self + b
            }
            fn mul(self, b: $t) -> $t {
                self * b
            }
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
        }
        impl Float for $t {
            fn exp(self) -> $t {
                $t::exp(self)
            }
            fn ln(self) -> $t {
                $t::ln(self)
            }
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
            fn sub(self, b: $t) -> $t {
                self - b
            }
            fn div(self, b: $t) -> $t {
                self / b
            }
        }
    };
}
impl_float!(f32);
impl_float!(f64);

impl Num for i64 {
    const ZERO: i64 = 0;
    const ONE: i64 = 1;
    const LOWEST: i64 = i64::MIN;
    const HIGHEST: i64 = i64::MAX;
    fn add(self, b: i64) -> i64 {
        self.wrapping_add(b)
    }
    fn mul(self, b: i64) -> i64 {
        self.wrapping_mul(b)
    }
    fn is_nan(self) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels over a contiguous [outer, r, inner] view

/// A contiguous buffer viewed as `[outer, r, inner]`, reduced or scanned over `r`.
#[derive(Clone, Copy, Debug)]
struct Block {
    outer: usize,
    r: usize,
    inner: usize,
}

/// Chunk length for splitting one long contiguous reduction across threads.
const PAR_CHUNK: usize = 1 << 15;

/// Run `f(o, row)` on each `inner`-long row of `out` (one row per outer index), in parallel
/// when the input holds at least `PAR_THRESHOLD` elements.
fn for_rows<A: Send>(out: &mut [A], inner: usize, work: usize, f: impl Fn(usize, &mut [A]) + Sync) {
    if out.is_empty() || inner == 0 {
        return;
    }
    if work >= PAR_THRESHOLD && out.len() / inner > 1 {
        out.par_chunks_mut(inner).enumerate().for_each(|(o, row)| f(o, row));
    } else {
        out.chunks_mut(inner).enumerate().for_each(|(o, row)| f(o, row));
    }
}

/// Sequential fold of a slice with four accumulators (more ILP, smaller rounding error).
fn fold_seq<T: Copy>(s: &[T], id: T, op: &impl Fn(T, T) -> T) -> T {
    let mut acc = [id; 4];
    let chunks = s.chunks_exact(4);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..4 {
            acc[l] = op(acc[l], c[l]);
        }
    }
    let mut a = op(op(acc[0], acc[1]), op(acc[2], acc[3]));
    for &v in rest {
        a = op(a, v);
    }
    a
}

/// Fold of a contiguous slice; long slices are split in fixed chunks across threads.
fn fold_slice<T: Copy + Send + Sync>(s: &[T], id: T, op: &(impl Fn(T, T) -> T + Sync)) -> T {
    if s.len() < PAR_THRESHOLD {
        return fold_seq(s, id, op);
    }
    let parts: Vec<T> = s.par_chunks(PAR_CHUNK).map(|c| fold_seq(c, id, op)).collect();
    fold_seq(&parts, id, op)
}

/// Reduce `x` viewed as `[outer, r, inner]` over `r` with the monoid `(id, op)`.
fn fold_block<T: Copy + Send + Sync>(x: &[T], b: Block, id: T, op: impl Fn(T, T) -> T + Sync) -> Vec<T> {
    let mut out = vec![id; b.outer * b.inner];
    for_rows(&mut out, b.inner, x.len(), |o, row| {
        let base = o * b.r * b.inner;
        if b.inner == 1 {
            row[0] = fold_slice(&x[base..base + b.r], id, &op);
        } else {
            for j in 0..b.r {
                let src = &x[base + j * b.inner..base + (j + 1) * b.inner];
                for (a, &v) in row.iter_mut().zip(src) {
                    *a = op(*a, v);
                }
            }
        }
    });
    out
}

/// `m + ln Σ exp(x - m)` over `r`, with `m` the (NaN-propagating) max.
fn logsumexp_block<T: Float>(x: &[T], b: Block) -> Vec<T> {
    let m = fold_block(x, b, T::LOWEST, T::max_nan);
    let mut out = vec![T::ZERO; b.outer * b.inner];
    for_rows(&mut out, b.inner, x.len(), |o, row| {
        let base = o * b.r * b.inner;
        let mrow = &m[o * b.inner..(o + 1) * b.inner];
        for j in 0..b.r {
            let src = &x[base + j * b.inner..base + (j + 1) * b.inner];
            for ((a, &mi), &v) in row.iter_mut().zip(mrow).zip(src) {
                *a = a.add(v.sub(mi).exp());
            }
        }
        // A non-finite max (empty or all -inf, +inf, NaN) is the answer; the sum is then junk.
        for (a, &mi) in row.iter_mut().zip(mrow) {
            *a = if mi.is_finite() { mi.add(a.ln()) } else { mi };
        }
    });
    out
}

/// Index of the first best element over `r` (`better(v, best)`: v strictly better).
fn arg_block<T: Num>(x: &[T], b: Block, better: impl Fn(T, T) -> bool + Sync) -> Vec<i64> {
    let mut out = vec![0i64; b.outer * b.inner];
    for_rows(&mut out, b.inner, x.len(), |o, row| {
        let base = o * b.r * b.inner;
        for j in 1..b.r {
            let src = &x[base + j * b.inner..base + (j + 1) * b.inner];
            for (i, (idx, &v)) in row.iter_mut().zip(src).enumerate() {
                let best = x[base + *idx as usize * b.inner + i];
                if better(v, best) {
                    *idx = j as i64;
                }
            }
        }
    });
    out
}

/// In-place scan over `r` of `x` viewed as `[outer, r, inner]`.
fn scan_block<T: Copy + Send + Sync>(
    x: &mut [T],
    b: Block,
    id: T,
    op: impl Fn(T, T) -> T + Sync,
    exclusive: bool,
    reverse: bool,
) {
    let (r, inner) = (b.r, b.inner);
    let len = r * inner;
    if len == 0 || b.outer == 0 {
        return;
    }
    let run = |slab: &mut [T]| {
        // Inclusive scan, row by row (row j combines with the already scanned neighbour).
        for step in 1..r {
            let (j, prev) = if reverse { (r - 1 - step, r - step) } else { (step, step - 1) };
            let (lo, hi) = slab.split_at_mut(j.max(prev) * inner);
            let (dst, src) =
                if j > prev { (&mut hi[..inner], &lo[prev * inner..]) } else { (&mut lo[j * inner..], &hi[..inner]) };
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = op(s, *d);
            }
        }
        if exclusive {
            // Shift one row away from the scan start and put the identity there.
            if reverse {
                slab.copy_within(inner.., 0);
                slab[len - inner..].fill(id);
            } else {
                slab.copy_within(..len - inner, inner);
                slab[..inner].fill(id);
            }
        }
    };
    if x.len() >= PAR_THRESHOLD && b.outer > 1 {
        x.par_chunks_mut(len).for_each(run);
    } else {
        x.chunks_mut(len).for_each(run);
    }
}

// ---------------------------------------------------------------------------------------------
// Eval

fn contiguous<'a, T>(op: &str, a: &'a CowArray<'_, T, IxDyn>) -> Result<&'a [T]> {
    a.as_slice().ok_or_else(|| Error::shape(op, "internal: buffer is not contiguous"))
}

/// A standard-layout view of `a` as `[outer, r, inner]` with the masked axes in `r`: no copy
/// when the reduced axes form one block (size-1 axes may sit inside it), otherwise the
/// reduced axes are permuted to the end (one copy).
fn blocked<'a, T: Element>(a: &'a ArcArray<T, IxDyn>, mask: &[bool]) -> (CowArray<'a, T, IxDyn>, Block) {
    let shape = a.shape();
    let first = mask.iter().position(|&m| m).unwrap_or(0);
    let last = mask.iter().rposition(|&m| m).unwrap_or(0);
    let r: usize = shape.iter().zip(mask).filter(|(_, m)| **m).map(|(d, _)| *d).product();
    if (first..=last).all(|i| mask[i] || shape[i] == 1) {
        let outer = shape[..first].iter().product();
        let inner = shape[last + 1..].iter().product();
        return (a.as_standard_layout(), Block { outer, r, inner });
    }
    let mut perm: Vec<usize> = (0..shape.len()).filter(|&i| !mask[i]).collect();
    perm.extend((0..shape.len()).filter(|&i| mask[i]));
    let outer = perm.iter().take_while(|&&i| !mask[i]).map(|&i| shape[i]).product();
    let v = a.view().permuted_axes(IxDyn(&perm)).as_standard_layout().into_owned();
    (CowArray::from(v), Block { outer, r, inner: 1 })
}

fn eval_axes(k: ReduceKind, axes: &[i64], keep: bool, x: Tensor) -> Result<Tensor> {
    let op = k.name();
    let shape = x.shape().to_vec();
    let mask = reduced_mask(op, axes, shape.len())?;
    if !mask.contains(&true) {
        return Ok(x); // empty axes: identity
    }
    let out_shape: Vec<usize> =
        shape.iter().zip(&mask).filter(|(_, m)| keep || !**m).map(|(&d, &m)| if m { 1 } else { d }).collect();
    let dt = x.dtype();
    let bad = || Error::dtype(op, "a supported type", dt);
    match k {
        ReduceKind::Sum | ReduceKind::Prod | ReduceKind::Max | ReduceKind::Min => {
            crate::dispatch_numeric!(dt, T => {
                let (c, b) = blocked(x.array::<T>()?, &mask);
                let s = contiguous(op, &c)?;
                let v = match k {
                    ReduceKind::Sum => fold_block(s, b, T::ZERO, T::add),
                    ReduceKind::Prod => fold_block(s, b, T::ONE, T::mul),
                    ReduceKind::Max => fold_block(s, b, T::LOWEST, T::max_nan),
                    _ => fold_block(s, b, T::HIGHEST, T::min_nan),
                };
                Tensor::from_vec(&out_shape, v)
            }, _ => Err(bad()))
        }
        ReduceKind::Mean | ReduceKind::LogSumExp => {
            crate::dispatch_float!(dt, T => {
                let (c, b) = blocked(x.array::<T>()?, &mask);
                let s = contiguous(op, &c)?;
                let v = if k == ReduceKind::Mean {
                    let n = T::from_f64(b.r as f64);
                    let mut v = fold_block(s, b, T::ZERO, T::add);
                    v.iter_mut().for_each(|e| *e = e.div(n));
                    v
                } else {
                    logsumexp_block(s, b)
                };
                Tensor::from_vec(&out_shape, v)
            }, _ => Err(bad()))
        }
        ReduceKind::All | ReduceKind::Any => {
            let (c, b) = blocked(x.array::<bool>()?, &mask);
            let s = contiguous(op, &c)?;
            let v = if k == ReduceKind::All {
                fold_block(s, b, true, |a, v| a && v)
            } else {
                fold_block(s, b, false, |a, v| a || v)
            };
            Tensor::from_vec(&out_shape, v)
        }
        _ => Err(Error::unsupported(op, "not an axis reduction")),
    }
}

fn split_at_axis(shape: &[usize], ax: usize) -> Block {
    Block { outer: shape[..ax].iter().product(), r: shape[ax], inner: shape[ax + 1..].iter().product() }
}

fn eval_arg(k: ReduceKind, axis: i64, x: &Tensor) -> Result<Tensor> {
    let op = k.name();
    let shape = x.shape();
    let ax = norm_axis(op, axis, shape.len())?;
    if shape[ax] == 0 {
        return Err(Error::shape(op, format!("axis {axis} of shape {shape:?} is empty")));
    }
    let out_shape: Vec<usize> = shape.iter().enumerate().filter(|(i, _)| *i != ax).map(|(_, &d)| d).collect();
    let b = split_at_axis(shape, ax);
    let is_max = k == ReduceKind::ArgMax;
    crate::dispatch_numeric!(x.dtype(), T => {
        let c = x.array::<T>()?.as_standard_layout();
        let s = contiguous(op, &c)?;
        // NaN beats everything (first NaN wins); otherwise strictly better replaces.
        let v = if is_max {
            arg_block(s, b, |v: T, best: T| !best.is_nan() && (v.is_nan() || v > best))
        } else {
            arg_block(s, b, |v: T, best: T| !best.is_nan() && (v.is_nan() || v < best))
        };
        Tensor::from_vec(&out_shape, v)
    }, _ => Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", x.dtype())))
}

fn eval_scan(k: ReduceKind, axis: i64, exclusive: bool, reverse: bool, x: Tensor) -> Result<Tensor> {
    let op = k.name();
    let ax = norm_axis(op, axis, x.rank())?;
    let b = split_at_axis(x.shape(), ax);
    let dt = x.dtype();
    crate::dispatch_numeric!(dt, T => {
        let mut a = x.into_array::<T>()?;
        if !a.is_standard_layout() {
            a = a.as_standard_layout().into_owned().into_shared();
        }
        // Copy-on-write: in place when this is the only reference to the buffer.
        let s = a.as_slice_mut().ok_or_else(|| Error::shape(op, "internal: buffer is not contiguous"))?;
        if k == ReduceKind::CumSum {
            scan_block(s, b, T::ZERO, T::add, exclusive, reverse);
        } else {
            scan_block(s, b, T::ONE, T::mul, exclusive, reverse);
        }
        Ok(T::wrap(a))
    }, _ => Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", dt)))
}

// ---------------------------------------------------------------------------------------------
// Builders

macro_rules! axes_builders {
    ($($fn_name:ident => $variant:ident),* $(,)?) => {
        impl Graph {
            $(
                #[doc = concat!("`", stringify!($fn_name), "` over `axes`: `None` = every axis, `Some(axes)` = ",
                    "those axes (negative axes count from the end; `Some(&[])` = identity); `keep_dims` keeps ",
                    "reduced dims as size 1.")]
                pub fn $fn_name(&mut self, x: ValueId, axes: Option<&[i64]>, keep_dims: bool) -> Result<ValueId> {
                    let axes = self.reduction_axes(x, axes)?;
                    self.add_op(Op::Reduce(ReduceOp::$variant { axes, keep_dims }), &[x])
                }
            )*
        }
    };
}

axes_builders! {
    reduce_sum => Sum, reduce_mean => Mean, reduce_prod => Prod, reduce_max => Max,
    reduce_min => Min, reduce_all => All, reduce_any => Any, reduce_logsumexp => LogSumExp,
}

impl Graph {
    /// The explicit axes of a reduction of `x`: `None` = every axis of its (static) rank.
    fn reduction_axes(&self, x: ValueId, axes: Option<&[i64]>) -> Result<Vec<i64>> {
        Ok(match axes {
            Some(a) => a.to_vec(),
            None => (0..self.value_type(x)?.rank() as i64).collect(),
        })
    }
    /// Sum over every axis (a scalar): `reduce_sum(x, None, false)`.
    pub fn sum_all(&mut self, x: ValueId) -> Result<ValueId> {
        self.reduce_sum(x, None, false)
    }
    /// Mean over every axis (a scalar; float only): `reduce_mean(x, None, false)`.
    pub fn mean_all(&mut self, x: ValueId) -> Result<ValueId> {
        self.reduce_mean(x, None, false)
    }
    /// Index (i64) of the maximum along `axis`, which is removed. Ties → smallest index;
    /// the first NaN wins.
    pub fn argmax(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::ArgMax { axis }), &[x])
    }
    /// Index (i64) of the minimum along `axis`, which is removed. Ties → smallest index;
    /// the first NaN wins.
    pub fn argmin(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::ArgMin { axis }), &[x])
    }
    /// Cumulative sum along `axis` (`exclusive`: first output 0; `reverse`: from the end).
    pub fn cumsum(&mut self, x: ValueId, axis: i64, exclusive: bool, reverse: bool) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::CumSum { axis, exclusive, reverse }), &[x])
    }
    /// Cumulative product along `axis` (`exclusive`: first output 1; `reverse`: from the end).
    pub fn cumprod(&mut self, x: ValueId, axis: i64, exclusive: bool, reverse: bool) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::CumProd { axis, exclusive, reverse }), &[x])
    }
}
