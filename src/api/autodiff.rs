//! Jacobians, hessians and per-example gradients built on `pfor` (paper §5.1, §5.3).
//!
//! Each function traces ONE derivative computation for a symbolic row index `i` and lets
//! the vectorizer turn it into one graph computing all rows at once:
//! - [`jacobian`]: row `i` is the reverse-mode gradient of `y` with a one-hot cotangent
//!   `e_i`; shape `y.shape + x.shape`.
//! - [`jacobian_fwd`]: column `i` is the forward-mode JVP with a one-hot tangent; same
//!   result, cheaper when `x` is smaller than `y`.
//! - [`batch_jacobian`]: `y[b, ...]` depends only on `x[b, ...]`; result `[b, y..., x...]`,
//!   one vectorized loop over the non-batch elements of `y`.
//! - [`hessian`]: the jacobian of the jacobian (so `y` need not be scalar): shape
//!   `y.shape + x.shape + x.shape`. It differentiates the vectorized graph of the first
//!   jacobian — gradients of pfor output.
//! - [`per_example_gradients`]: the gradient of a per-example loss for every example of a
//!   batch: `vectorized_map` of reverse mode.
//!
//! Every function has a `_with` form taking [`PforOptions`] (chunking bounds the memory of
//! large jacobians) and the `_loop` forms run the same rows with the reference loop (the
//! baseline the benchmarks compare against).
//!
//! Invariants: shapes of `y` (and for `batch_jacobian` the non-batch dims) must be static;
//! only float values are differentiated; errors name the function and the shapes.

use crate::autodiff::{gradients, jvp};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::kernels::alloc::checked_len;
use crate::reference::{LoopLen, for_loop};
use crate::tensor::{DType, Dim, Shape};
use crate::vectorize::{PforOptions, pfor_with};

use super::map::{map_fn, vectorized_map_with};

/// The static shape of `v` (its element count checked, so products of it cannot overflow).
fn fixed_shape(g: &Graph, v: ValueId, what: &str, f: &str) -> Result<Vec<usize>> {
    let s = g.shape(v)?;
    let dims = s
        .as_fixed()
        .ok_or_else(|| Error::InvalidArgument(format!("{f}: {what} {v} has shape {s}; a static shape is needed")))?;
    checked_len(f, &dims)?;
    Ok(dims)
}

pub(super) fn float_dtype(g: &Graph, v: ValueId, what: &str, f: &str) -> Result<DType> {
    let dt = g.dtype(v)?;
    if !dt.is_float() {
        return Err(Error::InvalidArgument(format!(
            "{f}: {what} {v} has dtype {dt}; only float values are differentiated"
        )));
    }
    Ok(dt)
}

