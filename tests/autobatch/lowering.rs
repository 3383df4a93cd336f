//! Printing, the shape of lowered code, and graph-`Function` primops.

use pfor::autobatch::{Instruction, ProgramBuilder, Terminator, VarType, lower, reference, stackless, vm};
use pfor::prelude::*;

use super::programs::*;
use crate::common::{assert_close, i64t};

#[test]
fn programs_print_readably() {
    let p = fibonacci();
    let text = p.to_string();
    for needle in [
        "program(main.n) -> (main.ans)",
        "fibm1: i64[] full",
        "nm1: i64[] temporary",
        "function fib(n) -> (ans):",
        "fibm1 = call fib(nm1)",
        "branch cond ? 1 : 2",
        "ans = ans:const 1()",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let low = lower::lower(&p).unwrap().to_string();
    for needle in ["push n", "pop n", "push fibm1", "pop fibm1", "push_goto", "indirect_goto", "n = call fib:copy(nm1)"]
    {
        assert!(low.contains(needle), "missing {needle:?} in\n{low}");
    }
}

#[test]
fn lowering_replaces_calls_with_stack_traffic() {
    let p = fibonacci();
    let low = lower::lower(&p).unwrap();
    assert!(low.functions.is_empty() && !low.has_calls());
    // main (1 call -> 2 blocks) + fib: entry, then (2 calls -> 3 blocks), else = 7 blocks.
    assert_eq!(low.graph.blocks.len(), 7, "{low}");
    let push_gotos = low.graph.blocks.iter().filter(|b| matches!(b.terminator, Terminator::PushGoto { .. })).count();
    let returns = low.graph.blocks.iter().filter(|b| matches!(b.terminator, Terminator::IndirectGoto)).count();
    assert_eq!((push_gotos, returns), (3, 2));
    // Pushes and pops pair up, and only Full variables are saved.
    let pushed: Vec<_> = low
        .graph
        .blocks
        .iter()
        .flat_map(|b| &b.ops)
        .filter_map(|o| if let Instruction::Push(p) = o { Some(p.vars.clone()) } else { None })
        .collect();
    let popped: Vec<_> = low
        .graph
        .blocks
        .iter()
        .flat_map(|b| &b.ops)
        .filter_map(|o| if let Instruction::Pop(p) = o { Some(p.vars.clone()) } else { None })
        .collect();
    assert_eq!(pushed, popped);
    assert_eq!(pushed, vec![vec![var(&p, "n")], vec![var(&p, "fibm1")]]);
}

#[test]
fn self_tail_calls_lower_to_jumps() {
    let low = lower::lower(&sum_to()).unwrap();
    // main: call + return; sum_to: entry, then (return), else (tail call -> goto entry).
    assert_eq!(low.graph.blocks.len(), 5, "{low}");
    let last = &low.graph.blocks[4];
    assert_eq!(last.terminator, Terminator::Goto(pfor::autobatch::BlockId(2)), "{low}");
    assert!(!low.graph.blocks.iter().flat_map(|b| &b.ops).any(|o| matches!(o, Instruction::Push(_))));
}

#[test]
fn graph_function_primops() {
    // A recursion whose primops are graph functions over batched tensors:
    // f(x, n) = if n > 0 { f(-x, n - 1) } else { sum(exp(x)) }.
    let parent = Graph::new();
    let batched3 = TensorType::new(DType::F64, [Dim::unknown(), Dim::fixed(3)]);
    let neg = Function::build(&parent, std::slice::from_ref(&batched3), |g, a| Ok(vec![g.neg(a[0])?])).unwrap();
    let sum_exp = Function::build(&parent, &[batched3], |g, a| {
        let e = g.exp(a[0])?;
        Ok(vec![g.reduce_sum(e, Some(&[1]), false)?])
    })
    .unwrap();
    let mut pb = ProgramBuilder::new();
    let f = pb.declare("f", &["x", "n"], &["s"]).unwrap();
    pb.define(f, |b| {
        let (x, n) = (b.param(0)?, b.param(1)?);
        let s = b.result(0)?;
        let more = b.prim("more", &[n], test_i64(|n| n > 0))?;
        b.if_else(
            more,
            |b| {
                let nx = b.local("neg_x");
                b.graph_prim("neg", &[x], &[nx], neg)?;
                let n1 = b.prim("dec", &[n], map_i64(|n| n - 1))?;
                let r = b.call(f, &[nx, n1])?;
                b.ret(&r)
            },
            |b| {
                b.graph_prim("sum_exp", &[x], &[s], sum_exp)?;
                b.ret(&[s])
            },
        )
    })
    .unwrap();
    let p = pb.build(f, &[VarType::new(DType::F64, &[3]), VarType::scalar(DType::I64)]).unwrap();
    assert_eq!(p.var_type(p.var("s").unwrap()).unwrap(), &VarType::scalar(DType::F64));
    let x = Tensor::randn_f64(&[4, 3], 7).unwrap();
    let ns = i64t(&[4], &[0, 1, 2, 5]);
    let xs = x.to_vec::<f64>().unwrap();
    let want: Vec<f64> = (0..4)
        .map(|r| {
            let sign = if [0, 1, 2, 5][r] % 2 == 0 { 1.0 } else { -1.0 };
            (0..3).map(|j| (sign * xs[r * 3 + j]).exp()).sum()
        })
        .collect();
    let want = Tensor::vec1(&want);
    let inputs = [x, ns];
    for out in [
        vm::execute(&p, &inputs).unwrap(),
        stackless::execute(&p, &inputs).unwrap(),
        reference::execute(&p, &inputs).unwrap(),
    ] {
        assert_close(&out[0], &want, 1e-12);
    }
}
