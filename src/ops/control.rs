//! Functional control flow: `Cond`, `While`, `Call` and `For`.
//!
//! Invariants:
//! - branch / body functions own their sub-graphs; captured outer values are explicit
//!   inputs of the control-flow node (never referenced across graphs). The `cond` and
//!   `while_loop` builders capture the outer values a branch uses directly (they follow
//!   the explicit arguments / captures); named functions capture nothing (`ir::scope`);
//! - `Cond`: input 0 is a bool scalar predicate, inputs 1.. are the branch arguments; both
//!   branches take the same parameters and return the same number of results of equal
//!   dtype and rank (differing fixed dims become dynamic);
//! - `While`: inputs are `num_carries` carries followed by captures; `cond(carries,
//!   captures) -> bool scalar`, `body(carries, captures) -> carries'` with each carry's
//!   type preserved; outputs are the final carries. The condition is evaluated before
//!   every trip, also once the optional [`IterationCap`] is reached: if it still holds
//!   then, the loop stops there ([`OnLimit::Stop`], TF's `maximum_iterations`) or fails
//!   with `Error::IterationLimit` ([`OnLimit::Error`]); loops without a cap take
//!   `ExecOptions::max_while_iterations` (an error) if set. Every trip checks the run's
//!   deadline and cancel token;
//! - `Call`: a named function of the `Library`; type-checked against
//!   its declaration, so recursion works; depth is bounded by `ExecOptions::max_call_depth`;
//! - `For`: input 0 is the trip count `n` (i64 scalar), inputs 1.. are captures; the body
//!   takes `(i, captures...)` and its results are stacked along a new axis 0 — the
//!   reference loop that pfor is checked against.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ir::{Capture, Function, FunctionSignature, Graph, Library, ValueId};
use crate::ops::EvalCtx;
use crate::ops::{Op, Raises, expect_dtype};
use crate::tensor::{DType, Dim, RowStack, Shape, Tensor, TensorType};

/// What a capped `while` loop does when its condition still holds after the cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnLimit {
    /// Stop with the current carries (TF's `maximum_iterations`).
    #[default]
    Stop,
    /// Fail with `Error::IterationLimit` (for loops that must terminate).
    Error,
}

/// A cap on the trips of a `while` loop (see [`Graph::while_loop_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IterationCap {
    /// At most this many trips.
    pub max_iterations: u64,
    /// What happens when the condition still holds after them.
    pub on_limit: OnLimit,
}

impl IterationCap {
    /// At most `n` trips, then stop with the current carries.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let c0 = g.constant(Tensor::scalar(0i64));
    /// let out = g.while_loop_with(&[c0], &[], IterationCap::stop(5), |g, a| {
    ///     let big = g.constant(Tensor::scalar(100i64));
    ///     g.less(a[0], big)
    /// }, |g, a| Ok(vec![g.add_scalar(a[0], 1.0)?]))?;
    /// assert_eq!(run_once(&g, &out, &[])?[0].scalar_i64()?, 5); // stopped after 5 trips
    /// # Ok(())
    /// # }
    /// ```
    pub fn stop(n: u64) -> IterationCap {
        IterationCap { max_iterations: n, on_limit: OnLimit::Stop }
    }

    /// At most `n` trips; `Error::IterationLimit` if the condition still holds after them.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let c0 = g.constant(Tensor::scalar(0i64));
    /// let out = g.while_loop_with(&[c0], &[], IterationCap::error(5), |g, a| {
    ///     let big = g.constant(Tensor::scalar(100i64));
    ///     g.less(a[0], big)
    /// }, |g, a| Ok(vec![g.add_scalar(a[0], 1.0)?]))?;
    /// let e = run_once(&g, &out, &[]).unwrap_err();
    /// assert!(matches!(e.root(), Error::IterationLimit { .. }), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn error(n: u64) -> IterationCap {
        IterationCap { max_iterations: n, on_limit: OnLimit::Error }
    }
}

