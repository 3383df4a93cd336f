//! A session reads a constant right operand of `matmul` from a row-major copy of `op(W)`
//! made at compile time (`exec::pretranspose`): the step's transpose flag goes off, the
//! copy is shared, the original constant stays only while something else reads it, and
//! results are those of the same graph with `W` fed as an input.

use crate::common::*;
use pfor::api::{jacobian, jacobian_loop};
use pfor::prelude::*;

/// `(op, output shape)` of every step a profiled run of `fetches` executed.
fn steps(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> (Vec<Tensor>, Vec<(String, Vec<usize>)>) {
    let opts = ExecOptions { profile: true, ..ExecOptions::default() };
    let mut s = Session::with_options(g, fetches, opts).unwrap();
    let out = s.run(feeds).unwrap();
    let ran = s.profile().entries().into_iter().map(|e| (e.kind.clone(), e.output_shapes[0].clone())).collect();
    (out, ran)
}

/// The op strings of the profiled matmul steps of `fetches`.
fn matmul_ops(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Vec<String> {
    let opts = ExecOptions { profile: true, ..ExecOptions::default() };
    let mut s = Session::with_options(g, fetches, opts).unwrap();
    s.run(feeds).unwrap();
    s.profile().entries().into_iter().filter(|e| e.kind == "matmul").map(|e| e.op.clone()).collect()
}

fn count(ran: &[(String, Vec<usize>)], kind: &str, shape: &[usize]) -> usize {
    ran.iter().filter(|(k, s)| k == kind && s == shape).count()
}

/// `[a·Wᵀ, exp(a)·Wᵀ, extra(W)]` for `W` `[4, 3]` a constant or an input; `extra` reads
/// `W` as it is, with a fed value (`sum(W · sum(a))`: not folded at compile time).
fn two_readers(w_const: bool, extra: bool) -> (Graph, Vec<ValueId>, Vec<(ValueId, Tensor)>) {
    let wv = Tensor::randn_f64(&[4, 3], 1).unwrap();
    let av = Tensor::randn_f64(&[2, 3], 2).unwrap();
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [2, 3]);
    let w = if w_const { g.constant(wv.clone()) } else { g.input("w", DType::F64, [4, 3]) };
    let y1 = g.matmul_t(a, w, false, true).unwrap();
    let ea = g.exp(a).unwrap();
    let y2 = g.matmul_t(ea, w, false, true).unwrap();
    let mut fetches = vec![y1, y2];
    if extra {
        let s = g.sum_all(a).unwrap();
        let ws = g.mul(w, s).unwrap();
        fetches.push(g.sum_all(ws).unwrap());
    }
    let mut feeds = vec![(a, av)];
    if !w_const {
        feeds.push((w, wv));
    }
    (g, fetches, feeds)
}

#[test]
fn a_constant_read_transposed_is_read_from_one_shared_row_major_copy() {
    for extra in [false, true] {
        let (g, fetches, feeds) = two_readers(true, extra);
        let (got, ran) = steps(&g, &fetches, &feeds);
        assert_eq!(matmul_ops(&g, &fetches, &feeds), vec!["matmul{transpose_a=false, transpose_b=false}"; 2]);
        // one copy [3, 4]; the original [4, 3] only while `sum(W)` reads it
        assert_eq!(count(&ran, "const", &[3, 4]), 1, "{ran:?}");
        assert_eq!(count(&ran, "const", &[4, 3]), extra as usize, "{ran:?}");
        let (gi, fi, feeds_i) = two_readers(false, extra);
        let want = run_once(&gi, &fi, &feeds_i).unwrap();
        for (a, b) in got.iter().zip(&want) {
            assert_close(a, b, 1e-12);
        }
    }
}

#[test]
fn row_major_constants_input_weights_and_one_row_products_are_left_alone() {
    // (rows of a, W a constant, read transposed): matmul(a, W) already reads W row-major;
    // an input W is unknown at compile time; a one-row product reads Wᵀ as dot products.
    for (rows, w_const, tb) in [(2, true, false), (2, false, true), (1, true, true)] {
        let mut g = Graph::new();
        let a = g.input("a", DType::F64, [rows, 3]);
        let ws = if tb { [4, 3] } else { [3, 4] };
        let wv = Tensor::randn_f64(&ws, 3).unwrap();
        let w = if w_const { g.constant(wv.clone()) } else { g.input("w", DType::F64, ws) };
        let y = g.matmul_t(a, w, false, tb).unwrap();
        let mut feeds = vec![(a, Tensor::randn_f64(&[rows, 3], 4).unwrap())];
        if !w_const {
            feeds.push((w, wv));
        }
        assert_eq!(matmul_ops(&g, &[y], &feeds), vec![format!("matmul{{transpose_a=false, transpose_b={tb}}}")]);
        let (_, ran) = steps(&g, &[y], &feeds);
        assert_eq!(count(&ran, "const", &ws), usize::from(w_const), "{ran:?}");
        assert_eq!(ran.iter().filter(|(k, _)| k == "const").count(), usize::from(w_const), "{ran:?}");
    }
}

#[test]
fn a_jacobian_through_constant_weights_reads_every_weight_row_major() {
    // The W5 pattern: row i of d tanh(x W1) W2 / dx is e_i W2ᵀ diag(..) W1ᵀ; the rules read
    // the weights with transpose_b, the session from row-major copies.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [1, 4]);
    let w1 = g.constant(Tensor::randn_f64(&[4, 6], 6).unwrap());
    let w2 = g.constant(Tensor::randn_f64(&[6, 3], 7).unwrap());
    let h = g.matmul(x, w1).unwrap();
    let h = g.tanh(h).unwrap();
    let y = g.matmul(h, w2).unwrap();
    let y = g.reshape(y, &[3]).unwrap();
    let j = jacobian(&mut g, y, x).unwrap();
    let jl = jacobian_loop(&mut g, y, x).unwrap();
    let feeds = [(x, Tensor::randn_f64(&[1, 4], 8).unwrap())];
    let ops = matmul_ops(&g, &[j], &feeds);
    assert!(!ops.is_empty());
    assert!(ops.iter().all(|o| o.ends_with("transpose_b=false}")), "{ops:?}");
    let v = run_once(&g, &[j, jl], &feeds).unwrap();
    assert_close(&v[0], &v[1], 1e-12);
}

/// `conv2d(x, transpose(W))` for `W` `[O, C, KH, KW]` (ONNX's filter layout, transposed as
/// the importer does; the plan folds the transpose into a constant stored as a view),
/// fetching the filter too when `fetch_filter`; or with the filter fed as an input.
fn onnx_conv(fed: bool, fetch_filter: bool, k: usize) -> (Graph, Vec<ValueId>, Vec<(ValueId, Tensor)>) {
    let wv = Tensor::randn_f64(&[4, 3, k, k], 11).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2, 6, 5, 3]);
    let mut feeds = vec![(x, Tensor::randn_f64(&[2, 6, 5, 3], 12).unwrap())];
    let f = if fed {
        let f = g.input("f", DType::F64, [k, k, 3, 4]);
        let mut h = Graph::new();
        let w = h.constant(wv);
        let t = h.transpose(w, &[2, 3, 1, 0]).unwrap();
        feeds.push((f, run_once(&h, &[t], &[]).unwrap().remove(0)));
        f
    } else {
        let w = g.constant(wv);
        g.transpose(w, &[2, 3, 1, 0]).unwrap()
    };
    let params = Conv2dParams { strides: [2, 1], padding: Padding::Same, ..Conv2dParams::default() };
    let y = g.conv2d(x, f, params).unwrap();
    let mut fetches = vec![y];
    if fetch_filter {
        fetches.push(f);
    }
    (g, fetches, feeds)
}

