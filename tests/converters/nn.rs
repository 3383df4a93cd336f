//! Oracle tests: nn layers with stacked and invariant parameters.

use super::oracle::{Spec, assert_oracle};
use pfor::prelude::*;

#[test]
fn bias_softmax_losses() {
    assert_oracle(&[Spec::f64(&[2, 3]), Spec::f64(&[3])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![
            g.bias_add(x[0], x[1])?,
            g.softmax(x[0], -1)?,
            g.softmax(x[0], 0)?,
            g.log_softmax(x[0], 1)?,
            g.l2_loss(x[0])?,
        ])
    });
    assert_oracle(
        &[Spec::f64(&[2, 3]), Spec::uniform(DType::F64, &[2, 3], 0.0, 1.0), Spec::int(&[2], 0, 3)],
        &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![
                g.softmax_cross_entropy(x[1], x[0])?,
                g.sparse_softmax_cross_entropy(x[2], x[0])?,
                g.sigmoid_cross_entropy(x[1], x[0])?,
            ])
        },
    );
}

#[test]
fn normalization_layers() {
    assert_oracle(&[Spec::f64(&[2, 4]), Spec::f64(&[4]), Spec::f64(&[4])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.layer_norm(x[0], x[1], x[2], 1e-5)?])
    });
    // gamma / beta broadcast like Keras ([1, C] and [T, C])
    assert_oracle(&[Spec::f64(&[2, 4]), Spec::f64(&[1, 4]), Spec::f64(&[2, 4])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.layer_norm(x[0], x[1], x[2], 1e-5)?])
    });
    assert_oracle(
        &[
            Spec::f64(&[2, 3]),
            Spec::f64(&[3]),
            Spec::uniform(DType::F64, &[3], 0.5, 2.0),
            Spec::f64(&[3]),
            Spec::f64(&[3]),
        ],
        &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.batch_norm(x[0], x[1], x[2], x[3], x[4], 1e-3)?]),
    );
}
