//! The op set: one closed [`Op`] enum whose variants group op families, plus
//! [`Op::Custom`] for user ops.
//!
//! # The family contract
//! Each family lives in one file `ops/<family>.rs` (mirrored by `converters/<family>.rs`,
//! `autodiff/rules/<family>.rs` and `tests/ops/<family>.rs`) and provides:
//! - `XOp`: an enum with named-field variants (attributes only — tensors flow as inputs);
//! - `XKind`: its fieldless twin with `ALL` (every kind) and `name()`;
//! - `XOp::{kind, infer, eval}` and `Display` (`name{attr=...}`);
//! - builder methods on [`Graph`](crate::Graph) (`g.matmul(a, b)?`) that validate their
//!   arguments and return `Result`.
//!
//! `infer` is total over its inputs: any shape or dtype it cannot handle is an `Err`
//! (never a panic), so `eval` can rely on inputs matching the inferred types (the
//! executor also checks every output against the inferred type).
//!
//! # Errors that depend on values
//! Each family also declares, next to its kind table, which inputs' run-time VALUES can
//! make an op fail ([`Raises`], gathered by [`Op::raises`]): integer division by zero, an
//! index out of range, a matrix that cannot be factored, a run-time shape... Errors that
//! depend only on dtypes and shapes do not count: the vectorizer runs an op on all of an
//! op's iterations at once with one per-iteration shape, so they fail alike for every
//! iteration. The classification is conservative: an op whose errors are unknown (a custom
//! op that does not say, a loop that may not terminate, a recursive call) raises on
//! [`Raises::Any`] input. pfor uses it to never evaluate a raising op on iterations that did
//! not reach it (see `converters/control.rs`).
//!
//! Inside a run, ops reach the executor only through the [`EvalCtx`] trait this module owns
//! (`ops::ctx`; `exec::ExecCtx` implements it): variables, function calls, the run's limits,
//! its buffer pool and the session's knobs. `ops` never names `exec`; numeric kernels live
//! in `crate::kernels`.

mod util;

pub mod ctx;

pub mod binary;
pub mod control;
pub mod conv;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod linear;
pub mod nn;
pub mod random;
pub mod reduce;
pub mod shape;
mod signature;
pub mod slicing;
pub mod state;
pub mod unary;

pub use signature::{Batching, Linearity};
pub use util::{broadcast_shapes, broadcast_static, expect_arity, expect_dtype, expect_float, norm_axis};

use std::fmt;
use std::sync::Arc;

use crate::error::Result;
use crate::ir::Library;
use crate::tensor::{Tensor, TensorType};

pub use binary::BinaryKind;
pub use control::{ControlKind, ControlOp, IterationCap, OnLimit};
pub use conv::{Conv2dParams, ConvKind, ConvOp, Padding};
pub use ctx::{CancelToken, EvalCtx, FunctionRunner};
pub use elementwise::{ElementwiseKind, ElementwiseOp};
pub use indexing::{IndexKind, IndexOp};
pub use linalg::{LinalgKind, LinalgOp};
pub use linear::{LinearKind, LinearOp};
pub use nn::{NnKind, NnOp};
pub use random::{RandomKind, RandomOp};
pub use reduce::{ReduceForm, ReduceKind, ReduceOp};
pub use shape::{ShapeKind, ShapeOp};
pub use slicing::{SlicingKind, SlicingOp};
pub use state::{StateKind, StateOp};
pub use unary::UnaryKind;

