//! Bad programs and bad inputs are `Err`s with clear messages, never panics.

use pfor::autobatch::{ExecConfig, PrimOp, ProgramBuilder, VarType, lower, reference, stackless, vm};
use pfor::prelude::*;

use super::programs::*;
use crate::common::{f32t, i64t};

fn i64s() -> Vec<VarType> {
    vec![VarType::scalar(DType::I64)]
}

#[test]
fn stack_overflow_is_an_error() {
    let p = fibonacci();
    let cfg = ExecConfig { max_stack_depth: 4, ..ExecConfig::default() };
    let x = [i64t(&[3], &[2, 10, 3])];
    for e in [
        vm::execute_with(&p, &x, &cfg).unwrap_err(),
        stackless::execute_with(&p, &x, &cfg).unwrap_err(),
        reference::execute_with(&p, &x, &cfg).unwrap_err(),
    ] {
        assert!(matches!(e.root(), Error::RecursionLimit { limit: 4, .. }), "{e}");
        assert!(e.to_string().contains("fib"), "{e}");
    }
    // Depth 4 suffices for fib(3): main -> fib(3) -> fib(2) -> fib(1).
    let ok = [i64t(&[2], &[3, 1])];
    assert_eq!(vm::execute_with(&p, &ok, &cfg).unwrap().outputs, vec![i64t(&[2], &[3, 1])]);
    assert_eq!(stackless::execute_with(&p, &ok, &cfg).unwrap().outputs, vec![i64t(&[2], &[3, 1])]);
}

