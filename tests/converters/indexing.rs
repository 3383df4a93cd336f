//! Oracle tests: gathers (axes 0, 2, -1; constant, loop and mixed indices), scatters,
//! segment ops, top_k, nonzero (one-argument where) with equal and differing lengths.

use super::oracle::{Spec, assert_oracle, check_case};
use crate::common::coverage::pfor_recorded;
use crate::common::*;
use pfor::prelude::*;

#[test]
fn gathers_over_axes_with_every_index_pattern() {
    for axis in [0i64, 2, -1] {
        for ishape in [vec![], vec![2], vec![2, 3]] {
            assert_oracle(&[Spec::f64(&[3, 4, 3]), Spec::int(&ishape, 0, 3)], &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![g.gather(x[0], x[1], axis)?])
            });
        }
    }
}

#[test]
fn gather_with_the_loop_index_and_batch_dims() {
    assert_oracle(&[Spec::f64(&[3, 4]), Spec::int(&[3, 2], 0, 3)], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.gather_batched(x[0], x[1], 1, 1)?, g.gather_nd(x[0], x[1], 0)?])
    });
    assert_oracle(&[Spec::f64(&[3, 4, 2]), Spec::int(&[3, 2, 1], 0, 4)], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.gather_nd(x[0], x[1], 1)?])
    });
}

#[test]
fn gather_at_the_loop_index_is_free() {
    // gather(x, i, 0) with invariant x of first dim n is x itself: no gather in the plan.
    let mut g = Graph::new();
    let a = g.constant(Tensor::randn(&[5, 3], 0).unwrap());
    let out =
        pfor_recorded(&mut g, 5, &pfor::vectorize::PforOptions::strict(), |g, i| Ok(vec![g.gather(a, i, 0)?])).unwrap();
    assert_eq!(out[0], a);
}

#[test]
fn scatters_and_segments() {
    assert_oracle(&[Spec::int(&[3, 1], 0, 4), Spec::f64(&[3, 2])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.scatter_nd(x[0], x[1], &[4, 2])?])
    });
    assert_oracle(
        &[Spec::f64(&[4, 2]), Spec::int(&[3, 1], 0, 4), Spec::f64(&[3, 2])],
        &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![g.tensor_scatter_add(x[0], x[1], x[2])?, g.tensor_scatter_update(x[0], x[1], x[2])?])
        },
    );
    assert_oracle(&[Spec::f64(&[5, 2]), Spec::int(&[5], -1, 3)], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.unsorted_segment_sum(x[0], x[1], 3)?])
    });
    // max/min/prod need a static loop length (num_segments * n is an attribute)
    let specs = [Spec::f64(&[5, 2]), Spec::int(&[5], -1, 3)];
    for mask in 0..4u32 {
        let st = [mask & 1 != 0, mask & 2 != 0];
        for n in [0, 1, 2, 7] {
            check_case(&specs, &st, n, false, 3, &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![
                    g.unsorted_segment_max(x[0], x[1], 3)?,
                    g.unsorted_segment_min(x[0], x[1], 3)?,
                    g.unsorted_segment_prod(x[0], x[1], 3)?,
                ])
            })
            .unwrap();
        }
    }
}

#[test]
fn update_slice_and_top_k() {
    assert_oracle(&[Spec::f64(&[4, 3]), Spec::f64(&[2, 3])], &|g: &mut Graph, x: &[ValueId]| {
        let s = g.constant(Tensor::vec1(&[1i64, 0]));
        let (v, i) = g.top_k(x[0], 2)?;
        Ok(vec![g.dynamic_update_slice(x[0], x[1], s)?, v, i])
    });
}

