//! Value tests for the linear family (expected values written literally or in closed form).

use crate::common::*;
use ndarray::{Array2, Array3, Axis, Slice};
use pfor::prelude::*;

const A: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // [2,3]
const AT: [f64; 6] = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]; // Aᵀ stored [3,2]
const B: [f64; 6] = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]; // [3,2]
const BT: [f64; 6] = [7.0, 9.0, 11.0, 8.0, 10.0, 12.0]; // Bᵀ stored [2,3]
const AB: [f64; 4] = [58.0, 64.0, 139.0, 154.0]; // A·B [2,2]

#[test]
fn matmul_all_transpose_combinations() {
    for dt in [DType::F32, DType::F64, DType::I64] {
        let want = f64t(&[2, 2], &AB).cast(dt);
        let cases = [
            (f64t(&[2, 3], &A), f64t(&[3, 2], &B), false, false),
            (f64t(&[3, 2], &AT), f64t(&[3, 2], &B), true, false),
            (f64t(&[2, 3], &A), f64t(&[2, 3], &BT), false, true),
            (f64t(&[3, 2], &AT), f64t(&[2, 3], &BT), true, true),
        ];
        for (a, b, ta, tb) in cases {
            let got = apply2(a.cast(dt), b.cast(dt), |g, x, y| g.matmul_t(x, y, ta, tb));
            assert_close(&got, &want, 1e-6);
        }
        // B·A is [3,3].
        let got = apply2(f64t(&[3, 2], &B).cast(dt), f64t(&[2, 3], &A).cast(dt), |g, x, y| g.matmul(x, y));
        let want = f64t(&[3, 3], &[39.0, 54.0, 69.0, 49.0, 68.0, 87.0, 59.0, 82.0, 105.0]).cast(dt);
        assert_close(&got, &want, 1e-6);
    }
}

#[test]
fn matmul_i64_exact() {
    let a = i64t(&[2, 2], &[1, -2, 3, 4]);
    let b = i64t(&[2, 3], &[5, 6, -7, 8, 9, 10]);
    let got = apply2(a, b, |g, x, y| g.matmul(x, y));
    assert_eq!(got, i64t(&[2, 3], &[-11, -12, -27, 47, 54, 19]));
}

/// A tensor with logical contents `data` (row-major `[r, c]`) stored column-major.
fn col_major(r: usize, c: usize, data: &[f64]) -> Tensor {
    let stored = Array2::from_shape_fn((c, r), |(j, i)| data[i * c + j]);
    let t = stored.reversed_axes();
    assert!(!t.is_standard_layout());
    Tensor::from_array(t)
}

#[test]
fn matmul_transposed_view_inputs() {
    let want = f64t(&[2, 2], &AB);
    // Logical A and B held as transposed views of standard buffers.
    let got = apply2(col_major(2, 3, &A), col_major(3, 2, &B), |g, x, y| g.matmul(x, y));
    assert_close(&got, &want, 1e-12);
    // Logical Aᵀ, Bᵀ as views, with both transpose flags.
    let got = apply2(col_major(3, 2, &AT), col_major(2, 3, &BT), |g, x, y| g.matmul_t(x, y, true, true));
    assert_close(&got, &want, 1e-12);
    // Mixed: a view on one side, standard on the other.
    let got = apply2(col_major(3, 2, &AT), f64t(&[3, 2], &B), |g, x, y| g.matmul_t(x, y, true, false));
    assert_close(&got, &want, 1e-12);
}

#[test]
fn matmul_non_contiguous_input() {
    // Every other column of a [2,6] buffer holds A.
    let wide: Vec<f64> = A.iter().flat_map(|&v| [v, -100.0]).collect();
    let mut arr = Array2::from_shape_vec((2, 6), wide).unwrap().into_dyn().into_shared();
    arr.slice_axis_inplace(Axis(1), Slice::new(0, None, 2));
    assert!(!arr.is_standard_layout() && !arr.t().is_standard_layout());
    let got = apply2(Tensor::F64(arr), f64t(&[3, 2], &B), |g, x, y| g.matmul(x, y));
    assert_close(&got, &f64t(&[2, 2], &AB), 1e-12);
}

