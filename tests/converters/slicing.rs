//! Oracle tests: slicing, padding, concatenation, including loop-variant offsets.

use super::oracle::{Spec, assert_oracle};
use pfor::ops::slicing::{PadMode, StridedSliceSpec};
use pfor::prelude::*;

#[test]
fn static_slicing_ops() {
    assert_oracle(&[Spec::f64(&[4, 5]), Spec::f64(&[2, 5])], &|g: &mut Graph, x: &[ValueId]| {
        let mut outs = vec![
            g.concat(&[x[0], x[1]], 0)?,
            g.concat(&[x[0], x[0]], -1)?,
            g.slice(x[0], &[1, 2], &[2, -1])?,
            g.pad(x[0], &[(1, 0), (2, 1)], PadMode::Constant(0.5))?,
            g.pad(x[0], &[(1, 2), (0, 1)], PadMode::Reflect)?,
            g.pad(x[0], &[(1, 1), (2, 0)], PadMode::Symmetric)?,
            g.reverse(x[0], &[0, -1])?,
        ];
        outs.extend(g.split(x[0], 1, &[2, 3])?);
        Ok(outs)
    });
}

#[test]
fn strided_slices_with_masks() {
    let specs = [
        StridedSliceSpec::new(&[1, 0], &[0, 0], &[1, -1]).with_end_mask(0b11).with_begin_mask(0b10),
        StridedSliceSpec::new(&[0], &[0], &[1]).with_ellipsis_mask(0b1).with_shrink_axis_mask(0),
        StridedSliceSpec::new(&[0, 1], &[0, 0], &[1, 1]).with_ellipsis_mask(0b1).with_shrink_axis_mask(0b10),
        StridedSliceSpec::new(&[0, 0], &[0, 0], &[1, 1])
            .with_begin_mask(0b1)
            .with_end_mask(0b1)
            .with_new_axis_mask(0b10),
        StridedSliceSpec::new(&[-1, 4], &[0, 0], &[-1, -2]).with_end_mask(0b11),
    ];
    for spec in &specs {
        assert_oracle(&[Spec::f64(&[3, 5])], &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.strided_slice(x[0], spec)?]));
    }
}

#[test]
fn dynamic_slice_and_roll_with_loop_variant_offsets() {
    assert_oracle(&[Spec::f64(&[4, 5]), Spec::int(&[2], 0, 3)], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.dynamic_slice(x[0], x[1], &[2, 2])?])
    });
    assert_oracle(&[Spec::f64(&[4, 5]), Spec::int(&[2], -7, 7)], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.roll(x[0], x[1], &[0, 1])?])
    });
    assert_oracle(&[Spec::f64(&[4, 5]), Spec::int(&[], -7, 7)], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.roll(x[0], x[1], &[-1])?])
    });
}
