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
fn matmul_gradient_through_a_constant_weight_reads_one_shared_transposed_copy() {
    // d/dA sum((A W) W) for a constant W [2,2] is Ā = (1 Wᵀ) Wᵀ; the VJPs of both
    // products read Wᵀ from one shared transposed constant (W plus one copy).
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [1, 2]);
    let w = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]).unwrap());
    let c = g.matmul(a, w).unwrap();
    let c = g.matmul(c, w).unwrap();
    let l = g.sum_all(c).unwrap();
    let before = g.num_nodes();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[a], None).unwrap();
    let consts = g
        .node_ids()
        .into_iter()
        .filter(|&n| matches!(g.node(n).unwrap().op, Op::Const { .. }))
        .filter(|&n| g.node(n).unwrap().outputs[0].shape.as_fixed() == Some(vec![2, 2]))
        .count();
    assert!(g.num_nodes() > before);
    assert_eq!(consts, 2, "W and one shared Wᵀ");
    let v = run_once(&g, &d, &[(a, Tensor::from_vec(&[1, 2], vec![0.5f64, -1.0]).unwrap())]).unwrap();
    // 1 Wᵀ = [3, 7]; [3, 7] Wᵀ = [3+14, 9+28] = [17, 37].
    assert_eq!(v[0].to_f64_vec(), vec![17.0, 37.0]);
}
