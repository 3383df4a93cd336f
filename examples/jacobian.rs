//! The jacobian of an LSTM: unroll an LSTM cell over 10 steps of a `[10, 128]` input,
//! project the final state densely to `out` units, and compute `d out / d inputs`
//! (`[out, 10, 128]`) — once with `pfor` over the rows of reverse-mode gradients, once
//! with the reference loop (one backward pass per row), checking they agree (the last line is
//! the verdict; the process exits non-zero on a mismatch).
//!
//! Run with `cargo run --release --example jacobian` (`--ab-fuse`: fusion on vs off, same process;
//! `--mode pfor|loop`: time one form; every mode ends with the verdict against the other form).

use std::time::Instant;

use pfor::api::{jacobian_loop, jacobian_with, lstm_cell};
use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::PforOptions;

const STEPS: usize = 10;
const IN: usize = 128;
const HIDDEN: usize = 256;

fn time_it(sess: &mut Session, feeds: &[(ValueId, Tensor)]) -> Result<(Tensor, f64)> {
    let mut out = sess.run(feeds)?; // warm up
    let reps = 5;
    let t = Instant::now();
    for _ in 0..reps {
        out = sess.run(feeds)?;
    }
    Ok((out.remove(0), t.elapsed().as_secs_f64() / reps as f64))
}

/// `v` computed once with the built-in options (not profiled: `PFOR_PROFILE` reports only
/// the timed session), for a verdict.
fn check_run(g: &Graph, v: ValueId, feeds: &[(ValueId, Tensor)]) -> Result<Tensor> {
    first(Session::with_options(g, &[v], ExecOptions::builtin())?.run(feeds)?)
}

/// The worse of two verdicts (the larger difference).
fn worse(a: Option<Verdict>, b: Verdict) -> Option<Verdict> {
    match a {
        Some(a) if a.max_diff >= b.max_diff => Some(a),
        _ => Some(b),
    }
}

/// The first of a run's outputs.
fn first(outs: Vec<Tensor>) -> Result<Tensor> {
    outs.into_iter().next().ok_or_else(|| Error::Verify("jacobian example: a run returned no output".into()))
}

/// Counts the op kinds computing `v` (for `--dump`): name and output shape, by count.
fn dump(g: &Graph, v: ValueId) -> Result<()> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for n in g.ancestors(&[v])? {
        let node = g.node(n)?;
        let shapes: Vec<String> = node.outputs.iter().map(|t| format!("{}", t.shape)).collect();
        *counts.entry(format!("{} {}", node.op.name(), shapes.join(","))).or_default() += 1;
    }
    let mut rows: Vec<_> = counts.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    for (k, c) in rows {
        println!("{c:>6} {k}");
    }
    Ok(())
}

