//! Oracle tests: linear algebra (batched over the loop axis).

use super::oracle::{Spec, assert_oracle};
use pfor::prelude::*;

#[test]
fn linalg_ops_match_the_loop() {
    // a well-conditioned SPD matrix per iteration: a a^T + 3 I
    assert_oracle(&[Spec::f64(&[3, 3]), Spec::f64(&[3, 2])], &|g: &mut Graph, x: &[ValueId]| {
        let at = g.transpose(x[0], &[1, 0])?;
        let s = g.matmul(x[0], at)?;
        let eye = g.constant(Tensor::from_array(ndarray::Array2::<f64>::eye(3) * 3.0));
        let spd = g.add(s, eye)?;
        let l = g.cholesky(spd)?;
        Ok(vec![
            g.matrix_inverse(spd)?,
            g.determinant(spd)?,
            g.log_abs_det(spd)?,
            l,
            g.solve(spd, x[1])?,
            g.triangular_solve(l, x[1], true, false)?,
            g.trace(x[0])?,
            g.matrix_diag_part(x[1])?,
        ])
    });
    assert_oracle(&[Spec::f64(&[4])], &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.matrix_diag(x[0])?]));
}
