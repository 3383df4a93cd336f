//! The crate's one error type.
//!
//! Every public function returns [`Result`]. Errors raised while adding or running a node
//! are wrapped in [`Error::AtNode`], which names the node and its op; [`Error::root`]
//! unwraps the context to the underlying cause so tests and callers can match on it.

use thiserror::Error as ThisError;

use crate::ir::NodeId;
use crate::tensor::{DType, TensorType};

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// All errors of the crate.
#[derive(Debug, Clone, ThisError)]
#[non_exhaustive]
pub enum Error {
    /// Context: the error happened at this node (op name included).
    #[error("node {node} ({op}): {source}")]
    AtNode {
        /// The node.
        node: NodeId,
        /// Its op, printed.
        op: String,
        /// The cause.
        source: Box<Error>,
    },
    /// Incompatible shapes.
    #[error("{op}: shape error: {msg}")]
    Shape {
        /// Op name.
        op: String,
        /// What is wrong, naming the shapes.
        msg: String,
    },
    /// Wrong dtype.
    #[error("{op}: expected dtype {expected}, got {got}")]
    DType {
        /// Op name.
        op: String,
        /// What was expected (e.g. "float", "f32", "same as input 0").
        expected: String,
        /// What was given.
        got: DType,
    },
    /// Wrong number of inputs.
    #[error("{op}: expected {expected} inputs, got {got}")]
    Arity {
        /// Op name.
        op: String,
        /// Expected count, as text ("2", "at least 1").
        expected: String,
        /// Given count.
        got: usize,
    },
    /// Axis out of range.
    #[error("{op}: axis {axis} out of range for rank {rank}")]
    Axis {
        /// Op name.
        op: String,
        /// The axis given.
        axis: i64,
        /// The rank of the operand.
        rank: usize,
    },
    /// An index (gather, scatter, slice...) outside its bound.
    #[error("{op}: index {index} out of range [0, {bound})")]
    IndexOutOfRange {
        /// Op name.
        op: String,
        /// The index.
        index: i64,
        /// The exclusive bound.
        bound: usize,
    },
    /// A value or node handle that does not name a value of this graph: its node was
    /// removed, it is another graph's, or it is an enclosing graph's value used where it
    /// cannot be captured (the reason says which, and what to do).
    #[error("unknown value {value}: {reason}")]
    UnknownValue {
        /// The handle, printed.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A feed for a value that is not an input of the graph.
    #[error("feed for {value}, which is not a graph input")]
    UnknownFeed {
        /// The handle, printed.
        value: String,
    },
    /// An input needed by the fetches that was not fed.
    #[error("input '{name}' ({value}) is needed but was not fed")]
    MissingFeed {
        /// Input name.
        name: String,
        /// The handle, printed.
        value: String,
    },
    /// A feed whose dtype or shape does not match the input's declared type.
    #[error("feed for input '{name}': expected {expected}, got {got_dtype}{got_shape:?}")]
    FeedType {
        /// Input name.
        name: String,
        /// Declared type.
        expected: Box<TensorType>,
        /// Fed dtype.
        got_dtype: DType,
        /// Fed shape.
        got_shape: Vec<usize>,
    },
    /// A kernel produced a value that contradicts its inferred static type, or a runtime
    /// dim differs from what the graph promised.
    #[error("{op}: runtime type mismatch: expected {expected}, got {got_dtype}{got_shape:?}")]
    RuntimeType {
        /// Op name.
        op: String,
        /// Inferred type.
        expected: Box<TensorType>,
        /// Actual dtype.
        got_dtype: DType,
        /// Actual shape.
        got_shape: Vec<usize>,
    },
    /// The graph has a cycle through this node.
    #[error("cycle through node {node}")]
    Cycle {
        /// A node on the cycle.
        node: NodeId,
    },
    /// Structural inconsistency found by `Graph::verify`.
    #[error("verify: {0}")]
    Verify(String),
    /// Function calls nested deeper than the configured limit.
    #[error("recursion limit {limit} exceeded calling function '{function}'")]
    RecursionLimit {
        /// The function being called.
        function: String,
        /// The limit.
        limit: usize,
    },
    /// Recursion would exhaust the thread's native stack before reaching the configured
    /// depth limit (see `exec::limits`): lower the limit or run on a thread with a larger
    /// stack.
    #[error(
        "stack exhausted calling '{function}' at depth {depth}: {used} bytes of native stack used so far, \
         {remaining} left, {reserve} kept in reserve; lower the depth limit or run on a thread with a larger stack"
    )]
    StackExhausted {
        /// The function being called.
        function: String,
        /// The call depth reached.
        depth: usize,
        /// Native stack bytes the run has used so far (from where the guard first looked).
        used: usize,
        /// Native stack bytes left on the thread.
        remaining: usize,
        /// The reserve the guard keeps free (kernels and one more level).
        reserve: usize,
    },
    /// A loop ran into its iteration cap (`IterationCap` with `OnLimit::Error`, the session
    /// default cap, or the auto-batching interpreters' per-activation cap).
    #[error("{what}: iteration limit {limit} reached and the loop condition still holds")]
    IterationLimit {
        /// The loop (op or function) that hit the cap.
        what: String,
        /// The cap.
        limit: u64,
    },
    /// A run passed its deadline (`RunOptions::deadline`, `ExecConfig::deadline`).
    #[error("deadline exceeded {at}")]
    DeadlineExceeded {
        /// Where the run stopped.
        at: String,
    },
    /// A run was cancelled through its `CancelToken`.
    #[error("run cancelled {at}")]
    Cancelled {
        /// Where the run stopped.
        at: String,
    },
    /// A `Call` of a function that is not in the library (or declared but not defined).
    #[error("unknown function '{name}'")]
    UnknownFunction {
        /// The name.
        name: String,
    },
    /// An unknown variable.
    #[error("unknown variable '{name}'")]
    UnknownVariable {
        /// The name.
        name: String,
    },
    /// No pfor converter for this op (and fallback disabled).
    #[error("no converter for op {op} at node {node}: {reason}")]
    NoConverter {
        /// Op name.
        op: String,
        /// The node.
        node: NodeId,
        /// Why the converter could not handle it.
        reason: String,
    },
    /// An operation is not supported for these arguments (e.g. a custom op without a vjp).
    #[error("{op}: unsupported: {what}")]
    Unsupported {
        /// Op name.
        op: String,
        /// What is unsupported.
        what: String,
    },
    /// Numerical failure (singular matrix, not positive definite...).
    #[error("{op}: {msg}")]
    Numerical {
        /// Op name.
        op: String,
        /// What happened.
        msg: String,
    },
    /// A bad argument to a public function.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A serialized graph or function (`ir::serialize`) that cannot be read: bad magic, a
    /// format version newer than this build's, truncated or malformed bytes, or a graph that
    /// fails validation. `at` is the byte offset where reading stopped.
    #[error("serialized graph, byte {at}: {msg}")]
    Format {
        /// Byte offset in the input.
        at: usize,
        /// What is wrong.
        msg: String,
    },
    /// A tensor too large to allocate: over the session's budget
    /// ([`ExecOptions::max_tensor_bytes`](crate::ExecOptions::max_tensor_bytes)), or refused
    /// by the allocator. Raised before anything of that size is written; inside a run it is
    /// wrapped in [`Error::AtNode`] naming the node.
    #[error("{op}: out of memory: a tensor of {bytes} bytes {}", match limit {
        Some(l) => format!("exceeds the budget of {l} bytes"),
        None => "could not be allocated".to_string(),
    })]
    OutOfMemory {
        /// Op (or constructor) that needed the memory.
        op: String,
        /// Bytes requested.
        bytes: usize,
        /// The budget it exceeds; `None` when the allocator refused.
        limit: Option<usize>,
    },
    /// A data source or sink failed: I/O, a malformed file, a column of a type or layout that
    /// has no tensor form (nulls, an unsupported element type).
    #[error("{op}: data error: {msg}")]
    Data {
        /// The reader, writer or conversion.
        op: String,
        /// What happened, naming the file, column or row.
        msg: String,
    },
    /// Context: a data pipeline failed on this record (its 0-based position in the source).
    #[error("record {index}: {source}")]
    AtRecord {
        /// The record's position in the source.
        index: usize,
        /// The cause.
        source: Box<Error>,
    },
}

