//! Reductions, arg-reductions and scans.
//!
//! Semantics:
//! - Axis reductions (`reduce_sum`, `reduce_mean`, `reduce_prod`, `reduce_max`, `reduce_min`,
//!   `reduce_all`, `reduce_any`, `reduce_logsumexp`, `reduce_variance`) take a set of `axes`
//!   (negative axes count from the end; an out-of-range axis is [`Error::Axis`], a repeated
//!   axis is [`Error::Shape`]). Every builder takes `axes: Option<&[i64]>`: `None` reduces
//!   every axis (resolved at build time from the static rank to the explicit list),
//!   `Some(&[])` reduces nothing: every element is its own group (like JAX `axis=()`), so
//!   the op is the identity except for `reduce_variance` (zeros). Reduced dims disappear, or
//!   become 1 with `keep_dims` (a reduced dynamic dim too).
//! - Dtypes (the kind table's [`DtypeRule`] column): sum/prod/max/min on f32, f64, i64 (i64
//!   arithmetic wraps on overflow); mean, logsumexp and variance on floats only; all/any on
//!   bool only. The output dtype is the input dtype.
//! - Reducing zero elements gives the identity: sum 0, prod 1, mean NaN, max -inf
//!   (`i64::MIN`), min +inf (`i64::MAX`), all true, any false, logsumexp -inf, variance NaN.
//! - Float max/min propagate NaN. logsumexp is computed as `m + ln Σ exp(x - m)` with `m` the
//!   max, so large inputs do not overflow; a slice whose max is not finite (all -inf, +inf,
//!   NaN) returns that max. variance is the population variance `Σ (x - mean)² / n` (TF
//!   `reduce_variance`, numpy `var` with `ddof = 0`), computed in two passes.
//! - `argmax` / `argmin` remove one axis and return i64 indices. Ties resolve to the smallest
//!   index. NaN counts as larger than everything for argmax and smaller than everything for
//!   argmin, so the FIRST NaN wins in both. An empty reduced axis is an [`Error::Shape`]
//!   (at build time when the dim is fixed, at run time when it is dynamic).
//! - `cumsum` / `cumprod` scan along one axis (TF semantics): `exclusive` shifts by one so the
//!   first output is the identity (0 / 1); `reverse` scans from the end. Output type = input
//!   type; numeric dtypes only.
//!
//! Structure: one kind table ([`ReduceKind`], one row per kind: name, attribute form, dtype
//! rule, linearity) and ONE op shape per attribute form ([`ReduceOp::Axes`], [`ReduceOp::Arg`],
//! [`ReduceOp::Scan`], each carrying its kind), so `kind`, `map_axes`, `infer`, `Display` and
//! the builders never list kinds. A new axis reduction is its row, one kernel arm
//! (`reduce/kernels.rs`) and one local-derivative arm (`autodiff/rules/reduce.rs`); see
//! `docs/ADDING_AN_OP.md`. Invariant: an op's form is its kind's form (`infer` checks it).
//!
//! Kernels (`reduce/kernels.rs`) view the (standard-layout) input as `[outer, reduced,
//! inner]`: when the reduced axes are not one contiguous block they are first permuted to
//! the end (one copy). Long contiguous reductions use several accumulators; large inputs are
//! split across rayon threads with a fixed chunking (results do not depend on the thread
//! count). Scans run in place when the executor hands over the only reference to the input
//! buffer.

mod kernels;

use std::fmt;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::unary::DtypeRule;
use crate::ops::{Batching, Linearity, Op, Raises, expect_arity, norm_axis};
use crate::tensor::{DType, Dim, Shape, Tensor, TensorType};

use kernels::{eval_arg, eval_axes, eval_scan, reduced_mask};

/// The attribute form of a reduce kind: which [`ReduceOp`] shape carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceForm {
    /// A set of axes reduced away (or kept as size 1): [`ReduceOp::Axes`].
    Axes,
    /// One axis replaced by the index of its best element: [`ReduceOp::Arg`].
    Arg,
    /// A scan along one axis: [`ReduceOp::Scan`].
    Scan,
}

