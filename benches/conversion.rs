//! Conversion time: vectorizing a 1,000-node body (issue 7 target: < 10 ms).
//! The body (`workloads::convert_body`) mixes elementwise chains, matmuls with an invariant
//! weight, reductions and reshapes, so the converter dispatch of several families is exercised.
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::convert_body;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("conversion");
    group.sample_size(20);
    group.bench_function("pfor_1000_node_body", |b| b.iter(|| convert_body(1000, true).expect("pfor")));
    group.bench_function("pfor_1000_node_body_no_simplify", |b| b.iter(|| convert_body(1000, false).expect("pfor")));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
