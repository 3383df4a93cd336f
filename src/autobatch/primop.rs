//! Primitive operations: the batched computations the interpreters schedule.
//!
//! A [`PrimOp`] reads its input variables and writes its output variables. Its body
//! ([`PrimKind`]) always sees BATCHED tensors: each input is `[width] + event shape`, where
//! `width` is however many thread rows the executor chose to compute (all of the batch in
//! masked mode, only the active threads in gather/scatter mode, one row in the reference
//! interpreter). It must return one tensor per output variable, each with the same leading
//! `width`; rows are independent (row `i` of an output may depend only on row `i` of the
//! inputs). In masked mode a body also sees the stale rows of inactive threads, so it must
//! be total (never panic) on any value of its input types.
//!
//! Type inference runs a closure body once on EMPTY inputs (`width = 0`) to learn its output
//! dtypes and event shapes, unless the types are declared with [`PrimOp::with_types`]; a
//! graph-`Function` body is typed from its signature. Every output is checked at run time
//! (count, dtype, `[width] + event shape`): a wrong body is an `Err` naming the op.

use std::fmt;
use std::sync::Arc;

use super::mask::Mask;
use super::program::{Program, Var, VarType, VariableAllocation};
use super::rows;
use super::{ExecConfig, ExecMode};
use crate::error::{Error, Result};
use crate::ir::Function;
use crate::ops::FunctionRunner;
use crate::tensor::Tensor;

/// A batched computation over tensors whose axis 0 is the thread axis.
pub type PrimFn = Arc<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync>;

/// The body of a [`PrimOp`].
#[derive(Clone)]
pub enum PrimKind {
    /// A Rust closure over batched tensors (the primary form).
    Closure(PrimFn),
    /// A graph function run on batched inputs with the running program's options
    /// ([`ExecConfig::functions`]); its parameters and results carry the batch dimension
    /// first.
    Function(Arc<Function>),
    /// A per-thread constant (the tensor is one thread's value; it is broadcast).
    Const(Tensor),
    /// `outputs[i] = inputs[i]` for all `i` at once (a parallel copy).
    Copy,
}

/// A batched primitive operation: `outputs = body(inputs)`.
#[derive(Clone)]
pub struct PrimOp {
    /// A name (for printing and execution counters).
    pub name: String,
    /// Variables read.
    pub inputs: Vec<Var>,
    /// Variables written.
    pub outputs: Vec<Var>,
    /// The computation.
    pub kind: PrimKind,
    /// Declared output types (otherwise inferred).
    pub out_types: Option<Vec<VarType>>,
}

impl fmt::Debug for PrimOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrimOp({} {:?} -> {:?})", self.describe(), self.inputs, self.outputs)
    }
}

