//! Control flow inside pfor: cond and while in Subset and Mask modes, checked against the
//! reference loop (static and dynamic n, chunked with a remainder), plus nesting, the
//! stackedness fixpoint, and the guarantee that Subset never runs an untaken branch.

use crate::common::coverage::pfor_recorded;
use crate::common::*;
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions};

pub(crate) type Body<'a> = &'a dyn Fn(&mut Graph, ValueId) -> Result<Vec<ValueId>>;

/// pfor (each mode; static n, dynamic n, chunked) == for_loop, for body(g, x_i).
pub(crate) fn check(x: Tensor, modes: &[ControlFlowMode], body: Body) {
    let n = x.shape()[0];
    for &mode in modes {
        for variant in 0..3 {
            let mut g = Graph::new();
            let xc = g.constant(x.clone());
            let nv = g.input("n", DType::I64, Shape::scalar());
            let per = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
                let xi = g.gather(xc, i, 0)?;
                body(g, xi)
            };
            let mut opts = PforOptions::strict().with_control_flow(mode);
            if variant == 2 {
                opts = opts.with_chunk_size(2);
            }
            let v =
                if variant == 1 { pfor_recorded(&mut g, nv, &opts, per) } else { pfor_recorded(&mut g, n, &opts, per) }
                    .unwrap_or_else(|e| panic!("{mode:?} variant {variant}: {e}"));
            let l = for_loop(&mut g, n, per).unwrap();
            g.verify().unwrap();
            let mut fetch = v.clone();
            fetch.extend(&l);
            let r = run_once(&g, &fetch, &[(nv, Tensor::scalar(n as i64))])
                .unwrap_or_else(|e| panic!("{mode:?} variant {variant}: {e}"));
            let k = v.len();
            for j in 0..k {
                assert_close(&r[j], &r[k + j], 1e-12);
            }
        }
    }
}

const BOTH: &[ControlFlowMode] = &[ControlFlowMode::Subset, ControlFlowMode::Mask, ControlFlowMode::Auto];

fn scalar_i(g: &mut Graph, v: i64) -> ValueId {
    g.constant(Tensor::scalar(v))
}

fn scalar_f(g: &mut Graph, v: f64) -> ValueId {
    g.constant(Tensor::scalar(v))
}

/// while c < xi { c += 1; s += 2c }
fn count_loop(g: &mut Graph, xi: ValueId) -> Result<Vec<ValueId>> {
    let c0 = scalar_i(g, 0);
    let s0 = scalar_f(g, 0.0);
    g.while_loop(
        &[c0, s0],
        &[xi],
        |g, a| g.less(a[0], a[2]),
        |g, a| {
            let one = g.constant(Tensor::scalar(1i64));
            let c = g.add(a[0], one)?;
            let cf = g.cast(c, DType::F64)?;
            let two = g.constant(Tensor::scalar(2.0f64));
            let d = g.mul(cf, two)?;
            Ok(vec![c, g.add(a[1], d)?])
        },
    )
}

#[test]
fn while_with_per_iteration_trip_counts_4_0_2() {
    check(i64t(&[3], &[4, 0, 2]), BOTH, &count_loop);
    check(i64t(&[0], &[]), BOTH, &count_loop); // zero iterations
    check(i64t(&[5], &[1, 3, 0, 7, 2]), BOTH, &count_loop);
}

