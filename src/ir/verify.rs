//! Structural verification, run after every graph pass in tests and debug builds.

use petgraph::visit::EdgeRef;

use super::{Graph, ValueId};
use crate::error::{Error, Result};
use crate::ops::{ControlOp, Op};

impl Graph {
    /// Check the IR invariants: every input is a live value of this graph, edges mirror
    /// inputs exactly, the graph is acyclic, and re-running shape inference gives the stored
    /// output types. Recurses into control-flow functions.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.neg(x)?;
    /// let _ = g.exp(y)?;
    /// g.verify()?; // graphs built through the API always pass; passes call it after rewriting
    /// # Ok(())
    /// # }
    /// ```
    pub fn verify(&self) -> Result<()> {
        for n in self.node_ids() {
            let node = self.node(n)?;
            for (pos, v) in node.inputs.iter().enumerate() {
                self.check_value(*v).map_err(|e| Error::Verify(format!("{n} input {pos}: {e}")))?;
            }
            let mut edges: Vec<(u32, ValueId)> = self
                .g
                .edges_directed(super::nx(n), petgraph::Direction::Incoming)
                .map(|e| (e.weight().dst_pos, ValueId { node: self.id_at(e.source()), slot: e.weight().src_slot }))
                .collect();
            edges.sort();
            let want: Vec<(u32, ValueId)> = node.inputs.iter().enumerate().map(|(i, v)| (i as u32, *v)).collect();
            if edges != want {
                return Err(Error::Verify(format!("{n}: edges {edges:?} do not mirror inputs {want:?}")));
            }
            if !matches!(node.op, Op::Input { .. } | Op::Const { .. }) {
                let tys = node.inputs.iter().map(|v| self.value_type(*v).cloned()).collect::<Result<Vec<_>>>()?;
                let re = node
                    .op
                    .infer(&tys)
                    .map_err(|e| Error::Verify(format!("{n} ({}): re-inference failed: {e}", node.op)))?;
                if re != node.outputs {
                    return Err(Error::Verify(format!(
                        "{n} ({}): stored types {:?} != inferred {:?}",
                        node.op, node.outputs, re
                    )));
                }
            }
            match &node.op {
                Op::Control(ControlOp::Cond { then, else_ }) => {
                    then.graph.verify()?;
                    else_.graph.verify()?;
                }
                Op::Control(ControlOp::While { cond, body, .. }) => {
                    cond.graph.verify()?;
                    body.graph.verify()?;
                }
                Op::Control(ControlOp::For { body, .. }) => body.graph.verify()?,
                _ => {}
            }
        }
        self.topo_order()?;
        Ok(())
    }
}
