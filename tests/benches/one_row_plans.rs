//! At a static n = 1, pfor's plan (the one-row form, `PforReport::one_row`) runs no more
//! nodes than the loop's body alone (traced with the index as an input) and than the
//! converters' form at one row, on W1-, W2- and W5-like bodies, and computes the loop's
//! values (measured at this commit: W1 4 / 6 / 4 nodes, W2 16 / 20 / 20, W5 157 / 161 / 223).

// The workloads include the W3 example, which `converters::lstm` includes too: on purpose.
#[path = "../../benches/workloads/mod.rs"]
#[allow(unused, clippy::duplicate_mod)]
mod workloads;

use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with_report};
use workloads::{mnist_example, mnist_params, w5_forward, w5_input};

/// A per-example body for index `i`.
type Body = Box<dyn Fn(&mut Graph, ValueId) -> Result<Vec<ValueId>>>;
/// A workload's feeds and body, set up in a graph.
type Setup = fn(&mut Graph) -> (Vec<(ValueId, Tensor)>, Body);

fn w1(g: &mut Graph) -> (Vec<(ValueId, Tensor)>, Body) {
    let x = g.input("x", DType::F32, [1, 64]);
    let w = g.constant(Tensor::randn(&[64, 64], 1).unwrap());
    let body = move |g: &mut Graph, i: ValueId| {
        let xi = g.gather(x, i, 0)?;
        let xi = g.reshape(xi, &[1, 64])?;
        Ok(vec![g.matmul(xi, w)?])
    };
    (vec![(x, Tensor::randn(&[1, 64], 2).unwrap())], Box::new(body))
}

fn w2(g: &mut Graph) -> (Vec<(ValueId, Tensor)>, Body) {
    let x = g.input("x", DType::F32, [1, 28, 28, 1]);
    let p = mnist_params(g);
    let body = move |g: &mut Graph, i: ValueId| mnist_example(g, &p, x, i);
    (vec![(x, Tensor::randn(&[1, 28, 28, 1], 3).unwrap())], Box::new(body))
}

/// W5 at one output: the VJP of the LSTM's output with the cotangent row `i` of the identity.
fn w5(g: &mut Graph) -> (Vec<(ValueId, Tensor)>, Body) {
    let (x, y) = w5_forward(g, 1).unwrap();
    let eye = g.constant(Tensor::ones(DType::F32, &[1, 1]).unwrap());
    let body = move |g: &mut Graph, i: ValueId| {
        let e = g.gather(eye, i, 0)?;
        pfor::autodiff::gradients(g, &[y], &[x], Some(&[e]))
    };
    (vec![(x, w5_input())], Box::new(body))
}

#[test]
fn one_row_plans_are_no_larger_than_the_loop_body() {
    for (name, setup) in [("W1", w1 as Setup), ("W2", w2), ("W5", w5)] {
        // the loop's body alone: the index is an input
        let mut gb = Graph::new();
        let (feeds_b, body) = setup(&mut gb);
        let i = gb.input("i", DType::I64, Shape::scalar());
        let outs_b = body(&mut gb, i).unwrap();
        let mut sb = Session::new(&gb, &outs_b).unwrap();
        let mut fb = feeds_b.clone();
        fb.push((i, Tensor::scalar(0i64)));
        let want = sb.run(&fb).unwrap();
        // pfor at a static n = 1
        let mut gp = Graph::new();
        let (feeds_p, body) = setup(&mut gp);
        let (outs_p, report) = pfor_with_report(&mut gp, 1, &PforOptions::strict(), body).unwrap();
        let mut sp = Session::new(&gp, &outs_p).unwrap();
        let got = sp.run(&feeds_p).unwrap();
        // the body's nodes, the index input replaced by the constant 0 and a row of a
        // one-row input read as a view (the loop's bookkeeping is gone)
        assert!(
            sp.num_steps() <= sb.num_steps(),
            "{name}: pfor at n = 1 runs {} nodes, the loop's body {}",
            sp.num_steps(),
            sb.num_steps()
        );
        assert!(report.one_row, "{name}");
        // and no more than the converters' form at one row
        let mut gc = Graph::new();
        let (_, body) = setup(&mut gc);
        let (outs_c, _) = pfor_with_report(&mut gc, 1, &PforOptions::strict().with_one_row(false), body).unwrap();
        let sc = Session::new(&gc, &outs_c).unwrap();
        assert!(sp.num_steps() <= sc.num_steps(), "{name}: {} nodes, converted {}", sp.num_steps(), sc.num_steps());
        for (a, b) in got.iter().zip(&want) {
            assert_eq!(a.shape()[0], 1, "{name}");
            assert_eq!(&a.shape()[1..], b.shape(), "{name}");
            assert!(a.reshape(b.shape()).unwrap().allclose(b, 1e-5, 1e-5), "{name}");
        }
    }
}
