//! The fused patch product's kernel: `patchesᵀ · dy` of batched per-example conv filter
//! gradients without writing the patches (the op side is `ConvOp::eval_patch_product`).
//! Each example is copied once into a zero-padded buffer and the register-blocked kernel of
//! [`crate::kernels::micro`] reads every tap's window straight from it: the depth walk
//! `(e, oy, ox)` with per-level strides.
//!
//! Invariants: [`product`] computes the fused multiply-adds of the depth-major kernel
//! ([`crate::kernels::gemm::atb_batched`]) in the same order on the same values (a padded
//! tap reads the zero that the patch holds), so the result is bit-identical to the unfused
//! product; it writes nothing and returns false without AVX-512F.

use rayon::prelude::*;

use super::Geom;

/// `out [B, KH*KW*C, O]`, item `i` the sum over its `e` examples' output pixels of the tap
/// values times `dy`; false (nothing written) without AVX-512F.
pub(crate) fn product(g: &Geom, e: usize, x: &[f32], dy: &[f32], out: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if crate::kernels::cpu::caps().avx512f {
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
                                        crate::kernels::micro::FULL,
                                        false,
                                        crate::kernels::micro::Finish::NONE,
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
