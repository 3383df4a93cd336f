//! Node counts of the W2 (MNIST CNN) and W5 (LSTM jacobian) pfor graphs with the
//! post-vectorization simplification pass on and off, and what it removed by op kind.
//!
//! `cargo run --release --example simplify_counts -- [reps]` also times building the graph
//! (trace + conversion + pass) and one run of each graph (best of `reps`, default 5), and
//! the conversion of the `benches/conversion.rs` body at 1,000 to 8,000 nodes (is the pass
//! linear?).

use std::collections::BTreeMap;
use std::time::Instant;

use pfor::api::jacobian_with;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

#[path = "../workloads/mod.rs"]
mod workloads;
use workloads::{mnist_example, mnist_params, w5_forward, w5_input};

/// A built pfor graph: the graph, its outputs and its feeds.
struct Built {
    g: Graph,
    outs: Vec<ValueId>,
    feeds: Vec<(ValueId, Tensor)>,
}

fn w2(n: usize, opts: &PforOptions) -> Result<Built> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 28, 28, 1]);
    let p = mnist_params(&mut g);
    let outs = pfor_with(&mut g, n, opts, |g, i| mnist_example(g, &p, x, i))?;
    Ok(Built { g, outs, feeds: vec![(x, Tensor::randn(&[n, 28, 28, 1], 3)?)] })
}

/// The W5 graph of `benches/workloads/grad.rs` (LSTM unrolled 10 steps, in 128, state 256).
fn w5(out: usize, opts: &PforOptions) -> Result<Built> {
    let mut g = Graph::new();
    let (x, y) = w5_forward(&mut g, out)?;
    let j = jacobian_with(&mut g, y, x, opts)?;
    Ok(Built { g, outs: vec![j], feeds: vec![(x, w5_input())] })
}

fn live_kinds(b: &Built) -> Result<BTreeMap<String, usize>> {
    let mut m = BTreeMap::new();
    for n in b.g.ancestors(&b.outs)? {
        *m.entry(b.g.node(n)?.op.name()).or_default() += 1;
    }
    Ok(m)
}

fn best_run(b: &Built, reps: usize) -> Result<(f64, Vec<Tensor>)> {
    let mut sess = Session::new(&b.g, &b.outs)?;
    let mut best = f64::INFINITY;
    let mut vals = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        vals = sess.run(&b.feeds)?;
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok((best, vals))
}

fn report(name: &str, build: &dyn Fn(&PforOptions) -> Result<Built>, reps: usize) -> Result<()> {
    let mut built = Vec::new();
    let mut build_s = [f64::INFINITY; 2];
    for (k, on) in [false, true].into_iter().enumerate() {
        let opts = PforOptions::strict().with_simplify(on);
        let mut last = None;
        for _ in 0..reps {
            let t0 = Instant::now();
            let b = build(&opts)?;
            build_s[k] = build_s[k].min(t0.elapsed().as_secs_f64());
            last = Some(b);
        }
        built.push(last.ok_or_else(|| Error::InvalidArgument("reps must be > 0".into()))?);
    }
    let (off, on) = (&built[0], &built[1]);
    let (k_off, k_on) = (live_kinds(off)?, live_kinds(on)?);
    let live = |k: &BTreeMap<String, usize>| k.values().sum::<usize>();
    println!(
        "{name}: live nodes {} -> {} ({:+.1}%), graph nodes {} -> {}, build {:.2} ms -> {:.2} ms",
        live(&k_off),
        live(&k_on),
        100.0 * (live(&k_on) as f64 / live(&k_off) as f64 - 1.0),
        off.g.num_nodes(),
        on.g.num_nodes(),
        build_s[0] * 1e3,
        build_s[1] * 1e3
    );
    let mut diff = Vec::new();
    for (kind, &a) in &k_off {
        let b = k_on.get(kind).copied().unwrap_or(0);
        if a != b {
            diff.push(format!("{kind} {a}->{b}"));
        }
    }
    for (kind, &b) in &k_on {
        if !k_off.contains_key(kind) {
            diff.push(format!("{kind} 0->{b}"));
        }
    }
    println!("  live nodes by kind (changed): {}", diff.join(", "));
    // Interleave the runs so machine load hits both alike.
    let (mut t_off, mut t_on) = (f64::INFINITY, f64::INFINITY);
    let (mut v_off, mut v_on) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let (t, v) = best_run(off, reps)?;
        (t_off, v_off) = (t_off.min(t), v);
        let (t, v) = best_run(on, reps)?;
        (t_on, v_on) = (t_on.min(t), v);
    }
    let same = v_off == v_on;
    println!("  run (best of {}): {:.2} ms -> {:.2} ms; outputs bit-equal: {same}", 2 * reps, t_off * 1e3, t_on * 1e3);
    if !same {
        return Err(Error::InvalidArgument(format!("{name}: outputs differ with simplify on")));
    }
    Ok(())
}

/// The body of `benches/conversion.rs` with about `nodes` nodes; returns the conversion time.
fn synthetic(nodes: usize, simplify: bool) -> Result<f64> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [64, 32]);
    let w = g.constant(Tensor::randn(&[32, 32], 1)?);
    let t0 = Instant::now();
    pfor_with(&mut g, 64, &PforOptions::strict().with_simplify(simplify), |g, i| {
        let mut h = g.gather(x, i, 0)?;
        h = g.expand_dims(h, 0)?;
        for _ in 0..nodes / 5 {
            h = g.matmul(h, w)?;
            h = g.tanh(h)?;
            let s = g.reduce_sum(h, Some(&[1]), true)?;
            h = g.sub(h, s)?;
            h = g.reshape(h, &[1, 32])?;
        }
        Ok(vec![h])
    })?;
    Ok(t0.elapsed().as_secs_f64())
}

fn main() -> Result<()> {
    let reps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    report("W2 MNIST n=128", &|o| w2(128, o), reps)?;
    report("W5 LSTM jacobian out=128", &|o| w5(128, o), reps)?;
    for nodes in [1000, 2000, 4000, 8000] {
        let (mut off, mut on) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..4 * reps {
            off = off.min(synthetic(nodes, false)?);
            on = on.min(synthetic(nodes, true)?);
        }
        println!(
            "conversion body {nodes} nodes: {:.2} ms without the pass, {:.2} ms with ({:.2} us/node for the pass)",
            off * 1e3,
            on * 1e3,
            (on - off) * 1e6 / nodes as f64
        );
    }
    Ok(())
}
