//! The `dead` pass: remove the region nodes that nothing live reads.
//!
//! Invariants: a node is removed only when it is in the region, is no output's node, no graph
//! input, has no side effects and no randomness ([`Op::has_side_effects`],
//! [`Op::is_stateful`]), and every node reading it is removed too; older nodes are never
//! removed. The walk visits the region newest first (consumers before producers), lists
//! each node's consumers once and then counts them down, so it is linear in the edges
//! looked at (even for a value read by thousands of nodes).

use hashbrown::{HashMap, HashSet};

use super::{Pass, PassCtx};
use crate::error::Result;
use crate::ir::{Graph, NodeId};
use crate::ops::Op;

/// The `dead` pass (see the module docs).
pub(super) struct Dead;

impl Pass for Dead {
    fn name(&self) -> &str {
        "dead"
    }

    fn run(&self, g: &mut Graph, cx: &mut PassCtx) -> Result<()> {
        let keep: HashSet<NodeId> = cx.outputs.iter().map(|o| o.node).collect();
        let region = cx.region(g);
        let dead = dead_set(g, region.into_iter().rev(), &keep, cx)?;
        cx.report.removed += dead.len();
        g.remove_nodes(&dead)
    }
}

/// The removable region nodes nothing live reads, starting from `candidates`: a candidate
/// is dead when it is removable and all its consumers are dead; a node found dead makes its
/// producers candidates again.
fn dead_set(
    g: &Graph,
    candidates: impl Iterator<Item = NodeId>,
    keep: &HashSet<NodeId>,
    cx: &PassCtx,
) -> Result<HashSet<NodeId>> {
    let mut dead: HashSet<NodeId> = HashSet::new();
    // Consumers not (yet) dead, per node looked at.
    let mut live_consumers: HashMap<NodeId, usize> = HashMap::new();
    let mut work: Vec<NodeId> = candidates.collect();
    // Pop in the given order first, then what gets re-queued.
    work.reverse();
    while let Some(n) = work.pop() {
        if dead.contains(&n) || !cx.in_region(g, n) || !removable(g, n, keep) {
            continue;
        }
        let left =
            *live_consumers.entry(n).or_insert_with(|| g.consumers(n).iter().filter(|c| !dead.contains(*c)).count());
        if left > 0 {
            continue;
        }
        dead.insert(n);
        let mut producers: Vec<NodeId> = g.node(n)?.inputs.iter().map(|v| v.node).collect();
        producers.sort_unstable();
        producers.dedup();
        for p in producers {
            if let Some(c) = live_consumers.get_mut(&p) {
                *c = c.saturating_sub(1);
            }
            work.push(p);
        }
    }
    Ok(dead)
}

/// Whether node `n` may be removed once nothing reads it: it exists, is no output, no
/// graph input, and has no side effects or randomness.
fn removable(g: &Graph, n: NodeId, keep: &HashSet<NodeId>) -> bool {
    let Some(node) = g.find_node(n) else { return false };
    let op = &node.op;
    !(op.has_side_effects() || op.is_stateful() || matches!(op, Op::Input { .. }) || keep.contains(&n))
}