/// A user-defined op. Only `name`, `infer` and `eval` are required.
pub trait CustomOp: Send + Sync + fmt::Debug {
    /// A unique name (used as the converter registry key).
    fn name(&self) -> &str;
    /// Output types from input types; an `Err` for unsupported inputs.
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>>;
    /// Compute the outputs.
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>>;
    /// [`eval`](Self::eval) inside a session run: `ctx` has the run's options and its
    /// deadline and cancel token ([`EvalCtx::check_interrupt_dyn`]), which an op that loops or
    /// recurses should honour. Defaults to `eval`.
    fn eval_in(&self, inputs: &[Tensor], ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        let _ = ctx;
        self.eval(inputs)
    }
    /// Whether the op has side effects or randomness (pfor never reuses it unconverted).
    fn is_stateful(&self) -> bool {
        false
    }
    /// Whether `eval` can fail depending on its inputs' values (not only on their types).
    /// The default is the conservative `true`: pfor then never runs the op on iterations of
    /// a masked branch or loop that did not reach it.
    fn may_raise(&self) -> bool {
        true
    }
    /// How pfor batches the op ([`Batching`]). Any class but the default
    /// [`Batching::Custom`] gets the derived converter when no converter is registered
    /// under the op's name (so an elementwise op needs none).
    fn batching(&self) -> Batching {
        Batching::Custom
    }
    /// For [`Batching::AxisMapped`]: this op with every axis attribute mapped through `f`.
    fn map_axes(&self, f: &dyn Fn(i64) -> i64) -> Option<Arc<dyn CustomOp>> {
        let _ = f;
        None
    }
    /// Reverse-mode rule: one cotangent per input (`None` = zero). The default is an
    /// error naming the op, so gradients through an op without a rule fail loudly.
    fn vjp(&self, cx: &mut crate::autodiff::VjpCtx<'_>) -> Result<Vec<Option<crate::ir::ValueId>>> {
        Err(cx.unsupported(format!("custom op {} has no vjp rule", self.name())))
    }
    /// Forward-mode rule: one tangent per output (`None` = zero). Defaults to an error.
    fn jvp(&self, cx: &mut crate::autodiff::JvpCtx<'_>) -> Result<Vec<Option<crate::ir::ValueId>>> {
        Err(cx.unsupported(format!("custom op {} has no jvp rule", self.name())))
    }
}

/// Which inputs' run-time values can make an op fail (see the module docs): errors that
/// depend only on the types (dtypes and shapes) of the inputs do not count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raises {
    /// Fails on no values.
    Never,
    /// May fail depending on the values of these inputs only (given the types of all).
    On(&'static [usize]),
    /// May fail, or run forever, depending on the values of any input (control flow,
    /// calls, custom ops).
    Any,
}

impl Raises {
    /// True unless [`Raises::Never`].
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(!Raises::Never.any());
    /// assert!(Raises::On(&[1]).any() && Raises::Any.any());
    /// # Ok(())
    /// # }
    /// ```
    pub fn any(self) -> bool {
        self != Raises::Never
    }
    /// True if the value of input `k` can make the op fail.
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let r = Raises::On(&[1]); // e.g. integer division: only the divisor can make it fail
    /// assert!(!r.on(0) && r.on(1));
    /// assert!(Raises::Any.on(7) && !Raises::Never.on(0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn on(self, k: usize) -> bool {
        match self {
            Raises::Never => false,
            Raises::On(ks) => ks.contains(&k),
            Raises::Any => true,
        }
    }
}

/// Every operation a graph node can perform.
#[derive(Clone, Debug)]
pub enum Op {
    /// A graph input or function parameter, fed at run time.
    Input {
        /// Name (feeds may be given by name).
        name: String,
    },
    /// A constant.
    Const {
        /// The value.
        value: Tensor,
    },
    /// Elementwise unary math.
    Unary(UnaryKind),
    /// Elementwise binary math with numpy broadcasting.
    Binary(BinaryKind),
    /// select/where, cast, clip.
    Elementwise(ElementwiseOp),
    /// Reductions, arg-reductions and scans.
    Reduce(ReduceOp),
    /// Shape manipulation.
    Shape(ShapeOp),
    /// Slicing, padding, concatenation and friends.
    Slicing(SlicingOp),
    /// Gathers, scatters, segment ops, top_k.
    Index(IndexOp),
    /// matmul / batch matmul.
    Linear(LinearOp),
    /// Convolutions and pooling, with their gradients.
    Conv(ConvOp),
    /// Neural-network layers: bias_add, softmax, losses, normalization.
    Nn(NnOp),
    /// Linear algebra.
    Linalg(LinalgOp),
    /// Counter-based random numbers (explicit keys).
    Random(RandomOp),
    /// Variables.
    State(StateOp),
    /// Functional control flow: cond, while, call, for.
    Control(ControlOp),
    /// A user op.
    Custom(Arc<dyn CustomOp>),
}

/// The fieldless kind of an op (the converter / VJP registry key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// [`Op::Input`].
    Input,
    /// [`Op::Const`].
    Const,
    /// [`Op::Unary`].
    Unary(UnaryKind),
    /// [`Op::Binary`].
    Binary(BinaryKind),
    /// [`Op::Elementwise`].
    Elementwise(ElementwiseKind),
    /// [`Op::Reduce`].
    Reduce(ReduceKind),
    /// [`Op::Shape`].
    Shape(ShapeKind),
    /// [`Op::Slicing`].
    Slicing(SlicingKind),
    /// [`Op::Index`].
    Index(IndexKind),
    /// [`Op::Linear`].
    Linear(LinearKind),
    /// [`Op::Conv`].
    Conv(ConvKind),
    /// [`Op::Nn`].
    Nn(NnKind),
    /// [`Op::Linalg`].
    Linalg(LinalgKind),
    /// [`Op::Random`].
    Random(RandomKind),
    /// [`Op::State`].
    State(StateKind),
    /// [`Op::Control`].
    Control(ControlKind),
    /// [`Op::Custom`].
    Custom,
}

