//! Window geometry of the conv family: output sizes and padding per spatial axis
//! (TensorFlow's VALID / SAME rules, see the family docs in `ops::conv`), the shape checks
//! shared by `ConvOp::infer`, and [`Geom`], the concrete geometry the kernels loop over.
//!
//! Invariants: [`window`] is the one place output sizes and leading padding are computed
//! (inference and kernels agree by construction); a `Geom` is only built through
//! [`Geom::new`], which performs those checks.

use super::Padding;
use crate::error::{Error, Result};
use crate::kernels::conv::Geom;
use crate::tensor::{Dim, TensorType};

/// The names of the spatial axes `0` and `1` in error messages.
const AXES: [&str; 2] = ["height", "width"];

/// Output size and leading padding of spatial axis `ax` (0: height, 1: width; input `i`,
/// window `k`, stride `s`, dilation `d`); `ctx` names the shapes for the error message.
#[allow(clippy::too_many_arguments)]
pub(super) fn window(
    op: &str,
    ctx: &dyn Fn() -> String,
    ax: usize,
    i: usize,
    k: usize,
    s: usize,
    d: usize,
    p: Padding,
) -> Result<(usize, usize)> {
    let axis = AXES[ax.min(1)];
    let too_big = || Error::shape(op, format!("{}: window sizes overflow along {axis}", ctx()));
    if k == 0 {
        return Err(Error::shape(op, format!("{}: window/filter {axis} must be ≥ 1, got 0", ctx())));
    }
    let ke = (k - 1).checked_mul(d).and_then(|v| v.checked_add(1)).ok_or_else(too_big)?;
    match p {
        Padding::Valid => {
            if ke > i {
                let dil = if d > 1 { format!(" (dilated to {ke})") } else { String::new() };
                return Err(Error::shape(
                    op,
                    format!("{}: window {k}{dil} larger than the input {axis} {i} with VALID padding", ctx()),
                ));
            }
            Ok(((i - ke) / s + 1, 0))
        }
        Padding::Same => {
            let out = i.div_ceil(s);
            let span = out.saturating_sub(1).checked_mul(s).and_then(|v| v.checked_add(ke)).ok_or_else(too_big)?;
            Ok((out, span.saturating_sub(i) / 2))
        }
        Padding::Explicit(pads) => {
            let (before, after) = pads[ax.min(1)];
            let padded = i.checked_add(before).and_then(|v| v.checked_add(after)).ok_or_else(too_big)?;
            if ke > padded {
                return Err(Error::shape(
                    op,
                    format!("{}: window {k} larger than the input {axis} {i} padded by {before} + {after}", ctx()),
                ));
            }
            Ok(((padded - ke) / s + 1, before))
        }
    }
}

/// Static version of [`window`]: the output dim (dynamic when it cannot be known yet).
#[allow(clippy::too_many_arguments)]
pub(super) fn out_dim(
    op: &str,
    ctx: &dyn Fn() -> String,
    ax: usize,
    i: &Dim,
    k: &Dim,
    s: usize,
    d: usize,
    p: Padding,
) -> Result<Dim> {
    match (i.value(), k.value()) {
        (Some(i), Some(k)) => Ok(Dim::Fixed(window(op, ctx, ax, i, k, s, d, p)?.0)),
        (_, Some(0)) => {
            Err(Error::shape(op, format!("{}: window/filter {} must be ≥ 1, got 0", ctx(), AXES[ax.min(1)])))
        }
        (Some(i), None) if p == Padding::Same => Ok(Dim::Fixed(i.div_ceil(s))),
        _ => Ok(Dim::unknown()),
    }
}

/// Unify two dims that must be equal, or an error built by `msg`.
pub(super) fn unify(op: &str, a: &Dim, b: &Dim, msg: impl FnOnce() -> String) -> Result<Dim> {
    a.unify(b).ok_or_else(|| Error::shape(op, msg()))
}

pub(super) fn rank4<'a>(op: &str, what: &str, layout: &str, t: &'a TensorType) -> Result<&'a [Dim]> {
    if t.shape.rank() != 4 {
        return Err(Error::shape(op, format!("{what} must have rank 4 ({layout}), got shape {}", t.shape)));
    }
    Ok(t.shape.dims())
}

/// `KH*KW` of a window (each ≥ 1, the product not overflowing).
pub(super) fn num_taps(op: &str, ctx: &dyn Fn() -> String, ksize: [usize; 2]) -> Result<usize> {
    positive(op, "ksize", ksize)?;
    ksize[0]
        .checked_mul(ksize[1])
        .ok_or_else(|| Error::shape(op, format!("{}: window {ksize:?} has too many taps", ctx())))
}

pub(super) fn positive(op: &str, what: &str, v: [usize; 2]) -> Result<()> {
    if v.contains(&0) {
        return Err(Error::InvalidArgument(format!("{op}: {what} must be ≥ 1, got {v:?}")));
    }
    Ok(())
}

impl Geom {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        op: &str,
        nhwc: [usize; 4],
        k: [usize; 2],
        o: usize,
        s: [usize; 2],
        d: [usize; 2],
        p: Padding,
    ) -> Result<Geom> {
        let ctx = || format!("input {nhwc:?}, window {k:?}");
        let (oh, pt) = window(op, &ctx, 0, nhwc[1], k[0], s[0], d[0], p)?;
        let (ow, pl) = window(op, &ctx, 1, nhwc[2], k[1], s[1], d[1], p)?;
        let [n, h, w, c] = nhwc;
        Ok(Geom { n, h, w, c, kh: k[0], kw: k[1], o, oh, ow, sh: s[0], sw: s[1], dh: d[0], dw: d[1], pt, pl })
    }
}
