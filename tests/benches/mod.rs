//! Tests of the benchmark tooling that ships with the repository (benches/, examples/bench_report).

mod decisions;
mod peerlib;
mod peers;
mod w8;