#[test]
fn matmul_empty_dims() {
    // k = 0: zeros.
    let got = apply2(f32t(&[2, 0], &[]), f32t(&[0, 3], &[]), |g, x, y| g.matmul(x, y));
    assert_eq!(got, f32t(&[2, 3], &[0.0; 6]));
    // m = 0 / n = 0: empty.
    let got = apply2(f32t(&[0, 3], &[]), f32t(&[3, 2], &[0.0; 6]), |g, x, y| g.matmul(x, y));
    assert_eq!(got.shape(), &[0, 2]);
    let got = apply2(i64t(&[2, 3], &[0; 6]), i64t(&[3, 0], &[]), |g, x, y| g.matmul(x, y));
    assert_eq!(got.shape(), &[2, 0]);
}

#[test]
fn batch_matmul_rhs_broadcast_folds() {
    // [2,2,3] x [3,4]: b appends the row sum as a 4th column.
    let a: Vec<f64> = (1..=12).map(f64::from).collect();
    let b = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0];
    let want = [1.0, 2.0, 3.0, 6.0, 4.0, 5.0, 6.0, 15.0, 7.0, 8.0, 9.0, 24.0, 10.0, 11.0, 12.0, 33.0];
    for dt in [DType::F32, DType::F64, DType::I64] {
        let got = apply2(f64t(&[2, 2, 3], &a).cast(dt), f64t(&[3, 4], &b).cast(dt), |g, x, y| g.batch_matmul(x, y));
        assert_close(&got, &f64t(&[2, 2, 4], &want).cast(dt), 1e-6);
        // Same with a unit batch dim on the rhs (rank 4 output).
        let got =
            apply2(f64t(&[2, 2, 3], &a).cast(dt), f64t(&[1, 1, 3, 4], &b).cast(dt), |g, x, y| g.batch_matmul(x, y));
        assert_close(&got, &f64t(&[1, 2, 2, 4], &want).cast(dt), 1e-6);
    }
    // The lhs as a view whose last two axes are transposed (no fold, no copy): same values.
    let stored = Array3::from_shape_vec((2, 2, 3), a.clone())
        .unwrap()
        .permuted_axes([0, 2, 1])
        .as_standard_layout()
        .into_owned();
    let view = stored.permuted_axes([0, 2, 1]);
    assert!(!view.is_standard_layout());
    let got = apply2(Tensor::from_array(view), f64t(&[3, 4], &b), |g, x, y| g.batch_matmul(x, y));
    assert_close(&got, &f64t(&[2, 2, 4], &want), 1e-12);
}

#[test]
fn batch_matmul_broadcasts_both_sides() {
    // a: [2,1,2,3] (A0, A1); b: [3,3,1] (v0, v1, v2) → [2,3,2,1] with out[i,j] = A_i v_j.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let b = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, -1.0];
    let want = [6.0, 15.0, 1.0, 4.0, -1.0, -1.0, 1.0, 1.0, 1.0, 0.0, 0.0, -1.0];
    let got = apply2(f64t(&[2, 1, 2, 3], &a), f64t(&[3, 3, 1], &b), |g, x, y| g.batch_matmul(x, y));
    assert_close(&got, &f64t(&[2, 3, 2, 1], &want), 1e-12);
    // lhs one matrix, rhs batched: [2,3] x [2,3,1].
    let got = apply2(f64t(&[2, 3], &a[..6]), f64t(&[2, 3, 1], &b[..6]), |g, x, y| g.batch_matmul(x, y));
    assert_close(&got, &f64t(&[2, 2, 1], &[6.0, 15.0, 1.0, 4.0]), 1e-12);
}

