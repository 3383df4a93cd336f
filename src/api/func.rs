//! Function-level derivatives (JAX `grad` / `value_and_grad` / `jvp` / `vjp`,
//! `torch.func`): derivatives of a *traced function* — a closure `f(g, args)` that builds
//! the function's graph from its argument values, as [`vectorized_map`] takes — beside the
//! value-level [`gradients`] / [`crate::autodiff::jvp`], which differentiate one graph value
//! w.r.t. another.
//!
//! - [`grad`]`(f, argnums)` and [`value_and_grad`]`(f, argnums)` are transforms: they return
//!   a new traced function (a closure of the same form), so they compose with each other
//!   (grad of grad) and with [`vectorized_map`] (per-example gradients =
//!   `vectorized_map(grad(loss, &[1]))` with the parameters broadcast).
//! - [`vjp`] and [`jvp`] are called on the graph directly: outputs and the pulled-back
//!   cotangents / pushed-forward tangents.
//!
//! Invariants:
//! - `f` is traced on fresh uses of its arguments (one `identity` node each), so argument
//!   `k` is differentiated as a parameter of `f` only: passing one value as two arguments
//!   gives the two partial derivatives (never their sum), and values `f` captures from its
//!   environment are constants (as in JAX). No caller ever needs an `identity` of its own.
//! - derivatives have the dtype and shape of their argument (zeros where `f` does not
//!   depend on it); only float arguments are differentiated;
//! - errors name the transform, the argument (position, value, dtype / shape) or output.
//!
//! [`vectorized_map`]: crate::api::vectorized_map

use crate::autodiff::{self, gradients};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};

use super::autodiff::float_dtype;

/// What a traced function returns: one value or several.
pub trait Outputs {
    /// The output values, in order.
    fn into_values(self) -> Vec<ValueId>;
}

impl Outputs for ValueId {
    fn into_values(self) -> Vec<ValueId> {
        vec![self]
    }
}

impl Outputs for Vec<ValueId> {
    fn into_values(self) -> Vec<ValueId> {
        self
    }
}

/// Trace `f` on fresh uses of `args`: returns `f`'s parameters (one identity per
/// argument) and its outputs.
fn trace<O: Outputs>(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<O>,
    args: &[ValueId],
) -> Result<(Vec<ValueId>, Vec<ValueId>)> {
    let params = args.iter().map(|&a| g.identity(a)).collect::<Result<Vec<_>>>()?;
    let outs = f(g, &params)?.into_values();
    Ok((params, outs))
}

/// The parameters `argnums` picks, checked (in range, float).
fn pick(g: &Graph, t: &str, params: &[ValueId], args: &[ValueId], argnums: &[usize]) -> Result<Vec<ValueId>> {
    if argnums.is_empty() {
        return Err(Error::InvalidArgument(format!("{t}: no argument to differentiate (argnums or primals is empty)")));
    }
    argnums
        .iter()
        .map(|&k| {
            let p = *params.get(k).ok_or_else(|| {
                Error::InvalidArgument(format!("{t}: argnums entry {k} is out of range for {} arguments", args.len()))
            })?;
            float_dtype(g, args[k], &format!("argument {k}"), t)?;
            Ok(p)
        })
        .collect()
}

/// [`trace`] with every argument differentiated (checked float): parameters and outputs.
fn trace_all<O: Outputs>(
    g: &mut Graph,
    t: &str,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<O>,
    primals: &[ValueId],
) -> Result<(Vec<ValueId>, Vec<ValueId>)> {
    let (params, outs) = trace(g, f, primals)?;
    let all: Vec<usize> = (0..params.len()).collect();
    Ok((pick(g, t, &params, primals, &all)?, outs))
}

/// `f`'s one scalar output, checked.
fn scalar_output(g: &Graph, t: &str, outs: &[ValueId]) -> Result<ValueId> {
    let [y] = outs else {
        return Err(Error::InvalidArgument(format!(
            "{t}: f must return one scalar, it returned {} values",
            outs.len()
        )));
    };
    let s = g.shape(*y)?;
    if s.rank() != 0 {
        return Err(Error::InvalidArgument(format!("{t}: f must return a scalar, it returned {y} of shape {s}")));
    }
    float_dtype(g, *y, "output", t)?;
    Ok(*y)
}

