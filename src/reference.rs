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
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let n = LoopLen::Static(4).to_value(&mut g)?; // a constant scalar i64
    /// assert_eq!(run_once(&g, &[n], &[])?[0].scalar_i64()?, 4);
    /// let f = g.input("f", DType::F32, Shape::scalar());
    /// assert!(LoopLen::Dynamic(f).to_value(&mut g).is_err()); // not an i64 scalar
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// let mut g = Graph::new();
    /// let n = g.input("n", DType::I64, Shape::scalar());
    /// assert_eq!(LoopLen::from(8).static_value(), Some(8));
    /// assert_eq!(LoopLen::from(n).static_value(), None); // known when the graph runs
    /// ```
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
///
/// ```
/// use pfor::prelude::*;
/// use pfor::reference::extract_body;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let w = g.constant(Tensor::randn(&[3], 0)?);
/// let i = g.input("i", DType::I64, Shape::scalar());
/// let fi = g.cast(i, DType::F32)?;
/// let y = g.mul(w, fi)?; // depends on i: extracted, with w captured
/// let ex = extract_body(&g, i, &[y])?;
/// assert_eq!(ex.captures, [w]);
/// assert_eq!(ex.function.params().len(), 2); // (i, w)
/// # Ok(())
/// # }
/// ```
pub fn extract_body(g: &Graph, index: ValueId, outputs: &[ValueId]) -> Result<ExtractedBody> {
    let variant = index_dependent(g, index)?;
    let order = g.topo_order()?;
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

/// The nodes of `g` that depend on `index` (the index's own node included): the part of a
/// traced body that runs once per iteration.
fn index_dependent(g: &Graph, index: ValueId) -> Result<HashSet<NodeId>> {
    g.check_value(index)?;
    let mut variant: HashSet<NodeId> = HashSet::new();
    variant.insert(index.node);
    for n in g.topo_order()? {
        if g.node(n)?.inputs.iter().any(|v| variant.contains(&v.node)) {
            variant.insert(n);
        }
    }
    Ok(variant)
}

/// Run `body(g, i)` for `i in 0..n` as a loop and stack each output along a new axis 0.
/// The body is traced once in `g` with a scalar i64 placeholder for `i`.
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let xs = g.constant(Tensor::from_vec(&[3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
/// let rows = for_loop(&mut g, 3, |g, i| {
///     let x = g.gather(xs, i, 0)?; // row i
///     Ok(vec![g.sum_all(x)?])
/// })?;
/// assert_eq!(run_once(&g, &rows, &[])?[0].to_vec::<f32>()?, [3.0, 7.0, 11.0]);
/// # Ok(())
/// # }
/// ```
pub fn for_loop(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    Ok(for_loop_outputs(g, n, &[], body)?.into_iter().map(|(v, _)| v).collect())
}

/// [`for_loop`] where output `k` with `unbatched[k]` (missing entries: `false`) is returned
/// as it is, unstacked, when it does not depend on the loop index. Each output comes with
/// whether it is stacked (`true` also for one asked unbatched that depends on the index: the
/// caller reports that).
pub(crate) fn for_loop_outputs(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    unbatched: &[bool],
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<Vec<(ValueId, bool)>> {
    let n = n.into();
    let n_val = n.to_value(g)?;
    let i = g.input("__loop_index", DType::I64, Shape::scalar());
    let outs = body(g, i)?;
    let outs = g.capture_all(&outs)?;
    let variant = if unbatched.iter().any(|&u| u) { index_dependent(g, i)? } else { HashSet::new() };
    let keep = |k: usize, o: &ValueId| unbatched.get(k).copied().unwrap_or(false) && !variant.contains(&o.node);
    let looped_outs: Vec<ValueId> = outs.iter().enumerate().filter(|(k, o)| !keep(*k, o)).map(|(_, o)| *o).collect();
    let looped = if looped_outs.is_empty() { vec![] } else { for_loop_from_traced(g, n, n_val, i, &looped_outs)? };
    let mut looped = looped.into_iter();
    outs.iter()
        .enumerate()
        .map(|(k, o)| {
            if keep(k, o) {
                return Ok((*o, false));
            }
            let v = looped.next().ok_or_else(|| Error::Verify("for_loop: outputs out of step".into()))?;
            Ok((v, true))
        })
        .collect()
}

/// Build the `For` node for an already-traced body (shared with pfor's fallback).
///
/// ```
/// use pfor::prelude::*;
/// use pfor::reference::for_loop_from_traced;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let i = g.input("i", DType::I64, Shape::scalar()); // a body traced by hand
/// let sq = g.mul(i, i)?;
/// let n = g.constant(Tensor::scalar(4i64));
/// let out = for_loop_from_traced(&mut g, LoopLen::Static(4), n, i, &[sq])?;
/// assert_eq!(run_once(&g, &out, &[])?[0].to_vec::<i64>()?, [0, 1, 4, 9]);
/// # Ok(())
/// # }
/// ```
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
