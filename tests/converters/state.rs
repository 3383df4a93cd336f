//! Variables inside pfor: reads are invariant, assign_add accumulates, assign of a
//! loop-variant value is an error.

use crate::common::*;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

#[test]
fn assign_add_of_a_stacked_value_reduces_then_applies() {
    let mut g = Graph::new();
    let _ = g.variable("acc", f64t(&[2], &[1.0, 1.0])).unwrap();
    let x = g.constant(f64t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let out = pfor_with(&mut g, 3, &PforOptions::strict(), |g, i| {
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
    let e = pfor_with(&mut g, 3, &PforOptions::strict(), |g, i| {
        let x = g.cast(i, DType::F64)?;
        Ok(vec![g.assign("v", x)?])
    })
    .unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { op, .. } if op == "assign"), "{e}");
}