#[test]
fn batch_matmul_adjoints() {
    let a = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 0.0, 0.0, 2.0, 0.0, 0.0]; // [2,3,2]
    let b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // [2,3,2]
    let got = apply2(f64t(&[2, 3, 2], &a), f64t(&[2, 3, 2], &b), |g, x, y| g.batch_matmul_t(x, y, true, false));
    assert_close(&got, &f64t(&[2, 2, 2], &[6.0, 8.0, 8.0, 10.0, 2.0, 4.0, 6.0, 8.0]), 1e-12);
    // aᵀ bᵀ with a [1,3,2], b [1,2,3].
    let got = apply2(f64t(&[1, 3, 2], &a[..6]), f64t(&[1, 2, 3], &A), |g, x, y| g.batch_matmul_t(x, y, true, true));
    assert_close(&got, &f64t(&[1, 2, 2], &[4.0, 10.0, 5.0, 11.0]), 1e-12);
    // a bᵀ with the rhs broadcast (folded).
    let got = apply2(f64t(&[1, 2, 3], &A), f64t(&[2, 3], &BT), |g, x, y| g.batch_matmul_t(x, y, false, true));
    assert_close(&got, &f64t(&[1, 2, 2], &AB), 1e-12);
}

#[test]
fn batch_matmul_depth_major_f32_products() {
    // aᵀ b with both operands stored depth-major and whole vectors of columns: f32 on
    // AVX-512 takes the register-blocked kernel (row blocks of 6, column blocks of 64 with
    // partial ones), one item per task; any CPU must agree with the f64 sum within the
    // rounding bound. A broadcast lhs reads the same matrix for every item.
    for (i, &(b, lb, k, m, n)) in
        [(8, 8, 37, 7, 16), (8, 8, 2, 13, 80), (6, 6, 300, 1, 48), (8, 1, 19, 25, 32), (5, 5, 196, 800, 64)]
            .iter()
            .enumerate()
    {
        let (av, bv) = (
            Tensor::randn_f64(&[lb, k, m], 60 + i as u64).unwrap().to_f64_vec(),
            Tensor::randn_f64(&[b, k, n], 70 + i as u64).unwrap().to_f64_vec(),
        );
        let got = apply2(f64t(&[lb, k, m], &av).cast(DType::F32), f64t(&[b, k, n], &bv).cast(DType::F32), |g, x, y| {
            g.batch_matmul_t(x, y, true, false)
        });
        assert_eq!(got.shape(), &[b, m, n]);
        let (av32, bv32): (Vec<f64>, Vec<f64>) =
            (av.iter().map(|&v| v as f32 as f64).collect(), bv.iter().map(|&v| v as f32 as f64).collect());
        let got = got.to_f64_vec();
        for it in 0..b {
            let ai = if lb == 1 { 0 } else { it };
            for r in 0..m {
                for c in 0..n {
                    let (mut want, mut mag) = (0.0, 0.0);
                    for d in 0..k {
                        let p = av32[(ai * k + d) * m + r] * bv32[(it * k + d) * n + c];
                        want += p;
                        mag += p.abs();
                    }
                    let g = got[(it * m + r) * n + c];
                    assert!((g - want).abs() <= 1e-6 * mag + 1e-30, "case {i} [{it},{r},{c}]: {g} vs {want}");
                }
            }
        }
    }
}

#[test]
fn batch_matmul_many_small_items_parallel() {
    // a_i = (i+1)·I₃, b_i[r,c] = 3r + c + i  ⇒  out_i = (i+1)·b_i.
    let n = 4096;
    let a: Vec<f64> = (0..n).flat_map(|i| (0..9).map(move |e| if e % 4 == 0 { (i + 1) as f64 } else { 0.0 })).collect();
    let b: Vec<f64> = (0..n).flat_map(|i| (0..9).map(move |e| (e + i) as f64)).collect();
    let want: Vec<f64> = (0..n).flat_map(|i| (0..9).map(move |e| ((i + 1) * (e + i)) as f64)).collect();
    let got = apply2(f64t(&[n, 3, 3], &a), f64t(&[n, 3, 3], &b), |g, x, y| g.batch_matmul(x, y));
    assert_eq!(got, f64t(&[n, 3, 3], &want));
}

