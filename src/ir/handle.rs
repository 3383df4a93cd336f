//! Node and value handles that know which node they name.
//!
//! A handle is a node slot index (petgraph's, reused after a removal) plus the node's
//! *stamp*: a number drawn from one process-wide monotonic counter when the node is created,
//! so no two nodes of any graphs ever share one. A [`Graph`](super::Graph) keeps the stamp
//! of the live node in each slot and every lookup compares it, so a handle from another
//! graph, a handle to a removed node whose slot was reused, or a handle of a branch
//! builder's enclosing graph is an error naming the handle — never another node's value.
//!
//! Invariants:
//! - stamps are never 0 (0 marks a vacant slot) and never reused; within one graph they
//!   increase in insertion order, so they double as creation times ([`Graph::mark`](super::Graph::mark));
//! - a graph clone keeps its nodes' stamps (handles made before the clone are valid in
//!   both); nodes added to either afterwards get fresh stamps, foreign to the other;
//! - handles stay 16 bytes (`Copy`, hashed by stamp and slot: the stamp alone names the node).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// The next stamp to hand out (process-wide, so stamps are unique across all graphs).
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

/// A fresh stamp, larger than every stamp handed out before.
pub(super) fn fresh_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// A stamp no earlier node has and no later node is below.
pub(super) fn stamp_clock() -> u64 {
    NEXT_STAMP.load(Ordering::Relaxed)
}

/// A node handle: its slot in the graph and its stamp (see the module doc). Ordered by
/// slot, then stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeId {
    idx: u32,
    // Two halves keep the handle 4-byte aligned (a `ValueId` is then 16 bytes, not 24).
    stamp_hi: u32,
    stamp_lo: u32,
}

impl NodeId {
    #[inline]
    pub(super) fn new(idx: usize, stamp: u64) -> NodeId {
        NodeId { idx: idx as u32, stamp_hi: (stamp >> 32) as u32, stamp_lo: stamp as u32 }
    }

    /// The numeric slot index (what `%n` prints). Slots of removed nodes are reused, so
    /// only the whole handle names a node.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// assert_eq!(format!("%{}", x.node.index()), "%0"); // the index printed in dumps and errors
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn index(self) -> usize {
        self.idx as usize
    }

    /// The node's stamp: unique across every node of every graph of this process.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let (mut g, mut h) = (Graph::new(), Graph::new());
    /// let (x, y) = (g.input("x", DType::F32, [2]), h.input("y", DType::F32, [2]));
    /// assert_eq!(x.node.index(), y.node.index()); // the same slot in two graphs
    /// assert_ne!(x.node.stamp(), y.node.stamp()); // but different nodes
    /// assert!(g.neg(y).is_err()); // y is not a value of g
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn stamp(self) -> u64 {
        (u64::from(self.stamp_hi) << 32) | u64::from(self.stamp_lo)
    }
}

impl Ord for NodeId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.idx, self.stamp()).cmp(&(other.idx, other.stamp()))
    }
}

impl PartialOrd for NodeId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for NodeId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.stamp());
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.idx)
    }
}

/// A value handle: output `slot` of `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ValueId {
    /// Producing node.
    pub node: NodeId,
    /// Output index.
    pub slot: u32,
}

impl Hash for ValueId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // One word: stamps stay far below 2^40 and slots below 2^24 in practice (and a
        // collision would only cost a probe).
        state.write_u64(self.node.stamp() ^ (u64::from(self.slot) << 40));
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.slot == 0 { write!(f, "{}", self.node) } else { write!(f, "{}:{}", self.node, self.slot) }
    }
}
