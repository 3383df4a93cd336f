//! The product rewrites (`pfor::vectorize::contract_since`): golden tests per rewrite (what
//! the rewritten graph computes with: no stacked `[n, k, o]` product left, or the product
//! kept when the ghost form costs more) and the oracle (the rewritten result equals the
//! materialized one on random inputs).

use pfor::prelude::*;
use pfor::vectorize::{PforOptions, ProductReport, contract_since, pfor_with};

/// Whether any live value computing `outs` has exactly the static shape `dims`.
fn has_shape(g: &Graph, outs: &[ValueId], dims: &[usize]) -> bool {
    g.ancestors(outs)
        .unwrap()
        .into_iter()
        .any(|n| g.node(n).unwrap().outputs.iter().any(|t| t.shape.as_fixed().as_deref() == Some(dims)))
}

/// Build `body` under pfor over `n` rows of the inputs, evaluate, rewrite, re-evaluate:
/// the two results agree to 1e-10 relative. Returns the graph, the report and new outputs.
fn golden(
    n: usize,
    inputs: &[&[usize]],
    body: impl Fn(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    after_pfor: impl FnOnce(&mut Graph, Vec<ValueId>) -> Result<Vec<ValueId>>,
) -> (Graph, ProductReport) {
    let mut g = Graph::new();
    let xs: Vec<ValueId> = inputs
        .iter()
        .map(|s| {
            let mut d = vec![n];
            d.extend(*s);
            g.input("x", DType::F64, d)
        })
        .collect();
    let feeds: Vec<(ValueId, Tensor)> = xs
        .iter()
        .enumerate()
        .map(|(k, &x)| (x, Tensor::randn_f64(&g.shape(x).unwrap().as_fixed().unwrap(), 7 + k as u64).unwrap()))
        .collect();
    let mark = g.mark();
    let outs = pfor_with(&mut g, n, &PforOptions::strict().with_products(false), |g, i| {
        let rows = xs.iter().map(|&x| g.gather(x, i, 0)).collect::<Result<Vec<_>>>()?;
        body(g, &rows)
    })
    .unwrap();
    let outs = after_pfor(&mut g, outs).unwrap();
    let before = run_once(&g, &outs, &feeds).unwrap();
    let rep = contract_since(&mut g, &outs, mark).unwrap();
    g.verify().unwrap();
    let after = run_once(&g, &rep.outputs, &feeds).unwrap();
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(a.shape(), b.shape());
        for (x, y) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
            assert!((x - y).abs() <= 1e-10 * (1.0 + x.abs()), "{x} vs {y}\n{g}");
        }
    }
    (g, rep)
}

/// Row `i`'s product `a_i b_i` with `a_i` `[k, t]` and `b_i` `[t, o]` (given as rows).
fn product(g: &mut Graph, a: ValueId, b: ValueId, kt: [i64; 2], to: [i64; 2]) -> Result<ValueId> {
    let a = g.reshape(a, &kt)?;
    let b = g.reshape(b, &to)?;
    g.matmul(a, b)
}

fn sq_norm(g: &mut Graph, p: ValueId) -> Result<ValueId> {
    let s = g.square(p)?;
    g.sum_all(s)
}

#[test]
fn scaled_sum_of_outer_products_becomes_one_matmul() {
    let (n, k, o) = (6, 5, 4);
    let (g, rep) = golden(
        n,
        &[&[k], &[o], &[]],
        |g, r| {
            let p = product(g, r[0], r[1], [5, 1], [1, 4])?;
            Ok(vec![g.mul(r[2], p)?])
        },
        |g, outs| Ok(vec![g.reduce_sum(outs[0], Some(&[0]), false)?]),
    );
    assert_eq!(rep.contractions, 1, "{g}");
    assert!(!has_shape(&g, &rep.outputs, &[n, k, o]), "the [n,k,o] product is gone\n{g}");
}

#[test]
fn plain_sum_over_rows_of_a_product_with_inner_dim_contracts_too() {
    let (n, k, t, o) = (4, 3, 2, 5);
    let (g, rep) = golden(
        n,
        &[&[k * t], &[t * o]],
        |g, r| Ok(vec![product(g, r[0], r[1], [3, 2], [2, 5])?]),
        |g, outs| Ok(vec![g.reduce_sum(outs[0], Some(&[0]), true)?]),
    );
    assert_eq!(rep.contractions, 1, "{g}");
    assert!(!has_shape(&g, &rep.outputs, &[n, k, o]), "{g}");
}

#[test]
fn squared_norm_of_an_outer_product_is_rank_one_ghost() {
    let (n, k, o) = (5, 7, 6);
    let (g, rep) = golden(
        n,
        &[&[k], &[o]],
        |g, r| {
            let p = product(g, r[0], r[1], [7, 1], [1, 6])?;
            Ok(vec![sq_norm(g, p)?])
        },
        |_, outs| Ok(outs),
    );
    assert_eq!((rep.ghost_rank1, rep.ghost_gram), (1, 0), "{g}");
    assert!(!has_shape(&g, &rep.outputs, &[n, k, o]), "{g}");
}

#[test]
fn squared_norm_over_few_positions_is_the_gram_form() {
    // T (k + o) = 2 * 17 < k o = 72
    let (n, k, t, o) = (3, 8, 2, 9);
    let (g, rep) = golden(
        n,
        &[&[k * t], &[t * o]],
        |g, r| {
            let p = product(g, r[0], r[1], [8, 2], [2, 9])?;
            Ok(vec![sq_norm(g, p)?])
        },
        |_, outs| Ok(outs),
    );
    assert_eq!((rep.ghost_rank1, rep.ghost_gram), (0, 1), "{g}");
    assert!(!has_shape(&g, &rep.outputs, &[n, k, o]), "{g}");
    assert!(has_shape(&g, &rep.outputs, &[n, t, t]), "the Gram matrices\n{g}");
}

