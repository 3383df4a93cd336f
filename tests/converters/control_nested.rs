//! Control flow inside nested pfor: the nested-control-flow oracle over two (and three)
//! pfor levels × {cond, while} × a trip count / predicate taken from the outer index, the
//! inner index or both, in every control-flow mode, strict (`Fallback::Error`), with static,
//! dynamic and chunked loop lengths, checked against nested reference loops. In Subset mode
//! an inner `while` / `cond` whose predicate varies with the inner index is rebuilt by the
//! enclosing pfor over the combined iteration space (`converters/control/combined.rs`).

use crate::common::coverage::pfor_recorded;
use crate::common::*;
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions};

/// Where the trip count (while) / predicate input (cond) comes from.
#[derive(Clone, Copy, Debug)]
enum Trip {
    Outer,
    Inner,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Construct {
    Cond,
    While,
    /// The same `while` under `IterationCap::stop(2)` (the rebuilt loop keeps the cap).
    CappedWhile,
}

const MODES: [ControlFlowMode; 3] = [ControlFlowMode::Subset, ControlFlowMode::Mask, ControlFlowMode::Auto];

/// `while c < t { c += 1; s += c·f + y/2 + 0.25 }` with a pass-through carry `f` (returns
/// `s`, `c`, `f`), or `t < 2 ? t·f + y : (t - f)·y` (both branches use every argument).
fn construct(g: &mut Graph, what: Construct, t: ValueId, f: ValueId, y: ValueId) -> Result<Vec<ValueId>> {
    match what {
        Construct::While | Construct::CappedWhile => {
            let c0 = g.constant(Tensor::scalar(0i64));
            let s0 = g.constant(Tensor::scalar(0.0f64));
            let quarter = g.constant(Tensor::scalar(0.25f64));
            let cond = |g: &mut Graph, a: &[ValueId]| g.less(a[0], a[3]);
            let body = |g: &mut Graph, a: &[ValueId]| -> Result<Vec<ValueId>> {
                let one = g.constant(Tensor::scalar(1i64));
                let c = g.add(a[0], one)?;
                let cf = g.cast(c, DType::F64)?;
                let d = g.mul(cf, a[2])?;
                let h = g.mul_scalar(a[4], 0.5)?;
                let d = g.add(d, h)?;
                let d = g.add(d, a[5])?;
                Ok(vec![c, g.add(a[1], d)?, a[2]])
            };
            if what == Construct::CappedWhile {
                g.while_loop_with(&[c0, s0, f], &[t, y, quarter], IterationCap::stop(2), cond, body)
            } else {
                g.while_loop(&[c0, s0, f], &[t, y, quarter], cond, body)
            }
        }
        Construct::Cond => {
            let two = g.constant(Tensor::scalar(2i64));
            let p = g.less(t, two)?;
            let tf = g.cast(t, DType::F64)?;
            g.cond(
                p,
                &[tf, f, y],
                |g, a| {
                    let m = g.mul(a[0], a[1])?;
                    Ok(vec![g.add(m, a[2])?])
                },
                |g, a| {
                    let d = g.sub(a[0], a[1])?;
                    Ok(vec![g.mul(d, a[2])?])
                },
            )
        }
    }
}

/// Loop lengths: static, or fed at run time, and optionally chunked (outer loop).
#[derive(Clone, Copy, Debug)]
struct Variant {
    outer_dynamic: bool,
    inner_dynamic: bool,
    outer_chunk: Option<usize>,
}

const VARIANTS: [Variant; 4] = [
    Variant { outer_dynamic: false, inner_dynamic: false, outer_chunk: None },
    Variant { outer_dynamic: true, inner_dynamic: false, outer_chunk: None },
    Variant { outer_dynamic: false, inner_dynamic: true, outer_chunk: None },
    Variant { outer_dynamic: false, inner_dynamic: false, outer_chunk: Some(2) },
];

/// Two levels: `pfor i < 3 { pfor j < 4 { construct(t_ij, f_i, y_ij) } }` == nested loops.
fn check_two_levels(what: Construct, trip: Trip, mode: ControlFlowMode, v: Variant) -> std::result::Result<(), String> {
    let (n, m) = (3usize, 4usize);
    let mut g = Graph::new();
    let xo = g.constant(i64t(&[n], &[2, 0, 3]));
    let xi = g.constant(i64t(&[m], &[1, 3, 0, 2]));
    let x = g.constant(i64t(&[n, m], &[1, 0, 3, 2, 0, 0, 1, 4, 2, 2, 0, 1]));
    let f = g.constant(f64t(&[n], &[0.5, 1.5, -1.0]));
    let y = g.constant(Tensor::randn_f64(&[n, m], 5).unwrap());
    let n_in = g.input("n", DType::I64, Shape::scalar());
    let m_in = g.input("m", DType::I64, Shape::scalar());
    let mut opts = PforOptions::strict().with_control_flow(mode);
    let inner_opts = opts.clone();
    if let Some(c) = v.outer_chunk {
        opts = opts.with_chunk_size(c);
    }
    let body = |g: &mut Graph, i: ValueId, vectorized: bool| -> Result<Vec<ValueId>> {
        let xrow = g.gather(x, i, 0)?;
        let fi = g.gather(f, i, 0)?;
        let yrow = g.gather(y, i, 0)?;
        let to = g.gather(xo, i, 0)?;
        let inner = |g: &mut Graph, j: ValueId| -> Result<Vec<ValueId>> {
            let t = match trip {
                Trip::Outer => to,
                Trip::Inner => g.gather(xi, j, 0)?,
                Trip::Both => g.gather(xrow, j, 0)?,
            };
            let yij = g.gather(yrow, j, 0)?;
            construct(g, what, t, fi, yij)
        };
        match (vectorized, v.inner_dynamic) {
            (true, true) => pfor_recorded(g, m_in, &inner_opts, inner),
            (true, false) => pfor_recorded(g, m, &inner_opts, inner),
            (false, _) => for_loop(g, m, inner),
        }
    };
    let ctx = |e: Error| format!("{what:?} {trip:?} {mode:?} {v:?}: {e}");
    let vec_out = if v.outer_dynamic {
        pfor_recorded(&mut g, n_in, &opts, |g, i| body(g, i, true))
    } else {
        pfor_recorded(&mut g, n, &opts, |g, i| body(g, i, true))
    }
    .map_err(ctx)?;
    let loop_out = for_loop(&mut g, n, |g, i| body(g, i, false)).map_err(ctx)?;
    g.verify().map_err(ctx)?;
    let mut fetch = vec_out.clone();
    fetch.extend(&loop_out);
    let feeds = [(n_in, Tensor::scalar(n as i64)), (m_in, Tensor::scalar(m as i64))];
    let r = run_once(&g, &fetch, &feeds).map_err(ctx)?;
    let k = vec_out.len();
    for j in 0..k {
        pfor::tensor::assert_close(&r[j], &r[k + j], 1e-12, 1e-12)
            .map_err(|e| format!("{what:?} {trip:?} {mode:?} {v:?} output {j}: {e}"))?;
    }
    Ok(())
}

fn check_matrix(what: Construct) {
    let mut failures = Vec::new();
    for trip in [Trip::Outer, Trip::Inner, Trip::Both] {
        for mode in MODES {
            for v in VARIANTS {
                if let Err(e) = check_two_levels(what, trip, mode, v) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn while_in_two_pfor_levels_with_trip_counts_from_outer_inner_and_both_indices() {
    check_matrix(Construct::While);
}

#[test]
fn capped_while_in_two_pfor_levels_stops_every_pair_at_the_cap() {
    check_matrix(Construct::CappedWhile);
}

#[test]
fn cond_in_two_pfor_levels_with_predicates_from_outer_inner_and_both_indices() {
    check_matrix(Construct::Cond);
}

/// Three levels, trip count from all three indices: the combined form combines again.
#[test]
fn while_and_cond_in_three_pfor_levels() {
    let t = i64t(&[2, 3, 2], &[1, 0, 3, 2, 0, 2, 4, 1, 0, 0, 2, 3]);
    for what in [Construct::While, Construct::Cond] {
        for mode in MODES {
            let mut g = Graph::new();
            let tc = g.constant(t.clone());
            let f = g.constant(f64t(&[2], &[0.5, -2.0]));
            let y = g.constant(Tensor::randn_f64(&[2, 3, 2], 8).unwrap());
            let opts = PforOptions::strict().with_control_flow(mode);
            let body = |g: &mut Graph, a: ValueId, vectorized: bool| -> Result<Vec<ValueId>> {
                let (ta, ya, fa) = (g.gather(tc, a, 0)?, g.gather(y, a, 0)?, g.gather(f, a, 0)?);
                let mid = |g: &mut Graph, b: ValueId| -> Result<Vec<ValueId>> {
                    let (tb, yb) = (g.gather(ta, b, 0)?, g.gather(ya, b, 0)?);
                    let inner = |g: &mut Graph, c: ValueId| -> Result<Vec<ValueId>> {
                        let (tc, yc) = (g.gather(tb, c, 0)?, g.gather(yb, c, 0)?);
                        construct(g, what, tc, fa, yc)
                    };
                    if vectorized { pfor_recorded(g, 2, &opts, inner) } else { for_loop(g, 2, inner) }
                };
                if vectorized { pfor_recorded(g, 3, &opts, mid) } else { for_loop(g, 3, mid) }
            };
            let v = pfor_recorded(&mut g, 2, &opts, |g, a| body(g, a, true))
                .unwrap_or_else(|e| panic!("{what:?} {mode:?}: {e}"));
            let l = for_loop(&mut g, 2, |g, a| body(g, a, false)).unwrap();
            let mut fetch = v.clone();
            fetch.extend(&l);
            let r = run_once(&g, &fetch, &[]).unwrap_or_else(|e| panic!("{what:?} {mode:?}: {e}"));
            for j in 0..v.len() {
                assert_close(&r[j], &r[v.len() + j], 1e-12);
            }
        }
    }
}

/// Subset semantics survive the combination: an inner loop `while c != t` (endless for
/// t < 0) and a branch reading `table[t]` (out of range for t < 0) run only for the
/// (outer, inner) pairs whose predicate takes them.
#[test]
fn nested_subset_never_runs_an_untaken_branch_or_a_finished_loop() {
    let t = i64t(&[2, 3], &[2, -1, 0, -3, 1, 2]);
    let mut g = Graph::new();
    let tc = g.constant(t);
    let table = g.constant(f64t(&[3], &[10.0, 20.0, 30.0]));
    let body = |g: &mut Graph, a: ValueId, vectorized: bool| -> Result<Vec<ValueId>> {
        let ta = g.gather(tc, a, 0)?;
        let inner = |g: &mut Graph, b: ValueId| -> Result<Vec<ValueId>> {
            let tb = g.gather(ta, b, 0)?;
            let zero = g.constant(Tensor::scalar(0i64));
            let p = g.greater_equal(tb, zero)?;
            g.cond(
                p,
                &[tb, table],
                |g, x| {
                    let c0 = g.constant(Tensor::scalar(0i64));
                    let out = g.while_loop(
                        &[c0],
                        &[x[0]],
                        |g, c| g.not_equal(c[0], c[1]),
                        |g, c| {
                            let one = g.constant(Tensor::scalar(1i64));
                            Ok(vec![g.add(c[0], one)?])
                        },
                    )?;
                    Ok(vec![g.gather(x[1], out[0], 0)?])
                },
                |g, x| Ok(vec![g.cast(x[0], DType::F64)?]),
            )
        };
        if vectorized {
            pfor_recorded(g, 3, &PforOptions::strict().with_control_flow(ControlFlowMode::Subset), inner)
        } else {
            for_loop(g, 3, inner)
        }
    };
    let opts = PforOptions::strict().with_control_flow(ControlFlowMode::Subset);
    let v = pfor_recorded(&mut g, 2, &opts, |g, a| body(g, a, true)).unwrap();
    let l = for_loop(&mut g, 2, |g, a| body(g, a, false)).unwrap();
    let r = eval(&g, &[v[0], l[0]]);
    assert_eq!(r[1], f64t(&[2, 3], &[30.0, -1.0, 10.0, -3.0, 20.0, 30.0]));
    assert_close(&r[0], &r[1], 0.0);
}

/// Random draws inside a combined Subset `while` differ for every (outer, inner) pair
/// (the combined loop index is distinct per pair), and there is one draw per step.
#[test]
fn random_draws_in_a_nested_subset_while_differ_per_pair() {
    let t = i64t(&[2, 3], &[1, 2, 1, 1, 0, 1]);
    let mut g = Graph::new();
    let (tc, key) = (g.constant(t), g.constant(Tensor::scalar(42i64)));
    let opts = PforOptions::strict().with_control_flow(ControlFlowMode::Subset);
    let v = pfor_recorded(&mut g, 2, &opts, |g, a| {
        let ta = g.gather(tc, a, 0)?;
        pfor_recorded(g, 3, &opts, |g, b| {
            let tb = g.gather(ta, b, 0)?;
            let (c0, s0) = (g.constant(Tensor::scalar(0i64)), g.constant(Tensor::scalar(0.0f64)));
            let out = g.while_loop(
                &[c0, s0],
                &[tb, key],
                |g, p| g.less(p[0], p[2]),
                |g, p| {
                    let u = g.random_uniform(p[3], &[], DType::F64, 1.0, 2.0)?;
                    let one = g.constant(Tensor::scalar(1i64));
                    Ok(vec![g.add(p[0], one)?, g.add(p[1], u)?])
                },
            )?;
            Ok(vec![out[1]])
        })
    })
    .unwrap();
    let s = eval1(&g, v[0]).to_f64_vec();
    // one draw in [1, 2) per step: trip counts 1, 2, 1, 1, 0, 1
    for (k, (&x, steps)) in s.iter().zip([1.0, 2.0, 1.0, 1.0, 0.0, 1.0]).enumerate() {
        assert!(x >= steps && x < 2.0 * steps || (steps == 0.0 && x == 0.0), "pair {k}: {x}");
    }
    let ones: Vec<f64> = [0, 2, 3, 5].iter().map(|&k| s[k]).collect();
    for i in 0..ones.len() {
        for j in i + 1..ones.len() {
            assert_ne!(ones[i], ones[j], "{s:?}");
        }
    }
}