/// The gradient transform (JAX `grad`): a traced function returning, for the arguments
/// listed in `argnums`, the gradient of `f` (which must return one float scalar) w.r.t.
/// each, in `argnums` order. Compose it with itself (grad of grad) and with
/// [`vectorized_map`](crate::api::vectorized_map).
///
/// ```
/// use pfor::api::{MapAxes, grad, vectorized_map_axes};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::from_vec(&[2], vec![1.0f64, 2.0])?);
/// // f(a, b) = Σ a·b, called with x for both: the partial w.r.t. the first use only
/// let f = |g: &mut Graph, a: &[ValueId]| { let p = g.mul(a[0], a[1])?; g.sum_all(p) };
/// let d = grad(f, &[0])(&mut g, &[x, x])?;
/// assert_eq!(run_once(&g, &d, &[])?[0], Tensor::from_vec(&[2], vec![1.0f64, 2.0])?);
/// // per-example gradients w.r.t. the weights: vectorized_map of grad, weights broadcast
/// let xs = g.constant(Tensor::randn_f64(&[8, 2], 0)?);
/// let w = g.constant(Tensor::randn_f64(&[2], 1)?);
/// let axes = MapAxes::new().in_axes(&[Some(0), None]);
/// let per_example = vectorized_map_axes(&mut g, grad(f, &[1]), &[xs, w], &axes)?;
/// assert_eq!(g.shape(per_example[0])?.as_fixed(), Some(vec![8, 2]));
/// // the second derivative of sin: -sin
/// let s = g.constant(Tensor::scalar(0.5f64));
/// let d2 = grad(grad(|g: &mut Graph, a: &[ValueId]| g.sin(a[0]), &[0]), &[0])(&mut g, &[s])?;
/// let v = run_once(&g, &d2, &[])?[0].to_f64_vec()[0];
/// assert!((v + 0.5f64.sin()).abs() < 1e-12);
/// # Ok(())
/// # }
/// ```
pub fn grad<F, O>(f: F, argnums: &[usize]) -> impl Fn(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>> + use<F, O>
where
    F: Fn(&mut Graph, &[ValueId]) -> Result<O>,
    O: Outputs,
{
    let vg = value_and_grad(f, argnums);
    move |g, args| Ok(vg(g, args)?.split_off(1))
}

/// The value-and-gradient transform (JAX `value_and_grad`): like [`grad`], with `f`'s
/// value first: `[value, d value / d args[argnums[0]], ...]`.
///
/// ```
/// use pfor::api::value_and_grad;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::scalar(3.0f64));
/// let vg = value_and_grad(|g: &mut Graph, a: &[ValueId]| g.mul(a[0], a[0]), &[0])(&mut g, &[x])?;
/// let r = run_once(&g, &vg, &[])?;
/// assert_eq!((r[0].to_f64_vec()[0], r[1].to_f64_vec()[0]), (9.0, 6.0));
/// # Ok(())
/// # }
/// ```
pub fn value_and_grad<F, O>(
    f: F,
    argnums: &[usize],
) -> impl Fn(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>> + use<F, O>
where
    F: Fn(&mut Graph, &[ValueId]) -> Result<O>,
    O: Outputs,
{
    const T: &str = "grad";
    let argnums = argnums.to_vec();
    move |g, args| {
        let (params, outs) = trace(g, &f, args)?;
        let xs = pick(g, T, &params, args, &argnums)?;
        let y = scalar_output(g, T, &outs)?;
        let mut r = vec![y];
        r.extend(gradients(g, &[y], &xs, None)?);
        Ok(r)
    }
}

/// Reverse mode on a traced function (JAX `vjp`, with the cotangents given): returns `f`'s
/// outputs and, for every argument, the cotangent `Σ_k cotangents[k] · d out_k / d arg`
/// (zeros for an argument no output depends on; every argument must be float). One
/// cotangent per output, of its dtype and shape.
///
/// ```
/// use pfor::api::vjp;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::from_vec(&[2], vec![1.0f64, 2.0])?);
/// let ct = g.constant(Tensor::from_vec(&[2], vec![1.0f64, 10.0])?);
/// let (y, dx) = vjp(&mut g, |g: &mut Graph, a: &[ValueId]| g.mul(a[0], a[0]), &[x], &[ct])?;
/// let r = run_once(&g, &[y[0], dx[0]], &[])?;
/// assert_eq!(r[1], Tensor::from_vec(&[2], vec![2.0f64, 40.0])?);
/// # Ok(())
/// # }
/// ```
pub fn vjp<O: Outputs>(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<O>,
    primals: &[ValueId],
    cotangents: &[ValueId],
) -> Result<(Vec<ValueId>, Vec<ValueId>)> {
    const T: &str = "vjp";
    let (xs, outs) = trace_all(g, T, f, primals)?;
    check_pairs(g, T, "output", &outs, "cotangent", cotangents)?;
    let d = gradients(g, &outs, &xs, Some(cotangents))?;
    Ok((outs, d))
}

/// Forward mode on a traced function (JAX `jvp`): returns `f`'s outputs and their tangents
/// `Σ_k d out / d arg_k · tangents[k]` (one tangent per argument, of its shape; every
/// argument must be float).
///
/// ```
/// use pfor::api::jvp;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::from_vec(&[2], vec![1.0f64, 2.0])?);
/// let t = g.constant(Tensor::from_vec(&[2], vec![1.0f64, 0.0])?);
/// let (y, dy) = jvp(&mut g, |g: &mut Graph, a: &[ValueId]| g.mul(a[0], a[0]), &[x], &[t])?;
/// let r = run_once(&g, &[y[0], dy[0]], &[])?;
/// assert_eq!(r[1], Tensor::from_vec(&[2], vec![2.0f64, 0.0])?);
/// # Ok(())
/// # }
/// ```
pub fn jvp<O: Outputs>(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<O>,
    primals: &[ValueId],
    tangents: &[ValueId],
) -> Result<(Vec<ValueId>, Vec<ValueId>)> {
    const T: &str = "jvp";
    check_pairs(g, T, "argument", primals, "tangent", tangents)?;
    let (xs, outs) = trace_all(g, T, f, primals)?;
    let d = autodiff::jvp(g, &outs, &xs, tangents)?;
    Ok((outs, d))
}

/// One `b` per `a`, of its dtype and a compatible shape.
fn check_pairs(g: &Graph, t: &str, what_a: &str, a: &[ValueId], what_b: &str, b: &[ValueId]) -> Result<()> {
    if a.len() != b.len() {
        return Err(Error::InvalidArgument(format!("{t}: {} {what_b}s for {} {what_a}s (one each)", b.len(), a.len())));
    }
    for (k, (&x, &y)) in a.iter().zip(b).enumerate() {
        let (tx, ty) = (g.value_type(x)?, g.value_type(y)?);
        if tx.dtype != ty.dtype || !tx.shape.compatible(&ty.shape) {
            return Err(Error::InvalidArgument(format!(
                "{t}: {what_b} {k} ({y}) is {ty}, {what_a} {k} ({x}) is {tx}: they must match"
            )));
        }
    }
    Ok(())
}