impl OpKind {
    /// Every built-in op kind (Custom excluded).
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let kinds = OpKind::all();
    /// assert!(kinds.contains(&OpKind::Unary(UnaryKind::Exp)));
    /// assert!(kinds.len() > 100);
    /// # Ok(())
    /// # }
    /// ```
    pub fn all() -> Vec<OpKind> {
        let mut v = vec![OpKind::Input, OpKind::Const];
        v.extend(UnaryKind::ALL.iter().map(|k| OpKind::Unary(*k)));
        v.extend(BinaryKind::ALL.iter().map(|k| OpKind::Binary(*k)));
        v.extend(ElementwiseKind::ALL.iter().map(|k| OpKind::Elementwise(*k)));
        v.extend(ReduceKind::ALL.iter().map(|k| OpKind::Reduce(*k)));
        v.extend(ShapeKind::ALL.iter().map(|k| OpKind::Shape(*k)));
        v.extend(SlicingKind::ALL.iter().map(|k| OpKind::Slicing(*k)));
        v.extend(IndexKind::ALL.iter().map(|k| OpKind::Index(*k)));
        v.extend(LinearKind::ALL.iter().map(|k| OpKind::Linear(*k)));
        v.extend(ConvKind::ALL.iter().map(|k| OpKind::Conv(*k)));
        v.extend(NnKind::ALL.iter().map(|k| OpKind::Nn(*k)));
        v.extend(LinalgKind::ALL.iter().map(|k| OpKind::Linalg(*k)));
        v.extend(RandomKind::ALL.iter().map(|k| OpKind::Random(*k)));
        v.extend(StateKind::ALL.iter().map(|k| OpKind::State(*k)));
        v.extend(ControlKind::ALL.iter().map(|k| OpKind::Control(*k)));
        v
    }

