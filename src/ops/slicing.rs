//! Slicing, padding, concatenation and friends (TensorFlow semantics unless stated).
//!
//! Invariants:
//! - every op keeps its input dtype; `concat` needs one dtype and rank for all inputs;
//! - attribute indices are checked against FIXED dims in `infer` and against the concrete
//!   shape in `eval` (dynamic dims, run-time `begin`/`shift` tensors): an index out of range
//!   is an [`Error::IndexOutOfRange`] (or a shape error), never a clamp to a wrong answer;
//!   only `strided_slice` ranges clamp, exactly as TF/numpy do;
//! - outputs are fresh standard-layout arrays, except `split` (zero-copy views into the
//!   input buffer) and no-op cases (the input is returned as is);
//! - [`StridedSliceSpec::resolve`] is the one place where a strided-slice spec (masks,
//!   ellipsis, new and shrink axes, negative indices and strides) is turned into a per-axis
//!   selection; `infer` and `eval` both use it.

use std::fmt;

use ndarray::{ArcArray, ArrayD, ArrayViewD, Axis, CowArray, IxDyn, Slice};

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::kernels::alloc::{checked_len, try_filled};
use crate::ops::{Linearity, Op, Raises, expect_arity, expect_dtype, norm_axis};
use crate::tensor::{DType, Dim, Element, Shape, Tensor, TensorType};

mod builders;
mod kernels;

use kernels::*;

/// How `pad` fills the new border.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A constant (cast to the tensor's dtype: truncated for i64, nonzero = true for bool).
    Constant(f64),
    /// Mirror without repeating the edge (`[1,2,3]` padded by 2 → `3,2,|1,2,3|,2,1`); pads < dim.
    Reflect,
    /// Mirror repeating the edge (`[1,2,3]` padded by 2 → `2,1,|1,2,3|,3,2`); pads <= dim.
    Symmetric,
}

/// A TF/numpy strided-slice spec: one entry per index expression (`begin:end:stride`,
/// an index, `...` or a new axis). Bit `i` of a mask refers to entry `i`.
///
/// - `begin_mask`/`end_mask`: ignore `begin[i]`/`end[i]` (full range in the stride's direction);
/// - `ellipsis_mask`: at most one bit; entry `i` is `...` (expands to the unindexed dims);
///   with no ellipsis, trailing unindexed dims are taken whole;
/// - `new_axis_mask`: entry `i` inserts an axis of size 1 (consumes no input dim);
/// - `shrink_axis_mask`: entry `i` is the single index `begin[i]` (negative counts from the
///   end; out of range is an error) and the dim is removed; needs a positive stride.
///
/// Range begin/end are clamped like numpy (`x[-100:100]` is the whole dim).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StridedSliceSpec {
    /// Begin per entry (inclusive; negative counts from the end).
    pub begin: Vec<i64>,
    /// End per entry (exclusive; negative counts from the end).
    pub end: Vec<i64>,
    /// Stride per entry (non-zero; negative walks backwards).
    pub strides: Vec<i64>,
    /// Entries whose begin is ignored.
    pub begin_mask: u64,
    /// Entries whose end is ignored.
    pub end_mask: u64,
    /// The entry that is an ellipsis (at most one bit).
    pub ellipsis_mask: u64,
    /// Entries that insert a new axis of size 1.
    pub new_axis_mask: u64,
    /// Entries that index one element and remove the dim.
    pub shrink_axis_mask: u64,
}

/// How one input axis is selected by a resolved [`StridedSliceSpec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AxisSelect {
    /// `len` elements `start, start + step, ...` (`step` may be negative); the axis is kept.
    Range {
        /// First index taken (0 when `len == 0`).
        start: usize,
        /// Number of elements.
        len: usize,
        /// Signed step (non-zero).
        step: i64,
    },
    /// The single element at this index; the axis is removed.
    Index(usize),
    /// A dynamic dim: the selection is known only at run time.
    Dynamic {
        /// The axis is removed (an index).
        shrink: bool,
        /// The output dim equals the input dim (a whole range with stride ±1).
        whole: bool,
    },
}

/// A [`StridedSliceSpec`] resolved against an input shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StridedSlicePlan {
    /// One selection per input axis.
    pub axes: Vec<AxisSelect>,
    /// One entry per output axis: `Some(input axis)` or `None` for a new axis of size 1.
    pub out: Vec<Option<usize>>,
}

