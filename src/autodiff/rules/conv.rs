//! Derivative rules of the `conv` family (`src/ops/conv.rs`).
//!
//! - `conv2d(x, w)` and `depthwise_conv2d(x, w)` are bilinear: VJPs are the backprop ops
//!   (`dx = backprop_input(w, dy)`, `dw = backprop_filter(x, dy)`), JVPs are
//!   `conv(tx, w) + conv(x, tw)`.
//! - The backprop ops are bilinear too, and they are adjoints of the forward op, so their
//!   own VJPs are again forward / backprop ops (`<c, BI(w, dy)> = <conv(c, w), dy>` and
//!   `<C, BF(x, dy)> = <conv(x, C), dy>`): second derivatives of convolutions work.
//! - `avg_pool` is linear with adjoint `avg_pool_grad` (and vice versa).
//! - `max_pool`: VJP `max_pool_grad(x, dy)`; JVP selects the tangent at the FIRST maximal
//!   tap of each window (row-major, padding excluded — the tie rule of `max_pool_grad`, so
//!   forward and reverse mode agree exactly), built from patches
//!   ([`crate::ops::conv::patches::max_pool_select`]). A window whose max is NaN gets a
//!   zero tangent.
//! - `max_pool_grad(x, dy)` is linear in `dy` (VJP: the same selection of the cotangent;
//!   JVP: `max_pool_grad(x, tdy)`) and piecewise constant in `x` (no derivative).
//! - `extract_patches` and `extract_patches_grad` are linear and adjoint to each other: the
//!   VJP of either is the other applied to the cotangent, the JVP the op itself applied to
//!   the tangent (so derivatives of any order stay in these two kernels).
//!
//! Rules that build a backprop op need the spatial size of the value they reconstruct
//! (`input_hw` / `filter_hw`) to be fixed; otherwise they return an `Unsupported` error.

use crate::autodiff::util::add_opt;
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::conv::patches::{WindowGeom, max_pool_select};
use crate::ops::{Conv2dParams, ConvKind, ConvOp, Padding};

/// Fixed `[H, W]` (dims 1 and 2 for NHWC values, dims 0 and 1 for filters).
fn hw(g: &Graph, v: ValueId, filter: bool, op: &str) -> Result<[usize; 2]> {
    let s = g.shape(v)?;
    let off = if filter { 0 } else { 1 };
    match (s.dims().get(off).and_then(|d| d.value()), s.dims().get(off + 1).and_then(|d| d.value())) {
        (Some(a), Some(b)) => Ok([a, b]),
        _ => Err(Error::unsupported(op, format!("derivative needs fixed spatial dims, got shape {s}"))),
    }
}

/// The forward conv (plain or depthwise).
fn fwd(g: &mut Graph, depthwise: bool, x: ValueId, w: ValueId, p: Conv2dParams) -> Result<ValueId> {
    if depthwise { g.depthwise_conv2d(x, w, p) } else { g.conv2d(x, w, p) }
}

/// `backprop_input(w, dy)` (plain or depthwise).
fn bi(g: &mut Graph, depthwise: bool, w: ValueId, dy: ValueId, p: Conv2dParams, ihw: [usize; 2]) -> Result<ValueId> {
    if depthwise { g.depthwise_conv2d_backprop_input(w, dy, p, ihw) } else { g.conv2d_backprop_input(w, dy, p, ihw) }
}

/// `backprop_filter(x, dy)` (plain or depthwise).
fn bf(g: &mut Graph, depthwise: bool, x: ValueId, dy: ValueId, p: Conv2dParams, fhw: [usize; 2]) -> Result<ValueId> {
    if depthwise { g.depthwise_conv2d_backprop_filter(x, dy, p, fhw) } else { g.conv2d_backprop_filter(x, dy, p, fhw) }
}

