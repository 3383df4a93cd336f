//! The indexing family: gathers, scatters, unsorted segment reductions,
//! `dynamic_update_slice`, `top_k` and `nonzero` (TensorFlow semantics).
//!
//! Invariants and semantics:
//! - Every index input (indices, segment ids, start offsets) is `i64`. An index outside its
//!   bound is [`Error::IndexOutOfRange`] naming the op, the index and the exclusive bound,
//!   raised at run time: indices are never clamped or wrapped, and negative indices are
//!   errors — except segment ids, where a negative id DROPS its row (TF).
//! - `nd` index tensors have shape `[..., K]`; the index depth `K` (last dim) must be static.
//! - Duplicates: `scatter_nd` and `tensor_scatter_add` add them; `tensor_scatter_update`
//!   applies updates in row-major order of the indices, so the LAST one wins.
//! - Empty segments hold the reduction identity: sum 0, max `-inf` (`i64::MIN`),
//!   min `+inf` (`i64::MAX`), prod 1. NaN propagates through max/min; i64 sums and
//!   products wrap on overflow.
//! - `top_k` works along the last axis: descending, NaN above every number, ties lower index
//!   first. `sorted = false` returns the same k elements in ascending index order.
//! - `nonzero` returns i64 `[num_true, rank]` row-major coordinates (first dim dynamic);
//!   with `batch_dims = b` it works per batch element (`[B.., num_true, rank - b]`, the
//!   coordinates within the element) and every element must have the same number of
//!   nonzero elements, else a shape error at run time (the result would not be
//!   rectangular) — pfor's form of `nonzero` (see `nonzero.rs`).
//! - `eval` re-runs `infer` on the concrete input types, so every shape rule (including dims
//!   that were dynamic at build time) is checked before a kernel runs.
//! - Kernels work on contiguous row-major buffers (inputs in another layout are copied to
//!   standard layout first) and copy whole inner rows with slice copies;
//!   `tensor_scatter_*` and `dynamic_update_slice` write into the operand's buffer in place
//!   when they hold its only reference.

// The size of the crate-wide `Error` (not this file) triggers this lint on every fn.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use ndarray::{ArcArray, IxDyn, Slice};

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::kernels::alloc::{checked_len, try_filled, try_vec};
use crate::ops::{Op, Raises, expect_arity, expect_dtype, norm_axis};
use crate::tensor::{DType, Dim, Element, Shape, Tensor, TensorType};
use crate::{dispatch, dispatch_numeric};

mod builders;
mod nonzero;

/// Ops of the indexing family. All index inputs are i64.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexOp {
    /// `gather(params, indices)`: output `params[:axis] + indices[batch_dims:] + params[axis+1:]`;
    /// the first `batch_dims` dims of params and indices must be equal (`batch_dims <= axis`).
    Gather {
        /// Gathered axis of params (negative counts from the end).
        axis: i64,
        /// Leading dims shared by params and indices.
        batch_dims: usize,
    },
    /// `gather_nd(params, indices[..., K])`: output `indices[:-1] + params[batch_dims+K:]`.
    GatherNd {
        /// Leading dims shared by params and indices.
        batch_dims: usize,
    },
    /// `scatter_nd(indices[..., K], updates)` into zeros of `shape`; duplicates add.
    /// `updates` must have shape `indices[:-1] + shape[K:]`.
    ScatterNd {
        /// The output shape.
        shape: Vec<usize>,
    },
    /// `tensor_scatter_update(tensor, indices[..., K], updates)`: a copy of `tensor` with the
    /// indexed slices replaced (duplicates: last wins).
    TensorScatterUpdate,
    /// `tensor_scatter_add(tensor, indices[..., K], updates)`: indexed slices added to.
    TensorScatterAdd,
    /// `unsorted_segment_sum(data, ids)`: output `[num_segments] + data[ids.rank:]`.
    UnsortedSegmentSum {
        /// Number of output segments.
        num_segments: usize,
    },
    /// Segment max (empty segments: lowest value).
    UnsortedSegmentMax {
        /// Number of output segments.
        num_segments: usize,
    },
    /// Segment min (empty segments: highest value).
    UnsortedSegmentMin {
        /// Number of output segments.
        num_segments: usize,
    },
    /// Segment product (empty segments: 1).
    UnsortedSegmentProd {
        /// Number of output segments.
        num_segments: usize,
    },
    /// `dynamic_update_slice(operand, update, start[rank])`: `update` written at `start`.
    DynamicUpdateSlice,
    /// `top_k(x)` along the last axis: outputs (values, i64 indices) of shape `[..., k]`.
    TopK {
        /// How many elements per row.
        k: usize,
        /// Descending order if true, ascending index order otherwise.
        sorted: bool,
    },
    /// `nonzero(x)`: i64 `[num_true, rank]` coordinates of nonzero / true elements; with
    /// batch dims, `[B.., num_true, rank - batch_dims]` per batch element (equal counts).
    NonZero {
        /// Leading dims that index independent elements (0: the whole tensor).
        batch_dims: usize,
    },
}

