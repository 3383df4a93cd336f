//! The auto-batching program IR: variables, instructions, blocks, functions, programs.
//!
//! Invariants:
//! - The variable namespace is global to a [`Program`]: a [`Var`] indexes
//!   [`Program::var_defs`] and [`Program::var_alloc`]. `Var(0)` is the reserved program
//!   counter variable `pc` (type `i64[]`), never read or written by instructions.
//! - Variable types exclude the batch dimension: a variable of type `f32[3]` holds a
//!   `[batch, 3]` tensor at run time (one row per logical thread).
//! - Every block ends in exactly one [`Terminator`]; block ids index the block list of the
//!   graph that owns them (pc = block index). `PushGoto`/`IndirectGoto` and
//!   [`Instruction::Push`]/[`Instruction::Pop`] appear only in lowered programs, and
//!   [`Instruction::Call`] only before lowering.
//! - Every function leaves its results in the same variables (its `results`) on every
//!   path, which is what lets calls be lowered to plain jumps.

use std::collections::BTreeMap;
use std::fmt;

use super::primop::PrimOp;
use crate::error::{Error, Result};
use crate::tensor::{DType, Shape, TensorType};

/// A variable of a program (an index into its variable table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub usize);

impl Var {
    /// The reserved program-counter variable.
    pub const PC: Var = Var(0);
    /// The index into the program's variable tables.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(Var::PC.index(), 0); // variable 0 is the program counter
    /// # Ok(())
    /// # }
    /// ```
    pub fn index(self) -> usize {
        self.0
    }
}

/// A function of a program (an index into [`Program::functions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub usize);

/// A basic block of one control flow graph (its index there, i.e. its pc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub usize);

/// The type of a variable: dtype and event shape (the batch dimension excluded).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarType {
    /// Element type.
    pub dtype: DType,
    /// Event shape (per logical thread).
    pub shape: Vec<usize>,
}

impl VarType {
    /// A type of `dtype` with event shape `shape`.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = VarType::new(DType::F32, &[28, 28]); // one thread's value: a 28x28 image
    /// assert_eq!(t.batched_shape(64), [64, 28, 28]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(dtype: DType, shape: &[usize]) -> VarType {
        VarType { dtype, shape: shape.to_vec() }
    }
    /// A per-thread scalar.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = VarType::scalar(DType::I64);
    /// assert_eq!((t.shape.len(), t.row_len()), (0, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn scalar(dtype: DType) -> VarType {
        VarType { dtype, shape: vec![] }
    }
    /// Elements per thread.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(VarType::new(DType::F64, &[3, 4]).row_len(), 12);
    /// # Ok(())
    /// # }
    /// ```
    pub fn row_len(&self) -> usize {
        self.shape.iter().product()
    }
    /// The concrete batched shape `[batch] + shape`.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(VarType::scalar(DType::Bool).batched_shape(5), [5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn batched_shape(&self, batch: usize) -> Vec<usize> {
        let mut s = Vec::with_capacity(self.shape.len() + 1);
        s.push(batch);
        s.extend_from_slice(&self.shape);
        s
    }
    /// The static graph type of the batched value (batch dim dynamic).
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let t = VarType::new(DType::F32, &[3]).batched_tensor_type();
    /// assert_eq!(t.shape, Shape::from_dims([Dim::unknown(), Dim::fixed(3)])); // the batch is dynamic
    /// # Ok(())
    /// # }
    /// ```
    pub fn batched_tensor_type(&self) -> TensorType {
        TensorType::new(self.dtype, Shape::fixed(&self.shape).prepend(crate::tensor::Dim::unknown()))
    }
}

impl fmt::Display for VarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)
    }
}

/// How a variable is stored by the VM (ordered cheapest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VariableAllocation {
    /// Holds nothing: writes are dropped (the program never reads it).
    Null,
    /// One value per thread, alive only within one basic block (never stored between blocks).
    Temporary,
    /// One value per thread (`[batch, ...]`), no stack.
    Register,
    /// A register plus one stack per thread (`[max_depth, batch, ...]`): live across a call
    /// that may write it.
    Full,
}

impl fmt::Display for VariableAllocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VariableAllocation::Null => "null",
            VariableAllocation::Temporary => "temporary",
            VariableAllocation::Register => "register",
            VariableAllocation::Full => "full",
        })
    }
}

