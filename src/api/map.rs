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
//! - an output whose out-axis is `None` is returned unbatched, as the body computed it, and
//!   only when the transform finds it loop-invariant (`vectorized_map`: the vectorizer's
//!   stackedness — no mapped input, per-iteration random draw or variable write behind it;
//!   `map_fn`: the loop's — it does not depend on the loop index); otherwise it is an error
//!   naming the output, never a silently stacked or silently picked row;
//! - errors name the function, the input (position, value, shape) and the axis.

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::reference::{LoopLen, for_loop_outputs};
use crate::tensor::Dim;
use crate::vectorize::{PforOptions, pfor_outputs};

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
/// let axes = MapAxes::new().in_axes(&[Some(-1), None]).out_axes(&[Some(0)]);
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
    Each(Vec<Option<i64>>),
}

impl Default for OutAxes {
    fn default() -> Self {
        OutAxes::All(0)
    }
}

impl MapAxes {
    /// Every input mapped on axis 0, every output stacked on axis 0.
    ///
    /// ```
    /// use pfor::api::MapAxes;
    ///
    /// assert_eq!(MapAxes::new(), MapAxes::default());
    /// assert_eq!(MapAxes::new().in_axes_of(), None); // every input on axis 0
    /// ```
    pub fn new() -> MapAxes {
        MapAxes::default()
    }
    /// One entry per input: `Some(axis)` maps that axis (negative counts from the end),
    /// `None` passes the input whole to every iteration (broadcast).
    ///
    /// ```
    /// use pfor::api::{MapAxes, map_fn_axes};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let xs = g.constant(Tensor::randn_f64(&[3, 6], 0)?); // 6 examples on the last axis
    /// let b = g.constant(Tensor::randn_f64(&[3], 1)?);     // the same bias for all
    /// let axes = MapAxes::new().in_axes(&[Some(-1), None]);
    /// let y = map_fn_axes(&mut g, |g, a| Ok(vec![g.add(a[0], a[1])?]), &[xs, b], &axes)?;
    /// assert_eq!(g.shape(y[0])?.as_fixed(), Some(vec![6, 3]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_axes(mut self, axes: &[Option<i64>]) -> MapAxes {
        self.in_axes = Some(axes.to_vec());
        self
    }
    /// One entry per output: `Some(axis)` is the axis of the result the mapped axis becomes
    /// (negative counts from the end of the result's shape); `None` returns the output
    /// unbatched (JAX `out_axes=None`): it must be the same in every iteration
    /// (loop-invariant), else the map is an error naming the output.
    ///
    /// ```
    /// use pfor::api::{MapAxes, vectorized_map_axes};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let xs = g.constant(Tensor::randn_f64(&[5, 3], 0)?);
    /// let w = g.constant(Tensor::randn_f64(&[3], 1)?);
    /// // per example x·w, and the weights' norm once (it is the same for every example)
    /// let f = |g: &mut Graph, a: &[ValueId]| {
    ///     let xw = g.mul(a[0], a[1])?;
    ///     let ww = g.mul(a[1], a[1])?;
    ///     Ok(vec![g.sum_all(xw)?, g.sum_all(ww)?])
    /// };
    /// let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axes(&[Some(0), None]);
    /// let y = vectorized_map_axes(&mut g, f, &[xs, w], &axes)?;
    /// assert_eq!(g.shape(y[0])?.as_fixed(), Some(vec![5]));
    /// assert_eq!(g.shape(y[1])?.as_fixed(), Some(vec![])); // unbatched: a scalar
    /// // an output that differs between examples cannot be unbatched
    /// let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axes(&[None, None]);
    /// assert!(vectorized_map_axes(&mut g, f, &[xs, w], &axes).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn out_axes(mut self, axes: &[Option<i64>]) -> MapAxes {
        self.out_axes = OutAxes::Each(axes.to_vec());
        self
    }
    /// The same output axis for every output.
    ///
    /// ```
    /// use pfor::api::MapAxes;
    ///
    /// // every output with the mapped axis last; a later setting replaces an earlier one
    /// assert_eq!(MapAxes::new().out_axis(-1), MapAxes::new().out_axes(&[Some(-1)]).out_axis(-1));
    /// ```
    pub fn out_axis(mut self, axis: i64) -> MapAxes {
        self.out_axes = OutAxes::All(axis);
        self
    }
    /// The in-axes given (`None`: every input on axis 0).
    ///
    /// ```
    /// use pfor::api::MapAxes;
    ///
    /// assert_eq!(MapAxes::new().in_axes_of(), None);
    /// assert_eq!(MapAxes::new().in_axes(&[Some(1), None]).in_axes_of(), Some(&[Some(1), None][..]));
    /// ```
    pub fn in_axes_of(&self) -> Option<&[Option<i64>]> {
        self.in_axes.as_deref()
    }
    /// The number of iterations (JAX `axis_size`): needed when no input is mapped, checked
    /// against the mapped inputs otherwise.
    ///
    /// ```
    /// use pfor::api::{MapAxes, vectorized_map_axes};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.constant(Tensor::randn_f64(&[3], 0)?);
    /// // no input is mapped: the loop length comes from axis_size
    /// let axes = MapAxes::new().in_axes(&[None]).axis_size(4);
    /// let y = vectorized_map_axes(&mut g, |g, a| Ok(vec![g.exp(a[0])?]), &[w], &axes)?;
    /// assert_eq!(g.shape(y[0])?.as_fixed(), Some(vec![4, 3]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn axis_size(mut self, n: usize) -> MapAxes {
        self.axis_size = Some(n);
        self
    }
    /// The out-axis of output `k` of `count` (`None`: unbatched), or an error when the
    /// out-axes list has another length.
    fn out_axis_of(&self, f: &str, k: usize, count: usize) -> Result<Option<i64>> {
        match &self.out_axes {
            OutAxes::All(a) => Ok(Some(*a)),
            OutAxes::Each(a) if a.len() != count => {
                Err(Error::InvalidArgument(format!("{f}: out_axes has {} entries for {count} outputs", a.len())))
            }
            OutAxes::Each(a) => Ok(a[k]),
        }
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

/// Move axis 0 of each stacked output to its out-axis; an unbatched one (out-axis `None`)
/// stays as it is, and must not be stacked.
fn place_outputs(
    g: &mut Graph,
    f: &str,
    outs: Vec<(ValueId, bool)>,
    types: &[String],
    axes: &MapAxes,
) -> Result<Vec<ValueId>> {
    let count = outs.len();
    outs.into_iter()
        .enumerate()
        .map(|(k, (o, stacked))| {
            let Some(axis) = axes.out_axis_of(f, k, count)? else {
                if stacked {
                    let t = types.get(k).map_or("?", String::as_str);
                    return Err(Error::InvalidArgument(format!(
                        "{f}: out_axes[{k}] is None (unbatched), but output {k} ({t} per iteration) is not \
                         loop-invariant: it depends on a mapped input (or, vectorized, on a per-iteration \
                         random draw or variable write); give it an axis, or return a value that is the same \
                         in every iteration"
                    )));
                }
                return Ok(o);
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
    // per output: unbatched (out-axis None), and its per-iteration type (filled by the trace)
    let unbatched: Vec<bool> = match &axes.out_axes {
        OutAxes::Each(a) => a.iter().map(Option::is_none).collect(),
        OutAxes::All(_) => Vec::new(),
    };
    let mut types: Vec<String> = Vec::new();
    let body = |g: &mut Graph, i: ValueId| {
        let xs = rows(g, &elems, &rows_of, i)?;
        let outs = f(g, &xs)?;
        for k in 0..outs.len() {
            axes.out_axis_of(name, k, outs.len())?;
        }
        types = outs.iter().map(|o| Ok(g.value_type(*o)?.to_string())).collect::<Result<_>>()?;
        Ok(outs)
    };
    let outs = match options {
        Some(o) => pfor_outputs(g, len, o, &unbatched, body)?.0,
        None => for_loop_outputs(g, len, &unbatched, body)?,
    };
    place_outputs(g, name, outs, &types, axes)
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
///
/// ```
/// use pfor::api::vectorized_map_with;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[10, 3], 0)?);
/// // in chunks of 4 rows (a loop of vectorized chunks: bounded memory), no fallback loops
/// let opts = PforOptions::strict().with_chunk_size(4);
/// let y = vectorized_map_with(&mut g, &opts, |g, x| Ok(vec![g.sum_all(x[0])?]), &[xs])?;
/// assert_eq!(run_once(&g, &y, &[])?[0].shape(), &[10]);
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use pfor::api::{MapAxes, vectorized_map_axes_with};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::randn_f64(&[3, 5], 0)?); // 5 examples on axis 1
/// let axes = MapAxes::new().in_axes(&[Some(1)]).out_axis(-1);
/// let y = vectorized_map_axes_with(&mut g, |g, x| Ok(vec![g.exp(x[0])?]), &[xs], &axes, &PforOptions::strict())?;
/// let want = g.exp(xs)?; // elementwise: mapping over axis 1 and putting it back changes nothing
/// let r = run_once(&g, &[y[0], want], &[])?;
/// assert_eq!(r[0], r[1]);
/// # Ok(())
/// # }
/// ```
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
