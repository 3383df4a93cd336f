//! Derivative tests of the `linear` family: `matmul` with every transpose combination and
//! `batch_matmul` with every adjoint combination, equal, size-1-broadcast and rank-broadcast
//! batch dims, first and second order.

use super::fd::{FdCase, case, check, randn};
use pfor::prelude::*;

const FLAGS: [(bool, bool); 4] = [(false, false), (false, true), (true, false), (true, true)];

/// Stored shape of an operand `[.., r, c]` of logical shape `[.., rows, cols]`.
fn stored(batch: &[usize], rows: usize, cols: usize, adj: bool) -> Vec<usize> {
    let mut s = batch.to_vec();
    if adj {
        s.extend([cols, rows]);
    } else {
        s.extend([rows, cols]);
    }
    s
}

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    let (m, k, n) = (2, 3, 4);
    let mut v = Vec::new();
    for (i, &(ta, tb)) in FLAGS.iter().enumerate() {
        let seed = 10 * i as u64;
        v.push(
            case(
                &format!("matmul transpose_a={ta} transpose_b={tb}"),
                vec![randn(&stored(&[], m, k, ta), seed), randn(&stored(&[], k, n, tb), seed + 1)],
                move |g, x| Ok(vec![g.matmul_t(x[0], x[1], ta, tb)?]),
            )
            .second(),
        );
    }
    // (batch of a, batch of b): equal, size-1 broadcast on either side, rank broadcast.
    let batches: [(&[usize], &[usize]); 4] = [(&[2], &[2]), (&[3, 1], &[2]), (&[], &[2, 2]), (&[2, 1], &[1, 3])];
    for (i, &(ta, tb)) in FLAGS.iter().enumerate() {
        for (j, (ba, bb)) in batches.iter().enumerate() {
            let seed = 100 + 10 * i as u64 + 2 * j as u64;
            let c = case(
                &format!("batch_matmul adj_a={ta} adj_b={tb} batch {ba:?} x {bb:?}"),
                vec![randn(&stored(ba, m, k, ta), seed), randn(&stored(bb, k, n, tb), seed + 1)],
                move |g, x| Ok(vec![g.batch_matmul_t(x[0], x[1], ta, tb)?]),
            );
            // Second order on the broadcasting ones (the sum_to path differentiated again).
            v.push(if j == 1 || j == 3 { c.second() } else { c });
        }
    }
    // Any-rank matmul (numpy semantics, lowered to the two kinds): vectors and broadcast batches.
    let ranks: [(&[usize], &[usize]); 5] =
        [(&[3], &[3]), (&[3], &[3, 2]), (&[2, 3], &[3]), (&[2, 2, 3], &[3, 2]), (&[3], &[2, 3, 2])];
    for (i, (sa, sb)) in ranks.into_iter().enumerate() {
        let seed = 300 + 2 * i as u64;
        v.push(
            case(&format!("matmul of ranks {sa:?} x {sb:?}"), vec![randn(sa, seed), randn(sb, seed + 1)], |g, x| {
                Ok(vec![g.matmul(x[0], x[1])?])
            })
            .second(),
        );
    }
    // A product of a value with itself (both cotangent paths accumulate), and a chain.
    v.push(
        case("matmul x xᵀ", vec![randn(&[3, 2], 7)], |g, x| Ok(vec![g.matmul_t(x[0], x[0], false, true)?])).second(),
    );
    v.push(
        case("batch_matmul chain a b a", vec![randn(&[2, 3, 3], 8), randn(&[3, 3], 9)], |g, x| {
            let p = g.batch_matmul(x[0], x[1])?;
            Ok(vec![g.batch_matmul_t(p, x[0], false, true)?])
        })
        .second(),
    );
    v
}

#[test]
fn linear_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn matmul_gradient_has_the_operand_shapes() {
    // d/dA sum(A B) = 1 Bᵀ: each row of the gradient is the row sums of B.
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [2, 3]);
    let b = g.input("b", DType::F64, [1, 3, 2]);
    let c = g.batch_matmul(a, b).unwrap();
    let l = g.sum_all(c).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[a, b], None).unwrap();
    assert_eq!(g.shape(d[0]).unwrap().as_fixed().unwrap(), vec![2, 3]);
    assert_eq!(g.shape(d[1]).unwrap().as_fixed().unwrap(), vec![1, 3, 2]);
    let bv = Tensor::from_vec(&[1, 3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let av = Tensor::from_vec(&[2, 3], vec![1.0f64, 0.0, 0.0, 0.0, 1.0, 1.0]).unwrap();
    let v = run_once(&g, &d, &[(a, av), (b, bv)]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![3.0, 7.0, 11.0, 3.0, 7.0, 11.0]);
    // d/dB = Aᵀ 1: column sums of A on every column.
    assert_eq!(v[1].to_f64_vec(), vec![1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
}

#[test]
fn matmul_gradient_through_a_constant_weight_reads_the_weight_itself() {
    // d/dA sum((A W) W) for a constant W [2,2] is Ā = (1 Wᵀ) Wᵀ: both VJP products read W
    // (with transpose_b); the rule adds no constant (a copy would cut the path to W).
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [1, 2]);
    let w = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]).unwrap());
    let c = g.matmul(a, w).unwrap();
    let c = g.matmul(c, w).unwrap();
    let l = g.sum_all(c).unwrap();
    let before = g.node_ids();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[a], None).unwrap();
    let new: Vec<_> = g.node_ids().into_iter().filter(|n| !before.contains(n)).collect();
    let kind = |n| g.node(n).unwrap().op.kind();
    assert!(!new.iter().any(|&n| kind(n) == OpKind::Const && g.node(n).unwrap().outputs[0].rank() == 2));
    let products: Vec<_> = new.iter().filter(|&&n| kind(n) == OpKind::Linear(pfor::ops::LinearKind::MatMul)).collect();
    assert_eq!(products.len(), 2);
    for &&n in &products {
        assert_eq!(g.node(n).unwrap().inputs[1], w, "{}", g.node(n).unwrap().op);
    }
    let v = run_once(&g, &d, &[(a, Tensor::from_vec(&[1, 2], vec![0.5f64, -1.0]).unwrap())]).unwrap();
    // 1 Wᵀ = [3, 7]; [3, 7] Wᵀ = [3+14, 9+28] = [17, 37].
    assert_eq!(v[0].to_f64_vec(), vec![17.0, 37.0]);
}

