//! pfor must never fail where the loop succeeds (issue 16, class 4).
//!
//! Every body here is guarded: an op that fails on some values (integer division by zero,
//! a gather or dynamic slice out of range, a Cholesky factorization of a matrix that is not
//! positive definite) only runs, in the reference loop, on iterations whose values are safe.
//! pfor must match the loop in every control-flow mode — Mask included, where untaken
//! branches and finished while iterations compute on values the loop never feeds to the op.

use crate::common::*;
use crate::converters::control::check;
use pfor::ops::{ControlOp, Op, Raises};
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor_with};

const ALL: &[ControlFlowMode] = &[ControlFlowMode::Auto, ControlFlowMode::Subset, ControlFlowMode::Mask];

/// An op that fails at run time unless its i64 scalar operand is in a safe range.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Risky {
    /// `100 / x` (i64): safe iff `x != 0`.
    Div,
    /// `[10, 20, 30][x]`: safe iff `0 <= x < 3`.
    Gather,
    /// `sum([1, 2, 3, 4, 5][x .. x + 3])`: safe iff `0 <= x <= 2`.
    DynamicSlice,
    /// `sum(cholesky(diag(x, 1)))`: safe iff `x > 0`.
    Cholesky,
}

pub(crate) const RISKY: [Risky; 4] = [Risky::Div, Risky::Gather, Risky::DynamicSlice, Risky::Cholesky];

fn int(g: &mut Graph, v: i64) -> ValueId {
    g.constant(Tensor::scalar(v))
}

/// `lo <= x <= hi`.
fn within(g: &mut Graph, x: ValueId, lo: i64, hi: i64) -> Result<ValueId> {
    let (l, h) = (int(g, lo), int(g, hi));
    let a = g.greater_equal(x, l)?;
    let b = g.less_equal(x, h)?;
    g.logical_and(a, b)
}

impl Risky {
    /// A value the op fails on.
    pub(crate) fn bad_value(self) -> i64 {
        match self {
            Risky::Div | Risky::Cholesky => 0,
            Risky::Gather | Risky::DynamicSlice => -1,
        }
    }

    /// True where [`Risky::apply`] succeeds on `x`.
    pub(crate) fn safe(self, g: &mut Graph, x: ValueId) -> Result<ValueId> {
        match self {
            Risky::Div => {
                let zero = int(g, 0);
                g.not_equal(x, zero)
            }
            Risky::Gather => within(g, x, 0, 2),
            Risky::DynamicSlice => within(g, x, 0, 2),
            Risky::Cholesky => {
                let zero = int(g, 0);
                g.greater(x, zero)
            }
        }
    }

    /// An f64 scalar computed by an op that fails unless `safe(x)`.
    pub(crate) fn apply(self, g: &mut Graph, x: ValueId) -> Result<ValueId> {
        match self {
            Risky::Div => {
                let h = int(g, 100);
                let q = g.div(h, x)?;
                g.cast(q, DType::F64)
            }
            Risky::Gather => {
                let table = g.constant(f64t(&[3], &[10.0, 20.0, 30.0]));
                g.gather(table, x, 0)
            }
            Risky::DynamicSlice => {
                let v = g.constant(f64t(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]));
                let b = g.reshape(x, &[1])?;
                let s = g.dynamic_slice(v, b, &[3])?;
                g.sum_all(s)
            }
            Risky::Cholesky => {
                let xf = g.cast(x, DType::F64)?;
                let one = g.constant(Tensor::scalar(1.0f64));
                let d = g.stack(&[xf, one], 0)?;
                let m = g.matrix_diag(d)?;
                let l = g.cholesky(m)?;
                g.sum_all(l)
            }
        }
    }
}

/// `p && safe(x) ? apply(x) : -1`.
pub(crate) fn guarded_cond(r: Risky, g: &mut Graph, p: ValueId, x: ValueId) -> Result<ValueId> {
    let s = r.safe(g, x)?;
    let pred = g.logical_and(p, s)?;
    let out = g.cond(pred, &[x], |g, a| Ok(vec![r.apply(g, a[0])?]), |g, _| Ok(vec![g.scalar(DType::F64, -1.0)]))?;
    Ok(out[0])
}

