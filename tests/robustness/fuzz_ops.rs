//! The fuzz generator's op table: one [`Step`] applies one public `Graph` builder, chosen
//! by `family`/`sub`, to operands picked from the values built so far, with attributes taken
//! raw from the step's hostile integers (negative and huge axes, zero and huge dims,
//! overflowing reshapes, zero strides...). Every family of `src/ops/` is covered: unary,
//! binary, elementwise, reduce, shape, slicing, indexing, linear, conv, nn, linalg,
//! random, control (cond with a capture and a branch that can raise, capped and uncapped
//! while, a recursive call, a named function that illegally uses an outer value) and
//! handles (a foreign graph's value, a removed node's value). The table is deterministic: the
//! same step on operands of the same types builds the same nodes, so a body applied in a
//! `pfor` and in a `for_loop` builds the same per-iteration program.

use pfor::ops::slicing::{PadMode, StridedSliceSpec};
use pfor::ops::{BinaryKind, UnaryKind};
use pfor::prelude::*;

/// Name of the recursive function every fuzz graph declares: `fz_rec(n: i64) -> i64 =
/// n > 0 ? n + fz_rec(n - 1) : 0`.
pub const REC: &str = "fz_rec";

/// Number of op families in [`apply`].
pub const FAMILIES: u8 = 15;

/// One generated op application.
#[derive(Clone, Debug)]
pub struct Step {
    /// Op family (`% FAMILIES`).
    pub family: u8,
    /// Op within the family.
    pub sub: u8,
    /// Operand picks (`% number of values`).
    pub args: [u8; 3],
    /// Raw attributes: axes, dims, bounds, caps.
    pub ints: Vec<i64>,
    /// A float attribute (scalar operand, epsilon, rate).
    pub float: f64,
    /// Boolean attributes.
    pub flags: [bool; 2],
}

/// Values that are not this graph's own (the handle class).
pub struct Hostile {
    /// A value of another graph.
    pub foreign: ValueId,
    /// A value of this graph whose node was removed (`None` when not made).
    pub stale: Option<ValueId>,
}

/// A graph with [`REC`] (nothing else yet).
pub fn graph_with_recursion() -> Graph {
    super::recursive_i64(
        REC,
        |g, n| {
            let m = g.add_scalar(n, -1.0)?;
            let r = g.call(REC, &[m])?;
            g.add(n, r[0])
        },
        |g, n| g.zeros_like(n),
    )
}

/// A value that is not `g`'s: a fresh graph's input (foreign) and, when `stale` is set, a
/// node of `g` that `prune` removed (call it before adding nodes: `prune` removes every
/// node nothing keeps).
pub fn hostile(g: &mut Graph, stale: bool) -> Result<Hostile> {
    let mut other = Graph::new();
    let foreign = other.input("foreign", DType::F32, [2]);
    let stale = if stale {
        let dead = g.constant(Tensor::scalar(1.0f32));
        let keep: Vec<ValueId> = Vec::new();
        // prune keeps inputs and what `keep` reads; the dead constant goes.
        let _ = g.prune(&keep);
        Some(dead)
    } else {
        None
    };
    Ok(Hostile { foreign, stale })
}

fn uz(v: i64) -> usize {
    v as usize
}

fn int(s: &Step, k: usize) -> i64 {
    if s.ints.is_empty() { 0 } else { s.ints[k % s.ints.len()] }
}

fn dims(s: &Step) -> Vec<usize> {
    s.ints.iter().map(|&v| uz(v)).collect()
}

fn dtype(k: u8) -> DType {
    [DType::F32, DType::F64, DType::I64, DType::Bool][k as usize % 4]
}

fn padding(flag: bool) -> Padding {
    if flag { Padding::Same } else { Padding::Valid }
}

fn pair(s: &Step, k: usize) -> [usize; 2] {
    [uz(int(s, k)), uz(int(s, k + 1))]
}

fn conv_params(s: &Step) -> Conv2dParams {
    Conv2dParams { strides: pair(s, 0), padding: padding(s.flags[0]), dilations: pair(s, 2) }
}

