//! `vectorized_map` / `map_fn`: apply a per-example function over one axis of each input.
//!
//! Which axis of each input is mapped, and where the mapped axis goes in each output, is a
//! [`MapAxes`] (JAX `in_axes` / `out_axes`, torch `in_dims` / `out_dims`). The default maps
//! axis 0 of every input and stacks every output on axis 0.
//!
//! Invariants:
//! - an input is broadcast (the same value for every iteration, loop-invariant, never
//!   tiled) only when its in-axis is `None`; a mapped input of size 1 is a batch of one;
//! - the loop length is the common size of the mapped axes (checked statically where the
//!   sizes are known), else [`MapAxes::axis_size`]; with no mapped input it must be given;
//! - a mapped axis other than 0 is moved to the front once, outside the loop, so the body
//!   reads row `i` of axis 0 (which the vectorizer turns into the whole input, no gather);
//! - errors name the function, the input (position, value, shape) and the axis.

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::reference::{LoopLen, for_loop};
use crate::tensor::Dim;
use crate::vectorize::{PforOptions, pfor_with};

/// Where the mapped axis is in each input and each output of a vectorized map.
///
/// `MapAxes::new()` (also `Default`) maps axis 0 of every input and puts the mapped axis at
/// position 0 of every output.
///
/// ```
/// use pfor::api::{MapAxes, vectorized_map_axes};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[3, 5], 0)?); // 5 examples on axis 1
/// let w = g.constant(Tensor::randn_f64(&[3], 1)?);     // one weight vector for all
/// let axes = MapAxes::new().in_axes(&[Some(-1), None]).out_axes(&[0]);
/// let y = vectorized_map_axes(&mut g, |g, a| Ok(vec![g.mul(a[0], a[1])?]), &[xs, w], &axes)?;
/// assert_eq!(g.shape(y[0])?.as_fixed(), Some(vec![5, 3]));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapAxes {
    in_axes: Option<Vec<Option<i64>>>,
    out_axes: OutAxes,
    axis_size: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum OutAxes {
    All(i64),
    Each(Vec<i64>),
}

impl Default for OutAxes {
    fn default() -> Self {
        OutAxes::All(0)
    }
}

impl MapAxes {
    /// Every input mapped on axis 0, every output stacked on axis 0.
    pub fn new() -> MapAxes {
        MapAxes::default()
    }
    /// One entry per input: `Some(axis)` maps that axis (negative counts from the end),
    /// `None` passes the input whole to every iteration (broadcast).
    pub fn in_axes(mut self, axes: &[Option<i64>]) -> MapAxes {
        self.in_axes = Some(axes.to_vec());
        self
    }
    /// One entry per output: the axis of the result the mapped axis becomes (negative
    /// counts from the end of the result's shape).
    pub fn out_axes(mut self, axes: &[i64]) -> MapAxes {
        self.out_axes = OutAxes::Each(axes.to_vec());
        self
    }
    /// The same output axis for every output.
    pub fn out_axis(mut self, axis: i64) -> MapAxes {
        self.out_axes = OutAxes::All(axis);
        self
    }
    /// The in-axes given (`None`: every input on axis 0).
    pub fn in_axes_of(&self) -> Option<&[Option<i64>]> {
        self.in_axes.as_deref()
    }
    /// The number of iterations (JAX `axis_size`): needed when no input is mapped, checked
    /// against the mapped inputs otherwise.
    pub fn axis_size(mut self, n: usize) -> MapAxes {
        self.axis_size = Some(n);
        self
    }
}

