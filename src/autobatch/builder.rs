//! [`ProgramBuilder`]: a Rust DSL for auto-batchable programs.
//!
//! ```
//! use pfor::autobatch::{ProgramBuilder, VarType, stackless, vm};
//! use pfor::ops::BinaryKind;
//! use pfor::prelude::*;
//!
//! # fn main() -> Result<()> {
//! let mut pb = ProgramBuilder::new();
//! let fib = pb.declare("fib", &["n"], &["ans"])?; // declare first: the body recurses
//! pb.define(fib, |f| {
//!     let n = f.param(0)?;
//!     let ans = f.result(0)?;
//!     let cond = f.gt(n, 1i64)?; // helpers for arithmetic and comparisons (module `arith`)
//!     f.if_else(
//!         cond,
//!         |f| {
//!             let nm1 = f.sub(n, 1i64)?;
//!             let a = f.call(fib, &[nm1])?[0];
//!             // any closure over the batched tensors is a primop too
//!             let nm2 = f.prim("nm2", &[n], |x| Ok((x[0].array::<i64>()? - 2).into()))?;
//!             let b = f.call(fib, &[nm2])?[0];
//!             f.binary_into(BinaryKind::Add, a, b, ans)?;
//!             f.ret(&[ans])
//!         },
//!         |f| {
//!             f.constant_into(ans, 1i64)?;
//!             f.ret(&[ans])
//!         },
//!     )
//! })?;
//! let program = pb.build(fib, &[VarType::scalar(DType::I64)])?;
//! let n = Tensor::vec1(&[5i64, 6, 8, 9]);
//! assert_eq!(vm::execute(&program, &[n.clone()])?[0].to_vec::<i64>()?, vec![8, 13, 34, 55]);
//! assert_eq!(stackless::execute(&program, &[n.clone()])?[0].to_vec::<i64>()?, vec![8, 13, 34, 55]);
//! // per-function call counters: the batched run made the recursion's 15 + 25 + 67 + 109 calls
//! assert_eq!(vm::execute_with(&program, &[n], &Default::default())?.stats.calls("fib"), 216);
//! # Ok(())
//! # }
//! ```
//!
//! Semantics: variables are global to the program and mutable (a write overwrites); each
//! builder variable gets a unique name (`name`, then `name_1`, `name_2`, ...). Structured
//! control flow (`if_else`, `if_then`, `while_loop`) compiles to basic blocks laid out in
//! source order (branch bodies before their join, loop bodies between head and exit), which
//! is the order the "lowest pc first" schedulers prefer. Every path of a function must end
//! in [`FunctionBuilder::ret`]; code after a `ret` is an error. A capped loop
//! ([`FunctionBuilder::while_loop_with`]) counts its trips in a per-thread variable and has
//! the semantics of a capped graph `while` (`IterationCap`): the condition is evaluated
//! before every trip, and when it still holds after the cap the thread leaves the loop
//! (`OnLimit::Stop`) or the run fails with `Error::IterationLimit` (`OnLimit::Error`).

use std::collections::HashSet;

use super::primop::PrimOp;
use super::program::{
    Block, BlockId, ControlFlowGraph, FuncId, FunctionCallOp, FunctionDef, Instruction, Program, Terminator, Var,
    VarDef, VarType,
};
use crate::error::{Error, Result};
use crate::ir::Function;
use crate::ops::{IterationCap, OnLimit};
use crate::tensor::Tensor;

struct Decl {
    name: String,
    params: Vec<Var>,
    results: Vec<Var>,
    graph: Option<ControlFlowGraph>,
}

/// Builds a [`Program`]: declare functions, define their bodies, then [`build`](Self::build).
pub struct ProgramBuilder {
    names: HashSet<String>,
    vars: Vec<String>,
    decls: Vec<Decl>,
}

impl Default for ProgramBuilder {
    fn default() -> Self {
        ProgramBuilder::new()
    }
}

impl ProgramBuilder {
    /// An empty builder (variable 0 is the reserved `pc`).
    pub fn new() -> ProgramBuilder {
        ProgramBuilder { names: HashSet::from(["pc".to_string()]), vars: vec!["pc".to_string()], decls: vec![] }
    }

    /// A fresh variable named `name` (made unique with a `_k` suffix if taken).
    pub fn var(&mut self, name: &str) -> Var {
        let mut unique = name.to_string();
        let mut k = 0;
        while self.names.contains(&unique) {
            k += 1;
            unique = format!("{name}_{k}");
        }
        self.names.insert(unique.clone());
        self.vars.push(unique);
        Var(self.vars.len() - 1)
    }

