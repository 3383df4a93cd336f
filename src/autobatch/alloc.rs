//! Dataflow analyses and allocation inference.
//!
//! - **Write sets**: `W(f)` = every variable function `f` may write, transitively through
//!   its calls (its parameters, locals, results and its callees' `W`), to a fixpoint.
//! - **Liveness** per graph (backward): a `Return` reads the function's results (the
//!   program outputs in the main graph), a `Branch` reads its condition.
//! - **Definite assignment** per graph (forward, intersection at joins): every read must be
//!   preceded by a write on every path, otherwise the VM could read another activation's
//!   stale value; such a program is rejected with an `Err` naming the variable.
//! - **Allocation** (cheapest strategy that is proven sufficient):
//!   `Null` if no reachable code reads the variable; `Full` if it is live across a call whose
//!   callee may write it (so the VM must save it on a stack); `Temporary` if every read and
//!   write is in one block, it is neither live into nor out of that block nor across a call
//!   inside it, nor read by the block's terminator, nor a parameter/result/program
//!   input/output; `Register` otherwise. The pc is `Full` when the program has calls (return
//!   addresses), `Register` otherwise.

use super::program::{ControlFlowGraph, Instruction, Program, Terminator, Var, VariableAllocation};
use super::types::reachable_functions;
use crate::error::{Error, Result};

/// A set of variables (bitset over the program's variable table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VarSet(Vec<u64>);

impl VarSet {
    pub(crate) fn empty(n: usize) -> VarSet {
        VarSet(vec![0; n.div_ceil(64)])
    }
    fn full(n: usize) -> VarSet {
        VarSet(vec![u64::MAX; n.div_ceil(64)])
    }
    pub(crate) fn contains(&self, v: Var) -> bool {
        self.0.get(v.0 / 64).is_some_and(|w| w >> (v.0 % 64) & 1 == 1)
    }
    pub(crate) fn insert(&mut self, v: Var) {
        if let Some(w) = self.0.get_mut(v.0 / 64) {
            *w |= 1 << (v.0 % 64);
        }
    }
    fn remove(&mut self, v: Var) {
        if let Some(w) = self.0.get_mut(v.0 / 64) {
            *w &= !(1 << (v.0 % 64));
        }
    }
    fn union(&mut self, o: &VarSet) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
    fn intersect(&mut self, o: &VarSet) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a &= b;
        }
    }
    /// Members, ascending.
    pub(crate) fn vars(&self) -> Vec<Var> {
        let mut out = Vec::new();
        for (wi, &w) in self.0.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                out.push(Var(wi * 64 + w.trailing_zeros() as usize));
                w &= w - 1;
            }
        }
        out
    }
}

fn op_uses(op: &Instruction) -> &[Var] {
    match op {
        Instruction::Prim(p) => &p.inputs,
        Instruction::Call(c) => &c.inputs,
        Instruction::Push(p) => &p.vars,
        Instruction::Pop(_) => &[],
    }
}

fn op_defs(op: &Instruction) -> &[Var] {
    match op {
        Instruction::Prim(p) => &p.outputs,
        Instruction::Call(c) => &c.outputs,
        Instruction::Pop(p) => &p.vars,
        Instruction::Push(_) => &[],
    }
}

/// Analyses of one program (before lowering).
pub(crate) struct Analysis {
    nvars: usize,
    /// `W(f)` per function.
    pub(crate) writes: Vec<VarSet>,
    /// Per graph (0 = main, f + 1 = function f): live-in and live-out per block.
    live_in: Vec<Vec<VarSet>>,
    live_out: Vec<Vec<VarSet>>,
    /// Which graphs are reachable from main.
    pub(crate) reachable: Vec<bool>,
}

