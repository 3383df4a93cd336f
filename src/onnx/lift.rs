//! Lifting constant-producing subgraphs into parameters ([`Model::lift_constants`]).
//!
//! Some models compute their weights instead of storing them: ONNX's `light` architectures
//! make every weight with a `ConstantOfShape` node. To differentiate w.r.t. such weights they
//! must be values the caller supplies, like initializers. Lifting evaluates, once, every node
//! that does not depend on a model input (`Constant`, `ConstantOfShape`, initializers, and
//! what is computed only from them — exactly the nodes the converter folds, see
//! [`super::convert`]) and drops them from the body; the values the remaining nodes read from
//! them become:
//! - parameters ([`Model::parameters`], in order of first use): float values that the
//!   remaining nodes take as run-time operands (weights, biases, scales);
//! - constants bound on every call: integer / bool values, and float values some remaining
//!   node needs statically (e.g. a `Resize` scale), found by converting the body once with the
//!   parameters as placeholders.
//!
//! Invariants: `call` of a lifted model computes what `call` of the original computes (same
//! nodes, same constant values); an initializer that only lifted nodes read is no longer a
//! parameter; lifting is idempotent.

use super::Model;
use super::convert::{self, Env, const_value};
use super::proto::NodeProto;
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::tensor::Tensor;
use std::collections::{HashMap, HashSet};

/// A lifted model's body: the nodes left to convert and the constants they read.
#[derive(Clone, Debug)]
pub(super) struct Lifted {
    /// Integer / bool / statically needed values, bound as constants on every call.
    pub(super) consts: Vec<(String, Tensor)>,
    /// The nodes that depend on a model input, in graph order.
    pub(super) nodes: Vec<NodeProto>,
}

/// Evaluates the input-independent nodes of `m`; returns the new parameters and body.
pub(super) fn lift(m: &Model) -> Result<(Vec<(String, Tensor)>, Lifted)> {
    // 1. Convert everything once with the inputs as placeholders: the converter folds what
    //    depends on no input into constants.
    let mut g = Graph::new();
    let mut env = m.env();
    m.bind_inputs(&mut g, &mut env);
    for (name, t) in &m.params {
        let c = g.constant(t.clone());
        env.bind(name, c);
    }
    m.bind_constants(&mut g, &mut env);
    let mut kept = Vec::new();
    for node in m.body() {
        convert::run_graph(&mut g, &mut env, std::slice::from_ref(node))?;
        let all_const = node.output.iter().filter(|o| !o.is_empty()).all(|o| is_const(&g, &env, o));
        if !all_const {
            kept.push(node.clone());
        }
    }
    // 2. The constants the kept nodes (and the outputs) read, in order of first use.
    let mut order: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    let reads = kept.iter().flat_map(|n| n.input.iter()).chain(m.outputs.iter());
    for name in reads.filter(|s| !s.is_empty()) {
        if is_const(&g, &env, name) && seen.insert(name.clone()) {
            order.push(name.clone());
        }
    }
    let value = |name: &str| -> Result<Tensor> {
        env.get(&g, name).and_then(|v| {
            const_value(&g, v)
                .ok_or_else(|| Error::InvalidArgument(format!("onnx lift_constants: '{name}' is not a constant")))
        })
    };
    let mut statics: HashSet<String> = HashSet::new();
    for name in &order {
        if !value(name)?.dtype().is_float() || m.outputs.contains(name) {
            statics.insert(name.clone());
        }
    }
    // 3. Convert the kept nodes with the float constants as placeholders; a node that needs
    //    one statically ("must be a constant") gets its float constants as constants instead.
    let mut h = Graph::new();
    let mut env2 = m.env();
    m.bind_inputs(&mut h, &mut env2);
    let mut bound: HashMap<String, ValueId> = HashMap::new();
    for name in &order {
        let t = value(name)?;
        let v = if statics.contains(name) { h.constant(t) } else { h.input(name, t.dtype(), t.shape()) };
        bound.insert(name.clone(), v);
        env2.bind(name, v);
    }
    for node in &kept {
        match convert::run_graph(&mut h, &mut env2, std::slice::from_ref(node)) {
            Ok(()) => {}
            Err(e) if needs_static(&e) => {
                for name in node.input.iter().filter(|s| bound.contains_key(*s)) {
                    if statics.insert(name.clone()) {
                        let c = h.constant(value(name)?);
                        env2.bind(name, c);
                    }
                }
                convert::run_graph(&mut h, &mut env2, std::slice::from_ref(node))?;
            }
            Err(e) => return Err(e),
        }
    }
    let mut params = Vec::new();
    let mut consts = Vec::new();
    for name in order {
        let t = value(&name)?;
        if statics.contains(&name) { consts.push((name, t)) } else { params.push((name, t)) }
    }
    Ok((params, Lifted { consts, nodes: kept }))
}

fn is_const(g: &Graph, env: &Env, name: &str) -> bool {
    env.get(g, name).ok().and_then(|v| const_value(g, v)).is_some()
}

/// The converter's refusal of a run-time operand it takes statically.
fn needs_static(e: &Error) -> bool {
    matches!(e.root(), Error::Unsupported { what, .. } if what.contains("must be a constant"))
}