    /// Declare a function's name, parameter names and result names (define it later).
    pub fn declare(&mut self, name: &str, params: &[&str], results: &[&str]) -> Result<FuncId> {
        if self.decls.iter().any(|d| d.name == name) {
            return Err(Error::InvalidArgument(format!("autobatch: function '{name}' is declared twice")));
        }
        let params = params.iter().map(|p| self.var(p)).collect();
        let results = results.iter().map(|r| self.var(r)).collect();
        self.decls.push(Decl { name: name.to_string(), params, results, graph: None });
        Ok(FuncId(self.decls.len() - 1))
    }

    fn decl(&self, f: FuncId) -> Result<&Decl> {
        self.decls.get(f.0).ok_or_else(|| Error::UnknownFunction { name: format!("#{}", f.0) })
    }

    /// Define a declared function's body.
    pub fn define(&mut self, f: FuncId, body: impl FnOnce(&mut FunctionBuilder) -> Result<()>) -> Result<()> {
        let d = self.decl(f)?;
        if d.graph.is_some() {
            return Err(Error::InvalidArgument(format!("autobatch: function '{}' is defined twice", d.name)));
        }
        let (name, params, results) = (d.name.clone(), d.params.clone(), d.results.clone());
        let mut fb = FunctionBuilder { pb: self, name, params, results, blocks: vec![], cur: None };
        fb.cur = Some(fb.new_block("entry"));
        body(&mut fb)?;
        let graph = fb.finish()?;
        self.decls[f.0].graph = Some(graph);
        Ok(())
    }

    /// Declare and define in one step (for functions that do not recurse before definition).
    pub fn function(
        &mut self,
        name: &str,
        params: &[&str],
        results: &[&str],
        body: impl FnOnce(&mut FunctionBuilder) -> Result<()>,
    ) -> Result<FuncId> {
        let f = self.declare(name, params, results)?;
        self.define(f, body)?;
        Ok(f)
    }

    /// The program: main calls `entry` on the inputs (of `input_types`, one per parameter)
    /// and returns its results. Validates, infers types and allocations.
    pub fn build(self, entry: FuncId, input_types: &[VarType]) -> Result<Program> {
        let mut this = self;
        let e = this.decl(entry)?;
        let (ename, eparams, eresults) = (e.name.clone(), e.params.clone(), e.results.clone());
        let vars_in: Vec<Var> = eparams.iter().map(|p| this.var(&format!("main.{}", this.vars[p.0]))).collect();
        let vars_out: Vec<Var> = eresults.iter().map(|r| this.var(&format!("main.{}", this.vars[r.0]))).collect();
        let main = ControlFlowGraph {
            blocks: vec![Block {
                name: format!("call_{ename}"),
                ops: vec![Instruction::Call(FunctionCallOp {
                    function: entry,
                    inputs: vars_in.clone(),
                    outputs: vars_out.clone(),
                })],
                terminator: Terminator::Return,
            }],
        };
        let mut functions = Vec::with_capacity(this.decls.len());
        for d in this.decls {
            let graph = d.graph.ok_or_else(|| Error::UnknownFunction { name: d.name.clone() })?;
            functions.push(FunctionDef { name: d.name, params: d.params, results: d.results, graph });
        }
        let var_defs = this.vars.into_iter().map(|name| VarDef { name, ty: None }).collect();
        Program { graph: main, functions, var_defs, vars_in, vars_out, var_alloc: vec![] }.finalize(input_types)
    }
}

struct PendingBlock {
    name: String,
    ops: Vec<Instruction>,
    term: Option<Terminator>,
}

/// Builds one function body (see [`ProgramBuilder::define`]).
pub struct FunctionBuilder<'a> {
    pb: &'a mut ProgramBuilder,
    name: String,
    params: Vec<Var>,
    results: Vec<Var>,
    blocks: Vec<PendingBlock>,
    cur: Option<usize>,
}

