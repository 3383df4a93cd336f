//! Straight-line block plans and their cache (the interpreters' `block_code_cache`).
//!
//! A [`BlockPlan`] is a block compiled once for execution: each primop paired with the
//! types of its outputs (for the run-time checks) and its execution-counter slot, pushes
//! and pops filtered to Full variables, and — for the stackless interpreter — a self tail
//! call rewritten to a parallel copy into the parameters plus a jump to the entry block.
//! Plans are built lazily on first execution and shared by every later execution of the
//! block, at every recursion depth and across runs of one executor.

use std::sync::{Arc, OnceLock};

use hashbrown::HashMap;

use super::primop::{PrimKind, PrimOp};
use super::program::{
    BlockId, ControlFlowGraph, FuncId, Instruction, Program, Terminator, Var, VarType, VariableAllocation,
};
use crate::error::{Error, Result};

/// Name of the copy that replaces a self tail call.
pub(crate) const TAIL_CALL: &str = "tailcall";

/// One step of a compiled block.
pub(crate) enum Step {
    /// A primop, its output types and its counter slot.
    Prim { op: PrimOp, out_types: Vec<VarType>, counter: usize },
    /// An interpreted call (stackless only).
    Call { function: FuncId, inputs: Vec<Var>, outputs: Vec<Var> },
    /// Save these Full variables.
    Push(Vec<Var>),
    /// Restore these Full variables.
    Pop(Vec<Var>),
}

/// A compiled block.
pub(crate) struct BlockPlan {
    pub(crate) steps: Vec<Step>,
    pub(crate) terminator: Terminator,
}

/// If block `bi` of graph `gi` ends in a self tail call (`outs = f(args)`, optionally
/// followed by the copy `results = outs`, then `Return`, inside `f`), the call's op index.
pub(crate) fn self_tail_call(p: &Program, gi: usize, bi: usize) -> Option<usize> {
    let f = p.functions.get(gi.checked_sub(1)?)?;
    let b = f.graph.blocks.get(bi)?;
    if b.terminator != Terminator::Return {
        return None;
    }
    let n = b.ops.len();
    let (ci, call) = match b.ops.last()? {
        Instruction::Call(c) if c.outputs == f.results => (n - 1, c),
        Instruction::Prim(PrimOp { kind: PrimKind::Copy, inputs, outputs, .. }) if n >= 2 && *outputs == f.results => {
            match &b.ops[n - 2] {
                Instruction::Call(c) if c.outputs == *inputs => (n - 2, c),
                _ => return None,
            }
        }
        _ => return None,
    };
    (call.function.0 == gi - 1).then_some(ci)
}

/// Lazily compiled plans for every block of every graph of one program.
pub(crate) struct PlanCache {
    names: Vec<String>,
    index: HashMap<String, usize>,
    plans: Vec<Vec<OnceLock<Arc<BlockPlan>>>>,
    rewrite_tail_calls: bool,
}

impl PlanCache {
    /// A cache for `p` (`rewrite_tail_calls` for the stackless interpreter).
    pub(crate) fn new(p: &Program, rewrite_tail_calls: bool) -> PlanCache {
        let mut names: Vec<String> = vec![TAIL_CALL.to_string()];
        for op in p.graphs().flat_map(|g| &g.blocks).flat_map(|b| &b.ops) {
            if let Instruction::Prim(o) = op
                && !names.contains(&o.name)
            {
                names.push(o.name.clone());
            }
        }
        let index = names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        let plans = p.graphs().map(|g: &ControlFlowGraph| g.blocks.iter().map(|_| OnceLock::new()).collect()).collect();
        PlanCache { names, index, plans, rewrite_tail_calls }
    }

    /// Primop names, by counter slot.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The plan of block `bi` of graph `gi`, compiling it on first use.
    pub(crate) fn get(&self, p: &Program, gi: usize, bi: usize, compiled: &mut usize) -> Result<Arc<BlockPlan>> {
        let cell = self
            .plans
            .get(gi)
            .and_then(|g| g.get(bi))
            .ok_or_else(|| Error::InvalidArgument(format!("autobatch: no block {bi} in graph {gi}")))?;
        if let Some(plan) = cell.get() {
            return Ok(plan.clone());
        }
        let plan = Arc::new(self.compile(p, gi, bi)?);
        *compiled += 1;
        Ok(cell.get_or_init(|| plan).clone())
    }

    fn prim_step(&self, p: &Program, op: PrimOp) -> Result<Step> {
        let out_types = op.outputs.iter().map(|v| p.var_type(*v).cloned()).collect::<Result<Vec<_>>>()?;
        let counter = self.index.get(&op.name).copied().unwrap_or(0);
        Ok(Step::Prim { op, out_types, counter })
    }

