//! The declared op signatures (`src/ops/signature.rs`) agree with the registry and the
//! derivative rules: a kind with a batching class has a converter, a linear kind is
//! differentiable, and the derived converters and JVPs reproduce the loop and the
//! hand-written rules (the oracle tests in `tests/converters/` and `tests/autodiff/` run
//! every kind through them).

use pfor::autodiff::is_differentiable;
use pfor::ops::{Batching, Linearity, ReduceForm, ReduceKind, ReduceOp, UnaryKind};
use pfor::prelude::*;
use pfor::vectorize::{OpKey, Registry};

#[test]
fn every_kind_with_a_batching_class_has_a_converter() {
    let reg = Registry::builtin();
    let declared: Vec<OpKind> = OpKind::all().into_iter().filter(|k| k.batching() != Batching::Custom).collect();
    assert!(declared.len() >= UnaryKind::ALL.len() + ReduceKind::ALL.len(), "{} declared kinds", declared.len());
    for k in declared {
        assert!(
            reg.contains(&OpKey::Builtin(k)),
            "{}/{k} declares {:?} but has no converter",
            k.family(),
            k.batching()
        );
    }
}

#[test]
fn every_linear_kind_is_differentiable() {
    for k in OpKind::all() {
        if k.linearity().is_linear() {
            assert!(is_differentiable(k), "{}/{k} is declared {:?} but not differentiable", k.family(), k.linearity());
        }
    }
    assert_eq!(OpKind::Unary(UnaryKind::Neg).linearity(), Linearity::Linear);
    assert!(!OpKind::Unary(UnaryKind::Exp).linearity().is_linear());
}

#[test]
fn reductions_map_every_axis_attribute() {
    let shift = |a: i64| if a >= 0 { a + 1 } else { a };
    for &k in ReduceKind::ALL {
        let op = match k.form() {
            ReduceForm::Axes => ReduceOp::Axes { kind: k, axes: vec![0, -1], keep_dims: true },
            ReduceForm::Arg => ReduceOp::Arg { kind: k, axis: 0 },
            ReduceForm::Scan => ReduceOp::Scan { kind: k, axis: 0, exclusive: true, reverse: false },
        };
        let mapped = Op::Reduce(op.clone()).map_axes(&shift).expect("reductions have axes");
        let Op::Reduce(m) = mapped else { panic!("{k:?} mapped to another family") };
        assert_eq!(m.kind(), k);
        let want = op.to_string().replace("0", "1");
        assert_eq!(m.to_string(), want, "{k:?}");
    }
}
