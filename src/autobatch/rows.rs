//! Row kernels over the thread axis (axis 0): gather, scatter, masked select, broadcast,
//! and the per-thread stacks of Full variables.
//!
//! Invariants: every kernel checks dtypes, row lengths and indices and returns an `Err`
//! (never panics) on a mismatch. Destinations are mutated in place through `ArcArray`'s
//! copy-on-write, so a buffer shared with a value still in use is copied, never aliased.
//! Dtype dispatch goes through the crate's `dispatch!` macros into generic kernels.

use std::borrow::Cow;

use ndarray::{ArcArray, IxDyn};

use super::program::VarType;
use crate::error::{Error, Result};
use crate::tensor::{Element, Tensor};

fn err(msg: String) -> Error {
    Error::shape("autobatch rows", msg)
}

fn as_slice<T: Element>(a: &ArcArray<T, IxDyn>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().copied().collect()),
    }
}

fn slice_mut<T: Element>(a: &mut ArcArray<T, IxDyn>) -> Result<&mut [T]> {
    if !a.is_standard_layout() {
        *a = a.as_standard_layout().into_owned().into_shared();
    }
    a.as_slice_mut().ok_or_else(|| err("internal: buffer is not contiguous".into()))
}

/// Elements per row (per thread) of a batched shape.
fn row_len(shape: &[usize]) -> usize {
    shape.iter().skip(1).product()
}

/// Zeros of `[batch] + ty.shape`.
pub(crate) fn zeros(ty: &VarType, batch: usize) -> Result<Tensor> {
    Tensor::zeros(ty.dtype, &ty.batched_shape(batch))
}

/// `[width] + v.shape`, every row equal to `v`.
pub(crate) fn broadcast(v: &Tensor, width: usize) -> Result<Tensor> {
    crate::dispatch!(v, a => {
        let src = as_slice(a);
        let mut data = Vec::with_capacity(width * src.len());
        for _ in 0..width {
            data.extend_from_slice(&src);
        }
        let mut shape = vec![width];
        shape.extend_from_slice(a.shape());
        Tensor::from_vec(&shape, data)
    })
}

fn gather_t<T: Element>(a: &ArcArray<T, IxDyn>, idx: &[usize]) -> Result<Tensor> {
    let shape = a.shape();
    let batch = shape.first().copied().unwrap_or(0);
    let row = row_len(shape);
    let src = as_slice(a);
    let mut data = Vec::with_capacity(idx.len() * row);
    for &i in idx {
        if i >= batch {
            return Err(Error::IndexOutOfRange { op: "autobatch gather".into(), index: i as i64, bound: batch });
        }
        if row == 1 {
            data.push(src[i]);
        } else {
            data.extend_from_slice(&src[i * row..(i + 1) * row]);
        }
    }
    let mut out_shape = shape.to_vec();
    out_shape[0] = idx.len();
    Tensor::from_vec(&out_shape, data)
}

/// Rows `idx` of `t` (a new `[idx.len(), ...]` tensor).
pub(crate) fn gather(t: &Tensor, idx: &[usize]) -> Result<Tensor> {
    if t.rank() == 0 {
        return Err(err("gather from a rank-0 tensor".into()));
    }
    crate::dispatch!(t, a => gather_t(a, idx))
}

fn check_rows(dst: &[usize], src: &[usize], what: &str) -> Result<()> {
    if dst.len() != src.len() || dst[1..] != src[1..] {
        return Err(err(format!("{what}: destination {dst:?} and source {src:?} rows differ")));
    }
    Ok(())
}

fn scatter_t<T: Element>(d: &mut ArcArray<T, IxDyn>, idx: &[usize], src: &Tensor) -> Result<()> {
    let s = src.array::<T>()?;
    check_rows(d.shape(), s.shape(), "scatter")?;
    if s.shape()[0] != idx.len() {
        return Err(err(format!("scatter of {} rows to {} indices", s.shape()[0], idx.len())));
    }
    let batch = d.shape()[0];
    let row = row_len(s.shape());
    let sv = as_slice(s);
    let dv = slice_mut(d)?;
    for (k, &i) in idx.iter().enumerate() {
        if i >= batch {
            return Err(Error::IndexOutOfRange { op: "autobatch scatter".into(), index: i as i64, bound: batch });
        }
        if row == 1 {
            dv[i] = sv[k];
        } else {
            dv[i * row..(i + 1) * row].copy_from_slice(&sv[k * row..(k + 1) * row]);
        }
    }
    Ok(())
}

/// `dst[idx[k]] = src[k]` for every `k`, in place.
pub(crate) fn scatter(dst: &mut Tensor, idx: &[usize], src: &Tensor) -> Result<()> {
    if dst.dtype() != src.dtype() || dst.rank() == 0 {
        return Err(err(format!("scatter of {} into {}{:?}", src.dtype(), dst.dtype(), dst.shape())));
    }
    crate::dispatch!(dst, d => scatter_t(d, idx, src))
}

