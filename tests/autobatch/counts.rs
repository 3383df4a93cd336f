//! Primop execution counts: the VM batches across recursion depths, the stackless executor
//! only within one activation; block plans are compiled once.

use pfor::autobatch::{ExecConfig, stackless, vm};
use pfor::prelude::*;

use super::programs::*;
use crate::common::i64t;

/// Internal nodes of fib(n)'s call tree: how often a lone thread runs the add.
fn adds_alone(n: i64) -> u64 {
    if n <= 1 { 0 } else { 1 + adds_alone(n - 1) + adds_alone(n - 2) }
}

#[test]
fn vm_shares_adds_across_depths() {
    let p = fibonacci();
    let machine = vm::Vm::new(&p).unwrap();
    let cfg = ExecConfig::default();
    let batch = [3i64, 7, 4, 5];
    let vm_run = machine.run(&[i64t(&[4], &batch)], &cfg).unwrap();
    assert_eq!(vm_run.outputs[0].to_vec::<i64>().unwrap(), vec![3, 21, 5, 8]);
    let solo: Vec<u64> =
        batch.iter().map(|&n| machine.run(&[i64t(&[1], &[n])], &cfg).unwrap().stats.runs("add")).collect();
    assert_eq!(solo, batch.iter().map(|&n| adds_alone(n)).collect::<Vec<_>>());
    let deepest = *solo.iter().max().unwrap();
    let total: u64 = solo.iter().sum();
    let sl = stackless::execute_with(&p, &[i64t(&[4], &batch)], &cfg).unwrap();
    println!(
        "fib {batch:?}: add runs VM {} / stackless {} / deepest thread alone {deepest} / sum of threads alone {total}",
        vm_run.stats.runs("add"),
        sl.stats.runs("add")
    );
    // Every other thread's adds ride along with the deepest thread's.
    assert!(vm_run.stats.runs("add") <= deepest, "{:?}", vm_run.stats);
    assert!(sl.stats.runs("add") < total);
}

#[test]
fn vm_shares_leaves_reached_at_different_depths() {
    // Threads reach the leaf at depths 1, 4 and 7: the stackless executor runs the leaf once
    // per activation (3 times), the VM once.
    let p = descend();
    let inputs = [i64t(&[3], &[0, 3, 6]), Tensor::vec1(&[1.0f64, 2.0, 3.0])];
    let v = vm::execute_with(&p, &inputs, &ExecConfig::default()).unwrap();
    let s = stackless::execute_with(&p, &inputs, &ExecConfig::default()).unwrap();
    assert_eq!(v.outputs, s.outputs);
    assert_eq!(v.outputs[0], Tensor::vec1(&[3.0f64, 5.0, 7.0]));
    assert_eq!((v.stats.runs("leaf"), s.stats.runs("leaf")), (1, 3));
    assert_eq!((v.stats.max_depth, s.stats.max_depth), (7, 7));
}

#[test]
fn block_plans_are_compiled_once_and_cached() {
    let p = fibonacci();
    let exec = stackless::Executor::new(&p).unwrap();
    let x = [i64t(&[3], &[6, 2, 9])];
    let first = exec.run(&x, &ExecConfig::default()).unwrap();
    // main's block + fib's entry/then/else: 4 blocks, however many activations ran them.
    assert_eq!(first.stats.plans_compiled, 4);
    assert!(first.stats.blocks() > 20);
    let again = exec.run(&x, &ExecConfig::default()).unwrap();
    assert_eq!(again.stats.plans_compiled, 0);
    assert_eq!(again.outputs, first.outputs);
    let machine = vm::Vm::new(&p).unwrap();
    let r = machine.run(&x, &ExecConfig::default()).unwrap();
    assert_eq!(r.stats.plans_compiled, machine.lowered().graph.blocks.len());
    assert_eq!(machine.run(&x, &ExecConfig::default()).unwrap().stats.plans_compiled, 0);
}