#[test]
fn batch_matmul_empty_dims() {
    let got = apply2(f32t(&[0, 2, 3], &[]), f32t(&[3, 2], &[0.0; 6]), |g, x, y| g.batch_matmul(x, y));
    assert_eq!(got.shape(), &[0, 2, 2]);
    let got = apply2(f32t(&[3, 2, 0], &[]), f32t(&[3, 0, 4], &[]), |g, x, y| g.batch_matmul(x, y));
    assert_eq!(got, f32t(&[3, 2, 4], &[0.0; 24]));
    let got = apply2(f64t(&[2, 0, 3], &[]), f64t(&[1, 3, 2], &[1.0; 6]), |g, x, y| g.batch_matmul(x, y));
    assert_eq!(got.shape(), &[2, 0, 2]);
}

#[test]
fn dynamic_dims_propagate_and_are_checked_at_run_time() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, Shape::from_dims([Dim::unknown(), Dim::fixed(2), Dim::unknown()]));
    let w = g.constant(f64t(&[3, 2], &B));
    let y = g.batch_matmul(x, w).unwrap();
    let ty = g.value_type(y).unwrap();
    assert_eq!(ty.shape.rank(), 3);
    assert!(!ty.shape.dim(0).is_fixed());
    assert_eq!(ty.shape.dim(1), &Dim::fixed(2));
    assert_eq!(ty.shape.dim(2), &Dim::fixed(2));
    let out = run_recorded(&g, &[y], &[(x, f64t(&[1, 2, 3], &A))]).unwrap();
    assert_close(&out[0], &f64t(&[1, 2, 2], &AB), 1e-12);
    // Inner dim known only now: 4 != 3.
    let e = run_recorded(&g, &[y], &[(x, f64t(&[1, 2, 4], &[0.0; 8]))]).unwrap_err();
    assert!(
        matches!(e.root(), Error::Shape { op, msg } if op == "batch_matmul" && msg.contains("[1, 2, 4]") && msg.contains("[3, 2]")),
        "{e}"
    );
}

#[test]
fn linear_errors_name_the_op() {
    let mut g = Graph::new();
    let a23 = g.constant(f32t(&[2, 3], &[0.0; 6]));
    let a22 = g.constant(f32t(&[2, 2], &[0.0; 4]));
    let v = g.constant(f32t(&[3], &[0.0; 3]));
    let b3 = g.constant(f32t(&[2, 2, 3], &[0.0; 12]));
    let d = g.constant(f64t(&[3, 2], &[0.0; 6]));
    let bo = g.constant(boolt(&[2, 2], &[true; 4]));

    let e = g.matmul(a23, a22).unwrap_err();
    assert!(
        matches!(e.root(), Error::Shape { op, msg } if op == "matmul" && msg.contains("[2,3]") && msg.contains("[2,2]")),
        "{e}"
    );
    let e = g.matmul(b3, a23).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "matmul"), "{e}");
    let e = g.matmul(a23, d).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::F64, .. } if op == "matmul"), "{e}");
    let e = g.matmul(bo, bo).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::Bool, .. } if op == "matmul"), "{e}");
    let e = g.batch_matmul(v, a23).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, msg } if op == "batch_matmul" && msg.contains("expand_dims")), "{e}");
    let e = g.batch_matmul_t(b3, b3, false, false).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "batch_matmul"), "{e}");
    assert!(g.batch_matmul_t(b3, b3, false, true).is_ok());
    // Batch dims that do not broadcast: [2,1,2,3] x [3,2,3,1].
    let x = g.constant(f32t(&[2, 1, 2, 3], &[0.0; 12]));
    let y = g.constant(f32t(&[3, 2, 3, 1], &[0.0; 18]));
    let e = g.batch_matmul(x, y).unwrap_err();
    assert!(
        matches!(e.root(), Error::Shape { op, msg } if op == "batch_matmul" && msg.contains("[2,1,2,3]") && msg.contains("[3,2,3,1]")),
        "{e}"
    );
}

#[test]
fn linear_display() {
    let mut g = Graph::new();
    let a = g.constant(f32t(&[2, 2], &[0.0; 4]));
    let y = g.matmul_t(a, a, true, false).unwrap();
    let s = format!("{g}");
    assert!(s.contains("matmul{transpose_a=true, transpose_b=false}"), "{s}");
    let _ = y;
}