impl StridedSliceSpec {
    /// A spec with the given begin/end/strides and no masks.
    ///
    /// ```
    /// use pfor::ops::slicing::{AxisSelect, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // x[1:5:2] (numpy)
    /// let spec = StridedSliceSpec::new(&[1], &[5], &[2]);
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[0i64, 1, 2, 3, 4, 5]));
    /// let y = g.strided_slice(x, &spec)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<i64>()?, [1, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(begin: &[i64], end: &[i64], strides: &[i64]) -> StridedSliceSpec {
        StridedSliceSpec { begin: begin.to_vec(), end: end.to_vec(), strides: strides.to_vec(), ..Default::default() }
    }
    /// Resolve against input dims (dynamic dims give [`AxisSelect::Dynamic`]). Errors: length
    /// mismatch, more than one ellipsis, more indexed dims than the rank, a zero stride, a
    /// non-positive stride on a shrink axis, a shrink index out of range of a fixed dim.
    ///
    /// ```
    /// use pfor::ops::slicing::{AxisSelect, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // x[-1] on a [4, 3] input: the last row, axis 0 removed (shrink_axis_mask bit 0)
    /// let spec = StridedSliceSpec::new(&[-1], &[0], &[1]).with_shrink_axis_mask(1);
    /// let plan = spec.resolve(&[Dim::fixed(4), Dim::fixed(3)])?;
    /// assert_eq!(plan.axes[0], AxisSelect::Index(3));
    /// assert_eq!(plan.out, [Some(1)]); // the output's one axis is input axis 1
    /// assert!(StridedSliceSpec::new(&[0], &[1], &[0]).resolve(&[Dim::fixed(4)]).is_err()); // a zero stride
    /// # Ok(())
    /// # }
    /// ```
    pub fn resolve(&self, dims: &[Dim]) -> Result<StridedSlicePlan> {
        const OP: &str = "strided_slice";
        let n = self.begin.len();
        if self.end.len() != n || self.strides.len() != n || n > 64 {
            return Err(Error::shape(
                OP,
                format!(
                    "begin, end and strides need one common length <= 64, got {}, {} and {}",
                    n,
                    self.end.len(),
                    self.strides.len()
                ),
            ));
        }
        let bit = |m: u64, i: usize| (m >> i) & 1 == 1;
        let shape = Shape::from_dims(dims.iter().cloned());
        if (0..n).filter(|&i| bit(self.ellipsis_mask, i)).count() > 1 {
            return Err(Error::shape(OP, format!("more than one ellipsis (ellipsis_mask {:#b})", self.ellipsis_mask)));
        }
        let regular = (0..n).filter(|&i| !bit(self.ellipsis_mask, i) && !bit(self.new_axis_mask, i)).count();
        if regular > dims.len() {
            return Err(Error::shape(
                OP,
                format!("the spec indexes {regular} dims of shape {shape} (rank {})", dims.len()),
            ));
        }
        let whole = |d: &Dim| match d.value() {
            Some(d) => AxisSelect::Range { start: 0, len: d, step: 1 },
            None => AxisSelect::Dynamic { shrink: false, whole: true },
        };
        let (mut axes, mut out) = (Vec::with_capacity(dims.len()), Vec::new());
        let mut saw_ellipsis = false;
        for i in 0..n {
            if bit(self.ellipsis_mask, i) {
                saw_ellipsis = true;
                for _ in 0..dims.len() - regular {
                    out.push(Some(axes.len()));
                    axes.push(whole(&dims[axes.len()]));
                }
            } else if bit(self.new_axis_mask, i) {
                out.push(None);
            } else {
                let ax = axes.len();
                let (b, e, s) = (self.begin[i], self.end[i], self.strides[i]);
                let (bm, em, shrink) = (bit(self.begin_mask, i), bit(self.end_mask, i), bit(self.shrink_axis_mask, i));
                let sel = resolve_axis(&shape, ax, b, e, s, bm, em, shrink)?;
                if !matches!(sel, AxisSelect::Index(_) | AxisSelect::Dynamic { shrink: true, .. }) {
                    out.push(Some(ax));
                }
                axes.push(sel);
            }
        }
        if !saw_ellipsis {
            while axes.len() < dims.len() {
                out.push(Some(axes.len()));
                axes.push(whole(&dims[axes.len()]));
            }
        }
        Ok(StridedSlicePlan { axes, out })
    }
}

