//! Shared helpers and kernels of the slicing ops (view copies, concatenation, static slice
//! and pad dims, axis lists, and the slice, strided-slice, pad and roll kernels), kept apart
//! from the op definitions in the parent module.
//!
//! Invariants: as the parent's: indices are checked before they are used (an `Err`, never a
//! clamp, except strided-slice ranges), outputs are standard-layout copies.

use super::*;

/// Copy a view into a fresh standard-layout tensor.
pub(super) fn copy_view<T: Element>(v: ArrayViewD<'_, T>) -> Tensor {
    T::wrap(crate::tensor::layout::standard_array(&v).into_shared())
}

/// Concatenate views along `axis` into a standard-layout array (shapes checked).
pub(super) fn concat_views<T: Element>(op: &str, axis: usize, parts: &[ArrayViewD<'_, T>]) -> Result<ArrayD<T>> {
    let mut shape = parts[0].shape().to_vec();
    shape[axis] = 0;
    for p in parts {
        let ok =
            p.ndim() == shape.len() && p.shape().iter().zip(&shape).enumerate().all(|(i, (a, b))| i == axis || a == b);
        if !ok {
            return Err(Error::shape(
                op,
                format!("cannot join {:?} with {:?} along axis {axis}", parts[0].shape(), p.shape()),
            ));
        }
        shape[axis] += p.len_of(Axis(axis));
    }
    crate::tensor::layout::concat_standard(parts, axis, Vec::new())
        .ok_or_else(|| Error::shape(op, format!("internal: cannot join parts of {:?} along axis {axis}", shape)))
}

/// Checked length of `x[begin .. begin + size]` on a dim (`None` = unknown).
pub(super) fn slice_len(ax: usize, shape: &Shape, b: i64, s: i64) -> Result<Option<usize>> {
    const OP: &str = "slice";
    if b < 0 || s < -1 {
        return Err(Error::shape(OP, format!("axis {ax} of shape {shape}: begin {b} must be >= 0 and size {s} >= -1")));
    }
    let Some(d) = shape.dim(ax).value() else { return Ok((s >= 0).then_some(s as usize)) };
    let end = if s == -1 { d as i64 } else { b.saturating_add(s) };
    if b > d as i64 || end > d as i64 {
        let index = if b > d as i64 { b } else { end };
        return Err(Error::IndexOutOfRange { op: OP.into(), index, bound: d + 1 });
    }
    Ok(Some((end - b) as usize))
}

/// Output dims of `pad` (with the reflect/symmetric bound checks on fixed dims).
pub(super) fn pad_dims(shape: &Shape, paddings: &[(usize, usize)], mode: PadMode) -> Result<Vec<Dim>> {
    const OP: &str = "pad";
    if paddings.len() != shape.rank() {
        return Err(Error::shape(
            OP,
            format!("{} paddings for shape {shape} of rank {}", paddings.len(), shape.rank()),
        ));
    }
    let mut out = Vec::with_capacity(shape.rank());
    for (ax, (d, &(lo, hi))) in shape.dims().iter().zip(paddings).enumerate() {
        if let Some(n) = d.value() {
            let bad = |p: usize| match mode {
                PadMode::Constant(_) => false,
                PadMode::Reflect => p > 0 && p >= n,
                PadMode::Symmetric => p > n,
            };
            if bad(lo) || bad(hi) {
                return Err(Error::shape(
                    OP,
                    format!(
                        "{mode:?} padding ({lo}, {hi}) of axis {ax} too large for shape {shape} (reflect: < dim, symmetric: <= dim)"
                    ),
                ));
            }
        }
        let total = d.value().map(|n| n.checked_add(lo).and_then(|n| n.checked_add(hi)));
        out.push(match total {
            _ if lo == 0 && hi == 0 => d.clone(),
            Some(Some(n)) => Dim::Fixed(n),
            Some(None) => return Err(Error::shape(OP, format!("padding ({lo}, {hi}) of axis {ax} overflows"))),
            None => Dim::Dynamic(None),
        });
    }
    Ok(out)
}

/// Normalized axes; `unique` rejects repeats.
pub(super) fn norm_axes(op: &str, axes: &[i64], rank: usize, unique: bool) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let ax = norm_axis(op, a, rank)?;
        if unique && out.contains(&ax) {
            return Err(Error::shape(op, format!("axis {a} listed twice in {axes:?}")));
        }
        out.push(ax);
    }
    Ok(out)
}

