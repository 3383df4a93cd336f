//! Differentially private gradients (DP-SGD) without materializing per-example gradients.
//!
//! [`dp_gradients`] builds, once, the graph of one DP-SGD gradient step for a batch:
//! for every example `i` the gradient `g_i` of `loss_fn(rows_i, params)`, its global norm
//! `‖g_i‖ = sqrt(Σ_params ‖g_{i,p}‖²)`, the clip factor `c_i = min(1, C / (‖g_i‖ + 1e-6))`,
//! and per parameter `(Σ_i c_i g_{i,p} + N(0, (σ·C)²)) / n`. These are exactly the semantics
//! of Opacus (`DPOptimizer`: per-sample clip factor `min(1, C / (norm + 1e-6))`, noise of
//! standard deviation `noise_multiplier · max_grad_norm` per element, divided by the batch
//! size) and of TF Privacy's Gaussian sum query (which clips by `C / max(‖g_i‖, C)`, equal up
//! to the `1e-6`). `n` is the batch's actual size (Opacus's "expected batch size" under
//! Poisson sampling is the caller's business: feed batches of the size you account for).
//!
//! The body is vectorized by `pfor`; with [`DpOptions::rewrites`] on (the default) the
//! product rewrites of [`crate::vectorize::contract_since`] then turn the per-example norms
//! of product-shaped gradients (dense layers, layers applied over positions or time steps)
//! into their "ghost" form and the clipped sum `Σ_i c_i g_i` of such gradients into one
//! contraction, so the `[n, param...]` per-example gradients of those layers are never
//! written. With rewrites off the same graph materializes them (the baseline).
//! [`dp_gradients_loop`] computes the same values one example at a time (the reference).
//!
//! Invariants: the loss is a scalar per example; params are float; `clip_norm > 0`,
//! `noise_multiplier >= 0` and finite, and noise needs a key (a scalar i64 value, fed anew
//! every step so each step draws fresh noise; each parameter's noise stream is the key folded
//! with the parameter's position). Errors name the function and the offending value.

use crate::autodiff::gradients;
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::tensor::{DType, Dim, Tensor};
use crate::vectorize::{PforOptions, contract_since};

use super::map::{map_fn, vectorized_map_with};

/// Opacus's stabilizer in the clip factor `min(1, C / (‖g_i‖ + 1e-6))`.
pub const CLIP_EPS: f64 = 1e-6;

/// Options of [`dp_gradients`].
#[derive(Clone)]
pub struct DpOptions {
    /// The clipping bound `C` on each example's global gradient norm (`max_grad_norm`).
    pub clip_norm: f64,
    /// `σ`: the noise's standard deviation is `σ · C` per element (0: no noise).
    pub noise_multiplier: f64,
    /// The random key (a scalar i64 value; feed a new one every step). Needed when
    /// `noise_multiplier > 0`.
    pub key: Option<ValueId>,
    /// Apply the product rewrites (ghost norms, clipped sums as contractions) to the
    /// vectorized graph (default: on). Off: per-example gradients are materialized (and
    /// `pfor.products` is ignored).
    pub rewrites: bool,
    /// Options of the vectorization (the rewrites also need `pfor.products`).
    pub pfor: PforOptions,
}

impl Default for DpOptions {
    fn default() -> Self {
        DpOptions { clip_norm: 1.0, noise_multiplier: 0.0, key: None, rewrites: true, pfor: PforOptions::default() }
    }
}

/// The values [`dp_gradients`] adds to the graph.
#[derive(Clone, Debug)]
pub struct DpGradients {
    /// Per parameter: the noisy average of the clipped per-example gradients (param's shape).
    pub grads: Vec<ValueId>,
    /// Each example's global gradient norm before clipping, `[n]`.
    pub norms: ValueId,
    /// Each example's loss, `[n]`.
    pub losses: ValueId,
}

const F: &str = "dp_gradients";

