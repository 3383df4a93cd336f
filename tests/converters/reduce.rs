//! Oracle tests: reductions over several axis sets with keep_dims on/off, arg-reductions, scans.

use super::oracle::{Spec, assert_oracle};
use pfor::prelude::*;

#[test]
fn reductions_over_axis_sets() {
    let axis_sets: [&[i64]; 6] = [&[0], &[1], &[0, 2], &[-1], &[0, 1, 2], &[]];
    for axes in axis_sets {
        for keep in [false, true] {
            assert_oracle(&[Spec::f64(&[2, 3, 4])], &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![
                    g.reduce_sum(x[0], Some(axes), keep)?,
                    g.reduce_mean(x[0], Some(axes), keep)?,
                    g.reduce_max(x[0], Some(axes), keep)?,
                    g.reduce_min(x[0], Some(axes), keep)?,
                    g.reduce_prod(x[0], Some(axes), keep)?,
                    g.reduce_logsumexp(x[0], Some(axes), keep)?,
                ])
            });
            assert_oracle(&[Spec::bool(&[2, 3, 4])], &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![g.reduce_all(x[0], Some(axes), keep)?, g.reduce_any(x[0], Some(axes), keep)?])
            });
        }
    }
}

#[test]
fn arg_reductions_and_scans() {
    for axis in [0i64, 1, -1] {
        assert_oracle(&[Spec::f64(&[3, 4])], &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![
                g.argmax(x[0], axis)?,
                g.argmin(x[0], axis)?,
                g.cumsum(x[0], axis, false, false)?,
                g.cumsum(x[0], axis, true, true)?,
                g.cumprod(x[0], axis, true, false)?,
            ])
        });
    }
}