macro_rules! index_kinds {
    ($($variant:ident => $name:literal,)*) => {
        /// Kinds of the indexing family.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum IndexKind { $(#[doc = $name] $variant,)* }
        impl IndexKind {
            /// Every kind.
            pub const ALL: &'static [IndexKind] = &[$(IndexKind::$variant,)*];
            /// The op name.
            pub fn name(self) -> &'static str { match self { $(IndexKind::$variant => $name,)* } }
        }
    };
}

index_kinds! {
    Gather => "gather",
    GatherNd => "gather_nd",
    ScatterNd => "scatter_nd",
    TensorScatterUpdate => "tensor_scatter_update",
    TensorScatterAdd => "tensor_scatter_add",
    UnsortedSegmentSum => "unsorted_segment_sum",
    UnsortedSegmentMax => "unsorted_segment_max",
    UnsortedSegmentMin => "unsorted_segment_min",
    UnsortedSegmentProd => "unsorted_segment_prod",
    DynamicUpdateSlice => "dynamic_update_slice",
    TopK => "top_k",
    NonZero => "nonzero",
}

impl IndexKind {
    /// Which inputs' values can make the op fail, or set its result's shape ([`Raises`]):
    /// every index input (out of range), and the input of `nonzero` (its row count);
    /// `top_k` never fails on values.
    pub fn raises(self) -> Raises {
        use IndexKind::*;
        match self {
            Gather | GatherNd | TensorScatterUpdate | TensorScatterAdd => Raises::On(&[1]),
            UnsortedSegmentSum | UnsortedSegmentMax | UnsortedSegmentMin | UnsortedSegmentProd => Raises::On(&[1]),
            ScatterNd | NonZero => Raises::On(&[0]),
            DynamicUpdateSlice => Raises::On(&[2]),
            TopK => Raises::Never,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Seg {
    Sum,
    Max,
    Min,
    Prod,
}

impl IndexOp {
    /// The kind.
    pub fn kind(&self) -> IndexKind {
        match self {
            IndexOp::Gather { .. } => IndexKind::Gather,
            IndexOp::GatherNd { .. } => IndexKind::GatherNd,
            IndexOp::ScatterNd { .. } => IndexKind::ScatterNd,
            IndexOp::TensorScatterUpdate => IndexKind::TensorScatterUpdate,
            IndexOp::TensorScatterAdd => IndexKind::TensorScatterAdd,
            IndexOp::UnsortedSegmentSum { .. } => IndexKind::UnsortedSegmentSum,
            IndexOp::UnsortedSegmentMax { .. } => IndexKind::UnsortedSegmentMax,
            IndexOp::UnsortedSegmentMin { .. } => IndexKind::UnsortedSegmentMin,
            IndexOp::UnsortedSegmentProd { .. } => IndexKind::UnsortedSegmentProd,
            IndexOp::DynamicUpdateSlice => IndexKind::DynamicUpdateSlice,
            IndexOp::TopK { .. } => IndexKind::TopK,
            IndexOp::NonZero { .. } => IndexKind::NonZero,
        }
    }

    fn segment(&self) -> Option<(Seg, usize)> {
        match *self {
            IndexOp::UnsortedSegmentSum { num_segments } => Some((Seg::Sum, num_segments)),
            IndexOp::UnsortedSegmentMax { num_segments } => Some((Seg::Max, num_segments)),
            IndexOp::UnsortedSegmentMin { num_segments } => Some((Seg::Min, num_segments)),
            IndexOp::UnsortedSegmentProd { num_segments } => Some((Seg::Prod, num_segments)),
            _ => None,
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        if let Some((_, n)) = self.segment() {
            return infer_segment(op, inputs, n);
        }
        match self {
            IndexOp::Gather { axis, batch_dims } => infer_gather(op, inputs, *axis, *batch_dims),
            IndexOp::GatherNd { batch_dims } => infer_gather_nd(op, inputs, *batch_dims),
            IndexOp::ScatterNd { shape } => infer_scatter_nd(op, inputs, shape),
            IndexOp::TensorScatterUpdate => infer_tensor_scatter(op, inputs, false),
            IndexOp::TensorScatterAdd => infer_tensor_scatter(op, inputs, true),
            IndexOp::DynamicUpdateSlice => infer_dynamic_update_slice(op, inputs),
            IndexOp::TopK { k, .. } => infer_top_k(op, inputs, *k),
            IndexOp::NonZero { batch_dims } => {
                expect_arity(op, inputs, 1)?;
                nonzero::infer(op, &inputs[0], *batch_dims)
            }
            _ => Err(Error::unsupported(op, "not an indexing op")),
        }
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        let types: Vec<TensorType> = inputs.iter().map(Tensor::tensor_type).collect();
        let out_types = self.infer(&types)?;
        let out_shape: Vec<usize> = out_types[0].shape.dims().iter().map(|d| d.value().unwrap_or(0)).collect();
        if let Some((seg, n)) = self.segment() {
            let [data, ids] = take::<2>(op, inputs)?;
            let ids = contiguous(ids.array::<i64>()?);
            return Ok(vec![dispatch_numeric!(data.dtype(), T => {
                segment_kernel::<T>(op, data.array::<T>()?, &ids, n, seg, &out_shape)?
            }, _ => return Err(Error::dtype(op, NUMERIC, data.dtype())))]);
        }
        let out = match self {
            IndexOp::Gather { axis, batch_dims } => {
                let [p, i] = take::<2>(op, inputs)?;
                let ax = norm_axis(op, *axis, p.rank())?;
                let idx = contiguous(i.array::<i64>()?);
                dispatch!(&p, a => gather_kernel(op, a, &idx, ax, *batch_dims, &out_shape)?)
            }
            IndexOp::GatherNd { batch_dims } => {
                let [p, i] = take::<2>(op, inputs)?;
                let idx = contiguous(i.array::<i64>()?);
                dispatch!(&p, a => gather_nd_kernel(op, a, &idx, i.shape(), *batch_dims, &out_shape)?)
            }
            IndexOp::ScatterNd { shape } => {
                let [i, u] = take::<2>(op, inputs)?;
                let (n, k) = index_rows(i.shape());
                let idx = contiguous(i.array::<i64>()?);
                let offs = nd_offsets(op, &idx, n, &shape[..k])?;
                dispatch_numeric!(u.dtype(), T => {
                    let mut out = try_filled(op, checked_len(op, shape)?, <T as Num>::ZERO)?;
                    scatter_rows(&mut out, &contiguous(u.array::<T>()?), &offs, add_row);
                    Tensor::from_vec(shape, out)?
                }, _ => return Err(Error::dtype(op, NUMERIC, u.dtype())))
            }
            IndexOp::TensorScatterUpdate => {
                let [t, i, u] = take::<3>(op, inputs)?;
                let idx = contiguous(i.array::<i64>()?);
                dispatch!(t, a => tensor_scatter(op, a, &u, &idx, i.shape(), |d, s| d.copy_from_slice(s))?)
            }
            IndexOp::TensorScatterAdd => {
                let [t, i, u] = take::<3>(op, inputs)?;
                let idx = contiguous(i.array::<i64>()?);
                dispatch_numeric!(t.dtype(), T => {
                    tensor_scatter::<T>(op, t.into_array::<T>()?, &u, &idx, i.shape(), add_row)?
                }, _ => return Err(Error::dtype(op, NUMERIC, t.dtype())))
            }
            IndexOp::DynamicUpdateSlice => {
                let [o, u, s] = take::<3>(op, inputs)?;
                let start = contiguous(s.array::<i64>()?);
                dispatch!(o, a => dynamic_update_slice_kernel(op, a, &u, &start)?)
            }
            IndexOp::TopK { k, sorted } => {
                let [x] = take::<1>(op, inputs)?;
                return dispatch_numeric!(x.dtype(), T => {
                    top_k_kernel::<T>(x.array::<T>()?, *k, *sorted, &out_shape)
                }, _ => Err(Error::dtype(op, NUMERIC, x.dtype())));
            }
            IndexOp::NonZero { batch_dims } => {
                let [x] = take::<1>(op, inputs)?;
                dispatch!(&x, a => nonzero::kernel(op, a, *batch_dims)?)
            }
            _ => return Err(Error::unsupported(op, "not an indexing op")),
        };
        Ok(vec![out])
    }
}

impl fmt::Display for IndexOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        if let Some((_, n)) = self.segment() {
            return write!(f, "{name}{{num_segments={n}}}");
        }
        match self {
            IndexOp::Gather { axis, batch_dims } => write!(f, "{name}{{axis={axis},batch_dims={batch_dims}}}"),
            IndexOp::GatherNd { batch_dims } => write!(f, "{name}{{batch_dims={batch_dims}}}"),
            IndexOp::ScatterNd { shape } => write!(f, "{name}{{shape={shape:?}}}"),
            IndexOp::TopK { k, sorted } => write!(f, "{name}{{k={k},sorted={sorted}}}"),
            IndexOp::NonZero { batch_dims: b @ 1.. } => write!(f, "{name}{{batch_dims={b}}}"),
            _ => f.write_str(name),
        }
    }
}

// ---------------------------------------------------------------- inference

const NUMERIC: &str = "a numeric type (f32, f64 or i64)";

fn expect_numeric(op: &str, t: &TensorType) -> Result<()> {
    if !t.dtype.is_numeric() {
        return Err(Error::dtype(op, NUMERIC, t.dtype));
    }
    Ok(())
}

/// Unified first `n` dims of two shapes (callers check `n` against both ranks).
fn batch_prefix(op: &str, a: &Shape, b: &Shape, n: usize) -> Result<Vec<Dim>> {
    (0..n)
        .map(|d| {
            a.dim(d)
                .unify(b.dim(d))
                .ok_or_else(|| Error::shape(op, format!("batch dim {d} differs between params {a} and indices {b}")))
        })
        .collect()
}

/// The index depth `K` of an i64 `[..., K]` index tensor.
fn index_depth(op: &str, idx: &TensorType) -> Result<usize> {
    expect_dtype(op, idx, DType::I64)?;
    match idx.shape.dims().last() {
        None => Err(Error::shape(op, "indices must have rank >= 1 (shape [..., K]), got a scalar")),
        Some(Dim::Fixed(k)) => Ok(*k),
        Some(_) => Err(Error::shape(op, format!("the index depth (last dim) of indices {} must be static", idx.shape))),
    }
}

/// Check `updates` against `indices[:-1] + base[k:]`.
fn expect_updates(op: &str, upd: &Shape, idx: &Shape, base: &[Dim], k: usize) -> Result<()> {
    let mut want: Vec<Dim> = idx.dims()[..idx.rank() - 1].to_vec();
    want.extend_from_slice(&base[k..]);
    let want = Shape::from_dims(want);
    if !upd.compatible(&want) {
        return Err(Error::shape(op, format!("updates have shape {upd}, expected {want} (indices {idx})")));
    }
    Ok(())
}

fn infer_gather(op: &str, inputs: &[TensorType], axis: i64, b: usize) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 2)?;
    let (p, i) = (&inputs[0], &inputs[1]);
    expect_dtype(op, i, DType::I64)?;
    let ax = norm_axis(op, axis, p.rank())?;
    if b > ax || b > i.rank() {
        return Err(Error::shape(
            op,
            format!("batch_dims {b} must be <= axis {ax} and <= the rank of indices {} (params {})", i.shape, p.shape),
        ));
    }
    let mut out = batch_prefix(op, &p.shape, &i.shape, b)?;
    out.extend_from_slice(&p.shape.dims()[b..ax]);
    out.extend_from_slice(&i.shape.dims()[b..]);
    out.extend_from_slice(&p.shape.dims()[ax + 1..]);
    Ok(vec![TensorType::new(p.dtype, Shape::from_dims(out))])
}

