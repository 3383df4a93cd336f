//! The forward conv's row chunking (`kernels::conv::im2col`): L2-sized chunks in parallel,
//! each with its own single-threaded GEMM and the fused `bias → relu` epilogue applied in
//! cache, or chunks in order with one parallel GEMM (few rows against a wide filter). Every
//! path — pointwise, strided 1x1, strided 3x3 / 7x7, few and many rows, n = 0 and 1, with
//! and without the fused 2x2 max pool, and the direct kernel of few-channel inputs (1-4
//! channels, strided, dilated) — against the naive reference of `super::conv`, the
//! fused plan bit-identical to the unfused one, f64 and f32, on the default rayon pool and a
//! 4-thread one (other chunk counts).

use super::conv::{Cfg, in_pool, p, randv};
use crate::common::*;
use pfor::prelude::*;

use Padding::{Same, Valid};

/// `relu(conv(x, w) + b)`, then a 2x2 stride-2 max pool when `pool`: (shape, values).
fn reference(cfg: &Cfg, x: &[f64], w: &[f64], b: &[f64], pool: bool) -> (Vec<usize>, Vec<f64>) {
    let (oh, ow) = cfg.out_hw();
    let (c, o) = (cfg.c, cfg.o);
    let mut y = vec![0.0; cfg.n * oh * ow * o];
    cfg.visit(|[n, oy, ox, ky, kx, iy, ix]| {
        for ci in 0..c {
            for oi in 0..o {
                y[((n * oh + oy) * ow + ox) * o + oi] +=
                    x[((n * cfg.h + iy) * cfg.w + ix) * c + ci] * w[((ky * cfg.kw + kx) * c + ci) * o + oi];
            }
        }
    });
    for (i, v) in y.iter_mut().enumerate() {
        *v = (*v + b[i % o]).max(0.0);
    }
    if !pool {
        return (vec![cfg.n, oh, ow, o], y);
    }
    let (ph, pw) = (oh / 2, ow / 2);
    let mut out = vec![f64::NEG_INFINITY; cfg.n * ph * pw * o];
    for n in 0..cfg.n {
        for (py, px, oi) in (0..ph).flat_map(|a| (0..pw).flat_map(move |b| (0..o).map(move |c| (a, b, c)))) {
            for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                let v = y[((n * oh + 2 * py + dy) * ow + 2 * px + dx) * o + oi];
                let d = &mut out[((n * ph + py) * pw + px) * o + oi];
                *d = d.max(v);
            }
        }
    }
    (vec![cfg.n, ph, pw, o], out)
}

/// The chain with `x`, `w`, `b` fed (nothing folds), run fused and unfused.
fn run(cfg: &Cfg, dt: DType, pool: bool, feeds: [&Tensor; 3]) -> (Tensor, Tensor) {
    let mut g = Graph::new();
    let x = g.input("x", dt, [cfg.n, cfg.h, cfg.w, cfg.c]);
    let w = g.input("w", dt, [cfg.kh, cfg.kw, cfg.c, cfg.o]);
    let b = g.input("b", dt, [cfg.o]);
    let y = g.conv2d(x, w, cfg.pr).unwrap();
    let y = g.bias_add(y, b).unwrap();
    let mut y = g.relu(y).unwrap();
    if pool {
        y = g.max_pool(y, [2, 2], [2, 2], Valid).unwrap();
    }
    let feeds: Vec<(ValueId, Tensor)> = [x, w, b].into_iter().zip(feeds.map(|t| t.cast(dt))).collect();
    let unfused = ExecOptions { fuse: false, ..ExecOptions::default() };
    let plain = Session::with_options(&g, &[y], unfused).unwrap().run(&feeds).unwrap().remove(0);
    let fused = Session::new(&g, &[y]).unwrap().run(&feeds).unwrap().remove(0);
    (fused, plain)
}

