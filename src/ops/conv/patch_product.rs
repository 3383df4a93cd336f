//! The product `patchesᵀ · dy` of batched per-example conv filter gradients, without the
//! patches (see `exec::fuse::patch_product`): the vectorized `conv2d_backprop_filter` with
//! both operands stacked is `batch_matmul(adj_a)` of `extract_patches(x)` reshaped to
//! `[B, E*OH*OW, KH*KW*C]` and `dy [B, E*OH*OW, O]`, and the patches (`KH*KW` times the
//! input) cost a full write and read of memory. Here each example is copied once into a
//! zero-padded buffer and the register-blocked kernel of [`crate::kernels::micro`] reads
//! every tap's window straight from it: the depth walk `(e, oy, ox)` with per-level strides.
//!
//! Invariants: [`ConvOp::eval_patch_product`] runs only where the unfused product would run
//! the depth-major kernel ([`crate::kernels::gemm::atb_batched`] with the same shapes), and
//! then computes the same fused multiply-adds in the same order on the same values (a
//! padded tap reads the zero that the patch holds), so the result is bit-identical; it
//! returns `None` having run nothing otherwise.

use rayon::prelude::*;

use super::{ConvOp, Geom};
use crate::error::Result;
use crate::exec::ExecCtx;
use crate::kernels::gemm::{GemmElem, atb_batched};
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
        ctx: Option<&mut ExecCtx<'_>>,
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
        if !(f32::has_atb() && atb_batched(b, kc, rows, o)) {
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

/// `out [B, KH*KW*C, O]`, item `i` the sum over its `e` examples' output pixels of the tap
/// values times `dy`; false (nothing written) without AVX-512F.
fn product(g: &Geom, e: usize, x: &[f32], dy: &[f32], out: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        let (c, o) = (g.c, g.o);
        // the padded input: every tap of every window inside
        let hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
        let wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
        let (img, pimg) = (g.h * g.w * c, hp * wp * c);
        let (rows, cols) = (g.h.min(hp.saturating_sub(g.pt)), g.w.min(wp.saturating_sub(g.pl)));
        let depth = crate::kernels::micro::Depth {
            n: [e, g.oh, g.ow],
            sa: [pimg, g.sh * wp * c, g.sw * c],
            sb: [g.oh * g.ow * o, g.ow * o, o],
        };
        let r_blk = 6;
        let item_in = e * g.oh * g.ow * o;
        out.par_chunks_mut(g.kh * g.kw * c * o).enumerate().for_each_init(
            || vec![0.0f32; e * pimg],
            |pad, (i, dst)| {
                pad.fill(0.0);
                for (ex, p) in pad.chunks_exact_mut(pimg).enumerate() {
                    let src = &x[(i * e + ex) * img..][..img];
                    for (iy, row) in src.chunks_exact(g.w * c).take(rows).enumerate() {
                        p[((iy + g.pt) * wp + g.pl) * c..][..cols * c].copy_from_slice(&row[..cols * c]);
                    }
                }
                let d = &dy[i * item_in..][..item_in];
                for ky in 0..g.kh {
                    // row `m = (ky*KW + kx)*C + c` of the item's output reads the padded input at
                    // `ky*DH*WP*C + kx*DW*C + c`: one run of stride 1 over a whole filter row
                    // when DW = 1 (a block may span taps), else one run per tap
                    let runs = if g.dw == 1 { 1 } else { g.kw };
                    let run_len = g.kw * c / runs;
                    for run in 0..runs {
                        let (m_at, a_at) = ((ky * g.kw + run) * c, (ky * g.dh * wp + run * g.dw) * c);
                        for m0 in (0..run_len).step_by(r_blk) {
                            for o0 in (0..o).step_by(64) {
                                let (r, nv) = ((run_len - m0).min(r_blk), ((o - o0) / 16).min(4));
                                // SAFETY: AVX-512F is present; the walk stays inside the
                                // padded examples (the last window ends at `hp`, `wp`), `d`
                                // (E*OH*OW rows of O) and `dst` (rows `m_at + m0 ..`, columns
                                // `o0 .. o0 + 16nv` with `o` a multiple of 16: `atb_applies`).
                                unsafe {
                                    crate::kernels::micro::micro_dyn(
                                        r,
                                        nv,
                                        pad.as_ptr().add(a_at + m0),
                                        1,
                                        d.as_ptr().add(o0),
                                        &depth,
                                        dst.as_mut_ptr().add((m_at + m0) * o + o0),
                                        o,
                                    )
                                };
                            }
                        }
                    }
                }
            },
        );
        return true;
    }
    let _ = (g, e, x, dy, out);
    false
}