impl Error {
    /// The underlying cause, with node context removed.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let i = g.constant(Tensor::scalar(5i64));
    /// let xi = g.gather(x, i, 0)?;
    /// let e = run_once(&g, &[xi], &[(x, Tensor::zeros(DType::F32, &[3])?)]).unwrap_err();
    /// assert!(matches!(e, Error::AtNode { .. }));               // where it failed ...
    /// assert!(matches!(e.root(), Error::IndexOutOfRange { .. })); // ... and why
    /// # Ok(())
    /// # }
    /// ```
    pub fn root(&self) -> &Error {
        match self {
            Error::AtNode { source, .. } | Error::AtRecord { source, .. } => source.root(),
            e => e,
        }
    }
    /// Wrap with node context (idempotent: an error already at a node keeps the innermost).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let e = Error::shape("my_op", "bad").at_node(x.node, "my_op");
    /// assert!(e.to_string().starts_with("node %"), "{e}");
    /// // idempotent: the innermost node is kept
    /// assert_eq!(e.clone().at_node(x.node, "outer").to_string(), e.to_string());
    /// # Ok(())
    /// # }
    /// ```
    pub fn at_node(self, node: NodeId, op: impl Into<String>) -> Error {
        match self {
            e @ Error::AtNode { .. } => e,
            e => Error::AtNode { node, op: op.into(), source: Box::new(e) },
        }
    }
    /// Shorthand for an unknown value handle.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let e = Error::unknown_value(x, "removed by a pass");
    /// assert!(e.to_string().contains("removed by a pass"), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn unknown_value(v: crate::ir::ValueId, reason: impl Into<String>) -> Error {
        Error::UnknownValue { value: v.to_string(), reason: reason.into() }
    }
    /// Shorthand for a shape error.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let e = Error::shape("my_op", "rank 2 expected, got [3]");
    /// assert!(e.to_string().contains("my_op") && e.to_string().contains("[3]"), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn shape(op: &str, msg: impl Into<String>) -> Error {
        Error::Shape { op: op.into(), msg: msg.into() }
    }
    /// Shorthand for a dtype error.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let e = Error::dtype("my_op", "a float", DType::I64);
    /// assert!(e.to_string().contains("i64"), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn dtype(op: &str, expected: impl Into<String>, got: DType) -> Error {
        Error::DType { op: op.into(), expected: expected.into(), got }
    }
    /// Shorthand for an arity error.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let e = Error::arity("my_op", "2 inputs", 3);
    /// assert!(e.to_string().contains("my_op"), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn arity(op: &str, expected: impl Into<String>, got: usize) -> Error {
        Error::Arity { op: op.into(), expected: expected.into(), got }
    }
    /// Shorthand for an unsupported error.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let e = Error::unsupported("onnx", "opset 99");
    /// assert!(e.to_string().contains("opset 99"), "{e}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn unsupported(op: &str, what: impl Into<String>) -> Error {
        Error::Unsupported { op: op.into(), what: what.into() }
    }
}
