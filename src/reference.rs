//! The reference loop: run a body once per iteration and stack the results.
//!
//! This is the correctness oracle for the vectorizer (`run(pfor(body)) == for_loop(body)`)
//! and the "loop" baseline in benchmarks. The body is traced once, in the outer graph,
//! with a scalar i64 loop index; the nodes that depend on the index are extracted into a
//! [`Function`] whose extra parameters are the outer values they capture, and a single
//! `For` node runs that function `n` times.

use std::sync::Arc;

use hashbrown::{HashMap, HashSet};

use crate::error::{Error, Result};
use crate::ir::{Function, Graph, NodeId, ValueId};
use crate::ops::{ControlOp, Op};
use crate::tensor::{DType, Shape, Tensor};

/// The trip count of a loop: static, or a scalar i64 graph value.
#[derive(Clone, Copy, Debug)]
pub enum LoopLen {
    /// Known at build time.
    Static(usize),
    /// A scalar i64 value, known at run time.
    Dynamic(ValueId),
}

impl From<usize> for LoopLen {
    fn from(n: usize) -> LoopLen {
        LoopLen::Static(n)
    }
}
impl From<ValueId> for LoopLen {
    fn from(v: ValueId) -> LoopLen {
        LoopLen::Dynamic(v)
    }
}

impl LoopLen {
    /// The trip count as a graph value (a constant for static n), checked to be an i64 scalar.
    pub fn to_value(self, g: &mut Graph) -> Result<ValueId> {
        match self {
            LoopLen::Static(n) => Ok(g.constant(Tensor::scalar(n as i64))),
            LoopLen::Dynamic(v) => {
                let t = g.value_type(v)?;
                if t.dtype != DType::I64 || t.rank() != 0 {
                    return Err(Error::InvalidArgument(format!("loop length must be an i64 scalar, got {t}")));
                }
                Ok(v)
            }
        }
    }
    /// The static value, if any.
    pub fn static_value(self) -> Option<usize> {
        match self {
            LoopLen::Static(n) => Some(n),
            LoopLen::Dynamic(_) => None,
        }
    }
}

/// A body traced in the outer graph, extracted into a function of `(i, captures...)`.
pub struct ExtractedBody {
    /// The function: params are `[i] ++ captures`, results are the body outputs.
    pub function: Function,
    /// Outer values captured by the body, in parameter order (after `i`).
    pub captures: Vec<ValueId>,
}

/// Extract the nodes between `index` and `outputs` into a function of `(i, captures)`.
/// Outputs that do not depend on `index` are included too (they are computed inside the
/// function from captures, so the result is still one stacked value per output).
pub fn extract_body(g: &Graph, index: ValueId, outputs: &[ValueId]) -> Result<ExtractedBody> {
    g.check_value(index)?;
    // Nodes that depend on the index.
    let mut variant: HashSet<NodeId> = HashSet::new();
    variant.insert(index.node);
    let order = g.topo_order()?;
    for &n in &order {
        let nd = g.node(n)?;
        if nd.inputs.iter().any(|v| variant.contains(&v.node)) {
            variant.insert(n);
        }
    }
    // The part of the body the outputs need: variant ancestors of the outputs.
    let needed: HashSet<NodeId> = g.ancestors(outputs)?.into_iter().filter(|n| variant.contains(n)).collect();
    let mut f = g.new_child();
    let i_param = f.input("i", DType::I64, Shape::scalar());
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    map.insert(index, i_param);
    let mut captures: Vec<ValueId> = Vec::new();
    let mut params = vec![i_param];
    let capture = |v: ValueId,
                   f: &mut Graph,
                   map: &mut HashMap<ValueId, ValueId>,
                   captures: &mut Vec<ValueId>,
                   params: &mut Vec<ValueId>|
     -> Result<ValueId> {
        if let Some(m) = map.get(&v) {
            return Ok(*m);
        }
        let t = g.value_type(v)?.clone();
        let p = f.input(&format!("capture{}", captures.len()), t.dtype, t.shape);
        captures.push(v);
        params.push(p);
        map.insert(v, p);
        Ok(p)
    };
    for &n in &order {
        if !needed.contains(&n) || n == index.node {
            continue;
        }
        let nd = g.node(n)?;
        let mut ins = Vec::with_capacity(nd.inputs.len());
        for v in &nd.inputs {
            ins.push(capture(*v, &mut f, &mut map, &mut captures, &mut params)?);
        }
        let new = f.add_op_multi(nd.op.clone(), &ins).map_err(|e| e.at_node(n, nd.op.to_string()))?;
        for (slot, nv) in new.into_iter().enumerate() {
            map.insert(ValueId { node: n, slot: slot as u32 }, nv);
        }
    }
    let mut results = Vec::with_capacity(outputs.len());
    for o in outputs {
        results.push(capture(*o, &mut f, &mut map, &mut captures, &mut params)?);
    }
    Ok(ExtractedBody { function: Function::from_parts(f, params, results)?, captures })
}

/// Run `body(g, i)` for `i in 0..n` as a loop and stack each output along a new axis 0.
/// The body is traced once in `g` with a scalar i64 placeholder for `i`.
pub fn for_loop(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    let n = n.into();
    let n_val = n.to_value(g)?;
    let i = g.input("__loop_index", DType::I64, Shape::scalar());
    let outs = body(g, i)?;
    let outs = g.capture_all(&outs)?;
    for_loop_from_traced(g, n, n_val, i, &outs)
}

/// Build the `For` node for an already-traced body (shared with pfor's fallback).
pub fn for_loop_from_traced(
    g: &mut Graph,
    n: LoopLen,
    n_val: ValueId,
    i: ValueId,
    outs: &[ValueId],
) -> Result<Vec<ValueId>> {
    let ex = extract_body(g, i, outs)?;
    let mut inputs = vec![n_val];
    inputs.extend_from_slice(&ex.captures);
    let op = ControlOp::For { body: Arc::new(ex.function), static_n: n.static_value() };
    g.add_op_multi(Op::Control(op), &inputs)
}
