//! Auto-batching a doubly-recursive fibonacci over a batch of inputs.
//!
//! The program is written once, for ONE logical thread, with the `ProgramBuilder` DSL; the
//! stackless executor and the full VM run it for a whole batch, batching every primitive
//! operation across the threads that reach it together. Prints the results and fib
//! calls/s of the stackless executor, the VM and the unbatched reference loop, and the
//! verdict: every interpreter's results against fib computed directly (the process exits
//! non-zero on a mismatch).
//!
//! Run with `cargo run --release --example recursive_fib [batch]`.

use std::time::Instant;

use pfor::autobatch::{ExecConfig, Program, ProgramBuilder, VarType, reference, stackless, vm};
use pfor::ops::BinaryKind;
use pfor::prelude::*;
use pfor::tensor::Verdict;

/// Doubly-recursive fibonacci as in TFP's frontend test:
/// `fib(n) = if n <= 1 { 1 } else { fib(n - 2) + fib(n - 1) }`, with the builder's
/// arithmetic and comparison helpers (`le`, `sub`, `add`: one batched primop each).
pub fn fib_program() -> Result<Program> {
    let mut pb = ProgramBuilder::new();
    let fib = pb.declare("fib", &["n"], &["ans"])?;
    pb.define(fib, |f| {
        let n = f.param(0)?;
        let ans = f.result(0)?;
        let base = f.le(n, 1i64)?;
        f.if_else(
            base,
            |f| {
                f.constant_into(ans, 1i64)?;
                f.ret(&[ans])
            },
            |f| {
                let left = f.local("left");
                let nm2 = f.sub(n, 2i64)?;
                f.call_into(fib, &[nm2], &[left])?;
                let nm1 = f.sub(n, 1i64)?;
                let right = f.call(fib, &[nm1])?[0];
                f.binary_into(BinaryKind::Add, left, right, ans)?;
                f.ret(&[ans])
            },
        )
    })?;
    pb.build(fib, &[VarType::scalar(DType::I64)])
}

/// Invocations of `fib(n)` in the doubly recursive definition.
pub fn fib_calls(n: i64) -> u64 {
    if n <= 1 { 1 } else { 1 + fib_calls(n - 1) + fib_calls(n - 2) }
}

/// fib(n) directly.
pub fn fib_ref(n: i64) -> i64 {
    let (mut a, mut b) = (1i64, 1i64);
    for _ in 0..n.max(0) {
        (a, b) = (b, a + b);
    }
    a
}

/// A batch of n ~ U{3..12} (seeded by the batch size) and its total number of fib calls.
pub fn fib_inputs(batch: usize) -> (Tensor, u64) {
    let t = Tensor::rand_uniform(DType::I64, &[batch], 3.0, 13.0, batch as u64).expect("a benchmark input shape");
    let calls = t.to_vec::<i64>().expect("i64").iter().map(|&n| fib_calls(n)).sum();
    (t, calls)
}

fn rate(calls: u64, mut f: impl FnMut() -> Result<Vec<Tensor>>) -> Result<(f64, Vec<Tensor>)> {
    let mut out = f()?; // warm-up (plan compilation)
    let start = Instant::now();
    let mut reps = 0u32;
    while reps < 3 || start.elapsed().as_secs_f64() < 1.0 {
        out = f()?;
        reps += 1;
    }
    Ok((calls as f64 * reps as f64 / start.elapsed().as_secs_f64(), out))
}

fn main() -> Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    let batch: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let program = fib_program()?;
    println!("{program}");
    let (n, calls) = fib_inputs(batch);
    let ns = n.to_vec::<i64>()?;
    println!("batch {batch}: n ~ U{{3..12}}, {calls} fib calls in total");

    let cfg = ExecConfig::default();
    let stackless = stackless::Executor::new(&program)?;
    let machine = vm::Vm::new(&program)?;
    let inputs = [n];
    let (r_sl, out_sl) = rate(calls, || Ok(stackless.run(&inputs, &cfg)?.outputs))?;
    let (r_vm, out_vm) = rate(calls, || Ok(machine.run(&inputs, &cfg)?.outputs))?;
    let (r_loop, out_loop) = rate(calls, || reference::execute(&program, &inputs))?;

    let want: Vec<i64> = ns.iter().map(|&n| fib_ref(n)).collect();
    let want_t = Tensor::vec1(&want);
    let mut verdict = Verdict { max_diff: 0.0, tol: 0.0 };
    for (name, out) in [("stackless", &out_sl), ("vm", &out_vm), ("unbatched loop", &out_loop)] {
        let v = Verdict::compare(out, std::slice::from_ref(&want_t), 0.0);
        println!("{name}: max |result - fib| = {}", v.max_diff);
        verdict.max_diff = verdict.max_diff.max(v.max_diff);
    }
    let shown = ns.len().min(8);
    println!("fib({:?}) = {:?}{}", &ns[..shown], &want[..shown], if ns.len() > shown { " ..." } else { "" });

    let stats = machine.run(&inputs, &cfg)?.stats;
    let sl_stats = stackless.run(&inputs, &cfg)?.stats;
    // the batched runs made exactly the program's calls (the per-function call counters)
    println!("fib calls: vm {} / stackless {} / the recursion {calls}", stats.calls("fib"), sl_stats.calls("fib"));
    if stats.calls("fib") != calls || sl_stats.calls("fib") != calls {
        verdict.max_diff = f64::INFINITY;
    }
    println!(
        "add runs: vm {} / stackless {}; blocks: vm {} / stackless {}",
        stats.runs("add"),
        sl_stats.runs("add"),
        stats.blocks(),
        sl_stats.blocks()
    );
    println!("stackless        {:>12.0} calls/s ({:.1}x loop)", r_sl, r_sl / r_loop);
    println!("vm               {:>12.0} calls/s ({:.1}x loop)", r_vm, r_vm / r_loop);
    println!("unbatched loop   {:>12.0} calls/s", r_loop);
    println!("{verdict}");
    verdict.into_result()
}