/// Control-flow ops.
#[derive(Clone, Debug, PartialEq)]
pub enum ControlOp {
    /// `if pred { then(args) } else { else_(args) }`.
    Cond {
        /// Taken when the predicate is true.
        then: Arc<Function>,
        /// Taken when the predicate is false.
        else_: Arc<Function>,
    },
    /// `while cond(c) { c = body(c) }`.
    While {
        /// The condition.
        cond: Arc<Function>,
        /// The body.
        body: Arc<Function>,
        /// Number of loop-carried values (the remaining inputs are captures).
        num_carries: usize,
        /// Optional cap on the trip count (see [`IterationCap`]).
        max_iterations: Option<IterationCap>,
    },
    /// Call a named library function.
    Call {
        /// Function name.
        function: String,
        /// Its declared signature (fixed at build time).
        signature: FunctionSignature,
    },
    /// Run `body(i, captures)` for `i in 0..n` and stack the results.
    For {
        /// The body.
        body: Arc<Function>,
        /// `n` when known at build time.
        static_n: Option<usize>,
    },
}

/// Kinds of control-flow ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlKind {
    /// `cond`.
    Cond,
    /// `while`.
    While,
    /// `call`.
    Call,
    /// `for`.
    For,
}

impl ControlKind {
    /// Every kind.
    pub const ALL: &'static [ControlKind] =
        &[ControlKind::Cond, ControlKind::While, ControlKind::Call, ControlKind::For];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {
            ControlKind::Cond => "cond",
            ControlKind::While => "while",
            ControlKind::Call => "call",
            ControlKind::For => "for",
        }
    }
}

fn check_args(op: &str, what: &str, params: &[TensorType], args: &[TensorType]) -> Result<()> {
    if params.len() != args.len() {
        return Err(Error::arity(op, format!("{} ({what} parameters)", params.len()), args.len()));
    }
    for (i, (p, a)) in params.iter().zip(args).enumerate() {
        if p.dtype != a.dtype || !p.shape.compatible(&a.shape) {
            return Err(Error::shape(op, format!("{what} argument {i} is {a}, parameter expects {p}")));
        }
    }
    Ok(())
}

/// Unify two types that must agree in dtype and rank; differing dims become dynamic.
fn join(op: &str, a: &TensorType, b: &TensorType) -> Result<TensorType> {
    if a.dtype != b.dtype || a.rank() != b.rank() {
        return Err(Error::shape(op, format!("branches return {a} and {b}")));
    }
    let dims =
        a.shape.dims().iter().zip(b.shape.dims()).map(|(x, y)| if x == y { x.clone() } else { Dim::Dynamic(None) });
    Ok(TensorType { dtype: a.dtype, shape: Shape::from_dims(dims) })
}

/// True if some node of `g` may raise ([`Op::raises`]), with `calling` the calls being
/// checked.
fn graph_may_raise(g: &Graph, lib: &Library, calling: &mut Vec<String>) -> bool {
    g.node_ids().into_iter().any(|n| {
        let Ok(nd) = g.node(n) else { return true };
        match &nd.op {
            Op::Control(c) => c.raises_in(lib, calling).any(),
            op => {
                let types: Option<Vec<TensorType>> = nd.inputs.iter().map(|v| g.value_type(*v).ok().cloned()).collect();
                types.is_none_or(|t| op.may_raise(&t, lib))
            }
        }
    })
}

impl Function {
    /// True if running the function can fail, or run forever, depending on its arguments'
    /// values: some op of its body may raise ([`Op::raises`]), transitively.
    pub fn may_raise(&self) -> bool {
        graph_may_raise(&self.graph, self.graph.library(), &mut Vec::new())
    }
}

impl ControlOp {
    /// The kind.
    pub fn kind(&self) -> ControlKind {
        match self {
            ControlOp::Cond { .. } => ControlKind::Cond,
            ControlOp::While { .. } => ControlKind::While,
            ControlOp::Call { .. } => ControlKind::Call,
            ControlOp::For { .. } => ControlKind::For,
        }
    }

    /// True if any function this op runs has side effects (then it is never pruned).
    pub fn has_side_effects(&self) -> bool {
        fn f_has(f: &Function) -> bool {
            f.graph.node_ids().into_iter().any(|n| f.graph.node(n).is_ok_and(|nd| nd.op.has_side_effects()))
        }
        match self {
            ControlOp::Cond { then, else_ } => f_has(then) || f_has(else_),
            ControlOp::While { cond, body, .. } => f_has(cond) || f_has(body),
            ControlOp::For { body, .. } => f_has(body),
            ControlOp::Call { .. } => false,
        }
    }