macro_rules! reduce_kinds {
    ($($variant:ident => $name:literal, $form:ident, $rule:ident, $lin:ident;)*) => {
        /// Kinds of the reduce family.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ReduceKind { $(#[doc = concat!("`", $name, "`")] $variant,)* }
        impl ReduceKind {
            /// Every kind.
            pub const ALL: &'static [ReduceKind] = &[$(ReduceKind::$variant,)*];
            /// The op name.
            pub fn name(self) -> &'static str { match self { $(ReduceKind::$variant => $name,)* } }
            /// The attribute form (which [`ReduceOp`] shape carries the kind).
            pub fn form(self) -> ReduceForm { match self { $(ReduceKind::$variant => ReduceForm::$form,)* } }
            /// Which input dtypes the kind accepts ([`DtypeRule::Numeric`]: f32, f64, i64;
            /// `Float`: f32, f64; `Logical`: bool). Axis reductions and scans return the input
            /// dtype, arg-reductions i64.
            pub fn dtype_rule(self) -> DtypeRule { match self { $(ReduceKind::$variant => DtypeRule::$rule,)* } }
            /// Where the op is linear ([`Linearity`]): sum, mean and cumsum (their JVP is
            /// derived); the other differentiable kinds have rules in `autodiff/rules/reduce.rs`.
            pub fn linearity(self) -> Linearity { match self { $(ReduceKind::$variant => Linearity::$lin,)* } }
        }
    };
}

// The kind table: one row per kind (name, form, dtype rule, linearity).
reduce_kinds! {
    Sum => "reduce_sum", Axes, Numeric, Linear;
    Mean => "reduce_mean", Axes, Float, Linear;
    Prod => "reduce_prod", Axes, Numeric, NonLinear;
    Max => "reduce_max", Axes, Numeric, NonLinear;
    Min => "reduce_min", Axes, Numeric, NonLinear;
    All => "reduce_all", Axes, Logical, NonLinear;
    Any => "reduce_any", Axes, Logical, NonLinear;
    LogSumExp => "reduce_logsumexp", Axes, Float, NonLinear;
    Variance => "reduce_variance", Axes, Float, NonLinear;
    ArgMax => "argmax", Arg, Numeric, NonLinear;
    ArgMin => "argmin", Arg, Numeric, NonLinear;
    CumSum => "cumsum", Scan, Numeric, Linear;
    CumProd => "cumprod", Scan, Numeric, NonLinear;
}

impl ReduceKind {
    /// Which inputs' values can make the op fail ([`Raises`]): none (an empty reduced axis
    /// is a shape error).
    pub fn raises(self) -> Raises {
        Raises::Never
    }

    /// How pfor batches the op ([`Batching`]): every kind reduces or scans the stacked
    /// value with its axes moved past the loop axis ([`ReduceOp::map_axes`]).
    pub fn batching(self) -> Batching {
        Batching::AxisMapped
    }

    /// Check the input dtype against the kind's [`DtypeRule`] (shared by `infer` and `eval`).
    fn check_dtype(self, d: DType) -> Result<()> {
        let (ok, want) = match self.dtype_rule() {
            DtypeRule::Float => (d.is_float(), "a float type (f32 or f64)"),
            DtypeRule::Logical => (d == DType::Bool, "bool"),
            DtypeRule::Numeric => (d.is_numeric(), "a numeric type (f32, f64 or i64)"),
            DtypeRule::FloatPredicate => (false, "no type (not a reduction dtype rule)"),
        };
        if ok { Ok(()) } else { Err(Error::dtype(self.name(), want, d)) }
    }
}

