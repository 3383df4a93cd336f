//! The one pattern-matching toolkit of the passes: the graph passes of this module tree and
//! the plan-level fusions (`exec::fuse`) both match their patterns through it instead of
//! walking edges by hand.
//!
//! A pass sees its program through [`Dataflow`]: nodes with an op, values with a producer, a
//! static type and readers, and "pinned" values (graph outputs, fetched plan slots) that
//! must stay observable. A [`GraphView`] is a [`Graph`] seen this way, with its outputs
//! pinned; the execution plan implements the same trait over its steps and slots.
//!
//! The queries:
//! - [`sole_reader`]: the one node reading a value exactly once, the value not pinned — the
//!   condition for fusing a value away or rewriting its only use;
//! - [`sole_producer`]: "node `n` whose input `i` is made by a node of kind `L` that no one
//!   else reads" — the usual two-node pattern;
//! - [`fixed_dims`], [`is_static`], [`is_identity_perm`]: type and attribute queries;
//! - on graphs: [`const_value`] (a constant's tensor) and [`redirect_uses`] (replace one
//!   value by an equal one everywhere it is read, outputs included).
//!
//! Invariants: queries never change the program; a value's readers are listed once per
//! read (a node reading a value twice is listed twice), so "read exactly once" means one
//! read by one node; [`redirect_uses`] only rewires readers to a value of the same static
//! type (it fails, changing nothing for that reader, otherwise).

use crate::error::Result;
use crate::ir::{Graph, NodeId, ValueId};
use crate::ops::Op;
use crate::tensor::{Tensor, TensorType};

/// A program as a pass sees it: nodes with an op and inputs, values with a producer, a static
/// type and readers (see the module docs).
pub trait Dataflow {
    /// A node (a graph node, a plan step).
    type Node: Copy + Eq;
    /// A value (a graph value, a plan slot).
    type Value: Copy + Eq;
    /// The op node `n` runs; `None` for a node that is gone or already fused (no pattern may
    /// match it).
    fn op(&self, n: Self::Node) -> Option<&Op>;
    /// The values node `n` reads, in input order.
    fn inputs(&self, n: Self::Node) -> Vec<Self::Value>;
    /// The values node `n` produces, in output order.
    fn outputs(&self, n: Self::Node) -> Vec<Self::Value>;
    /// The static type of value `v`.
    fn value_type(&self, v: Self::Value) -> Option<&TensorType>;
    /// The node producing `v`.
    fn producer(&self, v: Self::Value) -> Option<Self::Node>;
    /// The nodes reading `v`, once per read.
    fn readers(&self, v: Self::Value) -> Vec<Self::Node>;
    /// Whether `v` must stay observable (an output, a fetched value).
    fn pinned(&self, v: Self::Value) -> bool;
}

/// The one node reading `v`, when `v` is read exactly once and is not pinned.
///
/// ```
/// use pfor::passes::pattern::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [2]);
/// let y = g.neg(x)?;
/// let z = g.exp(y)?;
/// let view = GraphView { graph: &g, outputs: &[z] };
/// assert_eq!(sole_reader(&view, y), Some(z.node));
/// assert_eq!(sole_reader(&view, z), None); // pinned: an output stays observable
/// # Ok(())
/// # }
/// ```
pub fn sole_reader<D: Dataflow>(d: &D, v: D::Value) -> Option<D::Node> {
    if d.pinned(v) {
        return None;
    }
    match d.readers(v).as_slice() {
        &[r] => Some(r),
        _ => None,
    }
}

/// The producer of input `i` of node `n`, when its op satisfies `kind` and `n` is the sole
/// reader of that value ([`sole_reader`]).
///
/// ```
/// use pfor::passes::pattern::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [2]);
/// let y = g.neg(x)?;
/// let z = g.exp(y)?;
/// let view = GraphView { graph: &g, outputs: &[z] };
/// // the `neg` feeding input 0 of the `exp`, read by nothing else: a fusion candidate
/// assert_eq!(sole_producer(&view, z.node, 0, |op| op.name() == "neg"), Some(y.node));
/// assert_eq!(sole_producer(&view, z.node, 0, |op| op.name() == "tanh"), None);
/// # Ok(())
/// # }
/// ```
pub fn sole_producer<D: Dataflow>(d: &D, n: D::Node, i: usize, kind: impl Fn(&Op) -> bool) -> Option<D::Node> {
    let v = *d.inputs(n).get(i)?;
    let p = d.producer(v)?;
    (d.op(p).is_some_and(kind) && sole_reader(d, v) == Some(n)).then_some(p)
}

