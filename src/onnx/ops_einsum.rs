//! ONNX `Einsum`: explicit (`ij,jk->ik`) and implicit (`ij,jk`) equations, `...` broadcast
//! dims, any number of operands, sums over labels that leave, and diagonals (a label repeated
//! in one operand).
//!
//! A composition (no new kind): operands are folded left to right; each pairwise step sums
//! the labels no later operand or the output needs, then is one `batch_matmul` over
//! (shared-and-kept, left-only, contracted, right-only) label groups arranged by transposes
//! and reshapes; a diagonal is taken with a constant 0/1 mask and a sum. So derivatives and
//! `pfor` converters are those of matmul, transpose, reshape and reduce. Invariants: shapes
//! are static; a label's sizes must agree across operands (1 broadcasts only under `...`).

use super::convert::NodeCx;
use super::ops_shape::fixed_shape;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::Tensor;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["Einsum"];

/// Converts `n` if it is an `Einsum`.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(einsum(g, n).map(|v| vec![v]))
}

/// An operand in progress: its value and one label per axis.
struct Term {
    v: ValueId,
    labels: Vec<char>,
}

/// The labels of `spec` with `...` expanded to `rank - explicit` generated labels.
fn expand(n: &NodeCx, spec: &str, rank: Option<usize>, ell: &mut Vec<char>) -> Result<Vec<char>> {
    let Some(pos) = spec.find("...") else {
        return Ok(spec.chars().filter(|c| !c.is_whitespace()).collect());
    };
    let (a, b) = (&spec[..pos], &spec[pos + 3..]);
    let explicit = a.chars().chain(b.chars()).filter(|c| !c.is_whitespace()).count();
    let k = match rank {
        Some(r) => r.checked_sub(explicit).ok_or_else(|| n.invalid(format!("'{spec}' for rank {r}")))?,
        None => ell.len(),
    };
    // the broadcast labels are right-aligned: the last k of the longest
    while ell.len() < k {
        ell.insert(0, char::from_u32(0x100 + ell.len() as u32).unwrap_or('#'));
    }
    let mut v: Vec<char> = a.chars().filter(|c| !c.is_whitespace()).collect();
    v.extend_from_slice(&ell[ell.len() - k..]);
    v.extend(b.chars().filter(|c| !c.is_whitespace()));
    Ok(v)
}

fn einsum(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let eq = n.attr_s("equation").ok_or_else(|| n.invalid("attribute equation is missing"))?;
    let xs = n.all_inputs();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let specs: Vec<&str> = lhs.split(',').collect();
    if specs.len() != xs.len() {
        return Err(n.invalid(format!("equation '{eq}' names {} operands, {} given", specs.len(), xs.len())));
    }
    // ellipsis labels: generated from the largest broadcast rank
    let mut ell = Vec::new();
    let mut terms = Vec::with_capacity(xs.len());
    let mut sizes: std::collections::BTreeMap<char, usize> = Default::default();
    for (&x, spec) in xs.iter().zip(&specs) {
        let d = fixed_shape(g, n, x, "Einsum")?;
        let labels = expand(n, spec, Some(d.len()), &mut ell)?;
        if labels.len() != d.len() {
            return Err(n.invalid(format!("'{spec}' for an operand of shape {d:?}")));
        }
        terms.push(Term { v: x, labels });
    }
    let out: Vec<char> = match rhs {
        Some(r) => expand(n, &r, None, &mut ell)?,
        None => {
            // implicit (numpy): the ellipsis labels, then the labels that occur once in the
            // equation, sorted
            let mut count: std::collections::BTreeMap<char, usize> = Default::default();
            for t in &terms {
                for &l in &t.labels {
                    *count.entry(l).or_default() += 1;
                }
            }
            let mut o: Vec<char> = ell.clone();
            o.extend(count.iter().filter(|&(l, &c)| c == 1 && !ell.contains(l)).map(|(&l, _)| l));
            o
        }
    };
    // broadcast: a size-1 ellipsis dim takes the other operands' size
    for t in &terms {
        let d = fixed_shape(g, n, t.v, "Einsum")?;
        for (&l, &s) in t.labels.iter().zip(&d) {
            let e = sizes.entry(l).or_insert(s);
            if *e == 1 {
                *e = s;
            } else if s != 1 && *e != s {
                return Err(n.invalid(format!("label '{l}' has sizes {} and {s}", *e)));
            }
        }
    }
    for t in &mut terms {
        let d = fixed_shape(g, n, t.v, "Einsum")?;
        if t.labels.iter().zip(&d).any(|(l, &s)| s != sizes[l]) {
            let want: Vec<usize> = t.labels.iter().map(|l| sizes[l]).collect();
            t.v = g.broadcast_to(t.v, &want)?;
        }
        *t = diagonal(g, std::mem::replace(t, Term { v: t.v, labels: Vec::new() }), &sizes)?;
    }
    let mut rest = terms.into_iter();
    let mut acc = rest.next().ok_or_else(|| n.invalid("no operands"))?;
    let later: Vec<Term> = rest.collect();
    for k in 0..later.len() {
        // keep the output's labels and those of the operands still to come
        let mut keep = out.clone();
        keep.extend(later[k + 1..].iter().flat_map(|t| t.labels.iter().copied()));
        let t = Term { v: later[k].v, labels: later[k].labels.clone() };
        acc = pair(g, acc, t, &keep, &sizes)?;
    }
    // sum what the output drops, then order as the output
    let drop: Vec<i64> = (0..acc.labels.len()).filter(|&i| !out.contains(&acc.labels[i])).map(|i| i as i64).collect();
    if !drop.is_empty() {
        acc.v = g.reduce_sum(acc.v, Some(&drop), false)?;
        acc.labels.retain(|l| out.contains(l));
    }
    if acc.labels.len() != out.len() {
        return Err(n.invalid(format!("equation '{eq}': an output label is not in any operand")));
    }
    let perm: Vec<usize> = out.iter().map(|l| acc.labels.iter().position(|x| x == l).unwrap_or(0)).collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) { g.identity(acc.v) } else { g.transpose(acc.v, &perm) }
}

