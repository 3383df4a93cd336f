//! Oracle tests: shape ops.

use super::oracle::{Spec, assert_oracle};
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
            g.squeeze(x[0], &[2])?,
            g.squeeze(x[0], &[])?,
            g.identity(x[0])?,
            g.stop_gradient(x[0])?,
        ])
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
