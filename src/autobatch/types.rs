//! Structural validation and type inference of programs.
//!
//! Types flow forward from the program inputs: a primop's output types come from its input
//! types ([`PrimOp::infer`]); a call copies argument types into the callee's parameters and
//! the callee's result types into the call's outputs. Every variable has ONE type for the
//! whole program, so inference iterates over all reachable graphs until nothing changes (a
//! fixpoint: a recursive function's result type becomes known from its base case and then
//! flows to the recursive call sites). A variable written with two different types is an
//! `Err` naming it, where it is written and both types; so is a reachable read of a
//! variable whose type can never be known (e.g. a recursion without a base case).

use hashbrown::HashSet;

use super::primop::PrimOp;
use super::program::{ControlFlowGraph, FuncId, Instruction, Program, Terminator, Var, VarType};
use crate::error::{Error, Result};
use crate::tensor::DType;

/// Where an instruction sits: graph index (0 = main, f + 1 = function f), block, op.
type Site = (usize, usize, usize);

fn graph_name(p: &Program, gi: usize) -> String {
    if gi == 0 { "main".into() } else { format!("function '{}'", p.functions[gi - 1].name) }
}

fn graph_of(p: &Program, gi: usize) -> &ControlFlowGraph {
    if gi == 0 { &p.graph } else { &p.functions[gi - 1].graph }
}

/// Check variable handles, function ids, call arities and block targets.
pub(crate) fn validate(p: &Program) -> Result<()> {
    let nv = p.var_defs.len();
    let check_var = |v: &Var, ctx: &dyn Fn() -> String| -> Result<()> {
        if v.0 >= nv {
            return Err(Error::InvalidArgument(format!("autobatch: {}: unknown variable #{}", ctx(), v.0)));
        }
        if *v == Var::PC {
            return Err(Error::InvalidArgument(format!("autobatch: {}: the pc variable is reserved", ctx())));
        }
        Ok(())
    };
    for v in p.vars_in.iter().chain(&p.vars_out) {
        check_var(v, &|| "program inputs/outputs".into())?;
    }
    for f in &p.functions {
        for v in f.params.iter().chain(&f.results) {
            check_var(v, &|| format!("function '{}' signature", f.name))?;
        }
    }
    for (gi, g) in p.graphs().enumerate() {
        if g.blocks.is_empty() {
            return Err(Error::InvalidArgument(format!("autobatch: {} has no blocks", graph_name(p, gi))));
        }
        for (bi, b) in g.blocks.iter().enumerate() {
            let ctx = || format!("{} block {bi} '{}'", graph_name(p, gi), b.name);
            for op in &b.ops {
                match op {
                    Instruction::Prim(o) => {
                        for v in o.inputs.iter().chain(&o.outputs) {
                            check_var(v, &ctx)?;
                        }
                    }
                    Instruction::Call(c) => {
                        let callee = p.function(c.function)?;
                        for v in c.inputs.iter().chain(&c.outputs) {
                            check_var(v, &ctx)?;
                        }
                        if c.inputs.len() != callee.params.len() {
                            let op = format!("autobatch call of '{}' in {}", callee.name, ctx());
                            return Err(Error::arity(&op, callee.params.len().to_string(), c.inputs.len()));
                        }
                        if c.outputs.len() != callee.results.len() {
                            return Err(Error::InvalidArgument(format!(
                                "autobatch: {}: call of '{}' receives {} results into {} variables",
                                ctx(),
                                callee.name,
                                callee.results.len(),
                                c.outputs.len()
                            )));
                        }
                    }
                    Instruction::Push(o) => o.vars.iter().try_for_each(|v| check_var(v, &ctx))?,
                    Instruction::Pop(o) => o.vars.iter().try_for_each(|v| check_var(v, &ctx))?,
                }
            }
            if let Terminator::Branch { cond, .. } = &b.terminator {
                check_var(cond, &ctx)?;
            }
            for s in g.successors(bi) {
                if s >= g.blocks.len() {
                    return Err(Error::InvalidArgument(format!("autobatch: {}: jump to missing block {s}", ctx())));
                }
            }
        }
    }
    Ok(())
}

/// Functions reachable from the main graph through calls.
pub(crate) fn reachable_functions(p: &Program) -> Vec<bool> {
    let mut seen = vec![false; p.functions.len()];
    let mut stack = vec![None::<FuncId>];
    while let Some(cur) = stack.pop() {
        let g = match cur {
            None => &p.graph,
            Some(f) => &p.functions[f.0].graph,
        };
        for op in g.blocks.iter().flat_map(|b| &b.ops) {
            if let Instruction::Call(c) = op
                && c.function.0 < seen.len()
                && !seen[c.function.0]
            {
                seen[c.function.0] = true;
                stack.push(Some(c.function));
            }
        }
    }
    seen
}

fn mismatch(p: &Program, v: Var, old: &VarType, new: &VarType, ctx: &str) -> Error {
    let op = format!("autobatch type inference: variable '{}' ({ctx})", p.var_name(v));
    if old.dtype != new.dtype {
        Error::DType { op, expected: old.to_string(), got: new.dtype }
    } else {
        Error::shape(&op, format!("holds {old} but is written with {new}"))
    }
}

fn set_type(p: &mut Program, v: Var, ty: &VarType, ctx: &dyn Fn() -> String) -> Result<bool> {
    match &p.var_defs[v.0].ty {
        None => {
            p.var_defs[v.0].ty = Some(ty.clone());
            Ok(true)
        }
        Some(old) if old == ty => Ok(false),
        Some(old) => Err(mismatch(p, v, &old.clone(), ty, &ctx())),
    }
}

fn known(p: &Program, vs: &[Var]) -> Option<Vec<VarType>> {
    vs.iter().map(|v| p.var_defs[v.0].ty.clone()).collect()
}