/// `f(a, b)` built only for the present operands; the sum of the two bilinear terms.
fn bilinear(
    g: &mut Graph,
    ta: Option<ValueId>,
    tb: Option<ValueId>,
    fa: impl FnOnce(&mut Graph, ValueId) -> Result<ValueId>,
    fb: impl FnOnce(&mut Graph, ValueId) -> Result<ValueId>,
) -> Result<Option<ValueId>> {
    let a = ta.map(|t| fa(g, t)).transpose()?;
    let b = tb.map(|t| fb(g, t)).transpose()?;
    add_opt(g, a, b)
}

/// The window geometry of a pool over `x`.
fn pool_geom(g: &Graph, op: &str, x: ValueId, k: [usize; 2], s: [usize; 2], p: Padding) -> Result<WindowGeom> {
    WindowGeom::of(g, op, x, k, s, [1, 1], p)
}

/// Cotangents of the inputs.
pub fn vjp(op: &ConvOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let name = op.kind().name();
    let (n0, n1) = (cx.need(0), cx.need(1));
    let dy = cx.dy(0)?;
    let (x0, x1) = (cx.x(0), cx.inputs.get(1).copied());
    let g = &mut *cx.g;
    let depthwise = matches!(
        op.kind(),
        ConvKind::DepthwiseConv2D | ConvKind::DepthwiseConv2DBackpropInput | ConvKind::DepthwiseConv2DBackpropFilter
    );
    let second = || x1.ok_or_else(|| Error::arity(name, "2", 1));
    match *op {
        ConvOp::Conv2D { params } | ConvOp::DepthwiseConv2D { params } => {
            let w = second()?;
            let dx = if n0 { Some(bi(g, depthwise, w, dy, params, hw(g, x0, false, name)?)?) } else { None };
            let dw = if n1 { Some(bf(g, depthwise, x0, dy, params, hw(g, w, true, name)?)?) } else { None };
            Ok(vec![dx, dw])
        }
        ConvOp::Conv2DBackpropInput { params, .. } | ConvOp::DepthwiseConv2DBackpropInput { params, .. } => {
            // y = BI(w, d); cotangent c has the forward input's shape
            let (w, d) = (x0, second()?);
            let dw = if n0 { Some(bf(g, depthwise, dy, d, params, hw(g, w, true, name)?)?) } else { None };
            let dd = if n1 { Some(fwd(g, depthwise, dy, w, params)?) } else { None };
            Ok(vec![dw, dd])
        }
        ConvOp::Conv2DBackpropFilter { params, .. } | ConvOp::DepthwiseConv2DBackpropFilter { params, .. } => {
            // y = BF(x, d); cotangent C has the filter's shape
            let (x, d) = (x0, second()?);
            let dx = if n0 { Some(bi(g, depthwise, dy, d, params, hw(g, x, false, name)?)?) } else { None };
            let dd = if n1 { Some(fwd(g, depthwise, x, dy, params)?) } else { None };
            Ok(vec![dx, dd])
        }
        ConvOp::MaxPool { ksize, strides, padding } => {
            if !n0 {
                return Ok(vec![None]);
            }
            Ok(vec![Some(g.max_pool_grad(x0, dy, ksize, strides, padding)?)])
        }
        ConvOp::AvgPool { ksize, strides, padding } => {
            if !n0 {
                return Ok(vec![None]);
            }
            let ihw = hw(g, x0, false, name)?;
            Ok(vec![Some(g.avg_pool_grad(dy, ksize, strides, padding, ihw)?)])
        }
        ConvOp::MaxPoolGrad { ksize, strides, padding } => {
            // linear in the gradient argument; piecewise constant in the forward input
            if !n1 {
                return Ok(vec![None, None]);
            }
            let geom = pool_geom(g, name, x0, ksize, strides, padding)?;
            let y = g.max_pool(x0, ksize, strides, padding)?;
            Ok(vec![None, Some(max_pool_select(g, x0, y, dy, &geom)?)])
        }
        ConvOp::AvgPoolGrad { ksize, strides, padding, .. } => {
            if !n0 {
                return Ok(vec![None]);
            }
            Ok(vec![Some(g.avg_pool(dy, ksize, strides, padding)?)])
        }
        ConvOp::ExtractPatches { ksize, params } => {
            if !n0 {
                return Ok(vec![None]);
            }
            let ihw = hw(g, x0, false, name)?;
            Ok(vec![Some(g.extract_patches_grad(dy, ksize, params, ihw)?)])
        }
        ConvOp::ExtractPatchesGrad { ksize, params, .. } => {
            if !n0 {
                return Ok(vec![None]);
            }
            Ok(vec![Some(g.extract_patches(dy, ksize, params)?)])
        }
    }
}