fn configs() -> Vec<(&'static str, Cfg)> {
    let c = |n, h, w, c, kh, kw, o, pr| Cfg { n, h, w, c, kh, kw, o, pr };
    let (one, two) = ([1, 1], [2, 2]);
    vec![
        ("pointwise, row chunks", c(2, 16, 16, 64, 1, 1, 64, p(one, Same, one))),
        ("pointwise, few rows, wide filter", c(1, 7, 7, 256, 1, 1, 512, p(one, Same, one))),
        ("1x1 stride 2, row chunks", c(4, 16, 16, 128, 1, 1, 128, p(two, Valid, one))),
        ("1x1 stride 2 SAME, n = 1, odd input", c(1, 15, 15, 64, 1, 1, 96, p(two, Same, one))),
        ("3x3 stride 2 VALID, odd input", c(4, 21, 21, 32, 3, 3, 64, p(two, Valid, one))),
        ("7x7 stride 2, 3 channels", c(2, 40, 40, 3, 7, 7, 64, p(two, Same, one))),
        ("3x3, few rows, wide filter", c(1, 9, 9, 256, 3, 3, 64, p(one, Same, one))),
        ("3x3, n = 0", c(0, 8, 8, 4, 3, 3, 8, p(one, Same, one))),
        ("3x3 stride 2, n = 1", c(1, 12, 12, 16, 3, 3, 32, p(two, Same, one))),
        // few input channels: the direct kernel on AVX-512 CPUs (`narrow`), any stride
        ("3x3 stride 2 VALID, 3 channels, odd input (SqueezeNet conv1)", c(1, 37, 37, 3, 3, 3, 64, p(two, Valid, one))),
        ("3x3 stride 2 VALID, 3 channels, n = 0", c(0, 9, 9, 3, 3, 3, 64, p(two, Valid, one))),
        ("5x5 stride 2 SAME, 4 channels, 96 outputs", c(3, 19, 18, 4, 5, 5, 96, p(two, Same, one))),
        ("3x2 stride 1 dilated, 2 channels", c(2, 11, 13, 2, 3, 2, 32, p(one, Same, two))),
        ("3x3 stride (2, 1) VALID, 3 channels", c(1, 13, 17, 3, 3, 3, 32, p([2, 1], Valid, one))),
        // pixel steps (stride x channels) of 4 and 9: a compile-time step and the run-time one
        ("3x3 stride 1 SAME, 4 channels", c(2, 9, 11, 4, 3, 3, 64, p(one, Same, one))),
        ("3x3 stride 3 VALID, 3 channels", c(1, 20, 23, 3, 3, 3, 32, p([3, 3], Valid, one))),
        (
            "3x3 stride 1 SAME, 5 channels (above the direct kernel's bound)",
            c(1, 10, 10, 5, 3, 3, 32, p(one, Same, one)),
        ),
    ]
}

#[test]
fn forward_conv_chunkings_match_the_naive_reference_and_fuse_bit_identically() {
    let check = || {
        for (i, (what, cfg)) in configs().into_iter().enumerate() {
            let (oh, ow) = cfg.out_hw();
            let seed = 40 + 3 * i as u64;
            let (xs, ws) = ([cfg.n, cfg.h, cfg.w, cfg.c], [cfg.kh, cfg.kw, cfg.c, cfg.o]);
            let (xv, wv, bv) = (randv(&xs, seed), randv(&ws, seed + 1), randv(&[cfg.o], seed + 2));
            let feeds = [&f64t(&xs, &xv), &f64t(&ws, &wv), &f64t(&[cfg.o], &bv)];
            let pools: &[bool] = if oh % 2 == 0 && ow % 2 == 0 { &[false, true] } else { &[false] };
            for &pool in pools {
                let (shape, want) = reference(&cfg, &xv, &wv, &bv, pool);
                for (dt, tol) in [(DType::F64, 1e-10), (DType::F32, 1e-3)] {
                    let (fused, plain) = run(&cfg, dt, pool, feeds);
                    let case = format!("{what} {dt} pool={pool}");
                    assert_eq!(fused.shape(), &shape[..], "{case}");
                    assert_eq!(fused.to_f64_vec(), plain.to_f64_vec(), "{case}: fused vs unfused");
                    assert_close(&fused, &f64t(&shape, &want).cast(dt), tol);
                }
            }
        }
    };
    check();
    in_pool(check);
}

