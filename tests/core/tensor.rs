//! Core tests: tensors.

use crate::common::*;
use pfor::prelude::*;

#[test]
fn constructors_and_accessors() {
    let t = Tensor::full(DType::F64, &[2, 3], 1.5).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.dtype(), DType::F64);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.5; 6]);
    assert_eq!(Tensor::arange(4).unwrap().to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
    assert_eq!(Tensor::zeros(DType::Bool, &[2]).unwrap().to_vec::<bool>().unwrap(), vec![false, false]);
    assert_eq!(Tensor::scalar(3i64).shape(), &[] as &[usize]);
    let a = ndarray::array![[1.0f32, 2.0], [3.0, 4.0]];
    let t = Tensor::from(a.clone());
    assert_eq!(t.to_array::<f32>().unwrap(), a.into_dyn());
    assert!(matches!(Tensor::from_vec(&[2, 2], vec![1.0f32; 3]), Err(Error::InvalidArgument(_))));
    assert!(matches!(t.array::<f64>(), Err(Error::DType { .. })));
}

#[test]
fn random_is_reproducible_and_seed_dependent() {
    let a = Tensor::randn(&[100], 7).unwrap();
    assert_eq!(a, Tensor::randn(&[100], 7).unwrap());
    assert_ne!(a, Tensor::randn(&[100], 8).unwrap());
    let v = a.to_vec::<f32>().unwrap();
    let mean: f32 = v.iter().sum::<f32>() / 100.0;
    assert!(mean.abs() < 0.35, "mean {mean}");
    let u = Tensor::rand_uniform(DType::F64, &[1000], -2.0, 3.0, 1).unwrap().to_vec::<f64>().unwrap();
    assert!(u.iter().all(|x| (-2.0..3.0).contains(x)));
}

#[test]
fn cast_reshape_stack_index() {
    let t = f64t(&[4], &[1.7, -1.7, 0.0, 2.0]);
    assert_eq!(t.cast(DType::I64), i64t(&[4], &[1, -1, 0, 2]));
    assert_eq!(t.cast(DType::Bool), boolt(&[4], &[true, true, false, true]));
    let r = t.reshape(&[2, 2]).unwrap();
    assert_eq!(r.shape(), &[2, 2]);
    assert!(matches!(t.reshape(&[3]), Err(Error::Shape { .. })));
    let s = Tensor::stack(&[r.clone(), r.clone()], DType::F64, &[2, 2]).unwrap();
    assert_eq!(s.shape(), &[2, 2, 2]);
    assert_eq!(s.index_axis0(1).unwrap(), r);
    assert_eq!(r.index_axis0(1).unwrap(), f64t(&[2], &[0.0, 2.0]));
    assert_eq!(r.slice_axis0(1, 2).unwrap(), f64t(&[1, 2], &[0.0, 2.0]));
    assert!(matches!(r.index_axis0(2), Err(Error::IndexOutOfRange { .. })));
    let empty = Tensor::stack(&[], DType::F32, &[3]).unwrap();
    assert_eq!(empty.shape(), &[0, 3]);
}

#[test]
fn allclose_and_assert_close() {
    let a = f64t(&[2], &[1.0, f64::NAN]);
    let b = f64t(&[2], &[1.0 + 1e-9, f64::NAN]);
    assert!(a.allclose(&b, 1e-6, 1e-6));
    assert!(!a.allclose(&f64t(&[2], &[1.1, f64::NAN]), 1e-6, 1e-6));
    assert!(pfor::tensor::assert_close(&a, &a.cast(DType::F32), 1e-6, 1e-6).is_err());
    assert_eq!(pfor::tensor::max_abs_diff(&a, &f64t(&[2], &[1.5, f64::NAN])), Some(0.5));
}

#[test]
fn assert_close_failures_print_the_tolerances() {
    let e = pfor::tensor::assert_close(&f64t(&[1], &[1.0]), &f64t(&[1], &[1.5]), 1e-3, 2e-4).unwrap_err().to_string();
    assert!(e.contains("rtol = 1e-3") && e.contains("atol = 2e-4") && e.contains("|diff| = 5e-1"), "{e}");
}

