//! Lowering: replace every `FunctionCallOp` by explicit stack traffic and jumps, producing
//! one flat control flow graph for the VM.
//!
//! Layout: the main graph's blocks first, then each reachable function's, in order; a
//! source block containing `k` (non-tail) calls becomes `k + 1` consecutive blocks (so a
//! function's blocks keep their relative order, and "lowest pc first" keeps preferring
//! earlier code). A call `outs = f(args)` becomes
//! 1. `push S` — save every variable in `S` = (live after the call − `outs`) ∩ `W(f)`, i.e.
//!    exactly the caller's values the callee may overwrite; all of them are Full;
//! 2. `params(f) = copy(args)` — a parallel copy (reads every argument first);
//! 3. `PushGoto { return_to: next block, target: entry of f }`;
//!
//! and the next block starts with
//! 4. `outs = copy(results(f))` — every function leaves its results in its result variables;
//! 5. `pop S` — restore the saved values (after the copy, so a saved variable that is also
//!    a callee result is read before it is restored).
//!
//! A function's `Return` becomes `IndirectGoto` (pop the pc stack); the main graph's
//! `Return` halts the thread. A self tail call (`results = f(args); return` inside `f`)
//! becomes `params = copy(args); goto entry`: nothing is live after it, so nothing is saved
//! and the stacks do not grow. This caller-saves scheme keeps every call stack-neutral for
//! every variable, so per-thread stack pointers always balance.

use super::alloc::Analysis;
use super::primop::PrimOp;
use super::program::{Block, BlockId, ControlFlowGraph, Instruction, PopOp, Program, PushOp, Terminator};
use super::segment::{TAIL_CALL, self_tail_call};
use crate::error::{Error, Result};

/// Check that `p` is built (typed and allocated) and is (`lowered`) or is not lowered.
pub(crate) fn check_runnable(p: &Program, lowered: bool) -> Result<()> {
    if p.var_alloc.len() != p.var_defs.len() {
        return Err(Error::InvalidArgument(
            "autobatch: the program has no allocation table: build it with ProgramBuilder::build or Program::new"
                .into(),
        ));
    }
    for v in p.vars_in.iter().chain(&p.vars_out) {
        p.var_type(*v)?;
    }
    let has_lowered_parts = p.graphs().flat_map(|g| &g.blocks).any(|b| {
        matches!(b.terminator, Terminator::PushGoto { .. } | Terminator::IndirectGoto)
            || b.ops.iter().any(|o| matches!(o, Instruction::Push(_) | Instruction::Pop(_)))
    });
    if lowered && (p.has_calls() || !p.functions.is_empty()) {
        return Err(Error::InvalidArgument("autobatch: expected a lowered program (no functions or calls)".into()));
    }
    if !lowered && has_lowered_parts {
        return Err(Error::InvalidArgument(
            "autobatch: the program is already lowered; the stackless and reference interpreters need calls".into(),
        ));
    }
    Ok(())
}

