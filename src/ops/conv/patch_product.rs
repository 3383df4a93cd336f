//! The product `patchesᵀ · dy` of batched per-example conv filter gradients, without the
//! patches (see `exec::fuse::patch_product`): the vectorized `conv2d_backprop_filter` with
//! both operands stacked is `batch_matmul(adj_a)` of `extract_patches(x)` reshaped to
//! `[B, E*OH*OW, KH*KW*C]` and `dy [B, E*OH*OW, O]`, and the patches (`KH*KW` times the
//! input) cost a full write and read of memory. Here the kernel
//! (`kernels::conv::patch_product`) reads every tap's window straight from a zero-padded
//! copy of each example.
//!
//! Invariants: [`ConvOp::eval_patch_product`] runs only where the unfused product would run
//! the depth-major kernel ([`crate::kernels::gemm::atb_batched`] with the same shapes), and
//! then computes the same fused multiply-adds in the same order on the same values (a
//! padded tap reads the zero that the patch holds), so the result is bit-identical; it
//! returns `None` having run nothing otherwise.

use super::{ConvOp, Geom};
use crate::error::Result;
use crate::kernels::conv::patch_product::product;
use crate::kernels::gemm::{GemmElem, atb_batched};
use crate::ops::EvalCtx;
use crate::ops::Op;
use crate::tensor::{DType, Shape, Tensor, TensorType};

impl ConvOp {
    /// `batch_matmul(reshapes(extract_patches(x)), dy, adj_a)` for `self = extract_patches`
    /// and `dy [B, R, O]`: `Some([B, KH*KW*C, O])` where the reshapes (applied to the patches'
    /// shape) give exactly `[B, R, KH*KW*C]`, `R > 1` is a whole number `E` of examples'
    /// `OH*OW` rows, `x` holds `B*E` examples and the kernel takes the shapes; `None`
    /// otherwise (nothing run). (`R = 1` would be an outer product, which the unfused
    /// product computes with plain multiplies.)
    pub(crate) fn eval_patch_product<'a>(
        &self,
        x: &Tensor,
        dy: &Tensor,
        reshapes: impl IntoIterator<Item = &'a Op>,
        ctx: Option<&mut (dyn EvalCtx + '_)>,
    ) -> Result<Option<Tensor>> {
        let ConvOp::ExtractPatches { ksize, params } = *self else { return Ok(None) };
        if x.dtype() != DType::F32 || dy.dtype() != DType::F32 || x.rank() != 4 || dy.rank() != 3 {
            return Ok(None);
        }
        let (xs, ds) = (x.shape(), dy.shape());
        let Ok(g) = Geom::new(
            self.kind().name(),
            [xs[0], xs[1], xs[2], xs[3]],
            ksize,
            ds[2],
            params.strides,
            params.dilations,
            params.padding,
        ) else {
            return Ok(None);
        };
        let (b, rows, o) = (ds[0], ds[1], ds[2]);
        let (ohw, kc) = (g.oh * g.ow, g.kh * g.kw * g.c);
        if b == 0 || ohw == 0 || rows < 2 || rows % ohw != 0 || b * (rows / ohw) != g.n {
            return Ok(None);
        }
        // the product's left operand is the patches through the reshapes: it must be
        // [B, R, KC] (no broadcasting, the rows of whole examples)
        let mut lhs = TensorType { dtype: DType::F32, shape: Shape::fixed(&[g.n, g.oh, g.ow, kc]) };
        for op in reshapes {
            match op.infer(std::slice::from_ref(&lhs)) {
                Ok(mut t) if t.len() == 1 => lhs = t.remove(0),
                _ => return Ok(None),
            }
        }
        if lhs.shape.as_fixed().as_deref() != Some(&[b, rows, kc][..]) {
            return Ok(None);
        }
        let kernels = crate::ops::ctx::kernel_options(ctx.as_deref());
        if !(f32::has_atb() && atb_batched(kernels, b, kc, rows, o)) {
            return Ok(None);
        }
        let (xa, da) = (x.array::<f32>()?, dy.array::<f32>()?);
        let (Some(xd), Some(dd)) = (xa.as_slice(), da.as_slice()) else { return Ok(None) };
        let len = b * kc * o;
        // every element is overwritten
        let mut out = ctx.and_then(|c| c.recycled::<f32>(len)).unwrap_or_else(|| vec![0.0; len]);
        if !product(&g, rows / ohw, xd, dd, &mut out) {
            return Ok(None);
        }
        Ok(Some(Tensor::from_vec(&[b, kc, o], out)?))
    }
}