#[test]
fn squared_norm_over_many_positions_stays_materialized() {
    // T (k + o) = 6 * 7 > k o = 12
    let (n, k, t, o) = (3, 3, 6, 4);
    let (g, rep) = golden(
        n,
        &[&[k * t], &[t * o]],
        |g, r| {
            let p = product(g, r[0], r[1], [3, 6], [6, 4])?;
            Ok(vec![sq_norm(g, p)?])
        },
        |_, outs| Ok(outs),
    );
    assert_eq!((rep.ghost_rank1, rep.ghost_gram, rep.materialized), (0, 0, 1), "{g}");
    assert!(has_shape(&g, &rep.outputs, &[n, k, o]), "{g}");
}

#[test]
fn a_weight_used_twice_is_one_product_of_inner_dim_two_not_rank_one() {
    // p = a1 ⊗ b1 + a2 ⊗ b2: the rank-1 shortcut would give |a1|²|b1|² + |a2|²|b2|²
    let (n, k, o) = (4, 6, 5);
    let (g, rep) = golden(
        n,
        &[&[k], &[o], &[k], &[o]],
        |g, r| {
            let p1 = product(g, r[0], r[1], [6, 1], [1, 5])?;
            let p2 = product(g, r[2], r[3], [6, 1], [1, 5])?;
            let p = g.add(p1, p2)?;
            Ok(vec![sq_norm(g, p)?, p])
        },
        |g, outs| Ok(vec![outs[0], g.reduce_sum(outs[1], Some(&[0]), false)?]),
    );
    assert_eq!((rep.ghost_rank1, rep.ghost_gram, rep.contractions), (0, 1, 1), "{g}");
    assert!(!has_shape(&g, &rep.outputs, &[n, k, o]), "{g}");
}

#[test]
fn reductions_of_non_products_are_left_alone() {
    let (_, rep) = golden(
        3,
        &[&[4, 5]],
        |g, r| {
            let e = g.exp(r[0])?;
            Ok(vec![sq_norm(g, e)?, e])
        },
        |g, outs| Ok(vec![outs[0], g.reduce_sum(outs[1], Some(&[0]), false)?]),
    );
    assert_eq!(rep.contractions + rep.ghost_rank1 + rep.ghost_gram + rep.materialized, 0);
    assert!(rep.simplified.is_none());
}

/// Row `i`'s conv filter gradient `[2, 2, 8, 16]` of a 3x3x8 image and a 2x2x16 output gradient
/// (valid 2x2 conv: T = 4 positions, k = 32, o = 16).
fn filter_grad(g: &mut Graph, r: &[ValueId]) -> Result<ValueId> {
    let x = g.reshape(r[0], &[1, 3, 3, 8])?;
    let dy = g.reshape(r[1], &[1, 2, 2, 16])?;
    g.conv2d_backprop_filter(x, dy, Conv2dParams::default(), [2, 2])
}

#[test]
fn conv_filter_gradients_take_the_patch_form_rules() {
    // T (k + o) = 4 * 48 < k o = 512: the Gram form; the clipped sum is one contraction
    let n = 3;
    let (g, rep) = golden(
        n,
        &[&[72], &[64]],
        |g, r| {
            let p = filter_grad(g, r)?;
            Ok(vec![sq_norm(g, p)?, p])
        },
        |g, outs| Ok(vec![outs[0], g.reduce_sum(outs[1], Some(&[0]), false)?]),
    );
    assert_eq!((rep.ghost_gram, rep.contractions), (1, 1), "{g}");
    assert!(!has_shape(&g, &rep.outputs, &[n, 2, 2, 8, 16]), "{g}");
}

/// How many live values computing `outs` have exactly the static shape `dims`.
fn count_shape(g: &Graph, outs: &[ValueId], dims: &[usize]) -> usize {
    g.ancestors(outs)
        .unwrap()
        .into_iter()
        .map(|n| g.node(n).unwrap().outputs.iter().filter(|t| t.shape.as_fixed().as_deref() == Some(dims)).count())
        .sum()
}

#[test]
fn a_materialized_product_is_read_once_by_its_norm_and_once_by_its_clipped_sum() {
    // T (k + o) = 6 * 7 > k o = 12: the product stays; its squared norm is a batched self-dot
    // and its scaled sum over the rows one row-vector product, so no squared or scaled
    // [n, k, o] copy is written (before: square, mul and the product: three such values)
    let (n, k, t, o) = (5, 3, 6, 4);
    let (g, rep) = golden(
        n,
        &[&[k * t], &[t * o], &[]],
        |g, r| {
            let p = product(g, r[0], r[1], [3, 6], [6, 4])?;
            Ok(vec![sq_norm(g, p)?, g.mul(r[2], p)?])
        },
        |g, outs| Ok(vec![outs[0], g.reduce_sum(outs[1], Some(&[0]), false)?]),
    );
    assert_eq!((rep.materialized, rep.weighted_sums, rep.contractions), (1, 1, 0), "{g}");
    assert_eq!(count_shape(&g, &rep.outputs, &[n, k, o]), 1, "only the product itself\n{g}");
}
