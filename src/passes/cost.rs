//! The one cost estimate per op: [`op_cost`] says, from an op and its static input and
//! output types, how much one evaluation does ([`Cost`]: flops, bytes moved, the largest
//! tensor touched, whether sizes are dynamic, and its [`Work`] class). Every decision that
//! weighs work reads it:
//! - the worker hand-off (`exec::workers`): how many parallel kernels a plan may issue;
//! - elementwise fusion (`exec::fuse::elementwise`): the per-element work of a fused group,
//!   which decides when its walk splits over threads ([`elementwise_flops`]);
//! - `Auto` control flow (`converters/control.rs`): a branch is small enough for the mask
//!   form by [`graph_cost`] (its node count, and whether it holds control flow).
//!
//! Invariants:
//! - pure: the estimate depends only on the op and the types given, never on values or on
//!   the machine (the callers own their thresholds);
//! - static sizes only: a dynamic dim counts as 0 in `flops`, `bytes` and `largest`, and sets
//!   `dynamic` (callers treat that as "may be large");
//! - a contraction (`matmul`, `batch_matmul`) counts two flops per multiply-add: output
//!   elements times the contracted length, times two; an elementwise op counts
//!   [`elementwise_flops`] per output element; other ops count one per output element;
//!   inputs, constants and control flow count none (control flow's work is its functions').

use crate::ir::Graph;
use crate::ops::{BinaryKind, LinearOp, NnOp, Op, UnaryKind};
use crate::tensor::TensorType;

/// What an op's work is, for the callers' decisions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Work {
    /// Nothing at run time (an input, a constant).
    #[default]
    Free,
    /// A contraction (`matmul`, `batch_matmul`): flops grow faster than the data.
    Contraction,
    /// Control flow: the work is its functions' (cost them on their own).
    Control,
    /// Anything else: work proportional to the data.
    Data,
}

/// One evaluation's cost (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Floating-point (or integer) operations.
    pub flops: u64,
    /// Bytes read and written (the static inputs and outputs).
    pub bytes: u64,
    /// Elements of the largest input or output.
    pub largest: usize,
    /// Some input or output has a dynamic dim (the sizes above are lower bounds).
    pub dynamic: bool,
    /// The work class.
    pub work: Work,
}

impl Cost {
    /// Multiply-adds of a contraction (`flops / 2`).
    ///
    /// ```
    /// use pfor::ops::{BinaryKind, UnaryKind};
    /// use pfor::passes::cost::{binary_flops, elementwise_flops, graph_cost, op_cost, unary_flops};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.input("a", DType::F32, [8, 16]);
    /// let b = g.input("b", DType::F32, [16, 4]);
    /// let c = g.matmul(a, b)?;
    ///
    /// let node = g.node(c.node)?;
    /// let ins = [g.value_type(a)?, g.value_type(b)?];
    /// assert_eq!(op_cost(&node.op, &ins, &node.outputs).multiply_adds(), 8 * 16 * 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn multiply_adds(&self) -> u64 {
        self.flops / 2
    }
}

/// Per-element operations of a unary kind: transcendental kernels cost ~8× an add.
///
/// ```
/// use pfor::ops::{BinaryKind, UnaryKind};
/// use pfor::passes::cost::{binary_flops, elementwise_flops, graph_cost, op_cost, unary_flops};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert!(unary_flops(UnaryKind::Exp) > unary_flops(UnaryKind::Neg)); // transcendental: dearer
/// # Ok(())
/// # }
/// ```
pub fn unary_flops(k: UnaryKind) -> u64 {
    use UnaryKind as U;
    match k {
        U::Neg | U::Abs | U::Square | U::Relu | U::Relu6 | U::Step | U::Sign | U::Floor | U::Ceil | U::Round => 1,
        _ => 8,
    }
}

/// Per-element operations of a binary kind (`pow` and the floor forms ~8× an add).
///
/// ```
/// use pfor::ops::{BinaryKind, UnaryKind};
/// use pfor::passes::cost::{binary_flops, elementwise_flops, graph_cost, op_cost, unary_flops};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert!(binary_flops(BinaryKind::Pow) > binary_flops(BinaryKind::Add));
/// # Ok(())
/// # }
/// ```
pub fn binary_flops(k: BinaryKind) -> u64 {
    match k {
        BinaryKind::Pow | BinaryKind::FloorMod | BinaryKind::FloorDiv => 8,
        _ => 1,
    }
}

/// Per-element operations of an elementwise op (unary, binary, `bias_add`); `None` for
/// other ops.
///
/// ```
/// use pfor::ops::{BinaryKind, UnaryKind};
/// use pfor::passes::cost::{binary_flops, elementwise_flops, graph_cost, op_cost, unary_flops};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert_eq!(elementwise_flops(&Op::Binary(BinaryKind::Add)), Some(binary_flops(BinaryKind::Add)));
/// assert_eq!(elementwise_flops(&Op::Unary(UnaryKind::Exp)), Some(unary_flops(UnaryKind::Exp)));
/// # Ok(())
/// # }
/// ```
pub fn elementwise_flops(op: &Op) -> Option<u64> {
    match op {
        Op::Unary(k) => Some(unary_flops(*k)),
        Op::Binary(k) => Some(binary_flops(*k)),
        Op::Nn(NnOp::BiasAdd) => Some(1),
        _ => None,
    }
}