impl PrimOp {
    /// A closure primop.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // rows are threads: [width] in, [width] out
    /// let op = PrimOp::closure("double", &[Var(1)], &[Var(2)], |x| Ok(vec![(x[0].array::<i64>()? * 2).into()]));
    /// let i64s = [VarType::scalar(DType::I64)];
    /// let out = op.run(vec![Tensor::vec1(&[1i64, 2])], 2, &i64s, &ExecConfig::default())?;
    /// assert_eq!(out[0].to_vec::<i64>()?, [2, 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn closure(
        name: &str,
        inputs: &[Var],
        outputs: &[Var],
        f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>> + Send + Sync + 'static,
    ) -> PrimOp {
        PrimOp::new(name, inputs, outputs, PrimKind::Closure(Arc::new(f)))
    }
    /// A graph-function primop.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let ty = [TensorType::new(DType::F64, [Dim::unknown()])]; // the batch of the threads' values
    /// let neg = Function::build(&Graph::new(), &ty, |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// let op = PrimOp::function("neg", &[Var(1)], &[Var(2)], neg);
    /// assert_eq!(op.describe(), "neg:graph");
    /// let f64s = [VarType::scalar(DType::F64)];
    /// assert_eq!(op.infer(&f64s)?, f64s); // typed from the function's signature
    /// # Ok(())
    /// # }
    /// ```
    pub fn function(name: &str, inputs: &[Var], outputs: &[Var], f: Function) -> PrimOp {
        PrimOp::new(name, inputs, outputs, PrimKind::Function(Arc::new(f)))
    }
    /// `output = value` for every thread.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let op = PrimOp::constant("zero", Var(1), 0i64);
    /// let out = op.run(vec![], 3, &[VarType::scalar(DType::I64)], &ExecConfig::default())?;
    /// assert_eq!(out[0].to_vec::<i64>()?, [0, 0, 0]); // one value per thread row
    /// # Ok(())
    /// # }
    /// ```
    pub fn constant(name: &str, output: Var, value: impl Into<Tensor>) -> PrimOp {
        PrimOp::new(name, &[], &[output], PrimKind::Const(value.into()))
    }
    /// A parallel copy `outputs[i] = inputs[i]`.
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let swap = PrimOp::copy("swap", &[Var(1), Var(2)], &[Var(2), Var(1)]); // at once: a swap
    /// assert_eq!(swap.describe(), "swap:copy");
    /// # Ok(())
    /// # }
    /// ```
    pub fn copy(name: &str, inputs: &[Var], outputs: &[Var]) -> PrimOp {
        PrimOp::new(name, inputs, outputs, PrimKind::Copy)
    }
    fn new(name: &str, inputs: &[Var], outputs: &[Var], kind: PrimKind) -> PrimOp {
        PrimOp { name: name.to_string(), inputs: inputs.to_vec(), outputs: outputs.to_vec(), kind, out_types: None }
    }
    /// Declare the output types (skips probing the body during type inference).
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // declared types: inference does not run the closure on empty inputs
    /// let op = PrimOp::closure("len", &[Var(1)], &[Var(2)], |x| Ok(vec![Tensor::vec1(&vec![3i64; x[0].shape()[0]])]))
    ///     .with_types(vec![VarType::scalar(DType::I64)]);
    /// assert_eq!(op.infer(&[VarType::new(DType::F32, &[3])])?, [VarType::scalar(DType::I64)]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_types(mut self, types: Vec<VarType>) -> PrimOp {
        self.out_types = Some(types);
        self
    }
    /// A short description for printing (`name`, `name:const ...`, `name:copy`, `name:graph`).
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(PrimOp::copy("ret", &[Var(1)], &[Var(2)]).describe(), "ret:copy");
    /// assert!(PrimOp::constant("one", Var(1), 1i64).describe().starts_with("one:const"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn describe(&self) -> String {
        match &self.kind {
            PrimKind::Closure(_) => self.name.clone(),
            PrimKind::Function(_) => format!("{}:graph", self.name),
            PrimKind::Const(t) => format!("{}:const {}", self.name, t.to_f64_vec().first().copied().unwrap_or(0.0)),
            PrimKind::Copy => format!("{}:copy", self.name),
        }
    }

    fn err(&self, msg: impl fmt::Display) -> Error {
        Error::InvalidArgument(format!("autobatch primop '{}': {msg}", self.name))
    }

    /// Output types from input types (see the module docs).
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // a closure's output types come from one run on empty inputs ([0] + event shape)
    /// let op = PrimOp::closure("sum", &[Var(1)], &[Var(2)], |x| {
    ///     Ok(vec![x[0].array::<f64>()?.sum_axis(ndarray::Axis(1)).into()])
    /// });
    /// assert_eq!(op.infer(&[VarType::new(DType::F64, &[4])])?, [VarType::scalar(DType::F64)]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn infer(&self, in_types: &[VarType]) -> Result<Vec<VarType>> {
        if in_types.len() != self.inputs.len() {
            return Err(Error::arity(
                &format!("autobatch primop '{}'", self.name),
                self.inputs.len().to_string(),
                in_types.len(),
            ));
        }
        let types = match (&self.kind, &self.out_types) {
            (PrimKind::Const(v), _) => {
                if !self.inputs.is_empty() {
                    return Err(self.err("a constant takes no inputs"));
                }
                vec![VarType::new(v.dtype(), v.shape())]
            }
            (PrimKind::Copy, _) => {
                if self.inputs.len() != self.outputs.len() {
                    return Err(self.err(format!(
                        "a copy needs as many outputs as inputs ({} vs {})",
                        self.outputs.len(),
                        self.inputs.len()
                    )));
                }
                in_types.to_vec()
            }
            (_, Some(declared)) => declared.clone(),
            (PrimKind::Function(f), None) => function_types(self, f, in_types)?,
            (PrimKind::Closure(_), None) => {
                if self.inputs.is_empty() {
                    return Err(self.err("a closure needs at least one input (the batch size); use a constant"));
                }
                let probes: Vec<Tensor> = in_types.iter().map(|t| rows::zeros(t, 0)).collect::<Result<_>>()?;
                let outs = self
                    .call(probes, None)
                    .map_err(|e| self.err(format!("type inference (run on an empty batch) failed: {e}")))?;
                let mut types = Vec::with_capacity(outs.len());
                for (i, o) in outs.iter().enumerate() {
                    if o.rank() == 0 || o.shape()[0] != 0 {
                        return Err(self.err(format!(
                            "output {i} has shape {:?} for an empty batch: outputs must keep the batch axis first",
                            o.shape()
                        )));
                    }
                    types.push(VarType::new(o.dtype(), &o.shape()[1..]));
                }
                types
            }
        };
        if types.len() != self.outputs.len() {
            return Err(self.err(format!(
                "produces {} outputs but writes {} variables",
                types.len(),
                self.outputs.len()
            )));
        }
        Ok(types)
    }

    fn call(&self, inputs: Vec<Tensor>, functions: Option<&FunctionRunner>) -> Result<Vec<Tensor>> {
        match &self.kind {
            PrimKind::Closure(f) => f(&inputs),
            PrimKind::Function(f) => match functions {
                Some(r) => r.run(f, inputs),
                None => crate::exec::run_function(f, inputs),
            },
            PrimKind::Copy => Ok(inputs),
            PrimKind::Const(v) => Ok(vec![v.clone()]),
        }
    }

    /// Run on `width` thread rows and check every output against `expect` (the output
    /// variables' types); a graph function runs with `config`'s [`ExecConfig::functions`].
    ///
    /// ```
    /// use pfor::autobatch::{ExecConfig, PrimOp, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let op = PrimOp::closure("bad", &[Var(1)], &[Var(2)], |x| Ok(vec![x[0].clone(), x[0].clone()]));
    /// let t = [VarType::scalar(DType::I64)];
    /// // every output is checked: two outputs for one variable is an error naming the op
    /// let e = op.run(vec![Tensor::vec1(&[1i64])], 1, &t, &ExecConfig::default()).unwrap_err();
    /// assert!(e.to_string().contains("bad"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(
        &self,
        inputs: Vec<Tensor>,
        width: usize,
        expect: &[VarType],
        config: &ExecConfig,
    ) -> Result<Vec<Tensor>> {
        let outs = match &self.kind {
            PrimKind::Const(v) => vec![rows::broadcast(v, width)?],
            _ => self.call(inputs, config.functions.as_ref())?,
        };
        if outs.len() != self.outputs.len() {
            return Err(self.err(format!("returned {} outputs, expected {}", outs.len(), self.outputs.len())));
        }
        for (o, ty) in outs.iter().zip(expect) {
            let ok = o.dtype() == ty.dtype
                && o.rank() == ty.shape.len() + 1
                && o.shape()[0] == width
                && o.shape()[1..] == ty.shape[..];
            if !ok {
                return Err(self.err(format!(
                    "returned {}{:?} for {width} threads, expected {}{:?}",
                    o.dtype(),
                    o.shape(),
                    ty.dtype,
                    ty.batched_shape(width)
                )));
            }
        }
        Ok(outs)
    }
}

