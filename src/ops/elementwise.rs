//! The elementwise family: `select` (where), `cast`, `clip`.
//!
//! Invariants:
//! - `select(cond, x, y)`: `cond` is bool, `x` and `y` share one dtype; the three shapes
//!   broadcast numpy-style to the output shape; output = `x` where `cond` else `y`;
//! - `cast{to}`: same shape, dtype `to`, with [`Tensor::cast`] semantics (float→int truncates
//!   toward zero and saturates, NaN→0; nonzero→true; bool→1/0); a cast to the same dtype
//!   is free;
//! - `clip(x, lo, hi)`: numeric, one dtype for all three; `lo`/`hi` must broadcast TO the
//!   shape of `x`, which is the output shape; output = `min(max(x, lo), hi)` (so `hi` wins
//!   when `lo > hi`; a NaN operand gives NaN).
//!
//! Kernels write in place into an owned input buffer that has the output shape, and run in
//! parallel (rayon) above [`PAR_THRESHOLD`] elements.

use std::fmt;

use ndarray::{ArcArray, ArrayView, IxDyn, Zip};

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::binary::{nan_max, nan_min};
use crate::ops::unary::PAR_THRESHOLD;
use crate::ops::{Batching, Op, Raises, broadcast_shapes, broadcast_static, expect_arity, expect_dtype};
use crate::tensor::{DType, Dim, Element, Shape, Tensor, TensorType};

/// Ops of the elementwise family.
#[derive(Clone, Debug, PartialEq)]
pub enum ElementwiseOp {
    /// `select(cond, x, y)`: `x` where `cond` else `y`, with 3-way broadcasting.
    Select,
    /// Convert to another dtype.
    Cast {
        /// Target dtype.
        to: DType,
    },
    /// `clip(x, lo, hi)` = `min(max(x, lo), hi)`; `lo`/`hi` broadcast to `x`'s shape.
    Clip,
}

/// Kinds of the elementwise family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementwiseKind {
    /// `select`.
    Select,
    /// `cast`.
    Cast,
    /// `clip`.
    Clip,
}

impl ElementwiseKind {
    /// Every kind.
    pub const ALL: &'static [ElementwiseKind] =
        &[ElementwiseKind::Select, ElementwiseKind::Cast, ElementwiseKind::Clip];
    /// The op name.
    ///
    /// ```
    /// use pfor::ops::{Batching, ElementwiseKind, ElementwiseOp, Raises};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(ElementwiseKind::Select.name(), "select");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ElementwiseKind::Select => "select",
            ElementwiseKind::Cast => "cast",
            ElementwiseKind::Clip => "clip",
        }
    }
    /// Which inputs' values can make the op fail ([`Raises`]): none (`cast` saturates,
    /// `clip` with `lo > hi` returns `hi`).
    ///
    /// ```
    /// use pfor::ops::{Batching, ElementwiseKind, ElementwiseOp, Raises};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(ElementwiseKind::Cast.raises(), Raises::Never); // a cast saturates
    /// # Ok(())
    /// # }
    /// ```
    pub fn raises(self) -> Raises {
        Raises::Never
    }
    /// How pfor batches the op ([`Batching`]): `clip` stacks `x` only when a bound is
    /// stacked, by hand (`converters/elementwise.rs`).
    ///
    /// ```
    /// use pfor::ops::{Batching, ElementwiseKind, ElementwiseOp, Raises};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(ElementwiseKind::Select.batching(), Batching::Broadcasting);
    /// assert_eq!(ElementwiseKind::Clip.batching(), Batching::Custom); // its own converter
    /// # Ok(())
    /// # }
    /// ```
    pub fn batching(self) -> Batching {
        match self {
            ElementwiseKind::Select => Batching::Broadcasting,
            ElementwiseKind::Cast => Batching::Elementwise,
            ElementwiseKind::Clip => Batching::Custom,
        }
    }
}