/// Mask setters and the field-by-field conversions between the spec and the op variant.
macro_rules! strided_spec_fields {
    ($($vec:ident),* ; $($mask:ident => $setter:ident),*) => {
        impl StridedSliceSpec {
            $(
                #[doc = concat!("Set `", stringify!($mask), "`.")]
                pub fn $setter(mut self, m: u64) -> Self {
                    self.$mask = m;
                    self
                }
            )*
            /// The equivalent `strided_slice` op.
            pub fn to_op(&self) -> SlicingOp {
                SlicingOp::StridedSlice { $($vec: self.$vec.clone(),)* $($mask: self.$mask,)* }
            }
        }
        impl SlicingOp {
            /// The spec of a `strided_slice` op (`None` for other ops).
            pub fn strided_spec(&self) -> Option<StridedSliceSpec> {
                match self {
                    SlicingOp::StridedSlice { $($vec,)* $($mask,)* } => {
                        Some(StridedSliceSpec { $($vec: $vec.clone(),)* $($mask: *$mask,)* })
                    }
                    _ => None,
                }
            }
        }
    };
}

strided_spec_fields!(begin, end, strides; begin_mask => with_begin_mask, end_mask => with_end_mask,
    ellipsis_mask => with_ellipsis_mask, new_axis_mask => with_new_axis_mask, shrink_axis_mask => with_shrink_axis_mask);

/// Resolve one regular (range or index) entry against input axis `ax`.
#[allow(clippy::too_many_arguments)]
fn resolve_axis(
    shape: &Shape,
    ax: usize,
    b: i64,
    e: i64,
    s: i64,
    bm: bool,
    em: bool,
    shrink: bool,
) -> Result<AxisSelect> {
    const OP: &str = "strided_slice";
    if s == 0 {
        return Err(Error::shape(OP, format!("stride 0 for axis {ax} of shape {shape}")));
    }
    let dim = shape.dim(ax).value();
    if shrink {
        if s < 0 {
            return Err(Error::shape(OP, format!("index (shrink) axis {ax} needs a positive stride, got {s}")));
        }
        let Some(d) = dim else { return Ok(AxisSelect::Dynamic { shrink: true, whole: false }) };
        let i = if b < 0 { b.saturating_add(d as i64) } else { b };
        if i < 0 || i >= d as i64 {
            return Err(Error::IndexOutOfRange { op: OP.into(), index: b, bound: d });
        }
        return Ok(AxisSelect::Index(i as usize));
    }
    let Some(d) = dim else {
        let whole = em && (s == 1 && (bm || b == 0) || s == -1 && (bm || b == -1));
        return Ok(AxisSelect::Dynamic { shrink: false, whole });
    };
    let d = d as i64;
    // Valid positions: [0, d] walking forwards, [-1, d-1] walking backwards (-1 = before 0).
    let (lo, hi) = if s > 0 { (0, d) } else { (-1, d - 1) };
    let canon = |x: i64, masked: bool, default: i64| {
        if masked { default } else { (if x < 0 { x.saturating_add(d) } else { x }).clamp(lo, hi) }
    };
    let begin = canon(b, bm, if s > 0 { lo } else { hi });
    let end = canon(e, em, if s > 0 { hi } else { lo });
    let interval = end - begin;
    if interval == 0 || (interval > 0) != (s > 0) {
        return Ok(AxisSelect::Range { start: 0, len: 0, step: s });
    }
    let (span, step) = (interval.unsigned_abs(), s.unsigned_abs());
    let len = (span / step + u64::from(span % step != 0)) as usize;
    Ok(AxisSelect::Range { start: begin as usize, len, step: s })
}