/// Ops of the reduce family: one shape per attribute [`ReduceForm`], each carrying its kind
/// (whose form must match: `infer` rejects e.g. `Axes { kind: ArgMax, .. }`).
#[derive(Clone, Debug, PartialEq)]
pub enum ReduceOp {
    /// An axis reduction (`reduce_*`).
    Axes {
        /// The kind (form [`ReduceForm::Axes`]).
        kind: ReduceKind,
        /// Axes to reduce (empty: each element is its own group).
        axes: Vec<i64>,
        /// Keep reduced dims as size 1.
        keep_dims: bool,
    },
    /// An arg-reduction (`argmax`, `argmin`): i64 output, `axis` removed.
    Arg {
        /// The kind (form [`ReduceForm::Arg`]).
        kind: ReduceKind,
        /// The reduced axis.
        axis: i64,
    },
    /// A scan (`cumsum`, `cumprod`).
    Scan {
        /// The kind (form [`ReduceForm::Scan`]).
        kind: ReduceKind,
        /// The scanned axis.
        axis: i64,
        /// Shift by one: the first output is the identity.
        exclusive: bool,
        /// Scan from the end.
        reverse: bool,
    },
}

impl ReduceOp {
    /// The kind.
    pub fn kind(&self) -> ReduceKind {
        match self {
            ReduceOp::Axes { kind, .. } | ReduceOp::Arg { kind, .. } | ReduceOp::Scan { kind, .. } => *kind,
        }
    }

    /// The attribute form of the op's shape (its kind's, for a valid op).
    pub fn form(&self) -> ReduceForm {
        match self {
            ReduceOp::Axes { .. } => ReduceForm::Axes,
            ReduceOp::Arg { .. } => ReduceForm::Arg,
            ReduceOp::Scan { .. } => ReduceForm::Scan,
        }
    }

    /// The op with every axis attribute mapped through `f` (the other attributes kept).
    pub fn map_axes(&self, f: &dyn Fn(i64) -> i64) -> ReduceOp {
        let mut op = self.clone();
        match &mut op {
            ReduceOp::Axes { axes, .. } => axes.iter_mut().for_each(|a| *a = f(*a)),
            ReduceOp::Arg { axis, .. } | ReduceOp::Scan { axis, .. } => *axis = f(*axis),
        }
        op
    }

    /// The axis-reduction op of `kind` (`None` unless `kind`'s form is [`ReduceForm::Axes`]).
    pub fn axes_op(kind: ReduceKind, axes: Vec<i64>, keep_dims: bool) -> Option<ReduceOp> {
        (kind.form() == ReduceForm::Axes).then_some(ReduceOp::Axes { kind, axes, keep_dims })
    }