    /// The op's name.
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert_eq!(OpKind::Binary(BinaryKind::Add).name(), "add");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Input => "input",
            OpKind::Const => "const",
            OpKind::Unary(k) => k.name(),
            OpKind::Binary(k) => k.name(),
            OpKind::Elementwise(k) => k.name(),
            OpKind::Reduce(k) => k.name(),
            OpKind::Shape(k) => k.name(),
            OpKind::Slicing(k) => k.name(),
            OpKind::Index(k) => k.name(),
            OpKind::Linear(k) => k.name(),
            OpKind::Conv(k) => k.name(),
            OpKind::Nn(k) => k.name(),
            OpKind::Linalg(k) => k.name(),
            OpKind::Random(k) => k.name(),
            OpKind::State(k) => k.name(),
            OpKind::Control(k) => k.name(),
            OpKind::Custom => "custom",
        }
    }

    /// The family name (the file name shared by ops/, converters/, autodiff/rules/).
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// // the family: the file name in src/ops/, converters/ and src/autodiff/rules/
    /// assert_eq!(OpKind::Unary(UnaryKind::Tanh).family(), "unary");
    /// # Ok(())
    /// # }
    /// ```
    pub fn family(&self) -> &'static str {
        match self {
            OpKind::Input | OpKind::Const => "core",
            OpKind::Unary(_) => "unary",
            OpKind::Binary(_) => "binary",
            OpKind::Elementwise(_) => "elementwise",
            OpKind::Reduce(_) => "reduce",
            OpKind::Shape(_) => "shape",
            OpKind::Slicing(_) => "slicing",
            OpKind::Index(_) => "indexing",
            OpKind::Linear(_) => "linear",
            OpKind::Conv(_) => "conv",
            OpKind::Nn(_) => "nn",
            OpKind::Linalg(_) => "linalg",
            OpKind::Random(_) => "random",
            OpKind::State(_) => "state",
            OpKind::Control(_) => "control",
            OpKind::Custom => "custom",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Op {
    /// The op's kind.
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// assert_eq!(g.node(y.node)?.op.kind(), OpKind::Unary(UnaryKind::Exp));
    /// # Ok(())
    /// # }
    /// ```
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Input { .. } => OpKind::Input,
            Op::Const { .. } => OpKind::Const,
            Op::Unary(k) => OpKind::Unary(*k),
            Op::Binary(k) => OpKind::Binary(*k),
            Op::Elementwise(o) => OpKind::Elementwise(o.kind()),
            Op::Reduce(o) => OpKind::Reduce(o.kind()),
            Op::Shape(o) => OpKind::Shape(o.kind()),
            Op::Slicing(o) => OpKind::Slicing(o.kind()),
            Op::Index(o) => OpKind::Index(o.kind()),
            Op::Linear(o) => OpKind::Linear(o.kind()),
            Op::Conv(o) => OpKind::Conv(o.kind()),
            Op::Nn(o) => OpKind::Nn(o.kind()),
            Op::Linalg(o) => OpKind::Linalg(o.kind()),
            Op::Random(o) => OpKind::Random(o.kind()),
            Op::State(o) => OpKind::State(o.kind()),
            Op::Control(o) => OpKind::Control(o.kind()),
            Op::Custom(_) => OpKind::Custom,
        }
    }

    /// The op's name (for a custom op, its own name).
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.sqrt(x)?;
    /// assert_eq!(g.node(y.node)?.op.name(), "sqrt");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> String {
        match self {
            Op::Custom(c) => c.name().to_string(),
            o => o.kind().name().to_string(),
        }
    }

    /// Shape and dtype inference.
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let op = Op::Binary(BinaryKind::Add);
    /// let (a, b) = (TensorType::new(DType::F32, [2, 1]), TensorType::new(DType::F32, [3]));
    /// assert_eq!(op.infer(&[a, b.clone()])?, [TensorType::new(DType::F32, [2, 3])]); // broadcasting
    /// assert!(op.infer(&[b, TensorType::new(DType::I64, [3])]).is_err()); // dtypes differ
    /// # Ok(())
    /// # }
    /// ```
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        match self {
            Op::Const { value } => {
                expect_arity("const", inputs, 0)?;
                Ok(vec![value.tensor_type()])
            }
            Op::Input { .. } => {
                // An input's type is declared when it is created.
                Err(crate::Error::unsupported(&self.name(), "inputs are created with Graph::input"))
            }
            Op::Unary(k) => unary::infer(*k, inputs),
            Op::Binary(k) => binary::infer(*k, inputs),
            Op::Elementwise(o) => o.infer(inputs),
            Op::Reduce(o) => o.infer(inputs),
            Op::Shape(o) => o.infer(inputs),
            Op::Slicing(o) => o.infer(inputs),
            Op::Index(o) => o.infer(inputs),
            Op::Linear(o) => o.infer(inputs),
            Op::Conv(o) => o.infer(inputs),
            Op::Nn(o) => o.infer(inputs),
            Op::Linalg(o) => o.infer(inputs),
            Op::Random(o) => o.infer(inputs),
            Op::State(o) => o.infer(inputs),
            Op::Control(o) => o.infer(inputs),
            Op::Custom(c) => c.infer(inputs),
        }
    }

    /// Evaluate on concrete inputs. Inputs are owned so kernels can reuse a buffer in place
    /// when they hold its only reference.
    pub fn eval(&self, inputs: Vec<Tensor>, ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        match self {
            Op::Input { name } => Err(crate::Error::MissingFeed { name: name.clone(), value: "?".into() }),
            Op::Const { value } => Ok(vec![value.clone()]),
            Op::Unary(k) => unary::eval(*k, inputs),
            Op::Binary(k) => binary::eval(*k, inputs),
            Op::Elementwise(o) => o.eval(inputs),
            Op::Reduce(o) => o.eval(inputs),
            Op::Shape(o) => o.eval_in(inputs, ctx),
            Op::Slicing(o) => o.eval(inputs),
            Op::Index(o) => o.eval(inputs),
            Op::Linear(o) => o.eval_in(inputs, ctx),
            Op::Conv(o) => o.eval_in(inputs, ctx),
            Op::Nn(o) => o.eval(inputs),
            Op::Linalg(o) => o.eval(inputs),
            Op::Random(o) => o.eval(inputs),
            Op::State(o) => o.eval(inputs, ctx),
            Op::Control(o) => o.eval(inputs, ctx),
            Op::Custom(c) => c.eval_in(&inputs, ctx),
        }
    }

    /// True for ops whose effect is not captured by their outputs (variable writes,
    /// stateful custom ops): never pruned, never reordered.
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// assert!(!Op::Unary(UnaryKind::Exp).has_side_effects());
    /// # Ok(())
    /// # }
    /// ```
    pub fn has_side_effects(&self) -> bool {
        match self {
            Op::State(s) => s.has_side_effects(),
            Op::Control(c) => c.has_side_effects(),
            Op::Custom(c) => c.is_stateful(),
            _ => false,
        }
    }

    /// Which inputs' run-time values can make the op fail ([`Raises`]; conservative).
    /// `inputs` are the op's input types (integer division raises, float division does
    /// not); `lib` resolves calls, which are checked transitively.
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let i64s = [TensorType::new(DType::I64, [2]), TensorType::new(DType::I64, [2])];
    /// let f32s = [TensorType::new(DType::F32, [2]), TensorType::new(DType::F32, [2])];
    /// let div = Op::Binary(BinaryKind::Div);
    /// assert_eq!(div.raises(&i64s, g.library()), Raises::On(&[1])); // a zero divisor
    /// assert_eq!(div.raises(&f32s, g.library()), Raises::Never); // inf / NaN instead
    /// # Ok(())
    /// # }
    /// ```
    pub fn raises(&self, inputs: &[TensorType], lib: &Library) -> Raises {
        let dtype = inputs.first().map(|t| t.dtype);
        match self {
            Op::Input { .. } | Op::Const { .. } => Raises::Never,
            Op::Unary(k) => k.raises(),
            Op::Binary(k) => k.raises(dtype),
            Op::Elementwise(o) => o.kind().raises(),
            Op::Reduce(o) => o.kind().raises(),
            Op::Shape(o) => o.kind().raises(),
            Op::Slicing(o) => o.kind().raises(),
            Op::Index(o) => o.kind().raises(),
            Op::Linear(o) => o.kind().raises(),
            Op::Conv(o) => o.kind().raises(),
            Op::Nn(o) => o.kind().raises(),
            Op::Linalg(o) => o.kind().raises(),
            Op::Random(o) => o.kind().raises(),
            Op::State(o) => o.kind().raises(),
            Op::Control(o) => o.raises(lib),
            Op::Custom(c) => {
                if c.may_raise() {
                    Raises::Any
                } else {
                    Raises::Never
                }
            }
        }
    }

    /// True if some input value can make the op fail ([`Op::raises`]).
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let g = Graph::new();
    /// let t = [TensorType::new(DType::F64, [3])];
    /// assert!(!Op::Unary(UnaryKind::Log).may_raise(&t, g.library())); // log(-1) is NaN, no error
    /// # Ok(())
    /// # }
    /// ```
    pub fn may_raise(&self, inputs: &[TensorType], lib: &Library) -> bool {
        self.raises(inputs, lib).any()
    }

    /// True for ops that pfor must not reuse unconverted even when all inputs are
    /// loop-invariant: random ops (each iteration draws differently by default), state.
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, Raises, UnaryKind};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.exp(x)?;
    /// assert!(!g.node(y.node)?.op.is_stateful()); // random ops and variable reads/writes are
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_stateful(&self) -> bool {
        match self {
            Op::Random(r) => r.is_stateful(),
            Op::State(_) => true,
            Op::Control(c) => c.has_side_effects(),
            Op::Custom(c) => c.is_stateful(),
            _ => false,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Input { name } => write!(f, "input{{name={name:?}}}"),
            Op::Const { value } => {
                if value.len() <= 4 {
                    write!(f, "const{{{}{:?} = {:?}}}", value.dtype(), value.shape(), value.to_f64_vec())
                } else {
                    write!(f, "const{{{}{:?}}}", value.dtype(), value.shape())
                }
            }
            Op::Unary(k) => f.write_str(k.name()),
            Op::Binary(k) => f.write_str(k.name()),
            Op::Elementwise(o) => write!(f, "{o}"),
            Op::Reduce(o) => write!(f, "{o}"),
            Op::Shape(o) => write!(f, "{o}"),
            Op::Slicing(o) => write!(f, "{o}"),
            Op::Index(o) => write!(f, "{o}"),
            Op::Linear(o) => write!(f, "{o}"),
            Op::Conv(o) => write!(f, "{o}"),
            Op::Nn(o) => write!(f, "{o}"),
            Op::Linalg(o) => write!(f, "{o}"),
            Op::Random(o) => write!(f, "{o}"),
            Op::State(o) => write!(f, "{o}"),
            Op::Control(o) => write!(f, "{o}"),
            Op::Custom(c) => write!(f, "custom{{{}}}", c.name()),
        }
    }
}