impl StridedSlicePlan {
    /// The static output shape for input dims `dims` (those the plan was resolved with).
    ///
    /// ```
    /// use pfor::ops::slicing::{AxisSelect, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let dims = [Dim::dynamic("n"), Dim::fixed(10)];
    /// // x[:, ::3]
    /// let spec = StridedSliceSpec::new(&[0, 0], &[0, 0], &[1, 3]).with_begin_mask(0b11).with_end_mask(0b11);
    /// let plan = spec.resolve(&dims)?;
    /// assert_eq!(plan.output_shape(&dims), Shape::from_dims([Dim::dynamic("n"), Dim::fixed(4)]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn output_shape(&self, dims: &[Dim]) -> Shape {
        Shape::from_dims(self.out.iter().map(|o| match o.map(|ax| (ax, &self.axes[ax])) {
            None | Some((_, AxisSelect::Index(_))) => Dim::Fixed(1),
            Some((_, AxisSelect::Range { len, .. })) => Dim::Fixed(*len),
            Some((ax, AxisSelect::Dynamic { whole: true, .. })) => dims[ax].clone(),
            Some((_, AxisSelect::Dynamic { .. })) => Dim::Dynamic(None),
        }))
    }
}

/// The ndarray slice taking `len` elements from `start` by `step`.
fn range_slice(start: usize, len: usize, step: i64) -> Slice {
    let s = start as isize;
    match len {
        0 => Slice::new(0, Some(0), 1),
        1 => Slice::new(s, Some(s + 1), 1),
        _ => {
            let last = s + (len as isize - 1) * step as isize;
            if step > 0 {
                Slice::new(s, Some(last + 1), step as isize)
            } else {
                Slice::new(last, Some(s + 1), step as isize)
            }
        }
    }
}

/// Ops of the slicing family.
#[derive(Clone, Debug, PartialEq)]
pub enum SlicingOp {
    /// Join inputs along `axis` (other dims must agree).
    Concat {
        /// The axis (negative counts from the end).
        axis: i64,
    },
    /// Split along `axis` into pieces of `sizes` (which must sum to the axis size).
    Split {
        /// The axis (negative counts from the end).
        axis: i64,
        /// Piece sizes, one output each.
        sizes: Vec<usize>,
    },
    /// Static slice `x[begin_i .. begin_i + size_i]` per axis (`size -1` = to the end).
    Slice {
        /// Start per axis (>= 0).
        begin: Vec<i64>,
        /// Size per axis (>= -1).
        size: Vec<i64>,
    },
    /// Slice of fixed `sizes` at a run-time `begin` (input 1: i64 vector, one per axis).
    DynamicSlice {
        /// Size per axis.
        sizes: Vec<usize>,
    },
    /// TF `strided_slice` (see [`StridedSliceSpec`]).
    StridedSlice {
        /// Begin per entry.
        begin: Vec<i64>,
        /// End per entry.
        end: Vec<i64>,
        /// Stride per entry.
        strides: Vec<i64>,
        /// See [`StridedSliceSpec::begin_mask`].
        begin_mask: u64,
        /// See [`StridedSliceSpec::end_mask`].
        end_mask: u64,
        /// See [`StridedSliceSpec::ellipsis_mask`].
        ellipsis_mask: u64,
        /// See [`StridedSliceSpec::new_axis_mask`].
        new_axis_mask: u64,
        /// See [`StridedSliceSpec::shrink_axis_mask`].
        shrink_axis_mask: u64,
    },
    /// Pad each axis by `(before, after)` elements.
    Pad {
        /// One `(before, after)` per axis.
        paddings: Vec<(usize, usize)>,
        /// How to fill.
        mode: PadMode,
    },
    /// Reverse the order of elements along `axes` (no duplicates).
    Reverse {
        /// The axes (negative count from the end).
        axes: Vec<i64>,
    },
    /// Rotate along `axes` by the run-time shifts of input 1 (i64 vector, or scalar for one
    /// axis); any sign, taken modulo the dim; repeated axes add their shifts.
    Roll {
        /// The axes (negative count from the end).
        axes: Vec<i64>,
    },
}

macro_rules! slicing_kinds {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// Kinds of the slicing family.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum SlicingKind { $(#[doc = concat!("`", $name, "`.")] $variant,)* }
        impl SlicingKind {
            /// Every kind.
            pub const ALL: &'static [SlicingKind] = &[$(SlicingKind::$variant,)*];
            /// The op name.
            pub fn name(self) -> &'static str { match self { $(SlicingKind::$variant => $name,)* } }
        }
    };
}

slicing_kinds! {
    Concat => "concat", Split => "split", Slice => "slice", DynamicSlice => "dynamic_slice",
    StridedSlice => "strided_slice", Pad => "pad", Reverse => "reverse", Roll => "roll",
}

