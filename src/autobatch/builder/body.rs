//! The public methods of [`FunctionBuilder`]: parameters and results, primops, calls and
//! structured control flow (the builder's state and block bookkeeping are in the parent module).

use super::*;

impl FunctionBuilder<'_> {
    /// Parameter `i`.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let first = pb.function("first", &["a", "b"], &["y"], |f| {
    ///     assert!(f.param(2).is_err()); // two parameters
    ///     let a = f.param(0)?;
    ///     f.ret(&[a])
    /// })?;
    /// let program = pb.build(first, &[VarType::scalar(DType::I64), VarType::scalar(DType::I64)])?;
    /// let r = vm::execute(&program, &[Tensor::vec1(&[1i64]), Tensor::vec1(&[2i64])])?;
    /// assert_eq!(r[0].to_vec::<i64>()?, [1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn param(&self, i: usize) -> Result<Var> {
        self.params
            .get(i)
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("autobatch: function '{}' has no parameter {i}", self.name)))
    }
    /// All parameters.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let swap = pb.function("swap", &["a", "b"], &["x", "y"], |f| {
    ///     let p = f.params();
    ///     f.ret(&[p[1], p[0]])
    /// })?;
    /// let program = pb.build(swap, &[VarType::scalar(DType::I64), VarType::scalar(DType::I64)])?;
    /// let r = vm::execute(&program, &[Tensor::vec1(&[1i64, 2]), Tensor::vec1(&[3i64, 4])])?;
    /// assert_eq!((r[0].to_vec::<i64>()?, r[1].to_vec::<i64>()?), (vec![3, 4], vec![1, 2]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn params(&self) -> Vec<Var> {
        self.params.clone()
    }
    /// Result variable `i` (where the function leaves result `i`).
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let seven = pb.function("seven", &["x"], &["y"], |f| {
    ///     let y = f.result(0)?; // write the result variable, then return it (no copy)
    ///     f.constant_into(y, 7i64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(seven, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[0i64, 0])])?[0].to_vec::<i64>()?, [7, 7]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn result(&self, i: usize) -> Result<Var> {
        self.results
            .get(i)
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("autobatch: function '{}' has no result {i}", self.name)))
    }
    /// All result variables.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let both = pb.function("sum_diff", &["a", "b"], &["s", "d"], |f| {
    ///     let (a, b) = (f.param(0)?, f.param(1)?);
    ///     let r = f.results();
    ///     f.binary_into(pfor::ops::BinaryKind::Add, a, b, r[0])?;
    ///     f.binary_into(pfor::ops::BinaryKind::Sub, a, b, r[1])?;
    ///     f.ret(&r)
    /// })?;
    /// let program = pb.build(both, &[VarType::scalar(DType::I64), VarType::scalar(DType::I64)])?;
    /// let r = vm::execute(&program, &[Tensor::vec1(&[5i64]), Tensor::vec1(&[3i64])])?;
    /// assert_eq!((r[0].to_vec::<i64>()?, r[1].to_vec::<i64>()?), (vec![8], vec![2]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn results(&self) -> Vec<Var> {
        self.results.clone()
    }
    /// A fresh local variable.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let sq = pb.function("sq", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, x)?;
    ///     f.ret(&[y])
    /// })?;
    /// let quad = pb.function("quad", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let t = f.local("t"); // a variable for call_into to write
    ///     f.call_into(sq, &[x], &[t])?;
    ///     let y = f.call(sq, &[t])?;
    ///     f.ret(&y)
    /// })?;
    /// let program = pb.build(quad, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[2i64, 3])])?[0].to_vec::<i64>()?, [16, 81]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn local(&mut self, name: &str) -> Var {
        self.pb.var(name)
    }

    /// Append a primop.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let y = f.result(0)?;
    ///     f.op(PrimOp::constant("nine", y, 9i64))?; // any primop
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[0i64])])?[0].to_vec::<i64>()?, [9]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn op(&mut self, op: PrimOp) -> Result<()> {
        self.check_vars(&op.inputs)?;
        self.check_vars(&op.outputs)?;
        self.emit(Instruction::Prim(op))
    }
    /// `name = f(inputs)` for a one-output closure over batched tensors; returns the new variable.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("square", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     // the closure sees every active thread's x at once: a batched tensor
    ///     let y = f.prim("square", &[x], |t| Ok(t[0].array::<f64>()?.mapv(|v| v * v).into()))?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::F64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[2.0f64, 3.0])])?[0].to_vec::<f64>()?, [4.0, 9.0]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("divmod3", &["n"], &["q", "r"], |f| {
    ///     let n = f.param(0)?;
    ///     let out = f.results();
    ///     f.prim_into("divmod", &[n], &out, |t| {
    ///         let a = t[0].array::<i64>()?;
    ///         Ok(vec![a.mapv(|v| v / 3).into(), a.mapv(|v| v % 3).into()])
    ///     })?;
    ///     f.ret(&out)
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// let r = vm::execute(&program, &[Tensor::vec1(&[7i64, 9])])?;
    /// assert_eq!((r[0].to_vec::<i64>()?, r[1].to_vec::<i64>()?), (vec![2, 3], vec![1, 0]));
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // a graph function over the batch of the threads' values ([threads])
    /// let batch = [TensorType::new(DType::F64, [Dim::unknown()])];
    /// let exp = Function::build(&Graph::new(), &batch, |g, a| Ok(vec![g.exp(a[0])?]))?;
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("exp", &["x"], &["y"], |f| {
    ///     let (x, y) = (f.param(0)?, f.result(0)?);
    ///     f.graph_prim("exp", &[x], &[y], exp)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::F64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[0.0f64])])?[0].to_vec::<f64>()?, [1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn graph_prim(&mut self, name: &str, inputs: &[Var], outputs: &[Var], function: Function) -> Result<()> {
        self.op(PrimOp::function(name, inputs, outputs, function))
    }
    /// A fresh variable holding `value` in every thread.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("plus_ten", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let ten = f.constant("ten", 10i64)?;
    ///     let y = f.add(x, ten)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[1i64, 2])])?[0].to_vec::<i64>()?, [11, 12]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn constant(&mut self, name: &str, value: impl Into<Tensor>) -> Result<Var> {
        let out = self.local(name);
        self.op(PrimOp::constant(name, out, value))?;
        Ok(out)
    }
    /// `var = value` in every active thread.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("sign", &["x"], &["s"], |f| {
    ///     let (x, s) = (f.param(0)?, f.result(0)?);
    ///     f.constant_into(s, 1i64)?;
    ///     let neg = f.lt(x, 0i64)?;
    ///     f.if_then(neg, |f| f.constant_into(s, -1i64))?; // only the threads with x < 0
    ///     f.ret(&[s])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[-4i64, 5])])?[0].to_vec::<i64>()?, [-1, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn constant_into(&mut self, var: Var, value: impl Into<Tensor>) -> Result<()> {
        let name = self.pb.vars.get(var.0).cloned().unwrap_or_default();
        self.op(PrimOp::constant(&name, var, value))
    }
    /// `dst = src`.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("clamp10", &["x"], &["y"], |f| {
    ///     let (x, y) = (f.param(0)?, f.result(0)?);
    ///     f.assign(y, x)?; // y = x
    ///     let big = f.gt(x, 10i64)?;
    ///     f.if_then(big, |f| f.constant_into(y, 10i64))?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[3i64, 30])])?[0].to_vec::<i64>()?, [3, 10]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn assign(&mut self, dst: Var, src: Var) -> Result<()> {
        self.op(PrimOp::copy("assign", &[src], &[dst]))
    }

    /// Call `function` on `args`; returns fresh variables receiving its results.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let fact = pb.declare("fact", &["n"], &["r"])?;
    /// pb.define(fact, |f| {
    ///     let n = f.param(0)?;
    ///     let small = f.le(n, 1i64)?;
    ///     f.if_else(
    ///         small,
    ///         |f| {
    ///             let one = f.constant("one", 1i64)?;
    ///             f.ret(&[one])
    ///         },
    ///         |f| {
    ///             let m = f.sub(n, 1i64)?;
    ///             let r = f.call(fact, &[m])?; // fresh variables for the results
    ///             let r = f.mul(n, r[0])?;
    ///             f.ret(&[r])
    ///         },
    ///     )
    /// })?;
    /// let program = pb.build(fact, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[1i64, 5, 3])])?[0].to_vec::<i64>()?, [1, 120, 6]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn call(&mut self, function: FuncId, args: &[Var]) -> Result<Vec<Var>> {
        let d = self.pb.decl(function)?;
        let names: Vec<String> = d.results.iter().map(|r| self.pb.vars[r.0].clone()).collect();
        let outs: Vec<Var> = names.iter().map(|n| self.local(n)).collect();
        self.call_into(function, args, &outs)?;
        Ok(outs)
    }
    /// Call `function` on `args`, writing its results into `outputs`.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let inc = pb.function("inc", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.add(x, 1i64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let twice = pb.function("inc_twice", &["x"], &["y"], |f| {
    ///     let (x, y) = (f.param(0)?, f.result(0)?);
    ///     f.call_into(inc, &[x], &[y])?;
    ///     f.call_into(inc, &[y], &[y])?;
    ///     assert!(f.call_into(inc, &[x, x], &[y]).is_err()); // inc takes one argument
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(twice, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[0i64, 40])])?[0].to_vec::<i64>()?, [2, 42]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let abs = pb.function("abs", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let neg = f.lt(x, 0i64)?;
    ///     // each thread runs the branch it takes; both branches run as batches
    ///     f.if_else(
    ///         neg,
    ///         |f| {
    ///             let m = f.mul(x, -1i64)?;
    ///             f.ret(&[m])
    ///         },
    ///         |f| f.ret(&[x]),
    ///     )
    /// })?;
    /// let program = pb.build(abs, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[-3i64, 4])])?[0].to_vec::<i64>()?, [3, 4]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("relu", &["x"], &["y"], |f| {
    ///     let (x, y) = (f.param(0)?, f.result(0)?);
    ///     f.assign(y, x)?;
    ///     let neg = f.lt(x, 0.0f64)?;
    ///     f.if_then(neg, |f| f.constant_into(y, 0.0f64))?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::F64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[-1.0f64, 2.0])])?[0].to_vec::<f64>()?, [0.0, 2.0]);
    /// # Ok(())
    /// # }
    /// ```
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

    /// Per thread: `while cond() { body() }`; `cond` emits code computing a `bool[]` variable.
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::ops::BinaryKind;
    ///
    /// let mut pb = ProgramBuilder::new();
    /// // s = n + (n - 1) + ... + 1: each thread loops its own number of times
    /// let f = pb.function("triangle", &["n"], &["s"], |f| {
    ///     let (n, s) = (f.param(0)?, f.result(0)?);
    ///     f.constant_into(s, 0i64)?;
    ///     let i = f.local("i");
    ///     f.assign(i, n)?;
    ///     f.while_loop(|f| f.gt(i, 0i64), |f| {
    ///         f.binary_into(BinaryKind::Add, s, i, s)?;
    ///         f.binary_into(BinaryKind::Sub, i, 1i64, i)
    ///     })?;
    ///     f.ret(&[s])
    /// })?;
    /// let program = pb.build(f, &[VarType::scalar(DType::I64)])?;
    /// assert_eq!(vm::execute(&program, &[Tensor::vec1(&[3i64, 0, 4])])?[0].to_vec::<i64>()?, [6, 0, 10]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::ops::BinaryKind;
    ///
    /// // `x = 1; while x < n { x *= 2 }` (the power of two reaching n), at most 3 trips
    /// let build = |cap: IterationCap| -> Result<pfor::autobatch::Program> {
    ///     let mut pb = ProgramBuilder::new();
    ///     let f = pb.function("pow2_at_least", &["n"], &["x"], |f| {
    ///         let (n, x) = (f.param(0)?, f.result(0)?);
    ///         f.constant_into(x, 1i64)?;
    ///         f.while_loop_with(Some(cap), |f| f.lt(x, n), |f| f.binary_into(BinaryKind::Mul, x, 2i64, x))?;
    ///         f.ret(&[x])
    ///     })?;
    ///     pb.build(f, &[VarType::scalar(DType::I64)])
    /// };
    /// let n = Tensor::vec1(&[5i64, 100]);
    /// let stopped = vm::execute(&build(IterationCap::stop(3))?, &[n.clone()])?;
    /// assert_eq!(stopped[0].to_vec::<i64>()?, [8, 8]); // 100 would need 7 trips: stopped at 3
    /// let e = vm::execute(&build(IterationCap::error(3))?, &[n]).unwrap_err();
    /// assert!(matches!(e.root(), Error::IterationLimit { .. }));
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::autobatch::{PrimOp, ProgramBuilder, VarType, vm};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let r = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     f.ret(&[x])?;
    ///     f.ret(&[x]) // code after a return
    /// });
    /// assert!(r.is_err());
    /// let r = pb.function("g", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     f.ret(&[x, x]) // one result, two values
    /// });
    /// assert!(r.is_err());
    /// # Ok(())
    /// # }
    /// ```
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