    /// Which inputs' values can make the op fail or run forever ([`Raises`]): a `while` may
    /// not terminate (or exceed `max_iterations`), a `cond`, `call` or `for` is as risky as
    /// the functions it runs (checked transitively through nested control flow and calls;
    /// `for` also fails on a negative trip count), a recursive call may exceed the call
    /// depth. `lib` resolves calls; an unknown function is assumed to raise.
    pub fn raises(&self, lib: &Library) -> Raises {
        self.raises_in(lib, &mut Vec::new())
    }

    /// [`ControlOp::raises`] with the calls being checked (a call to one of them recurses).
    fn raises_in(&self, lib: &Library, calling: &mut Vec<String>) -> Raises {
        let any_if = |b: bool| if b { Raises::Any } else { Raises::Never };
        match self {
            ControlOp::Cond { then, else_ } => {
                any_if(graph_may_raise(&then.graph, lib, calling) || graph_may_raise(&else_.graph, lib, calling))
            }
            ControlOp::While { .. } => Raises::Any,
            ControlOp::For { body, .. } => {
                if graph_may_raise(&body.graph, lib, calling) {
                    Raises::Any
                } else {
                    Raises::On(&[0])
                }
            }
            ControlOp::Call { function, .. } => {
                if calling.contains(function) {
                    return Raises::Any;
                }
                let Ok(f) = lib.get(function) else { return Raises::Any };
                calling.push(function.clone());
                let r = graph_may_raise(&f.graph, lib, calling);
                calling.pop();
                any_if(r)
            }
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        match self {
            ControlOp::Cond { then, else_ } => {
                let pred = inputs.first().ok_or_else(|| Error::arity(op, "at least 1", 0))?;
                expect_dtype(op, pred, DType::Bool)?;
                if pred.rank() != 0 {
                    return Err(Error::shape(op, format!("predicate must be a scalar, got {pred}")));
                }
                check_args(op, "then-branch", &then.param_types(), &inputs[1..])?;
                check_args(op, "else-branch", &else_.param_types(), &inputs[1..])?;
                let (tr, er) = (then.result_types(), else_.result_types());
                if tr.len() != er.len() {
                    return Err(Error::shape(
                        op,
                        format!("then returns {} values, else returns {}", tr.len(), er.len()),
                    ));
                }
                tr.iter().zip(&er).map(|(a, b)| join(op, a, b)).collect()
            }
            ControlOp::While { cond, body, num_carries, .. } => {
                let k = *num_carries;
                if inputs.len() < k {
                    return Err(Error::arity(op, format!("at least {k}"), inputs.len()));
                }
                check_args(op, "cond", &cond.param_types(), inputs)?;
                check_args(op, "body", &body.param_types(), inputs)?;
                let cr = cond.result_types();
                if cr.len() != 1 || cr[0].dtype != DType::Bool || cr[0].rank() != 0 {
                    return Err(Error::shape(op, format!("cond must return one bool scalar, returns {cr:?}")));
                }
                let br = body.result_types();
                if br.len() != k {
                    return Err(Error::shape(op, format!("body returns {} values for {k} carries", br.len())));
                }
                for (i, (r, c)) in br.iter().zip(&inputs[..k]).enumerate() {
                    if r.dtype != c.dtype || !r.shape.compatible(&c.shape) {
                        return Err(Error::shape(op, format!("body changes carry {i} from {c} to {r}")));
                    }
                }
                // Carries keep the loop's parameter types (which may be more general).
                Ok(body.param_types()[..k].to_vec())
            }
            ControlOp::Call { function, signature } => {
                check_args(op, &format!("function '{function}'"), &signature.params, inputs)?;
                Ok(signature.results.clone())
            }
            ControlOp::For { body, static_n } => {
                let n = inputs.first().ok_or_else(|| Error::arity(op, "at least 1", 0))?;
                if n.dtype != DType::I64 || n.rank() != 0 {
                    return Err(Error::shape(op, format!("trip count must be an i64 scalar, got {n}")));
                }
                let mut want = vec![TensorType::scalar(DType::I64)];
                want.extend_from_slice(&inputs[1..]);
                check_args(op, "body", &body.param_types(), &want)?;
                let d = static_n.map_or(Dim::Dynamic(None), Dim::Fixed);
                Ok(body
                    .result_types()
                    .into_iter()
                    .map(|t| TensorType { dtype: t.dtype, shape: t.shape.prepend(d.clone()) })
                    .collect())
            }
        }
    }

    /// Evaluate by running the functions.
    pub fn eval(&self, inputs: Vec<Tensor>, ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        match self {
            ControlOp::Cond { then, else_ } => {
                let mut it = inputs.into_iter();
                let pred = it.next().ok_or_else(|| Error::arity(op, "at least 1", 0))?;
                let p = pred.array::<bool>()?.iter().next().copied().unwrap_or(false);
                let args: Vec<Tensor> = it.collect();
                ctx.run_function(if p { then } else { else_ }, args)
            }
            ControlOp::While { cond, body, num_carries, max_iterations } => {
                let k = *num_carries;
                let mut carries = inputs;
                let captures = carries.split_off(k);
                let cap = max_iterations.or_else(|| ctx.max_while_iterations().map(IterationCap::error));
                let mut trips = 0u64;
                loop {
                    ctx.check_interrupt(|| format!("at trip {trips} of a while loop"))?;
                    let mut args = carries.clone();
                    args.extend(captures.iter().cloned());
                    let c = ctx.run_function(cond, args)?;
                    let go = c.first().map(|t| t.array::<bool>().map(|a| a.iter().next().copied().unwrap_or(false)));
                    if !go.transpose()?.unwrap_or(false) {
                        break;
                    }
                    if let Some(c) = cap
                        && trips >= c.max_iterations
                    {
                        match c.on_limit {
                            OnLimit::Stop => break,
                            OnLimit::Error => {
                                return Err(Error::IterationLimit { what: op.into(), limit: c.max_iterations });
                            }
                        }
                    }
                    let mut args = carries;
                    args.extend(captures.iter().cloned());
                    carries = ctx.run_function(body, args)?;
                    trips += 1;
                }
                Ok(carries)
            }
            ControlOp::Call { function, .. } => ctx.call(function, inputs),
            ControlOp::For { body, .. } => {
                let mut it = inputs.into_iter();
                let n = it.next().ok_or_else(|| Error::arity(op, "at least 1", 0))?.scalar_i64()?;
                if n < 0 {
                    return Err(Error::InvalidArgument(format!("for: trip count must be >= 0, got {n}")));
                }
                let captures: Vec<Tensor> = it.collect();
                let rtypes = body.result_types();
                // each iteration's results are copied into their stacked outputs and dropped
                // (never all rows alive at once); an output's buffer is a pooled one of its
                // size where the session has one (the last run's output, dropped by the caller)
                let mut stacks: Vec<RowStack> = Vec::with_capacity(rtypes.len());
                for i in 0..n {
                    ctx.check_interrupt(|| format!("at iteration {i} of a for loop"))?;
                    let mut args = vec![Tensor::scalar(i)];
                    args.extend(captures.iter().cloned());
                    let outs = ctx.run_function(body, args)?;
                    if i == 0 {
                        for o in &outs {
                            let len = o.shape().iter().try_fold(n as usize, |a, &d| a.checked_mul(d));
                            let buf = len.and_then(|len| ctx.take_recycled(o.dtype(), len));
                            stacks.push(RowStack::new("stack", n as usize, o, buf)?);
                        }
                    }
                    for (s, o) in stacks.iter_mut().zip(&outs) {
                        s.put("stack", i as usize, o)?;
                    }
                }
                if n == 0 {
                    return rtypes
                        .iter()
                        .map(|t| {
                            let elem: Vec<usize> = t.shape.dims().iter().map(|d| d.value().unwrap_or(0)).collect();
                            Tensor::stack(&[], t.dtype, &elem)
                        })
                        .collect();
                }
                Ok(stacks.into_iter().map(RowStack::finish).collect())
            }
        }
    }
}

impl fmt::Display for ControlOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlOp::Cond { then, else_ } => {
                write!(f, "cond{{then={} nodes, else={} nodes}}", then.graph.num_nodes(), else_.graph.num_nodes())
            }
            ControlOp::While { cond, body, num_carries, max_iterations } => {
                write!(f, "while{{carries={num_carries}, ")?;
                if let Some(c) = max_iterations {
                    let on = if c.on_limit == OnLimit::Stop { "stop" } else { "error" };
                    write!(f, "max_iterations={} ({on}), ", c.max_iterations)?;
                }
                write!(f, "cond={} nodes, body={} nodes}}", cond.graph.num_nodes(), body.graph.num_nodes())
            }
            ControlOp::Call { function, .. } => write!(f, "call{{{function}}}"),
            ControlOp::For { body, static_n } => match static_n {
                Some(n) => write!(f, "for{{n={n}, body={} nodes}}", body.graph.num_nodes()),
                None => write!(f, "for{{body={} nodes}}", body.graph.num_nodes()),
            },
        }
    }
}

