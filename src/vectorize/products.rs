//! Product rewrites: reductions of per-iteration matrix products that never need the
//! products themselves. After `pfor`, the per-example gradient of a weight used as
//! `x_i · W` is a stacked product `P = [A_1 B_1, ..., A_n B_n]` (`[n, k, o]`, one
//! `batch_matmul` over the pfor axis; a weight used at `T` positions or time steps, or
//! several times, gives a sum of such products, i.e. one product with a longer inner dim
//! `T`). What per-example-gradient users do with `P` — sum it over the examples, possibly
//! scaled by a per-example scalar (DP-SGD's clipped sum), or take each example's squared
//! Frobenius norm (DP-SGD's clip factor) — has a cheaper form:
//!
//! - **contraction**: `reduce_sum_0(s ⊙ P)` with `s` of shape `[n, 1, 1]` (or no `s`) →
//!   `L'ᵀ · (s ⊙ R)'`, ONE matmul over the `n·T` rows (`L = [n, T, k]` holds `A_iᵀ`,
//!   `R = [n, T, o]` holds `B_i`, `'` flattens the first two axes): no `[n, k, o]` value —
//!   only when nothing else reads `P` (a product that stays materialized anyway, e.g. for its
//!   norm, is cheaper to scale and sum than to multiply again);
//! - **ghost norm**: `reduce_sum_{1,2}(P ⊙ P)` (a `square` or a self-`mul`) →
//!   `|L_i|²·|R_i|²` when `T = 1` (rank 1), `⟨A_iᵀA_i, B_iB_iᵀ⟩` (two `[n, T, T]` Gram
//!   matrices) when that costs less than writing `P` (`T·(k+o) < k·o`, Li et al. 2021's
//!   ghost clipping); otherwise the product is materialized and its norm is one batched dot
//!   of it with itself (`[n, 1, k·o] · [n, 1, k·o]ᵀ`: one read, no squared copy written);
//! - **weighted sum**: `reduce_sum_0(s ⊙ V)` of a value `V` that stays materialized (a
//!   product its norm also reads, e.g. a conv filter gradient over many positions) →
//!   `s'ᵀ · V'`, one row-vector product `[1, n] · [n, m]` (one read of `V`, no scaled copy).
//!
//! Matching (all types static, one dtype): `P` is a `batch_matmul` of two rank-3 operands
//! with the same leading `n` (no broadcasting), or an `add` tree of such products with equal
//! `[n, k, o]` results (their `L`s and `R`s are concatenated along `T`, which is exact: a
//! sum of products is the product of the concatenations), possibly seen through a `reshape`
//! that keeps the leading `n` (the reduced value may have any rank ≥ 3; `s` is then
//! `[n, 1, ..., 1]` and the reduction covers axis 0, or all axes but 0). The per-example conv
//! filter gradient is such a product: pfor converts it to the batched im2col form (window
//! patches `[n, T, KH·KW·C]` times the output gradient `[n, T, O]` in one `batch_matmul`,
//! reshaped to the filter's shape), so it takes these rules, the cost deciding between the
//! Gram form and materializing. Anything else is left alone, so a sum that is not a
//! product (a bias gradient) is never approximated.
//!
//! Invariants: a matched node is rewritten in place into an `identity` of its new value
//! (same static type, same elements up to float rounding), so its consumers and the graph's
//! outputs stay valid; [`contract_since`] then runs
//! [`simplify_since`](super::simplify_since) to forward those identities and remove the
//! products nothing reads any more. Only nodes added at or after the mark are rewritten.

use crate::error::Result;
use crate::ir::{Graph, NodeId, ValueId};
use crate::ops::{BinaryKind, LinearOp, Op, ReduceKind, ReduceOp, ShapeOp, UnaryKind};
use crate::tensor::DType;

use crate::passes::{SimplifyReport, simplify_since};