#[test]
fn gemm_kernel_matches_naive() {
    use pfor::kernels::gemm::gemm;
    let (m, k, n) = (5, 7, 3);
    let a: Vec<f64> = (0..m * k).map(|x| x as f64 * 0.5 - 3.0).collect();
    let b: Vec<f64> = (0..k * n).map(|x| (x % 5) as f64 - 1.0).collect();
    let mut want = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    let mut c = vec![0.0; m * n];
    gemm(m, k, n, &a, false, &b, false, &mut c, false).unwrap();
    assert_eq!(c, want);
    // transposed storage of both operands
    let at: Vec<f64> = (0..k * m).map(|x| a[(x % m) * k + x / m]).collect();
    let bt: Vec<f64> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
    let mut c2 = vec![1.0; m * n];
    gemm(m, k, n, &at, true, &bt, true, &mut c2, true).unwrap();
    let want2: Vec<f64> = want.iter().map(|x| x + 1.0).collect();
    assert_eq!(c2, want2);
    assert!(gemm(m, k, n, &a, false, &b, false, &mut c[..1], false).is_err());
}

#[test]
fn gemm_kernel_matches_naive_on_parallel_slices() {
    // large enough to run in parallel: on a pool thread sliced along columns (wide C) or rows
    // (tall C), from outside with faer's schedule; sizes that are not multiples of the slice
    // alignment; small-integer data, so the sums are exact whatever the order
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    gemm_cases();
    pool.install(gemm_cases);
}

fn gemm_cases() {
    use pfor::kernels::gemm::gemm;
    for (m, k, n) in [(100, 300, 517), (701, 90, 130), (128, 1024, 128), (64, 48, 1000), (3, 700, 900)] {
        let a: Vec<f64> = (0..m * k).map(|x| ((x * 7) % 5) as f64 - 2.0).collect();
        let b: Vec<f64> = (0..k * n).map(|x| ((x * 3) % 7) as f64 - 3.0).collect();
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            for p in 0..k {
                let x = a[i * k + p];
                for j in 0..n {
                    want[i * n + j] += x * b[p * n + j];
                }
            }
        }
        let at: Vec<f64> = (0..k * m).map(|x| a[(x % m) * k + x / m]).collect();
        let bt: Vec<f64> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
        for (ta, tb, acc) in [(false, false, false), (true, false, true), (false, true, false), (true, true, true)] {
            let mut c = vec![if acc { 1.5 } else { f64::NAN }; m * n];
            let (aa, bb) = (if ta { &at } else { &a }, if tb { &bt } else { &b });
            gemm(m, k, n, aa, ta, bb, tb, &mut c, acc).unwrap();
            let want: Vec<f64> = want.iter().map(|w| if acc { w + 1.5 } else { *w }).collect();
            assert_eq!(c, want, "m={m} k={k} n={n} ta={ta} tb={tb} acc={acc}");
            // f32 too
            let a32: Vec<f32> = aa.iter().map(|&v| v as f32).collect();
            let b32: Vec<f32> = bb.iter().map(|&v| v as f32).collect();
            let mut c32 = vec![if acc { 1.5f32 } else { f32::NAN }; m * n];
            gemm(m, k, n, &a32, ta, &b32, tb, &mut c32, acc).unwrap();
            assert!(c32.iter().zip(&want).all(|(x, w)| *x as f64 == *w), "f32 m={m} k={k} n={n} ta={ta} tb={tb}");
        }
    }
}