/// Static check that `from` broadcasts to `to` (dynamic dims are checked at run time).
fn broadcasts_to(op: &str, what: &str, from: &Shape, to: &Shape) -> Result<()> {
    let err = || Error::shape(op, format!("{what} of shape {from} does not broadcast to {to}"));
    if from.rank() > to.rank() {
        return Err(err());
    }
    let off = to.rank() - from.rank();
    for (i, d) in from.dims().iter().enumerate() {
        if let (Dim::Fixed(f), Dim::Fixed(t)) = (d, to.dim(off + i))
            && *f != 1
            && f != t
        {
            return Err(err());
        }
    }
    Ok(())
}

fn same_dtype(op: &str, what: &str, want: DType, got: DType) -> Result<()> {
    if want != got {
        return Err(Error::dtype(op, format!("{want} (the dtype of x) for {what}"), got));
    }
    Ok(())
}

impl ElementwiseOp {
    /// The kind.
    ///
    /// ```
    /// use pfor::ops::{Batching, ElementwiseKind, ElementwiseOp, Raises};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(ElementwiseOp::Cast { to: DType::I64 }.kind(), ElementwiseKind::Cast);
    /// # Ok(())
    /// # }
    /// ```
    pub fn kind(&self) -> ElementwiseKind {
        match self {
            ElementwiseOp::Select => ElementwiseKind::Select,
            ElementwiseOp::Cast { .. } => ElementwiseKind::Cast,
            ElementwiseOp::Clip => ElementwiseKind::Clip,
        }
    }

    /// Shape and dtype inference.
    ///
    /// ```
    /// use pfor::ops::{Batching, ElementwiseKind, ElementwiseOp, Raises};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let cast = ElementwiseOp::Cast { to: DType::I64 };
    /// assert_eq!(cast.infer(&[TensorType::new(DType::F32, [2])])?, [TensorType::new(DType::I64, [2])]);
    /// let cond = TensorType::new(DType::Bool, [2, 1]);
    /// let x = TensorType::new(DType::F32, [3]);
    /// let out = ElementwiseOp::Select.infer(&[cond, x.clone(), x])?; // 3-way broadcasting
    /// assert_eq!(out, [TensorType::new(DType::F32, [2, 3])]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        match self {
            ElementwiseOp::Select => {
                expect_arity(op, inputs, 3)?;
                let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
                expect_dtype(op, c, DType::Bool)?;
                same_dtype(op, "y", x.dtype, y.dtype)?;
                let s = broadcast_static(op, &c.shape, &x.shape)?;
                let shape = broadcast_static(op, &s, &y.shape)?;
                Ok(vec![TensorType { dtype: x.dtype, shape }])
            }
            ElementwiseOp::Cast { to } => {
                expect_arity(op, inputs, 1)?;
                Ok(vec![TensorType { dtype: *to, shape: inputs[0].shape.clone() }])
            }
            ElementwiseOp::Clip => {
                expect_arity(op, inputs, 3)?;
                let (x, lo, hi) = (&inputs[0], &inputs[1], &inputs[2]);
                if !x.dtype.is_numeric() {
                    return Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", x.dtype));
                }
                same_dtype(op, "lo", x.dtype, lo.dtype)?;
                same_dtype(op, "hi", x.dtype, hi.dtype)?;
                broadcasts_to(op, "lo", &lo.shape, &x.shape)?;
                broadcasts_to(op, "hi", &hi.shape, &x.shape)?;
                Ok(vec![x.clone()])
            }
        }
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        let out = match self {
            ElementwiseOp::Cast { to } => {
                expect_arity(op, &inputs, 1)?;
                inputs[0].cast(*to)
            }
            ElementwiseOp::Select => {
                let [c, x, y] = three(op, inputs)?;
                if c.dtype() != DType::Bool {
                    return Err(Error::dtype(op, "bool", c.dtype()));
                }
                same_dtype(op, "y", x.dtype(), y.dtype())?;
                let c = c.into_array::<bool>()?;
                crate::dispatch_dtype!(x.dtype(), T => select::<T>(op, &c, x.into_array()?, y.into_array()?)?)
            }
            ElementwiseOp::Clip => {
                let [x, lo, hi] = three(op, inputs)?;
                let dt = x.dtype();
                same_dtype(op, "lo", dt, lo.dtype())?;
                same_dtype(op, "hi", dt, hi.dtype())?;
                crate::dispatch_numeric!(dt, T => clip::<T>(op, x.into_array()?, &lo.into_array()?, &hi.into_array()?)?,
                    _ => return Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", dt)))
            }
        };
        Ok(vec![out])
    }
}

