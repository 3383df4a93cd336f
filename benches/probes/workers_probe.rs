//! What a parallel kernel's cross-thread hand-off costs (the reason `exec::workers` runs
//! parallel-heavy plans on a pool thread): `cargo run --release --example workers_probe`.
//!
//! Times a trivially small two-task `rayon::join` issued (a) from the main thread, outside the
//! pool — the caller injects the job and sleeps until a worker finishes it — and (b) from a
//! pool thread, which runs one task itself while the other is stolen or run inline.
use std::time::Instant;

fn per_call(label: &str, reps: usize, f: impl Fn()) {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    println!("{label:<44} {:8.2} us per call", best * 1e6);
}

fn main() {
    let work = |n: usize| (0..n).fold(0u64, |a, i| a.wrapping_mul(31).wrapping_add(i as u64));
    let job = || {
        let (a, b) = rayon::join(|| work(2000), || work(2000));
        std::hint::black_box(a ^ b);
    };
    println!("rayon threads: {}", rayon::current_num_threads());
    per_call("join of two ~1 us tasks, from main thread", 2000, job);
    per_call("the same, 20 joins inside one pool job", 100, || rayon::scope(|_| (0..20).for_each(|_| job())));
    per_call("20 joins from main thread", 100, || (0..20).for_each(|_| job()));
}