/// Takes the diagonal of labels repeated within `t` (a 0/1 mask and a sum).
fn diagonal(g: &mut Graph, mut t: Term, sizes: &std::collections::BTreeMap<char, usize>) -> Result<Term> {
    loop {
        let Some((i, j)) = (0..t.labels.len())
            .flat_map(|i| (i + 1..t.labels.len()).map(move |j| (i, j)))
            .find(|&(i, j)| t.labels[i] == t.labels[j])
        else {
            return Ok(t);
        };
        let s = sizes[&t.labels[i]];
        let r = t.labels.len();
        let mut shape = vec![1usize; r];
        shape[i] = s;
        shape[j] = s;
        let eye: Vec<f64> = (0..s * s).map(|p| f64::from(u8::from(p / s == p % s))).collect();
        let m = g.constant(Tensor::from_vec(&shape, eye)?.cast(g.dtype(t.v)?));
        let y = g.mul(t.v, m)?;
        t.v = g.reduce_sum(y, Some(&[j as i64]), false)?;
        t.labels.remove(j);
    }
}

/// Contracts two terms, keeping the labels in `out` (the output's and the later operands');
/// a label in only one of the terms and not kept is summed first.
fn pair(
    g: &mut Graph,
    a: Term,
    b: Term,
    out: &[char],
    sizes: &std::collections::BTreeMap<char, usize>,
) -> Result<Term> {
    let sum_away = |g: &mut Graph, t: Term, other: &Term| -> Result<Term> {
        let idx: Vec<usize> = (0..t.labels.len())
            .filter(|&i| !out.contains(&t.labels[i]) && !other.labels.contains(&t.labels[i]))
            .collect();
        if idx.is_empty() {
            return Ok(t);
        }
        let ax: Vec<i64> = idx.iter().map(|&i| i as i64).collect();
        let v = g.reduce_sum(t.v, Some(&ax), false)?;
        let labels = t.labels.iter().enumerate().filter(|(i, _)| !idx.contains(i)).map(|(_, &l)| l).collect();
        Ok(Term { v, labels })
    };
    let a = sum_away(g, a, &b)?;
    let b = sum_away(g, b, &a)?;
    let batch: Vec<char> = a.labels.iter().copied().filter(|l| b.labels.contains(l) && out.contains(l)).collect();
    let contr: Vec<char> = a.labels.iter().copied().filter(|l| b.labels.contains(l) && !out.contains(l)).collect();
    let left: Vec<char> = a.labels.iter().copied().filter(|l| !b.labels.contains(l)).collect();
    let right: Vec<char> = b.labels.iter().copied().filter(|l| !a.labels.contains(l)).collect();
    let prod = |ls: &[char]| ls.iter().map(|l| sizes[l]).product::<usize>() as i64;
    let arrange = |g: &mut Graph, t: &Term, order: &[&[char]], dims: [i64; 3]| -> Result<ValueId> {
        let want: Vec<char> = order.iter().flat_map(|s| s.iter().copied()).collect();
        let perm: Vec<usize> = want.iter().map(|l| t.labels.iter().position(|x| x == l).unwrap_or(0)).collect();
        let v = if perm.iter().enumerate().all(|(i, &p)| i == p) { t.v } else { g.transpose(t.v, &perm)? };
        g.reshape(v, &dims)
    };
    let (nb, nl, nk, nr) = (prod(&batch), prod(&left), prod(&contr), prod(&right));
    let av = arrange(g, &a, &[&batch, &left, &contr], [nb, nl, nk])?;
    let bv = arrange(g, &b, &[&batch, &contr, &right], [nb, nk, nr])?;
    let y = g.batch_matmul(av, bv)?;
    let labels: Vec<char> = batch.iter().chain(&left).chain(&right).copied().collect();
    let shape: Vec<i64> = labels.iter().map(|l| sizes[l] as i64).collect();
    let v = g.reshape(y, &shape)?;
    Ok(Term { v, labels })
}
