//! Winograd F(4x4, 3x3) vs im2col + GEMM on 3x3 stride-1 SAME `conv2d → bias_add → relu`
//! sessions, A/B interleaved, CPU time of the whole process per run (robust to a loaded
//! machine): `cargo run --release --example winograd_probe -- [N] [ROUNDS]` prints, per
//! shape, the median CPU ms of each path and their ratio. `PFOR_WINOGRAD3=always` makes the
//! kernel run on every shape it can (the cost rule off), which this probe needs to measure
//! shapes the rule rejects; `PFOR_WINOGRAD_SCHEDULE=tile` or `point` forces one schedule
//! of the kernel (run the probe once with each, alternating, to compare them).
use pfor::prelude::*;

mod cpu_clock;
use cpu_clock::process_cpu_seconds as cpu;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let a: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let (n, rounds) = (a.first().copied().unwrap_or(1), a.get(1).copied().unwrap_or(7));
    // ResNet-50's and SqueezeNet's 3x3 layers: (H = W, C, O)
    let shapes = [
        (56, 64, 64),
        (28, 128, 128),
        (14, 256, 256),
        (7, 512, 512),
        (55, 16, 64),
        (27, 32, 128),
        (13, 48, 192),
        (13, 64, 256),
    ];
    println!("n = {n}, {rounds} rounds, {} threads", rayon::current_num_threads());
    for (hw, c, o) in shapes {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [n, hw, hw, c]);
        let f = g.constant(Tensor::randn(&[3, 3, c, o], 1)?);
        let b = g.constant(Tensor::randn(&[o], 2)?);
        let y = g.conv2d(x, f, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() })?;
        let y = g.bias_add(y, b)?;
        let y = g.relu(y)?;
        let feeds = vec![(x, Tensor::randn(&[n, hw, hw, c], 3)?)];
        let mut sessions = Vec::new();
        for winograd in [true, false] {
            sessions.push(Session::with_options(&g, &[y], ExecOptions { winograd, ..ExecOptions::default() })?);
        }
        let flops = 2.0 * (n * hw * hw * 9 * c * o) as f64;
        let reps = ((2e9 / flops) as usize).clamp(1, 50);
        let mut times = [Vec::new(), Vec::new()];
        for s in sessions.iter_mut() {
            s.run(&feeds)?;
        }
        for _ in 0..rounds {
            for (s, t) in sessions.iter_mut().zip(&mut times) {
                let t0 = cpu();
                for _ in 0..reps {
                    s.run(&feeds)?;
                }
                t.push((cpu() - t0) / reps as f64);
            }
        }
        let [w, i] = times.map(median);
        println!(
            "[{n},{hw},{hw},{c}]->{o}: winograd {:.3} ms, im2col {:.3} ms CPU, im2col/winograd {:.2}x",
            w * 1e3,
            i * 1e3,
            i / w
        );
    }
    Ok(())
}
