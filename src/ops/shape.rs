//! Shape manipulation: reshape, transpose, expand/squeeze, broadcast, tile, fill, shape
//! queries, identity, one-hot, range, stack/unstack.
//!
//! Semantics and invariants:
//! - layout ops are views when possible: `transpose` permutes strides (a non-contiguous
//!   view), `expand_dims`, `squeeze`, `unstack` and `identity` never copy, `reshape` copies
//!   only when its input is not in standard (row-major) layout; `broadcast_to` and `tile`
//!   materialize a standard-layout result;
//! - negative axes count from the end; for ops that insert an axis (`expand_dims`,
//!   `stack`, `one_hot`) the valid range is `[-rank-1, rank]` of the input (`-1` = new last);
//! - dynamic dims propagate: `reshape` with a `-1` over a dynamic input gives a dynamic dim
//!   (it keeps the input's dim symbol when it provably equals it), every fixed dim is still
//!   checked at build time and every dynamic one at run time (`Error::Shape`);
//! - the `*_dyn` variants read a shape from an i64 1-D tensor whose length is a fixed static
//!   dim; their output dims are dynamic (except where the input fixes them);
//! - `match_shape(x, like)` is `x`, after an `Error::Shape` unless x's shape past its first
//!   `x_lead` dims equals like's past its first `like_lead` (fixed dims at build time, all at
//!   run time): the guard of seeds and tangents whose dims are only known at run time;
//! - `one_hot` follows TensorFlow: out-of-range indices (negative included) give an
//!   all-`off` row; `range` has `ceil((limit-start)/delta)` elements (at least 0) and errors
//!   on `delta == 0` or a non-finite count;
//! - huge sizes requested through data (`fill_dyn`, `range`...) are an `Err`, never an abort;
//!   `unstack` makes at most [`MAX_UNSTACK`] values and a shape operand has at most
//!   [`MAX_SHAPE_OPERAND`] entries (a huge fixed dim would otherwise allocate a list of
//!   types or dims before anything else can refuse it);
//! - `loop_max` (i64 sizes `>= 0`, else an `Err`) is the identity outside pfor; inside pfor
//!   it is a collective, like JAX's `pmax` over the vmapped axis: the element-wise maximum
//!   over the loop's iterations (0 for none), loop-invariant. It is the one op whose pfor
//!   result is not the stack of its per-iteration results, so use it only where ANY value
//!   `>=` each iteration's own gives the same final results (a buffer capacity, a trip
//!   bound over steps that are no-ops past an iteration's own count).

use std::fmt;

use ndarray::{ArcArray, ArrayView, Axis, IxDyn};

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::kernels::alloc::{checked_len as count, try_filled, try_vec};
use crate::ops::EvalCtx;
use crate::ops::{Batching, Linearity, Op, Raises, expect_arity, expect_dtype, norm_axis};
use crate::tensor::{DType, Dim, Element, Shape, Tensor, TensorType};

mod builders;
mod kernels;

use kernels::*;

/// The most values one `unstack` makes (its axis's size).
pub const MAX_UNSTACK: usize = 1 << 16;

/// The longest shape operand of `reshape_dyn`, `broadcast_to_dyn` and `fill_dyn` (the
/// result's rank; the output type is built from it before anything runs).
pub const MAX_SHAPE_OPERAND: usize = 1 << 10;