fn infer_gather_nd(op: &str, inputs: &[TensorType], b: usize) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 2)?;
    let (p, i) = (&inputs[0], &inputs[1]);
    let k = index_depth(op, i)?;
    if b >= i.rank() || b + k > p.rank() {
        return Err(Error::shape(
            op,
            format!(
                "need batch_dims {b} < rank of indices {} and batch_dims + index depth {k} <= rank of params {}",
                i.shape, p.shape
            ),
        ));
    }
    let mut out = batch_prefix(op, &p.shape, &i.shape, b)?;
    out.extend_from_slice(&i.shape.dims()[b..i.rank() - 1]);
    out.extend_from_slice(&p.shape.dims()[b + k..]);
    Ok(vec![TensorType::new(p.dtype, Shape::from_dims(out))])
}

fn infer_scatter_nd(op: &str, inputs: &[TensorType], shape: &[usize]) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 2)?;
    let (i, u) = (&inputs[0], &inputs[1]);
    let k = index_depth(op, i)?;
    expect_numeric(op, u)?;
    if k > shape.len() {
        return Err(Error::shape(
            op,
            format!("index depth {k} of indices {} exceeds the rank of shape {shape:?}", i.shape),
        ));
    }
    let base = Shape::fixed(shape);
    expect_updates(op, &u.shape, &i.shape, base.dims(), k)?;
    Ok(vec![TensorType::new(u.dtype, base)])
}

