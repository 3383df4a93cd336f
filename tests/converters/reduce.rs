//! Oracle tests: every axis reduction over several axis sets with keep_dims on/off, arg-reductions, scans.

use super::oracle::{Spec, assert_oracle};
use pfor::ops::unary::DtypeRule;
use pfor::ops::{ReduceForm, ReduceKind};
use pfor::prelude::*;

/// Every axis reduction of the kind table (a new one is picked up here), on an input of
/// its dtype class.
#[test]
fn reductions_over_axis_sets() {
    let kinds: Vec<ReduceKind> = ReduceKind::ALL.iter().copied().filter(|k| k.form() == ReduceForm::Axes).collect();
    assert!(kinds.contains(&ReduceKind::Variance), "{kinds:?}");
    let axis_sets: [&[i64]; 6] = [&[0], &[1], &[0, 2], &[-1], &[0, 1, 2], &[]];
    for axes in axis_sets {
        for keep in [false, true] {
            for logical in [false, true] {
                let ks: Vec<ReduceKind> =
                    kinds.iter().copied().filter(|k| (k.dtype_rule() == DtypeRule::Logical) == logical).collect();
                let spec = if logical { Spec::bool(&[2, 3, 4]) } else { Spec::f64(&[2, 3, 4]) };
                assert_oracle(&[spec], &|g: &mut Graph, x: &[ValueId]| {
                    ks.iter().map(|&k| g.reduce(k, x[0], Some(axes), keep)).collect()
                });
            }
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