impl Analysis {
    /// Run the write-set and liveness analyses.
    pub(crate) fn new(p: &Program) -> Analysis {
        let nvars = p.var_defs.len();
        let reach_f = reachable_functions(p);
        let reachable: Vec<bool> = std::iter::once(true).chain(reach_f).collect();
        let mut writes: Vec<VarSet> = p
            .functions
            .iter()
            .map(|f| {
                let mut s = VarSet::empty(nvars);
                f.params.iter().chain(&f.results).for_each(|v| s.insert(*v));
                f.graph.blocks.iter().flat_map(|b| &b.ops).flat_map(op_defs).for_each(|v| s.insert(*v));
                s
            })
            .collect();
        loop {
            let mut changed = false;
            for (fi, f) in p.functions.iter().enumerate() {
                for op in f.graph.blocks.iter().flat_map(|b| &b.ops) {
                    if let Instruction::Call(c) = op
                        && let Some(callee) = writes.get(c.function.0).cloned()
                    {
                        let before = writes[fi].clone();
                        writes[fi].union(&callee);
                        changed |= writes[fi] != before;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut live_in = Vec::new();
        let mut live_out = Vec::new();
        for (gi, g) in p.graphs().enumerate() {
            let ret_uses = if gi == 0 { &p.vars_out } else { &p.functions[gi - 1].results };
            let (i, o) = liveness(g, ret_uses, nvars);
            live_in.push(i);
            live_out.push(o);
        }
        Analysis { nvars, writes, live_in, live_out, reachable }
    }

    /// Variables live right after op `oi` of block `bi` of graph `gi`.
    pub(crate) fn live_after(&self, p: &Program, gi: usize, bi: usize, oi: usize) -> VarSet {
        let g = if gi == 0 { &p.graph } else { &p.functions[gi - 1].graph };
        let ret_uses = if gi == 0 { &p.vars_out } else { &p.functions[gi - 1].results };
        let b = &g.blocks[bi];
        let mut live = self.live_out[gi][bi].clone();
        term_uses(&b.terminator, ret_uses).iter().for_each(|v| live.insert(*v));
        for op in b.ops[oi + 1..].iter().rev() {
            step_back(&mut live, op);
        }
        live
    }

    /// The variables a call at (gi, bi, oi) must save: live across it and written by the callee.
    pub(crate) fn saved_at_call(&self, p: &Program, gi: usize, bi: usize, oi: usize) -> Vec<Var> {
        let g = if gi == 0 { &p.graph } else { &p.functions[gi - 1].graph };
        let Some(Instruction::Call(c)) = g.blocks[bi].ops.get(oi) else { return vec![] };
        let mut live = self.live_after(p, gi, bi, oi);
        c.outputs.iter().for_each(|v| live.remove(*v));
        match self.writes.get(c.function.0) {
            Some(w) => {
                live.intersect(w);
                live.vars()
            }
            None => vec![],
        }
    }
}

fn term_uses(t: &Terminator, ret_uses: &[Var]) -> Vec<Var> {
    match t {
        Terminator::Branch { cond, .. } => vec![*cond],
        Terminator::Return | Terminator::IndirectGoto => ret_uses.to_vec(),
        _ => vec![],
    }
}

fn step_back(live: &mut VarSet, op: &Instruction) {
    op_defs(op).iter().for_each(|v| live.remove(*v));
    op_uses(op).iter().for_each(|v| live.insert(*v));
}

fn liveness(g: &ControlFlowGraph, ret_uses: &[Var], nvars: usize) -> (Vec<VarSet>, Vec<VarSet>) {
    let n = g.blocks.len();
    let mut live_in = vec![VarSet::empty(nvars); n];
    let mut live_out = vec![VarSet::empty(nvars); n];
    loop {
        let mut changed = false;
        for bi in (0..n).rev() {
            let mut out = VarSet::empty(nvars);
            for s in g.successors(bi) {
                if let Some(li) = live_in.get(s) {
                    out.union(li);
                }
            }
            let mut live = out.clone();
            term_uses(&g.blocks[bi].terminator, ret_uses).iter().for_each(|v| live.insert(*v));
            for op in g.blocks[bi].ops.iter().rev() {
                step_back(&mut live, op);
            }
            if live != live_in[bi] || out != live_out[bi] {
                changed = true;
                live_in[bi] = live;
                live_out[bi] = out;
            }
        }
        if !changed {
            return (live_in, live_out);
        }
    }
}

/// Reject reads that are not preceded by a write on every path (per reachable graph).
pub(crate) fn check_definite_assignment(p: &Program, a: &Analysis) -> Result<()> {
    for (gi, g) in p.graphs().enumerate() {
        if !a.reachable[gi] {
            continue;
        }
        let (entry_defs, ret_uses, gname) = if gi == 0 {
            (&p.vars_in, &p.vars_out, "main".to_string())
        } else {
            let f = &p.functions[gi - 1];
            (&f.params, &f.results, format!("function '{}'", f.name))
        };
        let n = g.blocks.len();
        let mut ins = vec![VarSet::full(a.nvars); n];
        let mut entry = VarSet::empty(a.nvars);
        entry_defs.iter().for_each(|v| entry.insert(*v));
        ins[0] = entry.clone();
        let block_out = |bi: usize, input: &VarSet| {
            let mut s = input.clone();
            g.blocks[bi].ops.iter().flat_map(op_defs).for_each(|v| s.insert(*v));
            s
        };
        loop {
            let mut new_ins = vec![VarSet::full(a.nvars); n];
            new_ins[0] = entry.clone();
            for (bi, input) in ins.iter().enumerate() {
                let out = block_out(bi, input);
                for s in g.successors(bi) {
                    if let Some(x) = new_ins.get_mut(s) {
                        x.intersect(&out);
                    }
                }
            }
            let changed = new_ins != ins;
            ins = new_ins;
            if !changed {
                break;
            }
        }
        let reachable_blocks = reachable_blocks(g);
        for (bi, b) in g.blocks.iter().enumerate() {
            if !reachable_blocks[bi] {
                continue;
            }
            let mut defined = ins[bi].clone();
            let uses_then_defs = b.ops.iter().map(|op| (op_uses(op).to_vec(), op_defs(op).to_vec()));
            let term = (term_uses(&b.terminator, ret_uses), vec![]);
            for (uses, defs) in uses_then_defs.chain(std::iter::once(term)) {
                if let Some(v) = uses.iter().find(|v| !defined.contains(**v)) {
                    return Err(Error::InvalidArgument(format!(
                        "autobatch: in {gname} block {bi} '{}', variable '{}' may be read before it is written \
                         (write it on every path first)",
                        b.name,
                        p.var_name(*v)
                    )));
                }
                defs.iter().for_each(|v| defined.insert(*v));
            }
        }
    }
    Ok(())
}

fn reachable_blocks(g: &ControlFlowGraph) -> Vec<bool> {
    let mut seen = vec![false; g.blocks.len()];
    let mut stack = vec![0usize];
    while let Some(b) = stack.pop() {
        if b < seen.len() && !seen[b] {
            seen[b] = true;
            stack.extend(g.successors(b));
        }
    }
    seen
}

/// Infer the allocation of every variable (see the module docs).
pub(crate) fn allocate(p: &Program, a: &Analysis) -> Vec<VariableAllocation> {
    use VariableAllocation::*;
    let nv = p.var_defs.len();
    let mut read = vec![false; nv];
    let mut full = vec![false; nv];
    let mut pinned = vec![false; nv]; // never Temporary
    // The single block holding every occurrence, or None once seen in two blocks.
    let mut home: Vec<Option<Option<(usize, usize)>>> = vec![None; nv];
    let note = |v: Var, at: (usize, usize), home: &mut Vec<Option<Option<(usize, usize)>>>| {
        home[v.0] = match home[v.0] {
            None => Some(Some(at)),
            Some(Some(h)) if h == at => Some(Some(h)),
            _ => Some(None),
        };
    };
    p.vars_in.iter().chain(&p.vars_out).for_each(|v| pinned[v.0] = true);
    let mut any_call = false;
    for (gi, g) in p.graphs().enumerate() {
        if !a.reachable[gi] {
            continue;
        }
        let ret_uses = if gi == 0 { &p.vars_out } else { &p.functions[gi - 1].results };
        if gi > 0 {
            let f = &p.functions[gi - 1];
            f.params.iter().chain(&f.results).for_each(|v| pinned[v.0] = true);
        }
        for (bi, b) in g.blocks.iter().enumerate() {
            for (oi, op) in b.ops.iter().enumerate() {
                op_uses(op).iter().for_each(|v| read[v.0] = true);
                op_uses(op).iter().chain(op_defs(op)).for_each(|v| note(*v, (gi, bi), &mut home));
                if let Instruction::Call(c) = op {
                    any_call = true;
                    a.saved_at_call(p, gi, bi, oi).iter().for_each(|v| full[v.0] = true);
                    let mut across = a.live_after(p, gi, bi, oi);
                    c.outputs.iter().for_each(|v| across.remove(*v));
                    across.vars().iter().for_each(|v| pinned[v.0] = true);
                }
            }
            for v in term_uses(&b.terminator, ret_uses) {
                read[v.0] = true;
                pinned[v.0] = true;
            }
            for v in a.live_in[gi][bi].vars().into_iter().chain(a.live_out[gi][bi].vars()) {
                pinned[v.0] = true;
            }
        }
    }
    (0..nv)
        .map(|i| {
            if Var(i) == Var::PC {
                return if any_call { Full } else { Register };
            }
            if !read[i] {
                Null
            } else if full[i] {
                Full
            } else if !pinned[i] && matches!(home[i], Some(Some(_))) {
                Temporary
            } else {
                Register
            }
        })
        .collect()
}
