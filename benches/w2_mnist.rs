//! W2: MNIST CNN inference, pfor vs loop vs hand-batched.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::{Mode, w2};

fn bench(c: &mut Criterion) {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator().expect("mallopt");
    let mut group = c.benchmark_group("w2_mnist");
    group.sample_size(10);
    for n in [1usize, 16, 128, 512] {
        group.throughput(Throughput::Elements(n as u64));
        for mode in Mode::ALL {
            let mut w = w2(n, mode).expect("build");
            group.bench_function(format!("{}/{n}", mode.name()), |b| b.iter(|| w.run()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
