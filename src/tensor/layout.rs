//! Fast copies of strided views into standard (row-major, contiguous) layout.
//!
//! ndarray's generic `as_standard_layout` walks a dynamic-rank view element by element
//! (an index per element); on the window-patch and transposed values of the vectorized
//! backward passes that made reshapes and slices the most expensive ops of a graph. Here the
//! view is first simplified — unit axes dropped, adjacent axes merged wherever the memory
//! walk allows — and then copied one innermost lane at a time (a `memcpy` when the lane is
//! contiguous). A transposed view (its innermost lane strided, another axis contiguous: an
//! NCHW value read as NHWC, a filter permuted to our layout) is copied in square tiles of
//! those two axes instead, so that both the reads and the writes stay within a few cache
//! lines (a lane-wise copy reads one element per cache line).
//!
//! Invariant: the result holds the elements of the view in row-major order of the view's own
//! shape (squeezing and merging never reorder elements).

use ndarray::{ArrayD, ArrayViewD, Axis, CowArray, IxDyn};

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
pub fn standard_vec<T: Copy + Send + Sync>(v: &ArrayViewD<'_, T>) -> Vec<T> {
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
pub fn extend_standard<T: Copy + Send + Sync>(v: &ArrayViewD<'_, T>, out: &mut Vec<T>) {
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
    if transposed_copy(&w, out) {
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

/// Side of the square tiles of [`transposed_copy`].
const TILE: usize = 32;
/// Elements from which [`transposed_copy`] copies on the rayon pool.
const PAR_TRANSPOSE: usize = 1 << 16;

/// Appends the simplified view `w` (merged, no unit axes, rank ≥ 1) to `out` in row-major
/// order when it is transposed: its last axis strided and an earlier axis `k` of stride 1.
/// Copies, for each index of the other axes, the `[k, last]` plane in row ranges of `k`
/// ([`copy_rows`]), on the rayon pool when the view is large (planes split into row ranges
/// until every thread has two tasks: an image's NCHW → NHWC copy is one plane). `false`
/// (nothing appended) when `w` is not such a view.
fn transposed_copy<T: Copy + Send + Sync>(w: &ArrayViewD<'_, T>, out: &mut Vec<T>) -> bool {
    let r = w.ndim();
    let strides = w.strides();
    let (shape, last) = (w.shape(), r.wrapping_sub(1));
    if r < 2 || strides[last] == 1 || shape[last] < 2 {
        return false;
    }
    let Some(k) = (0..last).rfind(|&i| strides[i] == 1 && shape[i] > 1) else { return false };
    // row-major strides of the output
    let mut dst_strides = vec![1usize; r];
    for i in (0..last).rev() {
        dst_strides[i] = dst_strides[i + 1] * shape[i + 1];
    }
    let rest: Vec<usize> = (0..r).filter(|&i| i != k && i != last).collect();
    let (nk, nj) = (shape[k], shape[last]);
    let planes: usize = rest.iter().map(|&i| shape[i]).product();
    let total = w.len();
    out.reserve(total);
    let start = out.len();
    let threads = rayon::current_num_threads();
    let par = total >= PAR_TRANSPOSE && threads > 1;
    // row ranges of `k` per plane: enough tasks for two per thread, each at least a tile
    let splits = if par { (2 * threads).div_ceil(planes).clamp(1, nk.div_ceil(TILE)) } else { 1 };
    let rows = nk.div_ceil(splits);
    let geom = Plane { src: w.as_ptr() as usize, sj: strides[last], nj, dk: dst_strides[k] };
    let dst = out.spare_capacity_mut()[..total].as_mut_ptr() as usize;
    let task = |t: usize| {
        let (mut p, k0) = (t / splits, (t % splits) * rows);
        let (mut src_off, mut dst_off) = (0isize, 0usize);
        for &ax in rest.iter().rev() {
            src_off += (p % shape[ax]) as isize * strides[ax];
            dst_off += (p % shape[ax]) * dst_strides[ax];
            p /= shape[ax];
        }
        // SAFETY: `src_off` and `dst_off` are the offsets of the plane's first element in
        // `w`'s buffer and in the output (`total` reserved elements); `copy_rows` reads the
        // plane's rows `k0..k1` inside `w`'s shape and writes their output positions, which
        // no other task writes (tasks differ in plane or rows).
        unsafe {
            copy_rows(
                &geom,
                (geom.src as *const T).offset(src_off),
                k0..(k0 + rows).min(nk),
                (dst as *mut T).add(dst_off),
            )
        }
    };
    if par {
        use rayon::prelude::*;
        (0..planes * splits).into_par_iter().for_each(task);
    } else {
        (0..planes * splits).for_each(task);
    }
    // SAFETY: the tasks cover every plane and every row of it, and `copy_rows` writes every
    // position `dst_off + kk * dk + j` of its rows: the row-major offsets of `w`'s shape,
    // which cover `0..total` exactly once.
    unsafe { out.set_len(start + total) };
    true
}

/// One `[k, last]` plane of [`transposed_copy`]: the source's `k` axis of stride 1 and its
/// `last` axis of stride `sj` (`nj` long); the output's `k` stride `dk`, `last` stride 1.
struct Plane {
    /// `w.as_ptr()` (an address, so that the tasks are `Send`).
    src: usize,
    sj: isize,
    nj: usize,
    dk: usize,
}

/// Copies the rows `ks` of a plane starting at `src` (source) and `dst` (output): element
/// `(kk, j)` from `src + kk + j * sj` to `dst + kk * dk + j`. A last axis of 2 to 4
/// elements (an image's channels) is copied row by row, each output row contiguous and the
/// `nj` source lanes read in step (a tile loop over so short an axis cost 7 ns per element);
/// wider planes in square tiles of [`TILE`], so that both the reads and the writes stay
/// within a few cache lines.
///
/// # Safety
/// Every `(kk, j)` for `kk` in `ks`, `j < nj` must be readable at its source offset and
/// writable at its output offset, and no other thread may access those outputs.
unsafe fn copy_rows<T: Copy>(p: &Plane, src: *const T, ks: std::ops::Range<usize>, dst: *mut T) {
    /// Rows of a plane whose last axis is `N` long (`N` a constant: the lanes unrolled).
    ///
    /// # Safety
    /// As [`copy_rows`] with `nj = N`.
    #[inline(always)]
    unsafe fn rows<T: Copy, const N: usize>(p: &Plane, src: *const T, ks: std::ops::Range<usize>, dst: *mut T) {
        for kk in ks {
            for j in 0..N {
                // SAFETY: the caller's contract.
                unsafe { dst.add(kk * p.dk + j).write(*src.offset(kk as isize + j as isize * p.sj)) };
            }
        }
    }
    // SAFETY (every arm): the caller's contract, `nj` matching each arm's constant.
    unsafe {
        match p.nj {
            2 => return rows::<T, 2>(p, src, ks, dst),
            3 => return rows::<T, 3>(p, src, ks, dst),
            4 => return rows::<T, 4>(p, src, ks, dst),
            _ => {}
        }
    }
    for k0 in ks.clone().step_by(TILE) {
        let k1 = (k0 + TILE).min(ks.end);
        for j0 in (0..p.nj).step_by(TILE) {
            for j in j0..(j0 + TILE).min(p.nj) {
                let row = j as isize * p.sj;
                for kk in k0..k1 {
                    // SAFETY: the caller's contract.
                    unsafe { dst.add(kk * p.dk + j).write(*src.offset(row + kk as isize)) };
                }
            }
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
pub fn standard_array<T: Copy + Send + Sync>(v: &ArrayViewD<'_, T>) -> ArrayD<T> {
    let data = standard_vec(v);
    // The element count matches the shape by construction.
    ArrayD::from_shape_vec(IxDyn(v.shape()), data).unwrap_or_else(|_| v.to_owned())
}

/// `v` itself when it is in standard layout, else its elements copied into a standard-layout
/// array ([`standard_array`]: the fast form of ndarray's `as_standard_layout`).
///
/// ```
/// use ndarray::{ArrayD, IxDyn};
/// use pfor::tensor::layout::standard_cow;
///
/// let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), (0..6).collect()).expect("6 elements");
/// assert!(standard_cow(a.view()).is_view()); // already row-major: borrowed
/// let t = standard_cow(a.t());
/// assert_eq!(t.as_slice(), Some(&[0, 3, 1, 4, 2, 5][..]));
/// ```
pub fn standard_cow<T: Copy + Send + Sync>(v: ArrayViewD<'_, T>) -> CowArray<'_, T, IxDyn> {
    if v.is_standard_layout() { CowArray::from(v) } else { CowArray::from(standard_array(&v)) }
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