impl SlicingKind {
    /// Which inputs' values can make the op fail ([`Raises`]): the run-time `begin` of
    /// `dynamic_slice` (out of range); `roll` takes its shifts modulo the dim and the other
    /// ops read only shapes and attributes.
    pub fn raises(self) -> Raises {
        match self {
            SlicingKind::DynamicSlice => Raises::On(&[1]),
            _ => Raises::Never,
        }
    }

    /// Where the op is linear ([`Linearity`]): in its data (every input of `concat`; input
    /// 0 of the others, whose other inputs are offsets or shifts). `pad` is affine (its
    /// constant), so it has its own rule.
    pub fn linearity(self) -> Linearity {
        use SlicingKind::*;
        match self {
            Concat => Linearity::Linear,
            Split | Slice | DynamicSlice | StridedSlice | Reverse | Roll => Linearity::LinearIn(&[0]),
            Pad => Linearity::NonLinear,
        }
    }
}

impl SlicingOp {
    /// The kind.
    pub fn kind(&self) -> SlicingKind {
        match self {
            SlicingOp::Concat { .. } => SlicingKind::Concat,
            SlicingOp::Split { .. } => SlicingKind::Split,
            SlicingOp::Slice { .. } => SlicingKind::Slice,
            SlicingOp::DynamicSlice { .. } => SlicingKind::DynamicSlice,
            SlicingOp::StridedSlice { .. } => SlicingKind::StridedSlice,
            SlicingOp::Pad { .. } => SlicingKind::Pad,
            SlicingOp::Reverse { .. } => SlicingKind::Reverse,
            SlicingOp::Roll { .. } => SlicingKind::Roll,
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        match self {
            SlicingOp::Concat { axis } => {
                let Some(first) = inputs.first() else { return Err(Error::arity(op, "at least 1", 0)) };
                let ax = norm_axis(op, *axis, first.rank())?;
                let mut dims = first.shape.dims().to_vec();
                for (i, t) in inputs.iter().enumerate().skip(1) {
                    if t.dtype != first.dtype {
                        return Err(Error::dtype(op, format!("{} (the dtype of input 0)", first.dtype), t.dtype));
                    }
                    let mismatch = || {
                        Error::shape(
                            op,
                            format!("input {i} {} does not fit input 0 {} on axis {ax}", t.shape, first.shape),
                        )
                    };
                    if t.rank() != first.rank() {
                        return Err(mismatch());
                    }
                    for (k, d) in t.shape.dims().iter().enumerate() {
                        dims[k] = if k == ax {
                            match (dims[k].value(), d.value()) {
                                (Some(a), Some(b)) => Dim::Fixed(a.checked_add(b).ok_or_else(mismatch)?),
                                _ => Dim::Dynamic(None),
                            }
                        } else {
                            dims[k].unify(d).ok_or_else(mismatch)?
                        };
                    }
                }
                Ok(vec![TensorType::new(first.dtype, dims)])
            }
            SlicingOp::Split { axis, sizes } => {
                expect_arity(op, inputs, 1)?;
                let t = &inputs[0];
                let ax = norm_axis(op, *axis, t.rank())?;
                let sum = sizes.iter().try_fold(0usize, |a, &n| a.checked_add(n));
                if sizes.is_empty() || t.shape.dim(ax).value().is_some_and(|d| Some(d) != sum) {
                    return Err(Error::shape(
                        op,
                        format!("sizes {sizes:?} must be non-empty and sum to axis {ax} of {}", t.shape),
                    ));
                }
                Ok(sizes
                    .iter()
                    .map(|&n| {
                        let mut dims = t.shape.dims().to_vec();
                        dims[ax] = Dim::Fixed(n);
                        TensorType::new(t.dtype, dims)
                    })
                    .collect())
            }
            SlicingOp::Slice { begin, size } => {
                expect_arity(op, inputs, 1)?;
                let t = &inputs[0];
                if begin.len() != t.rank() || size.len() != t.rank() {
                    return Err(Error::shape(
                        op,
                        format!("begin {begin:?} and size {size:?} need one entry per axis of {}", t.shape),
                    ));
                }
                let mut dims = Vec::with_capacity(t.rank());
                for ax in 0..t.rank() {
                    let len = slice_len(ax, &t.shape, begin[ax], size[ax])?;
                    dims.push(match len {
                        _ if begin[ax] == 0 && size[ax] == -1 => t.shape.dim(ax).clone(),
                        Some(n) => Dim::Fixed(n),
                        None => Dim::Dynamic(None),
                    });
                }
                Ok(vec![TensorType::new(t.dtype, dims)])
            }
            SlicingOp::DynamicSlice { sizes } => {
                expect_arity(op, inputs, 2)?;
                let (t, b) = (&inputs[0], &inputs[1]);
                expect_dtype(op, b, DType::I64)?;
                let ok = b.rank() == 1 && b.shape.dim(0).compatible(&Dim::Fixed(t.rank())) && sizes.len() == t.rank();
                if !ok {
                    return Err(Error::shape(
                        op,
                        format!("x {}: begin {} and sizes {sizes:?} need one entry per axis", t.shape, b.shape),
                    ));
                }
                for (ax, (d, &n)) in t.shape.dims().iter().zip(sizes).enumerate() {
                    if d.value().is_some_and(|d| n > d) {
                        return Err(Error::shape(op, format!("size {n} exceeds axis {ax} of {}", t.shape)));
                    }
                }
                Ok(vec![TensorType::new(t.dtype, Shape::fixed(sizes))])
            }
            SlicingOp::StridedSlice { .. } => {
                expect_arity(op, inputs, 1)?;
                let t = &inputs[0];
                let plan = self.strided_spec().unwrap_or_default().resolve(t.shape.dims())?;
                Ok(vec![TensorType::new(t.dtype, plan.output_shape(t.shape.dims()))])
            }
            SlicingOp::Pad { paddings, mode } => {
                expect_arity(op, inputs, 1)?;
                let t = &inputs[0];
                Ok(vec![TensorType::new(t.dtype, pad_dims(&t.shape, paddings, *mode)?)])
            }
            SlicingOp::Reverse { axes } => {
                expect_arity(op, inputs, 1)?;
                norm_axes(op, axes, inputs[0].rank(), true)?;
                Ok(vec![inputs[0].clone()])
            }
            SlicingOp::Roll { axes } => {
                expect_arity(op, inputs, 2)?;
                let (t, s) = (&inputs[0], &inputs[1]);
                norm_axes(op, axes, t.rank(), false)?;
                expect_dtype(op, s, DType::I64)?;
                let ok = match s.rank() {
                    0 => axes.len() == 1,
                    1 => s.shape.dim(0).compatible(&Dim::Fixed(axes.len())),
                    _ => false,
                };
                if !ok {
                    return Err(Error::shape(
                        op,
                        format!("shift {} must hold one entry per axis of {axes:?}", s.shape),
                    ));
                }
                Ok(vec![t.clone()])
            }
        }
    }

    /// Evaluate. The static checks of [`SlicingOp::infer`] are re-run on the concrete input
    /// types first (dynamic dims are known now), so kernels only check run-time data.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        let types: Vec<TensorType> = inputs.iter().map(Tensor::tensor_type).collect();
        self.infer(&types)?;
        let x = &inputs[0]; // infer checked the arity
        match self {
            SlicingOp::Concat { axis } => {
                if inputs.len() == 1 {
                    return Ok(inputs);
                }
                let ax = norm_axis(op, *axis, x.rank())?;
                crate::dispatch_dtype!(x.dtype(), T => {
                    let arrays = inputs.iter().map(|t| t.array::<T>()).collect::<Result<Vec<_>>>()?;
                    let views: Vec<_> = arrays.iter().map(|a| a.view()).collect();
                    Ok(vec![T::wrap(concat_views(op, ax, &views)?.into_shared())])
                })
            }
            SlicingOp::Split { axis, sizes } => {
                let ax = norm_axis(op, *axis, x.rank())?;
                let mut off = 0;
                let mut outs = Vec::with_capacity(sizes.len());
                for &n in sizes {
                    outs.push(crate::dispatch!(x, a => {
                        let mut v = a.clone(); // zero-copy view into the shared buffer
                        v.slice_axis_inplace(Axis(ax), Slice::from(off..off + n));
                        crate::tensor::wrap_same(a, v)
                    }));
                    off += n;
                }
                Ok(outs)
            }
            SlicingOp::Slice { begin, size } => {
                let ranges: Vec<(usize, usize)> = (x.shape().iter().zip(begin).zip(size))
                    .map(|((&d, &b), &n)| (b as usize, if n < 0 { d - b as usize } else { n as usize }))
                    .collect();
                Ok(vec![slice_ranges(x, &ranges)])
            }
            SlicingOp::DynamicSlice { sizes } => {
                let begin = inputs[1].to_vec::<i64>()?;
                let mut ranges = Vec::with_capacity(x.rank());
                for ((&d, &n), &b) in x.shape().iter().zip(sizes).zip(&begin) {
                    if b < 0 || b as u64 > (d - n) as u64 {
                        return Err(Error::IndexOutOfRange { op: op.into(), index: b, bound: d - n + 1 });
                    }
                    ranges.push((b as usize, n));
                }
                Ok(vec![slice_ranges(x, &ranges)])
            }
            SlicingOp::StridedSlice { .. } => {
                let plan = self.strided_spec().unwrap_or_default().resolve(types[0].shape.dims())?;
                let whole = |(a, &d): (&AxisSelect, &usize)| *a == AxisSelect::Range { start: 0, len: d, step: 1 };
                if plan.out.len() == x.rank() && plan.axes.iter().zip(x.shape()).all(whole) {
                    return Ok(inputs);
                }
                Ok(vec![crate::dispatch!(x, a => strided_kernel(a, &plan))])
            }
            SlicingOp::Pad { paddings, mode } => {
                if paddings.iter().all(|&p| p == (0, 0)) {
                    return Ok(inputs);
                }
                Ok(vec![crate::dispatch!(x, a => pad_kernel(a, paddings, *mode)?)])
            }
            SlicingOp::Reverse { axes } => {
                let axes = norm_axes(op, axes, x.rank(), true)?;
                if axes.iter().all(|&ax| x.shape()[ax] <= 1) {
                    return Ok(inputs);
                }
                Ok(vec![crate::dispatch!(x, a => {
                    let mut v = a.view();
                    for &ax in &axes {
                        v.invert_axis(Axis(ax));
                    }
                    copy_view(v)
                })])
            }
            SlicingOp::Roll { axes } => {
                let shift = inputs[1].to_vec::<i64>()?;
                // Net rotation per axis, in [0, dim).
                let mut net = vec![0usize; x.rank()];
                for (&ax, &s) in norm_axes(op, axes, x.rank(), false)?.iter().zip(&shift) {
                    let d = x.shape()[ax];
                    if d > 0 {
                        net[ax] = (net[ax] + s.rem_euclid(d as i64) as usize) % d;
                    }
                }
                if net.iter().all(|&k| k == 0) {
                    return Ok(vec![x.clone()]);
                }
                Ok(vec![crate::dispatch!(x, a => roll_kernel(a, &net)?)])
            }
        }
    }
}