/// `c = 0; s = 0; while p && c < 4 && safe(x - c) { s += apply(x - c); c += 1 }; s`: an
/// iteration stops on the first unsafe value (or after 4 steps), so a finished iteration
/// that kept running the body would feed `apply` an unsafe value.
pub(crate) fn guarded_while(r: Risky, g: &mut Graph, p: ValueId, x: ValueId) -> Result<ValueId> {
    let c0 = int(g, 0);
    let s0 = g.scalar(DType::F64, 0.0);
    let out = g.while_loop(
        &[c0, s0],
        &[p, x],
        |g, a| {
            let v = g.sub(a[3], a[0])?;
            let ok = r.safe(g, v)?;
            let four = int(g, 4);
            let more = g.less(a[0], four)?;
            let run = g.logical_and(a[2], more)?;
            g.logical_and(run, ok)
        },
        |g, a| {
            let v = g.sub(a[3], a[0])?;
            let y = r.apply(g, v)?;
            let one = int(g, 1);
            Ok(vec![g.add(a[0], one)?, g.add(a[1], y)?])
        },
    )?;
    Ok(out[1])
}

fn yes(g: &mut Graph) -> ValueId {
    g.constant(Tensor::scalar(true))
}

/// Values hitting the safe and the unsafe side of every [`Risky`] op.
fn mixed() -> Tensor {
    i64t(&[8], &[4, 0, -1, 2, 3, 1, -2, 0])
}

#[test]
fn guarded_ops_in_cond_match_the_loop_in_every_mode() {
    for r in RISKY {
        check(mixed(), ALL, &|g, x| {
            let t = yes(g);
            Ok(vec![guarded_cond(r, g, t, x)?])
        });
    }
}

#[test]
fn guarded_ops_in_while_match_the_loop_in_every_mode() {
    // Mask mode keeps running the body on finished iterations: each one stopped on an unsafe
    // value, which the op must not see.
    for r in RISKY {
        for x in [mixed(), i64t(&[0], &[]), i64t(&[1], &[3])] {
            check(x, ALL, &|g, x| {
                let t = yes(g);
                Ok(vec![guarded_while(r, g, t, x)?])
            });
        }
    }
}

#[test]
fn every_iteration_on_the_unsafe_side() {
    // no iteration takes the risky branch / runs the body: the branch runs on no rows
    for r in RISKY {
        let b = r.bad_value();
        let unsafe_all = i64t(&[3], &[b, b, b]);
        check(unsafe_all.clone(), ALL, &|g, x| {
            let t = yes(g);
            Ok(vec![guarded_cond(r, g, t, x)?])
        });
        check(unsafe_all.clone(), ALL, &|g, x| {
            let t = yes(g);
            Ok(vec![guarded_while(r, g, t, x)?])
        });
    }
}

#[test]
fn loop_invariant_risky_op_under_a_loop_variant_guard() {
    // the risky op reads only loop-invariant values, so it is computed once, not per
    // iteration — but only where some iteration reaches it: here none does
    let bad = i64t(&[4], &[5, 6, 7, 8]);
    for r in RISKY {
        check(bad.clone(), ALL, &|g, x| {
            let unsafe_x = int(g, r.bad_value());
            let hundred = int(g, 100);
            let p = g.greater(x, hundred)?; // false for every iteration
            Ok(vec![guarded_cond(r, g, p, unsafe_x)?, guarded_while(r, g, p, unsafe_x)?])
        });
    }
    // ... while iterations that do reach it see a safe invariant value
    let some = i64t(&[4], &[5, 200, 7, 300]);
    for r in RISKY {
        check(some.clone(), ALL, &|g, x| {
            let safe_x = int(g, 1);
            let hundred = int(g, 100);
            let p = g.greater(x, hundred)?;
            Ok(vec![guarded_cond(r, g, p, safe_x)?, guarded_while(r, g, p, safe_x)?])
        });
    }
}