#[test]
fn constant_filters_in_panels_match_the_fed_filter() {
    // A constant f32 1x1 filter is copied into the in-place GEMM's panels when the plan
    // compiles (`exec::pretranspose::prepared_filter`); the same conv with the filter fed
    // multiplies the row-major filter. Where both take the in-place kernel (depth ≤ 512, or
    // ≤ 1024 into ≤ 64 channels) the results are the same bits; deeper products use neither
    // (faer for both): the naive reference then.
    // Widths: whole panels, a masked last vector, a last panel of fewer than 64 channels.
    let shapes: [(Cfg, bool); 6] = [
        (Cfg { n: 2, h: 6, w: 6, c: 48, kh: 1, kw: 1, o: 200, pr: p([1, 1], Same, [1, 1]) }, true),
        (Cfg { n: 1, h: 9, w: 9, c: 32, kh: 1, kw: 1, o: 16, pr: p([1, 1], Same, [1, 1]) }, true),
        (Cfg { n: 1, h: 9, w: 9, c: 64, kh: 1, kw: 1, o: 96, pr: p([2, 2], Same, [1, 1]) }, true),
        (Cfg { n: 3, h: 4, w: 4, c: 100, kh: 1, kw: 1, o: 37, pr: p([1, 1], Valid, [1, 1]) }, true),
        (Cfg { n: 1, h: 5, w: 5, c: 700, kh: 1, kw: 1, o: 100, pr: p([1, 1], Same, [1, 1]) }, false),
        (Cfg { n: 0, h: 5, w: 5, c: 700, kh: 1, kw: 1, o: 100, pr: p([1, 1], Same, [1, 1]) }, false),
    ];
    let check = || {
        for (i, (cfg, same_bits)) in shapes.iter().enumerate() {
            let seed = 90 + 3 * i as u64;
            let (xs, ws) = ([cfg.n, cfg.h, cfg.w, cfg.c], [cfg.kh, cfg.kw, cfg.c, cfg.o]);
            let (xv, wv, bv) = (randv(&xs, seed), randv(&ws, seed + 1), randv(&[cfg.o], seed + 2));
            let (x64, w64, b64) = (f64t(&xs, &xv), f64t(&ws, &wv), f64t(&[cfg.o], &bv));
            let (xt, wt, bt) = (x64.cast(DType::F32), w64.cast(DType::F32), b64.cast(DType::F32));
            let fed = run(cfg, DType::F32, false, [&x64, &w64, &b64]).0;
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, xs);
            let (w, b) = (g.constant(wt.clone()), g.constant(bt.clone()));
            let y = g.conv2d(x, w, cfg.pr).unwrap();
            let y = g.bias_add(y, b).unwrap();
            let y = g.relu(y).unwrap();
            let got = Session::new(&g, &[y]).unwrap().run(&[(x, xt.clone())]).unwrap().remove(0);
            let case = format!("{cfg:?}");
            if *same_bits {
                assert_eq!(got.to_f64_vec(), fed.to_f64_vec(), "{case}: panels vs the fed filter");
            }
            let (shape, want) = reference(cfg, &xv, &wv, &bv, false);
            assert_close(&got, &f64t(&shape, &want).cast(DType::F32), 1e-3);
        }
    };
    check();
    in_pool(check);
}

