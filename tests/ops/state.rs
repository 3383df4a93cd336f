//! Value tests for variables.

use crate::common::*;
use pfor::prelude::*;

#[test]
fn assign_and_assign_add_update_the_session_state() {
    let mut g = Graph::new();
    let _ = g.variable("acc", f64t(&[2], &[1.0, 2.0])).unwrap();
    let d = g.constant(f64t(&[2], &[10.0, 20.0]));
    let added = g.assign_add("acc", d).unwrap();
    let mut s = session(&g, &[added]).unwrap();
    assert_eq!(s.run(&[]).unwrap()[0], f64t(&[2], &[11.0, 22.0]));
    assert_eq!(s.run(&[]).unwrap()[0], f64t(&[2], &[21.0, 42.0]));
    assert_eq!(s.variable("acc").unwrap(), f64t(&[2], &[21.0, 42.0]));

    let z = g.constant(f64t(&[2], &[0.5, 0.5]));
    let set = g.assign("acc", z).unwrap();
    let read = g.read_variable("acc").unwrap();
    let doubled = g.add(read, read).unwrap();
    // program order: assign (earlier node) runs before the later read
    let mut s = session(&g, &[set, doubled]).unwrap();
    let out = s.run(&[]).unwrap();
    assert_eq!(out[0], f64t(&[2], &[0.5, 0.5]));
    assert_eq!(out[1], f64t(&[2], &[1.0, 1.0]));
}

#[test]
fn variable_write_type_errors() {
    let mut g = Graph::new();
    let _ = g.variable("v", f32t(&[2], &[0.0, 0.0])).unwrap();
    let bad = g.constant(f32t(&[3], &[0.0; 3]));
    let e = g.assign("v", bad).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "assign"), "{e}");
    let bad = g.constant(f64t(&[2], &[0.0; 2]));
    assert!(g.assign_add("v", bad).is_err());
    let ok = g.constant(f32t(&[2], &[1.0; 2]));
    assert!(matches!(g.assign("nope", ok), Err(Error::UnknownVariable { .. })));
}