/// Ops of the shape family.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapeOp {
    /// Row-major reshape; at most one `-1` (inferred), other entries `>= 0`.
    Reshape {
        /// Target shape (`-1` = inferred).
        shape: Vec<i64>,
    },
    /// Reshape to the values of input 1 (i64 1-D, fixed length); one `-1` allowed.
    ReshapeDyn,
    /// Permute axes: output axis `i` is input axis `perm[i]`.
    Transpose {
        /// A permutation of `0..rank`.
        perm: Vec<usize>,
    },
    /// Insert a size-1 axis at `axis` (`[-rank-1, rank]`).
    ExpandDims {
        /// Position of the new axis in the output.
        axis: i64,
    },
    /// Remove size-1 axes.
    Squeeze {
        /// Axes to remove (each must be 1); empty = every FIXED size-1 dim (only for fully
        /// fixed inputs; the builder resolves it to an explicit list).
        axes: Vec<i64>,
    },
    /// Numpy broadcast to a fixed shape.
    BroadcastTo {
        /// Target shape.
        shape: Vec<usize>,
    },
    /// Numpy broadcast to the shape held by input 1 (i64 1-D, fixed length).
    BroadcastToDyn,
    /// Repeat the tensor `multiples[i]` times along axis `i`.
    Tile {
        /// One multiple per axis.
        multiples: Vec<usize>,
    },
    /// A tensor of `shape` filled with the scalar input.
    Fill {
        /// Output shape.
        shape: Vec<usize>,
    },
    /// Inputs `(shape: i64 1-D fixed length, value: scalar)`: a filled tensor.
    FillDyn,
    /// Zeros of the input's type.
    ZerosLike,
    /// Ones (`true` for bool) of the input's type.
    OnesLike,
    /// The input's shape as i64 `[rank]`.
    ShapeOf,
    /// The input's element count as an i64 scalar.
    Size,
    /// The input's rank as an i64 scalar.
    Rank,
    /// The input, unchanged.
    Identity,
    /// The input, unchanged; autodiff treats it as a constant.
    StopGradient,
    /// One-hot encoding of i64 indices along a new axis.
    OneHot {
        /// Size of the new axis.
        depth: usize,
        /// Position of the new axis (`-1` = last).
        axis: i64,
        /// Value at the index.
        on: f64,
        /// Value elsewhere (and everywhere for out-of-range indices).
        off: f64,
        /// Output dtype.
        dtype: DType,
    },
    /// Inputs `(start, limit, delta)`: scalars of one numeric dtype; 1-D output.
    Range,
    /// An i64 size bound (values `>= 0`): the input outside pfor; inside pfor, the maximum
    /// over the loop's iterations (see the module docs).
    LoopMax,
    /// Stack equal-typed inputs along a new axis.
    Stack {
        /// Position of the new axis (`[-rank-1, rank]`).
        axis: i64,
    },
    /// Input `x`, unchanged, checked to have the shape of input `like` (past `x_lead` and
    /// `like_lead` leading dims respectively, which pfor adds for the loop axis).
    MatchShape {
        /// Leading dims of `x` not compared.
        x_lead: usize,
        /// Leading dims of `like` not compared.
        like_lead: usize,
    },
    /// Split along a fixed axis of size `num` into `num` outputs (the axis removed).
    Unstack {
        /// The axis (`[-rank, rank)`).
        axis: i64,
        /// Its size (number of outputs).
        num: usize,
    },
}

macro_rules! shape_kinds {
    ($($variant:ident => $name:literal,)*) => {
        /// Kinds of the shape family.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ShapeKind { $(#[doc = $name] $variant,)* }
        impl ShapeKind {
            /// Every kind.
            pub const ALL: &'static [ShapeKind] = &[$(ShapeKind::$variant,)*];
            /// The op name.
            pub fn name(self) -> &'static str { match self { $(ShapeKind::$variant => $name,)* } }
        }
        impl ShapeOp {
            /// The kind.
            pub fn kind(&self) -> ShapeKind { match self { $(ShapeOp::$variant { .. } => ShapeKind::$variant,)* } }
        }
    };
}

shape_kinds! {
    Reshape => "reshape", ReshapeDyn => "reshape_dyn", Transpose => "transpose",
    ExpandDims => "expand_dims", Squeeze => "squeeze", BroadcastTo => "broadcast_to",
    BroadcastToDyn => "broadcast_to_dyn", Tile => "tile", Fill => "fill", FillDyn => "fill_dyn",
    ZerosLike => "zeros_like", OnesLike => "ones_like", ShapeOf => "shape_of", Size => "size",
    Rank => "rank", Identity => "identity", StopGradient => "stop_gradient", OneHot => "one_hot",
    Range => "range", LoopMax => "loop_max", Stack => "stack", Unstack => "unstack",
    MatchShape => "match_shape",
}

impl ShapeKind {
    /// Which inputs' values can make the op fail, or set its result's shape ([`Raises`]):
    /// the run-time shape of `reshape_dyn`, `broadcast_to_dyn` (input 1) and `fill_dyn`
    /// (input 0), the bounds of `range` and the sizes of `loop_max`. The other ops read only
    /// shapes and attributes (`one_hot` writes `off` for an index out of range).
    pub fn raises(self) -> Raises {
        use ShapeKind::*;
        match self {
            ReshapeDyn | BroadcastToDyn => Raises::On(&[1]),
            FillDyn | LoopMax => Raises::On(&[0]),
            Range => Raises::On(&[0, 1, 2]),
            _ => Raises::Never,
        }
    }

