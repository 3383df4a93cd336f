//! Oracle tests: the 16 TF-style matmul combinations (transpose_a × transpose_b × stacked a ×
//! stacked b), batch_matmul with broadcasting, and the no-tiling guarantee for weights.

use super::oracle::{Spec, assert_oracle};
use crate::common::coverage::pfor_recorded;
use pfor::ops::{LinearKind, ShapeKind};
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

#[test]
fn sixteen_matmul_combinations() {
    for ta in [false, true] {
        for tb in [false, true] {
            let a = if ta { vec![4, 3] } else { vec![3, 4] };
            let b = if tb { vec![5, 4] } else { vec![4, 5] };
            // assert_oracle covers stacked a × stacked b (4 patterns) for each flag pair
            assert_oracle(&[Spec::f64(&a), Spec::f64(&b)], &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![g.matmul_t(x[0], x[1], ta, tb)?])
            });
        }
    }
}

#[test]
fn batch_matmul_with_broadcast_batch_dims() {
    for (sa, sb) in [(vec![2, 3, 4], vec![4, 5]), (vec![3, 4], vec![2, 4, 5]), (vec![2, 1, 3, 4], vec![3, 4, 2])] {
        for (ta, tb) in [(false, false), (true, true)] {
            let mut a = sa.clone();
            let mut b = sb.clone();
            if ta {
                let r = a.len();
                a.swap(r - 1, r - 2);
            }
            if tb {
                let r = b.len();
                b.swap(r - 1, r - 2);
            }
            assert_oracle(&[Spec::f64(&a), Spec::f64(&b)], &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![g.batch_matmul_t(x[0], x[1], ta, tb)?])
            });
        }
    }
}

#[test]
fn an_invariant_weight_is_never_tiled() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [64, 768]);
    let w = g.constant(Tensor::randn(&[768, 768], 1).unwrap());
    let out = pfor_recorded(&mut g, 64, &PforOptions::strict(), |g, i| {
        let xi = g.gather(x, i, 0)?;
        let xi = g.reshape(xi, &[1, 768])?;
        Ok(vec![g.matmul(xi, w)?])
    })
    .unwrap();
    let nodes = g.ancestors(&out).unwrap();
    let kinds: Vec<OpKind> = nodes.iter().map(|n| g.node(*n).unwrap().op.kind()).collect();
    // exactly one matmul, reading the weight itself
    let mm: Vec<_> =
        nodes.iter().filter(|n| g.node(**n).unwrap().op.kind() == OpKind::Linear(LinearKind::MatMul)).collect();
    assert_eq!(mm.len(), 1, "{g}");
    assert_eq!(g.node(*mm[0]).unwrap().inputs[1], w);
    for k in [ShapeKind::Tile, ShapeKind::BroadcastTo, ShapeKind::BroadcastToDyn] {
        assert!(!kinds.contains(&OpKind::Shape(k)), "{k:?} in\n{g}");
    }
    assert!(!kinds.contains(&OpKind::Linear(LinearKind::BatchMatMul)));
    // and it computes the right thing
    let xv = Tensor::randn(&[64, 768], 2).unwrap();
    let r = run_once(&g, &out, &[(x, xv.clone())]).unwrap();
    let want = xv.to_array::<f32>().unwrap().into_dimensionality::<ndarray::Ix2>().unwrap().dot(
        &Tensor::randn(&[768, 768], 1)
            .unwrap()
            .to_array::<f32>()
            .unwrap()
            .into_dimensionality::<ndarray::Ix2>()
            .unwrap(),
    );
    let got = r[0].reshape(&[64, 768]).unwrap();
    pfor::tensor::assert_close(&got, &Tensor::from_array(want), 1e-3, 1e-3).unwrap();
}

#[test]
fn matmul_of_any_rank_under_pfor() {
    // per-iteration operands of every rank pattern; assert_oracle stacks each side or not
    let cases: [(&[usize], &[usize]); 6] = [
        (&[3], &[3]),
        (&[3], &[3, 4]),
        (&[2, 3], &[3]),
        (&[5, 2, 3], &[3, 4]),
        (&[2, 3], &[5, 3, 4]),
        (&[3], &[2, 3, 4]),
    ];
    for (sa, sb) in cases {
        assert_oracle(&[Spec::f64(sa), Spec::f64(sb)], &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.matmul(x[0], x[1])?]));
    }
}