/// `axis` of a rank-`rank` value normalized to `[0, rank)`, or `None` when out of range.
fn normalize(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// A mapped input: the value with the mapped axis moved to the front.
struct Plan {
    len: LoopLen,
    /// Per input: the value the body reads row `i` of (axis 0), or `None` = broadcast.
    rows_of: Vec<Option<ValueId>>,
}

fn plan(g: &mut Graph, f: &str, elems: &[ValueId], axes: &MapAxes) -> Result<Plan> {
    let in_axes: Vec<Option<i64>> = match &axes.in_axes {
        Some(a) if a.len() != elems.len() => {
            return Err(Error::InvalidArgument(format!(
                "{f}: in_axes has {} entries for {} inputs",
                a.len(),
                elems.len()
            )));
        }
        Some(a) => a.clone(),
        None => vec![Some(0); elems.len()],
    };
    // (input position, value, shape, axis, size) of the first mapped input, for messages
    let mut first: Option<(usize, ValueId, String, usize, Dim)> = None;
    let mut n: Option<Dim> = None;
    let mut first_dynamic: Option<(ValueId, usize)> = None;
    let mut rows_of = Vec::with_capacity(elems.len());
    for (k, (&e, axis)) in elems.iter().zip(&in_axes).enumerate() {
        let Some(axis) = *axis else {
            g.check_value(e)?;
            rows_of.push(None);
            continue;
        };
        let s = g.shape(e)?;
        let a = normalize(axis, s.rank()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{f}: input {k} ({e}, shape {s}) is mapped on axis {axis}, out of range for rank {}",
                s.rank()
            ))
        })?;
        let d = s.dim(a).clone();
        if let Some((k0, e0, s0, a0, d0)) = &first {
            n = Some(n.unwrap_or_else(|| d0.clone()).unify(&d).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{f}: mapped sizes differ: input {k0} ({e0}, shape {s0}) has {d0} on axis {a0}, \
                     input {k} ({e}, shape {s}) has {d} on axis {a}"
                ))
            })?);
        } else {
            n = Some(d.clone());
            first = Some((k, e, s.to_string(), a, d.clone()));
        }
        if let Dim::Dynamic(_) = d {
            first_dynamic.get_or_insert((e, a));
        }
        let moved = if a == 0 {
            e
        } else {
            let mut perm = vec![a];
            perm.extend((0..s.rank()).filter(|&j| j != a));
            g.transpose(e, &perm)?
        };
        rows_of.push(Some(moved));
    }
    let len = match (n, axes.axis_size) {
        (None, Some(k)) => LoopLen::Static(k),
        (None, None) => {
            return Err(Error::InvalidArgument(format!(
                "{f}: no input is mapped (every in_axes entry is None) and no axis_size is given"
            )));
        }
        (Some(Dim::Fixed(m)), size) => {
            if let (Some(k), Some((k0, e0, s0, a0, _))) = (size.filter(|&k| k != m), &first) {
                return Err(Error::InvalidArgument(format!(
                    "{f}: axis_size is {k} but input {k0} ({e0}, shape {s0}) has {m} on mapped axis {a0}"
                )));
            }
            LoopLen::Static(m)
        }
        (Some(Dim::Dynamic(_)), Some(k)) => LoopLen::Static(k),
        (Some(Dim::Dynamic(_)), None) => {
            let (e, a) = first_dynamic.ok_or_else(|| Error::Verify(format!("{f}: no dynamic mapped input")))?;
            let s = g.shape_of(e)?;
            let sa = g.slice(s, &[a as i64], &[1])?;
            LoopLen::Dynamic(g.reshape(sa, &[])?)
        }
    };
    Ok(Plan { len, rows_of })
}

fn rows(g: &mut Graph, elems: &[ValueId], rows_of: &[Option<ValueId>], i: ValueId) -> Result<Vec<ValueId>> {
    elems
        .iter()
        .zip(rows_of)
        .map(|(&e, r)| match r {
            Some(m) => g.gather(*m, i, 0),
            None => Ok(e),
        })
        .collect()
}

/// Move axis 0 of each stacked output to its out-axis.
fn place_outputs(g: &mut Graph, f: &str, outs: Vec<ValueId>, axes: &MapAxes) -> Result<Vec<ValueId>> {
    if let OutAxes::Each(a) = &axes.out_axes
        && a.len() != outs.len()
    {
        return Err(Error::InvalidArgument(format!(
            "{f}: out_axes has {} entries for {} outputs",
            a.len(),
            outs.len()
        )));
    }
    outs.into_iter()
        .enumerate()
        .map(|(k, o)| {
            let axis = match &axes.out_axes {
                OutAxes::All(a) => *a,
                OutAxes::Each(a) => a[k],
            };
            let s = g.shape(o)?;
            let b = normalize(axis, s.rank()).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{f}: out_axes[{k}] = {axis} is out of range for output {k} of shape {s} (mapped axis first)"
                ))
            })?;
            if b == 0 {
                return Ok(o);
            }
            let mut perm: Vec<usize> = (1..s.rank()).collect();
            perm.insert(b, 0);
            g.transpose(o, &perm)
        })
        .collect()
}