fn elements(t: &TensorType) -> usize {
    t.shape.num_elements().unwrap_or(0)
}

/// The contracted length of a contraction whose first operand has type `a`.
fn contracted(l: &LinearOp, a: Option<&TensorType>) -> usize {
    a.and_then(|a| a.shape.as_fixed()).map_or(0, |d| {
        let r = d.len();
        let ta = match l {
            LinearOp::MatMul { transpose_a, .. } => *transpose_a,
            LinearOp::BatchMatMul { adj_a, .. } => *adj_a,
        };
        match (r, ta) {
            (0, _) => 0,
            (1, _) => d[0],
            (_, false) => d[r - 1],
            (_, true) => d[r - 2],
        }
    })
}

/// The cost of one evaluation of `op` on inputs of types `ins` with results `outs`.
///
/// ```
/// use pfor::ops::{BinaryKind, UnaryKind};
/// use pfor::passes::cost::{binary_flops, elementwise_flops, graph_cost, op_cost, unary_flops};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let a = g.input("a", DType::F32, [8, 16]);
/// let b = g.input("b", DType::F32, [16, 4]);
/// let c = g.matmul(a, b)?;
///
/// let node = g.node(c.node)?;
/// let cost = op_cost(&node.op, &[g.value_type(a)?, g.value_type(b)?], &node.outputs);
/// assert_eq!(cost.flops, 2 * 8 * 16 * 4);
/// assert_eq!(cost.bytes, 4 * (8 * 16 + 16 * 4 + 8 * 4)); // inputs and output, f32
/// assert!(!cost.dynamic);
/// # Ok(())
/// # }
/// ```
pub fn op_cost(op: &Op, ins: &[&TensorType], outs: &[TensorType]) -> Cost {
    let dynamic = ins.iter().any(|t| !t.shape.is_fixed()) || outs.iter().any(|t| !t.shape.is_fixed());
    let largest = ins.iter().map(|t| elements(t)).chain(outs.iter().map(elements)).max().unwrap_or(0);
    let bytes = ins
        .iter()
        .map(|t| (elements(t), t.dtype))
        .chain(outs.iter().map(|t| (elements(t), t.dtype)))
        .map(|(n, d)| (n as u64).saturating_mul(d.size() as u64))
        .fold(0u64, u64::saturating_add);
    let out_elems = outs.iter().map(elements).fold(0usize, usize::saturating_add);
    let (work, flops) = match op {
        Op::Input { .. } | Op::Const { .. } => (Work::Free, 0),
        Op::Control(_) => (Work::Control, 0),
        Op::Linear(l) => {
            let madds = out_elems.saturating_mul(contracted(l, ins.first().copied()));
            (Work::Contraction, (madds as u64).saturating_mul(2))
        }
        _ => (Work::Data, (out_elems as u64).saturating_mul(elementwise_flops(op).unwrap_or(1))),
    };
    let bytes = if work == Work::Free { 0 } else { bytes };
    Cost { flops, bytes, largest, dynamic, work }
}

/// A graph's cost at its own level (control-flow ops count as nodes, their functions are not
/// entered).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphCost {
    /// Nodes (inputs and constants included).
    pub nodes: usize,
    /// Control-flow nodes among them.
    pub control: usize,
    /// [`Cost::flops`] summed (saturating).
    pub flops: u64,
    /// [`Cost::bytes`] summed (saturating).
    pub bytes: u64,
    /// Some node's types are dynamic.
    pub dynamic: bool,
}

/// [`op_cost`] summed over the nodes of `g`.
///
/// ```
/// use pfor::ops::{BinaryKind, UnaryKind};
/// use pfor::passes::cost::{binary_flops, elementwise_flops, graph_cost, op_cost, unary_flops};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let a = g.input("a", DType::F32, [8, 16]);
/// let b = g.input("b", DType::F32, [16, 4]);
/// let c = g.matmul(a, b)?;
///
/// let total = graph_cost(&g);
/// assert_eq!((total.nodes, total.control), (3, 0)); // two inputs and the matmul
/// assert_eq!(total.flops, 2 * 8 * 16 * 4);
/// # Ok(())
/// # }
/// ```
pub fn graph_cost(g: &Graph) -> GraphCost {
    let mut total = GraphCost::default();
    for n in g.node_ids() {
        let Ok(node) = g.node(n) else { continue };
        let ins: Vec<&TensorType> = node.inputs.iter().filter_map(|v| g.value_type(*v).ok()).collect();
        let c = op_cost(&node.op, &ins, &node.outputs);
        total.nodes += 1;
        total.control += usize::from(c.work == Work::Control);
        total.flops = total.flops.saturating_add(c.flops);
        total.bytes = total.bytes.saturating_add(c.bytes);
        total.dynamic |= c.dynamic;
    }
    total
}
