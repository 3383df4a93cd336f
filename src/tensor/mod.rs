//! Tensors: a dtype-tagged `ndarray::ArcArray<_, IxDyn>`.
//!
//! Invariants: clones are O(1) (reference-counted buffers; constants and loop-invariant
//! values are never copied); a kernel that owns the only reference to a buffer may write
//! into it in place (`ArcArray` copies on write otherwise). All dtype dispatch goes through
//! the [`dispatch!`](crate::dispatch) family of macros — kernels do not `match` on dtype.
//! Constructors that take a shape check its element count and allocate fallibly
//! (`kernels::alloc`): an overflowing shape or a refused allocation is an `Err`, never a
//! panic or an abort.

mod approx_cmp;
mod dispatch;
pub mod layout;
mod random;
mod shape;

pub use approx_cmp::{Verdict, assert_close, max_abs_diff};
pub use random::{counter_normal, counter_uniform, mix_key, stream_base, stream_bits, stream_normal, stream_uniform};
pub use shape::{Dim, Shape, TensorType};

use std::fmt;

use ndarray::{ArcArray, ArrayD, IxDyn};

use crate::error::{Error, Result};
use crate::kernels::alloc::{checked_len, try_filled, try_vec, try_zeroed};

/// Element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 64-bit signed integer (also used for indices and shapes).
    I64,
    /// Boolean.
    Bool,
}

impl DType {
    /// True for F32/F64.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(DType::F32.is_float() && !DType::I64.is_float());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
    /// True for F32/F64/I64.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(DType::I64.is_numeric() && !DType::Bool.is_numeric());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_numeric(self) -> bool {
        !matches!(self, DType::Bool)
    }
    /// Bytes per element.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!((DType::F32.size(), DType::I64.size(), DType::Bool.size()), (4, 8, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }
    /// Lower-case name.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(DType::F64.name(), "f64");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dense tensor. Cheap to clone.
#[derive(Clone, Debug, PartialEq)]
pub enum Tensor {
    /// f32 data.
    F32(ArcArray<f32, IxDyn>),
    /// f64 data.
    F64(ArcArray<f64, IxDyn>),
    /// i64 data.
    I64(ArcArray<i64, IxDyn>),
    /// bool data.
    Bool(ArcArray<bool, IxDyn>),
}

/// Element types a [`Tensor`] can hold; used by generic constructors.
pub trait Element: Clone + Copy + Send + Sync + fmt::Debug + PartialEq + 'static {
    /// The dtype tag.
    const DTYPE: DType;
    /// Wrap an array.
    fn wrap(a: ArcArray<Self, IxDyn>) -> Tensor;
    /// Borrow the array if the dtype matches.
    fn view(t: &Tensor) -> Option<&ArcArray<Self, IxDyn>>;
    /// Take the array if the dtype matches.
    fn unwrap(t: Tensor) -> std::result::Result<ArcArray<Self, IxDyn>, Tensor>;
    /// Convert from f64 (used for constants such as 0, 1).
    fn from_f64(v: f64) -> Self;
    /// Convert to f64.
    fn to_f64(self) -> f64;
}

macro_rules! impl_element {
    ($t:ty, $variant:ident, $from:expr, $to:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn wrap(a: ArcArray<Self, IxDyn>) -> Tensor {
                Tensor::$variant(a)
            }
            fn view(t: &Tensor) -> Option<&ArcArray<Self, IxDyn>> {
                match t {
                    Tensor::$variant(a) => Some(a),
                    _ => None,
                }
            }
            fn unwrap(t: Tensor) -> std::result::Result<ArcArray<Self, IxDyn>, Tensor> {
                match t {
                    Tensor::$variant(a) => Ok(a),
                    other => Err(other),
                }
            }
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
        }
    };
}
impl_element!(f32, F32, |v: f64| v as f32, |x: f32| x as f64);
impl_element!(f64, F64, |v: f64| v, |x: f64| x);
impl_element!(i64, I64, |v: f64| v as i64, |x: i64| x as f64);
impl_element!(bool, Bool, |v: f64| v != 0.0, |x: bool| if x { 1.0 } else { 0.0 });