fn infer_tensor_scatter(op: &str, inputs: &[TensorType], add: bool) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 3)?;
    let (t, i, u) = (&inputs[0], &inputs[1], &inputs[2]);
    let k = index_depth(op, i)?;
    if add {
        expect_numeric(op, t)?;
    }
    if u.dtype != t.dtype {
        return Err(Error::dtype(op, format!("{} (the dtype of tensor)", t.dtype), u.dtype));
    }
    if k > t.rank() {
        return Err(Error::shape(
            op,
            format!("index depth {k} of indices {} exceeds the rank of tensor {}", i.shape, t.shape),
        ));
    }
    expect_updates(op, &u.shape, &i.shape, t.shape.dims(), k)?;
    Ok(vec![t.clone()])
}

fn infer_segment(op: &str, inputs: &[TensorType], n: usize) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 2)?;
    let (d, s) = (&inputs[0], &inputs[1]);
    expect_numeric(op, d)?;
    expect_dtype(op, s, DType::I64)?;
    let r = s.rank();
    if r > d.rank() || !d.shape.dims()[..r].iter().zip(s.shape.dims()).all(|(a, b)| a.compatible(b)) {
        return Err(Error::shape(
            op,
            format!("segment_ids shape {} must be a prefix of data shape {}", s.shape, d.shape),
        ));
    }
    let out = Shape::from_dims(std::iter::once(Dim::Fixed(n)).chain(d.shape.dims()[r..].iter().cloned()));
    Ok(vec![TensorType::new(d.dtype, out)])
}