/// Lower `p` (see the module docs). Returns the lowered program and, per pc, the name of
/// the function whose entry block is at that pc (for error messages).
pub(crate) fn lower_with_entries(p: &Program) -> Result<(Program, Vec<Option<String>>)> {
    check_runnable(p, false)?;
    let a = Analysis::new(p);
    let graphs: Vec<usize> = (0..=p.functions.len()).filter(|&gi| a.reachable[gi]).collect();
    let graph = |gi: usize| if gi == 0 { &p.graph } else { &p.functions[gi - 1].graph };
    // Pass 1: the first lowered pc of every source block.
    let mut first: Vec<Vec<usize>> = vec![vec![]; p.functions.len() + 1];
    let mut pc = 0;
    for &gi in &graphs {
        for (bi, b) in graph(gi).blocks.iter().enumerate() {
            first[gi].push(pc);
            let tail = self_tail_call(p, gi, bi);
            let calls = b
                .ops
                .iter()
                .enumerate()
                .filter(|(oi, o)| matches!(o, Instruction::Call(_)) && Some(*oi) != tail)
                .count();
            pc += calls + 1;
        }
    }
    let mut entries = vec![None; pc];
    for &gi in graphs.iter().filter(|&&g| g > 0) {
        entries[first[gi][0]] = Some(p.functions[gi - 1].name.clone());
    }
    let entry_of = |gi: usize| -> Result<BlockId> {
        first.get(gi).and_then(|f| f.first()).map(|&e| BlockId(e)).ok_or_else(|| Error::UnknownFunction {
            name: gi.checked_sub(1).and_then(|i| p.functions.get(i)).map(|f| f.name.clone()).unwrap_or_default(),
        })
    };
    // Pass 2: emit.
    let mut blocks: Vec<Block> = Vec::with_capacity(pc);
    for &gi in &graphs {
        let prefix = if gi == 0 { "main".to_string() } else { p.functions[gi - 1].name.clone() };
        let remap = |t: BlockId| BlockId(first[gi][t.0]);
        for (bi, b) in graph(gi).blocks.iter().enumerate() {
            let tail = self_tail_call(p, gi, bi);
            let mut cur = Block { name: format!("{prefix}.{}", b.name), ops: vec![], terminator: Terminator::Return };
            let mut part = 0;
            let mut tail_done = false;
            for (oi, op) in b.ops.iter().enumerate() {
                match op {
                    Instruction::Call(c) if Some(oi) == tail => {
                        let params = &p.function(c.function)?.params;
                        cur.ops.push(Instruction::Prim(PrimOp::copy(TAIL_CALL, &c.inputs, params)));
                        cur.terminator = Terminator::Goto(entry_of(gi)?);
                        tail_done = true;
                        break;
                    }
                    Instruction::Call(c) => {
                        let callee = p.function(c.function)?;
                        let saved = a.saved_at_call(p, gi, bi, oi);
                        if !saved.is_empty() {
                            cur.ops.push(Instruction::Push(PushOp { vars: saved.clone() }));
                        }
                        if !callee.params.is_empty() {
                            let name = format!("call {}", callee.name);
                            cur.ops.push(Instruction::Prim(PrimOp::copy(&name, &c.inputs, &callee.params)));
                        }
                        part += 1;
                        let return_to = BlockId(first[gi][bi] + part);
                        cur.terminator = Terminator::PushGoto { return_to, target: entry_of(c.function.0 + 1)? };
                        let name = format!("{prefix}.{}.{part}", b.name);
                        blocks.push(std::mem::replace(
                            &mut cur,
                            Block { name, ops: vec![], terminator: Terminator::Return },
                        ));
                        if !c.outputs.is_empty() {
                            let name = format!("ret {}", callee.name);
                            cur.ops.push(Instruction::Prim(PrimOp::copy(&name, &callee.results, &c.outputs)));
                        }
                        if !saved.is_empty() {
                            cur.ops.push(Instruction::Pop(PopOp { vars: saved }));
                        }
                    }
                    Instruction::Prim(_) => cur.ops.push(op.clone()),
                    Instruction::Push(_) | Instruction::Pop(_) => {
                        return Err(Error::InvalidArgument("autobatch lower: the program is already lowered".into()));
                    }
                }
            }
            if !tail_done {
                cur.terminator = match &b.terminator {
                    Terminator::Goto(t) => Terminator::Goto(remap(*t)),
                    Terminator::Branch { cond, if_true, if_false } => {
                        Terminator::Branch { cond: *cond, if_true: remap(*if_true), if_false: remap(*if_false) }
                    }
                    Terminator::Return if gi == 0 => Terminator::Return,
                    Terminator::Return => Terminator::IndirectGoto,
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "autobatch lower: unexpected terminator {other:?}: the program is already lowered"
                        )));
                    }
                };
            }
            blocks.push(cur);
        }
    }
    let lowered = Program {
        graph: ControlFlowGraph { blocks },
        functions: vec![],
        var_defs: p.var_defs.clone(),
        vars_in: p.vars_in.clone(),
        vars_out: p.vars_out.clone(),
        var_alloc: p.var_alloc.clone(),
    };
    Ok((lowered, entries))
}

/// Lower a built program's calls to stack operations and jumps (see the module docs).
pub fn lower(p: &Program) -> Result<Program> {
    Ok(lower_with_entries(p)?.0)
}