impl Graph {
    /// `if pred { then(args) } else { else_(args) }`. Each branch is built in its own
    /// child graph from the parameters it receives. Values of this graph (or of graphs
    /// enclosing it) that a branch uses directly are captured: they become extra inputs
    /// of the `Cond` node after `args`, and extra parameters of both branches.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, Shape::scalar());
    /// let zero = g.constant(Tensor::scalar(0.0f64));
    /// let pos = g.greater(x, zero)?;
    /// // |x| as a branch: only the taken branch runs
    /// let r = g.cond(pos, &[x], |_, a| Ok(vec![a[0]]), |g, a| Ok(vec![g.neg(a[0])?]))?;
    /// assert_eq!(run_once(&g, &r, &[(x, Tensor::scalar(-3.0f64))])?[0].scalar_f64()?, 3.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cond(
        &mut self,
        pred: ValueId,
        args: &[ValueId],
        then: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
        else_: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Vec<ValueId>> {
        self.value_type(pred)?;
        let types = args.iter().map(|a| self.value_type(*a).cloned()).collect::<Result<Vec<_>>>()?;
        let mut then = self.build_body(Capture::Auto, &types, then)?;
        let mut else_ = self.build_body(Capture::Auto, &types, else_)?;
        let captured = self.bind_captures(&mut [&mut then, &mut else_])?;
        let mut inputs = vec![pred];
        inputs.extend_from_slice(args);
        inputs.extend(captured);
        let op = ControlOp::Cond { then: Arc::new(then.function), else_: Arc::new(else_.function) };
        self.add_op_multi(Op::Control(op), &inputs)
    }