fn check_params(g: &Graph, params: &[ValueId], f: &str) -> Result<()> {
    if params.is_empty() {
        return Err(Error::InvalidArgument(format!("{f}: needs at least one param")));
    }
    for &p in params {
        let dt = g.dtype(p)?;
        if !dt.is_float() {
            return Err(Error::InvalidArgument(format!(
                "{f}: param {p} has dtype {dt}; only float params are trained"
            )));
        }
        if g.shape(p)?.as_fixed().is_none() {
            return Err(Error::InvalidArgument(format!(
                "{f}: param {p} has shape {}; a static shape is needed",
                g.shape(p)?
            )));
        }
    }
    Ok(())
}

fn check_options(o: &DpOptions) -> Result<()> {
    if !(o.clip_norm.is_finite() && o.clip_norm > 0.0) {
        return Err(Error::InvalidArgument(format!("{F}: clip_norm must be finite and > 0, got {}", o.clip_norm)));
    }
    if !(o.noise_multiplier.is_finite() && o.noise_multiplier >= 0.0) {
        return Err(Error::InvalidArgument(format!(
            "{F}: noise_multiplier must be finite and >= 0, got {}",
            o.noise_multiplier
        )));
    }
    if o.noise_multiplier > 0.0 && o.key.is_none() {
        return Err(Error::InvalidArgument(format!(
            "{F}: noise_multiplier {} > 0 needs a key (a scalar i64 value)",
            o.noise_multiplier
        )));
    }
    Ok(())
}

/// One example's loss (checked scalar), its gradients and their global norm.
fn example_grads(
    g: &mut Graph,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    rows: &[ValueId],
    params: &[ValueId],
    f: &str,
) -> Result<(ValueId, Vec<ValueId>, ValueId)> {
    let loss = loss_fn(g, rows, params)?;
    let s = g.shape(loss)?;
    if s.rank() != 0 {
        return Err(Error::InvalidArgument(format!(
            "{f}: the loss must be a scalar per example, got {loss} of shape {s}"
        )));
    }
    let grads = gradients(g, &[loss], params, None)?;
    let mut total: Option<ValueId> = None;
    for &gp in &grads {
        let sq = g.square(gp)?;
        let s = g.sum_all(sq)?;
        total = Some(match total {
            None => s,
            Some(t) => g.add(t, s)?,
        });
    }
    let total = total.ok_or_else(|| Error::InvalidArgument(format!("{f}: needs at least one param")))?;
    let norm = g.sqrt(total)?;
    Ok((loss, grads, norm))
}

/// The per-example body of [`dp_gradients`]: `[loss, norm, c·g_1, ..., c·g_P]`.
fn dp_body(
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    params: Vec<ValueId>,
    clip_norm: f64,
) -> impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>> {
    move |g, rows| {
        let (loss, grads, norm) = example_grads(g, loss_fn, rows, &params, F)?;
        // c = min(1, C / (norm + eps)), a constant of the gradient (as in Opacus).
        let den = g.add_scalar(norm, CLIP_EPS)?;
        let cn = g.scalar_like(norm, clip_norm)?;
        let q = g.div(cn, den)?;
        let one = g.scalar_like(norm, 1.0)?;
        let c = g.minimum(q, one)?;
        let mut out = vec![loss, norm];
        for gp in grads {
            out.push(g.mul(c, gp)?);
        }
        Ok(out)
    }
}

/// The batch size of `examples` as a scalar of `dtype` (static when the leading dim is).
fn batch_size(g: &mut Graph, stacked: ValueId, dtype: DType) -> Result<ValueId> {
    match g.shape(stacked)?.dim(0).clone() {
        Dim::Fixed(k) => Ok(g.scalar(dtype, k as f64)),
        Dim::Dynamic(_) => {
            let s = g.shape_of(stacked)?;
            let s0 = g.slice(s, &[0], &[1])?;
            let s0 = g.reshape(s0, &[])?;
            g.cast(s0, dtype)
        }
    }
}