/// Infer every variable's type from the program input types (to a fixpoint).
pub(crate) fn infer(p: &mut Program, inputs: &[VarType]) -> Result<()> {
    validate(p)?;
    if inputs.len() != p.vars_in.len() {
        return Err(Error::arity("autobatch program inputs", p.vars_in.len().to_string(), inputs.len()));
    }
    for d in p.var_defs.iter_mut() {
        d.ty = None;
    }
    p.var_defs[Var::PC.0].ty = Some(VarType::scalar(DType::I64));
    for (v, t) in p.vars_in.clone().into_iter().zip(inputs) {
        set_type(p, v, t, &|| "program input".into())?;
    }
    let reach = reachable_functions(p);
    let graphs: Vec<usize> =
        std::iter::once(0).chain((0..p.functions.len()).filter(|&f| reach[f]).map(|f| f + 1)).collect();
    let mut done: HashSet<Site> = HashSet::new();
    loop {
        let mut changed = false;
        for &gi in &graphs {
            let nblocks = graph_of(p, gi).blocks.len();
            for bi in 0..nblocks {
                let nops = graph_of(p, gi).blocks[bi].ops.len();
                for oi in 0..nops {
                    if done.contains(&(gi, bi, oi)) {
                        continue;
                    }
                    let op = graph_of(p, gi).blocks[bi].ops[oi].clone();
                    let ctx = format!("in {} block {bi}", graph_name(p, gi));
                    match &op {
                        Instruction::Prim(o) => {
                            if let Some(ins) = known(p, &o.inputs) {
                                let outs = o.infer(&ins).map_err(|e| with_ctx(e, o, &ctx))?;
                                let c = || format!("written by primop '{}' {ctx}", o.name);
                                for (v, t) in o.outputs.iter().zip(&outs) {
                                    set_type(p, *v, t, &c)?;
                                }
                                done.insert((gi, bi, oi));
                                changed = true;
                            }
                        }
                        Instruction::Call(c) => {
                            let callee = p.function(c.function)?.clone();
                            let cc = || format!("parameter of '{}', passed {ctx}", callee.name);
                            for (a, prm) in c.inputs.iter().zip(&callee.params) {
                                if let Some(t) = p.var_defs[a.0].ty.clone() {
                                    changed |= set_type(p, *prm, &t, &cc)?;
                                }
                            }
                            let rc = || format!("receiving a result of '{}' {ctx}", callee.name);
                            for (o, r) in c.outputs.iter().zip(&callee.results) {
                                if let Some(t) = p.var_defs[r.0].ty.clone() {
                                    changed |= set_type(p, *o, &t, &rc)?;
                                }
                            }
                        }
                        Instruction::Push(_) | Instruction::Pop(_) => {}
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    check_complete(p, &graphs, &done)
}

fn with_ctx(e: Error, o: &PrimOp, ctx: &str) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{m} ({ctx})")),
        other => Error::InvalidArgument(format!("autobatch primop '{}' {ctx}: {other}", o.name)),
    }
}

fn check_complete(p: &Program, graphs: &[usize], done: &HashSet<Site>) -> Result<()> {
    let untyped = |v: &Var| p.var_defs[v.0].ty.is_none();
    for &gi in graphs {
        for (bi, b) in graph_of(p, gi).blocks.iter().enumerate() {
            for (oi, op) in b.ops.iter().enumerate() {
                let (reads, what): (&[Var], String) = match op {
                    Instruction::Prim(o) if !done.contains(&(gi, bi, oi)) => {
                        (&o.inputs, format!("primop '{}'", o.name))
                    }
                    Instruction::Call(c) => (&c.inputs, format!("a call of '{}'", p.functions[c.function.0].name)),
                    _ => continue,
                };
                if let Some(v) = reads.iter().find(|v| untyped(v)) {
                    return Err(Error::InvalidArgument(format!(
                        "autobatch type inference: cannot infer the type of variable '{}' read by {what} in {} \
                         block {bi} (it is never written with a known type: a recursion without a base case?)",
                        p.var_name(*v),
                        graph_name(p, gi)
                    )));
                }
            }
            if let Terminator::Branch { cond, .. } = &b.terminator {
                match &p.var_defs[cond.0].ty {
                    Some(t) if t.dtype == DType::Bool && t.shape.is_empty() => {}
                    Some(t) if t.dtype == DType::Bool => {
                        return Err(Error::shape(
                            &format!(
                                "autobatch: branch condition '{}' in {} block {bi}",
                                p.var_name(*cond),
                                graph_name(p, gi)
                            ),
                            format!("must be one bool per thread (bool[]), got {t}"),
                        ));
                    }
                    Some(t) => {
                        return Err(Error::DType {
                            op: format!(
                                "autobatch: branch condition '{}' in {} block {bi}",
                                p.var_name(*cond),
                                graph_name(p, gi)
                            ),
                            expected: "bool[] (one bool per thread)".into(),
                            got: t.dtype,
                        });
                    }
                    None => {
                        return Err(Error::InvalidArgument(format!(
                            "autobatch type inference: branch condition '{}' in {} block {bi} has no known type",
                            p.var_name(*cond),
                            graph_name(p, gi)
                        )));
                    }
                }
            }
        }
    }
    let results = graphs.iter().filter(|&&g| g > 0).flat_map(|&g| p.functions[g - 1].results.iter());
    if let Some(v) = p.vars_out.iter().chain(results).find(|v| untyped(v)) {
        return Err(Error::InvalidArgument(format!(
            "autobatch type inference: cannot infer the type of result variable '{}' (no return path writes it \
             with a known type)",
            p.var_name(*v)
        )));
    }
    Ok(())
}
