//! W8: one DP-SGD step on the MNIST CNN: pfor with the product rewrites, pfor with the
//! per-example gradients materialized, and the loop.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::{W8Mode, w8};

fn bench(c: &mut Criterion) {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator().expect("mallopt");
    let mut group = c.benchmark_group("w8_dpsgd_step");
    group.sample_size(10);
    for n in [32usize, 128, 512] {
        group.throughput(Throughput::Elements(n as u64));
        for mode in W8Mode::ALL {
            let mut w = w8(n, mode).expect("build");
            group.bench_function(format!("{}/{n}", mode.name()), |b| b.iter(|| w.run()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