/// A variable's definition: its (unique) name and its inferred type (`None` only for a
/// variable that no instruction touches).
#[derive(Clone, Debug, PartialEq)]
pub struct VarDef {
    /// Unique name.
    pub name: String,
    /// Inferred type.
    pub ty: Option<VarType>,
}

/// `outputs = function(inputs)`, interpreted (before lowering).
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionCallOp {
    /// The callee.
    pub function: FuncId,
    /// Argument variables (copied into the callee's parameters).
    pub inputs: Vec<Var>,
    /// Variables receiving the callee's results.
    pub outputs: Vec<Var>,
}

/// Save the current value of each (Full) variable on its per-thread stack (lowered only).
#[derive(Clone, Debug, PartialEq)]
pub struct PushOp {
    /// Variables to save; non-Full variables are skipped.
    pub vars: Vec<Var>,
}

/// Restore each (Full) variable from the top of its per-thread stack (lowered only).
#[derive(Clone, Debug, PartialEq)]
pub struct PopOp {
    /// Variables to restore; non-Full variables are skipped.
    pub vars: Vec<Var>,
}

/// A straight-line instruction.
#[derive(Clone, Debug)]
pub enum Instruction {
    /// A batched primitive computation.
    Prim(PrimOp),
    /// A function call (before lowering).
    Call(FunctionCallOp),
    /// Save variables (lowered programs).
    Push(PushOp),
    /// Restore variables (lowered programs).
    Pop(PopOp),
}

/// How a block ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Terminator {
    /// Continue at a block.
    Goto(BlockId),
    /// Per thread: `if cond { if_true } else { if_false }` (`cond` is a `bool[]` variable).
    Branch {
        /// The condition variable.
        cond: Var,
        /// Target where the condition holds.
        if_true: BlockId,
        /// Target where it does not.
        if_false: BlockId,
    },
    /// Return from the function (from the program, in the main graph).
    Return,
    /// Push `return_to` on the per-thread pc stack and jump to `target` (lowered calls).
    PushGoto {
        /// Where the callee returns to.
        return_to: BlockId,
        /// The callee's entry block.
        target: BlockId,
    },
    /// Pop the per-thread pc stack and jump there (lowered returns).
    IndirectGoto,
}

/// A basic block: straight-line instructions and a terminator.
#[derive(Clone, Debug)]
pub struct Block {
    /// A label for printing.
    pub name: String,
    /// The instructions.
    pub ops: Vec<Instruction>,
    /// The terminator.
    pub terminator: Terminator,
}

/// A graph of basic blocks; block 0 is the entry.
#[derive(Clone, Debug, Default)]
pub struct ControlFlowGraph {
    /// The blocks; a block's index is its program counter.
    pub blocks: Vec<Block>,
}

impl ControlFlowGraph {
    /// Successor blocks of block `b` (static, within this graph).
    pub fn successors(&self, b: usize) -> Vec<usize> {
        match self.blocks.get(b).map(|bl| &bl.terminator) {
            Some(Terminator::Goto(t)) => vec![t.0],
            Some(Terminator::Branch { if_true, if_false, .. }) => vec![if_true.0, if_false.0],
            Some(Terminator::PushGoto { return_to, target }) => vec![target.0, return_to.0],
            _ => vec![],
        }
    }
}

/// A function: parameters, results and a body.
#[derive(Clone, Debug)]
pub struct FunctionDef {
    /// Name.
    pub name: String,
    /// Parameter variables.
    pub params: Vec<Var>,
    /// Result variables (the function leaves its results there).
    pub results: Vec<Var>,
    /// The body.
    pub graph: ControlFlowGraph,
}

/// An auto-batchable program.
#[derive(Clone, Debug)]
pub struct Program {
    /// The main control flow graph (after lowering: every function's blocks too).
    pub graph: ControlFlowGraph,
    /// Functions the program may (recursively) call (empty after lowering).
    pub functions: Vec<FunctionDef>,
    /// Variable names and types, by [`Var`] index.
    pub var_defs: Vec<VarDef>,
    /// Variables receiving the inputs.
    pub vars_in: Vec<Var>,
    /// Variables holding the outputs at the end.
    pub vars_out: Vec<Var>,
    /// Storage strategy per variable, by [`Var`] index.
    pub var_alloc: Vec<VariableAllocation>,
}