fn function_types(op: &PrimOp, f: &Function, in_types: &[VarType]) -> Result<Vec<VarType>> {
    let params = f.param_types();
    if params.len() != in_types.len() {
        return Err(op.err(format!(
            "the graph function takes {} parameters, given {} inputs",
            params.len(),
            in_types.len()
        )));
    }
    for (i, (p, t)) in params.iter().zip(in_types).enumerate() {
        let want = t.batched_tensor_type();
        if p.dtype != want.dtype || !p.shape.compatible(&want.shape) {
            return Err(op.err(format!("graph parameter {i} is {p}, but the input variable holds {want}")));
        }
    }
    f.result_types()
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let tail = if r.rank() == 0 { None } else { r.shape.tail().as_fixed() };
            tail.map(|s| VarType::new(r.dtype, &s)).ok_or_else(|| {
                op.err(format!("graph result {i} is {r}: results need a leading batch axis and a fixed event shape"))
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Execution modes

/// How one block execution lays out thread rows (chosen once per block run).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Layout {
    /// Every thread of the batch is active: values are whole registers, writes replace them.
    Dense,
    /// Masked mode: compute on all rows, then `where(mask, new, old)` into registers.
    Masked,
    /// Gather/scatter mode: compute only the active rows.
    Compact,
}

/// Pick the layout for `mask` (see [`super::ExecConfig::gather_threshold`]).
pub(crate) fn choose_layout(mask: &Mask, config: &ExecConfig) -> Layout {
    let (n, k) = (mask.len(), mask.count());
    if k == n {
        return Layout::Dense;
    }
    let gather = match config.mode {
        ExecMode::Masked => false,
        ExecMode::Gather => true,
        ExecMode::Auto => (k as f64) < config.gather_threshold * n as f64,
    };
    if gather { Layout::Compact } else { Layout::Masked }
}

/// Block-local values: temporaries, values written in this block (dirty) and, in gather
/// mode, gathered copies of registers (clean). Reused across blocks of one activation.
#[derive(Default)]
pub(crate) struct Locals {
    vals: Vec<Option<Tensor>>,
    dirty: Vec<bool>,
    touched: Vec<usize>,
}

/// One execution of a block's straight-line code under one mask.
pub(crate) struct BlockRun<'a> {
    prog: &'a Program,
    config: &'a ExecConfig,
    layout: Layout,
    mask: &'a Mask,
    idx: Vec<usize>,
    locals: &'a mut Locals,
}

impl<'a> BlockRun<'a> {
    /// Start a block run over `mask` (threads of a batch of `mask.len()`).
    pub(crate) fn new(prog: &'a Program, mask: &'a Mask, config: &'a ExecConfig, locals: &'a mut Locals) -> Self {
        let nv = prog.var_defs.len();
        if locals.vals.len() != nv {
            locals.vals = vec![None; nv];
            locals.dirty = vec![false; nv];
            locals.touched.clear();
        }
        BlockRun { prog, config, layout: choose_layout(mask, config), mask, idx: mask.indices(), locals }
    }

    /// The layout in use.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Rows per computed value (the batch, or the active count in gather mode).
    pub(crate) fn width(&self) -> usize {
        match &self.layout {
            Layout::Compact => self.idx.len(),
            _ => self.mask.len(),
        }
    }

    /// The current value of `v` in this run's layout.
    pub(crate) fn read(&mut self, regs: &[Option<Tensor>], v: Var) -> Result<Tensor> {
        if let Some(t) = &self.locals.vals[v.0] {
            return Ok(t.clone());
        }
        let reg = regs.get(v.0).and_then(|r| r.as_ref()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "autobatch: variable '{}' is read before it is written",
                self.prog.var_name(v)
            ))
        })?;
        match &self.layout {
            Layout::Compact => {
                let t = rows::gather(reg, &self.idx)?;
                self.locals.vals[v.0] = Some(t.clone());
                self.locals.touched.push(v.0);
                Ok(t)
            }
            _ => Ok(reg.clone()),
        }
    }

    /// Write `v` (dropped for Null variables).
    pub(crate) fn write(&mut self, v: Var, t: Tensor) {
        if self.prog.alloc(v) == VariableAllocation::Null {
            return;
        }
        if self.locals.vals[v.0].is_none() {
            self.locals.touched.push(v.0);
        }
        self.locals.vals[v.0] = Some(t);
        self.locals.dirty[v.0] = true;
    }

    /// Run a primop; `counter` indexes `stats.prim_counts`.
    pub(crate) fn run_prim(
        &mut self,
        regs: &mut [Option<Tensor>],
        op: &PrimOp,
        out_types: &[VarType],
        counter: usize,
        stats: &mut super::RunCounters,
    ) -> Result<()> {
        let parallel_safe = !op.outputs.iter().any(|o| op.inputs.contains(o));
        if matches!(op.kind, PrimKind::Copy) && self.layout != Layout::Dense && parallel_safe {
            // Register-to-register copies move only the active rows, in one pass.
            if let Some(c) = stats.prim_counts.get_mut(counter) {
                *c += 1;
            }
            stats.rows_computed += self.width() as u64;
            for (src, dst) in op.inputs.iter().zip(&op.outputs) {
                let direct = self.locals.vals[src.0].is_none()
                    && matches!(self.prog.alloc(*dst), VariableAllocation::Register | VariableAllocation::Full);
                if direct {
                    self.copy_register(regs, *src, *dst)?;
                } else {
                    let t = self.read(regs, *src)?;
                    self.write(*dst, t);
                }
            }
            return Ok(());
        }
        let mut ins = Vec::with_capacity(op.inputs.len());
        for v in &op.inputs {
            ins.push(self.read(regs, *v)?);
        }
        let width = self.width();
        let outs = op.run(ins, width, out_types, self.config)?;
        if let Some(c) = stats.prim_counts.get_mut(counter) {
            *c += 1;
        }
        stats.rows_computed += width as u64;
        for (v, t) in op.outputs.iter().zip(outs) {
            self.write(*v, t);
        }
        Ok(())
    }

    fn copy_register(&mut self, regs: &mut [Option<Tensor>], src: Var, dst: Var) -> Result<()> {
        self.locals.vals[dst.0] = None;
        self.locals.dirty[dst.0] = false;
        let s = regs.get(src.0).cloned().flatten().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "autobatch: variable '{}' is read before it is written",
                self.prog.var_name(src)
            ))
        })?;
        let mut d = match regs[dst.0].take() {
            Some(r) => r,
            None => rows::zeros(self.prog.var_type(dst)?, self.mask.len())?,
        };
        rows::copy_rows(&mut d, &s, &self.idx)?;
        regs[dst.0] = Some(d);
        Ok(())
    }

    fn write_back(&self, regs: &mut [Option<Tensor>], v: usize, t: Tensor) -> Result<()> {
        let batch = self.mask.len();
        if let Layout::Dense = self.layout {
            regs[v] = Some(t);
            return Ok(());
        }
        let reg = match regs[v].take() {
            Some(r) => r,
            None => rows::zeros(self.prog.var_type(Var(v))?, batch)?,
        };
        let mut reg = reg;
        match &self.layout {
            Layout::Compact => rows::scatter(&mut reg, &self.idx, &t)?,
            _ => rows::copy_rows(&mut reg, &t, &self.idx)?,
        }
        regs[v] = Some(reg);
        Ok(())
    }

    /// Store `v` back into its register if this run wrote it, and forget the local copy.
    pub(crate) fn flush_var(&mut self, regs: &mut [Option<Tensor>], v: Var) -> Result<()> {
        let val = self.locals.vals[v.0].take();
        let dirty = std::mem::replace(&mut self.locals.dirty[v.0], false);
        if let (Some(t), true) = (val, dirty)
            && self.prog.alloc(v) != VariableAllocation::Temporary
        {
            self.write_back(regs, v.0, t)?;
        }
        Ok(())
    }

    /// The active threads, ascending.
    pub(crate) fn indices(&self) -> &[usize] {
        &self.idx
    }

    /// End of the block: write back every written non-temporary, drop all locals. Returns
    /// the active thread indices.
    pub(crate) fn finish(self, regs: &mut [Option<Tensor>]) -> Result<Vec<usize>> {
        let touched = std::mem::take(&mut self.locals.touched);
        let mut res = Ok(());
        for v in touched {
            let val = self.locals.vals[v].take();
            let dirty = std::mem::replace(&mut self.locals.dirty[v], false);
            if let (Some(t), true, true) = (val, dirty, res.is_ok())
                && self.prog.alloc(Var(v)) != VariableAllocation::Temporary
            {
                res = self.write_back(regs, v, t);
            }
        }
        res.map(|()| self.idx)
    }
}