    /// How pfor batches the op ([`Batching`]): `identity` / `stop_gradient` re-emit on the
    /// stacked value, the ops with one axis attribute move it past the loop axis; the
    /// others take a shape attribute or input, or stay loop-invariant (`shape_of`...), by
    /// hand (`converters/shape.rs`).
    pub fn batching(self) -> Batching {
        use ShapeKind::*;
        match self {
            Identity | StopGradient => Batching::Elementwise,
            ExpandDims | OneHot | Stack | Unstack => Batching::AxisMapped,
            _ => Batching::Custom,
        }
    }

    /// Where the op is linear ([`Linearity`]): every op that moves or copies the elements
    /// of its data input (the shape operands are held fixed); the others build values from
    /// shapes alone (no derivative).
    pub fn linearity(self) -> Linearity {
        use ShapeKind::*;
        match self {
            Reshape | Transpose | ExpandDims | Squeeze | BroadcastTo | Tile | Fill | Identity | Stack | Unstack => {
                Linearity::Linear
            }
            ReshapeDyn | BroadcastToDyn | MatchShape => Linearity::LinearIn(&[0]),
            FillDyn => Linearity::LinearIn(&[1]),
            StopGradient | ZerosLike | OnesLike | ShapeOf | Size | Rank | LoopMax | OneHot | Range => {
                Linearity::NonLinear
            }
        }
    }
}

// ---------------------------------------------------------------------------------------