fn infer_dynamic_update_slice(op: &str, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 3)?;
    let (o, u, s) = (&inputs[0], &inputs[1], &inputs[2]);
    if u.dtype != o.dtype {
        return Err(Error::dtype(op, format!("{} (the dtype of operand)", o.dtype), u.dtype));
    }
    let too_big = o
        .shape
        .dims()
        .iter()
        .zip(u.shape.dims())
        .any(|(a, b)| matches!((a, b), (Dim::Fixed(a), Dim::Fixed(b)) if b > a));
    if u.rank() != o.rank() || too_big {
        return Err(Error::shape(
            op,
            format!("update {} must have the rank of operand {} and fit in it", u.shape, o.shape),
        ));
    }
    expect_dtype(op, s, DType::I64)?;
    if s.rank() != 1 || !s.shape.dim(0).compatible(&Dim::Fixed(o.rank())) {
        return Err(Error::shape(op, format!("start must have shape [{}], got {}", o.rank(), s.shape)));
    }
    Ok(vec![o.clone()])
}

fn infer_top_k(op: &str, inputs: &[TensorType], k: usize) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 1)?;
    let x = &inputs[0];
    expect_numeric(op, x)?;
    let Some(last) = x.shape.dims().last() else {
        return Err(Error::shape(op, "input must have rank >= 1, got a scalar"));
    };
    if let Dim::Fixed(n) = last
        && k > *n
    {
        return Err(Error::shape(op, format!("k = {k} exceeds the last dim of input {}", x.shape)));
    }
    let mut dims = x.shape.dims()[..x.rank() - 1].to_vec();
    dims.push(Dim::Fixed(k));
    let shape = Shape::from_dims(dims);
    Ok(vec![TensorType::new(x.dtype, shape.clone()), TensorType::new(DType::I64, shape)])
}

