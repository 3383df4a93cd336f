//! Exact allocation tables (the seed's semantics) and inferred types.

use std::collections::BTreeMap;

use pfor::autobatch::VariableAllocation::{self, *};
use pfor::autobatch::{
    Block, BlockId, ControlFlowGraph, Instruction, PrimOp, Program, Terminator, Var, VarType, reference, stackless, vm,
};
use pfor::prelude::*;

use super::programs::*;
use crate::common::i64t;

fn table(entries: &[(&str, VariableAllocation)]) -> BTreeMap<String, VariableAllocation> {
    entries.iter().map(|(n, a)| (n.to_string(), *a)).collect()
}

#[test]
fn fibonacci_allocation() {
    let p = fibonacci();
    let want = table(&[
        ("pc", Full),
        ("n", Full),        // live across the first call, which writes n
        ("fibm1", Full),    // the saved fib(n-1): live across the second call
        ("cond", Register), // read by the branch terminator
        ("nm1", Temporary),
        ("nm2", Temporary),
        ("fibm2", Temporary),
        ("ans", Register), // the result
        ("main.n", Register),
        ("main.ans", Register),
    ]);
    assert_eq!(p.allocation_table(), want, "\n{p}");
    assert_eq!(p.var_type(var(&p, "cond")).unwrap(), &VarType::scalar(DType::Bool));
    assert_eq!(p.var_type(var(&p, "fibm2")).unwrap(), &VarType::scalar(DType::I64));
}

#[test]
fn even_odd_allocation() {
    // Only tail positions call: nothing is live across a call, so no variable needs a stack.
    let p = even_odd();
    let want = table(&[
        ("pc", Full),
        ("n", Register),
        ("m", Register),
        ("ans", Register),
        ("res", Register),
        ("at_zero", Register),
        ("at_zero_1", Register),
        ("dec", Temporary),
        ("dec_1", Temporary),
        ("main.n", Register),
        ("main.ans", Register),
    ]);
    assert_eq!(p.allocation_table(), want, "\n{p}");
}

#[test]
fn unread_variables_are_null_and_product_results_registers() {
    let p = fib_pair();
    let t = p.allocation_table();
    // `v_1` receives the recursive call's third result, which nobody reads.
    assert_eq!(t["v_1"], Null, "\n{p}");
    assert_eq!((t["a"], t["b"], t["v"]), (Register, Register, Register));
    assert_eq!((t["a_1"], t["b_1"], t["dec"]), (Temporary, Temporary, Temporary));
    assert_eq!(t["n"], Register, "n is dead after the argument is computed");
    assert_eq!(p.var_type(var(&p, "v")).unwrap(), &VarType::new(DType::F32, &[2]));
}

#[test]
fn nuts_allocation_saves_what_the_second_subtree_needs() {
    let p = nuts(4, 0.1);
    let t = p.allocation_table();
    // After the left subtree returns, its log weight and the decremented depth are needed
    // across the right subtree call (which writes both): Full. q/p/g are not live then.
    assert_eq!((t["logw_1"], t["dec"]), (Full, Full), "\n{p}");
    assert_eq!((t["q"], t["p"], t["g"], t["depth"]), (Register, Register, Register, Register));
    assert_eq!((t["logw_2"], t["w"]), (Temporary, Temporary));
}

/// single_if written by hand as a main graph without functions: no calls, so the pc is a
/// plain register.
fn single_if_by_hand() -> Program {
    let names = ["pc", "input", "cond", "ans"].map(String::from).to_vec();
    let (input, cond, ans) = (Var(1), Var(2), Var(3));
    let gt1 = PrimOp::closure("cond", &[input], &[cond], |x| Ok(vec![x[0].array::<i64>()?.mapv(|v| v > 1).into()]));
    let blocks = vec![
        Block {
            name: "entry".into(),
            ops: vec![Instruction::Prim(gt1)],
            terminator: Terminator::Branch { cond, if_true: BlockId(1), if_false: BlockId(2) },
        },
        Block {
            name: "then".into(),
            ops: vec![Instruction::Prim(PrimOp::constant("two", ans, 2i64))],
            terminator: Terminator::Goto(BlockId(3)),
        },
        Block {
            name: "else".into(),
            ops: vec![Instruction::Prim(PrimOp::constant("zero", ans, 0i64))],
            terminator: Terminator::Goto(BlockId(3)),
        },
        Block { name: "exit".into(), ops: vec![], terminator: Terminator::Return },
    ];
    Program::new(ControlFlowGraph { blocks }, vec![], names, vec![input], vec![ans], &[VarType::scalar(DType::I64)])
        .unwrap()
}

#[test]
fn single_if_allocation() {
    let p = single_if_by_hand();
    let want = table(&[("pc", Register), ("input", Register), ("cond", Register), ("ans", Register)]);
    assert_eq!(p.allocation_table(), want);
    let x = [i64t(&[3], &[0, 5, -15])];
    let want = vec![i64t(&[3], &[0, 2, 0])];
    assert_eq!(stackless::execute(&p, &x).unwrap(), want);
    assert_eq!(vm::execute(&p, &x).unwrap(), want);
    assert_eq!(reference::execute(&p, &x).unwrap(), want);
    // Built with the DSL, main calls the function: the pc needs a stack.
    let q = single_if();
    assert_eq!(q.allocation_table()["pc"], Full);
    assert_eq!(q.allocation_table()["cond"], Register);
}