/// A scalar i64 derived from `v` (its sum, cast) — or `v` itself when `raw`.
fn scalar_i64(g: &mut Graph, v: ValueId, raw: bool) -> Result<ValueId> {
    if raw {
        return Ok(v);
    }
    let s = g.sum_all(v)?;
    g.cast(s, DType::I64)
}

/// Apply `s` to `vals` (and, for the handle family, `hostile`); the new values.
pub fn apply(g: &mut Graph, s: &Step, vals: &[ValueId], hostile: &Hostile) -> Result<Vec<ValueId>> {
    let pick = |k: usize| vals[s.args[k] as usize % vals.len()];
    let (a, b, c) = (pick(0), pick(1), pick(2));
    let one = |r: Result<ValueId>| r.map(|v| vec![v]);
    let sub = s.sub as usize;
    let [f0, f1] = s.flags;
    match s.family % FAMILIES {
        0 => one(g.unary(UnaryKind::ALL[sub % UnaryKind::ALL.len()], a)),
        1 => one(g.binary(BinaryKind::ALL[sub % BinaryKind::ALL.len()], a, b)),
        2 => one(match sub % 5 {
            0 => g.select(a, b, c),
            1 => g.cast(a, dtype(s.args[1])),
            2 => g.clip(a, b, c),
            3 => g.add_scalar(a, s.float),
            _ => g.mul_scalar(a, s.float),
        }),
        3 => one(match sub % 11 {
            0 => g.reduce_sum(a, Some(&s.ints), f0),
            1 => g.reduce_max(a, Some(&s.ints), f0),
            2 => g.reduce_mean(a, Some(&s.ints), f0),
            3 => g.reduce_prod(a, Some(&s.ints), f0),
            4 => g.reduce_logsumexp(a, Some(&s.ints), f0),
            5 => g.reduce_any(a, Some(&s.ints), f0),
            6 => g.argmax(a, int(s, 0)),
            7 => g.argmin(a, int(s, 0)),
            8 => g.cumsum(a, int(s, 0), f0, f1),
            9 => g.cumprod(a, int(s, 0), f0, f1),
            _ => g.sum_all(a),
        }),
        4 => shape_family(g, s, a, b),
        5 => one(match sub % 6 {
            0 => {
                let k = s.ints.len() / 2;
                g.slice(a, &s.ints[..k], &s.ints[k..])
            }
            1 => {
                let k = s.ints.len() / 2;
                let spec = StridedSliceSpec {
                    begin: s.ints[..k].to_vec(),
                    end: s.ints[k..].iter().map(|v| v.wrapping_add(2)).collect(),
                    strides: s.ints[k..].iter().map(|v| v % 3).collect(),
                    begin_mask: s.args[1] as u64,
                    end_mask: s.args[2] as u64,
                    ellipsis_mask: if f0 { 1 } else { 0 },
                    new_axis_mask: if f1 { 2 } else { 0 },
                    shrink_axis_mask: (s.sub >> 4) as u64,
                };
                g.strided_slice(a, &spec)
            }
            2 => {
                let pads: Vec<(usize, usize)> =
                    s.ints.chunks(2).map(|p| (uz(p[0]), uz(*p.last().unwrap_or(&0)))).collect();
                let mode = [PadMode::Constant(s.float), PadMode::Reflect, PadMode::Symmetric][s.args[1] as usize % 3];
                g.pad(a, &pads, mode)
            }
            3 => g.reverse(a, &s.ints),
            4 => g.roll(a, b, &s.ints),
            _ => g.dynamic_slice(a, b, &dims(s)),
        }),
        6 => indexing_family(g, s, a, b, c),
        7 => one(match sub % 4 {
            0 => g.matmul(a, b),
            1 => g.matmul_t(a, b, f0, f1),
            2 => g.batch_matmul(a, b),
            _ => g.batch_matmul_t(a, b, f0, f1),
        }),
        8 => one(match sub % 5 {
            0 => g.conv2d(a, b, conv_params(s)),
            1 => g.depthwise_conv2d(a, b, conv_params(s)),
            2 => g.max_pool(a, pair(s, 0), pair(s, 2), padding(f0)),
            3 => g.avg_pool(a, pair(s, 0), pair(s, 2), padding(f0)),
            _ => g.extract_patches(a, pair(s, 0), conv_params(s)),
        }),
        9 => one(match sub % 8 {
            0 => g.bias_add(a, b),
            1 => g.softmax(a, int(s, 0)),
            2 => g.log_softmax(a, int(s, 0)),
            3 => g.softmax_cross_entropy(b, a),
            4 => g.sparse_softmax_cross_entropy(b, a),
            5 => g.sigmoid_cross_entropy(b, a),
            6 => g.l2_loss(a),
            _ => g.layer_norm(a, b, c, s.float),
        }),
        10 => one(match sub % 9 {
            0 => g.matrix_inverse(a),
            1 => g.determinant(a),
            2 => g.log_abs_det(a),
            3 => g.cholesky(a),
            4 => g.solve(a, b),
            5 => g.triangular_solve(a, b, f0, f1),
            6 => g.matrix_diag(a),
            7 => g.matrix_diag_part(a),
            _ => g.trace(a),
        }),
        11 => one(match sub % 6 {
            0 => g.random_uniform(a, &dims(s), dtype(s.args[1]), 0.0, 1.0),
            1 => g.random_normal(a, &dims(s), dtype(s.args[1]), 0.0, s.float),
            2 => g.random_categorical(a, b, uz(int(s, 0))),
            3 => g.random_bernoulli(a, b, &dims(s)),
            4 => g.dropout(a, b, s.float),
            _ => g.fold_in(a, b),
        }),
        12 => cond_family(g, s, a, b, c),
        13 => while_family(g, s, a, b, c),
        _ => control_and_handles(g, s, a, b, hostile),
    }
}

