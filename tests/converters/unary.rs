//! Oracle tests: unary ops.

use super::oracle::{Spec, assert_oracle};
use pfor::ops::UnaryKind;
use pfor::prelude::*;

#[test]
fn every_unary_op_matches_the_loop() {
    for &k in UnaryKind::ALL {
        let spec = match k {
            UnaryKind::LogicalNot => Spec::bool(&[3, 2]),
            UnaryKind::Log | UnaryKind::Sqrt | UnaryKind::Rsqrt => Spec::uniform(DType::F64, &[3, 2], 0.5, 2.0),
            UnaryKind::Asin | UnaryKind::Acos => Spec::uniform(DType::F64, &[3, 2], -0.9, 0.9),
            _ => Spec::f64(&[3, 2]),
        };
        assert_oracle(&[spec], &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.unary(k, x[0])?]));
    }
}

#[test]
fn unary_chain_on_f32_scalar_per_iteration() {
    assert_oracle(&[Spec::f32(&[])], &|g: &mut Graph, x: &[ValueId]| {
        let a = g.tanh(x[0])?;
        let b = g.exp(a)?;
        Ok(vec![g.neg(b)?, a])
    });
}
