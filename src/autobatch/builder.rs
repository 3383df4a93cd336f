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

mod body;

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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let id = pb.function("id", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     f.ret(&[x])
    /// })?;
    /// let program = pb.build(id, &[VarType::scalar(DType::F64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[1.5f64, 2.5])])?[0].to_vec::<f64>()?, [1.5, 2.5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> ProgramBuilder {
        ProgramBuilder { names: HashSet::from(["pc".to_string()]), vars: vec!["pc".to_string()], decls: vec![] }
    }

    /// A fresh variable named `name` (made unique with a `_k` suffix if taken).
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let (a, b) = (pb.var("acc"), pb.var("acc")); // named "acc" and "acc_1"
    /// assert_ne!(a, b);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// // mutual recursion: declare both, then define them
    /// let even = pb.declare("even", &["n"], &["r"])?;
    /// let odd = pb.declare("odd", &["n"], &["r"])?;
    /// for (me, other, base) in [(even, odd, true), (odd, even, false)] {
    ///     pb.define(me, |f| {
    ///         let n = f.param(0)?;
    ///         let zero = f.eq(n, 0i64)?;
    ///         f.if_else(
    ///             zero,
    ///             |f| {
    ///                 let r = f.constant("base", Tensor::scalar(base))?;
    ///                 f.ret(&[r])
    ///             },
    ///             |f| {
    ///                 let m = f.sub(n, 1i64)?;
    ///                 let r = f.call(other, &[m])?;
    ///                 f.ret(&r)
    ///             },
    ///         )
    ///     })?;
    /// }
    /// assert!(pb.declare("even", &["n"], &["r"]).is_err()); // a name is declared once
    /// let program = pb.build(even, &[VarType::scalar(DType::I64)])?;
    /// let r = vm::execute(&program, &[Tensor::vec1(&[0i64, 3, 4])])?;
    /// assert_eq!(r[0].to_vec::<bool>()?, [true, false, true]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let inc = pb.declare("inc", &["x"], &["y"])?;
    /// pb.define(inc, |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.add(x, 1i64)?;
    ///     f.ret(&[y])
    /// })?;
    /// assert!(pb.define(inc, |f| f.ret(&[])).is_err()); // defined twice
    /// let program = pb.build(inc, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[1i64, 2])])?[0].to_vec::<i64>()?, [2, 3]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let double = pb.function("double", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 2i64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(double, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[1i64, 5])])?[0].to_vec::<i64>()?, [2, 10]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::autobatch::{reference, stackless};
    ///
    /// let mut pb = ProgramBuilder::new();
    /// let norm = pb.function("sq_norm", &["v"], &["s"], |f| {
    ///     let v = f.param(0)?;
    ///     let s = f.prim("sum_sq", &[v], |x| {
    ///         let a = x[0].array::<f64>()?; // [threads, 2]: one row per thread
    ///         Ok((a * a).sum_axis(ndarray::Axis(1)).into())
    ///     })?;
    ///     f.ret(&[s])
    /// })?;
    /// // one thread's input is a vector of 2
    /// let program = pb.build(norm, &[VarType::new(DType::F64, &[2])])?;
    /// let v = Tensor::from_vec(&[2, 2], vec![3.0f64, 4.0, 1.0, 1.0])?;
    /// assert_eq!(vm::execute(&program, &[v.clone()])?[0].to_vec::<f64>()?, [25.0, 2.0]);
    /// assert_eq!(stackless::execute(&program, &[v.clone()])?, reference::execute(&program, &[v])?);
    /// # Ok(())
    /// # }
    /// ```
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
}
