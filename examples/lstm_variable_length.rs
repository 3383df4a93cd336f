//! W3: an LSTM (input 128, state 256, f32) over sequences of per-example length U{1..100}.
//! The per-example body runs `while t < len_i` on its own sequence (no padding in the
//! body); prints tokens/s for pfor (Subset and Mask while conversion), the reference loop
//! and the hand-padded batch (`max_len` steps over all rows with a `t < len` mask), and
//! checks every mode's final states against the reference loop's (`--mode loop`: the loop
//! against the subset form): the last line is the verdict, and the process exits non-zero
//! on a mismatch. (The W3 benchmark builds its graphs with this file's `w3_graph`.)
//!
//! `cargo run --release --example lstm_variable_length [-- --quick] [--mode subset|mask|loop|padded]
//! [--n N] [--reps R]` (`--mode`/`--n` restrict the table to one mode / size, for profiling;
//! `--reps R` runs exactly R timed runs).

use std::time::{Duration, Instant};

use pfor::api::lstm_cell;
use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor_with};

/// W3 batching modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum W3Mode {
    /// pfor, while loops in index-subset form (the active set shrinks).
    PforSubset,
    /// pfor, while loops in mask form (every row steps until all are done).
    PforMask,
    /// Reference loop over the per-example body.
    Loop,
    /// Hand-batched: `max_len` steps over the whole padded batch with a `t < len` mask.
    Padded,
}

impl W3Mode {
    /// All modes.
    pub const ALL: [W3Mode; 4] = [W3Mode::PforSubset, W3Mode::PforMask, W3Mode::Loop, W3Mode::Padded];
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            W3Mode::PforSubset => "pfor_subset",
            W3Mode::PforMask => "pfor_mask",
            W3Mode::Loop => "loop",
            W3Mode::Padded => "padded",
        }
    }
}

/// W3 sizes: padded sequence storage, input size, state size.
pub const W3_MAX_LEN: usize = 100;
/// W3 input size.
pub const W3_IN: usize = 128;
/// W3 state size.
pub const W3_HIDDEN: usize = 256;

/// The W3 graph for `x [n,max_len,in]` and `lens [n]` (i64, each in 1..=max_len) with
/// weights `(w [in+hid,4hid], b [4hid])`; returns the final `h [n,hid]`.
pub fn lstm_graph(
    g: &mut Graph,
    n: usize,
    mode: W3Mode,
    x: ValueId,
    lens: ValueId,
    weights: (ValueId, ValueId),
    dims: (usize, usize),
) -> Result<ValueId> {
    let (w, b) = weights;
    let (in_dim, hid) = dims;
    let dtype = g.value_type(x)?.dtype;
    let step = |g: &mut Graph, a: &[ValueId]| -> Result<Vec<ValueId>> {
        // carries t, h [1,hid], c [1,hid]; captures len, x_i [max_len,in], w, b
        let xt = g.gather(a[4], a[0], 0)?;
        let xt = g.reshape(xt, &[1, in_dim as i64])?;
        let (h, c) = lstm_cell(g, xt, a[1], a[2], a[5], a[6])?;
        let one = g.constant(Tensor::scalar(1i64));
        Ok(vec![g.add(a[0], one)?, h, c])
    };
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let xi = g.gather(x, i, 0)?;
        let li = g.gather(lens, i, 0)?;
        let t0 = g.constant(Tensor::scalar(0i64));
        let h0 = g.constant(Tensor::zeros(dtype, &[1, hid])?);
        let c0 = g.constant(Tensor::zeros(dtype, &[1, hid])?);
        let out = g.while_loop(&[t0, h0, c0], &[li, xi, w, b], |g, a| g.less(a[0], a[3]), step)?;
        Ok(vec![g.reshape(out[1], &[hid as i64])?])
    };
    let out = match mode {
        W3Mode::PforSubset | W3Mode::PforMask => {
            let cf = if mode == W3Mode::PforSubset { ControlFlowMode::Subset } else { ControlFlowMode::Mask };
            pfor_with(g, n, &PforOptions::strict().with_control_flow(cf), body)?
        }
        W3Mode::Loop => for_loop(g, n, body)?,
        W3Mode::Padded => {
            let t0 = g.constant(Tensor::scalar(0i64));
            let h0 = g.constant(Tensor::zeros(dtype, &[n, hid])?);
            let c0 = g.constant(Tensor::zeros(dtype, &[n, hid])?);
            let max_len = g.reduce_max(lens, Some(&[0]), false)?;
            let out = g.while_loop(
                &[t0, h0, c0],
                &[max_len, lens, x, w, b],
                |g, a| g.less(a[0], a[3]),
                |g, a| {
                    // x_t = x[:, t, :] for the whole batch; rows past their length keep
                    // their state through the mask
                    let xt = g.gather(a[5], a[0], 1)?;
                    let (h, c) = lstm_cell(g, xt, a[1], a[2], a[6], a[7])?;
                    let live = g.less(a[0], a[4])?;
                    let live = g.expand_dims(live, 1)?;
                    let h = g.select(live, h, a[1])?;
                    let c = g.select(live, c, a[2])?;
                    let one = g.constant(Tensor::scalar(1i64));
                    Ok(vec![g.add(a[0], one)?, h, c])
                },
            )?;
            return Ok(out[1]);
        }
    };
    Ok(out[0])
}

