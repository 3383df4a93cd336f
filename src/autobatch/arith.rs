//! Arithmetic and comparisons on batched values: [`FunctionBuilder`] helpers (`add`, `sub`,
//! `lt`, `eq`, …) so a program does not write a closure over tensors for `n - 1` or `n > 1`:
//! `f.sub(n, 1i64)`, `f.le(n, one)`, `f.add(left, right)`. The right operand is a variable
//! or a constant ([`Operand`]: a typed scalar such as `1i64` / `0.5f64`, or a tensor holding
//! one thread's value), which is captured by the primop, not stored in a variable (so it is
//! never saved across a call).
//!
//! Each helper is one closure primop named after the op (`add`, `less`, … — the names the
//! execution counters use) that evaluates the graph op's kernel ([`crate::ops::binary`]) on
//! the batched operands, so dtypes and errors are the graph op's: both operands have one
//! dtype (an `Err` naming the op otherwise), comparisons give `bool`. Invariant: row `i` of
//! the result depends only on row `i` of the operands — the thread axis (axis 0) of the two
//! operands is aligned, and event shapes of different ranks broadcast numpy-style among
//! themselves (a scalar event against a `[3]` event), never against the thread axis.

use super::builder::FunctionBuilder;
use super::program::Var;
use crate::error::{Error, Result};
use crate::ops::{BinaryKind, binary};
use crate::tensor::Tensor;

/// The right operand of a helper: a variable, or one thread's constant value.
#[derive(Clone, Debug)]
pub enum Operand {
    /// A program variable (batched).
    Var(Var),
    /// The same value in every thread.
    Const(Tensor),
}

impl From<Var> for Operand {
    fn from(v: Var) -> Operand {
        Operand::Var(v)
    }
}

impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Operand {
        Operand::Const(t)
    }
}

macro_rules! scalar_operands {
    ($($t:ty),*) => {
        $(impl From<$t> for Operand {
            fn from(v: $t) -> Operand {
                Operand::Const(Tensor::scalar(v))
            }
        })*
    };
}

scalar_operands!(i64, f32, f64, bool);

/// `t` (`[width] + event`) with unit dims inserted after its thread axis up to `rank`, so
/// numpy broadcasting against a higher-rank operand aligns events, not threads.
fn widen(t: &Tensor, rank: usize) -> Result<Tensor> {
    if t.rank() >= rank || t.rank() == 0 {
        return Ok(t.clone());
    }
    let s = t.shape();
    let ones = std::iter::repeat_n(1, rank - s.len());
    let shape: Vec<usize> = std::iter::once(s[0]).chain(ones).chain(s[1..].iter().copied()).collect();
    t.reshape(&shape)
}

/// `kind(x[0], x[1])`, or `kind(x[0], c)` for a constant right operand `c` (one thread's
/// value, broadcast over the threads).
fn apply(kind: BinaryKind, x: &[Tensor], c: Option<&Tensor>) -> Result<Tensor> {
    let (a, b) = match (x, c) {
        ([a, b], None) => {
            let r = a.rank().max(b.rank());
            (widen(a, r)?, widen(b, r)?)
        }
        ([a], Some(c)) => (widen(a, c.rank() + 1)?, c.clone()),
        _ => return Err(Error::arity(kind.name(), "2", x.len() + usize::from(c.is_some()))),
    };
    binary::eval(kind, vec![a, b])?.pop().ok_or_else(|| Error::arity(kind.name(), "1 output", 0))
}

macro_rules! binary_helpers {
    ($($fn_name:ident => $kind:ident, $what:literal;)*) => {
        impl FunctionBuilder<'_> {
            $(
                #[doc = concat!("A fresh variable holding ", $what, " of `a` and `b`, per thread (see the module docs).")]
                pub fn $fn_name(&mut self, a: Var, b: impl Into<Operand>) -> Result<Var> {
                    self.binary(BinaryKind::$kind, a, b)
                }
            )*
        }
    };
}

binary_helpers! {
    add => Add, "the sum `a + b`";
    sub => Sub, "the difference `a - b`";
    mul => Mul, "the product `a * b`";
    div => Div, "the quotient `a / b` (i64: an `Err` on a zero divisor)";
    maximum => Maximum, "the larger";
    minimum => Minimum, "the smaller";
    lt => Less, "`a < b` (bool)";
    le => LessEqual, "`a <= b` (bool)";
    gt => Greater, "`a > b` (bool)";
    ge => GreaterEqual, "`a >= b` (bool)";
    eq => Equal, "`a == b` (bool)";
    ne => NotEqual, "`a != b` (bool)";
    and => LogicalAnd, "`a && b` (bool operands)";
    or => LogicalOr, "`a || b` (bool operands)";
}

impl FunctionBuilder<'_> {
    /// A fresh variable holding the binary op `kind` of `a` and `b`, per thread.
    pub fn binary(&mut self, kind: BinaryKind, a: Var, b: impl Into<Operand>) -> Result<Var> {
        match b.into() {
            Operand::Var(b) => self.prim(kind.name(), &[a, b], move |x| apply(kind, x, None)),
            Operand::Const(c) => self.prim(kind.name(), &[a], move |x| apply(kind, x, Some(&c))),
        }
    }

    /// `out = kind(a, b)` per thread (writes an existing variable, e.g. a function result).
    pub fn binary_into(&mut self, kind: BinaryKind, a: Var, b: impl Into<Operand>, out: Var) -> Result<()> {
        match b.into() {
            Operand::Var(b) => self.prim_into(kind.name(), &[a, b], &[out], move |x| Ok(vec![apply(kind, x, None)?])),
            Operand::Const(c) => {
                self.prim_into(kind.name(), &[a], &[out], move |x| Ok(vec![apply(kind, x, Some(&c))?]))
            }
        }
    }
}