#[test]
fn gather_mode_computes_only_active_rows() {
    use pfor::autobatch::ExecMode;
    let p = descend();
    let inputs = [i64t(&[8], &[0, 0, 0, 0, 0, 0, 0, 9]), Tensor::vec1(&[1.0f64; 8])];
    let run = |mode| vm::execute_with(&p, &inputs, &ExecConfig { mode, ..ExecConfig::default() }).unwrap();
    let (g, m) = (run(ExecMode::Gather), run(ExecMode::Masked));
    assert_eq!(g.outputs, m.outputs);
    assert!(g.stats.gather_blocks > 0 && g.stats.masked_blocks == 0);
    assert!(m.stats.masked_blocks > 0 && m.stats.gather_blocks == 0);
    assert!(g.stats.rows_computed < m.stats.rows_computed, "{:?} vs {:?}", g.stats, m.stats);
}

// The example's fibonacci (written with the builder's arithmetic helpers), included as the
// benches include it: the test checks the program users read.
#[allow(dead_code)]
#[path = "../../examples/recursive_fib.rs"]
mod fib_example;

#[test]
fn call_counters_equal_the_recursions_calls() {
    let batch = [3i64, 7, 4, 5, 0, 9];
    let want: u64 = batch.iter().map(|&n| fib_example::fib_calls(n)).sum();
    let x = [i64t(&[batch.len()], &batch)];
    let cfg = ExecConfig::default();
    for p in [fib_example::fib_program().unwrap(), fibonacci()] {
        let v = vm::execute_with(&p, &x, &cfg).unwrap();
        let s = stackless::execute_with(&p, &x, &cfg).unwrap();
        assert_eq!(v.outputs[0].to_vec::<i64>().unwrap(), batch.map(fib_ref).to_vec());
        assert_eq!(v.outputs, s.outputs);
        assert_eq!((v.stats.calls("fib"), s.stats.calls("fib")), (want, want), "{:?}", v.stats.calls);
        // one counter per function: main is not a function, fib is the only one
        assert_eq!(v.stats.calls.keys().collect::<Vec<_>>(), vec!["fib"]);
    }
    // mutual recursion: is_even(n) and is_odd(n - 1) alternate down to 0
    let p = even_odd();
    let n = [4i64, 1, 0];
    let v = vm::execute_with(&p, &[i64t(&[3], &n)], &cfg).unwrap();
    let s = stackless::execute_with(&p, &[i64t(&[3], &n)], &cfg).unwrap();
    for st in [&v.stats, &s.stats] {
        // is_even runs at n, n-2, …; is_odd at n-1, n-3, …: (n / 2 + 1) + (n + 1) / 2 calls
        assert_eq!(st.calls("is_even"), 3 + 1 + 1, "{:?}", st.calls);
        assert_eq!(st.calls("is_odd"), 2 + 1, "{:?}", st.calls);
    }
}

#[test]
fn arithmetic_helpers_match_closures() {
    use pfor::autobatch::{ProgramBuilder, VarType};
    // f(x, y) = (x * y - 1.5, x < y, x == 2) per thread with event shapes [] and [3]
    let mut pb = ProgramBuilder::new();
    let f = pb
        .function("f", &["x", "y"], &["p", "lt", "eq"], |f| {
            let (x, y) = (f.param(0)?, f.param(1)?);
            let m = f.mul(x, y)?;
            let p = f.sub(m, 1.5f64)?;
            let lt = f.lt(x, y)?;
            let eq = f.eq(x, 2.0f64)?;
            f.ret(&[p, lt, eq])
        })
        .unwrap();
    let p = pb.build(f, &[VarType::scalar(DType::F64), VarType::new(DType::F64, &[3])]).unwrap();
    let x = Tensor::vec1(&[1.0f64, 2.0]);
    let y = Tensor::from_vec(&[2, 3], vec![0.0f64, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let out = vm::execute(&p, &[x, y]).unwrap();
    assert_eq!(out[0], Tensor::from_vec(&[2, 3], vec![-1.5f64, -0.5, 0.5, 4.5, 6.5, 8.5]).unwrap());
    assert_eq!(out[1], Tensor::from_vec(&[2, 3], vec![false, false, true, true, true, true]).unwrap());
    assert_eq!(out[2], Tensor::vec1(&[false, true]));
    // a dtype mismatch is an error naming the op
    let mut pb = ProgramBuilder::new();
    let g = pb.function("g", &["x"], &["y"], |f| {
        let y = f.add(f.param(0)?, 1i64)?;
        f.ret(&[y])
    });
    let e = g.and_then(|g| pb.build(g, &[VarType::scalar(DType::F64)])).unwrap_err().to_string();
    assert!(e.contains("add"), "{e}");
}
