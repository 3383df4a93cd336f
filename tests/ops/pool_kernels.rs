//! The max-pool kernels (`kernels::conv::direct`) against a naive row-major fold, bit for
//! bit: windows inside the input (the fast path takes a plain `>` max when the window rows
//! hold no NaN, the exact rule otherwise) and padded windows, f32 (the wide-vector code) and
//! f64, with NaNs (the first NaN of a window wins) and ±0 ties (the first of equal maxima
//! wins, so the sign of a zero shows a wrong order).

use crate::common::*;
use pfor::prelude::*;

/// `better(v, cur)` as the op documents it: strictly greater, or the first NaN.
fn wins(v: f64, cur: f64) -> bool {
    (v > cur || v.is_nan()) && !cur.is_nan()
}

/// Naive NHWC max pool with symmetric padding `p` (padding taps skipped), taps in row-major
/// window order.
fn reference(x: &[f64], [n, h, w, c]: [usize; 4], k: usize, s: usize, p: usize) -> (Vec<usize>, Vec<f64>) {
    let (oh, ow) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
    let mut y = Vec::with_capacity(n * oh * ow * c);
    for (b, oy, ox, ch) in (0..n)
        .flat_map(|b| (0..oh).flat_map(move |oy| (0..ow).flat_map(move |ox| (0..c).map(move |ch| (b, oy, ox, ch)))))
    {
        let mut best: Option<f64> = None;
        for (ky, kx) in (0..k).flat_map(|ky| (0..k).map(move |kx| (ky, kx))) {
            let (iy, ix) = ((oy * s + ky) as isize - p as isize, (ox * s + kx) as isize - p as isize);
            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                continue;
            }
            let v = x[((b * h + iy as usize) * w + ix as usize) * c + ch];
            best = Some(match best {
                Some(cur) if !wins(v, cur) => cur,
                _ => v,
            });
        }
        y.push(best.expect("every window has an in-bounds tap"));
    }
    (vec![n, oh, ow, c], y)
}

/// Values with many ±0 ties and, when `nans`, a NaN in some windows.
fn data(len: usize, nans: bool) -> Vec<f64> {
    (0..len)
        .map(|i| match (i * 7 + i / 5) % 11 {
            0 | 3 => 0.0,
            1 | 6 => -0.0,
            4 if nans && i % 37 == 4 => f64::NAN,
            r => (r as f64 - 5.0) * 0.25 * if i % 2 == 0 { 1.0 } else { -1.0 },
        })
        .collect()
}

fn check(dims: [usize; 4], k: usize, s: usize, p: usize, nans: bool, dtype: DType) {
    let x = data(dims.iter().product(), nans);
    let (shape, want) = reference(&x, dims, k, s, p);
    let mut g = Graph::new();
    let xv = g.input("x", dtype, dims);
    let padding = if p == 0 { Padding::Valid } else { Padding::Explicit([(p, p), (p, p)]) };
    let y = g.max_pool(xv, [k, k], [s, s], padding).unwrap();
    let feed = match dtype {
        DType::F32 => f32t(&dims, &x.iter().map(|&v| v as f32).collect::<Vec<_>>()),
        _ => f64t(&dims, &x),
    };
    let got = &run_recorded(&g, &[y], &[(xv, feed)]).unwrap()[0];
    assert_eq!(got.shape(), &shape[..], "{dims:?} k{k} s{s} p{p}");
    let got = got.to_f64_vec();
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "{dtype:?} {dims:?} k{k} s{s} p{p} nans {nans}: element {i}: {a:?} vs {b:?}"
        );
    }
}

#[test]
fn max_pool_matches_a_row_major_fold_bit_for_bit() {
    for dtype in [DType::F32, DType::F64] {
        for nans in [false, true] {
            // SqueezeNet's 3x3 stride 2 VALID, channel counts below / at / past a vector
            check([2, 9, 11, 5], 3, 2, 0, nans, dtype);
            check([1, 7, 7, 16], 3, 2, 0, nans, dtype);
            check([3, 8, 6, 35], 3, 2, 0, nans, dtype);
            // 2x2 stride 2 (the row-pair kernel), 3x3 stride 1, padded (ResNet's pool)
            check([2, 6, 8, 17], 2, 2, 0, nans, dtype);
            check([1, 6, 5, 3], 3, 1, 0, nans, dtype);
            check([2, 8, 8, 20], 3, 2, 1, nans, dtype);
        }
    }
}