// ---------------------------------------------------------------- kernels

/// Numeric elements: identities and the operations segment ops and top_k need.
trait Num: Element + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    const LOWEST: Self;
    const HIGHEST: Self;
    fn num_add(self, o: Self) -> Self;
    fn num_mul(self, o: Self) -> Self;
    fn num_is_nan(self) -> bool;
}

macro_rules! impl_num {
    ($($t:ty: $zero:expr, $one:expr, $lo:expr, $hi:expr, $add:expr, $mul:expr, $nan:expr;)*) => {$(
        impl Num for $t {
            const ZERO: Self = $zero;
            const ONE: Self = $one;
            const LOWEST: Self = $lo;
            const HIGHEST: Self = $hi;
            fn num_add(self, o: Self) -> Self { ($add)(self, o) }
            fn num_mul(self, o: Self) -> Self { ($mul)(self, o) }
            fn num_is_nan(self) -> bool { ($nan)(self) }
        }
    )*};
}
impl_num! {
    f32: 0.0, 1.0, f32::NEG_INFINITY, f32::INFINITY, |a, b| a + b, |a, b| a * b, f32::is_nan;
    f64: 0.0, 1.0, f64::NEG_INFINITY, f64::INFINITY, |a, b| a + b, |a, b| a * b, f64::is_nan;
    i64: 0, 1, i64::MIN, i64::MAX, i64::wrapping_add, i64::wrapping_mul, |_| false;
}

fn take<const N: usize>(op: &str, inputs: Vec<Tensor>) -> Result<[Tensor; N]> {
    inputs.try_into().map_err(|v: Vec<Tensor>| Error::arity(op, N.to_string(), v.len()))
}

/// The elements in row-major order, borrowed when already contiguous.
fn contiguous<T: Element>(a: &ArcArray<T, IxDyn>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(crate::tensor::layout::standard_vec(&a.view())),
    }
}

/// (number of index tuples, index depth K) of an `[..., K]` index shape.
fn index_rows(ishape: &[usize]) -> (usize, usize) {
    let (k, lead) = ishape.split_last().map_or((0, &[][..]), |(k, l)| (*k, l));
    (lead.iter().product(), k)
}

fn out_of_range(op: &str, index: i64, bound: usize) -> Error {
    Error::IndexOutOfRange { op: op.into(), index, bound }
}

fn in_range(v: i64, bound: usize) -> bool {
    v >= 0 && (v as u64) < bound as u64
}

