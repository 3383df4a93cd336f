//! W5: jacobian of a 10-step LSTM with a dense projection, pfor vs loop of gradients.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::{Mode, w5};

fn bench(c: &mut Criterion) {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator().expect("mallopt");
    let mut group = c.benchmark_group("w5_lstm_jacobian");
    group.sample_size(10);
    for out in [1usize, 8, 32, 128] {
        group.throughput(Throughput::Elements(out as u64));
        for mode in [Mode::Pfor, Mode::Loop] {
            let mut w = w5(out, mode).expect("build");
            group.bench_function(format!("{}/{out}", mode.name()), |b| b.iter(|| w.run()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