    /// `while cond(c, captures) { c = body(c, captures) }`; returns the final carries.
    /// Values of this graph that `cond` or `body` use directly, without passing them
    /// through `captures`, are captured too: extra inputs of the `While` node after
    /// `captures`, and extra parameters of both functions.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let n = g.input("n", DType::I64, Shape::scalar());
    /// let (i0, acc0) = (g.constant(Tensor::scalar(0i64)), g.constant(Tensor::scalar(0i64)));
    /// // Σ_{i<n} i, with n captured
    /// let out = g.while_loop(&[i0, acc0], &[n], |g, a| g.less(a[0], a[2]), |g, a| {
    ///     Ok(vec![g.add_scalar(a[0], 1.0)?, g.add(a[1], a[0])?])
    /// })?;
    /// assert_eq!(run_once(&g, &out[1..], &[(n, Tensor::scalar(5i64))])?[0].scalar_i64()?, 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn while_loop(
        &mut self,
        carries: &[ValueId],
        captures: &[ValueId],
        cond: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>,
        body: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Vec<ValueId>> {
        self.build_while(carries, captures, None, cond, body)
    }

    /// [`while_loop`](Self::while_loop) with at most `cap.max_iterations` trips: when the
    /// condition still holds after them, the loop stops with the current carries
    /// ([`IterationCap::stop`], TF's `maximum_iterations`) or fails with
    /// `Error::IterationLimit` ([`IterationCap::error`]). The cap holds everywhere the loop
    /// goes: pfor (the vectorized loop stops each iteration exactly where its own loop
    /// would, with the same error), derivatives and the auto-batching hand-off.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x0 = g.constant(Tensor::scalar(1.0f64));
    /// // halve until below 1e-3, but at most 4 times (TF maximum_iterations)
    /// let out = g.while_loop_with(&[x0], &[], IterationCap::stop(4), |g, a| {
    ///     let eps = g.constant(Tensor::scalar(1e-3f64));
    ///     g.greater(a[0], eps)
    /// }, |g, a| Ok(vec![g.mul_scalar(a[0], 0.5)?]))?;
    /// assert_eq!(run_once(&g, &out, &[])?[0].scalar_f64()?, 0.0625);
    /// # Ok(())
    /// # }
    /// ```
    pub fn while_loop_with(
        &mut self,
        carries: &[ValueId],
        captures: &[ValueId],
        cap: IterationCap,
        cond: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>,
        body: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Vec<ValueId>> {
        self.build_while(carries, captures, Some(cap), cond, body)
    }

    fn build_while(
        &mut self,
        carries: &[ValueId],
        captures: &[ValueId],
        max_iterations: Option<IterationCap>,
        cond: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>,
        body: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Vec<ValueId>> {
        let mut inputs = carries.to_vec();
        inputs.extend_from_slice(captures);
        let types = inputs.iter().map(|a| self.value_type(*a).cloned()).collect::<Result<Vec<_>>>()?;
        let mut cond = self.build_body(Capture::Auto, &types, |g, p| Ok(vec![cond(g, p)?]))?;
        let mut body = self.build_body(Capture::Auto, &types, body)?;
        inputs.extend(self.bind_captures(&mut [&mut cond, &mut body])?);
        let op = ControlOp::While {
            cond: Arc::new(cond.function),
            body: Arc::new(body.function),
            num_carries: carries.len(),
            max_iterations,
        };
        self.add_op_multi(Op::Control(op), &inputs)
    }

    /// Declare a named function's signature (before defining it, for recursion).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = TensorType::new(DType::I64, Shape::scalar());
    /// // fact(n) = n <= 1 ? 1 : n * fact(n - 1): declared first, so the body can call itself
    /// g.declare_function("fact", &[t.clone()], &[t])?;
    /// g.define_function("fact", |g, p| {
    ///     let one = g.constant(Tensor::scalar(1i64));
    ///     let base = g.less_equal(p[0], one)?;
    ///     g.cond(base, &[p[0]], |g, _| Ok(vec![g.constant(Tensor::scalar(1i64))]), |g, a| {
    ///         let m = g.add_scalar(a[0], -1.0)?;
    ///         let r = g.call("fact", &[m])?;
    ///         Ok(vec![g.mul(a[0], r[0])?])
    ///     })
    /// })?;
    /// let n = g.constant(Tensor::scalar(5i64));
    /// let r = g.call("fact", &[n])?;
    /// assert_eq!(run_once(&g, &r, &[])?[0].scalar_i64()?, 120);
    /// # Ok(())
    /// # }
    /// ```
    pub fn declare_function(&mut self, name: &str, params: &[TensorType], results: &[TensorType]) -> Result<()> {
        self.library().declare(name, FunctionSignature { params: params.to_vec(), results: results.to_vec() })
    }

    /// Define a declared function's body. The body captures nothing (a named function may
    /// be called from anywhere): a value of this graph used in it is an error naming it.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// g.declare_function("double", &[t.clone()], &[t])?;
    /// let w = g.constant(Tensor::vec1(&[1.0f64, 1.0]));
    /// // a named function captures nothing: an outer value in its body is an error
    /// assert!(g.define_function("double", |g, p| Ok(vec![g.mul(p[0], w)?])).is_err());
    /// g.define_function("double", |g, p| Ok(vec![g.add(p[0], p[0])?]))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn define_function(
        &mut self,
        name: &str,
        body: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<()> {
        let sig = self.library().signature(name)?;
        let f = self.build_body(Capture::Reject, &sig.params, body)?.function;
        self.library().define(name, f)
    }

    /// Declare and define a (non-recursive) named function in one step. Like
    /// [`Graph::define_function`], the body must receive outer values as parameters.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// g.function("sq", &[t], |g, p| Ok(vec![g.mul(p[0], p[0])?]))?;
    /// let x = g.constant(Tensor::vec1(&[2.0f64, 3.0]));
    /// let y = g.call("sq", &[x])?;
    /// assert_eq!(run_once(&g, &y, &[])?[0].to_f64_vec(), [4.0, 9.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn function(
        &mut self,
        name: &str,
        params: &[TensorType],
        body: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<()> {
        let f = self.build_body(Capture::Reject, params, body)?.function;
        self.library().define(name, f)
    }

    /// Call a named function.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = TensorType::new(DType::F64, Shape::scalar());
    /// g.function("add3", &[t], |g, p| Ok(vec![g.add_scalar(p[0], 3.0)?]))?;
    /// let x = g.constant(Tensor::scalar(1.0f64));
    /// let y = g.call("add3", &[x])?;
    /// assert_eq!(run_once(&g, &y, &[])?[0].scalar_f64()?, 4.0);
    /// assert!(g.call("nope", &[x]).is_err()); // an unknown function: an error naming it
    /// # Ok(())
    /// # }
    /// ```
    pub fn call(&mut self, name: &str, args: &[ValueId]) -> Result<Vec<ValueId>> {
        let signature = self.library().signature(name)?;
        self.add_op_multi(Op::Control(ControlOp::Call { function: name.to_string(), signature }), args)
    }
}