impl ShapeOp {
    /// The op with its axis attribute mapped through `f` (`None` without one; a
    /// permutation or a set of squeezed axes is not a plain axis attribute).
    pub fn map_axes(&self, f: &dyn Fn(i64) -> i64) -> Option<ShapeOp> {
        let mut op = self.clone();
        match &mut op {
            ShapeOp::ExpandDims { axis }
            | ShapeOp::OneHot { axis, .. }
            | ShapeOp::Stack { axis }
            | ShapeOp::Unstack { axis, .. } => *axis = f(*axis),
            _ => return None,
        }
        Some(op)
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        use ShapeOp as O;
        let op = self.kind().name();
        let arity = match self {
            O::ReshapeDyn | O::BroadcastToDyn | O::FillDyn | O::MatchShape { .. } => 2,
            O::Range => 3,
            O::Stack { .. } => {
                if inputs.is_empty() {
                    return Err(Error::arity(op, "at least 1", 0));
                }
                inputs.len()
            }
            _ => 1,
        };
        expect_arity(op, inputs, arity)?;
        let x = &inputs[0];
        let out = |shape: Shape| Ok(vec![TensorType { dtype: x.dtype, shape }]);
        match self {
            O::Reshape { shape: spec } => {
                let n = num_elements(op, &x.shape)?;
                if let Dim::Fixed(n) = n {
                    return out(Shape::fixed(&resolve_reshape(op, spec, n, &x.shape)?));
                }
                let (infer_at, known) = parse_spec(op, spec)?;
                let fixed_dims: Vec<usize> = x.shape.dims().iter().filter_map(Dim::value).collect();
                let fixed = count(op, &fixed_dims)?;
                let dynamic: Vec<&Dim> = x.shape.dims().iter().filter(|d| !d.is_fixed()).collect();
                let mut dims: Vec<Dim> = spec.iter().map(|&d| Dim::Fixed(d.max(0) as usize)).collect();
                match infer_at {
                    // n = fixed * (dynamic dims) must equal `known`.
                    None if !known.is_multiple_of(fixed) => {
                        return Err(Error::shape(op, format!("cannot reshape {} to {spec:?}", x.shape)));
                    }
                    None => {}
                    Some(i) => {
                        dims[i] =
                            if dynamic.len() == 1 && fixed == known { dynamic[0].clone() } else { Dim::unknown() };
                    }
                }
                out(Shape::from_dims(dims))
            }
            O::ReshapeDyn => {
                let k = shape_operand_len(op, &inputs[1])?;
                out(Shape::from_dims(vec![Dim::unknown(); k]))
            }
            O::Transpose { perm } => {
                check_perm(op, perm, x.rank())?;
                out(Shape::from_dims(perm.iter().map(|&p| x.shape.dim(p).clone())))
            }
            O::ExpandDims { axis } => {
                let ax = norm_insert_axis(op, *axis, x.rank())?;
                let mut d = x.shape.dims().to_vec();
                d.insert(ax, Dim::Fixed(1));
                out(Shape::from_dims(d))
            }
            O::Squeeze { axes } => {
                if axes.is_empty() {
                    if !x.shape.is_fixed() {
                        return Err(Error::shape(
                            op,
                            format!("empty axes need a fully fixed input, got {}; list the axes", x.shape),
                        ));
                    }
                    return out(Shape::from_dims(x.shape.dims().iter().filter(|d| **d != Dim::Fixed(1)).cloned()));
                }
                let ax = squeeze_axes(op, axes, x.rank())?;
                for &a in &ax {
                    if let Dim::Fixed(d) = x.shape.dim(a)
                        && *d != 1
                    {
                        return Err(Error::shape(op, format!("cannot squeeze axis {a} of size {d} in {}", x.shape)));
                    }
                }
                let dims = x.shape.dims().iter().enumerate().filter(|(i, _)| !ax.contains(i)).map(|(_, d)| d.clone());
                out(Shape::from_dims(dims))
            }
            O::BroadcastTo { shape } => {
                let t: Vec<Dim> = shape.iter().map(|&d| Dim::Fixed(d)).collect();
                out(broadcast_static_to(op, &x.shape, &t)?)
            }
            O::BroadcastToDyn => {
                let k = shape_operand_len(op, &inputs[1])?;
                out(broadcast_static_to(op, &x.shape, &vec![Dim::unknown(); k])?)
            }
            O::Tile { multiples } => {
                if multiples.len() != x.rank() {
                    return Err(Error::shape(op, format!("{} multiples for shape {}", multiples.len(), x.shape)));
                }
                let dims: Option<Vec<Dim>> =
                    x.shape.dims().iter().zip(multiples).map(|(d, &m)| d.mul(&Dim::Fixed(m))).collect();
                out(Shape::from_dims(dims.ok_or_else(|| Error::shape(op, "tiled shape overflows"))?))
            }
            O::Fill { shape } => {
                expect_scalar(op, x)?;
                out(Shape::fixed(shape))
            }
            O::FillDyn => {
                let k = shape_operand_len(op, x)?;
                expect_scalar(op, &inputs[1])?;
                Ok(vec![TensorType::new(inputs[1].dtype, vec![Dim::unknown(); k])])
            }
            O::ZerosLike | O::OnesLike | O::Identity | O::StopGradient => Ok(vec![x.clone()]),
            O::MatchShape { x_lead, like_lead } => {
                let like = &inputs[1];
                let (xs, ls) = (x.shape.dims(), like.shape.dims());
                let dims: Option<Vec<Dim>> =
                    (*x_lead <= xs.len() && *like_lead <= ls.len() && xs.len() - x_lead == ls.len() - like_lead)
                        .then(|| xs[*x_lead..].iter().zip(&ls[*like_lead..]).map(|(a, b)| a.unify(b)).collect())
                        .flatten();
                let Some(dims) = dims else {
                    return Err(Error::shape(op, format!("{} does not match {}", x.shape, like.shape)));
                };
                out(Shape::from_dims(xs[..*x_lead].iter().cloned().chain(dims)))
            }
            O::ShapeOf => Ok(vec![TensorType::new(DType::I64, [x.rank()])]),
            O::Size | O::Rank => Ok(vec![TensorType::scalar(DType::I64)]),
            O::LoopMax => {
                expect_dtype(op, x, DType::I64)?;
                Ok(vec![x.clone()])
            }
            O::OneHot { depth, axis, dtype, .. } => {
                expect_dtype(op, x, DType::I64)?;
                let ax = norm_insert_axis(op, *axis, x.rank())?;
                let mut d = x.shape.dims().to_vec();
                d.insert(ax, Dim::Fixed(*depth));
                Ok(vec![TensorType::new(*dtype, d)])
            }
            O::Range => {
                if !x.dtype.is_numeric() {
                    return Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", x.dtype));
                }
                for t in inputs {
                    expect_dtype(op, t, x.dtype)?;
                    expect_scalar(op, t)?;
                }
                Ok(vec![TensorType::new(x.dtype, [Dim::unknown()])])
            }
            O::Stack { axis } => {
                let mut dims = x.shape.dims().to_vec();
                for t in &inputs[1..] {
                    expect_dtype(op, t, x.dtype)?;
                    let bad = || Error::shape(op, format!("cannot stack shapes {} and {}", x.shape, t.shape));
                    if t.rank() != dims.len() {
                        return Err(bad());
                    }
                    for (d, e) in dims.iter_mut().zip(t.shape.dims()) {
                        *d = d.unify(e).ok_or_else(bad)?;
                    }
                }
                let ax = norm_insert_axis(op, *axis, x.rank())?;
                dims.insert(ax, Dim::Fixed(inputs.len()));
                out(Shape::from_dims(dims))
            }
            O::Unstack { axis, num } => {
                let ax = norm_axis(op, *axis, x.rank())?;
                if *num > MAX_UNSTACK {
                    return Err(Error::shape(
                        op,
                        format!(
                            "axis {ax} of {} has {num} elements; unstack makes at most {MAX_UNSTACK} values",
                            x.shape
                        ),
                    ));
                }
                if x.shape.dim(ax) != &Dim::Fixed(*num) {
                    return Err(Error::shape(
                        op,
                        format!("axis {ax} of {} must be fixed and equal num = {num}", x.shape),
                    ));
                }
                let dims = x.shape.dims().iter().enumerate().filter(|(i, _)| *i != ax).map(|(_, d)| d.clone());
                let ty = TensorType::new(x.dtype, Shape::from_dims(dims));
                Ok(vec![ty; *num])
            }
        }
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        self.eval_impl(inputs, None)
    }

