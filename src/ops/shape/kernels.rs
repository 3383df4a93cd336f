//! Shared helpers and kernels of the shape ops (spec parsing, axis checks, broadcast, tile,
//! one-hot, range, stack), kept apart from the op definitions in the parent module.
//!
//! Invariants: every helper returns an `Err` naming the op for bad input (never a panic);
//! sizes requested through data are checked before anything is allocated
//! (`kernels::alloc::checked_len`, `try_vec`, `try_filled`).

use super::*;

/// Validate a reshape spec: (position of the `-1`, product of the other entries).
pub(super) fn parse_spec(op: &str, spec: &[i64]) -> Result<(Option<usize>, usize)> {
    let mut infer_at = None;
    let mut known: usize = 1;
    for (i, &d) in spec.iter().enumerate() {
        if d == -1 {
            if infer_at.is_some() {
                return Err(Error::shape(op, format!("target shape {spec:?} has more than one -1")));
            }
            infer_at = Some(i);
        } else if d < -1 {
            return Err(Error::shape(op, format!("target shape {spec:?} has a negative dim {d}")));
        } else {
            known = known
                .checked_mul(d as usize)
                .ok_or_else(|| Error::shape(op, format!("target shape {spec:?} overflows")))?;
        }
    }
    if infer_at.is_some() && known == 0 {
        return Err(Error::shape(op, format!("target shape {spec:?}: -1 is ambiguous next to a 0 dim")));
    }
    Ok((infer_at, known))
}

/// The concrete target shape for `n` elements coming from `from`.
pub(super) fn resolve_reshape(op: &str, spec: &[i64], n: usize, from: &dyn fmt::Display) -> Result<Vec<usize>> {
    let (infer_at, known) = parse_spec(op, spec)?;
    let mut out: Vec<usize> = spec.iter().map(|&d| d.max(0) as usize).collect();
    match infer_at {
        Some(i) if n.is_multiple_of(known) => out[i] = n / known,
        None if n == known => {}
        _ => return Err(Error::shape(op, format!("cannot reshape {from} ({n} elements) to {spec:?}"))),
    }
    Ok(out)
}

/// Element count of a static shape (dynamic if any dim is, unless a fixed dim is 0).
pub(super) fn num_elements(op: &str, s: &Shape) -> Result<Dim> {
    s.dims()
        .iter()
        .try_fold(Dim::Fixed(1), |acc, d| acc.mul(d))
        .ok_or_else(|| Error::shape(op, format!("shape {s} has too many elements (the count overflows)")))
}

/// Normalize an axis for an op that inserts one axis into a rank-`rank` tensor.
pub(super) fn norm_insert_axis(op: &str, axis: i64, rank: usize) -> Result<usize> {
    norm_axis(op, axis, rank + 1).map_err(|_| Error::Axis { op: op.into(), axis, rank })
}

/// Error unless `perm` is a permutation of `0..rank`.
pub(super) fn check_perm(op: &str, perm: &[usize], rank: usize) -> Result<()> {
    let mut seen = vec![false; rank];
    let ok = perm.len() == rank && perm.iter().all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
    if !ok {
        return Err(Error::shape(op, format!("perm {perm:?} is not a permutation of 0..{rank}")));
    }
    Ok(())
}

/// Normalize squeeze axes (sorted, distinct).
pub(super) fn squeeze_axes(op: &str, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut v = axes.iter().map(|&a| norm_axis(op, a, rank)).collect::<Result<Vec<_>>>()?;
    v.sort_unstable();
    if v.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::shape(op, format!("duplicate axes in {axes:?}")));
    }
    Ok(v)
}

/// Static type check of a shape operand: i64, 1-D, fixed length (returned).
pub(super) fn shape_operand_len(op: &str, t: &TensorType) -> Result<usize> {
    expect_dtype(op, t, DType::I64)?;
    match t.shape.dims() {
        [Dim::Fixed(k)] if *k > MAX_SHAPE_OPERAND => {
            Err(Error::shape(op, format!("the shape operand {} gives a rank above {MAX_SHAPE_OPERAND}", t.shape)))
        }
        [Dim::Fixed(k)] => Ok(*k),
        _ => Err(Error::shape(op, format!("the shape operand must be 1-D of fixed length, got {}", t.shape))),
    }
}

/// Runtime values of a shape operand (all `>= 0`).
pub(super) fn shape_values(op: &str, t: &Tensor) -> Result<Vec<usize>> {
    let v = t.to_vec::<i64>()?;
    if v.iter().any(|&d| d < 0) {
        return Err(Error::shape(op, format!("negative dim in shape {v:?}")));
    }
    Ok(v.into_iter().map(|d| d as usize).collect())
}

