//! W7: heavy recursive auto-batching — a NUTS-like trajectory doubling to a per-example
//! depth U{1..6}; each leaf is a 100-dim leapfrog step with a [100,100] matvec. Stackless
//! executor vs full VM vs the unbatched reference loop; throughput is leaf steps/s.
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pfor::autobatch::{ExecConfig, reference, stackless, vm};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "autobatch/mod.rs"]
mod workloads;
use workloads::{NUTS_DIM, nuts_inputs, nuts_program};

fn bench(c: &mut Criterion) {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator().expect("mallopt");
    let program = nuts_program(NUTS_DIM).expect("nuts builds");
    let cfg = ExecConfig::default();
    let sl = stackless::Executor::new(&program).expect("stackless");
    let machine = vm::Vm::new(&program).expect("vm");
    let mut group = c.benchmark_group("w7_nuts");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for batch in [1usize, 16, 128, 512] {
        let (inputs, steps) = nuts_inputs(batch, NUTS_DIM);
        group.throughput(Throughput::Elements(steps));
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
