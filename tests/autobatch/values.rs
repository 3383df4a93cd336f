//! Values of the classic programs, in every interpreter and execution mode.

use pfor::autobatch::{ExecConfig, ExecMode, Program, reference, stackless, vm};
use pfor::prelude::*;

use super::programs::*;
use crate::common::{boolt, i64t};

const MODES: [ExecMode; 3] = [ExecMode::Auto, ExecMode::Masked, ExecMode::Gather];

/// Run in the stackless executor and the VM in every mode, and in the reference; assert
/// all agree and return the outputs.
pub fn run_all(p: &Program, inputs: &[Tensor]) -> Vec<Tensor> {
    let want = reference::execute(p, inputs).unwrap_or_else(|e| panic!("reference: {e}\n{p}"));
    for mode in MODES {
        let cfg = ExecConfig { mode, ..ExecConfig::default() };
        let s = stackless::execute_with(p, inputs, &cfg).unwrap_or_else(|e| panic!("stackless {mode:?}: {e}\n{p}"));
        assert_eq!(s.outputs, want, "stackless {mode:?} vs reference");
        let v = vm::execute_with(p, inputs, &cfg).unwrap_or_else(|e| panic!("vm {mode:?}: {e}\n{p}"));
        assert_eq!(v.outputs, want, "vm {mode:?} vs reference");
    }
    want
}

#[test]
fn fibonacci_values() {
    let out = run_all(&fibonacci(), &[i64t(&[4], &[5, 6, 8, 9])]);
    assert_eq!(out, vec![i64t(&[4], &[8, 13, 34, 55])]);
    assert_eq!(vm::execute(&fibonacci(), &[i64t(&[4], &[5, 6, 8, 9])]).unwrap(), vec![i64t(&[4], &[8, 13, 34, 55])]);
}

#[test]
fn even_odd_values() {
    let out = run_all(&even_odd(), &[i64t(&[5], &[5, 6, 8, 9, 0])]);
    assert_eq!(out, vec![boolt(&[5], &[false, true, true, false, true])]);
}

#[test]
fn single_if_values() {
    let out = run_all(&single_if(), &[i64t(&[3], &[0, 5, -15])]);
    assert_eq!(out, vec![i64t(&[3], &[0, 2, 0])]);
}

#[test]
fn product_typed_outputs() {
    // pair(n) = (F(n), F(n-1), [F(n), F(n-1)]) with F(-1) = 0.
    let out = run_all(&fib_pair(), &[i64t(&[4], &[0, 1, 4, 7])]);
    assert_eq!(out[0], i64t(&[4], &[1, 1, 5, 21]));
    assert_eq!(out[1], i64t(&[4], &[0, 1, 3, 13]));
    let v = Tensor::from_vec(&[4, 2], vec![1.0f32, 0.0, 1.0, 1.0, 5.0, 3.0, 21.0, 13.0]).unwrap();
    assert_eq!(out[2], v);
}

#[test]
fn tail_recursion_runs_as_a_jump() {
    let p = sum_to();
    let out = run_all(&p, &[i64t(&[4], &[0, 3, 10, 100]), i64t(&[4], &[0, 1, 0, 5])]);
    assert_eq!(out, vec![i64t(&[4], &[0, 7, 55, 5055])]);
    // The self tail call does not grow any stack: depth 1 (main -> sum_to) whatever n.
    let cfg = ExecConfig { max_stack_depth: 2, ..ExecConfig::default() };
    let deep = [i64t(&[2], &[1000, 3]), i64t(&[2], &[0, 0])];
    for ex in [vm::execute_with(&p, &deep, &cfg).unwrap(), stackless::execute_with(&p, &deep, &cfg).unwrap()] {
        assert_eq!(ex.outputs, vec![i64t(&[2], &[500500, 6])]);
        assert_eq!(ex.stats.max_depth, 1);
        assert_eq!(ex.stats.runs("tailcall"), 1000);
    }
}

