//! Non-termination in graph sessions: `while` iteration caps (stop as in TF, or fail), the
//! session-wide default cap, run deadlines and cancellation from another thread; caps
//! carried through pfor (every mode stops each iteration exactly where its loop does) and
//! through derivatives.

use std::time::{Duration, Instant};

use super::{cancel_soon, recursive_i64};
use crate::common::*;
use pfor::autodiff::{gradients, jvp};
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor_with};

/// `while c >= 0 { c += 1 }` from `c = 0`: the condition never becomes false.
fn forever(g: &mut Graph, cap: Option<IterationCap>) -> ValueId {
    let c0 = g.constant(Tensor::scalar(0i64));
    let cond = |g: &mut Graph, a: &[ValueId]| {
        let z = g.constant(Tensor::scalar(0i64));
        g.greater_equal(a[0], z)
    };
    let body = |g: &mut Graph, a: &[ValueId]| Ok(vec![g.add_scalar(a[0], 1.0)?]);
    match cap {
        Some(cap) => g.while_loop_with(&[c0], &[], cap, cond, body),
        None => g.while_loop(&[c0], &[], cond, body),
    }
    .unwrap()[0]
}

/// `while c < bound { c += 1; s += 2c }` (the trip count is `max(bound, 0)`).
fn count_loop(g: &mut Graph, bound: ValueId, cap: Option<IterationCap>) -> Result<Vec<ValueId>> {
    let c0 = g.constant(Tensor::scalar(0i64));
    let s0 = g.constant(Tensor::scalar(0.0f64));
    let cond = |g: &mut Graph, a: &[ValueId]| g.less(a[0], a[2]);
    let body = |g: &mut Graph, a: &[ValueId]| {
        let c = g.add_scalar(a[0], 1.0)?;
        let cf = g.cast(c, DType::F64)?;
        let d = g.add(cf, cf)?;
        Ok(vec![c, g.add(a[1], d)?])
    };
    match cap {
        Some(cap) => g.while_loop_with(&[c0, s0], &[bound], cap, cond, body),
        None => g.while_loop(&[c0, s0], &[bound], cond, body),
    }
}

fn run_err(g: &Graph, fetch: ValueId, opts: ExecOptions, run: &RunOptions) -> Error {
    Session::with_options(g, &[fetch], opts).unwrap().run_with(&[], run).unwrap_err()
}

#[test]
fn a_capped_loop_stops_like_tf_maximum_iterations() {
    let mut g = Graph::new();
    let c = forever(&mut g, Some(IterationCap::stop(5)));
    assert_eq!(eval1(&g, c), Tensor::scalar(5i64));
    // a loop that ends by itself before, or exactly at, the cap is not affected
    for (bound, cap, want) in [(3i64, 5u64, 3i64), (5, 5, 5), (9, 5, 5), (-2, 5, 0), (4, 0, 0)] {
        let mut g = Graph::new();
        let b = g.constant(Tensor::scalar(bound));
        let out = count_loop(&mut g, b, Some(IterationCap::stop(cap))).unwrap();
        assert_eq!(eval1(&g, out[0]), Tensor::scalar(want), "bound {bound}, cap {cap}");
    }
}

#[test]
fn a_capped_loop_that_must_terminate_fails_at_the_cap() {
    let mut g = Graph::new();
    let c = forever(&mut g, Some(IterationCap::error(7)));
    let e = run_once(&g, &[c], &[]).unwrap_err();
    assert!(matches!(e.root(), Error::IterationLimit { limit: 7, what } if what == "while"), "{e}");
    assert!(e.to_string().contains("iteration limit 7"), "{e}");
    // ending exactly at the cap is fine: the condition no longer holds
    let mut g = Graph::new();
    let b = g.constant(Tensor::scalar(7i64));
    let out = count_loop(&mut g, b, Some(IterationCap::error(7))).unwrap();
    assert_eq!(eval1(&g, out[0]), Tensor::scalar(7i64));
}

#[test]
fn the_session_default_cap_applies_to_uncapped_loops_only() {
    let opts = ExecOptions { max_while_iterations: Some(100), ..ExecOptions::default() };
    let mut g = Graph::new();
    let c = forever(&mut g, None);
    let e = run_err(&g, c, opts.clone(), &RunOptions::default());
    assert!(matches!(e.root(), Error::IterationLimit { limit: 100, .. }), "{e}");
    // a loop's own cap wins (here: a larger one that stops)
    let mut g = Graph::new();
    let c = forever(&mut g, Some(IterationCap::stop(250)));
    let r = Session::with_options(&g, &[c], opts).unwrap().run(&[]).unwrap();
    assert_eq!(r[0], Tensor::scalar(250i64));
}