fn main() -> Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    // Flags: `--out N` runs one size; `--mode pfor|loop` times one mode only (for profiles,
    // repeated `--reps` times); `--dump` lists the ops of the pfor graph.
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned());
    let outs: Vec<usize> = match flag("--out") {
        Some(o) => vec![o.parse().map_err(|_| pfor::error::Error::InvalidArgument(format!("--out {o}")))?],
        None => vec![1, 8, 32, 128],
    };
    let mode = flag("--mode");
    let reps: usize = flag("--reps").and_then(|r| r.parse().ok()).unwrap_or(50);
    let x_val = Tensor::randn(&[STEPS, IN], 1)?;
    println!("{:>5} {:>14} {:>14} {:>8} {:>12}", "out", "pfor rows/s", "loop rows/s", "speedup", "max |diff|");
    let mut worst: Option<Verdict> = None;
    // progress on stderr (indicatif hides it when stderr is not a terminal)
    let bar = indicatif::ProgressBar::new(outs.len() as u64);
    for out in bar.wrap_iter(outs.into_iter()) {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [STEPS, IN]);
        let s = 1.0 / ((IN + HIDDEN) as f32).sqrt();
        let w = g.constant(Tensor::from_array(Tensor::randn(&[IN + HIDDEN, 4 * HIDDEN], 2)?.to_array::<f32>()? * s));
        let b = g.constant(Tensor::zeros(DType::F32, &[4 * HIDDEN])?);
        let wo = g.constant(Tensor::from_array(Tensor::randn(&[HIDDEN, out], 3)?.to_array::<f32>()? * 0.0625));
        let mut h = g.constant(Tensor::zeros(DType::F32, &[1, HIDDEN])?);
        let mut c = h;
        for xt in g.unstack(x, 0)? {
            let xt = g.expand_dims(xt, 0)?;
            (h, c) = lstm_cell(&mut g, xt, h, c, w, b)?;
        }
        let y = g.matmul(h, wo)?;
        let y = g.reshape(y, &[out as i64])?;

        // Strict: every op of the gradient graph must be converted (no per-op loop).
        let j = jacobian_with(&mut g, y, x, &PforOptions::strict())?;
        let jl = jacobian_loop(&mut g, y, x)?;
        let feeds = [(x, x_val.clone())];
        if args.iter().any(|a| a == "--dump") {
            dump(&g, j)?;
        }
        if args.iter().any(|a| a == "--ab-fuse") {
            // same process, alternating: fusion on vs off (best of `reps` rounds of 10 runs)
            let mut sess: Vec<Session> = [true, false]
                .into_iter()
                .map(|fuse| Session::with_options(&g, &[j], ExecOptions { fuse, ..ExecOptions::default() }))
                .collect::<Result<_>>()?;
            let mut best = [f64::INFINITY; 2];
            let mut last: Vec<Tensor> = Vec::new();
            for _ in 0..reps {
                for (k, s) in sess.iter_mut().enumerate() {
                    let t = Instant::now();
                    for _ in 0..10 {
                        last = s.run(&feeds)?;
                    }
                    best[k] = best[k].min(t.elapsed().as_secs_f64() / 10.0);
                }
            }
            let rate = |t: f64| out as f64 / t;
            println!("{out:>5} fused {:.0} rows/s, unfused {:.0} rows/s", rate(best[0]), rate(best[1]));
            // fused and unfused against the loop, once each
            let fused = sess[0].run(&feeds)?;
            let want = check_run(&g, jl, &feeds)?;
            let v = Verdict::compare(&[first(fused)?, first(last)?], &[want.clone(), want], 1e-4);
            worst = worse(worst, v);
            continue;
        }
        if let Some(m) = &mode {
            let (v, other) = if m == "loop" { (jl, j) } else { (j, jl) };
            let mut sess = Session::new(&g, &[v])?;
            let t = Instant::now();
            let mut got = Vec::new();
            for _ in 0..reps.max(1) {
                got = sess.run(&feeds)?;
            }
            println!("{out:>5} {m}: {:.0} rows/s", (out * reps.max(1)) as f64 / t.elapsed().as_secs_f64());
            // the other form once, unprofiled, for the verdict
            let want = check_run(&g, other, &feeds)?;
            worst = worse(worst, Verdict::compare(&[first(got)?], &[want], 1e-4));
            continue;
        }
        let (jv, tp) = time_it(&mut Session::new(&g, &[j])?, &feeds)?;
        let (jlv, tl) = time_it(&mut Session::new(&g, &[jl])?, &feeds)?;
        let v = Verdict::compare(&[jv], &[jlv], 1e-4);
        let diff = v.max_diff;
        println!("{out:>5} {:>14.0} {:>14.0} {:>7.1}x {diff:>12.2e}", out as f64 / tp, out as f64 / tl, tl / tp);
        worst = worse(worst, v);
    }
    bar.finish_and_clear();
    // every size ran a check: with none (no size given) there is no verdict, which fails too
    let verdict = worst.ok_or_else(|| Error::Verify("jacobian example: no size was checked".into()))?;
    println!("{verdict}");
    verdict.into_result()
}