#[test]
fn while_loops_with_per_thread_trip_counts() {
    let xs = [1i64, 2, 3, 6, 7, 27];
    let out = run_all(&collatz(), &[i64t(&[6], &xs)]);
    let want: Vec<i64> = xs.iter().map(|&x| collatz_ref(x)).collect();
    assert_eq!(want, vec![0, 1, 7, 8, 16, 111]);
    assert_eq!(out, vec![i64t(&[6], &want)]);
}

#[test]
fn empty_batch_gives_empty_outputs() {
    for out in [
        vm::execute(&fib_pair(), &[i64t(&[0], &[])]).unwrap(),
        stackless::execute(&fib_pair(), &[i64t(&[0], &[])]).unwrap(),
        reference::execute(&fib_pair(), &[i64t(&[0], &[])]).unwrap(),
    ] {
        assert_eq!(out[0].shape(), &[0]);
        assert_eq!(out[2].shape(), &[0, 2]);
        assert_eq!(out[2].dtype(), DType::F32);
    }
}

#[test]
fn nuts_like_tree_matches_reference() {
    let dim = 5;
    let p = nuts(dim, 0.1);
    let depths = i64t(&[4], &[0, 1, 3, 2]);
    let q = Tensor::randn_f64(&[4, dim], 1).unwrap();
    let pm = Tensor::randn_f64(&[4, dim], 2).unwrap();
    let out = run_all(&p, &[depths, q.clone(), pm.clone()]);
    // Depth 0 = one leapfrog step, by hand.
    let a = a_matrix(dim);
    let (q0, p0) = (q.to_vec::<f64>().unwrap(), pm.to_vec::<f64>().unwrap());
    let g0: Vec<f64> = (0..dim).map(|i| (0..dim).map(|j| a[i * dim + j] * q0[j]).sum()).collect();
    let ph: Vec<f64> = (0..dim).map(|i| p0[i] - 0.05 * g0[i]).collect();
    let q1: Vec<f64> = (0..dim).map(|i| q0[i] + 0.1 * ph[i]).collect();
    let g1: Vec<f64> = (0..dim).map(|i| (0..dim).map(|j| a[i * dim + j] * q1[j]).sum()).collect();
    let p1: Vec<f64> = (0..dim).map(|i| ph[i] - 0.05 * g1[i]).collect();
    let got_q = out[0].index_axis0(0).unwrap().to_vec::<f64>().unwrap();
    let got_p = out[1].index_axis0(0).unwrap().to_vec::<f64>().unwrap();
    for i in 0..dim {
        assert!((got_q[i] - q1[i]).abs() < 1e-12 && (got_p[i] - p1[i]).abs() < 1e-12);
    }
    let logw0: f64 = p1.iter().map(|v| -0.5 * v * v).sum();
    assert!((out[2].to_vec::<f64>().unwrap()[0] - logw0).abs() < 1e-12);
}

#[test]
fn deep_recursion_within_the_default_limit() {
    // Depth 251 of non-tail recursion (default limit 256) on a test thread's stack.
    let p = descend();
    let inputs = [i64t(&[3], &[250, 0, 7]), Tensor::vec1(&[1.0f64, 2.0, 3.0])];
    let want = vec![Tensor::vec1(&[3.0f64, 5.0, 7.0])];
    assert_eq!(run_all(&p, &inputs), want);
    let e = vm::execute(&p, &[i64t(&[1], &[300]), Tensor::vec1(&[1.0f64])]).unwrap_err();
    assert!(matches!(e.root(), Error::RecursionLimit { limit: 256, .. }), "{e}");
    let e = stackless::execute(&p, &[i64t(&[1], &[300]), Tensor::vec1(&[1.0f64])]).unwrap_err();
    assert!(matches!(e.root(), Error::RecursionLimit { limit: 256, .. }), "{e}");
}
