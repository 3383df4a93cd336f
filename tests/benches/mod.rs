//! Tests of the benchmark tooling that ships with the repository (benches/, examples/bench_report).

mod decisions;
mod one_row_plans;
mod peerlib;
mod peers;
mod w8;