/// The map named `name`: vectorized with `options`, or the reference loop (`None`).
fn map_impl(
    g: &mut Graph,
    name: &str,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
    axes: &MapAxes,
    options: Option<&PforOptions>,
) -> Result<Vec<ValueId>> {
    let Plan { len, rows_of } = plan(g, name, elems, axes)?;
    let elems = elems.to_vec();
    let body = move |g: &mut Graph, i: ValueId| {
        let xs = rows(g, &elems, &rows_of, i)?;
        f(g, &xs)
    };
    let outs = match options {
        Some(o) => pfor_with(g, len, o, body)?,
        None => for_loop(g, len, body)?,
    };
    place_outputs(g, name, outs, axes)
}

/// Vectorized map over axis 0 of every input (TF `vectorized_map`, JAX `vmap`): `f` is
/// traced once for one example and vectorized by `pfor`. Each output gets a leading axis
/// of the loop length. Other axes, broadcast inputs and output axes: [`vectorized_map_axes`].
///
/// ```
/// use pfor::api::vectorized_map;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[4, 3], 0)?);
/// let norms = vectorized_map(&mut g, |g, x| {
///     let sq = g.mul(x[0], x[0])?;
///     Ok(vec![g.reduce_sum(sq, Some(&[0]), false)?])
/// }, &[xs])?;
/// assert_eq!(g.shape(norms[0])?.as_fixed(), Some(vec![4]));
/// # Ok(())
/// # }
/// ```
pub fn vectorized_map(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
) -> Result<Vec<ValueId>> {
    vectorized_map_axes_with(g, f, elems, &MapAxes::new(), &PforOptions::default())
}

/// [`vectorized_map`] with options.
pub fn vectorized_map_with(
    g: &mut Graph,
    options: &PforOptions,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
) -> Result<Vec<ValueId>> {
    vectorized_map_axes_with(g, f, elems, &MapAxes::new(), options)
}

/// [`vectorized_map`] with explicit axes: `axes.in_axes` picks the mapped axis of each
/// input or broadcasts it (`None`), `axes.out_axes` places the mapped axis in each output.
///
/// ```
/// use pfor::api::{MapAxes, vectorized_map_axes};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[4, 3], 0)?);
/// let axes = MapAxes::new().out_axis(1); // examples on axis 1 of the result
/// let y = vectorized_map_axes(&mut g, |g, x| Ok(vec![g.exp(x[0])?]), &[xs], &axes)?;
/// assert_eq!(g.shape(y[0])?.as_fixed(), Some(vec![3, 4]));
/// # Ok(())
/// # }
/// ```
pub fn vectorized_map_axes(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
    axes: &MapAxes,
) -> Result<Vec<ValueId>> {
    vectorized_map_axes_with(g, f, elems, axes, &PforOptions::default())
}

/// [`vectorized_map_axes`] with options.
pub fn vectorized_map_axes_with(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
    axes: &MapAxes,
    options: &PforOptions,
) -> Result<Vec<ValueId>> {
    map_impl(g, "vectorized_map", f, elems, axes, Some(options))
}

/// Sequential map over axis 0 of every input (TF `map_fn`): one body run per example. The
/// baseline [`vectorized_map`] is compared against.
///
/// ```
/// use pfor::api::{map_fn, vectorized_map};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[4, 3], 0)?);
/// let f = |g: &mut Graph, x: &[ValueId]| Ok(vec![g.tanh(x[0])?]);
/// let (a, b) = (vectorized_map(&mut g, f, &[xs])?, map_fn(&mut g, f, &[xs])?);
/// let r = run_once(&g, &[a[0], b[0]], &[])?;
/// assert_eq!(r[0], r[1]);
/// # Ok(())
/// # }
/// ```
pub fn map_fn(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
) -> Result<Vec<ValueId>> {
    map_fn_axes(g, f, elems, &MapAxes::new())
}

/// [`map_fn`] with explicit axes (see [`MapAxes`]): the loop [`vectorized_map_axes`] is
/// compared against.
///
/// ```
/// use pfor::api::{MapAxes, map_fn_axes};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[3, 4], 0)?); // 4 examples on the last axis
/// let w = g.constant(Tensor::randn_f64(&[3], 1)?);
/// let axes = MapAxes::new().in_axes(&[Some(-1), None]);
/// let y = map_fn_axes(&mut g, |g, a| Ok(vec![g.mul(a[0], a[1])?]), &[xs, w], &axes)?;
/// assert_eq!(g.shape(y[0])?.as_fixed(), Some(vec![4, 3]));
/// # Ok(())
/// # }
/// ```
pub fn map_fn_axes(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
    axes: &MapAxes,
) -> Result<Vec<ValueId>> {
    map_impl(g, "map_fn", f, elems, axes, None)
}
