//! Auto-batching workloads W6 (recursive fibonacci) and W7 (NUTS-like doubling tree with a
//! heavy leaf), shared by `benches/w6_fib.rs`, `benches/w7_nuts.rs`, the W7 profile and
//! `bench_report` through `#[path]`. W6's fibonacci program lives in the user-facing example
//! `examples/recursive_fib.rs` (included here), so the example shows the code it runs.
#![allow(dead_code)]

use pfor::autobatch::{Program, ProgramBuilder, VarType};
use pfor::prelude::*;

// W6's program is the one `examples/recursive_fib.rs` shows (one definition).
#[path = "../../examples/recursive_fib.rs"]
mod fib_example;
#[allow(unused_imports)]
pub use fib_example::{fib_inputs, fib_program};

/// Dimension of the W7 leapfrog state.
pub const NUTS_DIM: usize = 100;
const EPS: f32 = 0.01;

/// The W7 target's precision matrix `A` (`[dim, dim]`, row-major; gradient = `A q`).
pub fn nuts_matrix(dim: usize) -> Vec<f32> {
    (0..dim * dim)
        .map(|i| {
            let (r, c) = (i / dim, i % dim);
            if r == c { 1.0 } else { 0.01 * (((r * 31 + c * 17) % 13) as f32 - 6.0) / 6.0 }
        })
        .collect()
}

fn slice(t: &Tensor) -> Result<std::borrow::Cow<'_, [f32]>> {
    let a = t.array::<f32>()?;
    Ok(match a.as_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(a.iter().copied().collect()),
    })
}

/// `q A^T` for a batch `q: [k, dim]` (one GEMM for all rows).
fn matvec(a: &[f32], dim: usize, q: &[f32]) -> Result<Vec<f32>> {
    let k = q.len() / dim;
    let mut out = vec![0.0f32; k * dim];
    pfor::kernels::gemm::gemm(k, dim, dim, q, false, a, true, &mut out, false)?;
    Ok(out)
}

/// One leapfrog step for a batch of `k` states: `p½ = p - ε/2 g; q' = q + ε p½; g' = A q';
/// p' = p½ - ε/2 g'`, plus the log weight `-|p'|²/2`.
fn leapfrog(a: &[f32], dim: usize, t: &[Tensor]) -> Result<Vec<Tensor>> {
    let (q, p, g) = (slice(&t[0])?, slice(&t[1])?, slice(&t[2])?);
    let k = q.len() / dim;
    let ph: Vec<f32> = p.iter().zip(g.iter()).map(|(p, g)| p - 0.5 * EPS * g).collect();
    let qn: Vec<f32> = q.iter().zip(&ph).map(|(q, ph)| q + EPS * ph).collect();
    let gn = matvec(a, dim, &qn)?;
    let pn: Vec<f32> = ph.iter().zip(&gn).map(|(ph, g)| ph - 0.5 * EPS * g).collect();
    let logw: Vec<f32> = pn.chunks(dim).map(|r| -0.5 * r.iter().map(|v| v * v).sum::<f32>()).collect();
    Ok(vec![
        Tensor::from_vec(&[k, dim], qn)?,
        Tensor::from_vec(&[k, dim], pn)?,
        Tensor::from_vec(&[k, dim], gn)?,
        Tensor::from_vec(&[k], logw)?,
    ])
}

/// The NUTS-like doubling tree: `tree(depth, q, p, g)` is one leapfrog step (one `[dim,dim]`
/// matvec) at depth 0, else two subtrees of depth-1 run one after the other with their log
/// weights combined by `logaddexp`. Inputs: depth `i64[]`, q, p `f32[dim]`; outputs q, p,
/// log weight.
pub fn nuts_program(dim: usize) -> Result<Program> {
    let a = std::sync::Arc::new(nuts_matrix(dim));
    let mut pb = ProgramBuilder::new();
    let tree = pb.declare("tree", &["depth", "q", "p", "g"], &["q_out", "p_out", "g_out", "logw"])?;
    let leaf_a = a.clone();
    pb.define(tree, move |f| {
        let [depth, q, p, g] = [f.param(0)?, f.param(1)?, f.param(2)?, f.param(3)?];
        let outs = f.results();
        let leaf = f.le(depth, 0i64)?;
        f.if_else(
            leaf,
            |f| {
                f.prim_into("leapfrog", &[q, p, g], &outs, move |t| leapfrog(&leaf_a, dim, t))?;
                f.ret(&outs)
            },
            |f| {
                let d1 = f.sub(depth, 1i64)?;
                let left = f.call(tree, &[d1, q, p, g])?;
                let right = f.call(tree, &[d1, left[0], left[1], left[2]])?;
                let w = f.local("w");
                f.prim_into("logaddexp", &[left[3], right[3]], &[w], |t| {
                    let m = ndarray::Zip::from(t[0].array::<f32>()?).and(t[1].array::<f32>()?).map_collect(|&x, &y| {
                        let hi = x.max(y);
                        hi + ((x - hi).exp() + (y - hi).exp()).ln()
                    });
                    Ok(vec![m.into()])
                })?;
                f.ret(&[right[0], right[1], right[2], w])
            },
        )
    })?;
    let main = pb.function("nuts", &["d", "q0", "p0"], &["q", "p", "logw"], move |f| {
        let [d, q0, p0] = [f.param(0)?, f.param(1)?, f.param(2)?];
        let g0 = f.local("g0");
        let a = a.clone();
        f.prim_into("grad0", &[q0], &[g0], move |t| {
            let q = slice(&t[0])?;
            Ok(vec![Tensor::from_vec(&[q.len() / dim, dim], matvec(&a, dim, &q)?)?])
        })?;
        let r = f.call(tree, &[d, q0, p0, g0])?;
        f.ret(&[r[0], r[1], r[3]])
    })?;
    let v = VarType::new(DType::F32, &[dim]);
    pb.build(main, &[VarType::scalar(DType::I64), v.clone(), v])
}

/// A batch of depths ~ U{1..6} with random states, and its total number of leaf steps.
pub fn nuts_inputs(batch: usize, dim: usize) -> (Vec<Tensor>, u64) {
    let d = Tensor::rand_uniform(DType::I64, &[batch], 1.0, 7.0, 1000 + batch as u64).expect("a benchmark input shape");
    let steps = d.to_vec::<i64>().expect("i64").iter().map(|&d| 1u64 << d).sum();
    let q = Tensor::randn(&[batch, dim], 1).expect("a benchmark input shape");
    let p = Tensor::randn(&[batch, dim], 2).expect("a benchmark input shape");
    (vec![d, q, p], steps)
}