/// One W3 graph: its final states `out [n, hidden]`, the feeds and the tokens (sum of lengths).
pub struct W3 {
    /// The graph.
    pub graph: Graph,
    /// The final `h` of every sequence.
    pub out: ValueId,
    /// Inputs `x [n, max_len, in]` and `lens [n]`.
    pub feeds: Vec<(ValueId, Tensor)>,
    /// Tokens per run.
    pub tokens: f64,
}

/// The W3 graph for `n` sequences in `mode` (the same weights and inputs in every mode).
pub fn w3_graph(n: usize, mode: W3Mode) -> Result<W3> {
    let (t, d, h) = (W3_MAX_LEN, W3_IN, W3_HIDDEN);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, t, d]);
    let lens = g.input("lens", DType::I64, [n]);
    let scale = 1.0 / ((d + h) as f32).sqrt();
    let wt = Tensor::randn(&[d + h, 4 * h], 31)?.to_array::<f32>()? * scale;
    let w = g.constant(Tensor::from_array(wt));
    let bt = Tensor::randn(&[4 * h], 32)?.to_array::<f32>()? * scale;
    let b = g.constant(Tensor::from_array(bt));
    let out = lstm_graph(&mut g, n, mode, x, lens, (w, b), (d, h))?;
    let len_t = Tensor::rand_uniform(DType::I64, &[n], 1.0, (t + 1) as f64, 33)?;
    let tokens = len_t.to_vec::<i64>()?.iter().sum::<i64>() as f64;
    Ok(W3 { graph: g, out, feeds: vec![(x, Tensor::randn(&[n, t, d], 34)?), (lens, len_t)], tokens })
}

/// Best time of a few runs within `budget` (at least `min_reps`), and the result.
fn best_time(
    s: &mut Session,
    feeds: &[(ValueId, Tensor)],
    reps: (usize, usize),
    budget: Duration,
) -> Result<(f64, Tensor)> {
    let mut out = s.run(feeds)?; // warm-up
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut k = 0;
    while k < reps.0 || (start.elapsed() < budget && k < reps.1) {
        let t = Instant::now();
        out = s.run(feeds)?;
        best = best.min(t.elapsed().as_secs_f64());
        k += 1;
    }
    Ok((best, out.remove(0)))
}

/// The value following `--flag` on the command line.
fn arg_value(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1).cloned())
}

fn main() -> Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    let quick = std::env::args().any(|a| a == "--quick");
    let (budget, mut min_reps) = if quick { (Duration::from_millis(200), 1) } else { (Duration::from_millis(1500), 3) };
    let mut max_reps = 20;
    if let Some(r) = arg_value("--reps").and_then(|r| r.parse::<usize>().ok()) {
        (min_reps, max_reps) = (r, r);
    }
    let only_mode = arg_value("--mode");
    let sizes: Vec<usize> = match arg_value("--n").and_then(|n| n.parse::<usize>().ok()) {
        Some(n) => vec![n],
        None => vec![1, 16, 128, 512],
    };
    println!("W3 LSTM, in 128, state 256, f32, lengths U{{1..100}} (tokens/s, best of runs)\n");
    println!("| n | tokens | subset | mask | loop | padded | subset/loop | subset/padded |");
    println!("|---|---|---|---|---|---|---|---|");
    // f32 state after up to 100 steps: batched and per-row matmuls may round differently
    let mut verdict = Verdict { max_diff: 0.0, tol: 1e-4 };
    // progress on stderr (indicatif hides it when stderr is not a terminal)
    let bar = indicatif::ProgressBar::new(sizes.len() as u64);
    for n in bar.wrap_iter(sizes.into_iter()) {
        let mut rate = [0.0f64; 4];
        let mut outs: Vec<Option<Tensor>> = vec![None; 4];
        let mut tokens = 0.0;
        for (k, mode) in W3Mode::ALL.iter().enumerate() {
            if only_mode.as_deref().is_some_and(|m| !mode.name().ends_with(m)) {
                continue;
            }
            let w = w3_graph(n, *mode)?;
            tokens = w.tokens;
            let (t, out) = best_time(&mut Session::new(&w.graph, &[w.out])?, &w.feeds, (min_reps, max_reps), budget)?;
            rate[k] = w.tokens / t;
            outs[k] = Some(out);
        }
        println!(
            "| {n} | {tokens:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1}× | {:.2} |",
            rate[0],
            rate[1],
            rate[2],
            rate[3],
            rate[0] / rate[2],
            rate[0] / rate[3]
        );
        // the reference loop (computed here unless `--mode` left it out)
        let want = match outs[2].take() {
            Some(t) => t,
            None => {
                let w = w3_graph(n, W3Mode::Loop)?;
                Session::new(&w.graph, &[w.out])?.run(&w.feeds)?.remove(0)
            }
        };
        if outs.iter().all(Option::is_none) {
            // `--mode loop` timed the reference itself: check it against the subset form
            let w = w3_graph(n, W3Mode::PforSubset)?;
            outs[0] = Some(Session::new(&w.graph, &[w.out])?.run(&w.feeds)?.remove(0));
        }
        for out in outs.iter().flatten() {
            let v = Verdict::compare(std::slice::from_ref(out), std::slice::from_ref(&want), verdict.tol);
            verdict.max_diff = verdict.max_diff.max(v.max_diff);
        }
    }
    bar.finish_and_clear();
    println!("{verdict}");
    verdict.into_result()
}