/// Copy `x[start_i .. start_i + len_i]` (the input itself when that is all of it).
pub(super) fn slice_ranges(x: &Tensor, ranges: &[(usize, usize)]) -> Tensor {
    if ranges.iter().zip(x.shape()).all(|(&(s, n), &d)| s == 0 && n == d) {
        return x.clone();
    }
    crate::dispatch!(x, a => copy_view(a.slice_each_axis(|ad| {
        let (s, n) = ranges[ad.axis.index()];
        Slice::from(s..s + n)
    })))
}

pub(super) fn strided_kernel<T: Element>(a: &ArcArray<T, IxDyn>, plan: &StridedSlicePlan) -> Tensor {
    let mut v = a.slice_each_axis(|ad| match plan.axes[ad.axis.index()] {
        AxisSelect::Range { start, len, step } => range_slice(start, len, step),
        AxisSelect::Index(i) => Slice::from(i..i + 1),
        AxisSelect::Dynamic { .. } => Slice::from(..), // never at run time: all dims are fixed
    });
    for ax in (0..plan.axes.len()).rev() {
        if matches!(plan.axes[ax], AxisSelect::Index(_)) {
            v = v.index_axis_move(Axis(ax), 0);
        }
    }
    for (pos, o) in plan.out.iter().enumerate() {
        if o.is_none() {
            v = v.insert_axis(Axis(pos));
        }
    }
    copy_view(v)
}

pub(super) fn pad_kernel<T: Element>(
    a: &ArcArray<T, IxDyn>,
    paddings: &[(usize, usize)],
    mode: PadMode,
) -> Result<Tensor> {
    // Sizes come from attributes: checked (a zero dim does not make the others fit).
    let shape = a
        .shape()
        .iter()
        .zip(paddings)
        .map(|(&d, &(lo, hi))| d.checked_add(lo)?.checked_add(hi))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| Error::shape("pad", format!("padding {:?} by {paddings:?} overflows", a.shape())))?;
    let len = checked_len("pad", &shape)?;
    if let PadMode::Constant(c) = mode {
        let data = try_filled("pad", len, T::from_f64(c))?;
        let mut out = ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| Error::shape("pad", e.to_string()))?;
        out.slice_each_axis_mut(|ad| {
            let (lo, _) = paddings[ad.axis.index()];
            Slice::from(lo..lo + a.len_of(ad.axis))
        })
        .assign(a);
        return Ok(T::wrap(out.into_shared()));
    }
    // Mirror modes: one concatenation [reversed head, x, reversed tail] per padded axis.
    let skip_edge = isize::from(mode == PadMode::Reflect);
    let mut cur: CowArray<'_, T, IxDyn> = a.view().into();
    for (ax, &(lo, hi)) in paddings.iter().enumerate() {
        if (lo, hi) == (0, 0) {
            continue;
        }
        let d = cur.len_of(Axis(ax)) as isize;
        let (lo, hi) = (lo as isize, hi as isize);
        let v = cur.view();
        let head = v.slice_axis(Axis(ax), Slice::new(skip_edge, Some(skip_edge + lo), -1));
        let tail = v.slice_axis(Axis(ax), Slice::new(d - hi - skip_edge, Some(d - skip_edge), -1));
        let next = concat_views("pad", ax, &[head, v.view(), tail])?;
        cur = next.into();
    }
    Ok(T::wrap(cur.into_owned().into_shared()))
}

pub(super) fn roll_kernel<T: Element>(a: &ArcArray<T, IxDyn>, net: &[usize]) -> Result<Tensor> {
    let mut cur: CowArray<'_, T, IxDyn> = a.view().into();
    for (ax, &k) in net.iter().enumerate() {
        if k == 0 {
            continue;
        }
        let cut = (cur.len_of(Axis(ax)) - k) as isize;
        let v = cur.view();
        let (tail, head) = (v.slice_axis(Axis(ax), Slice::from(cut..)), v.slice_axis(Axis(ax), Slice::from(..cut)));
        let next = concat_views("roll", ax, &[tail, head])?;
        cur = next.into();
    }
    Ok(T::wrap(cur.into_owned().into_shared()))
}
