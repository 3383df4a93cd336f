//! Derivative tests of the `indexing` family: gathers (axis, batch dims, duplicate indices),
//! scatters, segment reductions (dropped rows, ties, zeros in products),
//! `dynamic_update_slice` and `top_k`, first and (for gather and friends) second order.

use super::fd::{FdCase, case, check, randn};
use pfor::autodiff::gradients;
use pfor::prelude::*;

fn i64t(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

fn f64t(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

/// `y * y` so that second derivatives are not identically zero.
fn sq(g: &mut Graph, y: ValueId) -> Result<ValueId> {
    g.mul(y, y)
}

pub fn cases() -> Vec<FdCase> {
    vec![
        case("gather axis 0, duplicate indices", vec![randn(&[4, 3], 1), i64t(&[2, 2], &[0, 2, 2, 3])], |g, x| {
            let y = g.gather(x[0], x[1], 0)?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case("gather middle axis", vec![randn(&[2, 5, 3], 2), i64t(&[3], &[4, 0, 4])], |g, x| {
            let y = g.gather(x[0], x[1], -2)?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case("gather batch_dims 1", vec![randn(&[2, 4, 3], 3), i64t(&[2, 3], &[0, 3, 3, 1, 1, 2])], |g, x| {
            let y = g.gather_batched(x[0], x[1], 1, 1)?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case("gather batch_dims 1, axis 2", vec![randn(&[2, 3, 4], 4), i64t(&[2, 2], &[3, 0, 1, 1])], |g, x| {
            Ok(vec![g.gather_batched(x[0], x[1], 2, 1)?])
        }),
        case("gather_nd", vec![randn(&[3, 4, 2], 5), i64t(&[3, 2], &[0, 1, 2, 3, 0, 1])], |g, x| {
            let y = g.gather_nd(x[0], x[1], 0)?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case("gather_nd batch_dims 1", vec![randn(&[2, 3, 4], 6), i64t(&[2, 2, 1], &[2, 2, 0, 1])], |g, x| {
            Ok(vec![g.gather_nd(x[0], x[1], 1)?])
        }),
        case("scatter_nd, duplicates add", vec![i64t(&[3, 1], &[1, 3, 1]), randn(&[3, 2], 7)], |g, x| {
            let y = g.scatter_nd(x[0], x[1], &[5, 2])?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case("tensor_scatter_add", vec![randn(&[4, 3], 8), i64t(&[3, 1], &[0, 2, 0]), randn(&[3, 3], 9)], |g, x| {
            let y = g.tensor_scatter_add(x[0], x[1], x[2])?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case(
            "tensor_scatter_update, duplicates: last wins",
            vec![randn(&[4, 3], 10), i64t(&[3, 1], &[1, 3, 1]), randn(&[3, 3], 11)],
            |g, x| {
                let y = g.tensor_scatter_update(x[0], x[1], x[2])?;
                Ok(vec![sq(g, y)?])
            },
        )
        .second(),
        case(
            "tensor_scatter_update, element indices",
            vec![randn(&[3, 3], 12), i64t(&[2, 2], &[0, 1, 2, 2]), randn(&[2], 13)],
            |g, x| Ok(vec![g.tensor_scatter_update(x[0], x[1], x[2])?]),
        ),
        case(
            "unsorted_segment_sum, dropped row, empty segment",
            vec![randn(&[5, 2], 14), i64t(&[5], &[0, 2, -1, 2, 0])],
            |g, x| {
                let y = g.unsorted_segment_sum(x[0], x[1], 3)?;
                Ok(vec![sq(g, y)?])
            },
        )
        .second(),
        case("unsorted_segment_max", vec![randn(&[6, 2], 15), i64t(&[6], &[1, 0, 1, -1, 1, 0])], |g, x| {
            let y = g.unsorted_segment_max(x[0], x[1], 2)?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case(
            "unsorted_segment_min, 2-d ids",
            vec![randn(&[2, 3, 2], 16), i64t(&[2, 3], &[0, 1, 0, 1, 1, -1])],
            |g, x| Ok(vec![g.unsorted_segment_min(x[0], x[1], 2)?]),
        )
        .second(),
        case("unsorted_segment_prod", vec![randn(&[5, 2], 17), i64t(&[5], &[0, 1, 0, -1, 0])], |g, x| {
            let y = g.unsorted_segment_prod(x[0], x[1], 2)?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case(
            "unsorted_segment_prod with zeros (one, two)",
            vec![f64t(&[7], &[2.0, 0.0, 0.0, 3.0, 0.0, 0.5, 1.5]), i64t(&[7], &[0, 0, 1, 1, 1, 2, 2])],
            |g, x| Ok(vec![g.unsorted_segment_prod(x[0], x[1], 3)?]),
        ),
        case("dynamic_update_slice", vec![randn(&[4, 5], 18), randn(&[2, 3], 19), i64t(&[2], &[1, 2])], |g, x| {
            let y = g.dynamic_update_slice(x[0], x[1], x[2])?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case(
            "dynamic_update_slice, update shape known at run time",
            vec![randn(&[4, 5], 31), randn(&[2, 3], 32), i64t(&[2], &[1, 2])],
            |g, x| {
                let (o, u) = (super::fd::dyn_dims(g, x[0])?, super::fd::dyn_dims(g, x[1])?);
                let y = g.dynamic_update_slice(o, u, x[2])?;
                Ok(vec![sq(g, y)?])
            },
        )
        .second(),
        case(
            "tensor_scatter_update, index rows known at run time",
            vec![randn(&[4, 3], 33), i64t(&[3, 1], &[1, 3, 1]), randn(&[3, 3], 34)],
            |g, x| {
                let s = g.shape_of(x[1])?;
                let s = g.slice(s, &[0], &[1])?;
                let k = g.constant(Tensor::vec1(&[1i64]));
                let s = g.concat(&[s, k], 0)?;
                let idx = g.reshape_dyn(x[1], s)?;
                let idx = g.reshape(idx, &[-1, 1])?;
                let u = super::fd::dyn_dims(g, x[2])?;
                let y = g.tensor_scatter_update(x[0], idx, u)?;
                Ok(vec![sq(g, y)?])
            },
        )
        .second(),
        case("top_k values", vec![randn(&[2, 5], 20)], |g, x| {
            let (v, i) = g.top_k(x[0], 3)?;
            Ok(vec![sq(g, v)?, i])
        })
        .second(),
    ]
}

#[test]
fn indexing_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn segment_max_splits_ties_equally() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [4]);
    let ids = g.constant(i64t(&[4], &[0, 0, 0, 1]));
    let y = g.unsorted_segment_max(x, ids, 2).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, f64t(&[4], &[3.0, 1.0, 3.0, -2.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![0.5, 0.0, 0.5, 1.0]);
}

#[test]
fn index_inputs_and_nonzero_get_no_gradient() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let nz = g.nonzero(x).unwrap();
    let nzf = g.cast(nz, DType::F64).unwrap();
    let l = g.sum_all(nzf).unwrap();
    let d = gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, f64t(&[3], &[1.0, 0.0, 2.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![0.0; 3]);
    assert!(!pfor::autodiff::is_differentiable(OpKind::Index(pfor::ops::IndexKind::NonZero)));
}

#[test]
fn gather_nd_with_batch_dims_differentiates_indices_of_run_time_shape() {
    // indices [2, m, 1] with m known only at run time (the rows of a pfor'd Subset form)
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2, 3, 4]);
    let idx = g.input("i", DType::I64, Shape::from_dims([Dim::Fixed(2), Dim::dynamic("m"), Dim::Fixed(1)]));
    let y = g.gather_nd(x, idx, 1).unwrap();
    let y2 = g.mul(y, y).unwrap();
    let l = g.sum_all(y2).unwrap();
    let d = gradients(&mut g, &[l], &[x], None).unwrap()[0];
    let xv = randn(&[2, 3, 4], 7);
    let r = run_once(&g, &[d], &[(x, xv.clone()), (idx, i64t(&[2, 3, 1], &[2, 2, 0, 1, 1, 0]))]).unwrap();
    // d/dx Σ x[b, i]² = 2·x[b, i] per occurrence of row i in batch b
    let xs = xv.to_f64_vec();
    let mut want = vec![0.0; 24];
    for (b, rows) in [[2usize, 2, 0], [1, 1, 0]].iter().enumerate() {
        for &i in rows {
            for c in 0..4 {
                let at = b * 12 + i * 4 + c;
                want[at] += 2.0 * xs[at];
            }
        }
    }
    assert_eq!(r[0], f64t(&[2, 3, 4], &want));
}