/// pfor (static and dynamic n) == the loop, strict, for `body(g, i)`; `feeds` feed inputs.
fn agree(
    n: usize,
    feeds: &[(ValueId, Tensor)],
    g: &mut Graph,
    body: &dyn Fn(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) {
    let n_in = g.input("n", DType::I64, Shape::scalar());
    let opts = pfor::vectorize::PforOptions::strict();
    let a = pfor_recorded(g, n, &opts, body).unwrap();
    let d = pfor_recorded(g, n_in, &opts, body).unwrap();
    let l = for_loop(g, n, body).unwrap();
    let mut feeds = feeds.to_vec();
    feeds.push((n_in, Tensor::scalar(n as i64)));
    let mut fetch = a.clone();
    fetch.extend(&d);
    fetch.extend(&l);
    let r = run_once(g, &fetch, &feeds).unwrap();
    let k = a.len();
    for j in 0..k {
        assert_eq!(r[j], r[2 * k + j], "output {j}");
        assert_eq!(r[k + j], r[2 * k + j], "output {j}, dynamic n");
    }
}

/// `nonzero` of a per-iteration value (numbers, and a bool mask: one-argument `where`) in
/// strict mode: no fallback when every iteration finds as many elements, also two levels deep.
#[test]
fn nonzero_with_equal_lengths_needs_no_fallback() {
    let mut g = Graph::new();
    let x = g.constant(f64t(&[3, 2, 3], &[0., 1., 0., 0., 0., 2., 3., 0., 0., 0., 0., 4., 0., 5., 6., 0., 0., 0.]));
    let m =
        g.constant(boolt(&[3, 4], &[true, false, false, false, false, false, true, false, false, true, false, false]));
    agree(3, &[], &mut g, &|g, i| {
        let (xi, mi) = (g.gather(x, i, 0)?, g.gather(m, i, 0)?);
        let nz = g.nonzero(xi)?;
        Ok(vec![nz, g.nonzero(mi)?, g.gather_nd(xi, nz, 0)?])
    });
    // two pfor levels: each row of each x_i has one nonzero
    let y = g.constant(f64t(&[2, 2, 3], &[0., 7., 0., 1., 0., 0., 0., 0., 2., 0., 3., 0.]));
    let opts = pfor::vectorize::PforOptions::strict();
    let v = pfor_recorded(&mut g, 2, &opts, |g, i| {
        let yi = g.gather(y, i, 0)?;
        pfor_recorded(g, 2, &opts, |g, j| {
            let yij = g.gather(yi, j, 0)?;
            Ok(vec![g.nonzero(yij)?])
        })
    })
    .unwrap();
    assert_eq!(eval1(&g, v[0]), i64t(&[2, 2, 1, 1], &[1, 0, 2, 1]));
}

/// Iterations finding different numbers of elements: the pfor result cannot be stacked, and
/// the run says so at the nonzero node (the loop fails to stack its pieces too); no op falls
/// back to a per-iteration loop, even outside strict mode.
#[test]
fn nonzero_with_different_lengths_fails_saying_so() {
    let mut g = Graph::new();
    let x = g.constant(f64t(&[3, 2], &[1., 1., 0., 1., 1., 1.]));
    let opts = pfor::vectorize::PforOptions::default().with_fallback(pfor::vectorize::Fallback::Silent);
    let (v, report) = pfor::vectorize::pfor_with_report(&mut g, 3, &opts, |g, i| {
        let xi = g.gather(x, i, 0)?;
        Ok(vec![g.nonzero(xi)?])
    })
    .unwrap();
    assert!(report.fallbacks.is_empty(), "{:?}", report.fallbacks);
    let e = run_once(&g, &v, &[]).unwrap_err();
    assert!(e.to_string().contains("nonzero"), "{e}");
    assert!(e.to_string().contains("different lengths cannot be stacked"), "{e}");
    let l = for_loop(&mut g, 3, |g, i| {
        let xi = g.gather(x, i, 0)?;
        Ok(vec![g.nonzero(xi)?])
    })
    .unwrap();
    assert!(run_once(&g, &l, &[]).is_err());
}

/// An invariant scatter index whose row count is dynamic, tiled for stacked updates, keeps
/// its static index depth (the scatter's inference needs it).
#[test]
fn scatter_with_invariant_dynamic_indices_and_stacked_updates() {
    let mut g = Graph::new();
    let ix = g.input("ix", DType::I64, [Dim::unknown(), Dim::fixed(1)]);
    let u = g.input("u", DType::F64, [Dim::fixed(3), Dim::unknown()]);
    let x = g.constant(Tensor::randn_f64(&[3, 4], 2).unwrap());
    let feeds = [(ix, i64t(&[2, 1], &[3, 0])), (u, f64t(&[3, 2], &[1., 2., 3., 4., 5., 6.]))];
    agree(3, &feeds, &mut g, &|g, i| {
        let (xi, ui) = (g.gather(x, i, 0)?, g.gather(u, i, 0)?);
        Ok(vec![g.tensor_scatter_update(xi, ix, ui)?, g.tensor_scatter_add(xi, ix, ui)?])
    });
}
