//! Oracle tests: gathers (axes 0, 2, -1; constant, loop and mixed indices), scatters,
//! segment ops, top_k.

use super::oracle::{Spec, assert_oracle, check_case};
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
    let out = pfor::vectorize::pfor_with(&mut g, 5, &pfor::vectorize::PforOptions::strict(), |g, i| {
        Ok(vec![g.gather(a, i, 0)?])
    })
    .unwrap();
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