#[test]
fn an_endless_loop_stops_at_the_run_deadline() {
    let mut g = Graph::new();
    let c = forever(&mut g, None);
    let mut s = Session::new(&g, &[c]).unwrap();
    let e = s.run_with(&[], &RunOptions::timeout(Duration::from_millis(20))).unwrap_err();
    assert!(matches!(e.root(), Error::DeadlineExceeded { .. }), "{e}");
    assert!(e.to_string().contains("while{"), "names where it stopped: {e}");
    // a deadline already past stops before the first step; the session stays usable
    let past = RunOptions { deadline: Some(Instant::now()), cancel: None };
    let e = s.run_with(&[], &past).unwrap_err();
    assert!(matches!(e.root(), Error::DeadlineExceeded { at } if at.starts_with("before node")), "{e}");
    let mut g = Graph::new();
    let c = forever(&mut g, Some(IterationCap::stop(3)));
    let mut s = Session::new(&g, &[c]).unwrap();
    let far = RunOptions::timeout(Duration::from_secs(3600));
    assert_eq!(s.run_with(&[], &far).unwrap()[0], Tensor::scalar(3i64));
}

#[test]
fn an_endless_loop_is_cancelled_from_another_thread() {
    let mut g = Graph::new();
    let c = forever(&mut g, None);
    let token = CancelToken::new();
    let canceller = cancel_soon(&token);
    let e = Session::new(&g, &[c]).unwrap().run_with(&[], &RunOptions::cancellable(&token)).unwrap_err();
    canceller.join().unwrap();
    assert!(matches!(e.root(), Error::Cancelled { .. }), "{e}");
    assert!(token.is_cancelled());
}

/// `runaway(n) = runaway(n + 1)` under a depth limit no run reaches before it is stopped.
fn runaway() -> (Graph, ValueId) {
    let mut g = Graph::new();
    let i64s = TensorType::scalar(DType::I64);
    g.declare_function("runaway", std::slice::from_ref(&i64s), std::slice::from_ref(&i64s)).unwrap();
    g.define_function("runaway", |g, p| {
        let n1 = g.add_scalar(p[0], 1.0)?;
        g.call("runaway", &[n1])
    })
    .unwrap();
    let n = g.constant(Tensor::scalar(0i64));
    let out = g.call("runaway", &[n]).unwrap()[0];
    (g, out)
}

#[test]
fn runaway_recursion_checks_the_token_at_every_call() {
    let (g, out) = runaway();
    let token = CancelToken::new();
    token.cancel();
    let e = run_err(&g, out, ExecOptions::default(), &RunOptions::cancellable(&token));
    assert!(matches!(e.root(), Error::Cancelled { .. }), "{e}");
    // without a token the depth limit still stops it
    let e = run_err(&g, out, ExecOptions::default(), &RunOptions::default());
    assert!(matches!(e.root(), Error::RecursionLimit { limit: 200, .. }), "{e}");
}

const MODES: &[ControlFlowMode] = &[ControlFlowMode::Subset, ControlFlowMode::Mask, ControlFlowMode::Auto];

/// pfor (strict: no fallback) of `count_loop(bounds[i])` under `cap`, in `mode`, next to the
/// reference loop: `(pfor's outcome, the loop's outcome)`.
fn pfor_and_loop(bounds: &[i64], cap: IterationCap, mode: ControlFlowMode) -> [Result<Vec<Tensor>>; 2] {
    let mut g = Graph::new();
    let b = g.constant(i64t(&[bounds.len()], bounds));
    let per = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let bi = g.gather(b, i, 0)?;
        count_loop(g, bi, Some(cap))
    };
    let opts = PforOptions::strict().with_control_flow(mode);
    let v = pfor_with(&mut g, bounds.len(), &opts, per).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    let l = for_loop(&mut g, bounds.len(), per).unwrap();
    [run_once(&g, &v, &[]), run_once(&g, &l, &[])]
}

