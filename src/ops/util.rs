//! Small helpers shared by every op family: arity/dtype checks, axis normalization and
//! numpy broadcasting (static and concrete), plus broadcasting elementwise kernels.

use ndarray::{ArcArray, ArrayD, IxDyn, Zip};

use crate::error::{Error, Result};
use crate::tensor::{DType, Dim, Element, Shape, TensorType};

/// Error unless exactly `n` inputs were given.
///
/// ```
/// use pfor::ops::{broadcast_shapes, broadcast_static, expect_arity, expect_dtype, expect_float, norm_axis};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let inputs = [TensorType::new(DType::F32, [2])];
/// assert!(expect_arity("my_op", &inputs, 1).is_ok());
/// let e = expect_arity("my_op", &inputs, 2).unwrap_err();
/// assert!(e.to_string().contains("my_op")); // names the op
/// # Ok(())
/// # }
/// ```
pub fn expect_arity<T>(op: &str, inputs: &[T], n: usize) -> Result<()> {
    if inputs.len() != n {
        return Err(Error::arity(op, n.to_string(), inputs.len()));
    }
    Ok(())
}

/// Error unless `ty` has dtype `want`.
///
/// ```
/// use pfor::ops::{broadcast_shapes, broadcast_static, expect_arity, expect_dtype, expect_float, norm_axis};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let t = TensorType::new(DType::I64, [3]);
/// assert!(expect_dtype("my_op", &t, DType::I64).is_ok());
/// assert!(expect_dtype("my_op", &t, DType::F32).is_err());
/// # Ok(())
/// # }
/// ```
pub fn expect_dtype(op: &str, ty: &TensorType, want: DType) -> Result<()> {
    if ty.dtype != want {
        return Err(Error::dtype(op, want.to_string(), ty.dtype));
    }
    Ok(())
}

/// Error unless `ty` is a float type.
///
/// ```
/// use pfor::ops::{broadcast_shapes, broadcast_static, expect_arity, expect_dtype, expect_float, norm_axis};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert!(expect_float("my_op", &TensorType::new(DType::F64, [3])).is_ok());
/// assert!(expect_float("my_op", &TensorType::new(DType::Bool, [3])).is_err());
/// # Ok(())
/// # }
/// ```
pub fn expect_float(op: &str, ty: &TensorType) -> Result<()> {
    if !ty.dtype.is_float() {
        return Err(Error::dtype(op, "a float type (f32 or f64)", ty.dtype));
    }
    Ok(())
}

/// Normalize a possibly negative axis against `rank` (valid range `[-rank, rank)`).
///
/// ```
/// use pfor::ops::{broadcast_shapes, broadcast_static, expect_arity, expect_dtype, expect_float, norm_axis};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert_eq!(norm_axis("my_op", -1, 3)?, 2);
/// assert_eq!(norm_axis("my_op", 0, 3)?, 0);
/// assert!(norm_axis("my_op", 3, 3).is_err()); // valid: [-3, 3)
/// # Ok(())
/// # }
/// ```
pub fn norm_axis(op: &str, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Error::Axis { op: op.into(), axis, rank });
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Static numpy broadcasting of two shapes.
///
/// ```
/// use pfor::ops::{broadcast_shapes, broadcast_static, expect_arity, expect_dtype, expect_float, norm_axis};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let a = Shape::from_dims([Dim::dynamic("n"), Dim::fixed(1)]);
/// let b = Shape::from_dims([Dim::fixed(4)]);
/// let s = broadcast_static("my_op", &a, &b)?;
/// assert_eq!(s, Shape::from_dims([Dim::dynamic("n"), Dim::fixed(4)]));
/// # Ok(())
/// # }
/// ```
pub fn broadcast_static(op: &str, a: &Shape, b: &Shape) -> Result<Shape> {
    let r = a.rank().max(b.rank());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i + a.rank() >= r { a.dim(i + a.rank() - r).clone() } else { Dim::Fixed(1) };
        let db = if i + b.rank() >= r { b.dim(i + b.rank() - r).clone() } else { Dim::Fixed(1) };
        let d = match (&da, &db) {
            (Dim::Fixed(1), d) | (d, Dim::Fixed(1)) => d.clone(),
            (Dim::Fixed(x), Dim::Fixed(y)) if x == y => Dim::Fixed(*x),
            (Dim::Fixed(_), Dim::Fixed(_)) => {
                return Err(Error::shape(op, format!("cannot broadcast shapes {a} and {b}")));
            }
            (Dim::Fixed(x), Dim::Dynamic(_)) | (Dim::Dynamic(_), Dim::Fixed(x)) => Dim::Fixed(*x),
            (Dim::Dynamic(p), Dim::Dynamic(q)) => Dim::Dynamic(if p == q { p.clone() } else { None }),
        };
        out.push(d);
    }
    Ok(Shape::from_dims(out))
}

/// Concrete numpy broadcasting of two shapes.
///
/// ```
/// use pfor::ops::{broadcast_shapes, broadcast_static, expect_arity, expect_dtype, expect_float, norm_axis};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert_eq!(broadcast_shapes("my_op", &[2, 1], &[3])?, [2, 3]);
/// assert!(broadcast_shapes("my_op", &[2], &[3]).is_err());
/// # Ok(())
/// # }
/// ```
pub fn broadcast_shapes(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
        let db = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
        out.push(match (da, db) {
            (1, d) | (d, 1) => d,
            (x, y) if x == y => x,
            _ => return Err(Error::shape(op, format!("cannot broadcast shapes {a:?} and {b:?}"))),
        });
    }
    Ok(out)
}

/// Broadcasting elementwise map of two arrays.
pub fn zip2<A: Element, B: Element, R: Element>(
    op: &str,
    a: &ArcArray<A, IxDyn>,
    b: &ArcArray<B, IxDyn>,
    f: impl Fn(A, B) -> R + Sync + Send,
) -> Result<ArrayD<R>> {
    if a.shape() == b.shape() {
        return Ok(Zip::from(a).and(b).map_collect(|&x, &y| f(x, y)));
    }
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let av = a.broadcast(IxDyn(&shape)).ok_or_else(|| Error::shape(op, "broadcast failed"))?;
    let bv = b.broadcast(IxDyn(&shape)).ok_or_else(|| Error::shape(op, "broadcast failed"))?;
    Ok(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}