/// The RNN pattern: each iteration walks its own sequence `seq_i [T, 2]` (a capture of the
/// loop) for `len_i` steps reading row `seq_i[t]` — in Subset mode the read goes straight
/// to the full captured sequences (`gather_nd` on the active positions), never copying the
/// active rows; every mode must still match the loop, including the empty sequence.
#[test]
fn while_reading_its_own_sequence_row_per_step() {
    // x_i = [len, then 4 rows of 2 values]
    let rows = [
        [3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        [0.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0],
        [4.0, -1.0, 0.5, 2.0, -2.0, 0.25, 1.5, 3.0, -3.0],
        [1.0, 10.0, 20.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ];
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    let seq_body = |g: &mut Graph, xi: ValueId| -> Result<Vec<ValueId>> {
        let zero = scalar_i(g, 0);
        let len = g.gather(xi, zero, 0)?;
        let len = g.cast(len, DType::I64)?;
        let tail = g.slice(xi, &[1], &[-1])?;
        let seq = g.reshape(tail, &[4, 2])?;
        let t0 = scalar_i(g, 0);
        let h0 = g.constant(Tensor::zeros(DType::F64, &[2]).unwrap());
        let out = g.while_loop(
            &[t0, h0],
            &[len, seq],
            |g, a| g.less(a[0], a[2]),
            |g, a| {
                let row = g.gather(a[3], a[0], 0)?;
                let half = g.constant(Tensor::scalar(0.5f64));
                let h = g.mul(a[1], half)?;
                let one = g.constant(Tensor::scalar(1i64));
                Ok(vec![g.add(a[0], one)?, g.add(h, row)?])
            },
        )?;
        Ok(vec![out[1]])
    };
    check(f64t(&[4, 9], &flat), BOTH, &seq_body);
}

#[test]
fn while_with_invariant_predicate_and_stacked_carry() {
    check(f64t(&[4], &[1.0, -2.0, 0.5, 3.0]), BOTH, &|g, xi| {
        let c0 = scalar_i(g, 0);
        let three = scalar_i(g, 3);
        let out = g.while_loop(
            &[c0, xi],
            &[three],
            |g, a| g.less(a[0], a[2]),
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let s = g.mul(a[1], a[1])?;
                Ok(vec![g.add(a[0], one)?, g.sub(s, a[1])?])
            },
        )?;
        Ok(out)
    });
}

#[test]
fn five_carries_whose_stackedness_moves_one_per_step() {
    check(f64t(&[3], &[1.0, 2.0, 3.0]), BOTH, &|g, xi| {
        let c0 = scalar_i(g, 0);
        let z: Vec<ValueId> = (0..4).map(|_| scalar_f(g, 0.0)).collect();
        let six = scalar_i(g, 6);
        let out = g.while_loop(
            &[c0, xi, z[0], z[1], z[2], z[3]],
            &[six],
            |g, a| g.less(a[0], a[6]),
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let half = g.constant(Tensor::scalar(0.5f64));
                let a0 = g.mul(a[1], half)?;
                Ok(vec![g.add(a[0], one)?, a[1], a0, a[2], a[3], a[4]])
            },
        )?;
        Ok(out)
    });
}

fn pos_then_loop_else_neg(g: &mut Graph, yi: ValueId) -> Result<Vec<ValueId>> {
    // cond∘while: y > 0 ? (loop adding 1.5 y times) : -y
    let zero = scalar_f(g, 0.0);
    let p = g.greater(yi, zero)?;
    g.cond(
        p,
        &[yi],
        |g, a| {
            let c0 = g.constant(Tensor::scalar(0.0f64));
            let s0 = g.constant(Tensor::scalar(0.0f64));
            let out = g.while_loop(
                &[c0, s0],
                &[a[0]],
                |g, b| g.less(b[0], b[2]),
                |g, b| {
                    let one = g.constant(Tensor::scalar(1.0f64));
                    let d = g.constant(Tensor::scalar(1.5f64));
                    Ok(vec![g.add(b[0], one)?, g.add(b[1], d)?])
                },
            )?;
            Ok(vec![out[1]])
        },
        |g, a| Ok(vec![g.neg(a[0])?]),
    )
}

#[test]
fn nested_control_flow_four_ways() {
    let y = f64t(&[5], &[4.0, -1.0, 2.0, -2.0, 2.0]);
    check(y.clone(), BOTH, &pos_then_loop_else_neg);
    // while∘cond: while c < |y| { s += (c is even ? 1 : 10) }
    check(y.clone(), BOTH, &|g, yi| {
        let c0 = scalar_f(g, 0.0);
        let s0 = scalar_f(g, 0.0);
        let ay = g.abs(yi)?;
        g.while_loop(
            &[c0, s0],
            &[ay],
            |g, a| g.less(a[0], a[2]),
            |g, a| {
                let two = g.constant(Tensor::scalar(2.0f64));
                let m = g.floor_mod(a[0], two)?;
                let z = g.constant(Tensor::scalar(0.0f64));
                let even = g.equal(m, z)?;
                let inc = g.cond(
                    even,
                    &[a[1]],
                    |g, b| Ok(vec![g.add_scalar(b[0], 1.0)?]),
                    |g, b| Ok(vec![g.add_scalar(b[0], 10.0)?]),
                )?;
                let one = g.constant(Tensor::scalar(1.0f64));
                Ok(vec![g.add(a[0], one)?, inc[0]])
            },
        )
    });
    // while∘while: sum_{c < |y|} sum_{d < c} 1
    check(y.clone(), BOTH, &|g, yi| {
        let c0 = scalar_f(g, 0.0);
        let s0 = scalar_f(g, 0.0);
        let ay = g.abs(yi)?;
        g.while_loop(
            &[c0, s0],
            &[ay],
            |g, a| g.less(a[0], a[2]),
            |g, a| {
                let d0 = g.constant(Tensor::scalar(0.0f64));
                let inner = g.while_loop(
                    &[d0, a[1]],
                    &[a[0]],
                    |g, b| g.less(b[0], b[2]),
                    |g, b| {
                        let one = g.constant(Tensor::scalar(1.0f64));
                        Ok(vec![g.add(b[0], one)?, g.add(b[1], one)?])
                    },
                )?;
                let one = g.constant(Tensor::scalar(1.0f64));
                Ok(vec![g.add(a[0], one)?, inner[1]])
            },
        )
    });
    // cond∘cond
    check(y, BOTH, &|g, yi| {
        let zero = scalar_f(g, 0.0);
        let p = g.greater(yi, zero)?;
        g.cond(
            p,
            &[yi],
            |g, a| {
                let three = g.constant(Tensor::scalar(3.0f64));
                let q = g.less(a[0], three)?;
                g.cond(q, &[a[0]], |g, b| Ok(vec![g.square(b[0])?]), |g, b| Ok(vec![g.sqrt(b[0])?]))
            },
            |g, a| Ok(vec![g.mul_scalar(a[0], 2.0)?]),
        )
    });
}

