//! W3: variable-length LSTM, pfor (Subset / Mask) vs loop vs hand-padded.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::{W3Mode, w3};

fn bench(c: &mut Criterion) {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator().expect("mallopt");
    let mut group = c.benchmark_group("w3_lstm");
    group.sample_size(10);
    for n in [1usize, 16, 128, 512] {
        for mode in W3Mode::ALL {
            let mut w = w3(n, mode).expect("build");
            group.throughput(Throughput::Elements(w.units as u64));
            group.bench_function(format!("{}/{n}", mode.name()), |b| b.iter(|| w.run()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
