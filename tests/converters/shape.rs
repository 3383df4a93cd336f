//! Oracle tests: shape ops.

use super::oracle::{Spec, assert_oracle};
use crate::common::coverage::pfor_recorded;
use pfor::prelude::*;

#[test]
fn reshape_transpose_expand_squeeze() {
    assert_oracle(&[Spec::f64(&[2, 3, 1])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![
            g.reshape(x[0], &[3, 2])?,
            g.reshape(x[0], &[-1])?,
            g.reshape(x[0], &[1, -1, 2])?,
            g.transpose(x[0], &[2, 0, 1])?,
            g.expand_dims(x[0], 0)?,
            g.expand_dims(x[0], -1)?,
            g.squeeze(x[0], Some(&[2]))?,
            g.squeeze(x[0], None)?,
            g.identity(x[0])?,
            g.stop_gradient(x[0])?,
        ])
    });
}

#[test]
fn match_shape_with_each_side_stacked_or_not() {
    assert_oracle(&[Spec::f64(&[2, 3]), Spec::f64(&[2, 3])], &|g: &mut Graph, x: &[ValueId]| {
        let c = g.zeros(DType::F64, &[2, 3])?;
        Ok(vec![g.match_shape(x[0], x[1])?, g.match_shape(x[0], c)?, g.match_shape(c, x[1])?])
    });
}

#[test]
fn broadcast_tile_fill_and_invariant_shape_queries() {
    assert_oracle(&[Spec::f64(&[3, 1]), Spec::f64(&[])], &|g: &mut Graph, x: &[ValueId]| {
        let s = g.shape_of(x[0])?;
        Ok(vec![
            g.broadcast_to(x[0], &[2, 3, 4])?,
            g.tile(x[0], &[2, 3])?,
            g.fill(&[2, 2], x[1])?,
            g.zeros_like(x[0])?,
            g.ones_like(x[0])?,
            s,
            g.size_of(x[0])?,
            g.rank_of(x[0])?,
            g.broadcast_to_dyn(x[0], s)?,
            g.fill_dyn(s, x[1])?,
            g.reshape_dyn(x[0], s)?,
        ])
    });
}

#[test]
fn one_hot_stack_unstack() {
    assert_oracle(
        &[Spec::int(&[3], -1, 5), Spec::f64(&[2, 3]), Spec::f64(&[2, 3])],
        &|g: &mut Graph, x: &[ValueId]| {
            let mut outs = vec![
                g.one_hot(x[0], 4, -1, 1.0, 0.0, DType::F64)?,
                g.one_hot(x[0], 4, 0, 2.0, -1.0, DType::F32)?,
                g.stack(&[x[1], x[2]], 0)?,
                g.stack(&[x[1], x[2]], -1)?,
            ];
            outs.extend(g.unstack(x[1], 1)?);
            Ok(outs)
        },
    );
}

/// `loop_max` is a collective, so it has no oracle `pfor == stack of iterations`: its
/// vectorized value is the maximum over the iterations (0 for none), loop-invariant, and
/// nested pfors take the maximum over every enclosing loop.
#[test]
fn loop_max_is_the_maximum_over_the_iterations() {
    use pfor::vectorize::PforOptions;
    let strict = PforOptions::strict();
    for (vals, dynamic) in [(vec![4i64, 0, 2, 7], false), (vec![4, 0, 2, 7], true), (vec![3], false), (vec![], true)] {
        let n = vals.len();
        let mut g = Graph::new();
        let k = if dynamic { g.input("k", DType::I64, [Dim::dynamic("n")]) } else { g.input("k", DType::I64, [n]) };
        let len = if dynamic {
            let s = g.shape_of(k).unwrap();
            LoopLen::Dynamic(g.reshape(s, &[]).unwrap())
        } else {
            LoopLen::Static(n)
        };
        let out = pfor_recorded(&mut g, len, &strict, |g, i| {
            let ki = g.gather(k, i, 0)?;
            let m = g.loop_max(ki)?;
            // A buffer of the bound's size: [m] ones, summed.
            let s = g.reshape(m, &[1])?;
            let one = g.scalar(DType::F64, 1.0);
            let b = g.fill_dyn(s, one)?;
            Ok(vec![m, g.sum_all(b)?])
        })
        .unwrap();
        let v = run_once(&g, &out, &[(k, Tensor::from_vec(&[n], vals.clone()).unwrap())]).unwrap();
        let want = vals.iter().copied().max().unwrap_or(0);
        assert_eq!(v[0], Tensor::from_vec(&[n], vec![want; n]).unwrap(), "{vals:?}");
        assert_eq!(v[1].to_f64_vec(), vec![want as f64; n], "{vals:?}");
    }
    // Nested: the maximum over both loops.
    let mut g = Graph::new();
    let k = g.input("k", DType::I64, [2, 3]);
    let out = pfor_recorded(&mut g, 2, &strict, |g, i| {
        let row = g.gather(k, i, 0)?;
        pfor_recorded(g, 3, &strict, |g, j| {
            let kij = g.gather(row, j, 0)?;
            Ok(vec![g.loop_max(kij)?])
        })
    })
    .unwrap();
    let v = run_once(&g, &out, &[(k, Tensor::from_vec(&[2, 3], vec![1i64, 5, 2, 0, 3, 9]).unwrap())]).unwrap();
    assert_eq!(v[0], Tensor::from_vec(&[2, 3], vec![9i64; 6]).unwrap());
}