/// What [`contract_since`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProductReport {
    /// The outputs after the pass.
    pub outputs: Vec<ValueId>,
    /// Sums over the pfor axis of (scaled) products turned into one contraction.
    pub contractions: usize,
    /// Squared norms of products computed as `|a|²|b|²` (rank 1).
    pub ghost_rank1: usize,
    /// Squared norms of products computed from Gram matrices `⟨AᵀA, BBᵀ⟩`.
    pub ghost_gram: usize,
    /// Squared norms of products left materialized because the ghost form costs more (each
    /// then computed as one batched dot of the product with itself, not its square).
    pub materialized: usize,
    /// Sums over the pfor axis of a per-iteration scalar times a materialized value (a
    /// product something else also reads, e.g. its norm) computed as one row-vector product
    /// `[1, n] · [n, m]` instead of writing the scaled value.
    pub weighted_sums: usize,
    /// The clean-up simplification (`None` when nothing was rewritten).
    pub simplified: Option<SimplifyReport>,
}

/// A stacked product `Σ_j A_j B_j` found in the graph, before its normal form is built.
struct Plan {
    terms: Vec<Term>,
    n: usize,
    t: usize,
    k: usize,
    o: usize,
}

/// A stacked product `Σ_j A_j B_j` in normal form: `l = [n, T, k]` (the `A_iᵀ`), `r = [n, T, o]`.
struct Product {
    l: ValueId,
    r: ValueId,
    n: usize,
    t: usize,
    k: usize,
    o: usize,
}

/// Rewrite, among the nodes added at or after `mark`, the reductions of stacked products
/// described in the module docs (the squared norms first, then the sums of products
/// nothing else reads), simplifying that region for `outputs` after each sweep. Returns the new
/// outputs (an output may now be another, equal value).
pub fn contract_since(g: &mut Graph, outputs: &[ValueId], mark: u64) -> Result<ProductReport> {
    let mut report = ProductReport::default();
    let mut outs = outputs.to_vec();
    // Norms first: a product whose norm took the ghost form may then be read only by its
    // sum, which then contracts (a product the norm still reads is summed as it is).
    for pass in [Pass::Norms, Pass::Sums] {
        let region: Vec<NodeId> = g.node_ids().into_iter().filter(|&n| g.added_since(n, mark)).collect();
        let mut changed = false;
        for n in region {
            if g.find_node(n).is_none() {
                continue;
            }
            let Some(new) = rewrite(g, n, pass, &mut report)? else { continue };
            g.rewrite_node(n, Op::Shape(ShapeOp::Identity), &[new])?;
            changed = true;
        }
        if changed {
            let s = simplify_since(g, &outs, mark)?;
            outs = s.outputs.clone();
            report.simplified = Some(s);
        }
    }
    report.outputs = outs;
    Ok(report)
}

/// Which rewrites a sweep of [`contract_since`] applies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Norms,
    Sums,
}

/// The static dims and dtype of `v` if its type is fully static and float.
fn float_dims(g: &Graph, v: ValueId) -> Result<Option<(Vec<usize>, DType)>> {
    let t = g.value_type(v)?;
    Ok(t.shape.as_fixed().filter(|_| t.dtype.is_float()).map(|d| (d, t.dtype)))
}

/// Reduction axes normalized to `0..rank`, sorted.
fn norm_axes(axes: &[i64], rank: usize) -> Option<Vec<usize>> {
    let mut v: Vec<usize> = axes
        .iter()
        .map(|&a| {
            let a = if a < 0 { a + rank as i64 } else { a };
            (0..rank as i64).contains(&a).then_some(a as usize)
        })
        .collect::<Option<_>>()?;
    v.sort_unstable();
    v.dedup();
    Some(v)
}

