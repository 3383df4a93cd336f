//! Conversion time: vectorizing a 1,000-node body (issue 7 target: < 10 ms).
//! The body mixes elementwise chains, matmuls with an invariant weight, reductions and
//! reshapes, so the converter dispatch of several families is exercised.
use criterion::{Criterion, criterion_group, criterion_main};
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

/// Build the graph and vectorize a body of about `nodes` nodes (with the simplification
/// pass on or off); returns the node count added.
fn convert(nodes: usize, simplify: bool) -> usize {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [64, 32]);
    let w = g.constant(Tensor::randn(&[32, 32], 1));
    let before = g.num_nodes();
    pfor_with(&mut g, 64, &PforOptions::strict().with_simplify(simplify), |g, i| {
        let mut h = g.gather(x, i, 0)?;
        h = g.expand_dims(h, 0)?;
        let mut k = 0;
        while k < nodes {
            h = g.matmul(h, w)?;
            h = g.tanh(h)?;
            let s = g.reduce_sum(h, &[1], true)?;
            h = g.sub(h, s)?;
            h = g.reshape(h, &[1, 32])?;
            k += 5;
        }
        Ok(vec![h])
    })
    .expect("pfor");
    g.num_nodes() - before
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("conversion");
    group.sample_size(20);
    group.bench_function("pfor_1000_node_body", |b| b.iter(|| convert(1000, true)));
    group.bench_function("pfor_1000_node_body_no_simplify", |b| b.iter(|| convert(1000, false)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
