//! Profiling harness for W7 (NUTS-like doubling tree): prints leaf steps/s and execution
//! statistics of the VM and the stackless executor per batch size.
//!
//! Run with `cargo run --release --example w7_profile [vm|stackless|both] [batch...]`.

use std::time::Instant;

use pfor::autobatch::{ExecConfig, stackless, vm};
use pfor::prelude::*;

#[path = "../benches/autobatch/mod.rs"]
mod workloads;
use workloads::{NUTS_DIM, nuts_inputs, nuts_program};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().cloned().unwrap_or_else(|| "both".into());
    let batches: Vec<usize> = args.iter().skip(1).filter_map(|a| a.parse().ok()).collect();
    let batches = if batches.is_empty() { vec![1, 16, 128, 512] } else { batches };
    let program = nuts_program(NUTS_DIM)?;
    let cfg = ExecConfig::default();
    let machine = vm::Vm::new(&program)?;
    if which == "print" {
        println!("{}", machine.lowered());
        return Ok(());
    }
    let sl = stackless::Executor::new(&program)?;
    for batch in batches {
        let (inputs, steps) = nuts_inputs(batch, NUTS_DIM);
        for name in ["vm", "stackless"] {
            if which != "both" && which != name {
                continue;
            }
            let run = || if name == "vm" { machine.run(&inputs, &cfg) } else { sl.run(&inputs, &cfg) };
            let ex = run()?;
            let start = Instant::now();
            let mut reps = 0u32;
            while reps < 3 || start.elapsed().as_secs_f64() < 1.0 {
                run()?;
                reps += 1;
            }
            let s = start.elapsed().as_secs_f64() / reps as f64;
            let st = &ex.stats;
            println!(
                "{name:9} batch {batch:4}: {:>10.0} leaf steps/s  ({:.2} ms/run) blocks {} (dense {} masked {} gather {}) leapfrog runs {} rows {}",
                steps as f64 / s,
                s * 1e3,
                st.blocks(),
                st.dense_blocks,
                st.masked_blocks,
                st.gather_blocks,
                st.runs("leapfrog"),
                st.rows_computed
            );
        }
    }
    Ok(())
}
