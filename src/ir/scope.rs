//! Bodies built inside an enclosing graph, and what a handle that is not this graph's means.
//!
//! `Graph::cond` and `Graph::while_loop` build each branch / body in a child graph with the
//! enclosing graph lent to it (the enclosing graph is moved behind an `Arc` for the
//! duration of the builder and moved back afterwards, also when the builder panics).
//! Reads ([`Graph::node`], [`Graph::value_type`]) see through to the enclosing graphs; an
//! op that stores an enclosing value as an input captures it instead (TF's functional
//! cond/while capture): the first use adds an `Input` placeholder named `capture<k>` to the
//! child, later uses reuse it. When the builder returns, every captured value becomes an
//! extra parameter of each branch (a branch that did not use it gets an unused one) and an
//! extra input of the control op, after its explicit arguments. Nested builders capture
//! through every level (the inner op's extra inputs are captured by the middle graph).
//!
//! A clone of a body under construction does not see the enclosing graph (nothing but
//! the body holds the lent graph, so it can be given back without a copy).
//!
//! Named library functions (`Graph::function`, `define_function`) may be called from
//! anywhere, recursion included, so their bodies capture nothing: an enclosing value there
//! is an error saying to pass it as a parameter. `Function::build` (a plain `&Graph`
//! parent) lends nothing either; its bodies see only their own values.

use std::sync::Arc;

use hashbrown::HashMap;

use super::{Function, Graph, Node, NodeId, ValueId};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::TensorType;

/// What a body may do with an enclosing graph's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Capture {
    /// Capture them (cond branches, while cond and body).
    Auto,
    /// Reject them (named functions: callable from anywhere).
    Reject,
}

/// The enclosing graph lent to a body under construction, and what the body captured.
pub(super) struct Scope {
    enclosing: Arc<Graph>,
    mode: Capture,
    /// Captured enclosing values → their placeholders here, in capture order.
    captures: Vec<(ValueId, ValueId)>,
    index: HashMap<ValueId, ValueId>,
}

/// A body built by [`Graph::build_body`]: the function (params: the declared ones only) and
/// the enclosing values it captured with their placeholders.
pub(crate) struct Body {
    /// The function.
    pub(crate) function: Function,
    captures: Vec<(ValueId, ValueId)>,
}

/// Gives the lent enclosing graph back to its owner when dropped (on panic too).
struct Lend<'a> {
    home: &'a mut Graph,
    graph: Option<Arc<Graph>>,
}

impl Drop for Lend<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.graph.take() {
            // The body's own reference is gone by now, unless the builder moved the body
            // graph somewhere else (`mem::swap`): then it keeps a copy.
            *self.home = Arc::try_unwrap(g).unwrap_or_else(|g| (*g).clone());
        }
    }
}

/// `Input` parameters `arg<i>` of `types`, in order.
pub(super) fn add_params(g: &mut Graph, types: &[TensorType]) -> Vec<ValueId> {
    types.iter().enumerate().map(|(i, t)| g.input(&format!("arg{i}"), t.dtype, t.shape.clone())).collect()
}

impl Graph {
    /// A node of an enclosing graph that this body may capture (see the module doc).
    pub(super) fn outer(&self, id: NodeId) -> Option<&Node> {
        match &self.scope {
            Some(s) if s.mode == Capture::Auto => s.enclosing.find_node(id),
            _ => None,
        }
    }

    /// [`Graph::outer`], or the error for `id`.
    #[cold]
    pub(super) fn outer_node(&self, id: NodeId) -> Result<&Node> {
        self.outer(id).ok_or_else(|| self.unknown(ValueId { node: id, slot: 0 }))
    }

    /// A node of this graph itself, or the error for `id`.
    pub(super) fn own_node(&self, id: NodeId) -> Result<&Node> {
        self.own(id).ok_or_else(|| self.unknown(ValueId { node: id, slot: 0 }))
    }

    /// The error for a handle that is not a value of this graph: where it is from, and
    /// what to do about it.
    pub(super) fn unknown(&self, v: ValueId) -> Error {
        let stamp = v.node.stamp();
        let mut g = self;
        let mut depth = 0;
        let mut named = false;
        loop {
            if depth > 0 && g.own(v.node).is_some() {
                let reason = if named {
                    "it is a value of a graph enclosing this named function's body, and a named function captures \
                     nothing (it may be called from anywhere): declare a parameter for it and pass it as an argument \
                     of `call`"
                } else {
                    "it is a value of the graph enclosing this cond/while builder: ops added here capture it \
                     automatically; elsewhere use `Graph::capture` to get this graph's handle for it"
                };
                return Error::unknown_value(v, reason);
            }
            if g.removed.contains(&stamp) {
                let whose = if depth == 0 { "this graph" } else { "an enclosing graph" };
                let now = if g.contains_slot(v.node.index()) {
                    format!("; slot {} now holds another node", v.node)
                } else {
                    String::new()
                };
                return Error::unknown_value(
                    v,
                    format!(
                        "its node was removed from {whose} (by pfor's simplification, `prune` or another pass; \
                         use the handles the pass returned){now}"
                    ),
                );
            }
            match &g.scope {
                Some(s) => {
                    named |= s.mode == Capture::Reject;
                    g = &s.enclosing;
                    depth += 1;
                }
                None => break,
            }
        }
        Error::unknown_value(
            v,
            "it is a handle of another graph (or of a clone of this graph that added it after the clone was made; \
             a `Function::build` body must receive outer values as parameters)",
        )
    }