#[test]
fn guarded_division_in_a_cond_inside_a_while() {
    // while c < x { s += (c is odd) ? 12 / (x - c) : 1; c += 1 }: a finished iteration has
    // c == x, and the division by zero sits in a nested cond
    let body = |g: &mut Graph, x: ValueId| -> Result<Vec<ValueId>> {
        let c0 = int(g, 0);
        let s0 = int(g, 0);
        let out = g.while_loop(
            &[c0, s0],
            &[x],
            |g, a| g.less(a[0], a[2]),
            |g, a| {
                let two = int(g, 2);
                let m = g.floor_mod(a[0], two)?;
                let one = int(g, 1);
                let odd = g.equal(m, one)?;
                let d = g.sub(a[2], a[0])?;
                let inc = g.cond(
                    odd,
                    &[d],
                    |g, b| {
                        let twelve = int(g, 12);
                        Ok(vec![g.div(twelve, b[0])?])
                    },
                    |g, _| Ok(vec![int(g, 1)]),
                )?;
                let one = int(g, 1);
                Ok(vec![g.add(a[0], one)?, g.add(a[1], inc[0])?])
            },
        )?;
        Ok(vec![out[1]])
    };
    check(i64t(&[6], &[3, 0, 1, 4, 2, 5]), ALL, &body);
}

#[test]
fn mask_mode_never_runs_a_branch_holding_a_loop_that_would_not_end() {
    // x >= 0 ? (while c != x { c += 1 }) : x — for x < 0 the loop never ends
    let body = |g: &mut Graph, x: ValueId| -> Result<Vec<ValueId>> {
        let zero = int(g, 0);
        let p = g.greater_equal(x, zero)?;
        g.cond(
            p,
            &[x],
            |g, a| {
                let c0 = int(g, 0);
                g.while_loop(
                    &[c0],
                    &[a[0]],
                    |g, b| g.not_equal(b[0], b[1]),
                    |g, b| {
                        let one = int(g, 1);
                        Ok(vec![g.add(b[0], one)?])
                    },
                )
            },
            |_, a| Ok(vec![a[0]]),
        )
    };
    check(i64t(&[4], &[2, -3, 0, -1]), ALL, &body);
}

fn count_kind(g: &Graph, name: &str) -> usize {
    g.node_ids().into_iter().filter(|&n| g.node(n).is_ok_and(|nd| nd.op.name() == name)).count()
}

#[test]
fn auto_masks_safe_branches_and_partitions_risky_ones() {
    // the subset form partitions the iterations inside one `cond` node (constant predicate);
    // the mask form inlines both branches and selects
    let convert = |risky: bool| -> usize {
        let mut g = Graph::new();
        let xs = g.constant(mixed());
        let out = pfor_with(&mut g, 8, &PforOptions::strict(), |g, i| {
            let x = g.gather(xs, i, 0)?;
            let zero = int(g, 0);
            let p = g.greater(x, zero)?;
            let y = g.cond(
                p,
                &[x],
                |g, a| {
                    let two = int(g, 2);
                    Ok(vec![if risky { g.div(two, a[0])? } else { g.mul(two, a[0])? }])
                },
                |_, a| Ok(vec![a[0]]),
            )?;
            Ok(y)
        })
        .unwrap();
        eval1(&g, out[0]);
        count_kind(&g, "cond")
    };
    assert_eq!(convert(false), 0, "a branch without risky ops is masked");
    assert!(convert(true) > 0, "a branch with an integer division runs on its iterations only");
}