/// Hand-run timing: `cargo test --release --test main ops::linear::matmul_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn matmul_timing() {
    use std::time::Instant;
    let (m, k, n) = (4096, 768, 768);
    let a = Tensor::randn(&[m, k], 1).unwrap();
    let b = Tensor::randn(&[k, n], 2).unwrap();
    let mut g = Graph::new();
    let x = g.input("a", DType::F32, [m, k]);
    let y = g.constant(b.clone());
    let z = g.matmul(x, y).unwrap();
    let mut sess = session(&g, &[z]).unwrap();
    let (av, bv) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    let mut c = vec![0f32; m * n];
    let reps = 20;
    let best = |f: &mut dyn FnMut()| {
        f();
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let direct = best(&mut || {
        faer::linalg::matmul::matmul(
            faer::MatMut::from_row_major_slice_mut(&mut c, m, n),
            faer::Accum::Replace,
            faer::MatRef::from_row_major_slice(&av, m, k),
            faer::MatRef::from_row_major_slice(&bv, k, n),
            1.0f32,
            faer::Par::rayon(0),
        )
    });
    let op = best(&mut || {
        sess.run(&[(x, a.clone())]).unwrap();
    });
    let gf = 2.0 * (m * k * n) as f64 / 1e9;
    println!("faer direct: {:.2} ms ({:.1} GFLOP/s)", direct * 1e3, gf / direct);
    println!("matmul op:   {:.2} ms ({:.1} GFLOP/s), ratio {:.3}", op * 1e3, gf / op, direct / op);
}

#[test]
fn outer_products_exact_small_and_streamed() {
    // k = 1 batch products are outer products, computed row by row in segments of one item
    // each; outputs of 64 MiB and
    // more are written with streaming stores (odd row lengths: unaligned heads and tails).
    // Each element is the one product x_i * y_j, so results are exact.
    fn check<T: pfor::tensor::Element + Copy + PartialEq + std::fmt::Debug + std::ops::Mul<Output = T>>(
        b: usize,
        m: usize,
        n: usize,
        dt: DType,
    ) {
        let (x, y) =
            (Tensor::randn_f64(&[b, m, 1], 1).unwrap().cast(dt), Tensor::randn_f64(&[b, 1, n], 2).unwrap().cast(dt));
        for adj_a in [false, true] {
            let xa = if adj_a {
                x.to_array::<T>().unwrap().into_shape_with_order(vec![b, 1, m]).unwrap()
            } else {
                x.to_array::<T>().unwrap()
            };
            let mut g = Graph::new();
            let (a, c) = (g.constant(Tensor::from_array(xa)), g.constant(y.clone()));
            let p = g.batch_matmul_t(a, c, adj_a, false).unwrap();
            let got = session(&g, &[p]).unwrap().run(&[]).unwrap().remove(0).to_array::<T>().unwrap();
            assert_eq!(got.shape(), &[b, m, n]);
            let (xv, yv) = (x.to_array::<T>().unwrap(), y.to_array::<T>().unwrap());
            for ((i, r, j), &v) in got.indexed_iter().map(|(ix, v)| ((ix[0], ix[1], ix[2]), v)) {
                assert_eq!(v, xv[[i, r, 0]] * yv[[i, 0, j]], "{dt} [{b},{m},{n}] adj_a={adj_a} at ({i},{r},{j})");
            }
        }
    }
    check::<f32>(3, 5, 7, DType::F32);
    // short rows: parallel chunks of rows that cross item boundaries (W4's last dense layer)
    check::<f32>(128, 1024, 10, DType::F32);
    check::<f64>(7, 333, 3, DType::F64);
    check::<f32>(4, 2049, 2053, DType::F32); // 67.3 MB
    check::<f64>(2, 2049, 2053, DType::F64); // 67.3 MB
}