impl Program {
    /// Assemble a program by hand and build it: `var_names[i]` names `Var(i)` (names must be
    /// unique and `Var(0)` must be `"pc"`); the program is validated, typed from
    /// `input_types` (one per `vars_in`) and allocated, exactly as by
    /// [`ProgramBuilder::build`](super::ProgramBuilder::build).
    pub fn new(
        graph: ControlFlowGraph,
        functions: Vec<FunctionDef>,
        var_names: Vec<String>,
        vars_in: Vec<Var>,
        vars_out: Vec<Var>,
        input_types: &[VarType],
    ) -> Result<Program> {
        if var_names.first().map(String::as_str) != Some("pc") {
            return Err(Error::InvalidArgument("autobatch: variable 0 must be the reserved \"pc\"".into()));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = var_names.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(Error::InvalidArgument(format!("autobatch: duplicate variable name '{dup}'")));
        }
        let var_defs = var_names.into_iter().map(|name| VarDef { name, ty: None }).collect();
        Program { graph, functions, var_defs, vars_in, vars_out, var_alloc: vec![] }.finalize(input_types)
    }

    /// Type inference, definite-assignment check and allocation inference.
    pub(crate) fn finalize(mut self, input_types: &[VarType]) -> Result<Program> {
        super::types::infer(&mut self, input_types)?;
        let a = super::alloc::Analysis::new(&self);
        super::alloc::check_definite_assignment(&self, &a)?;
        self.var_alloc = super::alloc::allocate(&self, &a);
        Ok(self)
    }