#[test]
fn panel_products_finish_bias_residual_and_relu_in_registers_bit_identically() {
    // A constant 1x1 filter in panels: the in-place GEMM applies the fused epilogue (bias,
    // the residual, relu) to each block in registers before storing it (`micro::Finish`).
    // Against the unfused ops (separate conv, bias_add, add, relu kernels), bit for bit:
    // every combination of terms, widths with masked last vectors and partial panels, row
    // counts past one task, and NaNs in the input (relu keeps NaN) and the residual.
    let shapes = [(1, 9, 9, 32, 16), (2, 6, 6, 48, 200), (3, 4, 4, 100, 37), (1, 13, 13, 64, 256), (0, 4, 4, 8, 32)];
    let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let check = || {
        for (i, &(n, h, w, c, o)) in shapes.iter().enumerate() {
            let seed = 300 + 5 * i as u64;
            let (xs, ys) = ([n, h, w, c], [n, h, w, o]);
            let mut xv = randv(&xs, seed);
            let mut rv = randv(&ys, seed + 1);
            if let (Some(a), Some(b)) = (xv.get_mut(3), rv.get_mut(5)) {
                (*a, *b) = (f64::NAN, f64::NAN);
            }
            let (xt, rt) = (f64t(&xs, &xv).cast(DType::F32), f64t(&ys, &rv).cast(DType::F32));
            let wt = f64t(&[1, 1, c, o], &randv(&[1, 1, c, o], seed + 2)).cast(DType::F32);
            let bt = f64t(&[o], &randv(&[o], seed + 3)).cast(DType::F32);
            for (bias, residual, relu) in [
                (true, true, true),
                (true, false, true),
                (false, true, true),
                (true, true, false),
                (false, false, true),
            ] {
                let mut g = Graph::new();
                let (x, r) = (g.input("x", DType::F32, xs), g.input("r", DType::F32, ys));
                let (wc, bc) = (g.constant(wt.clone()), g.constant(bt.clone()));
                let mut y = g.conv2d(x, wc, p([1, 1], Same, [1, 1])).unwrap();
                if bias {
                    y = g.bias_add(y, bc).unwrap();
                }
                if residual {
                    y = g.add(y, r).unwrap();
                }
                if relu {
                    y = g.relu(y).unwrap();
                }
                let feeds = [(x, xt.clone()), (r, rt.clone())];
                let fused = Session::new(&g, &[y]).unwrap().run(&feeds).unwrap().remove(0);
                let opts = ExecOptions { fuse: false, ..ExecOptions::default() };
                let plain = Session::with_options(&g, &[y], opts).unwrap().run(&feeds).unwrap().remove(0);
                let case = format!("[{n},{h},{w},{c}] -> {o}, bias {bias} residual {residual} relu {relu}");
                assert_eq!(fused.shape(), &ys[..], "{case}");
                assert_eq!(bits(&fused), bits(&plain), "{case}: fused in registers vs the separate ops");
            }
        }
    };
    check();
    in_pool(check);
}

#[test]
fn few_channel_convs_pool_any_valid_window_in_kernel_bit_identically() {
    // The direct kernel of 1-4 input channels pools any VALID max-pool window in-kernel
    // (`narrow::conv2d_pool_window`: each pooled row's conv rows computed into a rolling
    // scratch, SqueezeNet's conv1 → 3x3 stride-2 pool): the fused chain equals the unfused
    // ops bit for bit, in f32 and f64 (which pools after the conv), over windows that
    // overlap, tile, skip input and cross image boundaries inside a task (n = 3, 4 threads).
    let cases = [
        // (n, h, w, c, k, stride, o, pool window, pool stride)
        (1, 37, 37, 3, 3, 2, 64, 3, 2),
        (3, 29, 23, 3, 3, 2, 32, 3, 2),
        (2, 20, 21, 2, 3, 1, 32, 2, 1),
        (1, 19, 19, 4, 5, 1, 64, 3, 3),
        (3, 9, 9, 1, 3, 1, 32, 4, 2),
        (0, 9, 9, 3, 3, 2, 32, 3, 2),
    ];
    let check = || {
        for (i, &(n, h, w, c, k, s, o, pk, ps)) in cases.iter().enumerate() {
            let (xs, ws) = ([n, h, w, c], [k, k, c, o]);
            let seed = 700 + 3 * i as u64;
            let (xt, wt, bt) =
                (f64t(&xs, &randv(&xs, seed)), f64t(&ws, &randv(&ws, seed + 1)), f64t(&[o], &randv(&[o], seed + 2)));
            for dt in [DType::F32, DType::F64] {
                let mut g = Graph::new();
                let x = g.input("x", dt, xs);
                let (wc, bc) = (g.constant(wt.cast(dt)), g.constant(bt.cast(dt)));
                let y = g.conv2d(x, wc, p([s, s], Valid, [1, 1])).unwrap();
                let y = g.bias_add(y, bc).unwrap();
                let y = g.relu(y).unwrap();
                let y = g.max_pool(y, [pk, pk], [ps, ps], Valid).unwrap();
                let feeds = [(x, xt.cast(dt))];
                let fused = Session::new(&g, &[y]).unwrap().run(&feeds).unwrap().remove(0);
                let opts = ExecOptions { fuse: false, ..ExecOptions::default() };
                let plain = Session::with_options(&g, &[y], opts).unwrap().run(&feeds).unwrap().remove(0);
                let case = format!("case {i} {dt}");
                assert_eq!(fused.shape(), plain.shape(), "{case}");
                assert_eq!(fused.to_f64_vec(), plain.to_f64_vec(), "{case}: fused vs unfused");
            }
        }
    };
    check();
    in_pool(check);
}