/// Sum the clipped per-example gradients over the batch, add noise, divide by `n`.
fn finish(g: &mut Graph, o: &DpOptions, params: &[ValueId], outs: &[ValueId]) -> Result<DpGradients> {
    let (losses, norms) = (outs[0], outs[1]);
    let mut grads = Vec::with_capacity(params.len());
    for (k, (&p, &cg)) in params.iter().zip(&outs[2..]).enumerate() {
        let dt = g.dtype(p)?;
        let mut s = g.reduce_sum(cg, Some(&[0]), false)?;
        if let (true, Some(key)) = (o.noise_multiplier > 0.0, o.key) {
            let shape = g.shape(p)?.as_fixed().unwrap_or_default();
            let idx = g.constant(Tensor::scalar(k as i64));
            let kp = g.fold_in(key, idx)?;
            let noise = g.random_normal(kp, &shape, dt, 0.0, o.noise_multiplier * o.clip_norm)?;
            s = g.add(s, noise)?;
        }
        let n = batch_size(g, cg, dt)?;
        grads.push(g.div(s, n)?);
    }
    Ok(DpGradients { grads, norms, losses })
}

/// One DP-SGD gradient step as a graph (compile once with a `Session`, run per batch):
/// per-example gradients of `loss_fn(rows, params)` over axis 0 of `examples`, each clipped
/// to global norm `options.clip_norm`, summed, noised and averaged (see the module docs for
/// the exact Opacus / TF Privacy semantics). Per-example gradients of product-shaped
/// layers are not materialized when `options.rewrites` is on.
///
/// ```
/// use pfor::api::{DpOptions, dp_gradients};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.input("xs", DType::F32, [32, 4]); // a batch of 32 examples
/// let w = g.constant(Tensor::randn(&[4, 2], 0)?);
/// let key = g.input("key", DType::I64, Shape::scalar()); // a fresh key every step
/// let opts = DpOptions { clip_norm: 1.0, noise_multiplier: 1.1, key: Some(key), ..DpOptions::default() };
/// let dp = dp_gradients(&mut g, |g, rows, p| {
///     let x = g.expand_dims(rows[0], 0)?; // [1, 4]
///     let z = g.matmul(x, p[0])?;
///     let z = g.tanh(z)?;
///     g.sum_all(z)
/// }, &[xs], &[w], &opts)?;
/// let mut step = Session::new(&g, &[dp.grads[0], dp.norms])?; // compile once, run per batch
/// let r = step.run(&[(xs, Tensor::randn(&[32, 4], 1)?), (key, Tensor::scalar(7i64))])?;
/// assert_eq!((r[0].shape(), r[1].shape()), (&[4, 2][..], &[32][..]));
/// # Ok(())
/// # }
/// ```
pub fn dp_gradients(
    g: &mut Graph,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    examples: &[ValueId],
    params: &[ValueId],
    options: &DpOptions,
) -> Result<DpGradients> {
    check_params(g, params, F)?;
    check_options(options)?;
    let mark = g.mark();
    let pfor = options.pfor.clone().with_products(options.rewrites && options.pfor.products);
    let outs = vectorized_map_with(g, &pfor, dp_body(loss_fn, params.to_vec(), options.clip_norm), examples)?;
    let mut r = finish(g, options, params, &outs)?;
    if options.rewrites && options.pfor.products {
        let mut all = r.grads.clone();
        all.extend([r.norms, r.losses]);
        let rep = contract_since(g, &all, mark)?;
        let k = params.len();
        r = DpGradients { grads: rep.outputs[..k].to_vec(), norms: rep.outputs[k], losses: rep.outputs[k + 1] };
    }
    Ok(r)
}