fn three(op: &str, inputs: Vec<Tensor>) -> Result<[Tensor; 3]> {
    let n = inputs.len();
    inputs.try_into().map_err(|_| Error::arity(op, "3", n))
}

fn view_as<'a, T>(op: &str, what: &str, a: &'a ArcArray<T, IxDyn>, shape: &[usize]) -> Result<ArrayView<'a, T, IxDyn>> {
    a.broadcast(IxDyn(shape))
        .ok_or_else(|| Error::shape(op, format!("{what} of shape {:?} does not broadcast to {shape:?}", a.shape())))
}

fn select<T: Element>(
    op: &str,
    c: &ArcArray<bool, IxDyn>,
    mut x: ArcArray<T, IxDyn>,
    mut y: ArcArray<T, IxDyn>,
) -> Result<Tensor> {
    let shape = broadcast_shapes(op, &broadcast_shapes(op, c.shape(), x.shape())?, y.shape())?;
    let par = shape.iter().product::<usize>() >= PAR_THRESHOLD;
    let cv = view_as(op, "cond", c, &shape)?;
    if x.shape() == shape.as_slice() && x.is_unique() {
        let yv = view_as(op, "y", &y, &shape)?;
        let z = Zip::from(x.view_mut()).and(&cv).and(&yv);
        let f = |o: &mut T, &c: &bool, &v: &T| {
            if !c {
                *o = v
            }
        };
        if par {
            z.par_for_each(f)
        } else {
            z.for_each(f)
        }
        return Ok(T::wrap(x));
    }
    if y.shape() == shape.as_slice() && y.is_unique() {
        let xv = view_as(op, "x", &x, &shape)?;
        let z = Zip::from(y.view_mut()).and(&cv).and(&xv);
        let f = |o: &mut T, &c: &bool, &v: &T| {
            if c {
                *o = v
            }
        };
        if par {
            z.par_for_each(f)
        } else {
            z.for_each(f)
        }
        return Ok(T::wrap(y));
    }
    let (xv, yv) = (view_as(op, "x", &x, &shape)?, view_as(op, "y", &y, &shape)?);
    let z = Zip::from(&cv).and(&xv).and(&yv);
    let f = |&c: &bool, &a: &T, &b: &T| if c { a } else { b };
    let out = if par { z.par_map_collect(f) } else { z.map_collect(f) };
    Ok(T::wrap(out.into_shared()))
}

fn clip<T: Element + PartialOrd>(
    op: &str,
    mut x: ArcArray<T, IxDyn>,
    lo: &ArcArray<T, IxDyn>,
    hi: &ArcArray<T, IxDyn>,
) -> Result<Tensor> {
    let shape = x.shape().to_vec();
    let par = x.len() >= PAR_THRESHOLD;
    let (lv, hv) = (view_as(op, "lo", lo, &shape)?, view_as(op, "hi", hi, &shape)?);
    let f = |v: T, l: T, h: T| nan_min(nan_max(v, l), h);
    if x.is_unique() {
        let z = Zip::from(x.view_mut()).and(&lv).and(&hv);
        let g = |o: &mut T, &l: &T, &h: &T| *o = f(*o, l, h);
        if par {
            z.par_for_each(g)
        } else {
            z.for_each(g)
        }
        return Ok(T::wrap(x));
    }
    let z = Zip::from(&x).and(&lv).and(&hv);
    let g = |&v: &T, &l: &T, &h: &T| f(v, l, h);
    let out = if par { z.par_map_collect(g) } else { z.map_collect(g) };
    Ok(T::wrap(out.into_shared()))
}

