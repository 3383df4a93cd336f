//! Native stack safety: what one level of recursion costs in each recursive executor, and
//! depth limits raised far beyond what any thread's stack holds — a clear
//! `Error::StackExhausted` (or the right result), never a stack overflow. The deep cases run
//! in a child process (this test binary re-executed with an environment variable naming
//! the case), so a regression that overflows kills the child, not the test run.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pfor::autobatch::{ExecConfig, Program, ProgramBuilder, VarType, reference, stackless, vm};
use pfor::exec::limits::STACK_RESERVE;
use pfor::ops::CustomOp;
use pfor::prelude::*;

use super::recursive_i64;
use crate::autobatch::programs::{map_i64, test_i64};
use crate::common::i64t;

/// The native stack left where the last probe ran.
static LEFT: AtomicUsize = AtomicUsize::new(0);

fn record_stack() {
    LEFT.store(stacker::remaining_stack().unwrap_or(0), Ordering::Relaxed);
}

/// A graph op that records the stack left and passes its input through.
#[derive(Debug)]
struct Probe;

impl CustomOp for Probe {
    fn name(&self) -> &str {
        "stack_probe"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(inputs.to_vec())
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        record_stack();
        Ok(inputs.to_vec())
    }
}

/// `down(n) = n > 0 ? down(n - 1) : leaf(n)` as graph functions (`leaf` = the probe or the
/// identity).
fn graph_descent(probe: bool) -> (Graph, ValueId, ValueId) {
    let mut g = recursive_i64(
        "down",
        |g, n| {
            let n1 = g.add_scalar(n, -1.0)?;
            Ok(g.call("down", &[n1])?[0])
        },
        |g, n| if probe { Ok(g.add_op_multi(Op::Custom(Arc::new(Probe)), &[n])?[0]) } else { Ok(n) },
    );
    let n = g.input("n", DType::I64, Shape::scalar());
    let out = g.call("down", &[n]).unwrap()[0];
    (g, n, out)
}

/// The same descent as an auto-batching program (the leaf probes the stack when `probe`).
fn program_descent(probe: bool) -> Program {
    let mut pb = ProgramBuilder::new();
    let d = pb.declare("down", &["n"], &["r"]).unwrap();
    pb.define(d, |f| {
        let n = f.param(0)?;
        let more = f.prim("more", &[n], test_i64(|n| n > 0))?;
        f.if_else(
            more,
            |f| {
                let n1 = f.prim("dec", &[n], map_i64(|n| n - 1))?;
                let r = f.call(d, &[n1])?;
                // not a tail call: the copy below keeps the frame
                let y = f.local("y");
                f.prim_into("keep", &r, &[y], |t| Ok(vec![t[0].clone()]))?;
                f.ret(&[y])
            },
            |f| {
                let y = f.prim("leaf", &[n], move |t| {
                    if probe {
                        record_stack();
                    }
                    Ok(t[0].clone())
                })?;
                f.ret(&[y])
            },
        )
    })
    .unwrap();
    pb.build(d, &[VarType::scalar(DType::I64)]).unwrap()
}

/// Native stack bytes per recursion level of `run(depth)` (which probes at its deepest).
fn per_level(mut run: impl FnMut(i64)) -> usize {
    run(10);
    let shallow = LEFT.load(Ordering::Relaxed);
    run(60);
    let deep = LEFT.load(Ordering::Relaxed);
    shallow.saturating_sub(deep) / 50
}

#[test]
fn one_recursion_level_fits_well_inside_the_guard_reserve() {
    if stacker::remaining_stack().is_none() {
        return; // the platform cannot tell; the guard is off too
    }
    let (g, n, out) = graph_descent(true);
    let opts = ExecOptions { on_workers: false, ..ExecOptions::default() };
    let mut s = Session::with_options(&g, &[out], opts).unwrap();
    let session = per_level(|d| {
        s.run(&[(n, Tensor::scalar(d))]).unwrap();
    });
    let p = program_descent(true);
    let cfg = ExecConfig::default();
    let stackless = per_level(|d| {
        stackless::execute_with(&p, &[i64t(&[1], &[d])], &cfg).unwrap();
    });
    let reference = per_level(|d| {
        reference::execute_with(&p, &[i64t(&[1], &[d])], &cfg).unwrap();
    });
    println!("native stack per level: session call {session} B, stackless {stackless} B, reference {reference} B");
    for (who, b) in [("session", session), ("stackless", stackless), ("reference", reference)] {
        assert!(b > 0 && b * 4 <= STACK_RESERVE, "{who}: {b} bytes per level");
    }
}

const CASE: &str = "PFOR_STACK_CASE";
const DEPTH: usize = 1_000_000;

/// Runs only when re-executed by [`run_case`]: the deep case named in the environment.
#[test]
fn deep_case_in_child_process() {
    let Ok(case) = std::env::var(CASE) else { return };
    let exhausted = |e: &Error| matches!(e.root(), Error::StackExhausted { .. });
    match case.as_str() {
        "session" => {
            let (g, n, out) = graph_descent(false);
            // on a pfor worker (64 MiB) when the run is handed off, then on this test thread
            for on_workers in [true, false] {
                let opts = ExecOptions { max_call_depth: DEPTH, on_workers, ..ExecOptions::default() };
                let mut s = Session::with_options(&g, &[out], opts).unwrap();
                let e = s.run(&[(n, Tensor::scalar(DEPTH as i64 - 1))]).unwrap_err();
                assert!(exhausted(&e), "{e}");
                println!("case session (on workers: {on_workers}): {e}");
                // the session is still usable, at depths the stack holds
                assert_eq!(s.run(&[(n, Tensor::scalar(100i64))]).unwrap()[0], Tensor::scalar(0i64));
            }
        }
        "stackless" | "reference" => {
            let p = program_descent(false);
            let cfg = ExecConfig { max_stack_depth: DEPTH, ..ExecConfig::default() };
            let x = [i64t(&[2], &[3, DEPTH as i64 - 1])];
            let r = match case.as_str() {
                "stackless" => stackless::execute_with(&p, &x, &cfg).map(|e| e.outputs),
                _ => reference::execute_with(&p, &x, &cfg),
            };
            let e = r.unwrap_err();
            assert!(exhausted(&e), "{e}");
            println!("case {case}: {e}");
        }
        "vm" => {
            // the VM's stacks are heap tensors: deep recursion just works
            let p = program_descent(false);
            let cfg = ExecConfig { max_stack_depth: DEPTH, ..ExecConfig::default() };
            let out = vm::execute_with(&p, &[i64t(&[2], &[3, 20_000])], &cfg).unwrap();
            assert_eq!(out.outputs, vec![i64t(&[2], &[0, 0])]);
            println!("case vm: ok at depth {}", out.stats.max_depth);
        }
        other => panic!("unknown case {other}"),
    }
}

/// Re-execute this test binary on `case`; it must exit normally, having run the case.
fn run_case(case: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "robustness::stack::deep_case_in_child_process", "--nocapture", "--test-threads=1"])
        .env(CASE, case)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "case {case} died ({}):\n{text}", out.status);
    assert!(text.contains(&format!("case {case}")), "case {case} did not run:\n{text}");
}

#[test]
fn a_session_recursion_limit_of_a_million_is_an_error_not_a_stack_overflow() {
    run_case("session");
}

#[test]
fn an_interpreter_depth_limit_of_a_million_is_an_error_not_a_stack_overflow() {
    run_case("stackless");
    run_case("reference");
    run_case("vm");
}