fn shape_family(g: &mut Graph, s: &Step, a: ValueId, b: ValueId) -> Result<Vec<ValueId>> {
    let one = |r: Result<ValueId>| r.map(|v| vec![v]);
    let (f0, i0) = (s.flags[0], int(s, 0));
    match s.sub % 20 {
        0 => one(g.reshape(a, &s.ints)),
        1 => one(g.transpose(a, &dims(s))),
        2 => one(g.expand_dims(a, i0)),
        3 => one(g.squeeze(a, (!s.ints.is_empty()).then_some(&s.ints[..]))),
        4 => one(g.broadcast_to(a, &dims(s))),
        5 => one(g.tile(a, &dims(s))),
        6 => one(g.fill(&dims(s), a)),
        7 => {
            let c = g.scalar_like(a, s.float)?;
            one(g.range(a, b, c))
        }
        8 => one(g.stack(&[a, b], i0)),
        9 => g.unstack(a, i0),
        10 => one(g.concat(&[a, b], i0)),
        11 => g.split(a, i0, dims(s).get(1..).unwrap_or_default()),
        12 => one(g.shape_of(a)),
        13 => one(g.reshape_dyn(a, b)),
        14 => one(g.broadcast_to_dyn(a, b)),
        15 => one(g.fill_dyn(a, b)),
        16 => one(if f0 { g.zeros_like(a) } else { g.ones_like(a) }),
        17 => one(g.size_of(a)),
        18 => one(g.match_shape(a, b)),
        _ => one(g.stop_gradient(a)),
    }
}

fn indexing_family(g: &mut Graph, s: &Step, a: ValueId, b: ValueId, c: ValueId) -> Result<Vec<ValueId>> {
    let one = |r: Result<ValueId>| r.map(|v| vec![v]);
    let i0 = int(s, 0);
    match s.sub % 13 {
        0 => one(g.gather(a, b, i0)),
        1 => one(g.gather_nd(a, b, uz(i0))),
        2 => one(g.scatter_nd(a, b, &dims(s))),
        3 => one(g.tensor_scatter_update(a, b, c)),
        4 => one(g.tensor_scatter_add(a, b, c)),
        5 => one(g.unsorted_segment_sum(a, b, uz(i0))),
        6 => one(g.unsorted_segment_max(a, b, uz(i0))),
        7 => one(g.unsorted_segment_prod(a, b, uz(i0))),
        8 => one(g.dynamic_update_slice(a, b, c)),
        9 => g.top_k(a, uz(i0)).map(|(v, i)| vec![v, i]),
        10 => one(g.nonzero(a)),
        11 => one(g.nonzero_batched(a, uz(i0))),
        _ => {
            // a gather whose indices come from data (clipped or not)
            let idx = scalar_i64(g, b, s.flags[0])?;
            one(g.gather(a, idx, i0))
        }
    }
}