    /// Evaluate inside a run (a large `stack` writes into a recycled buffer when one fits).
    pub(crate) fn eval_in(&self, inputs: Vec<Tensor>, ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        self.eval_impl(inputs, Some(ctx))
    }

    fn eval_impl(&self, inputs: Vec<Tensor>, ctx: Option<&mut (dyn EvalCtx + '_)>) -> Result<Vec<Tensor>> {
        use ShapeOp as O;
        let op = self.kind().name();
        let one = |t: Result<Tensor>| t.map(|t| vec![t]);
        match self {
            O::ReshapeDyn | O::BroadcastToDyn | O::FillDyn | O::MatchShape { .. } => {
                expect_arity(op, &inputs, 2)?;
                let (a, b) = (&inputs[0], &inputs[1]);
                match self {
                    O::MatchShape { x_lead, like_lead } => {
                        let (xs, ls) = (a.shape(), b.shape());
                        match (xs.get(*x_lead..), ls.get(*like_lead..)) {
                            (Some(p), Some(q)) if p == q => Ok(vec![a.clone()]),
                            _ => Err(Error::shape(op, format!("{xs:?} does not match {ls:?}"))),
                        }
                    }
                    O::ReshapeDyn => {
                        let spec = b.to_vec::<i64>()?;
                        one(a.reshape(&resolve_reshape(op, &spec, a.len(), &format!("{:?}", a.shape()))?))
                    }
                    O::BroadcastToDyn => one(broadcast_kernel(op, a.clone(), &shape_values(op, b)?)),
                    _ => {
                        let shape = shape_values(op, a)?;
                        one(crate::dispatch!(b, v => filled(op, &shape, first_elem(op, v)?)))
                    }
                }
            }
            O::Range => {
                expect_arity(op, &inputs, 3)?;
                one(crate::dispatch_numeric!(inputs[0].dtype(), T => range_kernel::<T>(op, &inputs),
                    _ => Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", inputs[0].dtype()))))
            }
            O::Stack { axis } => {
                let first = inputs.first().ok_or_else(|| Error::arity(op, "at least 1", 0))?;
                let ax = norm_insert_axis(op, *axis, first.rank())?;
                one(crate::dispatch_dtype!(first.dtype(), T => stack_kernel::<T>(op, &inputs, ax, ctx)))
            }
            _ => self.eval1(op, take1(op, inputs)?),
        }
    }

    /// Evaluate a single-input op.
    fn eval1(&self, op: &str, x: Tensor) -> Result<Vec<Tensor>> {
        use ShapeOp as O;
        let t = match self {
            O::Reshape { shape } => x.reshape(&resolve_reshape(op, shape, x.len(), &format!("{:?}", x.shape()))?)?,
            O::Transpose { perm } => {
                check_perm(op, perm, x.rank())?;
                crate::dispatch!(x, a => Element::wrap(a.permuted_axes(IxDyn(perm))))
            }
            O::ExpandDims { axis } => {
                let ax = norm_insert_axis(op, *axis, x.rank())?;
                crate::dispatch!(x, a => Element::wrap(a.insert_axis(Axis(ax))))
            }
            O::Squeeze { axes } => {
                let ax = if axes.is_empty() {
                    (0..x.rank()).filter(|&i| x.shape()[i] == 1).collect()
                } else {
                    squeeze_axes(op, axes, x.rank())?
                };
                if let Some(&a) = ax.iter().find(|&&a| x.shape()[a] != 1) {
                    return Err(Error::shape(op, format!("cannot squeeze axis {a} of shape {:?}", x.shape())));
                }
                crate::dispatch!(x, a => {
                    let mut a = a;
                    for &i in ax.iter().rev() {
                        a = a.index_axis_move(Axis(i), 0);
                    }
                    Element::wrap(a)
                })
            }
            O::BroadcastTo { shape } => broadcast_kernel(op, x, shape)?,
            O::Tile { multiples } => crate::dispatch!(&x, a => tile_kernel(op, a, multiples))?,
            O::Fill { shape } => crate::dispatch!(&x, a => filled(op, shape, first_elem(op, a)?))?,
            O::ZerosLike | O::OnesLike => {
                let v = if matches!(self, O::OnesLike) { 1.0 } else { 0.0 };
                crate::dispatch!(x, a => {
                    let mut a = a;
                    let v = Element::from_f64(v);
                    if a.is_unique() {
                        a.fill(v);
                        Element::wrap(a)
                    } else {
                        filled(op, a.shape(), v)?
                    }
                })
            }
            O::ShapeOf => Tensor::vec1(&x.shape().iter().map(|&d| d as i64).collect::<Vec<_>>()),
            O::Size => Tensor::scalar(x.len() as i64),
            O::Rank => Tensor::scalar(x.rank() as i64),
            O::Identity | O::StopGradient => x,
            O::LoopMax => {
                if let Some(v) = x.array::<i64>()?.iter().find(|&&v| v < 0) {
                    return Err(Error::shape(op, format!("sizes must be non-negative, got {v}")));
                }
                x
            }
            O::OneHot { depth, axis, on, off, dtype } => {
                let idx = x.array::<i64>()?;
                let ax = norm_insert_axis(op, *axis, idx.ndim())?;
                crate::dispatch_dtype!(*dtype, T => one_hot_kernel::<T>(op, idx, *depth, ax, T::from_f64(*on), T::from_f64(*off)))?
            }
            O::Unstack { axis, num } => {
                let ax = norm_axis(op, *axis, x.rank())?;
                if x.shape()[ax] != *num {
                    return Err(Error::shape(op, format!("axis {ax} of {:?} is not {num}", x.shape())));
                }
                return Ok(
                    crate::dispatch!(&x, a => (0..*num).map(|i| Element::wrap(a.clone().index_axis_move(Axis(ax), i))).collect()),
                );
            }
            O::ReshapeDyn | O::BroadcastToDyn | O::FillDyn | O::Range | O::Stack { .. } | O::MatchShape { .. } => {
                return Err(Error::arity(op, "more than 1", 1));
            }
        };
        Ok(vec![t])
    }
}

impl fmt::Display for ShapeOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ShapeOp as O;
        let name = self.kind().name();
        match self {
            O::Reshape { shape } => write!(f, "{name}{{shape={shape:?}}}"),
            O::Transpose { perm } => write!(f, "{name}{{perm={perm:?}}}"),
            O::ExpandDims { axis } | O::Stack { axis } => write!(f, "{name}{{axis={axis}}}"),
            O::Squeeze { axes } => write!(f, "{name}{{axes={axes:?}}}"),
            O::BroadcastTo { shape } | O::Fill { shape } => write!(f, "{name}{{shape={shape:?}}}"),
            O::Tile { multiples } => write!(f, "{name}{{multiples={multiples:?}}}"),
            O::OneHot { depth, axis, on, off, dtype } => {
                write!(f, "{name}{{depth={depth}, axis={axis}, on={on}, off={off}, dtype={dtype}}}")
            }
            O::Unstack { axis, num } => write!(f, "{name}{{axis={axis}, num={num}}}"),
            O::MatchShape { x_lead, like_lead } => write!(f, "{name}{{x_lead={x_lead}, like_lead={like_lead}}}"),
            _ => f.write_str(name),
        }
    }
}