/// The rewrite of node `n`, if it is one of the module's patterns: the new value.
fn rewrite(g: &mut Graph, n: NodeId, pass: Pass, report: &mut ProductReport) -> Result<Option<ValueId>> {
    let node = g.node(n)?;
    let Op::Reduce(ReduceOp::Axes { kind: ReduceKind::Sum, axes, keep_dims }) = &node.op else { return Ok(None) };
    let (x, keep) = (node.inputs[0], *keep_dims);
    let Some((xd, _)) = float_dims(g, x)? else { return Ok(None) };
    let rank = xd.len();
    let Some(axes) = norm_axes(axes, rank) else { return Ok(None) };
    if rank < 3 {
        return Ok(None);
    }
    // The result's dims: `x`'s without (or with 1 for, under `keep`) the reduced axes.
    let out_dims = |reduced: &dyn Fn(usize) -> bool| -> Vec<i64> {
        (0..rank).filter(|&d| keep || !reduced(d)).map(|d| if reduced(d) { 1 } else { xd[d] as i64 }).collect()
    };
    if axes == [0] && pass == Pass::Sums {
        let m = if let Some((s, p)) = scaled_product(g, x, n)? {
            report.contractions += 1;
            let p = product(g, p)?;
            contraction(g, s, &p)?
        } else if let Some((s, v)) = scaled_value(g, x)? {
            report.weighted_sums += 1;
            weighted_sum(g, s, v, &xd)?
        } else {
            return Ok(None);
        };
        return g.reshape(m, &out_dims(&|d| d == 0)).map(Some);
    }
    if axes.len() == rank - 1 && axes[0] == 1 && pass == Pass::Norms {
        let Some(v) = squared(g, x)? else { return Ok(None) };
        let Some(p) = plan(g, unview(g, v)?)? else { return Ok(None) };
        if p.t == 1 {
            report.ghost_rank1 += 1;
        } else if p.t * (p.k + p.o) < p.k * p.o {
            report.ghost_gram += 1;
        } else {
            report.materialized += 1;
            let d = self_dot(g, v, &xd)?;
            return g.reshape(d, &out_dims(&|d| d > 0)).map(Some);
        }
        let p = product(g, p)?;
        let v = ghost_norm(g, &p)?;
        return g.reshape(v, &out_dims(&|d| d > 0)).map(Some);
    }
    Ok(None)
}

/// The source of `v` when `v` is a `reshape` of a rank-3 value that keeps the leading dim
/// (row `i` of the result is row `i` of the source, in row-major order), else `v`: a
/// product reshaped to a parameter's shape (a conv filter gradient) is still a product.
fn unview(g: &Graph, v: ValueId) -> Result<ValueId> {
    let node = g.node(v.node)?;
    if !matches!(node.op, Op::Shape(ShapeOp::Reshape { .. })) {
        return Ok(v);
    }
    let src = node.inputs[0];
    let (Some(sd), Some(vd)) = (g.shape(src)?.as_fixed(), g.shape(v)?.as_fixed()) else { return Ok(v) };
    Ok(if sd.len() == 3 && !vd.is_empty() && sd[0] == vd[0] { src } else { v })
}

/// Whether `v`, and the value [`unview`] sees through, are read only by `reader` (so the
/// product dies when `reader` is rewritten).
fn read_only_by(g: &Graph, v: ValueId, reader: NodeId) -> Result<bool> {
    let src = unview(g, v)?;
    Ok(g.consumers(v.node) == [reader] && (src == v || g.consumers(src.node) == [v.node]))
}

/// `x = s ⊙ P` with `s` `[n, 1, ..., 1]`, or `x = P` (`P` possibly reshaped, see
/// [`unview`]), where nothing but `reduce` (through `x`) reads `P`: `(Some(s) | None, P)`.
fn scaled_product(g: &Graph, x: ValueId, reduce: NodeId) -> Result<Option<(Option<ValueId>, Plan)>> {
    if read_only_by(g, x, reduce)?
        && let Some(p) = plan(g, unview(g, x)?)?
    {
        return Ok(Some((None, p)));
    }
    let node = g.node(x.node)?;
    if !matches!(node.op, Op::Binary(BinaryKind::Mul)) || g.consumers(x.node) != [reduce] {
        return Ok(None);
    }
    let (a, b) = (node.inputs[0], node.inputs[1]);
    let Some((xd, dt)) = float_dims(g, x)? else { return Ok(None) };
    for (s, q) in [(a, b), (b, a)] {
        let Some((sd, sdt)) = float_dims(g, s)? else { continue };
        if sdt != dt || sd.len() != xd.len() || sd[0] != xd[0] || sd[1..].iter().any(|&d| d != 1) {
            continue;
        }
        if read_only_by(g, q, x.node)?
            && let Some(p) = plan(g, unview(g, q)?)?
        {
            return Ok(Some((Some(s), p)));
        }
    }
    Ok(None)
}