    fn compile(&self, p: &Program, gi: usize, bi: usize) -> Result<BlockPlan> {
        let g = if gi == 0 { &p.graph } else { &p.function(FuncId(gi - 1))?.graph };
        let b = &g.blocks[bi];
        let tail = if self.rewrite_tail_calls { self_tail_call(p, gi, bi) } else { None };
        let full = |vs: &[Var]| -> Vec<Var> {
            vs.iter().copied().filter(|v| p.alloc(*v) == VariableAllocation::Full).collect()
        };
        let mut steps = Vec::with_capacity(b.ops.len());
        for (oi, op) in b.ops.iter().enumerate() {
            if Some(oi) == tail {
                if let Instruction::Call(c) = op {
                    let params = p.function(c.function)?.params.clone();
                    steps.push(self.prim_step(p, PrimOp::copy(TAIL_CALL, &c.inputs, &params))?);
                }
                return Ok(BlockPlan { steps, terminator: Terminator::Goto(BlockId(0)) });
            }
            steps.push(match op {
                Instruction::Prim(o) => self.prim_step(p, o.clone())?,
                Instruction::Call(c) => {
                    Step::Call { function: c.function, inputs: c.inputs.clone(), outputs: c.outputs.clone() }
                }
                Instruction::Push(o) => Step::Push(full(&o.vars)),
                Instruction::Pop(o) => Step::Pop(full(&o.vars)),
            });
        }
        propagate_copies(p, &mut steps);
        Ok(BlockPlan { steps, terminator: b.terminator.clone() })
    }
}

impl Step {
    /// The variables this step reads (all before any it writes).
    fn reads(&self) -> &[Var] {
        match self {
            Step::Prim { op, .. } => &op.inputs,
            Step::Call { inputs, .. } => inputs,
            Step::Push(vs) => vs,
            Step::Pop(_) => &[],
        }
    }

    /// The variables this step writes.
    fn writes(&self) -> &[Var] {
        match self {
            Step::Prim { op, .. } => &op.outputs,
            Step::Call { outputs, .. } => outputs,
            Step::Push(_) => &[],
            Step::Pop(vs) => vs,
        }
    }

    fn inputs_mut(&mut self) -> &mut [Var] {
        match self {
            Step::Prim { op, .. } => &mut op.inputs,
            Step::Call { inputs, .. } => inputs,
            Step::Push(vs) => vs,
            Step::Pop(_) => &mut [],
        }
    }
}

/// Copy propagation inside one compiled block (a plan-level rewrite; the program is
/// unchanged). Removes from every parallel copy
/// - identity pairs `v = v` (a parallel copy reads all inputs before writing any output),
/// - pairs `t = s` into a Temporary `t`, when every later read of `t` in the block happens
///   before `s` is next written: those reads are rewritten to read `s` instead. A
///   Temporary is read and written only inside this block and is not live out of it, so
///   the block's other readers see the same value and the terminator never reads it.
///
/// A copy step whose pairs are all removed stays in the plan with no pairs, so execution
/// counters are unchanged. This keeps values in their registers: an executor running
/// compacted rows would otherwise gather a value into a temporary and scatter it back,
/// twice per call return.
fn propagate_copies(p: &Program, steps: &mut [Step]) {
    for i in 0..steps.len() {
        let Step::Prim { op, .. } = &steps[i] else { continue };
        if !matches!(op.kind, PrimKind::Copy) {
            continue;
        }
        let pairs: Vec<(Var, Var)> = op.inputs.iter().copied().zip(op.outputs.iter().copied()).collect();
        let mut drop = vec![false; pairs.len()];
        for (k, &(src, dst)) in pairs.iter().enumerate() {
            if src == dst {
                drop[k] = true;
                continue;
            }
            let single_write = pairs.iter().filter(|(_, o)| *o == dst).count() == 1;
            let src_kept = !pairs.iter().any(|(_, o)| *o == src);
            if p.alloc(dst) != VariableAllocation::Temporary || !single_write || !src_kept {
                continue;
            }
            if let Some(uses) = forwardable_uses(steps, i, src, dst) {
                for j in uses {
                    for v in steps[j].inputs_mut() {
                        if *v == dst {
                            *v = src;
                        }
                    }
                }
                drop[k] = true;
            }
        }
        if let Step::Prim { op, out_types, .. } = &mut steps[i] {
            retain_unmarked(&mut op.inputs, &drop);
            retain_unmarked(&mut op.outputs, &drop);
            retain_unmarked(out_types, &drop);
        }
    }
}

fn retain_unmarked<T>(v: &mut Vec<T>, drop: &[bool]) {
    let mut k = 0;
    v.retain(|_| {
        k += 1;
        !drop.get(k - 1).copied().unwrap_or(false)
    });
}

/// The steps after `at` that read `dst` (defined at `at` as a copy of `src`), if every one
/// of them runs before `src` is next written; `None` otherwise.
fn forwardable_uses(steps: &[Step], at: usize, src: Var, dst: Var) -> Option<Vec<usize>> {
    let mut uses = Vec::new();
    let mut src_written = false;
    for (j, step) in steps.iter().enumerate().skip(at + 1) {
        if step.reads().contains(&dst) {
            if src_written {
                return None;
            }
            uses.push(j);
        }
        if step.writes().contains(&dst) {
            break;
        }
        src_written |= step.writes().contains(&src);
    }
    Some(uses)
}