/// [`dp_gradients`] one example at a time (`map_fn`, per-example gradients materialized):
/// the reference the vectorized graph is checked against and the "loop" baseline.
///
/// ```
/// use pfor::api::{DpOptions, dp_gradients, dp_gradients_loop};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[6, 3], 0)?);
/// let w = g.constant(Tensor::randn_f64(&[3], 1)?);
/// let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| {
///     let xw = g.mul(rows[0], p[0])?;
///     let s = g.sum_all(xw)?;
///     g.mul(s, s)
/// };
/// let opts = DpOptions { clip_norm: 0.5, ..DpOptions::default() }; // no noise: deterministic
/// let (v, l) = (dp_gradients(&mut g, loss, &[xs], &[w], &opts)?, dp_gradients_loop(&mut g, loss, &[xs], &[w], &opts)?);
/// let r = run_once(&g, &[v.grads[0], l.grads[0]], &[])?;
/// assert!(r[0].allclose(&r[1], 1e-10, 1e-12));
/// # Ok(())
/// # }
/// ```
pub fn dp_gradients_loop(
    g: &mut Graph,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    examples: &[ValueId],
    params: &[ValueId],
    options: &DpOptions,
) -> Result<DpGradients> {
    check_params(g, params, F)?;
    check_options(options)?;
    let outs = map_fn(g, dp_body(loss_fn, params.to_vec(), options.clip_norm), examples)?;
    finish(g, options, params, &outs)
}

/// Each example's global gradient norm `sqrt(Σ_params ‖∇_p loss_i‖²)`, `[n]`, vectorized;
/// the per-example gradients of product-shaped layers are not materialized (ghost norms).
///
/// ```
/// use pfor::api::per_example_gradient_norms;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::from_vec(&[2, 2], vec![3.0f64, 0.0, 0.0, 4.0])?);
/// let w = g.constant(Tensor::from_vec(&[2], vec![1.0f64, 1.0])?);
/// // loss = x·w: its gradient w.r.t. w is x, so the norms are ‖x‖
/// let norms = per_example_gradient_norms(&mut g, |g, rows, p| {
///     let xw = g.mul(rows[0], p[0])?;
///     g.sum_all(xw)
/// }, &[xs], &[w])?;
/// let want = Tensor::from_vec(&[2], vec![3.0f64, 4.0])?;
/// assert!(run_once(&g, &[norms], &[])?[0].allclose(&want, 1e-12, 1e-12));
/// # Ok(())
/// # }
/// ```
pub fn per_example_gradient_norms(
    g: &mut Graph,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    examples: &[ValueId],
    params: &[ValueId],
) -> Result<ValueId> {
    per_example_gradient_norms_with(g, &PforOptions::default(), loss_fn, examples, params)
}

/// [`per_example_gradient_norms`] with options (ghost norms need `options.simplify` and
/// `options.products`, pfor's defaults).
///
/// ```
/// use pfor::api::per_example_gradient_norms_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[8, 3], 0)?);
/// let w = g.constant(Tensor::randn_f64(&[3], 1)?);
/// let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| {
///     let xw = g.mul(rows[0], p[0])?;
///     let t = g.tanh(xw)?;
///     g.sum_all(t)
/// };
/// let norms = per_example_gradient_norms_with(&mut g, &PforOptions::strict(), loss, &[xs], &[w])?;
/// assert_eq!(g.shape(norms)?.as_fixed(), Some(vec![8]));
/// # Ok(())
/// # }
/// ```
pub fn per_example_gradient_norms_with(
    g: &mut Graph,
    options: &PforOptions,
    loss_fn: impl FnOnce(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
    examples: &[ValueId],
    params: &[ValueId],
) -> Result<ValueId> {
    const N: &str = "per_example_gradient_norms";
    check_params(g, params, N)?;
    let params = params.to_vec();
    let outs = vectorized_map_with(
        g,
        options,
        move |g, rows| Ok(vec![example_grads(g, loss_fn, rows, &params, N)?.2]),
        examples,
    )?;
    Ok(outs[0])
}
