//! The static one-row form (`PforReport::one_row`): at a loop length known to be 1, pfor
//! emits the body itself on iteration 0 (no loop, no gather of a row by a vector of
//! indices), after the normal conversion succeeded; a body with a per-iteration effect keeps
//! the conversion. The oracle (`oracle.rs`, n = 1 with a static n) checks its values
//! against the loop for every converter family.

use crate::common::*;
use crate::converters::driver::custom_body;
use pfor::ops::ControlKind;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, Randomness, pfor_with_report};

/// Kinds of the nodes that computing `outs` runs.
fn kinds_in(g: &Graph, outs: &[ValueId]) -> Vec<OpKind> {
    g.ancestors(outs).unwrap().into_iter().map(|n| g.node(n).unwrap().op.kind()).collect()
}

#[test]
fn static_one_row_is_the_body_on_row_zero() {
    let mut g = Graph::new();
    let xs = g.input("xs", DType::F64, [1, 4]);
    let w = g.constant(Tensor::randn_f64(&[4, 3], 1).unwrap());
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let x = g.gather(xs, i, 0)?;
        let x = g.reshape(x, &[1, 4])?;
        let y = g.matmul(x, w)?;
        // control flow on a loop-variant predicate: one scalar cond, as in the loop
        let s = g.sum_all(y)?;
        let zero = g.scalar(DType::F64, 0.0);
        let p = g.greater(s, zero)?;
        let c = g.cond(p, &[y], |g, a| Ok(vec![g.exp(a[0])?]), |g, a| Ok(vec![g.neg(a[0])?]))?;
        Ok(vec![c[0], i])
    };
    let (out, report) = pfor_with_report(&mut g, 1, &PforOptions::strict(), body).unwrap();
    assert!(report.one_row, "{report:?}");
    assert!(report.converted > 0, "the conversion still ran: {report:?}");
    let want = for_loop(&mut g, 1, body).unwrap();
    // no loop-index vector: the row is gathered by the scalar 0, the cond is not converted
    let kinds = kinds_in(&g, &out);
    assert_eq!(kinds.iter().filter(|k| **k == OpKind::Control(ControlKind::Cond)).count(), 1, "{g}");
    assert!(!kinds.iter().any(|k| matches!(k, OpKind::Control(ControlKind::For))), "{g}");
    for xv in [Tensor::randn_f64(&[1, 4], 2).unwrap(), Tensor::randn_f64(&[1, 4], 3).unwrap()] {
        let mut fetch = out.clone();
        fetch.extend(&want);
        let r = run_once(&g, &fetch, &[(xs, xv)]).unwrap();
        assert_eq!(r[0].shape(), &[1, 1, 3]);
        assert_eq!(r[1], i64t(&[1], &[0]));
        assert_close(&r[0], &r[2], 1e-12);
        assert_eq!(r[1], r[3]);
    }
}

#[test]
fn one_row_form_is_static_n_equal_one_only() {
    let body = |g: &mut Graph, xs: ValueId, i: ValueId| -> Result<Vec<ValueId>> {
        let x = g.gather(xs, i, 0)?;
        Ok(vec![g.tanh(x)?])
    };
    for (n, dynamic, want) in [(1usize, false, true), (2, false, false), (0, false, false), (1, true, false)] {
        let mut g = Graph::new();
        let xs = g.constant(Tensor::randn_f64(&[n, 3], 4).unwrap());
        let n_in = g.input("n", DType::I64, Shape::scalar());
        let r = if dynamic {
            pfor_with_report(&mut g, n_in, &PforOptions::strict(), |g, i| body(g, xs, i))
        } else {
            pfor_with_report(&mut g, n, &PforOptions::strict(), |g, i| body(g, xs, i))
        };
        assert_eq!(r.unwrap().1.one_row, want, "n = {n}, dynamic = {dynamic}");
    }
}

#[test]
fn strict_still_fails_at_one_row_on_a_missing_converter() {
    let mut g = Graph::new();
    let x = g.constant(f64t(&[1, 2], &[1.0, 2.0]));
    let e = pfor_with_report(&mut g, 1, &PforOptions::strict(), |g, i| custom_body(g, x, i)).unwrap_err();
    assert!(matches!(&e, Error::NoConverter { op, .. } if op == "scale2"), "{e}");
}

#[test]
fn a_body_with_per_iteration_effects_keeps_the_conversion() {
    // a random generator: its draws follow the Randomness policy, so the conversion stays
    let mut g = Graph::new();
    let key = g.constant(Tensor::scalar(7i64));
    for policy in [Randomness::Different, Randomness::Same] {
        let opts = PforOptions::strict().with_randomness(policy);
        let (out, report) =
            pfor_with_report(&mut g, 1, &opts, |g, _i| Ok(vec![g.random_normal(key, &[3], DType::F64, 0.0, 1.0)?]))
                .unwrap();
        assert!(!report.one_row, "{policy:?}");
        assert_eq!(eval1(&g, out[0]).shape(), &[1, 3]);
    }
    // the same generator inside a cond's branch
    let (_, report) = pfor_with_report(&mut g, 1, &PforOptions::strict(), |g, i| {
        let zero = g.constant(Tensor::scalar(0i64));
        let p = g.equal(i, zero)?;
        let r = g.cond(
            p,
            &[key],
            |g, a| Ok(vec![g.random_normal(a[0], &[3], DType::F64, 0.0, 1.0)?]),
            |g, _| Ok(vec![g.constant(Tensor::zeros(DType::F64, &[3])?)]),
        )?;
        Ok(r)
    })
    .unwrap();
    assert!(!report.one_row);
}

#[test]
fn gradient_through_a_one_row_pfor_matches_the_loop() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::randn_f64(&[1, 3], 5).unwrap());
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let r = g.gather(x, i, 0)?;
        let s = g.sin(r)?;
        Ok(vec![g.sum_all(s)?])
    };
    let (v, report) = pfor_with_report(&mut g, 1, &PforOptions::strict(), body).unwrap();
    assert!(report.one_row);
    let l = for_loop(&mut g, 1, body).unwrap();
    let gv = pfor::autodiff::gradients(&mut g, &v, &[x], None).unwrap();
    let gl = pfor::autodiff::gradients(&mut g, &l, &[x], None).unwrap();
    let r = eval(&g, &[gv[0], gl[0], v[0], l[0]]);
    assert_close(&r[0], &r[1], 1e-12);
    assert_close(&r[2], &r[3], 1e-12);
}