pub(super) fn expect_scalar(op: &str, t: &TensorType) -> Result<()> {
    if t.rank() != 0 {
        return Err(Error::shape(op, format!("expected a scalar, got shape {}", t.shape)));
    }
    Ok(())
}

/// A standard-layout array of `shape` filled with `v`.
pub(super) fn filled<T: Element>(op: &str, shape: &[usize], v: T) -> Result<Tensor> {
    Tensor::from_vec(shape, try_filled(op, count(op, shape)?, v)?)
}

/// Copy a view (any strides, broadcast included) into a standard-layout tensor of `shape`
/// (which must have the view's element count).
pub(super) fn collect_std<T: Element>(op: &str, v: ArrayView<'_, T, IxDyn>, shape: &[usize]) -> Result<Tensor> {
    let mut data = try_vec(op, v.len())?;
    crate::tensor::layout::extend_standard(&v, &mut data);
    Tensor::from_vec(shape, data)
}

/// Numpy broadcast of a concrete shape to a target (target wins; x dims must be 1 or equal).
pub(super) fn check_broadcast(op: &str, x: &[usize], target: &[usize]) -> Result<()> {
    let off = target.len().checked_sub(x.len());
    let ok = off.is_some_and(|o| x.iter().zip(&target[o..]).all(|(&a, &b)| a == 1 || a == b));
    if !ok {
        return Err(Error::shape(op, format!("cannot broadcast {x:?} to {target:?}")));
    }
    Ok(())
}

pub(super) fn broadcast_kernel(op: &str, x: Tensor, target: &[usize]) -> Result<Tensor> {
    check_broadcast(op, x.shape(), target)?;
    if x.shape() == target {
        return Ok(x);
    }
    crate::dispatch!(&x, a => {
        let v = a.broadcast(IxDyn(target)).ok_or_else(|| Error::shape(op, "broadcast failed"))?;
        collect_std(op, v, target)
    })
}

/// Static broadcast of `x` to `target` dims (a `Dynamic` target dim is only known at run time).
pub(super) fn broadcast_static_to(op: &str, x: &Shape, target: &[Dim]) -> Result<Shape> {
    let tgt = Shape::from_dims(target.iter().cloned());
    let off = target
        .len()
        .checked_sub(x.rank())
        .ok_or_else(|| Error::shape(op, format!("cannot broadcast {x} to lower rank {tgt}")))?;
    let mut out: Vec<Dim> = target.to_vec();
    for (i, xd) in x.dims().iter().enumerate() {
        out[off + i] = match (xd, &target[off + i]) {
            (Dim::Fixed(1), t) => t.clone(),
            (Dim::Fixed(a), Dim::Fixed(b)) if a != b => {
                return Err(Error::shape(op, format!("cannot broadcast {x} to {tgt}")));
            }
            (Dim::Fixed(a), _) => Dim::Fixed(*a),
            (Dim::Dynamic(_), t) => t.clone(),
        };
    }
    Ok(Shape::from_dims(out))
}

pub(super) fn tile_kernel<T: Element>(op: &str, a: &ArcArray<T, IxDyn>, multiples: &[usize]) -> Result<Tensor> {
    if a.ndim() != multiples.len() {
        return Err(Error::shape(op, format!("{} multiples for rank {}", multiples.len(), a.ndim())));
    }
    // View [d0, d1, ...] as [1, d0, 1, d1, ...], broadcast to [m0, d0, m1, d1, ...]: its
    // row-major order is exactly the row-major order of the tiled [m0*d0, m1*d1, ...].
    let mut v = a.view();
    let mut big = Vec::with_capacity(2 * a.ndim());
    let mut out = Vec::with_capacity(a.ndim());
    for (i, (&d, &m)) in a.shape().iter().zip(multiples).enumerate().rev() {
        v = v.insert_axis(Axis(i));
        big.splice(0..0, [m, d]);
        out.insert(0, d.checked_mul(m).ok_or_else(|| Error::shape(op, "tiled shape overflows"))?);
    }
    count(op, &out)?;
    let b = v.broadcast(IxDyn(&big)).ok_or_else(|| Error::shape(op, "broadcast failed"))?;
    collect_std(op, b, &out)
}

