//! The executor's cost per op (issue 22): a chain of 1,000 alternating f32[4] add/mul ops run
//! op by op and fused, for `SECS` seconds each (default 3), so that `perf record` sees only
//! the dispatch path: `cargo run --release --example dispatch_probe [-- SECS]`.
use std::time::{Duration, Instant};

#[path = "../workloads/mod.rs"]
mod workloads;

fn main() -> pfor::Result<()> {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let ops = 1000;
    for fuse in [false, true] {
        let (mut s, feeds) = workloads::tiny_chain(ops, fuse)?;
        let start = Instant::now();
        let mut best = f64::INFINITY;
        while start.elapsed() < Duration::from_secs_f64(secs) {
            let t = Instant::now();
            s.run(&feeds)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{:<9} {:6.1} ns per op (best run)", if fuse { "fused" } else { "op by op" }, best / ops as f64 * 1e9);
    }
    Ok(())
}