impl fmt::Display for SlicingOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        match self {
            SlicingOp::Concat { axis } => write!(f, "{name}{{axis={axis}}}"),
            SlicingOp::Split { axis, sizes } => write!(f, "{name}{{axis={axis}, sizes={sizes:?}}}"),
            SlicingOp::Slice { begin, size } => write!(f, "{name}{{begin={begin:?}, size={size:?}}}"),
            SlicingOp::DynamicSlice { sizes } => write!(f, "{name}{{sizes={sizes:?}}}"),
            SlicingOp::StridedSlice { .. } => {
                let s = self.strided_spec().unwrap_or_default();
                write!(f, "{name}{{begin={:?}, end={:?}, strides={:?}", s.begin, s.end, s.strides)?;
                let masks = [
                    ("begin_mask", s.begin_mask),
                    ("end_mask", s.end_mask),
                    ("ellipsis_mask", s.ellipsis_mask),
                    ("new_axis_mask", s.new_axis_mask),
                    ("shrink_axis_mask", s.shrink_axis_mask),
                ];
                for (k, m) in masks.iter().filter(|(_, m)| *m != 0) {
                    write!(f, ", {k}={m:#b}")?;
                }
                write!(f, "}}")
            }
            SlicingOp::Pad { paddings, mode } => write!(f, "{name}{{paddings={paddings:?}, mode={mode:?}}}"),
            SlicingOp::Reverse { axes } => write!(f, "{name}{{axes={axes:?}}}"),
            SlicingOp::Roll { axes } => write!(f, "{name}{{axes={axes:?}}}"),
        }
    }
}