impl fmt::Display for ElementwiseOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElementwiseOp::Cast { to } => write!(f, "cast{{to={to}}}"),
            o => f.write_str(o.kind().name()),
        }
    }
}

impl Graph {
    /// `select(cond, x, y)`: `x` where `cond` (bool) else `y`, with numpy broadcasting of
    /// all three; `x` and `y` must share one dtype.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let c = g.constant(Tensor::vec1(&[true, false]));
    /// let (a, b) = (g.constant(Tensor::vec1(&[1.0f32, 2.0])), g.constant(Tensor::scalar(0.0f32)));
    /// let s = g.select(c, a, b)?; // b broadcast
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_vec::<f32>()?, [1.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select(&mut self, cond: ValueId, x: ValueId, y: ValueId) -> Result<ValueId> {
        self.add_op(Op::Elementwise(ElementwiseOp::Select), &[cond, x, y])
    }

    /// Cast `x` to dtype `to` (float→int truncates toward zero; nonzero→true).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.7f64, -0.5]));
    /// let i = g.cast(x, DType::I64)?;
    /// assert_eq!(run_once(&g, &[i], &[])?[0].to_vec::<i64>()?, [1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cast(&mut self, x: ValueId, to: DType) -> Result<ValueId> {
        self.add_op(Op::Elementwise(ElementwiseOp::Cast { to }), &[x])
    }

    /// `clip(x, lo, hi)` = `min(max(x, lo), hi)`; `lo`/`hi` (same dtype as `x`, numeric)
    /// must broadcast to `x`'s shape.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[-2.0f32, 0.5, 3.0]));
    /// let (lo, hi) = (g.scalar(DType::F32, -1.0), g.scalar(DType::F32, 1.0));
    /// let c = g.clip(x, lo, hi)?;
    /// assert_eq!(run_once(&g, &[c], &[])?[0].to_vec::<f32>()?, [-1.0, 0.5, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn clip(&mut self, x: ValueId, lo: ValueId, hi: ValueId) -> Result<ValueId> {
        self.add_op(Op::Elementwise(ElementwiseOp::Clip), &[x, lo, hi])
    }

    /// A rank-0 constant of `x`'s dtype holding `v`. Errors if `v` is not exactly
    /// representable: a non-integer or out-of-range value for i64, anything but 0 or 1 for bool.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let i = g.input("i", DType::I64, [3]);
    /// let two = g.scalar_like(i, 2.0)?;
    /// assert_eq!(g.dtype(two)?, DType::I64);
    /// assert!(g.scalar_like(i, 0.5).is_err()); // not an integer
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar_like(&mut self, x: ValueId, v: f64) -> Result<ValueId> {
        let dtype = self.dtype(x)?;
        let ok = match dtype {
            DType::I64 => v.fract() == 0.0 && v >= -(2f64.powi(63)) && v < 2f64.powi(63),
            DType::Bool => v == 0.0 || v == 1.0,
            DType::F32 | DType::F64 => true,
        };
        if !ok {
            return Err(Error::InvalidArgument(format!("scalar_like: {v} is not representable as {dtype}")));
        }
        Ok(self.scalar(dtype, v))
    }

    /// `x + v` with `v` a scalar of `x`'s dtype (see [`Graph::scalar_like`]).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1i64, 2]));
    /// let y = g.add_scalar(x, 10.0)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<i64>()?, [11, 12]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_scalar(&mut self, x: ValueId, v: f64) -> Result<ValueId> {
        let s = self.scalar_like(x, v)?;
        self.add(x, s)
    }

    /// `x * v` with `v` a scalar of `x`'s dtype (see [`Graph::scalar_like`]).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.0f32, 2.0]));
    /// let y = g.mul_scalar(x, 0.5)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [0.5, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn mul_scalar(&mut self, x: ValueId, v: f64) -> Result<ValueId> {
        let s = self.scalar_like(x, v)?;
        self.mul(x, s)
    }
}