#[test]
fn classification_of_ops_that_fail_on_values() {
    let i64s = TensorType::scalar(DType::I64);
    let f64s = TensorType::scalar(DType::F64);
    let lib = Graph::new().library().clone();
    let div = Op::Binary(pfor::ops::BinaryKind::Div);
    assert_eq!(div.raises(&[i64s.clone(), i64s.clone()], &lib), Raises::On(&[1]));
    assert_eq!(div.raises(&[f64s.clone(), f64s.clone()], &lib), Raises::Never);
    let add = Op::Binary(pfor::ops::BinaryKind::Add);
    assert!(!add.may_raise(&[i64s.clone(), i64s.clone()], &lib));
    // control flow: a cond is as risky as its branches, a while may not terminate, a call
    // as risky as its callee (a recursive one may exceed the call depth)
    let mut g = Graph::new();
    let x = g.input("x", DType::I64, Shape::scalar());
    let t = yes(&mut g);
    let safe = g.cond(t, &[x], |g, a| Ok(vec![g.neg(a[0])?]), |_, a| Ok(vec![a[0]])).unwrap();
    let risky = g
        .cond(t, &[x], |g, a| Ok(vec![Risky::Div.apply(g, a[0])?]), |g, _| Ok(vec![g.scalar(DType::F64, 0.0)]))
        .unwrap();
    let w = guarded_while(Risky::Cholesky, &mut g, t, x).unwrap();
    crate::ops::control::define_fib(&mut g);
    let fib = g.call("fib", &[x]).unwrap();
    let lib = g.library().clone();
    let raises = |v: ValueId| {
        let nd = g.node(v.node).unwrap();
        let tys: Vec<TensorType> = nd.inputs.iter().map(|i| g.value_type(*i).unwrap().clone()).collect();
        nd.op.raises(&tys, &lib)
    };
    assert_eq!(raises(safe[0]), Raises::Never);
    assert_eq!(raises(risky[0]), Raises::Any);
    assert_eq!(raises(w), Raises::Any);
    assert_eq!(raises(fib[0]), Raises::Any);
    let nd = g.node(w.node).unwrap();
    let Op::Control(ControlOp::While { body, .. }) = &nd.op else { panic!("not a while") };
    assert!(body.may_raise(), "cholesky in the body");
}

/// The variable `acc` after one run of `n` iterations of `body(g, x_i)`, by pfor in `mode`
/// and by the loop.
fn accumulated(
    mode: ControlFlowMode,
    x: &Tensor,
    body: &dyn Fn(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> [Tensor; 2] {
    let n = x.shape()[0];
    let run = |vectorized: bool| {
        let mut g = Graph::new();
        let _ = g.variable("acc", Tensor::scalar(0.0f64)).unwrap();
        let xs = g.constant(x.clone());
        let per = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
            let xi = g.gather(xs, i, 0)?;
            body(g, xi)
        };
        let opts = PforOptions::strict().with_control_flow(mode);
        let out = if vectorized { pfor_with(&mut g, n, &opts, per) } else { for_loop(&mut g, n, per) }
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let mut s = Session::new(&g, &out).unwrap();
        s.run(&[]).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        s.variable("acc").unwrap()
    };
    [run(true), run(false)]
}

#[test]
fn side_effects_run_only_on_the_iterations_that_reach_them() {
    // cond: x > 0 ? (acc += x) : x
    let x = f64t(&[4], &[1.0, -2.0, 3.0, -4.0]);
    for mode in ALL.iter().copied() {
        let [got, want] = accumulated(mode, &x, &|g, xi| {
            let zero = g.scalar(DType::F64, 0.0);
            let p = g.greater(xi, zero)?;
            g.cond(p, &[xi], |g, a| Ok(vec![g.assign_add("acc", a[0])?]), |_, a| Ok(vec![a[0]]))
        });
        assert_eq!(got, want, "{mode:?}");
    }
    // while c < x { s = (acc += 1); c += 1 }: a finished iteration must not add
    let k = i64t(&[3], &[2, 0, 3]);
    for mode in ALL.iter().copied() {
        let [got, want] = accumulated(mode, &k, &|g, xi| {
            let c0 = int(g, 0);
            let s0 = g.scalar(DType::F64, 0.0);
            let out = g.while_loop(
                &[c0, s0],
                &[xi],
                |g, a| g.less(a[0], a[2]),
                |g, a| {
                    let one = g.scalar(DType::F64, 1.0);
                    let s = g.assign_add("acc", one)?;
                    let i1 = int(g, 1);
                    Ok(vec![g.add(a[0], i1)?, s])
                },
            )?;
            Ok(vec![out[0]])
        });
        assert_eq!(got, want, "{mode:?}");
    }
}
