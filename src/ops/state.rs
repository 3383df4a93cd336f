//! Variables: named, typed, mutable tensors held in the [`Session`](crate::Session).
//!
//! Semantics: a variable's value lives in the session (initialized from its definition);
//! `read` returns the current value, `assign`/`assign_add` replace it and return the new
//! value. Execution order is deterministic (program order for independent nodes), and
//! writes are never pruned when they are ancestors of a fetch or inside a function body.

use std::fmt;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::EvalCtx;
use crate::ops::{Op, Raises, expect_arity};
use crate::tensor::{Tensor, TensorType};

/// Variable ops.
#[derive(Clone, Debug, PartialEq)]
pub enum StateOp {
    /// Read the current value.
    Read {
        /// Variable name.
        var: String,
        /// Its type (fixed by its initial value).
        ty: TensorType,
    },
    /// Replace the value with input 0; outputs the new value.
    Assign {
        /// Variable name.
        var: String,
    },
    /// Add input 0 to the value; outputs the new value.
    AssignAdd {
        /// Variable name.
        var: String,
    },
}

/// Kinds of variable ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateKind {
    /// `read_variable`.
    Read,
    /// `assign`.
    Assign,
    /// `assign_add`.
    AssignAdd,
}

impl StateKind {
    /// Every kind.
    pub const ALL: &'static [StateKind] = &[StateKind::Read, StateKind::Assign, StateKind::AssignAdd];
    /// The op name.
    ///
    /// ```
    /// use pfor::ops::{Raises, StateKind, StateOp};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(StateKind::AssignAdd.name(), "assign_add");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            StateKind::Read => "read_variable",
            StateKind::Assign => "assign",
            StateKind::AssignAdd => "assign_add",
        }
    }
    /// Which inputs' values can make the op fail ([`Raises`]): none (variables and value
    /// types are checked when the node is built).
    ///
    /// ```
    /// use pfor::ops::{Raises, StateKind, StateOp};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(StateKind::Assign.raises(), Raises::Never); // types are checked when built
    /// # Ok(())
    /// # }
    /// ```
    pub fn raises(self) -> Raises {
        Raises::Never
    }
}

impl StateOp {
    /// The kind.
    ///
    /// ```
    /// use pfor::ops::{Raises, StateKind, StateOp};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let read = StateOp::Read { var: "w".into(), ty: TensorType::new(DType::F32, [2]) };
    ///
    /// assert_eq!(read.kind(), StateKind::Read);
    /// # Ok(())
    /// # }
    /// ```
    pub fn kind(&self) -> StateKind {
        match self {
            StateOp::Read { .. } => StateKind::Read,
            StateOp::Assign { .. } => StateKind::Assign,
            StateOp::AssignAdd { .. } => StateKind::AssignAdd,
        }
    }
    /// The variable name.
    ///
    /// ```
    /// use pfor::ops::{Raises, StateKind, StateOp};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(StateOp::Assign { var: "w".into() }.var(), "w");
    /// # Ok(())
    /// # }
    /// ```
    pub fn var(&self) -> &str {
        match self {
            StateOp::Read { var, .. } | StateOp::Assign { var } | StateOp::AssignAdd { var } => var,
        }
    }
    /// Writes have side effects.
    ///
    /// ```
    /// use pfor::ops::{Raises, StateKind, StateOp};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let read = StateOp::Read { var: "w".into(), ty: TensorType::new(DType::F32, [2]) };
    ///
    /// assert!(!read.has_side_effects());
    /// assert!(StateOp::AssignAdd { var: "w".into() }.has_side_effects()); // never pruned or reordered
    /// # Ok(())
    /// # }
    /// ```
    pub fn has_side_effects(&self) -> bool {
        !matches!(self, StateOp::Read { .. })
    }
    /// Shape and dtype inference (writes are checked against the variable at build time by
    /// the builders, and at run time against the stored value).
    ///
    /// ```
    /// use pfor::ops::{Raises, StateKind, StateOp};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let read = StateOp::Read { var: "w".into(), ty: TensorType::new(DType::F32, [2]) };
    ///
    /// assert_eq!(read.infer(&[])?, [TensorType::new(DType::F32, [2])]); // the variable's type
    /// # Ok(())
    /// # }
    /// ```
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        match self {
            StateOp::Read { ty, .. } => {
                expect_arity(op, inputs, 0)?;
                Ok(vec![ty.clone()])
            }
            StateOp::Assign { .. } | StateOp::AssignAdd { .. } => {
                expect_arity(op, inputs, 1)?;
                Ok(vec![inputs[0].clone()])
            }
        }
    }
    /// Evaluate against the session's variable store.
    pub fn eval(&self, inputs: Vec<Tensor>, ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        match self {
            StateOp::Read { var, .. } => Ok(vec![ctx.read_variable(var)?]),
            StateOp::Assign { var } => {
                let v = inputs.into_iter().next().ok_or_else(|| Error::arity(op, "1", 0))?;
                let old = ctx.read_variable(var)?;
                if old.dtype() != v.dtype() || old.shape() != v.shape() {
                    return Err(Error::shape(
                        op,
                        format!(
                            "variable '{var}' is {}{:?}, assigned {}{:?}",
                            old.dtype(),
                            old.shape(),
                            v.dtype(),
                            v.shape()
                        ),
                    ));
                }
                ctx.write_variable(var, v.clone())?;
                Ok(vec![v])
            }
            StateOp::AssignAdd { var } => {
                let v = inputs.into_iter().next().ok_or_else(|| Error::arity(op, "1", 0))?;
                let old = ctx.read_variable(var)?;
                if old.dtype() != v.dtype() || old.shape() != v.shape() {
                    return Err(Error::shape(
                        op,
                        format!(
                            "variable '{var}' is {}{:?}, added {}{:?}",
                            old.dtype(),
                            old.shape(),
                            v.dtype(),
                            v.shape()
                        ),
                    ));
                }
                let new = crate::dispatch_numeric!(v.dtype(), T => {
                    let a = old.array::<T>()?;
                    let b = v.array::<T>()?;
                    Tensor::from_array(a + b)
                }, _ => return Err(Error::dtype(op, "numeric", v.dtype())));
                ctx.write_variable(var, new.clone())?;
                Ok(vec![new])
            }
        }
    }
}

