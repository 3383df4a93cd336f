//! Profiling harness for W7 (NUTS-like doubling tree): prints leaf steps/s and execution
//! statistics of the VM and the stackless executor per batch size.
//!
//! Run with `cargo run --release --example w7_profile [vm|stackless|both|all|print] [batch...]`
//! (`all` adds the unbatched loop; `print` shows the lowered program).

use std::time::Instant;

use pfor::autobatch::{ExecConfig, reference, stackless, vm};
use pfor::prelude::*;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "../autobatch/mod.rs"]
mod workloads;
use workloads::{NUTS_DIM, nuts_inputs, nuts_program};

/// CPU time of this thread in seconds (Linux; 0 elsewhere), less sensitive than wall time
/// to other processes on a shared machine. Run with `RAYON_NUM_THREADS=1` so that every
/// GEMM runs on this thread.
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<f64>().ok()))
        .map_or(0.0, |ns| ns * 1e-9)
}

fn main() -> Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().cloned().unwrap_or_else(|| "both".into());
    let batches: Vec<usize> = args.iter().skip(1).filter_map(|a| a.parse().ok()).collect();
    let batches = if batches.is_empty() { vec![1, 16, 128, 512] } else { batches };
    // A fixed number of timed runs (for per-run counters such as `perf stat` page faults).
    let fixed: Option<u32> = std::env::var("W7_REPS").ok().and_then(|r| r.parse().ok());
    let more = |reps: u32, secs: f64| fixed.map_or(reps < 3 || secs < 1.0, |n| reps < n);
    let program = nuts_program(NUTS_DIM)?;
    let cfg = ExecConfig::default();
    let machine = vm::Vm::new(&program)?;
    if which == "print" {
        println!("{}", machine.lowered());
        return Ok(());
    }
    let sl = stackless::Executor::new(&program)?;
    let loop_too = which == "all";
    for batch in batches {
        let (inputs, steps) = nuts_inputs(batch, NUTS_DIM);
        for name in ["vm", "stackless"] {
            if !matches!(which.as_str(), "both" | "all") && which != name {
                continue;
            }
            let run = || if name == "vm" { machine.run(&inputs, &cfg) } else { sl.run(&inputs, &cfg) };
            let ex = run()?;
            let (start, cpu0) = (Instant::now(), thread_cpu());
            let mut reps = 0u32;
            while more(reps, start.elapsed().as_secs_f64()) {
                run()?;
                reps += 1;
            }
            let s = start.elapsed().as_secs_f64() / reps as f64;
            let cpu = (thread_cpu() - cpu0) / reps as f64;
            let st = &ex.stats;
            println!(
                "{name:9} batch {batch:4}: {:>9.0} leaf steps/s wall, {:>9.0} per cpu-s ({:.2} ms/run) blocks {} (dense {} masked {} gather {}) leapfrog runs {} rows {}",
                steps as f64 / s,
                steps as f64 / cpu,
                s * 1e3,
                st.blocks(),
                st.dense_blocks,
                st.masked_blocks,
                st.gather_blocks,
                st.runs("leapfrog"),
                st.rows_computed
            );
        }
        if loop_too {
            reference::execute(&program, &inputs)?;
            let (start, cpu0) = (Instant::now(), thread_cpu());
            let mut reps = 0u32;
            while reps < 2 || start.elapsed().as_secs_f64() < 1.0 {
                reference::execute(&program, &inputs)?;
                reps += 1;
            }
            let s = start.elapsed().as_secs_f64() / reps as f64;
            let cpu = (thread_cpu() - cpu0) / reps as f64;
            println!(
                "loop      batch {batch:4}: {:>9.0} leaf steps/s wall, {:>9.0} per cpu-s ({:.2} ms/run)",
                steps as f64 / s,
                steps as f64 / cpu,
                s * 1e3
            );
        }
    }
    Ok(())
}