/// Row-major flat offsets (in units of the inner slab) of `n` index tuples of depth
/// `dims.len()` stored in `idx`, each checked against `dims`.
fn nd_offsets(op: &str, idx: &[i64], n: usize, dims: &[usize]) -> Result<Vec<usize>> {
    if dims.is_empty() {
        return Ok(vec![0; n]);
    }
    let mut offs = Vec::with_capacity(n);
    for t in idx.chunks_exact(dims.len()) {
        let mut off = 0usize;
        for (&v, &d) in t.iter().zip(dims) {
            if !in_range(v, d) {
                return Err(out_of_range(op, v, d));
            }
            off = off * d + v as usize;
        }
        offs.push(off);
    }
    Ok(offs)
}

fn gather_kernel<T: Element>(
    op: &str,
    a: &ArcArray<T, IxDyn>,
    idx: &[i64],
    ax: usize,
    b: usize,
    out_shape: &[usize],
) -> Result<Tensor> {
    let ps = a.shape();
    let batch: usize = ps[..b].iter().product();
    let outer: usize = ps[b..ax].iter().product();
    let n = ps[ax];
    let inner: usize = ps[ax + 1..].iter().product();
    if let Some(&v) = idx.iter().find(|&&v| !in_range(v, n)) {
        return Err(out_of_range(op, v, n));
    }
    let nidx = idx.len().checked_div(batch).unwrap_or(0);
    let src = contiguous(a);
    let mut out = try_vec(op, checked_len(op, out_shape)?)?;
    for bi in 0..batch {
        let ib = &idx[bi * nidx..(bi + 1) * nidx];
        for o in 0..outer {
            let block = &src[(bi * outer + o) * n * inner..(bi * outer + o + 1) * n * inner];
            if inner == 1 {
                out.extend(ib.iter().map(|&j| block[j as usize]));
            } else {
                for &j in ib {
                    out.extend_from_slice(&block[j as usize * inner..(j as usize + 1) * inner]);
                }
            }
        }
    }
    Tensor::from_vec(out_shape, out)
}

fn gather_nd_kernel<T: Element>(
    op: &str,
    a: &ArcArray<T, IxDyn>,
    idx: &[i64],
    ishape: &[usize],
    b: usize,
    out_shape: &[usize],
) -> Result<Tensor> {
    let ps = a.shape();
    let (n, k) = index_rows(ishape);
    let batch: usize = ps[..b].iter().product();
    let per_batch = n.checked_div(batch).unwrap_or(0);
    let m: usize = ps[b..b + k].iter().product();
    let inner: usize = ps[b + k..].iter().product();
    let offs = nd_offsets(op, idx, n, &ps[b..b + k])?;
    let src = contiguous(a);
    let mut out = Vec::with_capacity(n * inner);
    for (r, &off) in offs.iter().enumerate() {
        let s = ((r / per_batch) * m + off) * inner;
        out.extend_from_slice(&src[s..s + inner]);
    }
    Tensor::from_vec(out_shape, out)
}

fn add_row<T: Num>(dst: &mut [T], src: &[T]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = d.num_add(s);
    }
}

/// Apply `f(dst_row, update_row)` for each offset, in order (rows of `dst.len() / ...`).
fn scatter_rows<T: Element>(dst: &mut [T], upd: &[T], offs: &[usize], f: impl Fn(&mut [T], &[T])) {
    if offs.is_empty() {
        return;
    }
    let inner = upd.len() / offs.len();
    for (r, &off) in offs.iter().enumerate() {
        f(&mut dst[off * inner..(off + 1) * inner], &upd[r * inner..(r + 1) * inner]);
    }
}

/// Make a buffer standard-layout (copying only if it is not).
fn standard<T: Element>(a: ArcArray<T, IxDyn>) -> ArcArray<T, IxDyn> {
    if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned().into_shared() }
}

fn tensor_scatter<T: Element>(
    op: &str,
    a: ArcArray<T, IxDyn>,
    upd: &Tensor,
    idx: &[i64],
    ishape: &[usize],
    f: impl Fn(&mut [T], &[T]),
) -> Result<Tensor> {
    let mut a = standard(a);
    let (n, k) = index_rows(ishape);
    let offs = nd_offsets(op, idx, n, &a.shape()[..k])?;
    let upd = contiguous(upd.array::<T>()?);
    let dst = a.as_slice_mut().ok_or_else(|| Error::shape(op, "internal: tensor buffer is not contiguous"))?;
    scatter_rows(dst, &upd, &offs, f);
    Ok(T::wrap(a))
}