/// The dims of `t` when every dim is fixed.
///
/// ```
/// use pfor::passes::pattern::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert_eq!(fixed_dims(&TensorType::new(DType::F32, [2, 3])), Some(vec![2, 3]));
/// assert_eq!(fixed_dims(&TensorType::new(DType::F32, [Dim::dynamic("n")])), None);
/// # Ok(())
/// # }
/// ```
pub fn fixed_dims(t: &TensorType) -> Option<Vec<usize>> {
    t.shape.as_fixed()
}

/// Whether every dim of `t` is fixed.
///
/// ```
/// use pfor::passes::pattern::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert!(is_static(&TensorType::new(DType::I64, Shape::scalar())));
/// assert!(!is_static(&TensorType::new(DType::I64, [Dim::unknown()])));
/// # Ok(())
/// # }
/// ```
pub fn is_static(t: &TensorType) -> bool {
    t.shape.is_fixed()
}

/// Whether `perm` is the identity permutation.
///
/// ```
/// use pfor::passes::pattern::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert!(is_identity_perm(&[0, 1, 2]));
/// assert!(!is_identity_perm(&[1, 0]));
/// # Ok(())
/// # }
/// ```
pub fn is_identity_perm(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

/// A graph seen as [`Dataflow`], with `outputs` pinned.
#[derive(Clone, Copy, Debug)]
pub struct GraphView<'a> {
    /// The graph.
    pub graph: &'a Graph,
    /// Its pinned values.
    pub outputs: &'a [ValueId],
}

impl Dataflow for GraphView<'_> {
    type Node = NodeId;
    type Value = ValueId;
    fn op(&self, n: NodeId) -> Option<&Op> {
        self.graph.find_node(n).map(|nd| &nd.op)
    }
    fn inputs(&self, n: NodeId) -> Vec<ValueId> {
        self.graph.find_node(n).map(|nd| nd.inputs.clone()).unwrap_or_default()
    }
    fn outputs(&self, n: NodeId) -> Vec<ValueId> {
        self.graph.outputs_of(n)
    }
    fn value_type(&self, v: ValueId) -> Option<&TensorType> {
        self.graph.value_type(v).ok()
    }
    fn producer(&self, v: ValueId) -> Option<NodeId> {
        self.graph.contains(v.node).then_some(v.node)
    }
    fn readers(&self, v: ValueId) -> Vec<NodeId> {
        let mut out = Vec::new();
        for c in self.graph.consumers(v.node) {
            if let Some(nd) = self.graph.find_node(c) {
                out.extend(nd.inputs.iter().filter(|x| **x == v).map(|_| c));
            }
        }
        out
    }
    fn pinned(&self, v: ValueId) -> bool {
        self.outputs.contains(&v)
    }
}

/// The tensor of `v` when its node is a constant.
///
/// ```
/// use pfor::passes::pattern::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let c = g.constant(Tensor::scalar(2.0f32));
/// let x = g.input("x", DType::F32, Shape::scalar());
/// assert_eq!(const_value(&g, c), Some(&Tensor::scalar(2.0f32)));
/// assert_eq!(const_value(&g, x), None);
/// # Ok(())
/// # }
/// ```
pub fn const_value(g: &Graph, v: ValueId) -> Option<&Tensor> {
    match &g.find_node(v.node)?.op {
        Op::Const { value } => Some(value),
        _ => None,
    }
}

/// Replace every read of `old` by `new` (same static type): readers are rewired and
/// `outputs` updated. Returns the readers rewired.
///
/// ```
/// use pfor::passes::pattern::*;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let x = g.input("x", DType::F32, [2]);
/// let y = g.identity(x)?;
/// let z = g.exp(y)?;
/// let mut outputs = [z, y];
/// let rewired = redirect_uses(&mut g, y, x, &mut outputs)?; // read x where y was read
/// assert_eq!(rewired, [z.node]);
/// assert_eq!(outputs, [z, x]);
/// assert_eq!(g.node(z.node)?.inputs, [x]);
/// # Ok(())
/// # }
/// ```
pub fn redirect_uses(g: &mut Graph, old: ValueId, new: ValueId, outputs: &mut [ValueId]) -> Result<Vec<NodeId>> {
    let readers = g.consumers(old.node);
    for &c in &readers {
        let ins = g.node(c)?.inputs.clone();
        for (pos, x) in ins.iter().enumerate() {
            if *x == old {
                g.replace_input(c, pos, new)?;
            }
        }
    }
    for o in outputs.iter_mut().filter(|o| **o == old) {
        *o = new;
    }
    Ok(readers)
}
