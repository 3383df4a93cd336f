//! Helpers shared by the derivative rules.

use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::Dim;

/// Reduce `d` (the cotangent of a broadcast result) back to the shape of `x`: sum the
/// leading axes `x` lacks and the axes where `x` has a fixed 1 but `d` does not.
/// Decided from static shapes, so it also works inside loops with dynamic dims.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [1, 3]); // broadcast against [2, 3]
/// let d = g.constant(Tensor::ones(DType::F32, &[2, 3])?);
/// let dx = sum_to(&mut g, d, x)?;
/// assert_eq!(g.shape(dx)?.as_fixed(), Some(vec![1, 3]));
/// assert_eq!(run_once(&g, &[dx], &[])?[0].to_vec::<f32>()?, [2.0, 2.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn sum_to(g: &mut Graph, d: ValueId, x: ValueId) -> Result<ValueId> {
    let sx = g.shape(x)?;
    let sd = g.shape(d)?;
    if sd.rank() < sx.rank() {
        return Err(crate::Error::shape("sum_to", format!("cotangent rank {} < primal rank {}", sd.rank(), sx.rank())));
    }
    let lead = sd.rank() - sx.rank();
    let mut d = d;
    if lead > 0 {
        let axes: Vec<i64> = (0..lead as i64).collect();
        d = g.reduce_sum(d, Some(&axes), false)?;
    }
    let axes: Vec<i64> = sx
        .dims()
        .iter()
        .zip(sd.dims()[lead..].iter())
        .enumerate()
        .filter(|(_, (a, b))| **a == Dim::Fixed(1) && **b != Dim::Fixed(1))
        .map(|(i, _)| i as i64)
        .collect();
    if !axes.is_empty() {
        d = g.reduce_sum(d, Some(&axes), true)?;
    }
    Ok(d)
}

/// `v` (a seed or tangent the caller gave for `like`), checked to have `like`'s type: the
/// dtype, the rank and every fixed dim now, and — where a dim is not provably equal (a
/// dynamic dim that is not the same named one on both sides) — the whole shape at run
/// time through `match_shape`. `what` names both in the error (e.g. `"grad_ys[0]", "ys[0]"`).
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let y = g.input("y", DType::F32, [2]);
/// let good = g.input("seed", DType::F32, [2]);
/// let bad = g.input("bad", DType::F32, [3]);
/// assert!(checked_like(&mut g, good, y, "gradients", ["grad_ys[0]", "ys[0]"]).is_ok());
/// let e = checked_like(&mut g, bad, y, "gradients", ["grad_ys[0]", "ys[0]"]).unwrap_err();
/// assert!(e.to_string().contains("grad_ys[0]"));
/// # Ok(())
/// # }
/// ```
pub fn checked_like(g: &mut Graph, v: ValueId, like: ValueId, f: &str, what: [&str; 2]) -> Result<ValueId> {
    let (tv, tl) = (g.value_type(v)?.clone(), g.value_type(like)?.clone());
    let [vn, ln] = what;
    if tv.dtype != tl.dtype || !tv.shape.compatible(&tl.shape) {
        return Err(crate::Error::InvalidArgument(format!("{f}: {vn} has type {tv}, but {ln} has type {tl}")));
    }
    let proven = tv.shape.dims().iter().zip(tl.shape.dims()).all(|(a, b)| match (a, b) {
        (Dim::Fixed(_), Dim::Fixed(_)) => true, // compatible: equal
        (Dim::Dynamic(Some(a)), Dim::Dynamic(Some(b))) => a == b,
        _ => false,
    });
    if proven { Ok(v) } else { g.match_shape(v, like) }
}

/// `a + b` where either may be absent (zero).
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let a = g.constant(Tensor::scalar(1.0f32));
/// assert_eq!(add_opt(&mut g, Some(a), None)?, Some(a)); // absent is zero: no node
/// assert_eq!(add_opt(&mut g, None, None)?, None);
/// let s = add_opt(&mut g, Some(a), Some(a))?.expect("a sum");
/// assert_eq!(run_once(&g, &[s], &[])?[0].scalar_f64()?, 2.0);
/// # Ok(())
/// # }
/// ```
pub fn add_opt(g: &mut Graph, a: Option<ValueId>, b: Option<ValueId>) -> Result<Option<ValueId>> {
    Ok(match (a, b) {
        (Some(a), Some(b)) => Some(g.add(a, b)?),
        (a, None) => a,
        (None, b) => b,
    })
}

/// `-a` where `a` may be absent.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let a = g.constant(Tensor::scalar(1.0f32));
/// assert_eq!(neg_opt(&mut g, None)?, None);
/// let n = neg_opt(&mut g, Some(a))?.expect("a value");
/// assert_eq!(run_once(&g, &[n], &[])?[0].scalar_f64()?, -1.0);
/// # Ok(())
/// # }
/// ```
pub fn neg_opt(g: &mut Graph, a: Option<ValueId>) -> Result<Option<ValueId>> {
    a.map(|a| g.neg(a)).transpose()
}

