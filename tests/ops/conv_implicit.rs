//! The implicit-GEMM conv kernel (`kernels::conv::implicit`: f32 convs over more than 4
//! input channels on AVX-512 CPUs, but for 1x1 stride-1 ones that the in-place GEMM takes;
//! elsewhere these convs take im2col + GEMM and the same assertions hold). Over strides 1-3,
//! dilations (both axes, rows only), SAME / VALID / asymmetric explicit pads, each form of
//! depth block (several kernel rows, pieces of a long kernel row, tap by tap when columns
//! are dilated) with remainders,
//! output widths with a masked last vector and a partial last 64-channel panel, images
//! large enough for several row segments, and n = 0, 1, 3:
//! - the f32 conv → bias → relu (→ add → relu) against the f64 graph (im2col, checked
//!   against the naive reference in `conv_chunks`) and against f32 with the kernel off;
//! - the batch bit-identical to each example's own conv (the kernel does not depend on N);
//! - a constant filter (prepared in panels) bit-identical to the fed one, and the fused
//!   epilogue (bias, residual, relu) bit-identical to the separate ops,
//!
//! on the default rayon pool and a 4-thread one.

use super::conv::{Cfg, in_pool, p, randv};
use crate::common::*;
use pfor::prelude::*;

use Padding::{Explicit, Same, Valid};

/// How a run builds and executes the chain.
#[derive(Clone, Copy)]
struct Mode {
    /// The filter a constant (else fed).
    constant: bool,
    fuse: bool,
    implicit: bool,
    /// `conv → bias → add(residual) → relu` (ResNet's block end) instead of `conv → bias → relu`.
    residual: bool,
}

const DEFAULT: Mode = Mode { constant: false, fuse: true, implicit: true, residual: false };

/// `relu(conv(x, w) + b)`, or `relu(conv(x, w) + b + r)` with `r` fed when `residual`, in
/// `dt`.
fn run(cfg: &Cfg, dt: DType, mode: Mode, x: &Tensor, w: &Tensor, b: &Tensor, r: Option<&Tensor>) -> Tensor {
    let mut g = Graph::new();
    let xi = g.input("x", dt, [cfg.n, cfg.h, cfg.w, cfg.c]);
    let wi = if mode.constant { g.constant(w.cast(dt)) } else { g.input("w", dt, [cfg.kh, cfg.kw, cfg.c, cfg.o]) };
    let bi = g.constant(b.cast(dt));
    let y = g.conv2d(xi, wi, cfg.pr).unwrap();
    let mut y = g.bias_add(y, bi).unwrap();
    let mut feeds = vec![(xi, x.cast(dt))];
    if !mode.constant {
        feeds.push((wi, w.cast(dt)));
    }
    if mode.residual {
        let r = r.expect("a residual");
        let ri = g.input("r", dt, r.shape().to_vec());
        y = g.add(y, ri).unwrap();
        feeds.push((ri, r.cast(dt)));
    }
    let y = g.relu(y).unwrap();
    let opts = ExecOptions { fuse: mode.fuse, implicit_gemm: mode.implicit, ..ExecOptions::builtin() };
    Session::with_options(&g, &[y], opts).unwrap().run(&feeds).unwrap().remove(0)
}

fn configs() -> Vec<(&'static str, Cfg)> {
    let c = |n, h, w, c, kh, kw, o, pr| Cfg { n, h, w, c, kh, kw, o, pr };
    let (one, two) = ([1, 1], [2, 2]);
    vec![
        (
            "3x3 stride 2, pads 1 (ResNet stage transition)",
            c(1, 14, 14, 32, 3, 3, 64, p(two, Explicit([(1, 1), (1, 1)]), one)),
        ),
        ("3x3 stride 2 SAME, odd input, masked output vector", c(3, 15, 13, 24, 3, 3, 40, p(two, Same, one))),
        ("3x3 stride 1 SAME, 130 channels (a depth block remainder)", c(1, 7, 7, 130, 3, 3, 64, p(one, Same, one))),
        ("3x3 stride 1 VALID, 200 outputs (partial last panel)", c(2, 9, 8, 16, 3, 3, 200, p(one, Valid, one))),
        (
            "1x1 stride 1, 1040 channels (deeper than the in-place GEMM takes: rows as one run)",
            c(2, 5, 6, 1040, 1, 1, 72, p(one, Valid, one)),
        ),
        ("1x1 stride 2 SAME", c(1, 11, 11, 64, 1, 1, 96, p(two, Same, one))),
        (
            "7x5 stride (3, 2) dilated, asymmetric pads",
            c(2, 23, 19, 9, 7, 5, 32, p([3, 2], Explicit([(2, 4), (0, 3)]), two)),
        ),
        ("3x3 dilated rows only (2, 1), 8 channels", c(2, 12, 9, 8, 3, 3, 24, p(one, Same, [2, 1]))),
        ("3x3 stride 1, many row segments", c(1, 70, 70, 64, 3, 3, 16, p(one, Same, one))),
        ("5x5 stride 2, 7 outputs", c(1, 20, 20, 5, 5, 5, 7, p(two, Same, one))),
        ("3x3 stride 2, n = 0", c(0, 9, 9, 32, 3, 3, 64, p(two, Same, one))),
    ]
}

