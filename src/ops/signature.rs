//! Declarative op signatures: how an op kind batches ([`Batching`]) and in which inputs it
//! is linear ([`Linearity`]). Each family declares both next to its kind table and its
//! [`Raises`](super::Raises), one row per kind (`batching()` / `linearity()` on the kind);
//! a family without such a table is [`Batching::Custom`] and [`Linearity::NonLinear`]
//! throughout. Custom ops declare theirs through [`CustomOp`](super::CustomOp).
//!
//! What the declarations derive (so a kind that declares them has no hand-written rule):
//! - pfor: ONE generic converter (`vectorize::derived_convert`) handles every kind whose
//!   class is not [`Batching::Custom`]; custom-class kinds keep their own converter in
//!   `converters/<family>.rs` (matmul folding, conv, control flow...).
//! - forward mode: a kind linear in its differentiable inputs has the JVP "the op applied to
//!   the tangents" (`autodiff::rules::linear_jvp`), like JAX's `deflinear`.
//!
//! Invariants: a declaration is a promise about the op's semantics. `Elementwise` and
//! `Broadcasting` ops must accept any leading (batch) axes on their inputs and map them to
//! the same leading axes of their outputs; an `AxisMapped` op must implement
//! [`Op::map_axes`](super::Op::map_axes); `Linear` means `op(a·x + b·y) = a·op(x) + b·op(y)`
//! in the listed inputs with the others held fixed (no constant term).

use super::{Op, OpKind};

/// How pfor batches an op kind (JAX: `defvectorized`, `defbroadcasting`, `defreducer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// The op maps leading axes through unchanged and needs its inputs to agree in shape:
    /// pfor stacks every input (tiling an invariant one) and re-emits the op (unary math,
    /// `cast`, last-axis losses).
    Elementwise,
    /// numpy broadcasting: stacked inputs get size-1 axes after the loop axis to the output
    /// rank; invariant inputs stay as they are and are never tiled (binary math, `select`).
    Broadcasting,
    /// The op works on every leading axis unchanged once its axis attributes move past the
    /// loop axis (non-negative axes shift by one, negative ones are unchanged): pfor stacks
    /// the inputs and re-emits [`Op::map_axes`] (reductions, scans, softmax).
    AxisMapped,
    /// The op has a leading batch axis on the listed inputs (the same batch on each): pfor
    /// folds the loop axis into it (`[n, b, ..] -> [n*b, ..]`), runs the op and unfolds
    /// every output. The other inputs must be loop-invariant (else the per-op fallback
    /// runs).
    BatchFolding {
        /// The inputs that carry the batch axis.
        batched: &'static [usize],
    },
    /// A hand-written converter (or none: the per-op fallback).
    Custom,
}

/// In which inputs an op is linear (JAX: `deflinear`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linearity {
    /// Linear in every input.
    Linear,
    /// Linear in these inputs with the others held fixed; the others are not
    /// differentiable (indices, shapes).
    LinearIn(&'static [usize]),
    /// Not linear: the kind has its own derivative rules.
    NonLinear,
}

impl Linearity {
    /// True if the op is linear in input `k`.
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Linearity, ReduceKind, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let l = Linearity::LinearIn(&[0]); // e.g. gather: linear in params, not in the indices
    /// assert!(l.linear_in(0) && !l.linear_in(1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn linear_in(self, k: usize) -> bool {
        match self {
            Linearity::Linear => true,
            Linearity::LinearIn(ks) => ks.contains(&k),
            Linearity::NonLinear => false,
        }
    }
    /// True unless [`Linearity::NonLinear`].
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Linearity, ReduceKind, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(Linearity::Linear.is_linear() && !Linearity::NonLinear.is_linear());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_linear(self) -> bool {
        self != Linearity::NonLinear
    }
}

impl OpKind {
    /// The kind's batching class (custom ops answer through [`Op::batching`]).
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Linearity, ReduceKind, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(OpKind::Unary(UnaryKind::Exp).batching(), Batching::Elementwise);
    /// assert_eq!(OpKind::Binary(BinaryKind::Mul).batching(), Batching::Broadcasting);
    /// assert_eq!(OpKind::Reduce(ReduceKind::Sum).batching(), Batching::AxisMapped);
    /// # Ok(())
    /// # }
    /// ```
    pub fn batching(&self) -> Batching {
        match self {
            OpKind::Unary(k) => k.batching(),
            OpKind::Binary(k) => k.batching(),
            OpKind::Elementwise(k) => k.batching(),
            OpKind::Reduce(k) => k.batching(),
            OpKind::Shape(k) => k.batching(),
            OpKind::Nn(k) => k.batching(),
            _ => Batching::Custom,
        }
    }

    /// The kind's linearity (custom ops: [`Linearity::NonLinear`]; they write their jvp).
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Linearity, ReduceKind, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(OpKind::Unary(UnaryKind::Neg).linearity(), Linearity::Linear);
    /// assert_eq!(OpKind::Unary(UnaryKind::Exp).linearity(), Linearity::NonLinear);
    /// # Ok(())
    /// # }
    /// ```
    pub fn linearity(&self) -> Linearity {
        match self {
            OpKind::Unary(k) => k.linearity(),
            OpKind::Reduce(k) => k.linearity(),
            OpKind::Shape(k) => k.linearity(),
            OpKind::Slicing(k) => k.linearity(),
            _ => Linearity::NonLinear,
        }
    }
}

impl Op {
    /// The op's batching class: its kind's, or what a custom op declares.
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Linearity, ReduceKind, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.tanh(x)?;
    /// assert_eq!(g.node(y.node)?.op.batching(), Batching::Elementwise);
    /// # Ok(())
    /// # }
    /// ```
    pub fn batching(&self) -> Batching {
        match self {
            Op::Custom(c) => c.batching(),
            o => o.kind().batching(),
        }
    }

    /// The op's linearity ([`OpKind::linearity`]).
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Linearity, ReduceKind, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let s = g.reduce_sum(x, Some(&[1]), false)?;
    /// assert!(g.node(s.node)?.op.linearity().is_linear()); // its JVP is derived
    /// # Ok(())
    /// # }
    /// ```
    pub fn linearity(&self) -> Linearity {
        self.kind().linearity()
    }

    /// The op with every axis attribute mapped through `f` (the [`Batching::AxisMapped`]
    /// rewrite); `None` for an op without axis attributes. A custom op maps its own
    /// ([`CustomOp::map_axes`](super::CustomOp::map_axes)).
    ///
    /// ```
    /// use pfor::ops::{Batching, BinaryKind, Linearity, ReduceKind, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let s = g.reduce_sum(x, Some(&[1]), false)?;
    /// // what pfor does to an axis-mapped op: non-negative axes move past the new loop axis
    /// let moved = g.node(s.node)?.op.map_axes(&|a| if a >= 0 { a + 1 } else { a });
    /// assert_eq!(moved.map(|op| op.to_string()), Some("reduce_sum{axes=[2], keep_dims=false}".to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn map_axes(&self, f: &dyn Fn(i64) -> i64) -> Option<Op> {
        match self {
            Op::Reduce(o) => Some(Op::Reduce(o.map_axes(f))),
            Op::Shape(o) => o.map_axes(f).map(Op::Shape),
            Op::Nn(o) => o.map_axes(f).map(Op::Nn),
            Op::Custom(c) => c.map_axes(f).map(Op::Custom),
            _ => None,
        }
    }
}