    /// The kind, after checking that its form is the op's shape.
    fn checked_kind(&self) -> Result<ReduceKind> {
        let k = self.kind();
        if k.form() != self.form() {
            let why = format!("kind {} has form {:?}, the op has form {:?}", k.name(), k.form(), self.form());
            return Err(Error::unsupported(k.name(), why));
        }
        Ok(k)
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let k = self.checked_kind()?;
        let op = k.name();
        expect_arity(op, inputs, 1)?;
        let t = &inputs[0];
        k.check_dtype(t.dtype)?;
        let dims = t.shape.dims();
        let out = match self {
            ReduceOp::Axes { axes, keep_dims: keep, .. } => {
                let mask = reduced_mask(op, axes, dims.len())?;
                let shape = dims.iter().zip(&mask).filter_map(|(d, &r)| match (r, keep) {
                    (false, _) => Some(d.clone()),
                    (true, true) => Some(Dim::Fixed(1)),
                    (true, false) => None,
                });
                TensorType::new(t.dtype, Shape::from_dims(shape))
            }
            &ReduceOp::Arg { axis, .. } => {
                let ax = norm_axis(op, axis, dims.len())?;
                if dims[ax] == Dim::Fixed(0) {
                    return Err(Error::shape(op, format!("axis {axis} of shape {} is empty", t.shape)));
                }
                let shape = dims.iter().enumerate().filter(|(i, _)| *i != ax).map(|(_, d)| d.clone());
                TensorType::new(DType::I64, Shape::from_dims(shape))
            }
            &ReduceOp::Scan { axis, .. } => {
                norm_axis(op, axis, dims.len())?;
                t.clone()
            }
        };
        Ok(vec![out])
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let k = self.checked_kind()?;
        let op = k.name();
        expect_arity(op, &inputs, 1)?;
        let x = inputs.into_iter().next().ok_or_else(|| Error::arity(op, "1", 0))?;
        k.check_dtype(x.dtype())?;
        let out = match self {
            ReduceOp::Axes { axes, keep_dims, .. } => eval_axes(k, axes, *keep_dims, x)?,
            &ReduceOp::Arg { axis, .. } => eval_arg(k, axis, &x)?,
            &ReduceOp::Scan { axis, exclusive, reverse, .. } => eval_scan(k, axis, exclusive, reverse, x)?,
        };
        Ok(vec![out])
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        match self {
            ReduceOp::Axes { axes, keep_dims, .. } => write!(f, "{name}{{axes={axes:?}, keep_dims={keep_dims}}}"),
            ReduceOp::Arg { axis, .. } => write!(f, "{name}{{axis={axis}}}"),
            ReduceOp::Scan { axis, exclusive: e, reverse: r, .. } => {
                write!(f, "{name}{{axis={axis}, exclusive={e}, reverse={r}}}")
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Builders

macro_rules! axes_builders {
    ($($fn_name:ident => $kind:ident),* $(,)?) => {
        impl Graph {
            $(
                #[doc = concat!("`", stringify!($fn_name), "` over `axes`: `None` = every axis, `Some(axes)` = ",
                    "those axes (negative axes count from the end; `Some(&[])` = each element its own group); ",
                    "`keep_dims` keeps reduced dims as size 1. Same as `reduce(ReduceKind::", stringify!($kind),
                    ", ..)`.")]
                pub fn $fn_name(&mut self, x: ValueId, axes: Option<&[i64]>, keep_dims: bool) -> Result<ValueId> {
                    self.reduce(ReduceKind::$kind, x, axes, keep_dims)
                }
            )*
        }
    };
}

// The named builders (optional: `g.reduce(kind, ..)` builds every axis reduction).
axes_builders! {
    reduce_sum => Sum, reduce_mean => Mean, reduce_prod => Prod, reduce_max => Max,
    reduce_min => Min, reduce_all => All, reduce_any => Any, reduce_logsumexp => LogSumExp,
    reduce_variance => Variance,
}

impl Graph {
    /// The axis reduction `kind` of `x` over `axes`: `None` = every axis of its (static)
    /// rank, `Some(axes)` = those axes (negative axes count from the end; `Some(&[])` = each
    /// element its own group); `keep_dims` keeps reduced dims as size 1. An `Err` naming the
    /// kind if it is not an axis reduction (argmax, argmin, cumsum, cumprod).
    ///
    /// ```
    /// use pfor::ops::ReduceKind;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 5.0, 3.0, 4.0, 2.0, 6.0])?);
    /// let rows = g.reduce(ReduceKind::Max, x, Some(&[1]), false)?; // [2]
    /// let all = g.reduce(ReduceKind::Max, x, None, true)?; // [1, 1]
    /// let r = run_once(&g, &[rows, all], &[])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [5.0, 6.0]);
    /// assert_eq!((r[1].shape(), r[1].to_vec::<f32>()?), (&[1usize, 1][..], vec![6.0]));
    /// assert!(g.reduce(ReduceKind::ArgMax, x, None, false).is_err()); // use `argmax`
    /// # Ok(())
    /// # }
    /// ```
    pub fn reduce(&mut self, kind: ReduceKind, x: ValueId, axes: Option<&[i64]>, keep_dims: bool) -> Result<ValueId> {
        let axes = match axes {
            Some(a) => a.to_vec(),
            None => (0..self.value_type(x)?.rank() as i64).collect(),
        };
        let op = ReduceOp::axes_op(kind, axes, keep_dims)
            .ok_or_else(|| Error::unsupported(kind.name(), "not an axis reduction (use its own builder)"))?;
        self.add_op(Op::Reduce(op), &[x])
    }
    /// Sum over every axis (a scalar): `reduce_sum(x, None, false)`.
    ///
    /// ```
    /// use pfor::ops::ReduceKind;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![1i64, 2, 3, 4])?);
    /// let s = g.sum_all(x)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].scalar_i64()?, 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn sum_all(&mut self, x: ValueId) -> Result<ValueId> {
        self.reduce_sum(x, None, false)
    }
    /// Mean over every axis (a scalar; float only): `reduce_mean(x, None, false)`.
    ///
    /// ```
    /// use pfor::ops::ReduceKind;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 6.0])?);
    /// let m = g.mean_all(x)?;
    /// assert_eq!(run_once(&g, &[m], &[])?[0].scalar_f64()?, 3.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn mean_all(&mut self, x: ValueId) -> Result<ValueId> {
        self.reduce_mean(x, None, false)
    }
    /// Index (i64) of the maximum along `axis`, which is removed. Ties → smallest index;
    /// the first NaN wins.
    ///
    /// ```
    /// use pfor::ops::ReduceKind;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 7.0, 7.0, 9.0, 2.0, 3.0])?);
    /// let i = g.argmax(x, -1)?; // per row; a tie gives the first index
    /// assert_eq!(run_once(&g, &[i], &[])?[0].to_vec::<i64>()?, [1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn argmax(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::Arg { kind: ReduceKind::ArgMax, axis }), &[x])
    }
    /// Index (i64) of the minimum along `axis`, which is removed. Ties → smallest index;
    /// the first NaN wins.
    ///
    /// ```
    /// use pfor::ops::ReduceKind;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![4.0f32, 1.0, 0.5, 2.0])?);
    /// let i = g.argmin(x, 0)?; // per column
    /// assert_eq!(run_once(&g, &[i], &[])?[0].to_vec::<i64>()?, [1, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn argmin(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::Arg { kind: ReduceKind::ArgMin, axis }), &[x])
    }
    /// Cumulative sum along `axis` (`exclusive`: first output 0; `reverse`: from the end).
    ///
    /// ```
    /// use pfor::ops::ReduceKind;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1i64, 2, 3, 4]));
    /// let inclusive = g.cumsum(x, 0, false, false)?;
    /// let exclusive = g.cumsum(x, 0, true, false)?;
    /// let reverse = g.cumsum(x, 0, false, true)?;
    /// let r = run_once(&g, &[inclusive, exclusive, reverse], &[])?;
    /// assert_eq!(r[0].to_vec::<i64>()?, [1, 3, 6, 10]);
    /// assert_eq!(r[1].to_vec::<i64>()?, [0, 1, 3, 6]);
    /// assert_eq!(r[2].to_vec::<i64>()?, [10, 9, 7, 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cumsum(&mut self, x: ValueId, axis: i64, exclusive: bool, reverse: bool) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::Scan { kind: ReduceKind::CumSum, axis, exclusive, reverse }), &[x])
    }
    /// Cumulative product along `axis` (`exclusive`: first output 1; `reverse`: from the end).
    ///
    /// ```
    /// use pfor::ops::ReduceKind;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.0f64, 2.0, 3.0, 4.0]));
    /// let p = g.cumprod(x, 0, false, false)?;
    /// let q = g.cumprod(x, 0, true, false)?; // starts at 1
    /// let r = run_once(&g, &[p, q], &[])?;
    /// assert_eq!(r[0].to_vec::<f64>()?, [1.0, 2.0, 6.0, 24.0]);
    /// assert_eq!(r[1].to_vec::<f64>()?, [1.0, 1.0, 2.0, 6.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cumprod(&mut self, x: ValueId, axis: i64, exclusive: bool, reverse: bool) -> Result<ValueId> {
        self.add_op(Op::Reduce(ReduceOp::Scan { kind: ReduceKind::CumProd, axis, exclusive, reverse }), &[x])
    }
}