/// `x = s ⊙ v` with `s` `[n, 1, ..., 1]` and `v` of `x`'s shape (no broadcasting), read only
/// by the reduction: `(s, v)` (a per-iteration weighted sum of any materialized value).
fn scaled_value(g: &Graph, x: ValueId) -> Result<Option<(ValueId, ValueId)>> {
    let node = g.node(x.node)?;
    if !matches!(node.op, Op::Binary(BinaryKind::Mul)) || g.consumers(x.node).len() != 1 {
        return Ok(None);
    }
    let (a, b) = (node.inputs[0], node.inputs[1]);
    let Some((xd, dt)) = float_dims(g, x)? else { return Ok(None) };
    for (s, v) in [(a, b), (b, a)] {
        let (Some((sd, sdt)), Some((vd, vdt))) = (float_dims(g, s)?, float_dims(g, v)?) else { continue };
        if sdt == dt
            && vdt == dt
            && vd == xd
            && sd.len() == xd.len()
            && sd[0] == xd[0]
            && sd[1..].iter().all(|&d| d == 1)
        {
            return Ok(Some((s, v)));
        }
    }
    Ok(None)
}

/// `Σ_i s_i v_i` as one row-vector product `[1, n] · [n, m]` → `[1, m]` (`xd` = `v`'s dims,
/// `m` their product after the first): one read of `v`, no scaled copy.
fn weighted_sum(g: &mut Graph, s: ValueId, v: ValueId, xd: &[usize]) -> Result<ValueId> {
    let (n, m) = (xd[0] as i64, xd[1..].iter().product::<usize>() as i64);
    let s = g.reshape(s, &[1, n])?;
    let v = g.reshape(v, &[n, m])?;
    g.matmul(s, v)
}

/// `Σ_j v_{i,j}²` for every `i` as one batched dot `[n, 1, m] · [n, 1, m]ᵀ` → `[n, 1, 1]`
/// (`xd` = `v`'s dims): one read of `v` instead of writing and reading back its square.
fn self_dot(g: &mut Graph, v: ValueId, xd: &[usize]) -> Result<ValueId> {
    let (n, m) = (xd[0] as i64, xd[1..].iter().product::<usize>() as i64);
    let v = g.reshape(v, &[n, 1, m])?;
    g.batch_matmul_t(v, v, false, true)
}

/// `x = P ⊙ P` (a `square`, or a `mul` of a value by itself): `P`.
fn squared(g: &Graph, x: ValueId) -> Result<Option<ValueId>> {
    let node = g.node(x.node)?;
    Ok(match node.op {
        Op::Unary(UnaryKind::Square) => Some(node.inputs[0]),
        Op::Binary(BinaryKind::Mul) if node.inputs[0] == node.inputs[1] => Some(node.inputs[0]),
        _ => None,
    })
}

/// One `batch_matmul` term of a stacked product: its operands and adjoint flags.
type Term = (ValueId, bool, ValueId, bool);

/// At most this many terms are collected from one `add` tree.
const MAX_TERMS: usize = 4096;