pub(super) fn one_hot_kernel<T: Element>(
    op: &str,
    idx: &ArcArray<i64, IxDyn>,
    depth: usize,
    axis: usize,
    on: T,
    off: T,
) -> Result<Tensor> {
    let s = idx.shape();
    let outer: usize = s[..axis].iter().product();
    let inner: usize = s[axis..].iter().product();
    let mut shape = s.to_vec();
    shape.insert(axis, depth);
    let n = count(op, &shape)?;
    let mut data = try_vec(op, n)?;
    data.resize(n, off);
    let std = idx.as_standard_layout();
    let flat = std.as_slice().ok_or_else(|| Error::shape(op, "indices not contiguous"))?;
    for o in 0..outer {
        for (i, &k) in flat[o * inner..(o + 1) * inner].iter().enumerate() {
            if k >= 0 && (k as usize) < depth {
                data[(o * depth + k as usize) * inner + i] = on;
            }
        }
    }
    Tensor::from_vec(&shape, data)
}

/// Scalar types `range` supports.
pub(super) trait RangeElem: Element {
    /// Number of elements of `range(start, limit, delta)`.
    fn range_len(start: Self, limit: Self, delta: Self) -> Option<usize>;
    /// The `i`th element.
    fn range_at(start: Self, delta: Self, i: usize) -> Self;
}

impl RangeElem for i64 {
    fn range_len(start: i64, limit: i64, delta: i64) -> Option<usize> {
        let (diff, d) = (limit as i128 - start as i128, delta as i128);
        let n = if (diff > 0) == (d > 0) && diff != 0 { (diff + d - d.signum()) / d } else { 0 };
        usize::try_from(n).ok()
    }
    fn range_at(start: i64, delta: i64, i: usize) -> i64 {
        start.wrapping_add(delta.wrapping_mul(i as i64))
    }
}

macro_rules! float_range {
    ($($t:ty),*) => {$(
        impl RangeElem for $t {
            fn range_len(start: $t, limit: $t, delta: $t) -> Option<usize> {
                let n = ((limit as f64 - start as f64) / delta as f64).ceil();
                if n.is_nan() || n > (usize::MAX >> 1) as f64 {
                    return None;
                }
                Some(n.max(0.0) as usize)
            }
            fn range_at(start: $t, delta: $t, i: usize) -> $t {
                start + delta * i as $t
            }
        }
    )*};
}
float_range!(f32, f64);

pub(super) fn range_kernel<T: RangeElem>(op: &str, ins: &[Tensor]) -> Result<Tensor> {
    let s = |i: usize| first_elem::<T>(op, ins[i].array()?);
    let (start, limit, delta) = (s(0)?, s(1)?, s(2)?);
    if delta.to_f64() == 0.0 {
        return Err(Error::InvalidArgument(format!("{op}: delta must be nonzero")));
    }
    let n = T::range_len(start, limit, delta)
        .ok_or_else(|| Error::shape(op, format!("range({start:?}, {limit:?}, {delta:?}) has no finite length")))?;
    let mut data = try_vec(op, n)?;
    data.extend((0..n).map(|i| T::range_at(start, delta, i)));
    Tensor::from_vec(&[n], data)
}

pub(super) fn stack_kernel<T: Element>(
    op: &str,
    ins: &[Tensor],
    axis: usize,
    ctx: Option<&mut (dyn EvalCtx + '_)>,
) -> Result<Tensor> {
    let views =
        ins.iter().map(|t| t.array::<T>().map(|a| a.view())).collect::<Result<Vec<ArrayView<'_, T, IxDyn>>>>()?;
    if let Some(bad) = views.iter().find(|v| v.shape() != views[0].shape()) {
        return Err(Error::shape(op, format!("cannot stack shapes {:?} and {:?}", views[0].shape(), bad.shape())));
    }
    // ndarray::stack lays an inner new axis out outermost (non-standard), which makes every
    // consumer copy again; build the standard layout directly.
    let total = views.iter().map(|v| v.len()).sum();
    let buf = ctx.and_then(|c| c.recycled::<T>(total)).unwrap_or_default();
    let a = match crate::tensor::layout::stack_standard(&views, axis, buf) {
        Some(a) => a,
        None => ndarray::stack(Axis(axis), &views).map_err(|e| Error::shape(op, e.to_string()))?,
    };
    Ok(Tensor::from_array(a))
}

/// The first element of a (scalar) array.
pub(super) fn first_elem<T: Element>(op: &str, a: &ArcArray<T, IxDyn>) -> Result<T> {
    a.iter().next().copied().ok_or_else(|| Error::shape(op, "expected a scalar, got an empty tensor"))
}

pub(super) fn take1(op: &str, inputs: Vec<Tensor>) -> Result<Tensor> {
    expect_arity(op, &inputs, 1)?;
    inputs.into_iter().next().ok_or_else(|| Error::arity(op, "1", 0))
}