    /// The variable named `name`.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 3.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::new(DType::F64, &[2])])?;
    ///
    /// let x = program.var("x").expect("the parameter");
    /// assert_eq!(program.var_name(x), "x");
    /// assert!(program.var("nope").is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn var(&self, name: &str) -> Option<Var> {
        self.var_defs.iter().position(|d| d.name == name).map(Var)
    }
    /// A variable's name (`?N` for an out-of-range handle).
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 3.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::new(DType::F64, &[2])])?;
    ///
    /// // the entry's inputs and outputs get `main.` names
    /// assert_eq!(program.var_name(program.vars_in[0]), "main.x");
    /// assert_eq!(program.var_name(Var(9999)), "?9999");
    /// # Ok(())
    /// # }
    /// ```
    pub fn var_name(&self, v: Var) -> String {
        self.var_defs.get(v.0).map(|d| d.name.clone()).unwrap_or_else(|| format!("?{}", v.0))
    }
    /// A variable's type, or an error if it has none.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 3.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::new(DType::F64, &[2])])?;
    ///
    /// let y = program.var("y").expect("the result");
    /// assert_eq!(program.var_type(y)?, &VarType::new(DType::F64, &[2])); // inferred
    /// # Ok(())
    /// # }
    /// ```
    pub fn var_type(&self, v: Var) -> Result<&VarType> {
        self.var_defs.get(v.0).and_then(|d| d.ty.as_ref()).ok_or_else(|| {
            Error::InvalidArgument(format!("autobatch: variable '{}' has no inferred type", self.var_name(v)))
        })
    }
    /// A variable's allocation (`Register` when the table is missing).
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 3.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::new(DType::F64, &[2])])?;
    ///
    /// let x = program.var("x").expect("the parameter");
    /// let _how = program.alloc(x); // register, or a stack when a call would overwrite it
    /// assert_eq!(program.alloc(x), program.allocation_table()["x"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn alloc(&self, v: Var) -> VariableAllocation {
        self.var_alloc.get(v.0).copied().unwrap_or(VariableAllocation::Register)
    }
    /// The allocation table by variable name (including `pc`).
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 3.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::new(DType::F64, &[2])])?;
    ///
    /// let table = program.allocation_table();
    /// assert!(table.contains_key("pc") && table.contains_key("main.y"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn allocation_table(&self) -> BTreeMap<String, VariableAllocation> {
        self.var_defs.iter().enumerate().map(|(i, d)| (d.name.clone(), self.alloc(Var(i)))).collect()
    }
    /// A function by id.
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 3.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::new(DType::F64, &[2])])?;
    ///
    /// assert_eq!(program.function(f)?.name, "f");
    /// # Ok(())
    /// # }
    /// ```
    pub fn function(&self, f: FuncId) -> Result<&FunctionDef> {
        self.functions.get(f.0).ok_or_else(|| Error::UnknownFunction { name: format!("#{}", f.0) })
    }
    /// True if the program still contains `FunctionCallOp`s (not lowered).
    ///
    /// ```
    /// use pfor::autobatch::{ProgramBuilder, Var, VarType};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut pb = ProgramBuilder::new();
    /// let f = pb.function("f", &["x"], &["y"], |f| {
    ///     let x = f.param(0)?;
    ///     let y = f.mul(x, 3.0f64)?;
    ///     f.ret(&[y])
    /// })?;
    /// let program = pb.build(f, &[VarType::new(DType::F64, &[2])])?;
    ///
    /// assert!(program.has_calls()); // main calls f; the VM's lowered form has none
    /// # Ok(())
    /// # }
    /// ```
    pub fn has_calls(&self) -> bool {
        std::iter::once(&self.graph)
            .chain(self.functions.iter().map(|f| &f.graph))
            .flat_map(|g| &g.blocks)
            .flat_map(|b| &b.ops)
            .any(|op| matches!(op, Instruction::Call(_)))
    }
    /// All graphs: the main graph first, then each function's.
    pub(crate) fn graphs(&self) -> impl Iterator<Item = &ControlFlowGraph> {
        std::iter::once(&self.graph).chain(self.functions.iter().map(|f| &f.graph))
    }
    fn vars_text(&self, vs: &[Var]) -> String {
        vs.iter().map(|v| self.var_name(*v)).collect::<Vec<_>>().join(", ")
    }
    fn fmt_graph(&self, f: &mut fmt::Formatter<'_>, g: &ControlFlowGraph) -> fmt::Result {
        for (pc, b) in g.blocks.iter().enumerate() {
            writeln!(f, "  {pc} {}:", b.name)?;
            for op in &b.ops {
                match op {
                    Instruction::Prim(p) => writeln!(
                        f,
                        "      {} = {}({})",
                        self.vars_text(&p.outputs),
                        p.describe(),
                        self.vars_text(&p.inputs)
                    )?,
                    Instruction::Call(c) => {
                        let name = self.functions.get(c.function.0).map(|d| d.name.as_str()).unwrap_or("?");
                        writeln!(
                            f,
                            "      {} = call {name}({})",
                            self.vars_text(&c.outputs),
                            self.vars_text(&c.inputs)
                        )?
                    }
                    Instruction::Push(p) => writeln!(f, "      push {}", self.vars_text(&p.vars))?,
                    Instruction::Pop(p) => writeln!(f, "      pop {}", self.vars_text(&p.vars))?,
                }
            }
            match &b.terminator {
                Terminator::Goto(t) => writeln!(f, "      goto {}", t.0)?,
                Terminator::Branch { cond, if_true, if_false } => {
                    writeln!(f, "      branch {} ? {} : {}", self.var_name(*cond), if_true.0, if_false.0)?
                }
                Terminator::Return => writeln!(f, "      return")?,
                Terminator::PushGoto { return_to, target } => {
                    writeln!(f, "      push_goto {} (return to {})", target.0, return_to.0)?
                }
                Terminator::IndirectGoto => writeln!(f, "      indirect_goto")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "program({}) -> ({})", self.vars_text(&self.vars_in), self.vars_text(&self.vars_out))?;
        writeln!(f, "vars:")?;
        for (i, d) in self.var_defs.iter().enumerate() {
            let ty = d.ty.as_ref().map(|t| t.to_string()).unwrap_or_else(|| "?".into());
            writeln!(f, "  {}: {ty} {}", d.name, self.alloc(Var(i)))?;
        }
        writeln!(f, "main:")?;
        self.fmt_graph(f, &self.graph)?;
        for func in &self.functions {
            writeln!(
                f,
                "function {}({}) -> ({}):",
                func.name,
                self.vars_text(&func.params),
                self.vars_text(&func.results)
            )?;
            self.fmt_graph(f, &func.graph)?;
        }
        Ok(())
    }
}