#[test]
fn conv_filters_stored_as_views_are_read_from_a_row_major_copy() {
    for k in [1, 3] {
        let (gi, fi, feeds_i) = onnx_conv(true, false, k);
        let want = run_once(&gi, &fi, &feeds_i).unwrap().remove(0);
        for fetch_filter in [false, true] {
            let (g, fetches, feeds) = onnx_conv(false, fetch_filter, k);
            let (got, ran) = steps(&g, &fetches, &feeds);
            assert_close(&got[0], &want, 1e-12);
            // the transpose is folded at compile time into one row-major constant (the fold
            // stores standard layout; a view left by it would get a row-major copy here): no
            // per-run transpose, and one filter constant whether or not it is also fetched
            assert_eq!(count(&ran, "const", &[k, k, 3, 4]), 1, "k={k}: {ran:?}");
            assert!(ran.iter().all(|(op, _)| op != "transpose"), "k={k}: {ran:?}");
            let off = ExecOptions { profile: true, pretranspose: false, ..ExecOptions::default() };
            let mut s = Session::with_options(&g, &fetches, off).unwrap();
            assert_close(&s.run(&feeds).unwrap()[0], &want, 1e-12);
            let consts = s.profile().entries().into_iter().filter(|e| e.kind == "const").count();
            assert_eq!(consts, 1, "k={k}, no pretranspose");
        }
    }
}

#[test]
fn a_transpose_of_a_constant_filter_too_large_to_fold_runs_once_at_compile_time() {
    // [O, C, 1, 1] with more elements than the fold pass folds (`MAX_ELEMENTS`)
    let (c, o) = (1024, 1025);
    assert!(c * o > 1 << 20, "more than the fold pass folds");
    let wv = Tensor::randn(&[o, c, 1, 1], 13).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1, 2, 2, c]);
    let w = g.constant(wv.clone());
    let f = g.transpose(w, &[2, 3, 1, 0]).unwrap();
    let params = Conv2dParams { strides: [2, 2], ..Conv2dParams::default() };
    let y = g.conv2d(x, f, params).unwrap();
    let xv = Tensor::randn(&[1, 2, 2, c], 14).unwrap();
    let (got, ran) = steps(&g, &[y], &[(x, xv.clone())]);
    assert_eq!(count(&ran, "transpose", &[1, 1, c, o]), 0, "{ran:?}");
    assert_eq!(count(&ran, "const", &[1, 1, c, o]), 1, "{ran:?}");
    // y = x[0, 0, 0, :] · W[:, :, 0, 0]ᵀ
    let (xs, ws) = (xv.to_vec::<f32>().unwrap(), wv.to_vec::<f32>().unwrap());
    let want: Vec<f32> = (0..o).map(|j| (0..c).map(|i| xs[i] * ws[j * c + i]).sum()).collect();
    assert_close(&got[0], &Tensor::from_vec(&[1, 1, 1, o], want).unwrap(), 1e-3);
}
