//! Oracle tests: binary ops, in every invariance pair and broadcasting combination.

use super::oracle::{Spec, assert_oracle};
use pfor::ops::BinaryKind;
use pfor::ops::binary::BinaryDtypeRule;
use pfor::prelude::*;

#[test]
fn every_binary_op_matches_the_loop() {
    for &k in BinaryKind::ALL {
        let (a, b) = match k {
            BinaryKind::LogicalAnd | BinaryKind::LogicalOr | BinaryKind::LogicalXor => {
                (Spec::bool(&[3, 2]), Spec::bool(&[2]))
            }
            BinaryKind::Pow => (Spec::uniform(DType::F64, &[3, 2], 0.5, 2.0), Spec::f64(&[2])),
            k if k.dtype_rule() == BinaryDtypeRule::Integer => (Spec::int(&[3, 2], -70, 70), Spec::int(&[2], -3, 70)),
            _ => (Spec::f64(&[3, 2]), Spec::f64(&[2])),
        };
        assert_oracle(&[a.clone(), b.clone()], &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.binary(k, x[0], x[1])?]));
        assert_oracle(&[b, a], &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.binary(k, x[0], x[1])?]));
    }
}

#[test]
fn tf_style_broadcasting_x735_vs_y35() {
    // x[7,3,5] vs y[3,5] (and reversed, and vs a scalar) in all invariance pairs.
    for (sa, sb) in
        [(vec![7, 3, 5], vec![3, 5]), (vec![3, 5], vec![7, 3, 5]), (vec![7, 1, 5], vec![3, 1]), (vec![], vec![3, 5])]
    {
        assert_oracle(&[Spec::f64(&sa), Spec::f64(&sb)], &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![g.add(x[0], x[1])?, g.mul(x[0], x[1])?, g.less(x[0], x[1])?])
        });
    }
}

#[test]
fn integer_division_semantics_survive_vectorization() {
    assert_oracle(&[Spec::int(&[4], -9, 9), Spec::int(&[4], 1, 5)], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.floor_div(x[0], x[1])?, g.floor_mod(x[0], x[1])?, g.div(x[0], x[1])?])
    });
}