/// Collect into `out` the terms of `x` if it is an `add` tree of stacked `batch_matmul`s of
/// rank-3 operands with one leading dim (no broadcasting); false otherwise.
fn terms(g: &Graph, x: ValueId, out: &mut Vec<Term>) -> Result<bool> {
    if out.len() >= MAX_TERMS {
        return Ok(false);
    }
    let node = g.node(x.node)?;
    match &node.op {
        Op::Binary(BinaryKind::Add) => {
            let (a, b) = (node.inputs[0], node.inputs[1]);
            if g.value_type(a)? != g.value_type(x)? || g.value_type(b)? != g.value_type(x)? {
                return Ok(false);
            }
            Ok(terms(g, a, out)? && terms(g, b, out)?)
        }
        Op::Linear(LinearOp::BatchMatMul { adj_a, adj_b }) => {
            let (a, b) = (node.inputs[0], node.inputs[1]);
            let (Some((ad, _)), Some((bd, _))) = (float_dims(g, a)?, float_dims(g, b)?) else { return Ok(false) };
            if ad.len() != 3 || bd.len() != 3 || ad[0] != bd[0] {
                return Ok(false);
            }
            out.push((a, *adj_a, b, *adj_b));
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// `x` as a [`Plan`] (nothing added to the graph yet), if it is a stacked product.
fn plan(g: &Graph, x: ValueId) -> Result<Option<Plan>> {
    let Some((xd, _)) = float_dims(g, x)? else { return Ok(None) };
    if xd.len() != 3 {
        return Ok(None);
    }
    let mut ts = Vec::new();
    if !terms(g, x, &mut ts)? {
        return Ok(None);
    }
    let (n, k, o) = (xd[0], xd[1], xd[2]);
    let mut t = 0usize;
    for &(a, adj_a, b, adj_b) in &ts {
        let (ad, bd) = (g.shape(a)?.as_fixed().unwrap_or_default(), g.shape(b)?.as_fixed().unwrap_or_default());
        // A_i is [k, T] (stored [T, k] when adjoint), B_i is [T, o] (stored [o, T]).
        let (ak, at) = if adj_a { (ad[2], ad[1]) } else { (ad[1], ad[2]) };
        let (bt, bo) = if adj_b { (bd[2], bd[1]) } else { (bd[1], bd[2]) };
        if ad[0] != n || ak != k || bo != o || at != bt {
            return Ok(None);
        }
        t += at;
    }
    Ok(Some(Plan { terms: ts, n, t, k, o }))
}

/// Add the normal form `l = [n, T, k]`, `r = [n, T, o]` of a planned product to the graph.
fn product(g: &mut Graph, p: Plan) -> Result<Product> {
    let (mut ls, mut rs) = (Vec::new(), Vec::new());
    for (a, adj_a, b, adj_b) in p.terms {
        ls.push(if adj_a { a } else { g.transpose(a, &[0, 2, 1])? });
        rs.push(if adj_b { g.transpose(b, &[0, 2, 1])? } else { b });
    }
    let (l, r) = if ls.len() == 1 { (ls[0], rs[0]) } else { (g.concat(&ls, 1)?, g.concat(&rs, 1)?) };
    Ok(Product { l, r, n: p.n, t: p.t, k: p.k, o: p.o })
}

/// `Σ_i s_i A_i B_i` as one matmul `[k, o]` (`s` is `[n, 1, ..., 1]`).
fn contraction(g: &mut Graph, s: Option<ValueId>, p: &Product) -> Result<ValueId> {
    let r = match s {
        Some(s) => {
            let s = g.reshape(s, &[p.n as i64, 1, 1])?;
            g.mul(p.r, s)?
        }
        None => p.r,
    };
    let rows = (p.n * p.t) as i64;
    let l2 = g.reshape(p.l, &[rows, p.k as i64])?;
    let r2 = g.reshape(r, &[rows, p.o as i64])?;
    g.matmul_t(l2, r2, true, false)
}

/// `‖A_i B_i‖²_F` for every `i`: `[n]`.
fn ghost_norm(g: &mut Graph, p: &Product) -> Result<ValueId> {
    if p.t == 1 {
        let (l2, r2) = (g.square(p.l)?, g.square(p.r)?);
        let (a, b) = (g.reduce_sum(l2, Some(&[1, 2]), false)?, g.reduce_sum(r2, Some(&[1, 2]), false)?);
        return g.mul(a, b);
    }
    // A_iᵀA_i = l_i l_iᵀ and B_iB_iᵀ = r_i r_iᵀ, both [T, T].
    let ga = g.batch_matmul_t(p.l, p.l, false, true)?;
    let gb = g.batch_matmul_t(p.r, p.r, false, true)?;
    let v = g.mul(ga, gb)?;
    g.reduce_sum(v, Some(&[1, 2]), false)
}