#[test]
fn pfor_stops_every_iteration_where_its_own_capped_loop_stops() {
    for &mode in MODES {
        for bounds in [&[4i64, 0, 2, 9, 3][..], &[9, 9], &[1, 2], &[0]] {
            let [v, l] = pfor_and_loop(bounds, IterationCap::stop(3), mode);
            let (v, l) = (v.unwrap(), l.unwrap());
            assert_eq!(v[0], l[0], "{mode:?} {bounds:?}");
            assert_close(&v[1], &l[1], 1e-12);
            let want: Vec<i64> = bounds.iter().map(|&b| b.clamp(0, 3)).collect();
            assert_eq!(v[0], i64t(&[bounds.len()], &want), "{mode:?} {bounds:?}");
        }
    }
}

#[test]
fn pfor_of_a_loop_that_must_terminate_fails_exactly_when_an_iteration_does() {
    for &mode in MODES {
        // the longest iteration ends exactly at the cap: no error
        let [v, l] = pfor_and_loop(&[1, 3, 0, 2], IterationCap::error(3), mode);
        assert_eq!(v.unwrap()[0], l.unwrap()[0], "{mode:?}");
        // one iteration would run a fourth trip: the same error as the loop's
        let [v, l] = pfor_and_loop(&[1, 4, 0, 2], IterationCap::error(3), mode);
        for e in [v.unwrap_err(), l.unwrap_err()] {
            assert!(matches!(e.root(), Error::IterationLimit { limit: 3, .. }), "{mode:?}: {e}");
        }
    }
}

#[test]
fn a_single_iteration_keeps_its_cap_in_the_one_row_form() {
    // n = 1: the while is re-emitted on its only row (issue 22); its cap goes with it
    for &mode in MODES {
        let [v, l] = pfor_and_loop(&[3], IterationCap::error(3), mode);
        assert_eq!(v.unwrap()[0], l.unwrap()[0], "{mode:?}");
        let [v, l] = pfor_and_loop(&[9], IterationCap::error(3), mode);
        for e in [v.unwrap_err(), l.unwrap_err()] {
            assert!(matches!(e.root(), Error::IterationLimit { limit: 3, .. }), "{mode:?}: {e}");
        }
        let [v, l] = pfor_and_loop(&[9], IterationCap::stop(3), mode);
        let (v, l) = (v.unwrap(), l.unwrap());
        assert_eq!(v[0], i64t(&[1], &[3]), "{mode:?}");
        assert_eq!(v[0], l[0], "{mode:?}");
    }
}

#[test]
fn pfor_keeps_the_cap_of_a_loop_with_an_invariant_condition() {
    // `while c < 10 { c += 1; s += x_i }` under stop(4): every iteration makes 4 trips
    let xs = [1.0f64, 2.0, 3.0];
    let mut g = Graph::new();
    let x = g.constant(f64t(&[3], &xs));
    let per = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let xi = g.gather(x, i, 0)?;
        let c0 = g.constant(Tensor::scalar(0i64));
        let s0 = g.constant(Tensor::scalar(0.0f64));
        let ten = g.constant(Tensor::scalar(10i64));
        let out = g.while_loop_with(
            &[c0, s0],
            &[xi, ten],
            IterationCap::stop(4),
            |g, a| g.less(a[0], a[3]),
            |g, a| Ok(vec![g.add_scalar(a[0], 1.0)?, g.add(a[1], a[2])?]),
        )?;
        Ok(vec![out[1]])
    };
    let v = pfor_with(&mut g, 3, &PforOptions::strict(), per).unwrap();
    assert_eq!(eval1(&g, v[0]), f64t(&[3], &[4.0, 8.0, 12.0]));
}

/// `while x < 100 { x = 2x }` from `x` (a float carry), optionally capped.
fn doubling(g: &mut Graph, x: ValueId, cap: Option<IterationCap>) -> ValueId {
    let hundred = g.constant(Tensor::scalar(100.0f64));
    let cond = |g: &mut Graph, a: &[ValueId]| g.less(a[0], a[1]);
    let body = |g: &mut Graph, a: &[ValueId]| Ok(vec![g.add(a[0], a[0])?]);
    match cap {
        Some(cap) => g.while_loop_with(&[x], &[hundred], cap, cond, body),
        None => g.while_loop(&[x], &[hundred], cond, body),
    }
    .unwrap()[0]
}

