//! Oracle tests: select, cast, clip.

use super::oracle::{Spec, assert_oracle};
use pfor::prelude::*;

#[test]
fn select_with_broadcasting() {
    assert_oracle(&[Spec::bool(&[3, 1]), Spec::f64(&[3, 4]), Spec::f64(&[4])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.select(x[0], x[1], x[2])?])
    });
}

#[test]
fn cast_and_clip() {
    assert_oracle(&[Spec::f64(&[2, 3]), Spec::f64(&[3]), Spec::f64(&[])], &|g: &mut Graph, x: &[ValueId]| {
        let lo = g.sub(x[2], x[2])?;
        let lo = g.add(lo, x[1])?;
        let hi = g.abs(x[2])?;
        let hi = g.add(lo, hi)?;
        Ok(vec![g.clip(x[0], lo, hi)?, g.cast(x[0], DType::I64)?, g.cast(x[1], DType::F32)?])
    });
}