/// `d/dW <v, d/dx sum(r · tanh(x W))>` at `x` `[2, 3]`, `W` `[3, 4]`: the gradient w.r.t. `W`
/// of a function of the INPUT gradient, so the path through `W` inside `dx = dc Wᵀ` counts.
/// `W` is a graph constant (`w_const`) or an input fed the same value; returns the second
/// derivative and the function computing `s` for finite differences.
fn hv_through_weight(w_const: bool, wv: &Tensor) -> (Vec<f64>, impl Fn(&Tensor) -> f64) {
    let xv = randn(&[2, 3], 40);
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2, 3]);
    let w = if w_const { g.constant(wv.clone()) } else { g.input("w", DType::F64, [3, 4]) };
    let z = g.matmul(x, w).unwrap();
    let z = g.tanh(z).unwrap();
    let r = g.constant(randn(&[2, 4], 41));
    let p = g.mul(z, r).unwrap();
    let l = g.sum_all(p).unwrap();
    let dx = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap()[0];
    let v = g.constant(randn(&[2, 3], 42));
    let p = g.mul(dx, v).unwrap();
    let s = g.sum_all(p).unwrap();
    let dw = pfor::autodiff::gradients(&mut g, &[s], &[w], None).unwrap()[0];
    let mut feeds = vec![(x, xv.clone())];
    if !w_const {
        feeds.push((w, wv.clone()));
    }
    let got = run_once(&g, &[dw], &feeds).unwrap()[0].to_f64_vec();
    let f = move |wt: &Tensor| {
        let mut feeds = vec![(x, xv.clone())];
        if !w_const {
            feeds.push((w, wt.clone()));
        }
        run_once(&g, &[s], &feeds).unwrap()[0].scalar_f64().unwrap()
    };
    (got, f)
}

#[test]
fn second_derivative_through_a_constant_weight_matches_an_input_weight_and_fd() {
    let wv = randn(&[3, 4], 43);
    let (via_const, _) = hv_through_weight(true, &wv);
    let (via_input, s) = hv_through_weight(false, &wv);
    // Central differences of s in each element of W (W an input).
    let eps = 1e-5;
    let base = wv.to_f64_vec();
    let fd: Vec<f64> = (0..base.len())
        .map(|j| {
            let at = |d: f64| {
                let mut v = base.clone();
                v[j] += d;
                s(&Tensor::from_vec(&[3, 4], v).unwrap())
            };
            (at(eps) - at(-eps)) / (2.0 * eps)
        })
        .collect();
    for j in 0..fd.len() {
        assert!((via_input[j] - fd[j]).abs() < 1e-6 * (1.0 + fd[j].abs()), "input W [{j}]: {via_input:?} vs fd {fd:?}");
        assert!(
            (via_const[j] - via_input[j]).abs() < 1e-12 * (1.0 + fd[j].abs()),
            "constant W [{j}]: {via_const:?} vs input W {via_input:?}"
        );
    }
}

#[test]
fn gradient_of_a_batched_matmul_equals_the_sum_of_per_example_gradients() {
    // d/dW sum(tanh(x W)) for x [4, 2, 3] and one W [3, 2]: the batch dims of x broadcast
    // over W, so W's gradient sums the per-example gradients of the 2-D products.
    let xs = randn(&[4, 2, 3], 1);
    let wv = randn(&[3, 2], 2);
    let grad_of = |x: Tensor| -> Tensor {
        let mut g = Graph::new();
        let x = g.constant(x);
        let w = g.input("w", DType::F64, [3, 2]);
        let y = g.matmul(x, w).unwrap();
        let y = g.tanh(y).unwrap();
        let l = g.sum_all(y).unwrap();
        let d = pfor::autodiff::gradients(&mut g, &[l], &[w], None).unwrap();
        run_once(&g, &d, &[(w, wv.clone())]).unwrap().remove(0)
    };
    let batched = grad_of(xs.clone());
    let mut want = vec![0.0; 6];
    for r in 0..4 {
        let row = Tensor::from_vec(&[2, 3], xs.to_f64_vec()[6 * r..6 * r + 6].to_vec()).unwrap();
        for (acc, v) in want.iter_mut().zip(grad_of(row).to_f64_vec()) {
            *acc += v;
        }
    }
    let got = batched.to_f64_vec();
    assert_eq!(batched.shape(), &[3, 2]);
    for (p, q) in got.iter().zip(&want) {
        assert!((p - q).abs() < 1e-12, "{got:?} vs {want:?}");
    }
}