fn tensors(cfg: &Cfg, seed: u64) -> (Tensor, Tensor, Tensor) {
    let (xs, ws) = ([cfg.n, cfg.h, cfg.w, cfg.c], [cfg.kh, cfg.kw, cfg.c, cfg.o]);
    (f64t(&xs, &randv(&xs, seed)), f64t(&ws, &randv(&ws, seed + 1)), f64t(&[cfg.o], &randv(&[cfg.o], seed + 2)))
}

#[test]
fn implicit_gemm_convs_match_f64_and_im2col() {
    let check = || {
        for (i, (what, cfg)) in configs().into_iter().enumerate() {
            let (x, w, b) = tensors(&cfg, 300 + 3 * i as u64);
            let want = run(&cfg, DType::F64, DEFAULT, &x, &w, &b, None);
            let got = run(&cfg, DType::F32, DEFAULT, &x, &w, &b, None);
            let im2col = run(&cfg, DType::F32, Mode { implicit: false, ..DEFAULT }, &x, &w, &b, None);
            assert_eq!(got.shape(), want.shape(), "{what}");
            if let Err(e) = pfor::tensor::assert_close(&got, &want.cast(DType::F32), 1e-3, 1e-3) {
                panic!("{what}: vs f64: {e}");
            }
            if let Err(e) = pfor::tensor::assert_close(&got, &im2col, 1e-4, 1e-4) {
                panic!("{what}: vs im2col: {e}");
            }
        }
    };
    check();
    in_pool(check);
}

#[test]
fn implicit_gemm_batches_fused_epilogues_and_panels_are_bit_identical() {
    let check = || {
        for (i, (what, cfg)) in configs().into_iter().enumerate() {
            let (x, w, b) = tensors(&cfg, 500 + 3 * i as u64);
            let out = run(&cfg, DType::F32, DEFAULT, &x, &w, &b, None);
            let r = Tensor::randn_f64(out.shape(), 600 + i as u64).unwrap();
            for (mode, name) in [
                (Mode { constant: true, ..DEFAULT }, "constant filter (panels) vs fed"),
                (Mode { fuse: false, ..DEFAULT }, "unfused vs fused"),
                (Mode { constant: true, fuse: false, ..DEFAULT }, "constant unfused vs fed fused"),
            ] {
                let other = run(&cfg, DType::F32, mode, &x, &w, &b, None);
                assert_eq!(other.to_f64_vec(), out.to_f64_vec(), "{what}: {name}");
            }
            // the residual epilogue: fused (constant filter) vs the separate ops (fed)
            let res = |m: Mode| run(&cfg, DType::F32, Mode { residual: true, ..m }, &x, &w, &b, Some(&r));
            let fused = res(Mode { constant: true, ..DEFAULT });
            assert_eq!(fused.to_f64_vec(), res(Mode { fuse: false, ..DEFAULT }).to_f64_vec(), "{what}: residual");
            // every example of the batch as its own conv
            let (xv, ov) = (x.to_f64_vec(), out.to_f64_vec());
            let (img, per) = (cfg.h * cfg.w * cfg.c, ov.len() / cfg.n.max(1));
            for e in 0..cfg.n {
                let one = Cfg { n: 1, ..cfg };
                let xe = f64t(&[1, cfg.h, cfg.w, cfg.c], &xv[e * img..(e + 1) * img]);
                let ye = run(&one, DType::F32, Mode { constant: true, ..DEFAULT }, &xe, &w, &b, None);
                assert_eq!(ye.to_f64_vec(), ov[e * per..(e + 1) * per], "{what}: example {e} alone");
            }
        }
    };
    check();
    in_pool(check);
}
