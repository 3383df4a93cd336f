//! The three auto-batching interpreters (stackless, VM, unbatched reference) agree on
//! limits exactly: the same programs — deep recursion, a tail-recursive loop, an endless
//! tail-recursive loop, capped `while` loops — give the same results or the same errors
//! (message included where the outcome is deterministic) in each, in every mode.

use std::time::{Duration, Instant};

use pfor::autobatch::{ExecConfig, ExecMode, Program, ProgramBuilder, VarType, reference, stackless, vm};
use pfor::prelude::*;

use super::cancel_soon;
use crate::autobatch::programs::{collatz_capped, collatz_ref, descend, map_i64, sum_to, test_i64};
use crate::common::i64t;

/// The outcome of each interpreter (stackless and VM in every mode), as text: the outputs,
/// or the root error's message.
fn outcomes(p: &Program, inputs: &[Tensor], cfg: &ExecConfig) -> Vec<(String, String)> {
    let show = |r: Result<Vec<Tensor>>| match r {
        Ok(outs) => format!("ok {outs:?}"),
        Err(e) => format!("error {}", e.root()),
    };
    let mut v = vec![("reference".to_string(), show(reference::execute_with(p, inputs, cfg)))];
    for mode in [ExecMode::Auto, ExecMode::Masked, ExecMode::Gather] {
        let c = ExecConfig { mode, ..cfg.clone() };
        v.push((format!("stackless {mode:?}"), show(stackless::execute_with(p, inputs, &c).map(|e| e.outputs))));
        v.push((format!("vm {mode:?}"), show(vm::execute_with(p, inputs, &c).map(|e| e.outputs))));
    }
    v
}

/// Every interpreter gives the reference's outcome; returns it.
fn agree(p: &Program, inputs: &[Tensor], cfg: &ExecConfig) -> String {
    let all = outcomes(p, inputs, cfg);
    for (who, o) in &all[1..] {
        assert_eq!(o, &all[0].1, "{who} disagrees with the reference");
    }
    all[0].1.clone()
}

fn i64s(n: usize) -> Vec<VarType> {
    vec![VarType::scalar(DType::I64); n]
}

/// `sum_down(n) = n > 0 ? sum_down(n - 1) + n : 0`: `n` is live across the call, so the VM
/// saves it on a per-thread stack before every call.
fn sum_down() -> Program {
    let mut pb = ProgramBuilder::new();
    let f = pb.declare("sum_down", &["n"], &["total"]).unwrap();
    pb.define(f, |fb| {
        let n = fb.param(0)?;
        let more = fb.prim("more", &[n], test_i64(|n| n > 0))?;
        fb.if_else(
            more,
            |fb| {
                let n1 = fb.prim("dec", &[n], map_i64(|n| n - 1))?;
                let r = fb.call(f, &[n1])?[0];
                let t = fb.local("t");
                fb.prim_into("add", &[r, n], &[t], |x| Ok(vec![(x[0].array::<i64>()? + x[1].array::<i64>()?).into()]))?;
                fb.ret(&[t])
            },
            |fb| {
                let z = fb.constant("zero", 0i64)?;
                fb.ret(&[z])
            },
        )
    })
    .unwrap();
    pb.build(f, &i64s(1)).unwrap()
}

/// `spin(k) = k < 0 ? k : spin(k + 1)`: from `k >= 0` a self tail call that never ends.
fn spin() -> Program {
    let mut pb = ProgramBuilder::new();
    let f = pb.declare("spin", &["k"], &["r"]).unwrap();
    pb.define(f, |fb| {
        let k = fb.param(0)?;
        let done = fb.prim("done", &[k], test_i64(|k| k < 0))?;
        fb.if_else(
            done,
            |fb| fb.ret(&[k]),
            |fb| {
                let k1 = fb.prim("inc", &[k], map_i64(|k| k + 1))?;
                let r = fb.call(f, &[k1])?;
                fb.ret(&r)
            },
        )
    })
    .unwrap();
    pb.build(f, &i64s(1)).unwrap()
}

/// `twice(n) = count(n) + count(n)` where `count(n)` loops `n` times: `2n` loop trips per
/// thread, but at most `n` in any one activation.
fn loops_in_two_calls() -> Program {
    let mut pb = ProgramBuilder::new();
    let count = pb
        .function("count", &["n"], &["c"], |f| {
            let n = f.param(0)?;
            let c = f.result(0)?;
            f.constant_into(c, 0i64)?;
            f.while_loop(
                |f| {
                    f.prim("below", &[c, n], |x| {
                        Ok((x[1].array::<i64>()? - x[0].array::<i64>()?).mapv(|d| d > 0).into())
                    })
                },
                |f| f.prim_into("inc", &[c], &[c], |x| Ok(vec![(x[0].array::<i64>()? + 1).into()])),
            )?;
            f.ret(&[c])
        })
        .unwrap();
    let twice = pb
        .function("twice", &["m"], &["total"], |f| {
            let m = f.param(0)?;
            let a = f.call(count, &[m])?[0];
            let b = f.call(count, &[m])?[0];
            let t = f.local("t");
            f.prim_into("add", &[a, b], &[t], |x| Ok(vec![(x[0].array::<i64>()? + x[1].array::<i64>()?).into()]))?;
            f.ret(&[t])
        })
        .unwrap();
    pb.build(twice, &i64s(1)).unwrap()
}