impl fmt::Display for StateOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{{var={:?}}}", self.kind().name(), self.var())
    }
}

impl Graph {
    /// Create a variable with an initial value and return a read of it.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.variable("w", Tensor::vec1(&[1.0f32, 2.0]))?; // a read of it
    /// assert_eq!(run_once(&g, &[w], &[])?[0].to_vec::<f32>()?, [1.0, 2.0]);
    /// assert!(g.variable("w", Tensor::vec1(&[0.0f32])).is_err()); // defined twice
    /// # Ok(())
    /// # }
    /// ```
    pub fn variable(&mut self, name: &str, init: Tensor) -> Result<ValueId> {
        self.library().add_variable(name, init)?;
        self.read_variable(name)
    }
    /// Read a variable's current value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.variable("step", Tensor::scalar(0i64))?;
    /// let s = g.read_variable("step")?;
    /// assert_eq!(g.dtype(s)?, DType::I64);
    /// assert!(g.read_variable("nope").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_variable(&mut self, name: &str) -> Result<ValueId> {
        let def = self.library().variable(name)?;
        self.add_op(Op::State(StateOp::Read { var: name.to_string(), ty: def.init.tensor_type() }), &[])
    }
    fn check_write(&self, name: &str, v: ValueId, op: &str) -> Result<()> {
        let def = self.library().variable(name)?;
        let ty = self.value_type(v)?;
        let want = def.init.tensor_type();
        if ty.dtype != want.dtype || !ty.shape.compatible(&want.shape) {
            return Err(Error::shape(op, format!("variable '{name}' is {want}, value is {ty}")));
        }
        Ok(())
    }
    /// `var = v`; returns the new value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.variable("w", Tensor::vec1(&[0.0f32, 0.0]))?;
    /// let v = g.constant(Tensor::vec1(&[3.0f32, 4.0]));
    /// let new = g.assign("w", v)?;
    /// let mut s = Session::new(&g, &[new])?;
    /// s.run(&[])?;
    /// assert_eq!(s.variable("w")?.to_vec::<f32>()?, [3.0, 4.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn assign(&mut self, name: &str, v: ValueId) -> Result<ValueId> {
        self.check_write(name, v, "assign")?;
        self.add_op(Op::State(StateOp::Assign { var: name.to_string() }), &[v])
    }
    /// `var += v`; returns the new value.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// g.variable("count", Tensor::scalar(0i64))?;
    /// let one = g.constant(Tensor::scalar(1i64));
    /// let c = g.assign_add("count", one)?;
    /// let mut s = Session::new(&g, &[c])?;
    /// for _ in 0..3 {
    ///     s.run(&[])?;
    /// }
    /// assert_eq!(s.variable("count")?.scalar_i64()?, 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn assign_add(&mut self, name: &str, v: ValueId) -> Result<ValueId> {
        self.check_write(name, v, "assign_add")?;
        self.add_op(Op::State(StateOp::AssignAdd { var: name.to_string() }), &[v])
    }
}
