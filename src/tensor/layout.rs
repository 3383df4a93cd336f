//! Fast copies of strided views into standard (row-major, contiguous) layout.
//!
//! ndarray's generic `as_standard_layout` walks a dynamic-rank view element by element
//! (an index per element); on the window-patch and transposed values of the vectorized
//! backward passes that made reshapes and slices the most expensive ops of a graph. Here the
//! view is first simplified — unit axes dropped, adjacent axes merged wherever the memory
//! walk allows — and then copied one innermost lane at a time (a `memcpy` when the lane is
//! contiguous).
//!
//! Invariant: the result holds the elements of the view in row-major order of the view's own
//! shape (squeezing and merging never reorder elements).

use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn};

/// The elements of `v` in row-major order.
pub fn standard_vec<T: Copy>(v: &ArrayViewD<'_, T>) -> Vec<T> {
    if let Some(s) = v.as_slice() {
        return s.to_vec();
    }
    let mut out = Vec::with_capacity(v.len());
    extend_standard(v, &mut out);
    out
}

/// Appends the elements of `v` to `out` in row-major order (callers that must not abort on
/// a failed allocation reserve `out` first).
pub fn extend_standard<T: Copy>(v: &ArrayViewD<'_, T>, out: &mut Vec<T>) {
    if let Some(s) = v.as_slice() {
        out.extend_from_slice(s);
        return;
    }
    let mut w = v.view();
    if w.is_empty() {
        return;
    }
    // Merge every axis into the next inner one where the walk is unchanged by it.
    if w.ndim() > 1 {
        let mut into = w.ndim() - 1;
        for take in (0..w.ndim() - 1).rev() {
            if !w.merge_axes(Axis(take), Axis(into)) {
                into = take;
            }
        }
    }
    // Drop unit axes (keep one axis so there is a lane to copy).
    for ax in (0..w.ndim()).rev() {
        if w.len_of(Axis(ax)) == 1 && w.ndim() > 1 {
            w = w.index_axis_move(Axis(ax), 0);
        }
    }
    if w.ndim() == 0 {
        out.extend(w.iter().copied());
        return;
    }
    for lane in w.rows() {
        match lane.as_slice() {
            Some(s) => out.extend_from_slice(s),
            // a broadcast lane (stride 0) is one value repeated
            None if lane.len() > 1 && lane.strides()[0] == 0 => out.extend(std::iter::repeat_n(lane[0], lane.len())),
            None => out.extend(lane.iter().copied()),
        }
    }
}

/// `v` copied into a standard-layout array of the same shape.
pub fn standard_array<T: Copy>(v: &ArrayViewD<'_, T>) -> ArrayD<T> {
    let data = standard_vec(v);
    // The element count matches the shape by construction.
    ArrayD::from_shape_vec(IxDyn(v.shape()), data).unwrap_or_else(|_| v.to_owned())
}

/// Stack standard-or-not views of one shape along a new axis `axis` (≤ their rank) into a
/// standard-layout array: for each index of the axes before `axis`, one contiguous block
/// of every part in turn. `buf` is reused for the output (its content is discarded).
pub fn stack_standard<T: Copy>(parts: &[ArrayViewD<'_, T>], axis: usize, buf: Vec<T>) -> Option<ArrayD<T>> {
    let first = parts.first()?;
    if axis > first.ndim() || parts.iter().any(|p| p.shape() != first.shape()) {
        return None;
    }
    let pre: usize = first.shape()[..axis].iter().product();
    let post: usize = first.shape()[axis..].iter().product();
    let owned: Vec<std::borrow::Cow<'_, [T]>> = parts
        .iter()
        .map(|p| match p.as_slice() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None => std::borrow::Cow::Owned(standard_vec(p)),
        })
        .collect();
    let mut out = buf;
    out.clear();
    out.reserve(pre * post * parts.len());
    if post > 0 {
        for i in 0..pre {
            for p in &owned {
                out.extend_from_slice(&p[i * post..(i + 1) * post]);
            }
        }
    }
    let mut shape = first.shape().to_vec();
    shape.insert(axis, parts.len());
    ArrayD::from_shape_vec(IxDyn(&shape), out).ok()
}
