//! Quickstart: the paper's §4 example and a small MLP, auto-vectorized with `pfor`; each is
//! checked against the reference loop (`for_loop`, one iteration at a time), and the last
//! line is the verdict (the process exits non-zero on a mismatch).
//!
//! Run with `cargo run --release --example quickstart`.

use std::time::Instant;

use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::{PforOptions, pfor_with};

fn main() -> Result<()> {
    // --- 1. Sum and difference of rows (paper §4) -------------------------------------
    let n = 4;
    let mut g = Graph::new();
    let a = g.constant(Tensor::randn(&[n, 3], 0)?); // loop-invariant
    let b = g.input("b", DType::F32, [Dim::fixed(n), Dim::fixed(3)]);
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let ai = g.gather(a, i, 0)?;
        let bi = g.gather(b, i, 0)?;
        Ok(vec![g.add(ai, bi)?, g.sub(ai, bi)?])
    };
    // before: the body traced for ONE row, `i` a scalar index (on a copy of the graph)
    let mut before = g.clone();
    let i = before.input("i", DType::I64, Shape::scalar());
    body(&mut before, i)?;
    println!("== before: the loop body for one row (i: a scalar index) ==\n{before}");
    let out = pfor_with(&mut g, n, &PforOptions::strict(), body)?;
    println!("== after pfor: every row at once (the body traced once, then converted) ==\n{g}");
    let b_val = Tensor::randn(&[n, 3], 1)?;
    let mut sess = Session::new(&g, &out)?;
    let r = sess.run(&[(b, b_val.clone())])?;
    println!("sum  = {}\ndiff = {}\n", r[0], r[1]);
    println!("the converted graph runs {} nodes: no loop, no gather\n", sess.num_steps());
    let looped = for_loop(&mut g, n, body)?;
    let want = Session::new(&g, &looped)?.run(&[(b, b_val)])?;
    let v1 = Verdict::compare(&r, &want, 0.0);

    // --- 2. A small MLP, one example at a time -> a batch at once -----------------------
    let batch = 512;
    let (d_in, d_hidden, d_out) = (784, 256, 10);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [batch, d_in]);
    let w1 = g.constant(scaled(&[d_in, d_hidden], 2)?);
    let b1 = g.constant(scaled(&[d_hidden], 3)?);
    let w2 = g.constant(scaled(&[d_hidden, d_out], 4)?);
    let b2 = g.constant(scaled(&[d_out], 5)?);
    let mlp = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let xi = g.gather(x, i, 0)?; // [784]: one example
        let xi = g.expand_dims(xi, 0)?; // [1, 784]
        let h = g.matmul(xi, w1)?;
        let h = g.add(h, b1)?;
        let h = g.relu(h)?;
        let o = g.matmul(h, w2)?;
        let o = g.add(o, b2)?;
        Ok(vec![g.reshape(o, &[d_out as i64])?])
    };
    let vectorized = pfor_with(&mut g, batch, &PforOptions::strict(), mlp)?;
    let looped = for_loop(&mut g, batch, mlp)?;
    let x_val = Tensor::randn(&[batch, d_in], 6)?;
    let mut fast = Session::new(&g, &vectorized)?;
    let mut slow = Session::new(&g, &looped)?;
    let feeds = [(x, x_val)];
    let (y_fast, t_fast) = time(|| fast.run(&feeds))?;
    let (y_slow, t_slow) = time(|| slow.run(&feeds))?;
    println!(
        "MLP over a batch of {batch}: pfor {:.2} ms, loop {:.2} ms -> pfor is {:.1}x faster",
        t_fast * 1e3,
        t_slow * 1e3,
        t_slow / t_fast
    );
    // Sum and difference are exact; the MLP's batched matmuls may round differently.
    let v2 = Verdict::compare(&y_fast, &y_slow, 1e-4);
    let verdict = if v1.matches() { v2 } else { v1 };
    println!("{verdict}");
    verdict.into_result()
}

/// Normal weights scaled by 1/sqrt(fan-in).
fn scaled(shape: &[usize], seed: u64) -> Result<Tensor> {
    let fan_in = shape[0] as f32;
    Ok(Tensor::from_array(Tensor::randn(shape, seed)?.to_array::<f32>()? / fan_in.sqrt()))
}

/// Best of 5 runs (after a warm-up).
fn time<T>(mut f: impl FnMut() -> Result<T>) -> Result<(T, f64)> {
    let mut out = f()?;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        out = f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok((out, best))
}
