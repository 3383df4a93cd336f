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
///
/// ```
/// use ndarray::{ArrayD, IxDyn};
/// use pfor::prelude::*;
/// use pfor::tensor::layout::{concat_standard, extend_standard, stack_standard, standard_array, standard_vec};
///
/// # fn main() -> Result<()> {
/// let a = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1, 2, 3, 4]).expect("4 elements");
/// let t = a.t(); // a transposed view: not in row-major order in memory
/// assert_eq!(standard_vec(&t.view()), [1, 3, 2, 4]);
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use ndarray::{ArrayD, IxDyn};
/// use pfor::prelude::*;
/// use pfor::tensor::layout::{concat_standard, extend_standard, stack_standard, standard_array, standard_vec};
///
/// # fn main() -> Result<()> {
/// let a = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1, 2, 3, 4]).expect("4 elements");
/// let mut out = vec![0];
/// extend_standard(&a.t(), &mut out);
/// assert_eq!(out, [0, 1, 3, 2, 4]);
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use ndarray::{ArrayD, IxDyn};
/// use pfor::prelude::*;
/// use pfor::tensor::layout::{concat_standard, extend_standard, stack_standard, standard_array, standard_vec};
///
/// # fn main() -> Result<()> {
/// let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), (0..6).collect()).expect("6 elements");
/// let s = standard_array(&a.t());
/// assert!(s.is_standard_layout());
/// assert_eq!(s.shape(), [3, 2]);
/// # Ok(())
/// # }
/// ```
pub fn standard_array<T: Copy>(v: &ArrayViewD<'_, T>) -> ArrayD<T> {
    let data = standard_vec(v);
    // The element count matches the shape by construction.
    ArrayD::from_shape_vec(IxDyn(v.shape()), data).unwrap_or_else(|_| v.to_owned())
}

/// Elements from which [`concat_standard`] copies on the rayon pool.
const PAR_COPY: usize = 1 << 18;

/// Stack views of one shape along a new axis `axis` (≤ their rank) into a standard-layout
/// array (see [`concat_standard`]; `buf` is reused for the output, its content discarded).
///
/// ```
/// use ndarray::{ArrayD, IxDyn};
/// use pfor::prelude::*;
/// use pfor::tensor::layout::{concat_standard, extend_standard, stack_standard, standard_array, standard_vec};
///
/// # fn main() -> Result<()> {
/// let a = ArrayD::from_shape_vec(IxDyn(&[2]), vec![1.0f32, 2.0]).expect("2 elements");
/// let b = ArrayD::from_shape_vec(IxDyn(&[2]), vec![3.0f32, 4.0]).expect("2 elements");
/// let s = stack_standard(&[a.view(), b.view()], 1, Vec::new()).expect("one shape");
/// assert_eq!(s.shape(), [2, 2]);
/// assert_eq!(s.iter().copied().collect::<Vec<_>>(), [1.0, 3.0, 2.0, 4.0]);
/// # Ok(())
/// # }
/// ```
pub fn stack_standard<T: Copy + Send + Sync>(
    parts: &[ArrayViewD<'_, T>],
    axis: usize,
    buf: Vec<T>,
) -> Option<ArrayD<T>> {
    let first = parts.first()?;
    if axis > first.ndim() || parts.iter().any(|p| p.shape() != first.shape()) {
        return None;
    }
    let expanded: Vec<ArrayViewD<'_, T>> = parts.iter().map(|p| p.clone().insert_axis(Axis(axis))).collect();
    concat_standard(&expanded, axis, buf)
}

/// Join standard-or-not views along the existing axis `axis` into a standard-layout array:
/// for each index of the axes before `axis`, one contiguous block of every part in turn
/// (a `memcpy` each; on the rayon pool when the result is large). `None` if the parts
/// disagree on a dim other than `axis` or have different ranks. `buf` is reused for the
/// output (its content is discarded).
///
/// ```
/// use ndarray::{ArrayD, IxDyn};
/// use pfor::prelude::*;
/// use pfor::tensor::layout::{concat_standard, extend_standard, stack_standard, standard_array, standard_vec};
///
/// # fn main() -> Result<()> {
/// let a = ArrayD::from_shape_vec(IxDyn(&[2, 1]), vec![1i64, 2]).expect("2 elements");
/// let b = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![3i64, 4, 5, 6]).expect("4 elements");
/// let c = concat_standard(&[a.view(), b.view()], 1, Vec::new()).expect("rows agree");
/// assert_eq!(c.iter().copied().collect::<Vec<_>>(), [1, 3, 4, 2, 5, 6]);
/// assert!(concat_standard(&[a.view(), b.view()], 0, Vec::new()).is_none()); // columns differ
/// # Ok(())
/// # }
/// ```
pub fn concat_standard<T: Copy + Send + Sync>(
    parts: &[ArrayViewD<'_, T>],
    axis: usize,
    buf: Vec<T>,
) -> Option<ArrayD<T>> {
    use rayon::prelude::*;
    let first = parts.first()?;
    let rank = first.ndim();
    let same_rest = |p: &ArrayViewD<'_, T>| {
        p.ndim() == rank && p.shape().iter().zip(first.shape()).enumerate().all(|(i, (a, b))| i == axis || a == b)
    };
    if axis >= rank || !parts.iter().all(same_rest) {
        return None;
    }
    let pre: usize = first.shape()[..axis].iter().product();
    // per part: elements of one block (its axis length times the trailing dims)
    let blocks: Vec<usize> = parts.iter().map(|p| p.shape()[axis..].iter().product()).collect();
    let width: usize = blocks.iter().sum();
    let owned: Vec<std::borrow::Cow<'_, [T]>> = parts
        .iter()
        .map(|p| match p.as_slice() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None => std::borrow::Cow::Owned(standard_vec(p)),
        })
        .collect();
    let total = pre * width;
    let mut out = buf;
    out.clear();
    out.reserve(total);
    if total > 0 {
        let fill = |(chunk_i, chunk): (usize, &mut [std::mem::MaybeUninit<T>]), rows_per: usize| {
            for (k, row) in chunk.chunks_mut(width).enumerate() {
                let i = chunk_i * rows_per + k;
                let mut at = 0;
                for (p, &b) in owned.iter().zip(&blocks) {
                    row[at..at + b].write_copy_of_slice(&p[i * b..(i + 1) * b]);
                    at += b;
                }
            }
        };
        let spare = &mut out.spare_capacity_mut()[..total];
        let threads = rayon::current_num_threads();
        if total >= PAR_COPY && threads > 1 && pre > 1 {
            let rows_per = pre.div_ceil(threads * 2);
            spare.par_chunks_mut(rows_per * width).enumerate().for_each(|c| fill(c, rows_per));
        } else {
            fill((0, spare), pre);
        }
        // SAFETY: the chunks cover the first `total` spare elements and every row of every
        // chunk was written block by block (the blocks sum to `width`).
        unsafe { out.set_len(total) };
    }
    let mut shape = first.shape().to_vec();
    shape[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
    ArrayD::from_shape_vec(IxDyn(&shape), out).ok()
}
