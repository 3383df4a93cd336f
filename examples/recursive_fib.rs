//! Auto-batching a doubly-recursive fibonacci over a batch of inputs.
//!
//! The program is written once, for ONE logical thread, with the `ProgramBuilder` DSL; the
//! stackless executor and the full VM run it for a whole batch, batching every primitive
//! operation across the threads that reach it together. Prints the results and fib
//! calls/s of the stackless executor, the VM and the unbatched reference loop.
//!
//! Run with `cargo run --release --example recursive_fib [batch]`.

use std::time::Instant;

use pfor::autobatch::{ExecConfig, reference, stackless, vm};
use pfor::prelude::*;

#[path = "../benches/autobatch/mod.rs"]
mod workloads;
use workloads::{fib_inputs, fib_program, fib_ref};

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
    for (name, out) in [("stackless", &out_sl), ("vm", &out_vm), ("loop", &out_loop)] {
        let got = out[0].to_vec::<i64>()?;
        if got != want {
            return Err(Error::InvalidArgument(format!("{name} computed wrong values")));
        }
    }
    let shown = ns.len().min(8);
    println!("fib({:?}) = {:?}{}", &ns[..shown], &want[..shown], if ns.len() > shown { " ..." } else { "" });

    let stats = machine.run(&inputs, &cfg)?.stats;
    let sl_stats = stackless.run(&inputs, &cfg)?.stats;
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
    Ok(())
}