#[test]
fn type_mismatch_is_an_error() {
    // ans is i64 on one path (the add) and f32 on the other (the constant).
    let mut pb = ProgramBuilder::new();
    let f = pb.declare("f", &["n"], &["ans"]).unwrap();
    pb.define(f, |b| {
        let n = b.param(0)?;
        let ans = b.result(0)?;
        let c = b.prim("c", &[n], test_i64(|n| n > 0))?;
        b.if_else(c, |b| b.prim_into("twice", &[n, n], &[ans], add_i64), |b| b.constant_into(ans, 1.0f32))?;
        b.ret(&[ans])
    })
    .unwrap();
    let e = pb.build(f, &i64s()).unwrap_err();
    assert!(matches!(e.root(), Error::DType { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("'ans'") && msg.contains("i64") && msg.contains("f32"), "{msg}");
}

#[test]
fn argument_type_mismatch_between_call_sites() {
    let mut pb = ProgramBuilder::new();
    let id = pb.function("id", &["x"], &["y"], |b| b.ret(&[b.param(0)?])).unwrap();
    let main = pb
        .function("main", &["n"], &["a", "b"], |b| {
            let n = b.param(0)?;
            let fl = b.prim("as_f32", &[n], |x| Ok(x[0].cast(DType::F32)))?;
            let a = b.call(id, &[n])?;
            let c = b.call(id, &[fl])?;
            b.ret(&[a[0], c[0]])
        })
        .unwrap();
    let e = pb.build(main, &i64s()).unwrap_err();
    assert!(e.to_string().contains("parameter of 'id'") && e.to_string().contains("'x'"), "{e}");
}

#[test]
fn undefined_function_is_an_error() {
    let mut pb = ProgramBuilder::new();
    let missing = pb.declare("helper", &["x"], &["y"]).unwrap();
    let f = pb.function("f", &["n"], &["r"], |b| {
        let r = b.call(missing, &[b.param(0)?])?;
        b.ret(&r)
    });
    let f = f.unwrap();
    let e = pb.build(f, &i64s()).unwrap_err();
    assert!(matches!(e.root(), Error::UnknownFunction { name } if name == "helper"), "{e}");
}

#[test]
fn call_arity_and_return_arity_errors() {
    let mut pb = ProgramBuilder::new();
    let g = pb.declare("g", &["a", "b"], &["r"]).unwrap();
    pb.define(g, |b| {
        let e = b.call(g, &[b.param(0)?]).unwrap_err();
        assert!(matches!(e.root(), Error::Arity { .. }) && e.to_string().contains("'g'"), "{e}");
        let e = b.ret(&[]).unwrap_err();
        assert!(matches!(e.root(), Error::Arity { .. }), "{e}");
        b.ret(&[b.param(0)?])
    })
    .unwrap();
}

#[test]
fn structural_errors() {
    // Missing return.
    let mut pb = ProgramBuilder::new();
    let e = pb.function("f", &["n"], &["r"], |b| b.constant_into(b.result(0)?, 1i64)).unwrap_err();
    assert!(e.to_string().contains("without a return"), "{e}");
    // Code after return.
    let e = pb
        .function("g", &["n"], &["r"], |b| {
            b.ret(&[b.param(0)?])?;
            b.constant_into(b.result(0)?, 1i64)
        })
        .unwrap_err();
    assert!(e.to_string().contains("unreachable"), "{e}");
    // Read before write on some path.
    let mut pb = ProgramBuilder::new();
    let h = pb
        .function("h", &["n"], &["r"], |b| {
            let n = b.param(0)?;
            let r = b.result(0)?;
            let c = b.prim("c", &[n], test_i64(|n| n > 0))?;
            b.if_then(c, |b| b.assign(r, n))?;
            b.ret(&[r])
        })
        .unwrap();
    let e = pb.build(h, &i64s()).unwrap_err();
    assert!(e.to_string().contains("'r' may be read before it is written"), "{e}");
    // A recursion without a base case has no result type.
    let mut pb = ProgramBuilder::new();
    let l = pb.declare("loop", &["n"], &["r"]).unwrap();
    pb.define(l, |b| {
        let r = b.call(l, &[b.param(0)?])?;
        let s = b.prim("use", &r, |x| Ok(x[0].clone()))?;
        b.ret(&[s])
    })
    .unwrap();
    let e = pb.build(l, &i64s()).unwrap_err();
    assert!(e.to_string().contains("cannot infer the type"), "{e}");
    // Branching on a non-bool.
    let mut pb = ProgramBuilder::new();
    let k = pb
        .function("k", &["n"], &["r"], |b| {
            let n = b.param(0)?;
            b.if_else(n, |b| b.ret(&[n]), |b| b.ret(&[n]))
        })
        .unwrap();
    let e = pb.build(k, &i64s()).unwrap_err();
    assert!(matches!(e.root(), Error::DType { .. }) && e.to_string().contains("branch condition 'n'"), "{e}");
}

#[test]
fn bad_inputs_are_errors() {
    let p = fibonacci();
    let e = vm::execute(&p, &[f32t(&[2], &[1.0, 2.0])]).unwrap_err();
    assert!(matches!(e.root(), Error::FeedType { .. }), "{e}");
    let e = stackless::execute(&p, &[i64t(&[], &[3])]).unwrap_err();
    assert!(e.to_string().contains("batch axis"), "{e}");
    let e = reference::execute(&p, &[]).unwrap_err();
    assert!(matches!(e.root(), Error::Arity { .. }), "{e}");
    let q = sum_to();
    let e = vm::execute(&q, &[i64t(&[2], &[1, 2]), i64t(&[3], &[0, 0, 0])]).unwrap_err();
    assert!(e.to_string().contains("batch"), "{e}");
}

#[test]
fn primop_returning_the_wrong_shape_is_an_error() {
    let mut pb = ProgramBuilder::new();
    let f = pb
        .function("f", &["x"], &["y"], |b| {
            let x = b.param(0)?;
            let y = b.result(0)?;
            // Declares i64[] but returns a tensor without the batch axis once n > 0.
            b.op(PrimOp::closure("liar", &[x], &[y], |t| Ok(vec![Tensor::scalar(t[0].len() as i64)]))
                .with_types(vec![VarType::scalar(DType::I64)]))?;
            b.ret(&[y])
        })
        .unwrap();
    let p = pb.build(f, &i64s()).unwrap();
    for e in [
        vm::execute(&p, &[i64t(&[2], &[1, 2])]).unwrap_err(),
        stackless::execute(&p, &[i64t(&[2], &[1, 2])]).unwrap_err(),
        reference::execute(&p, &[i64t(&[2], &[1, 2])]).unwrap_err(),
    ] {
        assert!(e.to_string().contains("'liar'") && e.to_string().contains("expected i64"), "{e}");
    }
    // An undeclared closure that drops the batch axis fails type inference.
    let mut pb = ProgramBuilder::new();
    let g = pb
        .function("g", &["x"], &["y"], |b| {
            let s = b.prim("sum", &[b.param(0)?], |t| Ok(Tensor::scalar(t[0].to_vec::<i64>()?.iter().sum::<i64>())))?;
            b.ret(&[s])
        })
        .unwrap();
    let e = pb.build(g, &i64s()).unwrap_err();
    assert!(e.to_string().contains("'sum'") && e.to_string().contains("batch axis"), "{e}");
}

#[test]
fn interpreters_reject_programs_of_the_wrong_stage() {
    let p = fibonacci();
    let low = lower::lower(&p).unwrap();
    assert!(stackless::execute(&low, &[i64t(&[1], &[3])]).unwrap_err().to_string().contains("lowered"));
    assert!(reference::execute(&low, &[i64t(&[1], &[3])]).unwrap_err().to_string().contains("lowered"));
    assert!(lower::lower(&low).is_err());
}