impl Tensor {
    /// Build from an owned ndarray of any dimensionality.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::from_array(ndarray::array![[1.0f32, 2.0], [3.0, 4.0]]);
    /// assert_eq!((t.dtype(), t.shape()), (DType::F32, &[2, 2][..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_array<T: Element, D: ndarray::Dimension>(a: ndarray::Array<T, D>) -> Tensor {
        T::wrap(a.into_dyn().into_shared())
    }
    /// Build from a flat vector and a shape.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::from_vec(&[2, 3], vec![0i64, 1, 2, 3, 4, 5])?;
    /// assert_eq!(t.shape(), &[2, 3]);
    /// assert!(Tensor::from_vec(&[2, 2], vec![1.0f32; 3]).is_err()); // 3 elements for 4
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_vec<T: Element>(shape: &[usize], data: Vec<T>) -> Result<Tensor> {
        let n = checked_len("Tensor::from_vec", shape)?;
        if n != data.len() {
            return Err(Error::InvalidArgument(format!(
                "Tensor::from_vec: shape {shape:?} needs {n} elements, got {}",
                data.len()
            )));
        }
        let a = ArrayD::from_shape_vec(IxDyn(shape), data)
            .map_err(|e| Error::InvalidArgument(format!("Tensor::from_vec: {e}")))?;
        Ok(T::wrap(a.into_shared()))
    }
    /// A rank-0 tensor.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::scalar(2.5f64);
    /// assert_eq!((t.rank(), t.scalar_f64()?), (0, 2.5));
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar<T: Element>(v: T) -> Tensor {
        T::wrap(ArrayD::from_elem(IxDyn(&[]), v).into_shared())
    }
    /// A rank-0 tensor of `dtype` holding `v` (cast).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::scalar_of(DType::I64, 3.7).scalar_i64()?, 3); // cast: truncated
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar_of(dtype: DType, v: f64) -> Tensor {
        crate::dispatch_dtype!(dtype, T => Tensor::scalar(T::from_f64(v)))
    }
    /// A rank-1 tensor.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::vec1(&[true, false]).shape(), &[2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn vec1<T: Element>(v: &[T]) -> Tensor {
        T::wrap(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).expect("1-d shape").into_shared())
    }
    /// A tensor filled with `v` (cast to `dtype`). An `Err` when the element count overflows
    /// or the memory cannot be allocated ([`Error::OutOfMemory`]), never a panic or abort;
    /// so for every constructor below that takes a shape.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::full(DType::F32, &[2], 7.0)?.to_vec::<f32>()?, [7.0, 7.0]);
    /// assert!(Tensor::full(DType::F32, &[usize::MAX, 2], 0.0).is_err()); // an error, not an abort
    /// # Ok(())
    /// # }
    /// ```
    pub fn full(dtype: DType, shape: &[usize], v: f64) -> Result<Tensor> {
        Tensor::full_for("Tensor::full", dtype, shape, v)
    }
    /// [`Tensor::full`], errors naming `op` (zeros come zeroed from the allocator).
    pub(crate) fn full_for(op: &str, dtype: DType, shape: &[usize], v: f64) -> Result<Tensor> {
        let n = checked_len(op, shape)?;
        crate::dispatch_dtype!(dtype, T => {
            let data = if v.to_bits() == 0 { try_zeroed::<T>(op, n)? } else { try_filled(op, n, T::from_f64(v))? };
            Tensor::from_vec(shape, data)
        })
    }
    /// Zeros.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::zeros(DType::I64, &[3])?.to_vec::<i64>()?, [0, 0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<Tensor> {
        Tensor::full(dtype, shape, 0.0)
    }
    /// Ones.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::ones(DType::F64, &[2])?.to_f64_vec(), [1.0, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ones(dtype: DType, shape: &[usize]) -> Result<Tensor> {
        Tensor::full(dtype, shape, 1.0)
    }
    /// `[0, 1, ..., n-1]` as i64.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::arange(4)?.to_vec::<i64>()?, [0, 1, 2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn arange(n: usize) -> Result<Tensor> {
        Tensor::generated("Tensor::arange", &[n], |c| c as i64)
    }
    /// Standard normal f32 values from a seed (counter-based, reproducible).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let (a, b) = (Tensor::randn(&[3, 2], 7)?, Tensor::randn(&[3, 2], 7)?);
    /// assert_eq!(a, b); // the same seed gives the same values
    /// assert_eq!(a.dtype(), DType::F32);
    /// # Ok(())
    /// # }
    /// ```
    pub fn randn(shape: &[usize], seed: u64) -> Result<Tensor> {
        Tensor::generated("Tensor::randn", shape, |c| counter_normal(seed, c) as f32)
    }
    /// Standard normal f64 values from a seed.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::randn_f64(&[4], 0)?.dtype(), DType::F64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn randn_f64(shape: &[usize], seed: u64) -> Result<Tensor> {
        Tensor::generated("Tensor::randn_f64", shape, |c| counter_normal(seed, c))
    }
    /// Uniform `[lo, hi)` values of `dtype` (floats, or integers truncated) from a seed.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::rand_uniform(DType::F64, &[100], -1.0, 1.0, 3)?;
    /// assert!(t.to_f64_vec().iter().all(|v| (-1.0..1.0).contains(v)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn rand_uniform(dtype: DType, shape: &[usize], lo: f64, hi: f64, seed: u64) -> Result<Tensor> {
        let t = Tensor::generated("Tensor::rand_uniform", shape, |c| lo + (hi - lo) * counter_uniform(seed, c))?;
        Ok(t.cast(dtype))
    }
    /// A tensor of `shape` whose element `c` (row-major) is `f(c)`, allocated fallibly.
    fn generated<T: Element>(op: &str, shape: &[usize], f: impl Fn(u64) -> T) -> Result<Tensor> {
        let n = checked_len(op, shape)?;
        let mut data = try_vec(op, n)?;
        data.extend((0..n as u64).map(f));
        Tensor::from_vec(shape, data)
    }
    /// The dtype.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::scalar(1i64).dtype(), DType::I64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::F64(_) => DType::F64,
            Tensor::I64(_) => DType::I64,
            Tensor::Bool(_) => DType::Bool,
        }
    }
    /// The concrete shape.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::zeros(DType::F32, &[2, 3])?.shape(), &[2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn shape(&self) -> &[usize] {
        crate::dispatch!(self, a => a.shape())
    }
    /// The rank.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::zeros(DType::F32, &[2, 3])?.rank(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> usize {
        self.shape().len()
    }
    /// Number of elements.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::zeros(DType::F32, &[2, 3])?.len(), 6);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }
    /// Bytes of its elements (a view reports the size of its own elements).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::zeros(DType::F64, &[2, 3])?.nbytes(), 48);
    /// # Ok(())
    /// # }
    /// ```
    pub fn nbytes(&self) -> usize {
        self.len() * self.dtype().size()
    }
    /// True if the tensor has no elements.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(Tensor::zeros(DType::F32, &[0, 3])?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The static type of this concrete tensor.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::zeros(DType::F32, &[2])?.tensor_type(), TensorType::new(DType::F32, [2]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn tensor_type(&self) -> TensorType {
        TensorType::new(self.dtype(), Shape::fixed(self.shape()))
    }
    /// Borrow as an array of `T`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::vec1(&[1.0f32, 2.0]);
    /// assert_eq!(t.array::<f32>()?.sum(), 3.0);
    /// assert!(t.array::<f64>().is_err()); // another element type
    /// # Ok(())
    /// # }
    /// ```
    pub fn array<T: Element>(&self) -> Result<&ArcArray<T, IxDyn>> {
        T::view(self).ok_or_else(|| Error::DType {
            op: "Tensor::array".into(),
            expected: T::DTYPE.to_string(),
            got: self.dtype(),
        })
    }
    /// Take as an array of `T`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let a = Tensor::vec1(&[1i64, 2]).into_array::<i64>()?;
    /// assert_eq!(a[[1]], 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_array<T: Element>(self) -> Result<ArcArray<T, IxDyn>> {
        let got = self.dtype();
        T::unwrap(self).map_err(|_| Error::DType {
            op: "Tensor::into_array".into(),
            expected: T::DTYPE.to_string(),
            got,
        })
    }
    /// Copy out as an owned ndarray of `T`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let a = Tensor::randn(&[2, 2], 0)?.to_array::<f32>()? * 2.0; // ndarray arithmetic
    /// assert_eq!(a.shape(), &[2, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>> {
        Ok(self.array::<T>()?.to_owned())
    }
    /// Elements in row-major order, as `T`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::from_vec(&[2, 2], vec![1i64, 2, 3, 4])?.to_vec::<i64>()?, [1, 2, 3, 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        Ok(layout::standard_vec(&self.array::<T>()?.view()))
    }
    /// Elements in row-major order converted to f64 (any dtype).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::vec1(&[1i64, 2]).to_f64_vec(), [1.0, 2.0]); // any dtype
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_f64_vec(&self) -> Vec<f64> {
        crate::dispatch!(self, a => a.iter().map(|x| x.to_f64()).collect())
    }
    /// The single element of a tensor with one element, as f64.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::vec1(&[4.0f32]).scalar_f64()?, 4.0);
    /// assert!(Tensor::vec1(&[1.0f32, 2.0]).scalar_f64().is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar_f64(&self) -> Result<f64> {
        if self.len() != 1 {
            return Err(Error::InvalidArgument(format!(
                "expected a tensor with one element, got shape {:?}",
                self.shape()
            )));
        }
        Ok(self.to_f64_vec()[0])
    }
    /// The single element of an i64 tensor with one element.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::scalar(9i64).scalar_i64()?, 9);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar_i64(&self) -> Result<i64> {
        let a = self.array::<i64>()?;
        if a.len() != 1 {
            return Err(Error::InvalidArgument(format!(
                "expected an i64 tensor with one element, got shape {:?}",
                self.shape()
            )));
        }
        Ok(*a.iter().next().expect("one element"))
    }
    /// Cast to another dtype (float→int truncates toward zero; nonzero→true).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Tensor::vec1(&[1.9f64, -1.9]).cast(DType::I64).to_vec::<i64>()?, [1, -1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cast(&self, to: DType) -> Tensor {
        if self.dtype() == to {
            return self.clone();
        }
        crate::dispatch!(self, a => {
            crate::dispatch_dtype!(to, U => U::wrap(a.mapv(cast_elem::<_, U>).into_shared()))
        })
    }
    /// Reshape (row-major); errors if the element count differs.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::arange(6)?.reshape(&[2, 3])?;
    /// assert_eq!(t.shape(), &[2, 3]);
    /// assert!(t.reshape(&[4]).is_err()); // 6 elements do not make 4
    /// # Ok(())
    /// # }
    /// ```
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        let n = checked_len("reshape", shape)?;
        if n != self.len() {
            return Err(Error::Shape {
                op: "reshape".into(),
                msg: format!("cannot reshape {:?} ({} elements) to {shape:?}", self.shape(), self.len()),
            });
        }
        Ok(crate::dispatch!(self, a => {
            let std = if a.is_standard_layout() { a.clone() } else { layout::standard_array(&a.view()).into_shared() };
            let r = std.into_shape_with_order(IxDyn(shape));
            wrap_same(a, r.map_err(|e| Error::shape("reshape", format!("{:?} to {shape:?}: {e}", a.shape())))?)
        }))
    }
    /// The buffer of a uniquely owned, standard-layout `T` tensor of exactly `len` elements
    /// (its content is stale to the taker), or `None` (shared, strided, another dtype or size).
    pub(crate) fn into_buffer<T: Element>(self, len: usize) -> Option<Vec<T>> {
        let a = T::unwrap(self).ok()?;
        let (v, offset) = a.try_into_owned_nocopy().ok()?.into_raw_vec_and_offset();
        (offset.unwrap_or(0) == 0 && v.len() == len).then_some(v)
    }

    /// Stack tensors of one dtype and shape along a new axis 0.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let rows = [Tensor::vec1(&[1.0f32, 2.0]), Tensor::vec1(&[3.0f32, 4.0])];
    /// assert_eq!(Tensor::stack(&rows, DType::F32, &[2])?.shape(), &[2, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stack(parts: &[Tensor], dtype: DType, elem_shape: &[usize]) -> Result<Tensor> {
        let mut shape = vec![parts.len()];
        shape.extend_from_slice(elem_shape);
        for (i, p) in parts.iter().enumerate() {
            if p.dtype() != dtype || p.shape() != elem_shape {
                return Err(Error::Shape {
                    op: "stack".into(),
                    msg: format!("part {i} is {}{:?}, expected {dtype}{elem_shape:?}", p.dtype(), p.shape()),
                });
            }
        }
        let n = checked_len("stack", &shape)?;
        crate::dispatch_dtype!(dtype, T => {
            let mut data: Vec<T> = try_vec("stack", n)?;
            for p in parts {
                layout::extend_standard(&p.array::<T>()?.view(), &mut data);
            }
            Tensor::from_vec(&shape, data)
        })
    }
    /// Row `i` of axis 0 (a view, no copy).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::from_vec(&[2, 2], vec![1i64, 2, 3, 4])?;
    /// assert_eq!(t.index_axis0(1)?.to_vec::<i64>()?, [3, 4]);
    /// assert!(t.index_axis0(2).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn index_axis0(&self, i: usize) -> Result<Tensor> {
        if self.rank() == 0 || i >= self.shape()[0] {
            return Err(Error::IndexOutOfRange {
                op: "index_axis0".into(),
                index: i as i64,
                bound: self.shape().first().copied().unwrap_or(0),
            });
        }
        Ok(crate::dispatch!(self, a => {
            let mut v = a.clone();
            v.collapse_axis(ndarray::Axis(0), i);
            wrap_same(a, v.index_axis_move(ndarray::Axis(0), 0))
        }))
    }
    /// Rows `[start, end)` of axis 0 (a view, no copy).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = Tensor::arange(5)?;
    /// assert_eq!(t.slice_axis0(1, 3)?.to_vec::<i64>()?, [1, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn slice_axis0(&self, start: usize, end: usize) -> Result<Tensor> {
        if self.rank() == 0 || start > end || end > self.shape()[0] {
            return Err(Error::InvalidArgument(format!(
                "slice_axis0: [{start}, {end}) out of range for shape {:?}",
                self.shape()
            )));
        }
        Ok(crate::dispatch!(self, a => {
            let mut v = a.clone();
            v.slice_axis_inplace(ndarray::Axis(0), ndarray::Slice::from(start..end));
            wrap_same(a, v)
        }))
    }
    /// Approximate equality (same dtype and shape; floats within `rtol`/`atol`, NaN == NaN).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let a = Tensor::vec1(&[1.0f64, 2.0]);
    /// assert!(a.allclose(&Tensor::vec1(&[1.0f64, 2.0 + 1e-12]), 0.0, 1e-9));
    /// assert!(!a.allclose(&Tensor::vec1(&[1.0f32, 2.0]), 0.0, 1.0)); // another dtype
    /// # Ok(())
    /// # }
    /// ```
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64) -> bool {
        approx_cmp::allclose(self, other, rtol, atol)
    }
}

