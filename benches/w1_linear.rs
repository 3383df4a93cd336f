//! W1: linear projection `x_i[1,768] @ W[768,768]`, pfor vs loop vs hand-batched, plus
//! faer's own GEMM on the same shape as the roofline reference.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::{Mode, w1};

fn bench(c: &mut Criterion) {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator().expect("mallopt");
    let mut group = c.benchmark_group("w1_linear");
    group.sample_size(10);
    for n in [1usize, 8, 64, 512, 4096] {
        group.throughput(Throughput::Elements((2 * n * 768 * 768) as u64));
        for mode in Mode::ALL {
            if mode == Mode::Loop && n > 512 {
                continue;
            }
            let mut w = w1(n, mode).expect("build");
            group.bench_function(format!("{}/{n}", mode.name()), |b| b.iter(|| w.run()));
        }
        let d = 768;
        let a = faer::Mat::<f32>::from_fn(n, d, |i, j| ((i + j) % 7) as f32);
        let w = faer::Mat::<f32>::from_fn(d, d, |i, j| ((i * j) % 5) as f32);
        let mut out = faer::Mat::<f32>::zeros(n, d);
        group.bench_function(format!("faer/{n}"), |b| {
            b.iter(|| {
                faer::linalg::matmul::matmul(
                    out.as_mut(),
                    faer::Accum::Replace,
                    a.as_ref(),
                    w.as_ref(),
                    1.0,
                    if n * d * d >= pfor::kernels::gemm::PAR_FLOPS { faer::Par::rayon(0) } else { faer::Par::Seq },
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