fn to_i64(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

/// A one-hot tensor of `shape` with a 1 at flat position `i` (a scalar i64 value).
fn basis(g: &mut Graph, i: ValueId, shape: &[usize], dtype: DType) -> Result<ValueId> {
    let n: usize = shape.iter().product();
    let e = g.one_hot(i, n, -1, 1.0, 0.0, dtype)?;
    g.reshape(e, &to_i64(shape))
}

/// How rows are computed: vectorized, or the reference loop.
#[derive(Clone, Copy)]
enum Rows<'a> {
    Pfor(&'a PforOptions),
    Loop,
}

fn run_rows(
    g: &mut Graph,
    n: usize,
    rows: Rows<'_>,
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    match rows {
        Rows::Pfor(o) => pfor_with(g, n, o, body),
        Rows::Loop => for_loop(g, LoopLen::Static(n), body),
    }
}

fn jacobian_impl(g: &mut Graph, y: ValueId, x: ValueId, rows: Rows<'_>) -> Result<ValueId> {
    const F: &str = "jacobian";
    let dt = float_dtype(g, y, "y", F)?;
    float_dtype(g, x, "x", F)?;
    let ys = fixed_shape(g, y, "y", F)?;
    let xs = fixed_shape(g, x, "x", F)?;
    let n: usize = ys.iter().product();
    let out = run_rows(g, n, rows, |g, i| {
        let e = basis(g, i, &ys, dt)?;
        gradients(g, &[y], &[x], Some(&[e]))
    })?;
    let mut shape = ys.clone();
    shape.extend(&xs);
    g.reshape(out[0], &to_i64(&shape))
}

/// `d y / d x` with shape `y.shape + x.shape` (reverse mode, vectorized over the rows).
///
/// ```
/// use pfor::api::jacobian;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::from_vec(&[2], vec![1.0f64, 2.0])?);
/// let y = g.mul(x, x)?; // y_i = x_i²
/// let j = jacobian(&mut g, y, x)?; // [2, 2] = diag(2 x)
/// assert_eq!(run_once(&g, &[j], &[])?[0].to_f64_vec(), [2.0, 0.0, 0.0, 4.0]);
/// # Ok(())
/// # }
/// ```
pub fn jacobian(g: &mut Graph, y: ValueId, x: ValueId) -> Result<ValueId> {
    jacobian_with(g, y, x, &PforOptions::default())
}

/// [`jacobian`] with options.
///
/// ```
/// use pfor::api::jacobian_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::randn_f64(&[5], 0)?);
/// let y = g.tanh(x)?;
/// // 5 rows in vectorized chunks of 2; fail instead of falling back to a loop
/// let j = jacobian_with(&mut g, y, x, &PforOptions::strict().with_chunk_size(2))?;
/// assert_eq!(g.shape(j)?.as_fixed(), Some(vec![5, 5]));
/// # Ok(())
/// # }
/// ```
pub fn jacobian_with(g: &mut Graph, y: ValueId, x: ValueId, options: &PforOptions) -> Result<ValueId> {
    jacobian_impl(g, y, x, Rows::Pfor(options))
}

/// [`jacobian`] computed one row at a time by the reference loop (the baseline).
///
/// ```
/// use pfor::api::{jacobian, jacobian_loop};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::randn_f64(&[3], 0)?);
/// let y = g.sin(x)?;
/// let (v, l) = (jacobian(&mut g, y, x)?, jacobian_loop(&mut g, y, x)?);
/// let r = run_once(&g, &[v, l], &[])?;
/// assert!(r[0].allclose(&r[1], 1e-12, 1e-12));
/// # Ok(())
/// # }
/// ```
pub fn jacobian_loop(g: &mut Graph, y: ValueId, x: ValueId) -> Result<ValueId> {
    jacobian_impl(g, y, x, Rows::Loop)
}

/// `d y / d x` by forward mode (one JVP per element of `x`, vectorized), same shape as
/// [`jacobian`].
///
/// ```
/// use pfor::api::{jacobian, jacobian_fwd};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::randn_f64(&[2], 0)?);
/// let y = g.sin(x)?;
/// // one JVP per element of x (2) instead of one VJP per element of y
/// let (f, r) = (jacobian_fwd(&mut g, y, x)?, jacobian(&mut g, y, x)?);
/// let out = run_once(&g, &[f, r], &[])?;
/// assert!(out[0].allclose(&out[1], 1e-12, 1e-12));
/// # Ok(())
/// # }
/// ```
pub fn jacobian_fwd(g: &mut Graph, y: ValueId, x: ValueId) -> Result<ValueId> {
    jacobian_fwd_with(g, y, x, &PforOptions::default())
}

/// [`jacobian_fwd`] with options.
///
/// ```
/// use pfor::api::jacobian_fwd_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::randn_f64(&[4], 0)?);
/// let y = g.exp(x)?;
/// let j = jacobian_fwd_with(&mut g, y, x, &PforOptions::strict())?;
/// assert_eq!(g.shape(j)?.as_fixed(), Some(vec![4, 4]));
/// # Ok(())
/// # }
/// ```
pub fn jacobian_fwd_with(g: &mut Graph, y: ValueId, x: ValueId, options: &PforOptions) -> Result<ValueId> {
    const F: &str = "jacobian_fwd";
    float_dtype(g, y, "y", F)?;
    let dt = float_dtype(g, x, "x", F)?;
    let ys = fixed_shape(g, y, "y", F)?;
    let xs = fixed_shape(g, x, "x", F)?;
    let (ny, nx): (usize, usize) = (ys.iter().product(), xs.iter().product());
    let out = pfor_with(g, nx, options, |g, i| {
        let t = basis(g, i, &xs, dt)?;
        jvp(g, &[y], &[x], &[t])
    })?;
    // [nx, y...] -> [ny, nx] -> y.shape + x.shape
    let flat = g.reshape(out[0], &[nx as i64, ny as i64])?;
    let tr = g.transpose(flat, &[1, 0])?;
    let mut shape = ys;
    shape.extend(&xs);
    g.reshape(tr, &to_i64(&shape))
}

fn batch_jacobian_impl(g: &mut Graph, y: ValueId, x: ValueId, rows: Rows<'_>) -> Result<ValueId> {
    const F: &str = "batch_jacobian";
    let dt = float_dtype(g, y, "y", F)?;
    float_dtype(g, x, "x", F)?;
    let (sy, sx) = (g.shape(y)?, g.shape(x)?);
    if sy.rank() == 0 || sx.rank() == 0 {
        return Err(Error::InvalidArgument(format!("{F}: y {sy} and x {sx} need a leading batch axis")));
    }
    if !sy.dim(0).compatible(sx.dim(0)) {
        return Err(Error::InvalidArgument(format!("{F}: batch dims differ: y {sy}, x {sx}")));
    }
    let tail = |s: &Shape, what: &str| -> Result<Vec<usize>> {
        s.tail().as_fixed().ok_or_else(|| {
            Error::InvalidArgument(format!("{F}: {what} has shape {s}; its non-batch dims must be static"))
        })
    };
    let (ym, xk) = (tail(&sy, "y")?, tail(&sx, "x")?);
    let m = checked_len(F, &ym)?;
    let out = run_rows(g, m, rows, |g, j| {
        // One-hot over the non-batch elements of y, the same for every example.
        let mut one = vec![1usize];
        one.extend(&ym);
        let e = basis(g, j, &one, dt)?;
        let dy = crate::autodiff::util::broadcast_like(g, e, y)?;
        gradients(g, &[y], &[x], Some(&[dy]))
    })?;
    // [m, b, x...] -> [b, m, x...] -> [b, y..., x...]
    let r = g.shape(out[0])?.rank();
    let mut perm = vec![1, 0];
    perm.extend(2..r);
    let t = g.transpose(out[0], &perm)?;
    let mut shape: Vec<i64> = vec![match sx.dim(0) {
        Dim::Fixed(b) => *b as i64,
        _ => -1,
    }];
    shape.extend(to_i64(&ym));
    shape.extend(to_i64(&xk));
    g.reshape(t, &shape)
}

/// Per-example jacobians `[b, y..., x...]` of `y[b, ...]` w.r.t. `x[b, ...]`, where example
/// `b` of `y` depends only on example `b` of `x` (not checked: cross-example terms would be
/// summed in).
///
/// ```
/// use pfor::api::batch_jacobian;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[8, 3], 0)?); // 8 examples
/// let w = g.constant(Tensor::randn_f64(&[3, 2], 1)?);
/// let ys = g.matmul(xs, w)?; // [8, 2], example b reads only row b
/// let j = batch_jacobian(&mut g, ys, xs)?; // [8, 2, 3]: Wᵀ for every example
/// let wt = g.transpose(w, &[1, 0])?;
/// let r = run_once(&g, &[j, wt], &[])?;
/// assert_eq!(r[0].shape(), &[8, 2, 3]);
/// assert!(r[0].index_axis0(7)?.allclose(&r[1], 1e-12, 1e-12));
/// # Ok(())
/// # }
/// ```
pub fn batch_jacobian(g: &mut Graph, y: ValueId, x: ValueId) -> Result<ValueId> {
    batch_jacobian_with(g, y, x, &PforOptions::default())
}

/// [`batch_jacobian`] with options.
///
/// ```
/// use pfor::api::batch_jacobian_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[6, 2], 0)?);
/// let ys = g.tanh(xs)?;
/// let j = batch_jacobian_with(&mut g, ys, xs, &PforOptions::strict())?;
/// assert_eq!(g.shape(j)?.as_fixed(), Some(vec![6, 2, 2]));
/// # Ok(())
/// # }
/// ```
pub fn batch_jacobian_with(g: &mut Graph, y: ValueId, x: ValueId, options: &PforOptions) -> Result<ValueId> {
    batch_jacobian_impl(g, y, x, Rows::Pfor(options))
}

/// The hessian `d² y / d x²` with shape `y.shape + x.shape + x.shape`: the jacobian of the
/// (vectorized) jacobian.
///
/// ```
/// use pfor::api::hessian;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F64, [2]);
/// let x2 = g.mul(x, x)?;
/// let y = g.sum_all(x2)?; // y = Σ x²: the hessian is 2 I
/// let h = hessian(&mut g, y, x)?;
/// let r = run_once(&g, &[h], &[(x, Tensor::vec1(&[1.0f64, 3.0]))])?;
/// assert_eq!(r[0].to_f64_vec(), [2.0, 0.0, 0.0, 2.0]);
/// # Ok(())
/// # }
/// ```
pub fn hessian(g: &mut Graph, y: ValueId, x: ValueId) -> Result<ValueId> {
    hessian_with(g, y, x, &PforOptions::default())
}

/// [`hessian`] with options.
///
/// ```
/// use pfor::api::hessian_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::randn_f64(&[3], 0)?);
/// let y = g.sin(x)?; // [3]: the hessian is [3, 3, 3]
/// let h = hessian_with(&mut g, y, x, &PforOptions::strict())?;
/// assert_eq!(g.shape(h)?.as_fixed(), Some(vec![3, 3, 3]));
/// # Ok(())
/// # }
/// ```
pub fn hessian_with(g: &mut Graph, y: ValueId, x: ValueId, options: &PforOptions) -> Result<ValueId> {
    let j = jacobian_with(g, y, x, options)?;
    jacobian_with(g, j, x, options)
}

/// Per-example gradients: for every row `b` of the `batch` tensors (axis 0), the gradient
/// of `loss_fn(rows_b, params)` (a scalar) w.r.t. each of `params`; results are stacked
/// `[n, param...]`. Vectorized by `pfor` (a dense layer becomes one batched outer
/// product).
///
/// ```
/// use pfor::api::per_example_gradients;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[16, 3], 0)?); // 16 examples
/// let w = g.constant(Tensor::randn_f64(&[3], 1)?);
/// // one example's loss: (x·w)²
/// let grads = per_example_gradients(&mut g, |g, rows, p| {
///     let xw = g.mul(rows[0], p[0])?;
///     let s = g.sum_all(xw)?;
///     g.mul(s, s)
/// }, &[xs], &[w])?;
/// assert_eq!(g.shape(grads[0])?.as_fixed(), Some(vec![16, 3])); // one gradient per example
/// # Ok(())
/// # }
/// ```
pub fn per_example_gradients(
    g: &mut Graph,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    batch: &[ValueId],
    params: &[ValueId],
) -> Result<Vec<ValueId>> {
    per_example_gradients_with(g, &PforOptions::default(), loss_fn, batch, params)
}

fn per_example_body(
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    params: Vec<ValueId>,
) -> impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>> {
    move |g, rows| {
        let loss = loss_fn(g, rows, &params)?;
        let s = g.shape(loss)?;
        if s.rank() != 0 {
            return Err(Error::InvalidArgument(format!(
                "per_example_gradients: the loss must be a scalar per example, got shape {s}"
            )));
        }
        gradients(g, &[loss], &params, None)
    }
}

/// [`per_example_gradients`] with options.
///
/// ```
/// use pfor::api::per_example_gradients_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[10, 3], 0)?);
/// let w = g.constant(Tensor::randn_f64(&[3], 1)?);
/// let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| {
///     let xw = g.mul(rows[0], p[0])?;
///     let t = g.tanh(xw)?;
///     g.sum_all(t)
/// };
/// // 10 examples in vectorized chunks of 4 (the peak memory of 4, not 10)
/// let opts = PforOptions::default().with_chunk_size(4);
/// let grads = per_example_gradients_with(&mut g, &opts, loss, &[xs], &[w])?;
/// assert_eq!(run_once(&g, &grads, &[])?[0].shape(), &[10, 3]);
/// # Ok(())
/// # }
/// ```
pub fn per_example_gradients_with(
    g: &mut Graph,
    options: &PforOptions,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    batch: &[ValueId],
    params: &[ValueId],
) -> Result<Vec<ValueId>> {
    for p in params {
        float_dtype(g, *p, "param", "per_example_gradients")?;
    }
    vectorized_map_with(g, options, per_example_body(loss_fn, params.to_vec()), batch)
}

/// [`per_example_gradients`] by the reference loop (`map_fn`): the baseline.
///
/// ```
/// use pfor::api::{per_example_gradients, per_example_gradients_loop};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[5, 3], 0)?);
/// let w = g.constant(Tensor::randn_f64(&[3], 1)?);
/// let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| {
///     let xw = g.mul(rows[0], p[0])?;
///     let e = g.exp(xw)?;
///     g.sum_all(e)
/// };
/// let v = per_example_gradients(&mut g, loss, &[xs], &[w])?;
/// let l = per_example_gradients_loop(&mut g, loss, &[xs], &[w])?;
/// let r = run_once(&g, &[v[0], l[0]], &[])?;
/// assert!(r[0].allclose(&r[1], 1e-12, 1e-12));
/// # Ok(())
/// # }
/// ```
pub fn per_example_gradients_loop(
    g: &mut Graph,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    batch: &[ValueId],
    params: &[ValueId],
) -> Result<Vec<ValueId>> {
    for p in params {
        float_dtype(g, *p, "param", "per_example_gradients")?;
    }
    map_fn(g, per_example_body(loss_fn, params.to_vec()), batch)
}
