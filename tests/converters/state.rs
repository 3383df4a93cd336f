//! Variables inside pfor: reads are invariant, assign_add accumulates, assign of a
//! loop-variant value is an error.

use crate::common::coverage::pfor_recorded;
use crate::common::*;
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

#[test]
fn assign_add_of_a_stacked_value_reduces_then_applies() {
    let mut g = Graph::new();
    let _ = g.variable("acc", f64t(&[2], &[1.0, 1.0])).unwrap();
    let x = g.constant(f64t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let out = pfor_recorded(&mut g, 3, &PforOptions::strict(), |g, i| {
        let xi = g.gather(x, i, 0)?;
        let w = g.read_variable("acc")?;
        let y = g.mul(xi, w)?;
        Ok(vec![g.assign_add("acc", xi)?, y])
    })
    .unwrap();
    let mut s = Session::new(&g, &out).unwrap();
    let r = s.run(&[]).unwrap();
    assert_eq!(r[1], f64t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    assert_eq!(s.variable("acc").unwrap(), f64t(&[2], &[10.0, 13.0]));
}

#[test]
fn assign_of_a_stacked_value_is_an_error() {
    let mut g = Graph::new();
    let _ = g.variable("v", f64t(&[], &[0.0])).unwrap();
    let e = pfor_recorded(&mut g, 3, &PforOptions::strict(), |g, i| {
        let x = g.cast(i, DType::F64)?;
        Ok(vec![g.assign("v", x)?])
    })
    .unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { op, .. } if op == "assign"), "{e}");
}

#[test]
fn assign_of_an_invariant_value_writes_it_once_as_the_loop_does() {
    let run = |vectorized: bool| -> (Tensor, Tensor) {
        let mut g = Graph::new();
        let _ = g.variable("v", f64t(&[2], &[0.0, 0.0])).unwrap();
        let c = g.constant(f64t(&[2], &[3.0, 4.0]));
        let body = |g: &mut Graph, _i: ValueId| -> Result<Vec<ValueId>> {
            let w = g.mul_scalar(c, 2.0)?;
            Ok(vec![g.assign("v", w)?])
        };
        let out = if vectorized {
            pfor_recorded(&mut g, 3, &PforOptions::strict(), body).unwrap()
        } else {
            for_loop(&mut g, 3, body).unwrap()
        };
        let mut s = Session::new(&g, &out).unwrap();
        let r = s.run(&[]).unwrap().remove(0);
        (r, s.variable("v").unwrap())
    };
    let (vec_out, vec_var) = run(true);
    let (loop_out, loop_var) = run(false);
    assert_eq!(vec_var, f64t(&[2], &[6.0, 8.0]));
    assert_eq!(vec_var, loop_var);
    // the loop stacks each iteration's (equal) result; pfor's output is that value unstacked
    // and the driver stacks it on return
    assert_eq!(vec_out, loop_out);
}