/// `cond(pred, [a], then, else)`: the predicate comes from data (or is `b` itself, any
/// type); the then-branch gathers from a captured outer value at a data index (it can
/// raise on the iterations that take it), the else-branch is elementwise (an identity
/// where the unary op rejects the dtype); both flatten their result, so the output's length
/// differs between branches.
fn cond_family(g: &mut Graph, s: &Step, a: ValueId, b: ValueId, c: ValueId) -> Result<Vec<ValueId>> {
    let pred = if s.flags[0] {
        b
    } else {
        let bf = g.cast(b, DType::F64)?;
        let sb = g.sum_all(bf)?;
        let z = g.scalar_like(sb, 0.0)?;
        g.greater(sb, z)?
    };
    let axis = int(s, 0);
    let kind = UnaryKind::ALL[s.sub as usize % UnaryKind::ALL.len()];
    let raw = s.flags[1];
    g.cond(
        pred,
        &[a],
        |g, p| {
            let idx = scalar_i64(g, p[0], raw)?;
            let r = g.gather(c, idx, axis)?;
            let dt = g.value_type(p[0])?.dtype;
            let r = g.cast(r, dt)?;
            Ok(vec![g.reshape(r, &[-1])?])
        },
        |g, p| {
            let u = g.unary(kind, p[0]).or_else(|_| g.identity(p[0]))?;
            Ok(vec![g.reshape(u, &[-1])?])
        },
    )
}

/// A counted while: carries `(k: i64, x)`, runs while `k < limit` (limit from data), each
/// trip `x = op(x, captured c)`; capped by stop / error / nothing per the attributes.
fn while_family(g: &mut Graph, s: &Step, a: ValueId, b: ValueId, c: ValueId) -> Result<Vec<ValueId>> {
    let limit = scalar_i64(g, b, s.flags[0])?;
    let k0 = g.constant(Tensor::scalar(0i64));
    let kind = BinaryKind::ALL[s.sub as usize % BinaryKind::ALL.len()];
    let cond = move |g: &mut Graph, p: &[ValueId]| g.less(p[0], limit);
    let body = move |g: &mut Graph, p: &[ValueId]| {
        let k = g.add_scalar(p[0], 1.0)?;
        Ok(vec![k, g.binary(kind, p[1], c)?])
    };
    let cap = uz(int(s, 1)) as u64;
    match s.args[2] % 3 {
        0 => g.while_loop_with(&[k0, a], &[], IterationCap::stop(cap), cond, body),
        1 => g.while_loop_with(&[k0, a], &[], IterationCap::error(cap), cond, body),
        _ => g.while_loop(&[k0, a], &[], cond, body),
    }
}

/// Calls (recursive, wrong arity, unknown function), a named function using an outer
/// value, and ops on foreign and stale handles.
fn control_and_handles(g: &mut Graph, s: &Step, a: ValueId, b: ValueId, h: &Hostile) -> Result<Vec<ValueId>> {
    match s.sub % 7 {
        0 => {
            let n = scalar_i64(g, a, s.flags[0])?;
            g.call(REC, &[n])
        }
        1 => g.call(REC, &[a, b]),
        2 => g.call("fz_undeclared", &[a]),
        3 => {
            let name = format!("fz_outer_{}", g.num_nodes());
            let t = g.value_type(a)?.clone();
            g.function(&name, &[t], |g, p| Ok(vec![g.add(p[0], b)?]))?;
            g.call(&name, &[a])
        }
        4 => Ok(vec![g.add(a, h.foreign)?]),
        5 => Ok(vec![g.capture(h.foreign)?]),
        _ => match h.stale {
            Some(v) => Ok(vec![g.mul(a, v)?]),
            None => Ok(vec![g.identity(h.foreign)?]),
        },
    }
}