/// Tangents of the outputs.
pub fn jvp(op: &ConvOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let (t0, t1) = (cx.t(0), cx.t(1));
    let (x0, x1, y) = (cx.x(0), cx.inputs.get(1).copied(), cx.y(0));
    let g = &mut *cx.g;
    let name = op.kind().name();
    let second = || x1.ok_or_else(|| Error::arity(name, "2", 1));
    let depthwise = matches!(
        op.kind(),
        ConvKind::DepthwiseConv2D | ConvKind::DepthwiseConv2DBackpropInput | ConvKind::DepthwiseConv2DBackpropFilter
    );
    let out = match *op {
        ConvOp::Conv2D { params } | ConvOp::DepthwiseConv2D { params } => {
            let w = second()?;
            bilinear(g, t0, t1, |g, t| fwd(g, depthwise, t, w, params), |g, t| fwd(g, depthwise, x0, t, params))?
        }
        ConvOp::Conv2DBackpropInput { params, input_hw }
        | ConvOp::DepthwiseConv2DBackpropInput { params, input_hw } => {
            let d = second()?;
            bilinear(
                g,
                t0,
                t1,
                |g, t| bi(g, depthwise, t, d, params, input_hw),
                |g, t| bi(g, depthwise, x0, t, params, input_hw),
            )?
        }
        ConvOp::Conv2DBackpropFilter { params, filter_hw }
        | ConvOp::DepthwiseConv2DBackpropFilter { params, filter_hw } => {
            let d = second()?;
            bilinear(
                g,
                t0,
                t1,
                |g, t| bf(g, depthwise, t, d, params, filter_hw),
                |g, t| bf(g, depthwise, x0, t, params, filter_hw),
            )?
        }
        ConvOp::MaxPool { ksize, strides, padding } => match t0 {
            Some(t) => {
                let geom = pool_geom(g, name, x0, ksize, strides, padding)?;
                Some(max_pool_select(g, x0, y, t, &geom)?)
            }
            None => None,
        },
        ConvOp::AvgPool { ksize, strides, padding } => {
            t0.map(|t| g.avg_pool(t, ksize, strides, padding)).transpose()?
        }
        ConvOp::MaxPoolGrad { ksize, strides, padding } => {
            t1.map(|t| g.max_pool_grad(x0, t, ksize, strides, padding)).transpose()?
        }
        ConvOp::AvgPoolGrad { ksize, strides, padding, input_hw } => {
            t0.map(|t| g.avg_pool_grad(t, ksize, strides, padding, input_hw)).transpose()?
        }
        ConvOp::ExtractPatches { ksize, params } => t0.map(|t| g.extract_patches(t, ksize, params)).transpose()?,
        ConvOp::ExtractPatchesGrad { ksize, params, input_hw } => {
            t0.map(|t| g.extract_patches_grad(t, ksize, params, input_hw)).transpose()?
        }
    };
    Ok(vec![out])
}

/// Whether derivatives flow through this kind (all conv kinds are differentiable; the
/// forward input of `max_pool_grad` gets a zero derivative).
pub fn differentiable(_k: ConvKind) -> bool {
    true
}