fn segment_kernel<T: Num>(
    op: &str,
    data: &ArcArray<T, IxDyn>,
    ids: &[i64],
    num: usize,
    seg: Seg,
    out_shape: &[usize],
) -> Result<Tensor> {
    let inner: usize = out_shape[1..].iter().product();
    let init = match seg {
        Seg::Sum => T::ZERO,
        Seg::Max => T::LOWEST,
        Seg::Min => T::HIGHEST,
        Seg::Prod => T::ONE,
    };
    let mut out = vec![init; num * inner];
    let src = contiguous(data);
    for (r, &id) in ids.iter().enumerate() {
        if id < 0 {
            continue;
        }
        if !in_range(id, num) {
            return Err(out_of_range(op, id, num));
        }
        let dst = &mut out[id as usize * inner..(id as usize + 1) * inner];
        let row = &src[r * inner..(r + 1) * inner];
        let pairs = dst.iter_mut().zip(row);
        match seg {
            Seg::Sum => pairs.for_each(|(d, &s)| *d = d.num_add(s)),
            Seg::Prod => pairs.for_each(|(d, &s)| *d = d.num_mul(s)),
            // NaN propagates: a NaN accumulator is never replaced, a NaN value always wins.
            Seg::Max => pairs.for_each(|(d, &s)| *d = if s.num_is_nan() || s > *d { s } else { *d }),
            Seg::Min => pairs.for_each(|(d, &s)| *d = if s.num_is_nan() || s < *d { s } else { *d }),
        }
    }
    Tensor::from_vec(out_shape, out)
}

fn dynamic_update_slice_kernel<T: Element>(
    op: &str,
    mut a: ArcArray<T, IxDyn>,
    upd: &Tensor,
    start: &[i64],
) -> Result<Tensor> {
    let u = upd.array::<T>()?;
    for ((&s, &len), &size) in start.iter().zip(u.shape()).zip(a.shape()) {
        // Valid starts are [0, size - len] (no clamping).
        let bound = (size + 1).saturating_sub(len);
        if !in_range(s, bound) {
            return Err(out_of_range(op, s, bound));
        }
    }
    let ushape = u.shape();
    a.slice_each_axis_mut(|ax| {
        let d = ax.axis.index();
        let s = start[d] as usize;
        Slice::from(s..s + ushape[d])
    })
    .assign(u);
    Ok(T::wrap(a))
}

/// Descending order with NaN above every number.
fn desc<T: Num>(a: T, b: T) -> Ordering {
    match (a.num_is_nan(), b.num_is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
    }
}

fn top_k_kernel<T: Num>(a: &ArcArray<T, IxDyn>, k: usize, sorted: bool, out_shape: &[usize]) -> Result<Vec<Tensor>> {
    let n = a.shape().last().copied().unwrap_or(1);
    let rows: usize = out_shape[..out_shape.len().saturating_sub(1)].iter().product();
    let src = contiguous(a);
    let mut vals = Vec::with_capacity(rows * k);
    let mut inds = Vec::with_capacity(rows * k);
    let mut buf: Vec<usize> = Vec::with_capacity(n);
    for r in 0..rows {
        let row = &src[r * n..(r + 1) * n];
        let cmp = |i: &usize, j: &usize| desc(row[*i], row[*j]).then(i.cmp(j));
        buf.clear();
        buf.extend(0..n);
        if k < n {
            buf.select_nth_unstable_by(k, cmp);
            buf.truncate(k);
        }
        if sorted {
            buf.sort_unstable_by(cmp);
        } else {
            buf.sort_unstable();
        }
        vals.extend(buf.iter().map(|&i| row[i]));
        inds.extend(buf.iter().map(|&i| i as i64));
    }
    Ok(vec![Tensor::from_vec(out_shape, vals)?, Tensor::from_vec(out_shape, inds)?])
}

// ---------------------------------------------------------------- builders
