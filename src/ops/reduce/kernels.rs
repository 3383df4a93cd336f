//! Kernels of the reduce family: the element arithmetic, the block kernels over a
//! contiguous `[outer, r, inner]` view, and the evaluation of each attribute form
//! ([`ReduceForm`](super::ReduceForm)).
//!
//! Invariants: every kernel reads a standard-layout buffer; an axis reduction that reduces
//! nothing runs with `r = 1` (each element its own group), so a kind's value over one
//! element is its kernel's, not a special case; long contiguous folds use four accumulators
//! and a fixed chunking across threads, so results do not depend on the thread count.
//!
//! A new axis reduction's kernel is ONE arm in the kernel of its dtype class
//! ([`numeric_kernel`], [`float_kernel`] or [`logical_kernel`]).

use ndarray::{ArcArray, CowArray, IxDyn};
use rayon::prelude::*;

use super::ReduceKind;
use crate::error::{Error, Result};
use crate::ops::norm_axis;
use crate::ops::unary::{DtypeRule, PAR_THRESHOLD};
use crate::tensor::layout::{standard_array, standard_cow};
use crate::tensor::{Element, Tensor};

/// Which axes of a rank-`rank` tensor `axes` reduces; errors on out-of-range or repeated axes.
pub(super) fn reduced_mask(op: &str, axes: &[i64], rank: usize) -> Result<Vec<bool>> {
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

/// `finish(Σ_r term(x, c), c)` over `r`, with `c` one center per output element (a first
/// pass's result: the max of logsumexp, the mean of variance).
fn centered_fold<T: Float>(
    x: &[T],
    b: Block,
    c: &[T],
    term: impl Fn(T, T) -> T + Sync,
    finish: impl Fn(T, T) -> T + Sync,
) -> Vec<T> {
    let mut out = vec![T::ZERO; b.outer * b.inner];
    for_rows(&mut out, b.inner, x.len(), |o, row| {
        let base = o * b.r * b.inner;
        let crow = &c[o * b.inner..(o + 1) * b.inner];
        for j in 0..b.r {
            let src = &x[base + j * b.inner..base + (j + 1) * b.inner];
            for ((a, &ci), &v) in row.iter_mut().zip(crow).zip(src) {
                *a = a.add(term(v, ci));
            }
        }
        for (a, &ci) in row.iter_mut().zip(crow) {
            *a = finish(*a, ci);
        }
    });
    out
}

/// `m + ln Σ exp(x - m)` over `r`, with `m` the (NaN-propagating) max.
fn logsumexp_block<T: Float>(x: &[T], b: Block) -> Vec<T> {
    let m = fold_block(x, b, T::LOWEST, T::max_nan);
    // A non-finite max (empty or all -inf, +inf, NaN) is the answer; the sum is then junk.
    centered_fold(x, b, &m, |v, m| v.sub(m).exp(), |s, m| if m.is_finite() { m.add(s.ln()) } else { m })
}

/// Σ x / r over `r` (NaN when `r = 0`).
fn mean_block<T: Float>(x: &[T], b: Block) -> Vec<T> {
    let n = T::from_f64(b.r as f64);
    let mut v = fold_block(x, b, T::ZERO, T::add);
    v.iter_mut().for_each(|e| *e = e.div(n));
    v
}

/// The population variance `Σ (x - mean)² / r` over `r`, in two passes (the mean first, so
/// large offsets do not cancel); NaN when `r = 0`.
fn variance_block<T: Float>(x: &[T], b: Block) -> Vec<T> {
    let m = mean_block(x, b);
    let n = T::from_f64(b.r as f64);
    centered_fold(x, b, &m, |v, m| v.sub(m).mul(v.sub(m)), |s, _| s.div(n))
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
/// when the reduced axes form one block (size-1 axes may sit inside it) or there are none
/// (`r = 1`), otherwise the reduced axes are permuted to the end (one copy).
fn blocked<'a, T: Element>(a: &'a ArcArray<T, IxDyn>, mask: &[bool]) -> (CowArray<'a, T, IxDyn>, Block) {
    let shape = a.shape();
    let (Some(first), Some(last)) = (mask.iter().position(|&m| m), mask.iter().rposition(|&m| m)) else {
        // Nothing reduced: every element is its own group.
        return (standard_cow(a.view()), Block { outer: a.len(), r: 1, inner: 1 });
    };
    let r: usize = shape.iter().zip(mask).filter(|(_, m)| **m).map(|(d, _)| *d).product();
    if (first..=last).all(|i| mask[i] || shape[i] == 1) {
        let outer = shape[..first].iter().product();
        let inner = shape[last + 1..].iter().product();
        return (standard_cow(a.view()), Block { outer, r, inner });
    }
    let mut perm: Vec<usize> = (0..shape.len()).filter(|&i| !mask[i]).collect();
    perm.extend((0..shape.len()).filter(|&i| mask[i]));
    let outer = perm.iter().take_while(|&&i| !mask[i]).map(|&i| shape[i]).product();
    let v = standard_array(&a.view().permuted_axes(IxDyn(&perm)));
    (CowArray::from(v), Block { outer, r, inner: 1 })
}

pub(super) fn eval_axes(k: ReduceKind, axes: &[i64], keep: bool, x: Tensor) -> Result<Tensor> {
    let op = k.name();
    let shape = x.shape().to_vec();
    let mask = reduced_mask(op, axes, shape.len())?;
    let out_shape: Vec<usize> =
        shape.iter().zip(&mask).filter(|(_, m)| keep || !**m).map(|(&d, &m)| if m { 1 } else { d }).collect();
    let dt = x.dtype();
    let bad = || Error::dtype(op, "a supported type", dt);
    match k.dtype_rule() {
        DtypeRule::Numeric => crate::dispatch_numeric!(dt, T => {
            let (c, b) = blocked(x.array::<T>()?, &mask);
            Tensor::from_vec(&out_shape, numeric_kernel(k, contiguous(op, &c)?, b)?)
        }, _ => Err(bad())),
        DtypeRule::Float => crate::dispatch_float!(dt, T => {
            let (c, b) = blocked(x.array::<T>()?, &mask);
            Tensor::from_vec(&out_shape, float_kernel(k, contiguous(op, &c)?, b)?)
        }, _ => Err(bad())),
        DtypeRule::Logical | DtypeRule::FloatPredicate => {
            let (c, b) = blocked(x.array::<bool>()?, &mask);
            Tensor::from_vec(&out_shape, logical_kernel(k, contiguous(op, &c)?, b)?)
        }
    }
}

/// The kinds that no kernel of this dtype class computes (a kind row whose class has no arm).
fn no_kernel<T>(k: ReduceKind) -> Result<Vec<T>> {
    Err(Error::unsupported(k.name(), "internal: no axis-reduction kernel for this kind"))
}

/// Kernels of the numeric axis reductions (f32, f64, i64), over `r` of `x` seen as `b`.
fn numeric_kernel<T: Num>(k: ReduceKind, x: &[T], b: Block) -> Result<Vec<T>> {
    Ok(match k {
        ReduceKind::Sum => fold_block(x, b, T::ZERO, T::add),
        ReduceKind::Prod => fold_block(x, b, T::ONE, T::mul),
        ReduceKind::Max => fold_block(x, b, T::LOWEST, T::max_nan),
        ReduceKind::Min => fold_block(x, b, T::HIGHEST, T::min_nan),
        _ => return no_kernel(k),
    })
}

/// Kernels of the float-only axis reductions (f32, f64).
fn float_kernel<T: Float>(k: ReduceKind, x: &[T], b: Block) -> Result<Vec<T>> {
    Ok(match k {
        ReduceKind::Mean => mean_block(x, b),
        ReduceKind::LogSumExp => logsumexp_block(x, b),
        ReduceKind::Variance => variance_block(x, b),
        _ => return no_kernel(k),
    })
}

/// Kernels of the bool axis reductions.
fn logical_kernel(k: ReduceKind, x: &[bool], b: Block) -> Result<Vec<bool>> {
    Ok(match k {
        ReduceKind::All => fold_block(x, b, true, |a, v| a && v),
        ReduceKind::Any => fold_block(x, b, false, |a, v| a || v),
        _ => return no_kernel(k),
    })
}

fn split_at_axis(shape: &[usize], ax: usize) -> Block {
    Block { outer: shape[..ax].iter().product(), r: shape[ax], inner: shape[ax + 1..].iter().product() }
}

pub(super) fn eval_arg(k: ReduceKind, axis: i64, x: &Tensor) -> Result<Tensor> {
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
        let c = standard_cow(x.array::<T>()?.view());
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

pub(super) fn eval_scan(k: ReduceKind, axis: i64, exclusive: bool, reverse: bool, x: Tensor) -> Result<Tensor> {
    let op = k.name();
    let ax = norm_axis(op, axis, x.rank())?;
    let b = split_at_axis(x.shape(), ax);
    let dt = x.dtype();
    crate::dispatch_numeric!(dt, T => {
        let mut a = x.into_array::<T>()?;
        if !a.is_standard_layout() {
            a = standard_array(&a.view()).into_shared();
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
