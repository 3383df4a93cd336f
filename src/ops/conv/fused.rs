//! Conv kernels with more of the executor's fused chain inside them (see `exec::fuse::conv`):
//! `conv2d → bias → relu → max_pool` in one pass that never writes the conv output (2x2
//! stride-2 pools for every float conv, other VALID windows after the direct kernel of few
//! input channels).
//!
//! Invariants: [`ConvOp::eval_fused_pool`] either returns the pooled result of exactly what
//! the unfused ops compute (the conv kernel's own GEMMs and epilogue, `max_pool`'s selection
//! rule) or `None` having run nothing, so the caller's op-by-op path reports every error.

use super::{ConvEpilogue, ConvOp, Float, Geom, OutBuf, im2col};
use crate::error::{Error, Result};
use crate::ops::EvalCtx;
use crate::ops::conv::Padding;
use crate::tensor::layout::standard_cow;
use crate::tensor::{Tensor, TensorType};

impl ConvOp {
    /// `conv2d` with `epi`, then a VALID `max_pool` of window `ksize` and `strides`:
    /// `Some([N, PH, PW, O])` where a pooled kernel takes the shapes (2x2 stride 2: f32
    /// few-channel inputs by the direct kernel, other float convs with even `OH`, `OW` by
    /// im2col chunks of whole row pairs; other windows: f32 few-channel inputs by the direct
    /// kernel), `None` otherwise. Inside a run (`ctx`) the output goes into a recycled
    /// buffer when one fits.
    pub(crate) fn eval_fused_pool(
        &self,
        inputs: &[Tensor],
        epi: ConvEpilogue<'_>,
        (ksize, strides): ([usize; 2], [usize; 2]),
        ctx: Option<&mut (dyn EvalCtx + '_)>,
    ) -> Result<Option<Tensor>> {
        let ConvOp::Conv2D { params } = *self else { return Ok(None) };
        let [x, w] = inputs else { return Ok(None) };
        let dt = x.dtype();
        let ok = |t: &Tensor| t.dtype() == dt && t.rank() == 4;
        if !ok(x)
            || !ok(w)
            || epi.residual.is_some()
            || epi.bias.is_some_and(|b| b.dtype() != dt || b.shape() != [w.shape()[3]])
        {
            return Ok(None);
        }
        let types: Vec<TensorType> = inputs.iter().map(Tensor::tensor_type).collect();
        if self.infer(&types).is_err() {
            return Ok(None);
        }
        let (xs, ws) = (x.shape(), w.shape());
        let Ok(g) = Geom::new(
            self.kind().name(),
            [xs[0], xs[1], xs[2], xs[3]],
            [ws[0], ws[1]],
            ws[3],
            params.strides,
            params.dilations,
            params.padding,
        ) else {
            return Ok(None);
        };
        // windows other than 2x2 stride 2: only the direct kernel of few channels (f32) pools
        // them in-kernel; ask before any buffer is made
        let pair = ksize == [2, 2] && strides == [2, 2];
        let direct = dt == crate::tensor::DType::F32 && crate::kernels::conv::narrow::applies(&g);
        if !(pair || direct) {
            return Ok(None);
        }
        // the pool's geometry over the conv output
        let Ok(pg) = Geom::new("max_pool", [g.n, g.oh, g.ow, g.o], ksize, g.o, strides, [1, 1], Padding::Valid) else {
            return Ok(None);
        };
        crate::dispatch_float!(dt, T => pooled::<T>(&g, &pg, x, w, epi, ctx), _ => Ok(None))
    }
}

fn pooled<T: Float>(
    g: &Geom,
    pg: &Geom,
    x: &Tensor,
    w: &Tensor,
    epi: ConvEpilogue<'_>,
    ctx: Option<&mut (dyn EvalCtx + '_)>,
) -> Result<Option<Tensor>> {
    // standard layouts as the op's own path makes them (a transposed view, e.g. an NCHW
    // model input made NHWC, copied by the fast transposition, not element by element)
    let (xa, wa) = (standard_cow(x.array::<T>()?.view()), standard_cow(w.array::<T>()?.view()));
    let bias = epi.bias.map(|b| b.array::<T>()).transpose()?;
    let bias = bias.as_ref().map(|b| b.as_standard_layout());
    let (Some(xd), Some(wd)) = (xa.as_slice(), wa.as_slice()) else { return Ok(None) };
    let bd = match &bias {
        Some(b) => Some(b.as_slice().ok_or_else(|| Error::shape("conv2d", "internal: non-contiguous bias"))?),
        None => None,
    };
    let kernels = crate::ops::ctx::kernel_options(ctx.as_deref());
    let pair = [pg.kh, pg.kw, pg.sh, pg.sw] == [2, 2, 2, 2];
    // (other windows reach here only where the direct kernel applies, see eval_fused_pool)
    let shape = if pair { [g.n, g.oh / 2, g.ow / 2, g.o] } else { [g.n, pg.oh, pg.ow, g.o] };
    let len: usize = shape.iter().product();
    let mut out = OutBuf(ctx.and_then(|c| c.recycled::<T>(len))).overwritten(len);
    let kepi = im2col::Epilogue { filter: epi.filter, ..im2col::Epilogue::new(bd, epi.relu) };
    let done = if pair {
        T::conv_pool(g, xd, wd, kepi, &mut out, kernels)?
    } else {
        T::conv_pool_window(g, pg, xd, wd, kepi, &mut out)
    };
    if !done {
        return Ok(None);
    }
    Ok(Some(Tensor::from_vec(&shape, out)?))
}
