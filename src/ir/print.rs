//! Human-readable dumps: `Display` (one line per node, functions indented) and Graphviz.

use std::fmt::{self, Write as _};

use super::Graph;
use crate::ops::{ControlOp, Op};

impl Graph {
    fn write_text(&self, f: &mut dyn fmt::Write, indent: usize) -> fmt::Result {
        let pad = " ".repeat(indent);
        for n in self.node_ids() {
            let node = match self.node(n) {
                Ok(nd) => nd,
                Err(_) => continue,
            };
            let outs: Vec<String> = node.outputs.iter().map(|t| t.to_string()).collect();
            let ins: Vec<String> = node.inputs.iter().map(|v| v.to_string()).collect();
            writeln!(f, "{pad}{n} = {}({}) : {}", node.op, ins.join(", "), outs.join(", "))?;
            let subs: Vec<(&str, &super::Function)> = match &node.op {
                Op::Control(ControlOp::Cond { then, else_ }) => vec![("then", then), ("else", else_)],
                Op::Control(ControlOp::While { cond, body, .. }) => vec![("cond", cond), ("body", body)],
                Op::Control(ControlOp::For { body, .. }) => vec![("body", body)],
                _ => vec![],
            };
            for (label, func) in subs {
                let ps: Vec<String> = func.params.iter().map(|p| p.to_string()).collect();
                let rs: Vec<String> = func.results.iter().map(|p| p.to_string()).collect();
                writeln!(f, "{pad}  {label}({}) -> ({}) {{", ps.join(", "), rs.join(", "))?;
                func.graph.write_text(f, indent + 4)?;
                writeln!(f, "{pad}  }}")?;
            }
        }
        Ok(())
    }

    /// Graphviz `dot` text of the top-level graph (functions shown as op labels).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let _y = g.tanh(x)?;
    /// let dot = g.to_dot(); // for `dot -Tsvg`
    /// assert!(dot.starts_with("digraph pfor {") && dot.contains("tanh"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_dot(&self) -> String {
        let mut s = String::from("digraph pfor {\n  node [shape=box, fontname=monospace];\n");
        for n in self.node_ids() {
            if let Ok(node) = self.node(n) {
                let types: Vec<String> = node.outputs.iter().map(|t| t.to_string()).collect();
                let label = format!("{n} {}\\n{}", node.op, types.join(", ")).replace('"', "\\\"");
                let _ = writeln!(s, "  n{} [label=\"{label}\"];", n.index());
                for (pos, v) in node.inputs.iter().enumerate() {
                    let _ = writeln!(s, "  n{} -> n{} [label=\"{}:{pos}\"];", v.node.index(), n.index(), v.slot);
                }
            }
        }
        s.push_str("}\n");
        s
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_text(f, 0)
    }
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Graph({} nodes)\n{self}", self.num_nodes())
    }
}
