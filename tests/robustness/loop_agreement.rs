//! Where the reference loop runs, pfor runs too and gives its values: regressions found by
//! the malformed-graph fuzzer (`fuzz.rs`), each a minimal case of a converter that failed
//! (or differed) on input the loop handles: empty iteration sets, depth-0 scatter
//! indices, branches whose results have different shapes.

use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor_with};

type Body<'a> = &'a dyn Fn(&mut Graph, ValueId) -> Result<Vec<ValueId>>;

/// Build `body` as a strict pfor and as a loop over `n` (static, or fed when `dynamic`),
/// run both with `feeds`, and assert equal results.
fn assert_agrees(
    mut g: Graph,
    n: usize,
    dynamic: bool,
    feeds: &[(ValueId, Tensor)],
    mode: ControlFlowMode,
    body: Body,
) {
    let mut feeds = feeds.to_vec();
    let len: LoopLen = if dynamic {
        let v = g.input("n", DType::I64, Shape::scalar());
        feeds.push((v, Tensor::scalar(n as i64)));
        v.into()
    } else {
        n.into()
    };
    let opts = PforOptions::strict().with_control_flow(mode);
    let want = for_loop(&mut g, len, body).unwrap();
    let got = pfor_with(&mut g, len, &opts, body).unwrap();
    let mut fetch = got.clone();
    fetch.extend(&want);
    let r = run_once(&g, &fetch, &feeds).unwrap();
    let k = got.len();
    for j in 0..k {
        if n == 0 && r[j].is_empty() && r[k + j].is_empty() && r[j].rank() == r[k + j].rank() {
            continue; // zero iterations: the loop cannot know dynamic per-iteration dims (it reports 0)
        }
        pfor::tensor::assert_close(&r[j], &r[k + j], 1e-9, 1e-9).unwrap_or_else(|e| panic!("n={n}: output {j}: {e}"));
    }
}

#[test]
fn scatter_with_depth_0_indices_replaces_each_iterations_tensor() {
    // Indices of shape [0] index nothing: the update is the whole tensor. The converter
    // sliced the first index column to build the row positions, which does not exist.
    for n in [0, 1, 3] {
        let mut g = Graph::new();
        let t = g.constant(Tensor::from_vec(&[n, 3], (0..3 * n).map(|v| v as f64).collect()).unwrap());
        let u = g.constant(Tensor::from_vec(&[n, 3], (0..3 * n).map(|v| -(v as f64)).collect()).unwrap());
        let ix = g.constant(Tensor::from_vec(&[0], Vec::<i64>::new()).unwrap());
        assert_agrees(g, n, false, &[], ControlFlowMode::Auto, &|g, i| {
            let (ti, ui) = (g.gather(t, i, 0)?, g.gather(u, i, 0)?);
            Ok(vec![g.tensor_scatter_update(ti, ix, ui)?, g.tensor_scatter_add(ti, ix, ui)?])
        });
    }
}

#[test]
fn reshape_to_minus_one_with_no_iterations() {
    // With zero iterations the stacked value is empty and `[n, -1]` is ambiguous: the
    // converter must resolve the -1 per iteration. Static n = 0 over a dynamic dim, and a
    // dynamic n = 0 over a zero-element fixed shape.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [Dim::fixed(0), Dim::dynamic("d")]);
    let feeds = [(x, Tensor::zeros(DType::F64, &[0, 3]).unwrap())];
    assert_agrees(g, 0, false, &feeds, ControlFlowMode::Auto, &|g, i| {
        let xi = g.gather(x, i, 0)?;
        Ok(vec![g.reshape(xi, &[-1])?, g.reshape(xi, &[3, -1])?])
    });
    for n in [0, 2] {
        let mut g = Graph::new();
        let x = g.constant(Tensor::zeros(DType::F64, &[n, 0, 2]).unwrap());
        assert_agrees(g, n, true, &[], ControlFlowMode::Auto, &|g, i| {
            let xi = g.gather(x, i, 0)?;
            Ok(vec![g.reshape(xi, &[-1])?, g.reshape(xi, &[2, -1])?])
        });
    }
}

#[test]
fn cond_whose_branches_return_different_shapes_takes_the_taken_branchs_shape() {
    // `then` returns 1 element per iteration, `else` 2: the output's dim is dynamic. The
    // loop runs when every iteration takes the same branch; the Subset form stitched the
    // results into zeros shaped like the then-branch's, so an all-else (or an empty)
    // iteration set failed.
    for (n, v) in [(0, 1.0), (1, -1.0), (3, -1.0), (3, 1.0)] {
        let mut g = Graph::new();
        let x = g.constant(Tensor::full(DType::F64, &[n, 2], v).unwrap());
        assert_agrees(g, n, false, &[], ControlFlowMode::Subset, &|g, i| {
            let xi = g.gather(x, i, 0)?;
            let s = g.sum_all(xi)?;
            let zero = g.scalar_like(s, 0.0)?;
            let p = g.greater(s, zero)?;
            g.cond(p, &[xi], |g, a| Ok(vec![g.reduce_sum(a[0], Some(&[0]), true)?]), |g, a| Ok(vec![g.neg(a[0])?]))
        });
    }
}

/// A branch that no iteration takes never runs, as in the loop: here it gathers index 0 of
/// an empty axis of a stacked value (which fails for the empty set of rows too), and every
/// iteration takes the other branch. Fuzz finding (the last entry of
/// proptest-regressions/robustness/fuzz.txt).
#[test]
fn a_branch_no_iteration_takes_never_runs() {
    for mode in [ControlFlowMode::Subset, ControlFlowMode::Auto, ControlFlowMode::Mask] {
        for (n, dynamic) in [(0, false), (1, false), (3, false), (3, true)] {
            let mut g = Graph::new();
            let xs = g.constant(Tensor::zeros(DType::F32, &[n, 0, 0]).unwrap());
            let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
                let x = g.gather(xs, i, 0)?;
                let zero = g.constant(Tensor::scalar(0i64));
                let never = g.less(i, zero)?;
                let at = g.constant(Tensor::scalar(0i64));
                g.cond(
                    never,
                    &[x],
                    |g, a| Ok(vec![g.gather(a[0], at, 1)?]),
                    |g, a| Ok(vec![g.reduce_sum(a[0], Some(&[1]), false)?]),
                )
            };
            let inputs = [];
            assert_agrees(std::mem::take(&mut g), n, dynamic, &inputs, mode, &body);
        }
    }
}