/// Re-wrap an array of the same element type as `_like` (used by `dispatch!` bodies).
#[doc(hidden)]
pub fn wrap_same<T: Element>(_like: &ArcArray<T, IxDyn>, a: ArcArray<T, IxDyn>) -> Tensor {
    T::wrap(a)
}

/// Element cast with the library's semantics.
pub fn cast_elem<T: Element, U: Element>(x: T) -> U {
    if U::DTYPE == DType::Bool {
        return U::from_f64(if x.to_f64() != 0.0 { 1.0 } else { 0.0 });
    }
    U::from_f64(x.to_f64())
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::dispatch!(self, a => write!(f, "{}{:?} {}", self.dtype(), a.shape(), a))
    }
}

macro_rules! impl_from_array {
    ($($t:ty),*) => {$(
        impl<D: ndarray::Dimension> From<ndarray::Array<$t, D>> for Tensor {
            fn from(a: ndarray::Array<$t, D>) -> Tensor { Tensor::from_array(a) }
        }
        impl From<$t> for Tensor {
            fn from(v: $t) -> Tensor { Tensor::scalar(v) }
        }
    )*};
}
impl_from_array!(f32, f64, i64, bool);

/// A `[n, ..elem]` tensor written one row at a time ([`RowStack::put`]), so that the rows
/// need not all be alive at once (a `for` loop's results: each iteration's row is copied in
/// and dropped). Invariant: every row `0..n` is written before [`RowStack::finish`] is
/// called (a recycled buffer's stale content is otherwise visible).
pub(crate) struct RowStack {
    out: Tensor,
    elem: Vec<usize>,
}

