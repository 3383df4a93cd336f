//! Graph editing for passes: rewiring an input, rewriting a node in place, removing nodes
//! (in bulk, or every node nothing kept depends on). Each edit re-checks types and leaves the
//! graph unchanged when it fails; rewiring may create a cycle, which `verify` detects.

use petgraph::visit::EdgeRef;

use super::{Edge, Graph, NodeId, ValueId, nx};
use crate::error::{Error, Result};
use crate::ops::Op;

impl Graph {
    /// Replace input `pos` of `node` with `v` (for graph passes). Types are re-inferred;
    /// on error nothing changes. The result may create a cycle; `verify` detects that.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let w = g.input("w", DType::F32, [2]);
    /// let y = g.neg(x)?;
    /// g.replace_input(y.node, 0, w)?; // y = -w now
    /// let r = run_once(&g, &[y], &[(w, Tensor::vec1(&[1.0f32, 2.0]))])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [-1.0, -2.0]);
    /// let v = g.input("v", DType::F32, [3]);
    /// assert!(g.replace_input(y.node, 0, v).is_err()); // would change y's type
    /// # Ok(())
    /// # }
    /// ```
    pub fn replace_input(&mut self, node: NodeId, pos: usize, v: ValueId) -> Result<()> {
        let mut nd = self.own_node(node)?.clone();
        if pos >= nd.inputs.len() {
            return Err(Error::InvalidArgument(format!("{node} has no input {pos}")));
        }
        nd.inputs[pos] = v;
        let tys = nd.inputs.iter().map(|&x| self.value_type(x).cloned()).collect::<Result<Vec<_>>>()?;
        let outs = nd.op.infer(&tys).map_err(|e| e.at_node(node, nd.op.to_string()))?;
        if outs != nd.outputs {
            return Err(Error::InvalidArgument(format!("replace_input on {node} would change its output types")));
        }
        let v = self.capture(v)?;
        let edge = self
            .g
            .edges_directed(nx(node), petgraph::Direction::Incoming)
            .find(|e| e.weight().dst_pos as usize == pos)
            .map(|e| e.id());
        if let Some(e) = edge {
            self.g.remove_edge(e);
        }
        self.g.add_edge(nx(v.node), nx(node), Edge { src_slot: v.slot, dst_pos: pos as u32 });
        self.g[nx(node)].inputs[pos] = v;
        Ok(())
    }

    /// Replace a node's op and inputs in place (for graph passes). The new op must infer
    /// exactly the node's current output types, so every consumer stays valid; on error
    /// nothing changes. New inputs may create a cycle; `verify` detects that.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// use pfor::ops::UnaryKind;
    ///
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, [1]);
    /// let y = g.neg(x)?;
    /// g.rewrite_node(y.node, Op::Unary(UnaryKind::Exp), &[x])?; // y = exp(x) now
    /// let r = run_once(&g, &[y], &[(x, Tensor::vec1(&[0.0f64]))])?;
    /// assert_eq!(r[0].to_vec::<f64>()?, [1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rewrite_node(&mut self, node: NodeId, op: Op, inputs: &[ValueId]) -> Result<()> {
        let old_outputs = &self.own_node(node)?.outputs;
        let tys = inputs.iter().map(|&x| self.value_type(x).cloned()).collect::<Result<Vec<_>>>()?;
        let outs = op.infer(&tys).map_err(|e| e.at_node(node, op.to_string()))?;
        if outs != *old_outputs {
            return Err(Error::InvalidArgument(format!("rewrite_node on {node} ({op}) would change its output types")));
        }
        let inputs = &self.capture_read(inputs)?[..];
        // Only the edges of changed positions move (removing an edge walks its source's
        // edge list, which is long for widely shared values such as weights).
        let old_inputs = self.own_node(node)?.inputs.clone();
        let same_arity = old_inputs.len() == inputs.len();
        let stale: Vec<_> = self
            .g
            .edges_directed(nx(node), petgraph::Direction::Incoming)
            .filter(|e| !same_arity || old_inputs[e.weight().dst_pos as usize] != inputs[e.weight().dst_pos as usize])
            .map(|e| e.id())
            .collect();
        for e in stale {
            self.g.remove_edge(e);
        }
        for (pos, v) in inputs.iter().enumerate() {
            if !same_arity || old_inputs[pos] != *v {
                self.g.add_edge(nx(v.node), nx(node), Edge { src_slot: v.slot, dst_pos: pos as u32 });
            }
        }
        let nd = &mut self.g[nx(node)];
        nd.op = op;
        nd.inputs = inputs.to_vec();
        Ok(())
    }

    /// Remove a set of nodes at once (for graph passes), in time linear in the graph's size:
    /// removing nodes one by one costs, per edge, a walk of its source's edge list, which is
    /// quadratic for a value read by many removed nodes. Surviving nodes keep their ids.
    /// Errors, changing nothing, if a node is missing or a surviving node reads a removed one.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.neg(x)?;
    /// let z = g.exp(y)?;
    /// let n = g.num_nodes();
    /// // y cannot go while z reads it; both together can
    /// assert!(g.remove_nodes(&[y.node].into_iter().collect()).is_err());
    /// g.remove_nodes(&[y.node, z.node].into_iter().collect())?;
    /// assert_eq!(g.num_nodes(), n - 2);
    /// assert!(g.value_type(z).is_err()); // a removed node's handle is an error, never another node
    /// # Ok(())
    /// # }
    /// ```
    pub fn remove_nodes(&mut self, dead: &hashbrown::HashSet<NodeId>) -> Result<()> {
        for &n in dead {
            self.own_node(n)?;
            if let Some(c) = self.consumers(n).into_iter().find(|c| !dead.contains(c)) {
                return Err(Error::InvalidArgument(format!("cannot remove {n}: {c} reads it")));
            }
        }
        for &n in dead {
            self.stamps[n.index()] = 0;
            self.removed.push(n.stamp());
        }
        let g = std::mem::take(&mut self.g);
        self.g = g.filter_map_owned(|i, nd| (self.stamps[i.index()] != 0).then_some(nd), |_, e| Some(e));
        Ok(())
    }

    /// Remove nodes that no value in `keep` depends on and that have no side effects.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.neg(x)?;
    /// let _unused = g.exp(x)?;
    /// assert_eq!(g.prune(&[y])?, 1); // the exp; inputs stay
    /// g.verify()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn prune(&mut self, keep: &[ValueId]) -> Result<usize> {
        let live: hashbrown::HashSet<NodeId> = self.ancestors(keep)?.into_iter().collect();
        let dead: Vec<NodeId> = self
            .node_ids()
            .into_iter()
            .filter(|n| !live.contains(n) && !self.g[nx(*n)].op.has_side_effects())
            .filter(|n| !matches!(self.g[nx(*n)].op, Op::Input { .. }))
            .collect();
        // Only remove nodes none of whose consumers survive.
        let mut removed = 0;
        for n in dead.into_iter().rev() {
            if self.consumers(n).is_empty() {
                self.remove_slot(n);
                removed += 1;
            }
        }
        Ok(removed)
    }
}
