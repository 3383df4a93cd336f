//! `vectorized_map` / `map_fn`: apply a per-example function over axis 0 of tensors.
//!
//! The loop length is the common first dim of `elems`; an elem whose first dim is a fixed
//! 1 is broadcast (the same row for every iteration, i.e. loop-invariant — never tiled).

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::reference::{LoopLen, for_loop};
use crate::tensor::{Dim, Tensor};
use crate::vectorize::{PforOptions, pfor_with};

/// How each elem enters the body.
enum Access {
    Row,
    Broadcast,
}

fn plan(g: &mut Graph, elems: &[ValueId]) -> Result<(LoopLen, Vec<Access>)> {
    if elems.is_empty() {
        return Err(Error::InvalidArgument("map: needs at least one elem".into()));
    }
    let mut n: Option<Dim> = None;
    let mut first_dynamic: Option<ValueId> = None;
    let mut access = Vec::with_capacity(elems.len());
    for &e in elems {
        let t = g.value_type(e)?.clone();
        if t.rank() == 0 {
            return Err(Error::InvalidArgument(format!("map: elem {e} is a scalar; elems need a leading axis")));
        }
        let d = t.shape.dim(0).clone();
        if d == Dim::Fixed(1) && elems.len() > 1 {
            access.push(Access::Broadcast);
            continue;
        }
        access.push(Access::Row);
        if let Dim::Dynamic(_) = d {
            first_dynamic.get_or_insert(e);
        }
        n = match n {
            None => Some(d),
            Some(prev) => Some(prev.unify(&d).ok_or_else(|| {
                Error::InvalidArgument(format!("map: elems have different leading dims ({prev} and {d})"))
            })?),
        };
    }
    let len = match n {
        Some(Dim::Fixed(k)) => LoopLen::Static(k),
        None => LoopLen::Static(1), // every elem broadcasts
        Some(Dim::Dynamic(_)) => {
            let e = first_dynamic.ok_or_else(|| Error::InvalidArgument("map: no dynamic elem".into()))?;
            let s = g.shape_of(e)?;
            let s0 = g.slice(s, &[0], &[1])?;
            LoopLen::Dynamic(g.reshape(s0, &[])?)
        }
    };
    Ok((len, access))
}

fn rows(g: &mut Graph, elems: &[ValueId], access: &[Access], i: ValueId) -> Result<Vec<ValueId>> {
    let zero = g.constant(Tensor::scalar(0i64));
    elems
        .iter()
        .zip(access)
        .map(|(&e, a)| match a {
            Access::Row => g.gather(e, i, 0),
            Access::Broadcast => g.gather(e, zero, 0),
        })
        .collect()
}

/// Vectorized map over axis 0 of `elems` (TF `vectorized_map`, JAX `vmap` over axis 0).
pub fn vectorized_map(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
) -> Result<Vec<ValueId>> {
    vectorized_map_with(g, &PforOptions::default(), f, elems)
}

/// [`vectorized_map`] with options.
pub fn vectorized_map_with(
    g: &mut Graph,
    options: &PforOptions,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
) -> Result<Vec<ValueId>> {
    let (len, access) = plan(g, elems)?;
    let elems = elems.to_vec();
    pfor_with(g, len, options, move |g, i| {
        let xs = rows(g, &elems, &access, i)?;
        f(g, &xs)
    })
}

/// Sequential map over axis 0 of `elems` (TF `map_fn`): one body run per row. The
/// baseline `vectorized_map` is compared against.
pub fn map_fn(
    g: &mut Graph,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    elems: &[ValueId],
) -> Result<Vec<ValueId>> {
    let (len, access) = plan(g, elems)?;
    let elems = elems.to_vec();
    for_loop(g, len, move |g, i| {
        let xs = rows(g, &elems, &access, i)?;
        f(g, &xs)
    })
}