impl RowStack {
    /// For `n` rows of `first`'s dtype and shape; `buf` (a recycled tensor of the stack's
    /// dtype and element count) is overwritten where it fits, else a zeroed buffer is made.
    pub(crate) fn new(op: &str, n: usize, first: &Tensor, buf: Option<Tensor>) -> Result<RowStack> {
        let elem = first.shape().to_vec();
        let mut shape = vec![n];
        shape.extend_from_slice(&elem);
        let len = checked_len(op, &shape)?;
        let out = crate::dispatch_dtype!(first.dtype(), T => match buf.and_then(|b| b.into_buffer::<T>(len)) {
            Some(v) => Tensor::from_vec(&shape, v)?,
            None => Tensor::zeros(first.dtype(), &shape)?,
        });
        Ok(RowStack { out, elem })
    }

    /// Write row `i` (`i < n`); an error naming `op` if `row` differs from the first row's
    /// dtype or shape.
    pub(crate) fn put(&mut self, op: &str, i: usize, row: &Tensor) -> Result<()> {
        fn put<T: Clone>(o: &mut ArcArray<T, IxDyn>, r: &ArcArray<T, IxDyn>, i: usize) {
            o.index_axis_mut(ndarray::Axis(0), i).assign(r);
        }
        match (&mut self.out, row) {
            (Tensor::F32(o), Tensor::F32(r)) if r.shape() == self.elem => put(o, r, i),
            (Tensor::F64(o), Tensor::F64(r)) if r.shape() == self.elem => put(o, r, i),
            (Tensor::I64(o), Tensor::I64(r)) if r.shape() == self.elem => put(o, r, i),
            (Tensor::Bool(o), Tensor::Bool(r)) if r.shape() == self.elem => put(o, r, i),
            _ => {
                return Err(Error::Shape {
                    op: op.into(),
                    msg: format!(
                        "part {i} is {}{:?}, expected {}{:?}",
                        row.dtype(),
                        row.shape(),
                        self.out.dtype(),
                        self.elem
                    ),
                });
            }
        }
        Ok(())
    }

    /// The stacked tensor.
    pub(crate) fn finish(self) -> Tensor {
        self.out
    }
}