#[test]
fn gemm_in_place_kernel_shapes_match_naive_and_do_not_depend_on_threads() {
    // shapes the in-place AVX-512 kernel takes (`ab_applies`): narrow B of 1-4 vectors
    // (row blocks of 16 / 12 / 8 / 6 and their remainders), few rows with wide B (tasks
    // of column blocks), many rows (tasks of row blocks), one row, widths that are not whole
    // vectors (the last vector masked)
    use pfor::kernels::gemm::{ab_applies, gemm};
    let shapes = [
        (1000, 128, 16),
        (37, 64, 32),
        (701, 300, 48),
        (169, 64, 256),
        (49, 512, 1000),
        (1, 9, 64),
        (193, 1024, 64),
        (300, 70, 41),
        (7, 3, 5),
    ];
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let two = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    for (m, k, n) in shapes {
        assert!(ab_applies(m, k, n), "m={m} k={k} n={n}");
        // small integers: every order of summation gives the exact result
        let a: Vec<f32> = (0..m * k).map(|x| ((x * 7) % 5) as f32 - 2.0).collect();
        let b: Vec<f32> = (0..k * n).map(|x| ((x * 3) % 7) as f32 - 3.0).collect();
        let mut want = vec![0.0f32; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    want[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        let run = |a: &[f32], b: &[f32]| {
            let mut c = vec![f32::NAN; m * n];
            gemm(m, k, n, a, false, b, false, &mut c, false).unwrap();
            c
        };
        assert_eq!(run(&a, &b), want, "m={m} k={k} n={n}");
        assert_eq!(two.install(|| run(&a, &b)), want, "two threads: m={m} k={k} n={n}");
        // inexact data: the same bits on one thread and on two
        if pfor::kernels::cpu::caps().avx512f {
            let a: Vec<f32> = (0..m * k).map(|x| ((x * 7919) % 1000) as f32 / 997.0 - 0.5).collect();
            let b: Vec<f32> = (0..k * n).map(|x| ((x * 104729) % 1000) as f32 / 991.0 - 0.5).collect();
            let (c1, c2) = (one.install(|| run(&a, &b)), two.install(|| run(&a, &b)));
            assert!(c1.iter().zip(&c2).all(|(x, y)| x.to_bits() == y.to_bits()), "m={m} k={k} n={n}");
        }
    }
    // deep products stay with faer (as do accumulation and transposed operands)
    assert!(!ab_applies(49, 2048, 512) && !ab_applies(64, 1025, 40) && !ab_applies(0, 8, 16));
}

#[test]
fn standard_copies_of_strided_views_keep_row_major_order() {
    use ndarray::{Array, Axis, IxDyn, Slice};
    use pfor::tensor::layout::{stack_standard, standard_vec};
    let a = Array::from_shape_vec(IxDyn(&[3, 4, 5, 1]), (0..60).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let reference = |v: &ndarray::ArrayViewD<'_, f32>| v.iter().copied().collect::<Vec<f32>>();
    // slices with steps, a transpose, a unit axis, a negative step, an empty view
    let views = vec![
        a.view(),
        a.slice_each_axis(|ad| if ad.axis.index() == 1 { Slice::new(1, Some(3), 1) } else { Slice::from(..) }),
        a.slice_each_axis(|ad| if ad.axis.index() == 2 { Slice::new(0, None, 2) } else { Slice::from(..) }),
        a.view().permuted_axes(IxDyn(&[2, 0, 3, 1])),
        a.slice_each_axis(|ad| if ad.axis.index() == 0 { Slice::new(0, None, -1) } else { Slice::from(..) }),
        a.slice_each_axis(|ad| if ad.axis.index() == 1 { Slice::new(1, Some(1), 1) } else { Slice::from(..) }),
        a.index_axis(Axis(1), 2),
    ];
    for v in &views {
        assert_eq!(standard_vec(v), reference(v), "view of shape {:?} strides {:?}", v.shape(), v.strides());
    }
    // stacking along every axis agrees with ndarray::stack (element order)
    let shifted = views[1].map(|x| x + 100.0);
    let p2 = [views[1].clone(), shifted.view()];
    for axis in 0..=4 {
        let got = stack_standard(&p2, axis, Vec::new()).unwrap();
        let want = ndarray::stack(Axis(axis), &p2).unwrap();
        assert_eq!(got.shape(), want.shape());
        assert!(got.is_standard_layout());
        assert_eq!(got.iter().copied().collect::<Vec<_>>(), want.iter().copied().collect::<Vec<_>>(), "axis {axis}");
        // a reused buffer with stale content gives the same result
        let got2 = stack_standard(&p2, axis, vec![7.0; 999]).unwrap();
        assert_eq!(got2, got);
    }
    assert!(stack_standard::<f32>(&[], 0, Vec::new()).is_none());
    assert!(stack_standard(&[views[0].clone(), views[1].clone()], 0, Vec::new()).is_none());
}
