//! The call graph of a function [`Library`]: which named functions a graph calls, which are
//! reachable from an entry, and whether a function is recursive. The one walk over `Call`
//! nodes that the vectorizer (recursive calls go to the auto-batching hand-off), autodiff
//! (recursive callees have no inlined derivative) and the hand-off's translation (every
//! reachable function becomes a program function) share.
//!
//! Invariants: a graph's calls include those inside its `cond`, `while` and `for` bodies
//! (at any depth), in node-id order with the bodies' calls at their node's place; every
//! walk visits each function once, so it ends on any call graph, cyclic or not; a function
//! named by a call but not defined in the library is an `Error::UnknownFunction` naming it.

use std::sync::Arc;

use hashbrown::HashSet;

use super::{Function, Graph, Library};
use crate::error::Result;
use crate::ops::{ControlOp, Op};

impl Graph {
    /// Names of the library functions this graph calls directly, including inside the bodies
    /// of its control-flow nodes (in node-id order; a function called twice is listed twice).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = TensorType::new(DType::F64, [2]);
    /// g.function("sq", &[t], |g, p| Ok(vec![g.mul(p[0], p[0])?]))?;
    /// let x = g.input("x", DType::F64, [2]);
    /// let y = g.call("sq", &[x])?;
    /// let _ = g.call("sq", &y)?;
    /// assert_eq!(g.direct_calls(), ["sq", "sq"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn direct_calls(&self) -> Vec<String> {
        let mut out = Vec::new();
        collect_calls(self, &mut out);
        out
    }
}

fn collect_calls(g: &Graph, out: &mut Vec<String>) {
    for n in g.node_ids() {
        let Ok(node) = g.node(n) else { continue };
        match &node.op {
            Op::Control(ControlOp::Call { function, .. }) => out.push(function.clone()),
            Op::Control(ControlOp::Cond { then, else_ }) => {
                collect_calls(&then.graph, out);
                collect_calls(&else_.graph, out);
            }
            Op::Control(ControlOp::While { cond, body, .. }) => {
                collect_calls(&cond.graph, out);
                collect_calls(&body.graph, out);
            }
            Op::Control(ControlOp::For { body, .. }) => collect_calls(&body.graph, out),
            _ => {}
        }
    }
}

impl Library {
    /// Every function reachable from `entry` through calls (transitively), each once, in
    /// breadth-first discovery order with `entry` first, with its body.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = TensorType::new(DType::F64, Shape::scalar());
    /// g.function("sq", &[t.clone()], |g, p| Ok(vec![g.mul(p[0], p[0])?]))?;
    /// g.function("quad", &[t], |g, p| {
    ///     let s = g.call("sq", &[p[0]])?;
    ///     g.call("sq", &s)
    /// })?;
    /// let names: Vec<String> = g.library().reachable("quad")?.into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["quad", "sq"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn reachable(&self, entry: &str) -> Result<Vec<(String, Arc<Function>)>> {
        let mut names = vec![entry.to_string()];
        let mut out: Vec<(String, Arc<Function>)> = Vec::new();
        while let Some(name) = names.get(out.len()).cloned() {
            let f = self.get(&name)?;
            for c in f.graph.direct_calls() {
                if !names.contains(&c) {
                    names.push(c);
                }
            }
            out.push((name, f));
        }
        Ok(out)
    }

    /// `Some(caller)` if `name` can reach itself through calls, where `caller` is the
    /// function whose call closes the cycle (`name` itself for direct recursion); `None`
    /// if it cannot (depth-first, callees in call order).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = TensorType::new(DType::I64, Shape::scalar());
    /// g.declare_function("f", &[t.clone()], &[t.clone()])?;
    /// g.define_function("f", |g, p| g.call("f", &[p[0]]))?; // f calls itself
    /// g.function("h", &[t], |g, p| Ok(vec![g.neg(p[0])?]))?;
    /// assert_eq!(g.library().recursion_via("f")?, Some("f".to_string()));
    /// assert_eq!(g.library().recursion_via("h")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn recursion_via(&self, name: &str) -> Result<Option<String>> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut stack = vec![name.to_string()];
        while let Some(fname) = stack.pop() {
            for c in self.get(&fname)?.graph.direct_calls() {
                if c == name {
                    return Ok(Some(fname));
                }
                if seen.insert(c.clone()) {
                    stack.push(c);
                }
            }
        }
        Ok(None)
    }
}