/// numpy `matmul` the slow way: promote rank-1 operands, then a loop of 2-D products over
/// the broadcast batch, then drop the promoted dims.
fn loop_matmul(a: &Tensor, b: &Tensor) -> Tensor {
    let (mut sa, mut sb) = (a.shape().to_vec(), b.shape().to_vec());
    let (va, vb) = (sa.len() == 1, sb.len() == 1);
    if va {
        sa.insert(0, 1);
    }
    if vb {
        sb.push(1);
    }
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k, n) = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
    let r = ra.max(rb) - 2;
    let pad = |s: &[usize]| -> Vec<usize> {
        std::iter::repeat_n(1, r + 2 - s.len()).chain(s[..s.len() - 2].iter().copied()).collect()
    };
    let (ba, bb) = (pad(&sa), pad(&sb));
    let batch: Vec<usize> = ba.iter().zip(&bb).map(|(&x, &y)| x.max(y)).collect();
    let (xa, xb) = (a.to_f64_vec(), b.to_f64_vec());
    let flat =
        |bs: &[usize], idx: &[usize]| idx.iter().zip(bs).fold(0, |acc, (&i, &d)| acc * d + if d == 1 { 0 } else { i });
    let mut out = Vec::new();
    for t in 0..batch.iter().product::<usize>() {
        let mut idx = vec![0; r];
        let mut rest = t;
        for d in (0..r).rev() {
            idx[d] = rest % batch[d];
            rest /= batch[d];
        }
        let (oa, ob) = (flat(&ba, &idx) * m * k, flat(&bb, &idx) * k * n);
        for i in 0..m {
            for j in 0..n {
                out.push((0..k).map(|l| xa[oa + i * k + l] * xb[ob + l * n + j]).sum::<f64>());
            }
        }
    }
    let mut shape = batch;
    if !va {
        shape.push(m);
    }
    if !vb {
        shape.push(n);
    }
    f64t(&shape, &out)
}

#[test]
fn matmul_of_any_rank_matches_a_loop_of_2d_products() {
    let cases: [(&[usize], &[usize]); 10] = [
        (&[3], &[3]),
        (&[3], &[3, 4]),
        (&[2, 3], &[3]),
        (&[2, 3], &[3, 4]),
        (&[5, 2, 3], &[3, 4]),
        (&[2, 3], &[5, 3, 4]),
        (&[5, 1, 2, 3], &[4, 3, 2]),
        (&[3], &[5, 3, 4]),
        (&[5, 2, 3], &[3]),
        (&[2, 1, 2, 3], &[1, 6, 3, 1]),
    ];
    for (i, (sa, sb)) in cases.into_iter().enumerate() {
        let a = Tensor::randn_f64(sa, 2 * i as u64).unwrap();
        let b = Tensor::randn_f64(sb, 2 * i as u64 + 1).unwrap();
        let got = apply2(a.clone(), b.clone(), |g, x, y| g.matmul(x, y));
        assert_close(&got, &loop_matmul(&a, &b), 1e-12);
    }
    // transpose flags act on the last two dims of a batch; a vector ignores its flag
    let a = Tensor::randn_f64(&[4, 3, 2], 30).unwrap();
    let b = Tensor::randn_f64(&[3], 31).unwrap();
    let got = apply2(a.clone(), b.clone(), |g, x, y| g.matmul_t(x, y, true, true));
    let at = apply1(a, |g, x| g.transpose(x, &[0, 2, 1]));
    assert_close(&got, &loop_matmul(&at, &b), 1e-12);
}

#[test]
fn matmul_of_any_rank_errors_name_the_shapes() {
    let mut g = Graph::new();
    let s = g.input("s", DType::F64, [0usize; 0]);
    let v = g.input("v", DType::F64, [3]);
    let w = g.input("w", DType::F64, [2, 4, 5]);
    let e = g.matmul(s, v).unwrap_err().to_string();
    assert!(e.contains("matmul") && e.contains("rank >= 1"), "{e}");
    let e = g.matmul(v, w).unwrap_err().to_string();
    assert!(e.contains("matmul") && e.contains("[3]") && e.contains("[2,4,5]"), "{e}");
}