fn copy_rows_t<T: Element>(d: &mut ArcArray<T, IxDyn>, src: &Tensor, idx: &[usize]) -> Result<()> {
    let s = src.array::<T>()?;
    if d.shape() != s.shape() {
        return Err(err(format!("row copy from {:?} into {:?}", s.shape(), d.shape())));
    }
    let batch = d.shape()[0];
    let row = row_len(s.shape());
    let sv = as_slice(s);
    let dv = slice_mut(d)?;
    for &i in idx {
        if i >= batch {
            return Err(Error::IndexOutOfRange { op: "autobatch row copy".into(), index: i as i64, bound: batch });
        }
        if row == 1 {
            dv[i] = sv[i];
        } else {
            dv[i * row..(i + 1) * row].copy_from_slice(&sv[i * row..(i + 1) * row]);
        }
    }
    Ok(())
}

/// `dst[i] = src[i]` for every row `i` in `idx`, in place (same shapes).
pub(crate) fn copy_rows(dst: &mut Tensor, src: &Tensor, idx: &[usize]) -> Result<()> {
    if dst.dtype() != src.dtype() || dst.rank() == 0 {
        return Err(err(format!("row copy of {} into {}{:?}", src.dtype(), dst.dtype(), dst.shape())));
    }
    crate::dispatch!(dst, d => copy_rows_t(d, src, idx))
}

/// The per-thread booleans of a `bool[]` batched variable.
pub(crate) fn bools(t: &Tensor) -> Result<Cow<'_, [bool]>> {
    let a = t.array::<bool>()?;
    if a.ndim() != 1 {
        return Err(err(format!("a branch condition must be bool[] per thread, got shape {:?}", a.shape())));
    }
    Ok(as_slice(a))
}

fn stack_push_t<T: Element>(store: &mut ArcArray<T, IxDyn>, reg: &Tensor, moves: &[(usize, usize)]) -> Result<()> {
    let r = reg.array::<T>()?;
    let batch = r.shape()[0];
    let row = row_len(r.shape());
    let depth = store.len() / (batch * row).max(1);
    let rv = as_slice(r);
    let sv = slice_mut(store)?;
    for &(t, d) in moves {
        if t >= batch || d >= depth {
            return Err(err(format!("internal: stack slot ({d}, {t}) outside [{depth}, {batch}]")));
        }
        let at = (d * batch + t) * row;
        if row == 1 {
            sv[at] = rv[t];
        } else {
            sv[at..at + row].copy_from_slice(&rv[t * row..(t + 1) * row]);
        }
    }
    Ok(())
}

/// For each `(thread, depth)`: `store[depth, thread] = reg[thread]`.
pub(crate) fn stack_push(store: &mut Tensor, reg: &Tensor, moves: &[(usize, usize)]) -> Result<()> {
    if store.dtype() != reg.dtype() || reg.rank() == 0 {
        return Err(err(format!("stack of {} pushed with {}{:?}", store.dtype(), reg.dtype(), reg.shape())));
    }
    crate::dispatch!(store, s => stack_push_t(s, reg, moves))
}

fn stack_pop_t<T: Element>(reg: &mut ArcArray<T, IxDyn>, store: &Tensor, moves: &[(usize, usize)]) -> Result<()> {
    let s = store.array::<T>()?;
    let batch = reg.shape()[0];
    let row = row_len(reg.shape());
    let depth = s.len() / (batch * row).max(1);
    let sv = as_slice(s);
    let rv = slice_mut(reg)?;
    for &(t, d) in moves {
        if t >= batch || d >= depth {
            return Err(err(format!("internal: stack slot ({d}, {t}) outside [{depth}, {batch}]")));
        }
        let at = (d * batch + t) * row;
        if row == 1 {
            rv[t] = sv[at];
        } else {
            rv[t * row..(t + 1) * row].copy_from_slice(&sv[at..at + row]);
        }
    }
    Ok(())
}

/// For each `(thread, depth)`: `reg[thread] = store[depth, thread]`.
pub(crate) fn stack_pop(reg: &mut Tensor, store: &Tensor, moves: &[(usize, usize)]) -> Result<()> {
    if store.dtype() != reg.dtype() || reg.rank() == 0 {
        return Err(err(format!("stack of {} popped into {}{:?}", store.dtype(), reg.dtype(), reg.shape())));
    }
    crate::dispatch!(reg, r => stack_pop_t(r, store, moves))
}

/// A copy of a stack store `[depth, batch, ...]` with room for `new_depth` levels.
pub(crate) fn stack_grow(store: &Tensor, ty: &VarType, batch: usize, new_depth: usize) -> Result<Tensor> {
    let mut shape = vec![new_depth];
    shape.extend(ty.batched_shape(batch));
    let mut out = Tensor::full_for("autobatch vm: stack growth", ty.dtype, &shape, 0.0)?;
    crate::dispatch!(&mut out, o => {
        let src = store.array()?;
        let src = as_slice(src);
        let dst = slice_mut(o)?;
        if src.len() > dst.len() {
            return Err(err("internal: a stack cannot shrink".into()));
        }
        dst[..src.len()].copy_from_slice(&src);
    });
    Ok(out)
}
