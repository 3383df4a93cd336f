//! W6: recursive auto-batching — doubly-recursive fibonacci(n), n ~ U{3..12}, for a batch of
//! logical threads: stackless executor vs full VM vs the unbatched reference loop.
//! Throughput is fib calls/s (every invocation of `fib` across the batch).
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pfor::autobatch::{ExecConfig, reference, stackless, vm};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "autobatch/mod.rs"]
mod workloads;
use workloads::{fib_inputs, fib_program};

fn bench(c: &mut Criterion) {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator().expect("mallopt");
    let program = fib_program().expect("fib builds");
    let cfg = ExecConfig::default();
    let sl = stackless::Executor::new(&program).expect("stackless");
    let machine = vm::Vm::new(&program).expect("vm");
    let mut group = c.benchmark_group("w6_fib");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for batch in [1usize, 16, 128, 1024] {
        let (n, calls) = fib_inputs(batch);
        let inputs = [n];
        group.throughput(Throughput::Elements(calls));
        group.bench_function(format!("stackless/{batch}"), |b| b.iter(|| sl.run(&inputs, &cfg).expect("runs")));
        group.bench_function(format!("vm/{batch}"), |b| b.iter(|| machine.run(&inputs, &cfg).expect("runs")));
        group.bench_function(format!("loop/{batch}"), |b| {
            b.iter(|| reference::execute(&program, &inputs).expect("runs"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
