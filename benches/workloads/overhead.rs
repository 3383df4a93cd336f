//! Overhead workloads of issue 7: the time to vectorize a 1,000-node body (target < 10 ms)
//! and the executor's per-op dispatch cost on a chain of tiny ops.

use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

/// Vectorize a body of about `nodes` nodes over 64 iterations (elementwise chains, matmuls
/// with an invariant weight, reductions, reshapes: the converters of several families),
/// with the simplification pass on or off; returns the node count added.
pub fn convert_body(nodes: usize, simplify: bool) -> Result<usize> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [64, 32]);
    let w = g.constant(Tensor::randn(&[32, 32], 1)?);
    let before = g.num_nodes();
    pfor_with(&mut g, 64, &PforOptions::strict().with_simplify(simplify), |g, i| {
        let mut h = g.gather(x, i, 0)?;
        h = g.expand_dims(h, 0)?;
        let mut k = 0;
        while k < nodes {
            h = g.matmul(h, w)?;
            h = g.tanh(h)?;
            let s = g.reduce_sum(h, Some(&[1]), true)?;
            h = g.sub(h, s)?;
            h = g.reshape(h, &[1, 32])?;
            k += 5;
        }
        Ok(vec![h])
    })?;
    Ok(g.num_nodes() - before)
}

/// A session running `ops` alternating f32 `add` / `mul` steps on a `[4]` value, fused into
/// elementwise groups or not: its run time over `ops` is the executor's cost per op.
pub fn tiny_chain(ops: usize, fuse: bool) -> Result<(Session, Vec<(ValueId, Tensor)>)> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    let c = g.constant(Tensor::from_vec(&[4], vec![0.5f32, 0.25, 0.125, 1.0])?);
    let mut h = x;
    for k in 0..ops {
        h = if k % 2 == 0 { g.add(h, c)? } else { g.mul(h, c)? };
    }
    let opts = ExecOptions { fuse, ..ExecOptions::default() };
    Ok((Session::with_options(&g, &[h], opts)?, vec![(x, Tensor::from_vec(&[4], vec![1.0f32; 4])?)]))
}