#[test]
fn cond_where_every_iteration_takes_the_same_side() {
    check(f64t(&[3], &[1.0, 2.0, 3.0]), BOTH, &pos_then_loop_else_neg);
    check(f64t(&[3], &[-1.0, -2.0, -3.0]), BOTH, &pos_then_loop_else_neg);
}

#[test]
fn cond_with_invariant_predicate_and_stacked_args() {
    check(f64t(&[4], &[1.0, -2.0, 0.5, 3.0]), BOTH, &|g, xi| {
        let t = g.constant(Tensor::scalar(true));
        let k = scalar_f(g, 5.0);
        g.cond(t, &[xi, k], |g, a| Ok(vec![g.mul(a[0], a[1])?, a[1]]), |_, a| Ok(vec![a[1], a[0]]))
    });
}

#[test]
fn subset_mode_never_evaluates_an_untaken_branch() {
    // x >= 0 takes a branch with a loop `while c != x` (never ends for negative x) and a
    // gather at x (out of range for x >= 3 is impossible here, but for negative x it would
    // be): iterations with x < 0 must never run it.
    let body = |g: &mut Graph, xi: ValueId| -> Result<Vec<ValueId>> {
        let zero = scalar_i(g, 0);
        let p = g.greater_equal(xi, zero)?;
        let table = g.constant(f64t(&[3], &[10.0, 20.0, 30.0]));
        g.cond(
            p,
            &[xi, table],
            |g, a| {
                let c0 = g.constant(Tensor::scalar(0i64));
                let out = g.while_loop(
                    &[c0],
                    &[a[0]],
                    |g, b| g.not_equal(b[0], b[1]),
                    |g, b| {
                        let one = g.constant(Tensor::scalar(1i64));
                        Ok(vec![g.add(b[0], one)?])
                    },
                )?;
                Ok(vec![g.gather(a[1], out[0], 0)?])
            },
            |g, a| Ok(vec![g.cast(a[0], DType::F64)?]),
        )
    };
    let x = i64t(&[5], &[2, -3, 0, -1, 1]);
    check(x.clone(), &[ControlFlowMode::Subset, ControlFlowMode::Auto], &body);
    // and the loop itself shows the branch would fail for the other iterations
    let mut g = Graph::new();
    let table = g.constant(f64t(&[3], &[10.0, 20.0, 30.0]));
    let bad = g.constant(Tensor::scalar(-1i64));
    let out = g.gather(table, bad, 0).unwrap();
    assert!(run_once(&g, &[out], &[]).is_err());
}

#[test]
fn non_recursive_call_is_converted_and_recursive_call_is_auto_batched() {
    let x = i64t(&[4], &[3, 5, 0, 7]);
    let mut g = Graph::new();
    g.function("sq_plus", &[TensorType::scalar(DType::I64)], |g, p| {
        let s = g.mul(p[0], p[0])?;
        let one = g.constant(Tensor::scalar(1i64));
        Ok(vec![g.add(s, one)?])
    })
    .unwrap();
    crate::ops::control::define_fib(&mut g);
    let xc = g.constant(x);
    let v = pfor_recorded(&mut g, 4, &PforOptions::strict(), |g, i| {
        let xi = g.gather(xc, i, 0)?;
        g.call("sq_plus", &[xi])
    })
    .unwrap();
    assert_eq!(eval1(&g, v[0]), i64t(&[4], &[10, 26, 1, 50]));
    // Strict mode: the recursive call is handed off to the auto-batching VM (no fallback).
    let (f, report) = pfor::vectorize::pfor_with_report(&mut g, 4, &PforOptions::strict(), |g, i| {
        let xi = g.gather(xc, i, 0)?;
        g.call("fib", &[xi])
    })
    .unwrap();
    assert!(report.fallbacks.is_empty(), "{:?}", report.fallbacks);
    assert_eq!(eval1(&g, f[0]), i64t(&[4], &[2, 5, 0, 13]));
}