#[test]
fn deep_non_tail_recursion_fails_the_same_way_everywhere() {
    let cfg = ExecConfig { max_stack_depth: 40, ..ExecConfig::default() };
    let x = Tensor::vec1(&[1.0f64, 2.0, 3.0]);
    let ok = agree(&descend(), &[i64t(&[3], &[39, 0, 5]), x.clone()], &cfg);
    assert!(ok.starts_with("ok"), "{ok}");
    let e = agree(&descend(), &[i64t(&[3], &[39, 40, 5]), x], &cfg);
    assert_eq!(e, "error recursion limit 40 exceeded calling function 'descend'");
    // the VM saves `n` before each call: the call one level too deep still names the callee
    let e = agree(&sum_down(), &[i64t(&[2], &[3, 12])], &ExecConfig { max_stack_depth: 10, ..ExecConfig::default() });
    assert_eq!(e, "error recursion limit 10 exceeded calling function 'sum_down'");
    assert_eq!(agree(&sum_down(), &[i64t(&[2], &[3, 8])], &cfg), format!("ok {:?}", [i64t(&[2], &[6, 36])]));
}

#[test]
fn tail_recursion_is_a_jump_in_every_interpreter() {
    // 3000 self tail calls under a depth limit of 2 (main -> sum_to)
    let cfg = ExecConfig { max_stack_depth: 2, ..ExecConfig::default() };
    let out = agree(&sum_to(), &[i64t(&[2], &[3000, 4]), i64t(&[2], &[0, 0])], &cfg);
    assert_eq!(out, format!("ok {:?}", [i64t(&[2], &[4_501_500, 10])]));
}

#[test]
fn an_endless_tail_recursive_loop_stops_at_the_iteration_cap() {
    let cfg = ExecConfig { max_iterations: Some(1000), ..ExecConfig::default() };
    let e = agree(&spin(), &[i64t(&[3], &[-1, 0, 5])], &cfg);
    assert_eq!(e, "error autobatch function 'spin': iteration limit 1000 reached and the loop condition still holds");
    // threads that end within the cap are unaffected
    assert_eq!(agree(&spin(), &[i64t(&[2], &[-1, -7])], &cfg), format!("ok {:?}", [i64t(&[2], &[-1, -7])]));
    // the cap counts per activation: 2 x 30 trips in two calls pass a cap of 30, 31 do not
    let cfg = ExecConfig { max_iterations: Some(30), ..ExecConfig::default() };
    assert_eq!(agree(&loops_in_two_calls(), &[i64t(&[2], &[30, 2])], &cfg), format!("ok {:?}", [i64t(&[2], &[60, 4])]));
    let e = agree(&loops_in_two_calls(), &[i64t(&[2], &[31, 2])], &cfg);
    assert!(e.starts_with("error autobatch function 'count': iteration limit 30"), "{e}");
}

/// Each interpreter's outcome on the endless loop run with `cfg`: "deadline", "cancelled"
/// or the outcome itself.
fn endless_kinds(cfg: &ExecConfig) -> Vec<(String, String)> {
    let kind = |o: String| match o {
        _ if o.starts_with("error deadline exceeded") => "deadline".to_string(),
        _ if o.starts_with("error run cancelled") => "cancelled".to_string(),
        _ => o,
    };
    outcomes(&spin(), &[i64t(&[4], &[0, 1, -1, 2])], cfg).into_iter().map(|(who, o)| (who, kind(o))).collect()
}

#[test]
fn an_endless_tail_recursive_loop_stops_at_the_deadline_everywhere() {
    for deadline in [Instant::now(), Instant::now() + Duration::from_millis(10)] {
        let cfg = ExecConfig { deadline: Some(deadline), ..ExecConfig::default() };
        for (who, k) in endless_kinds(&cfg) {
            assert_eq!(k, "deadline", "{who}");
        }
    }
}

#[test]
fn an_endless_tail_recursive_loop_is_cancelled_from_another_thread() {
    let token = CancelToken::new();
    let canceller = cancel_soon(&token);
    let cfg = ExecConfig { cancel: Some(token), ..ExecConfig::default() };
    let kinds = endless_kinds(&cfg);
    canceller.join().unwrap();
    for (who, k) in kinds {
        assert_eq!(k, "cancelled", "{who}");
    }
}

#[test]
fn capped_while_loops_stop_or_fail_alike() {
    let xs = [1i64, 2, 3, 6, 7, 27];
    let want = |cap: i64| xs.iter().map(|&x| collatz_ref(x).min(cap)).collect::<Vec<_>>();
    let cfg = ExecConfig::default();
    let out = agree(&collatz_capped(Some(IterationCap::stop(10))), &[i64t(&[6], &xs)], &cfg);
    assert_eq!(out, format!("ok {:?}", [i64t(&[6], &want(10))]));
    // 111 steps for 27: a cap of 111 is enough, 110 is not
    let out = agree(&collatz_capped(Some(IterationCap::error(111))), &[i64t(&[6], &xs)], &cfg);
    assert_eq!(out, format!("ok {:?}", [i64t(&[6], &want(111))]));
    let e = agree(&collatz_capped(Some(IterationCap::error(110))), &[i64t(&[6], &xs)], &cfg);
    assert_eq!(
        e,
        "error autobatch while loop in function 'collatz': iteration limit 110 reached and the loop condition still holds"
    );
}