#[test]
fn derivatives_of_a_capped_loop_see_the_trips_it_made() {
    // from 1.5: 7 doublings reach 192 uncapped; stop(3) ends at 12, so dy/dx = 8, not 128
    for (cap, y_want, d_want) in [(Some(IterationCap::stop(3)), 12.0, 8.0), (None, 192.0, 128.0)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F64, Shape::scalar());
        let y = doubling(&mut g, x, cap);
        let dx = gradients(&mut g, &[y], &[x], None).unwrap()[0];
        let one = g.constant(Tensor::scalar(1.0f64));
        let t = jvp(&mut g, &[y], &[x], &[one]).unwrap()[0];
        let r = run_once(&g, &[y, dx, t], &[(x, Tensor::scalar(1.5f64))]).unwrap();
        assert_eq!(r, vec![Tensor::scalar(y_want), Tensor::scalar(d_want), Tensor::scalar(d_want)], "{cap:?}");
    }
    // a loop that must terminate fails in its gradient as it does forward
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, Shape::scalar());
    let y = doubling(&mut g, x, Some(IterationCap::error(3)));
    let dx = gradients(&mut g, &[y], &[x], None).unwrap()[0];
    let e = run_once(&g, &[dx], &[(x, Tensor::scalar(1.5f64))]).unwrap_err();
    assert!(matches!(e.root(), Error::IterationLimit { limit: 3, .. }), "{e}");
}

/// `capsum(n) = n > 0 ? capsum(n - 1) + loop(n) : 0`, where `loop(n)` counts to `n` in a
/// `while` under `cap` (or `while c >= 0 { c += 1 }`, endless, when `cap` is `None`).
fn capsum(cap: Option<IterationCap>) -> Graph {
    recursive_i64(
        "capsum",
        |g, n| {
            let n1 = g.add_scalar(n, -1.0)?;
            let r = g.call("capsum", &[n1])?[0];
            let l = match cap {
                Some(_) => count_loop(g, n, cap)?[0],
                None => forever(g, None),
            };
            g.add(r, l)
        },
        |g, _| Ok(g.constant(Tensor::scalar(0i64))),
    )
}

#[test]
fn a_recursive_function_handed_to_the_vm_keeps_its_loop_caps_and_the_depth_limit() {
    let mut g = capsum(Some(IterationCap::stop(3)));
    let ns = g.constant(i64t(&[4], &[0, 2, 5, 199]));
    let per = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let n = g.gather(ns, i, 0)?;
        g.call("capsum", &[n])
    };
    let v = pfor_with(&mut g, 4, &PforOptions::strict(), per).unwrap();
    let l = for_loop(&mut g, 4, per).unwrap();
    let r = run_once(&g, &[v[0], l[0]], &[]).unwrap();
    // sum of min(k, 3) for k = 1..=n
    assert_eq!(r[0], i64t(&[4], &[0, 3, 12, 3 * 199 - 3]));
    assert_eq!(r[0], r[1]);
    // 201 nested calls: past the session's depth limit, in the loop and in the VM alike
    let mut g = capsum(Some(IterationCap::stop(3)));
    let ns = g.constant(i64t(&[2], &[1, 200]));
    let per = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let n = g.gather(ns, i, 0)?;
        g.call("capsum", &[n])
    };
    let v = pfor_with(&mut g, 2, &PforOptions::strict(), per).unwrap();
    let l = for_loop(&mut g, 2, per).unwrap();
    for out in [v[0], l[0]] {
        let e = run_once(&g, &[out], &[]).unwrap_err();
        assert!(matches!(e.root(), Error::RecursionLimit { limit: 200, .. }), "{e}");
    }
}

#[test]
fn a_run_handed_to_the_vm_is_cancelled_too() {
    let mut g = capsum(None);
    let ns = g.constant(i64t(&[2], &[1, 2]));
    let v = pfor_with(&mut g, 2, &PforOptions::strict(), |g, i| {
        let n = g.gather(ns, i, 0)?;
        g.call("capsum", &[n])
    })
    .unwrap();
    let token = CancelToken::new();
    let canceller = cancel_soon(&token);
    let e = Session::new(&g, &v).unwrap().run_with(&[], &RunOptions::cancellable(&token)).unwrap_err();
    canceller.join().unwrap();
    assert!(matches!(e.root(), Error::Cancelled { .. }), "{e}");
}