/// Positive axis indices for possibly negative `axes` of a rank-`rank` value, sorted and
/// without repeats.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert_eq!(norm_axes(&[-1, 0, 2], 3), [0, 2]);
/// # Ok(())
/// # }
/// ```
pub fn norm_axes(axes: &[i64], rank: usize) -> Vec<usize> {
    let mut v: Vec<usize> =
        axes.iter().map(|&a| if a < 0 { (a + rank as i64).max(0) as usize } else { a as usize }).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The inverse of a permutation.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert_eq!(inverse_perm(&[2, 0, 1]), [1, 2, 0]);
/// # Ok(())
/// # }
/// ```
pub fn inverse_perm(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

/// Broadcast `d` (a reduction's cotangent, reduced `axes` removed unless `keep_dims`) back
/// to the shape of `x` (every reduced axis re-inserted, then broadcast).
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [2, 3]);
/// let d = g.constant(Tensor::vec1(&[1.0f32, 2.0])); // the cotangent of a sum over axis 1
/// let dx = unreduce(&mut g, d, x, &[1], false)?;
/// let r = run_once(&g, &[dx], &[(x, Tensor::zeros(DType::F32, &[2, 3])?)])?;
/// assert_eq!(r[0].to_vec::<f32>()?, [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn unreduce(g: &mut Graph, d: ValueId, x: ValueId, axes: &[i64], keep_dims: bool) -> Result<ValueId> {
    let rank = g.shape(x)?.rank();
    let axes = norm_axes(axes, rank);
    let mut d = d;
    if !keep_dims {
        for &a in &axes {
            d = g.expand_dims(d, a as i64)?;
        }
    }
    broadcast_like(g, d, x)
}

/// Broadcast `d` to the (run-time) shape of `x`.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(2)]);
/// let d = g.constant(Tensor::vec1(&[1.0f32, 2.0]));
/// let b = broadcast_like(&mut g, d, x)?; // to x's shape when it runs
/// let r = run_once(&g, &[b], &[(x, Tensor::zeros(DType::F32, &[3, 2])?)])?;
/// assert_eq!(r[0].shape(), &[3, 2]);
/// # Ok(())
/// # }
/// ```
pub fn broadcast_like(g: &mut Graph, d: ValueId, x: ValueId) -> Result<ValueId> {
    let sx = g.shape(x)?;
    if let Some(fixed) = sx.as_fixed() {
        if g.shape(d)?.as_fixed().as_deref() == Some(&fixed[..]) {
            return Ok(d);
        }
        return g.broadcast_to(d, &fixed);
    }
    let s = g.shape_of(x)?;
    g.broadcast_to_dyn(d, s)
}

/// Reshape `d` to the (run-time) shape of `x`.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(2)]);
/// let flat = g.reshape(x, &[-1])?;
/// let back = reshape_like(&mut g, flat, x)?;
/// let r = run_once(&g, &[back], &[(x, Tensor::zeros(DType::F32, &[3, 2])?)])?;
/// assert_eq!(r[0].shape(), &[3, 2]);
/// # Ok(())
/// # }
/// ```
pub fn reshape_like(g: &mut Graph, d: ValueId, x: ValueId) -> Result<ValueId> {
    let sx = g.shape(x)?;
    if let Some(fixed) = sx.as_fixed() {
        if g.shape(d)?.as_fixed().as_deref() == Some(&fixed[..]) {
            return Ok(d);
        }
        let dims: Vec<i64> = fixed.iter().map(|&v| v as i64).collect();
        return g.reshape(d, &dims);
    }
    let s = g.shape_of(x)?;
    g.reshape_dyn(d, s)
}

/// The size of axis `ax` of `x` as an i64 scalar: a constant when it is fixed, read from
/// `shape_of(x)` at run time otherwise.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(2)]);
/// let (n, two) = (dim_size(&mut g, x, 0)?, dim_size(&mut g, x, 1)?); // read at run time; a constant
/// let r = run_once(&g, &[n, two], &[(x, Tensor::zeros(DType::F32, &[5, 2])?)])?;
/// assert_eq!((r[0].scalar_i64()?, r[1].scalar_i64()?), (5, 2));
/// # Ok(())
/// # }
/// ```
pub fn dim_size(g: &mut Graph, x: ValueId, ax: usize) -> Result<ValueId> {
    if let Some(d) = g.shape(x)?.dim(ax).value() {
        return Ok(g.constant(crate::tensor::Tensor::scalar(d as i64)));
    }
    let s = g.shape_of(x)?;
    let a = g.constant(crate::tensor::Tensor::scalar(ax as i64));
    g.gather(s, a, 0)
}

/// Rows `start .. start + len` of `x` along axis `ax` (i64 scalars known at run time): a
/// gather of a `range`, so it works where `slice` would need static offsets or sizes.
///
/// ```
/// use pfor::autodiff::util::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::vec1(&[10i64, 11, 12, 13, 14]));
/// let (start, len) = (g.input("start", DType::I64, Shape::scalar()), g.constant(Tensor::scalar(2i64)));
/// let rows = range_along(&mut g, x, 0, start, len)?;
/// let r = run_once(&g, &[rows], &[(start, Tensor::scalar(3i64))])?;
/// assert_eq!(r[0].to_vec::<i64>()?, [13, 14]);
/// # Ok(())
/// # }
/// ```
pub fn range_along(g: &mut Graph, x: ValueId, ax: usize, start: ValueId, len: ValueId) -> Result<ValueId> {
    let end = g.add(start, len)?;
    let one = g.constant(crate::tensor::Tensor::scalar(1i64));
    let idx = g.range(start, end, one)?;
    g.gather(x, idx, ax as i64)
}