impl FunctionBuilder<'_> {
    fn new_block(&mut self, name: &str) -> usize {
        self.blocks.push(PendingBlock { name: name.to_string(), ops: vec![], term: None });
        self.blocks.len() - 1
    }

    fn current(&self) -> Result<usize> {
        self.cur.ok_or_else(|| {
            Error::InvalidArgument(format!("autobatch: function '{}': code after a return is unreachable", self.name))
        })
    }

    fn check_vars(&self, vs: &[Var]) -> Result<()> {
        for v in vs {
            if v.0 == 0 || v.0 >= self.pb.vars.len() {
                return Err(Error::InvalidArgument(format!(
                    "autobatch: function '{}': variable #{} does not belong to this program (or is the pc)",
                    self.name, v.0
                )));
            }
        }
        Ok(())
    }

    fn emit(&mut self, inst: Instruction) -> Result<()> {
        let c = self.current()?;
        self.blocks[c].ops.push(inst);
        Ok(())
    }

    fn finish(self) -> Result<ControlFlowGraph> {
        if self.cur.is_some() {
            return Err(Error::InvalidArgument(format!(
                "autobatch: function '{}' can reach its end without a return",
                self.name
            )));
        }
        let name = self.name;
        let blocks = self
            .blocks
            .into_iter()
            .map(|b| {
                let terminator = b.term.ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "autobatch: function '{name}': block '{}' has no terminator",
                        b.name
                    ))
                })?;
                Ok(Block { name: b.name, ops: b.ops, terminator })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ControlFlowGraph { blocks })
    }

    /// Parameter `i`.
    pub fn param(&self, i: usize) -> Result<Var> {
        self.params
            .get(i)
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("autobatch: function '{}' has no parameter {i}", self.name)))
    }
    /// All parameters.
    pub fn params(&self) -> Vec<Var> {
        self.params.clone()
    }
    /// Result variable `i` (where the function leaves result `i`).
    pub fn result(&self, i: usize) -> Result<Var> {
        self.results
            .get(i)
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("autobatch: function '{}' has no result {i}", self.name)))
    }
    /// All result variables.
    pub fn results(&self) -> Vec<Var> {
        self.results.clone()
    }
    /// A fresh local variable.
    pub fn local(&mut self, name: &str) -> Var {
        self.pb.var(name)
    }

    /// Append a primop.
    pub fn op(&mut self, op: PrimOp) -> Result<()> {
        self.check_vars(&op.inputs)?;
        self.check_vars(&op.outputs)?;
        self.emit(Instruction::Prim(op))
    }
    /// `name = f(inputs)` for a one-output closure over batched tensors; returns the new variable.
    pub fn prim(
        &mut self,
        name: &str,
        inputs: &[Var],
        f: impl Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Result<Var> {
        let out = self.local(name);
        self.op(PrimOp::closure(name, inputs, &[out], move |x| Ok(vec![f(x)?])))?;
        Ok(out)
    }
    /// `outputs = f(inputs)` for a closure over batched tensors.
    pub fn prim_into(
        &mut self,
        name: &str,
        inputs: &[Var],
        outputs: &[Var],
        f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync + 'static,
    ) -> Result<()> {
        self.op(PrimOp::closure(name, inputs, outputs, f))
    }
    /// `outputs = function(inputs)` for a graph function over batched tensors.
    pub fn graph_prim(&mut self, name: &str, inputs: &[Var], outputs: &[Var], function: Function) -> Result<()> {
        self.op(PrimOp::function(name, inputs, outputs, function))
    }
    /// A fresh variable holding `value` in every thread.
    pub fn constant(&mut self, name: &str, value: impl Into<Tensor>) -> Result<Var> {
        let out = self.local(name);
        self.op(PrimOp::constant(name, out, value))?;
        Ok(out)
    }
    /// `var = value` in every active thread.
    pub fn constant_into(&mut self, var: Var, value: impl Into<Tensor>) -> Result<()> {
        let name = self.pb.vars.get(var.0).cloned().unwrap_or_default();
        self.op(PrimOp::constant(&name, var, value))
    }
    /// `dst = src`.
    pub fn assign(&mut self, dst: Var, src: Var) -> Result<()> {
        self.op(PrimOp::copy("assign", &[src], &[dst]))
    }

    /// Call `function` on `args`; returns fresh variables receiving its results.
    pub fn call(&mut self, function: FuncId, args: &[Var]) -> Result<Vec<Var>> {
        let d = self.pb.decl(function)?;
        let names: Vec<String> = d.results.iter().map(|r| self.pb.vars[r.0].clone()).collect();
        let outs: Vec<Var> = names.iter().map(|n| self.local(n)).collect();
        self.call_into(function, args, &outs)?;
        Ok(outs)
    }
    /// Call `function` on `args`, writing its results into `outputs`.
    pub fn call_into(&mut self, function: FuncId, args: &[Var], outputs: &[Var]) -> Result<()> {
        let d = self.pb.decl(function)?;
        if args.len() != d.params.len() {
            let op = format!("autobatch call of '{}' in function '{}'", d.name, self.name);
            return Err(Error::arity(&op, d.params.len().to_string(), args.len()));
        }
        if outputs.len() != d.results.len() {
            return Err(Error::InvalidArgument(format!(
                "autobatch: function '{}': '{}' has {} results, {} output variables given",
                self.name,
                d.name,
                d.results.len(),
                outputs.len()
            )));
        }
        self.check_vars(args)?;
        self.check_vars(outputs)?;
        self.emit(Instruction::Call(FunctionCallOp { function, inputs: args.to_vec(), outputs: outputs.to_vec() }))
    }

    /// Per thread: run `then` where `cond` (a `bool[]` variable) holds, `otherwise` elsewhere.
    pub fn if_else(
        &mut self,
        cond: Var,
        then: impl FnOnce(&mut Self) -> Result<()>,
        otherwise: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.check_vars(&[cond])?;
        let head = self.current()?;
        let t = self.new_block("then");
        self.cur = Some(t);
        then(self)?;
        let t_end = self.cur;
        let e = self.new_block("else");
        self.cur = Some(e);
        otherwise(self)?;
        let e_end = self.cur;
        self.blocks[head].term = Some(Terminator::Branch { cond, if_true: BlockId(t), if_false: BlockId(e) });
        self.join(&[t_end, e_end]);
        Ok(())
    }

    /// Per thread: run `then` where `cond` holds.
    pub fn if_then(&mut self, cond: Var, then: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        self.check_vars(&[cond])?;
        let head = self.current()?;
        let t = self.new_block("then");
        self.cur = Some(t);
        then(self)?;
        let t_end = self.cur;
        let j = self.new_block("join");
        self.blocks[head].term = Some(Terminator::Branch { cond, if_true: BlockId(t), if_false: BlockId(j) });
        if let Some(te) = t_end {
            self.blocks[te].term = Some(Terminator::Goto(BlockId(j)));
        }
        self.cur = Some(j);
        Ok(())
    }

    fn join(&mut self, ends: &[Option<usize>]) {
        if ends.iter().all(Option::is_none) {
            self.cur = None;
            return;
        }
        let j = self.new_block("join");
        for e in ends.iter().flatten() {
            self.blocks[*e].term = Some(Terminator::Goto(BlockId(j)));
        }
        self.cur = Some(j);
    }

    /// Per thread: `while cond() { body() }`; `cond` emits code computing a `bool[]` variable.
    pub fn while_loop(
        &mut self,
        cond: impl FnOnce(&mut Self) -> Result<Var>,
        body: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.while_loop_with(None, cond, body)
    }

    /// [`while_loop`](Self::while_loop) with an optional per-thread trip cap (see the module
    /// docs). Layout: `i = 0; head: c = cond(); go = c && i < max; branch go → body, after;
    /// body; i += 1; goto head; after: [OnLimit::Error: branch c → fail, exit; fail:
    /// IterationLimit]; exit`.
    pub fn while_loop_with(
        &mut self,
        cap: Option<IterationCap>,
        cond: impl FnOnce(&mut Self) -> Result<Var>,
        body: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let trips = match cap {
            Some(_) => Some(self.constant("trips", 0i64)?),
            None => None,
        };
        let pre = self.current()?;
        let head = self.new_block("loop_head");
        self.blocks[pre].term = Some(Terminator::Goto(BlockId(head)));
        self.cur = Some(head);
        let c = cond(self)?;
        self.check_vars(&[c])?;
        let go = match (cap, trips) {
            (Some(cap), Some(i)) => {
                let max = i64::try_from(cap.max_iterations).unwrap_or(i64::MAX);
                self.prim("under_cap", &[c, i], move |x| {
                    let (c, i) = (x[0].array::<bool>()?, x[1].array::<i64>()?);
                    Ok(ndarray::Zip::from(c).and(i).map_collect(|&c, &i| c && i < max).into())
                })?
            }
            _ => c,
        };
        let head_end = self.current()?;
        let b = self.new_block("loop_body");
        self.cur = Some(b);
        body(self)?;
        if self.cur.is_some() {
            if let Some(i) = trips {
                self.prim_into("count_trip", &[i], &[i], |x| Ok(vec![(x[0].array::<i64>()? + 1).into()]))?;
            }
            let be = self.current()?;
            self.blocks[be].term = Some(Terminator::Goto(BlockId(head)));
        }
        let after = self.new_block("loop_after");
        self.blocks[head_end].term =
            Some(Terminator::Branch { cond: go, if_true: BlockId(b), if_false: BlockId(after) });
        self.cur = Some(after);
        if let Some(cap @ IterationCap { on_limit: OnLimit::Error, .. }) = cap {
            let what = format!("autobatch while loop in function '{}'", self.name);
            self.if_then(c, |f| {
                // runs only when some thread got here (declared types: no probe run)
                let fail = PrimOp::closure("iteration_limit", &[c], &[], move |_| {
                    Err(Error::IterationLimit { what: what.clone(), limit: cap.max_iterations })
                });
                f.op(fail.with_types(vec![]))
            })?;
        }
        Ok(())
    }

    /// Return `values` (copied into the result variables unless they are them).
    pub fn ret(&mut self, values: &[Var]) -> Result<()> {
        if values.len() != self.results.len() {
            let op = format!("autobatch return from '{}'", self.name);
            return Err(Error::arity(&op, self.results.len().to_string(), values.len()));
        }
        self.check_vars(values)?;
        let c = self.current()?;
        if values != self.results.as_slice() {
            let results = self.results.clone();
            self.emit(Instruction::Prim(PrimOp::copy("ret", values, &results)))?;
        }
        self.blocks[c].term = Some(Terminator::Return);
        self.cur = None;
        Ok(())
    }
}