    fn contains_slot(&self, i: usize) -> bool {
        self.stamps.get(i).is_some_and(|&s| s != 0)
    }

    /// The handle to use for `v` in this graph: `v` itself if it is a value of this graph;
    /// inside a cond/while builder, for a value of an enclosing graph, the placeholder that
    /// captures it (added on first use; it becomes a parameter of the branch or body and an
    /// input of the control op). Any other handle is an error that names it.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.input("w", DType::F64, Shape::scalar());
    /// let x = g.input("x", DType::F64, Shape::scalar());
    /// let t = g.constant(Tensor::scalar(true));
    /// let r = g.cond(t, &[x], |g, a| {
    ///     let w_in = g.capture(w)?; // the branch's own handle for the outer w
    ///     assert_ne!(w_in, w);
    ///     Ok(vec![g.mul(a[0], w_in)?])
    /// }, |_, a| Ok(vec![a[0]]))?;
    /// let feeds = [(w, Tensor::scalar(3.0f64)), (x, Tensor::scalar(2.0f64))];
    /// assert_eq!(run_once(&g, &r, &feeds)?[0].scalar_f64()?, 6.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn capture(&mut self, v: ValueId) -> Result<ValueId> {
        if self.own(v.node).is_some() {
            return self.check_value(v).map(|_| v);
        }
        let ty = self.value_type(v)?.clone();
        let Some(scope) = self.scope.as_ref() else { return Err(self.unknown(v)) };
        if let Some(&p) = scope.index.get(&v) {
            return Ok(p);
        }
        let k = scope.captures.len();
        let p = self.push_node(Op::Input { name: format!("capture{k}") }, vec![], vec![ty]);
        if let Some(scope) = self.scope.as_mut() {
            scope.captures.push((v, p));
            scope.index.insert(v, p);
        }
        Ok(p)
    }

    /// [`Graph::capture`] of each value (outside builders: each checked, then copied).
    pub(crate) fn capture_all(&mut self, vs: &[ValueId]) -> Result<Vec<ValueId>> {
        if self.scope.is_none() {
            for v in vs {
                self.check_value(*v)?;
            }
        }
        self.capture_read(vs)
    }

    /// [`Graph::capture_all`] of values already read with [`Graph::value_type`] (so only
    /// captures are left to do; outside builders a plain copy).
    pub(super) fn capture_read(&mut self, vs: &[ValueId]) -> Result<Vec<ValueId>> {
        if self.scope.is_none() {
            return Ok(vs.to_vec());
        }
        vs.iter().map(|&v| self.capture(v)).collect()
    }

    /// Build a body in a child graph with this graph lent to it (see the module doc): the
    /// closure receives the child and parameters of `param_types` and returns the results
    /// (enclosing values among them are captured too under [`Capture::Auto`]).
    pub(crate) fn build_body(
        &mut self,
        mode: Capture,
        param_types: &[TensorType],
        body: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    ) -> Result<Body> {
        let library = self.library.clone();
        let lent = Arc::new(std::mem::take(self));
        let lend = Lend { home: self, graph: Some(lent.clone()) };
        let mut child = Graph::with_library(library);
        child.scope = Some(Box::new(Scope { enclosing: lent, mode, captures: Vec::new(), index: HashMap::new() }));
        let params = add_params(&mut child, param_types);
        let results = body(&mut child, &params).and_then(|rs| child.capture_all(&rs));
        // Drop the body's reference to the lent graph first, so it goes back without a copy.
        let captures = child.scope.take().map(|s| s.captures).unwrap_or_default();
        drop(lend);
        let results = results?;
        Ok(Body { function: Function::from_parts(child, params, results)?, captures })
    }

    /// Give every body the union of the enclosing values they captured, as extra parameters
    /// in one order (a body that did not use one gets an unused placeholder), and return
    /// that union: the extra inputs of the control op, after its explicit ones.
    pub(crate) fn bind_captures(&self, bodies: &mut [&mut Body]) -> Result<Vec<ValueId>> {
        let mut all: Vec<ValueId> = Vec::new();
        let mut seen = hashbrown::HashSet::new();
        for b in bodies.iter() {
            all.extend(b.captures.iter().map(|&(v, _)| v).filter(|v| seen.insert(*v)));
        }
        for b in bodies.iter_mut() {
            let own: HashMap<ValueId, ValueId> = b.captures.iter().copied().collect();
            for (k, v) in all.iter().enumerate() {
                let p = match own.get(v) {
                    Some(&p) => p,
                    None => {
                        let t = self.value_type(*v)?;
                        b.function.graph.input(&format!("capture{}", b.captures.len() + k), t.dtype, t.shape.clone())
                    }
                };
                b.function.params.push(p);
            }
        }
        Ok(all)
    }
}
