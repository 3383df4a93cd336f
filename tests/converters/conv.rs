//! Oracle tests: convolutions and pools with every stacked/unstacked pattern.

use super::oracle::{Spec, assert_oracle, check_case};
use pfor::prelude::*;

fn p(strides: [usize; 2], padding: Padding, dilations: [usize; 2]) -> Conv2dParams {
    Conv2dParams { strides, padding, dilations }
}

#[test]
fn conv2d_stride2_valid_and_same_with_dilation() {
    for params in
        [p([2, 2], Padding::Valid, [1, 1]), p([1, 1], Padding::Same, [1, 1]), p([1, 2], Padding::Same, [2, 1])]
    {
        let specs = [Spec::f64(&[2, 6, 5, 3]), Spec::f64(&[3, 2, 3, 4])];
        for st in [[true, false], [false, true]] {
            for n in [0, 1, 3] {
                for dy in [false, true] {
                    check_case(&specs, &st, n, dy, 5, &|g: &mut Graph, x: &[ValueId]| {
                        Ok(vec![g.conv2d(x[0], x[1], params)?])
                    })
                    .unwrap();
                }
            }
        }
    }
}

#[test]
fn conv_backprops_fold_into_batch_or_channels() {
    let params = p([2, 1], Padding::Same, [1, 1]);
    // forward shapes: x [2,5,4,3], f [3,2,3,4] -> dy [2,3,4,4]
    let specs = [Spec::f64(&[3, 2, 3, 4]), Spec::f64(&[2, 3, 4, 4])];
    for st in [[true, false], [false, true]] {
        for n in [0, 1, 3] {
            check_case(&specs, &st, n, false, 6, &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![g.conv2d_backprop_input(x[0], x[1], params, [5, 4])?])
            })
            .unwrap();
        }
    }
    let specs = [Spec::f64(&[2, 5, 4, 3]), Spec::f64(&[2, 3, 4, 4])];
    for st in [[true, false], [false, true]] {
        for n in [0, 1, 3] {
            check_case(&specs, &st, n, true, 7, &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![g.conv2d_backprop_filter(x[0], x[1], params, [3, 2])?])
            })
            .unwrap();
        }
    }
}

#[test]
fn depthwise_and_pools() {
    let params = p([1, 1], Padding::Same, [1, 1]);
    assert_oracle(&[Spec::f64(&[1, 4, 4, 2]), Spec::f64(&[3, 3, 2, 2])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![g.depthwise_conv2d(x[0], x[1], params)?])
    });
    // (a dynamic loop length of 0 is a documented error for this op: skip dynamic n = 0)
    let specs = [Spec::f64(&[1, 4, 4, 2]), Spec::f64(&[1, 4, 4, 4])];
    for st in [[true, false], [false, true], [true, true]] {
        for (n, dy) in [(0, false), (1, false), (1, true), (3, false), (3, true)] {
            check_case(&specs, &st, n, dy, 8, &|g: &mut Graph, x: &[ValueId]| {
                Ok(vec![g.depthwise_conv2d_backprop_filter(x[0], x[1], params, [3, 3])?])
            })
            .unwrap();
        }
    }
    assert_oracle(&[Spec::f64(&[2, 5, 4, 3]), Spec::f64(&[2, 3, 2, 3])], &|g: &mut Graph, x: &[ValueId]| {
        Ok(vec![
            g.max_pool(x[0], [2, 2], [2, 2], Padding::Same)?,
            g.avg_pool(x[0], [3, 2], [1, 2], Padding::Valid)?,
            g.max_pool_grad(x[0], x[1], [2, 2], [2, 2], Padding::Same)?,
            g.avg_pool_grad(x[1], [2, 2], [2, 2], Padding::Same, [5, 4])?,
        ])
    });
}

#[test]
fn grouped_convolutions_with_both_operands_stacked() {
    // conv2d and both backprops with every pattern, including both operands loop-variant
    // (the batched im2col GEMM of converters/conv/grouped.rs), strided, dilated, SAME/VALID.
    for (params, hw, khw) in [
        (p([1, 1], Padding::Same, [1, 1]), [5, 4], [3, 2]),
        (p([2, 1], Padding::Same, [1, 1]), [5, 4], [3, 2]),
        (p([2, 2], Padding::Valid, [1, 1]), [6, 5], [3, 3]),
        (p([1, 2], Padding::Same, [2, 1]), [6, 5], [2, 3]),
        (p([3, 2], Padding::Valid, [2, 2]), [7, 6], [2, 2]),
    ] {
        let (b, c, o) = (2, 3, 2);
        let x = Spec::f64(&[b, hw[0], hw[1], c]);
        let f = Spec::f64(&[khw[0], khw[1], c, o]);
        // the forward output shape gives dy's shape
        let mut g = Graph::new();
        let (xv, fv) =
            (g.input("x", DType::F64, [b, hw[0], hw[1], c]), g.input("f", DType::F64, [khw[0], khw[1], c, o]));
        let y = g.conv2d(xv, fv, params).unwrap();
        let dy = Spec::f64(&g.shape(y).unwrap().as_fixed().unwrap());
        assert_oracle(&[x.clone(), f.clone()], &|g: &mut Graph, v: &[ValueId]| Ok(vec![g.conv2d(v[0], v[1], params)?]));
        assert_oracle(&[x, dy.clone()], &|g: &mut Graph, v: &[ValueId]| {
            Ok(vec![g.conv2d_backprop_filter(v[0], v[1], params, khw)?])
        });
        assert_oracle(&[f, dy], &|g: &mut Graph, v: &[ValueId]| {
            Ok(vec![g.conv2d_backprop_input(v[0], v[1], params, hw)?])
        });
    }
}

/// Every stacked/unstacked pattern (both stacked included: the per-example filter gradient
/// is `conv2d_backprop_filter` with a stacked input AND a stacked output gradient) for the
/// convolution and both its gradients, over strides, paddings and dilations. Strict
/// (`Fallback::Error`): a pattern that fell back to a loop would fail here.
#[test]
fn conv2d_and_backprops_every_pattern_without_fallback() {
    let geoms = [
        (p([1, 1], Padding::Valid, [1, 1]), [4, 3]),
        (p([2, 2], Padding::Same, [1, 1]), [3, 2]),
        (p([1, 2], Padding::Same, [2, 1]), [5, 2]),
        (p([2, 1], Padding::Valid, [1, 2]), [2, 2]),
    ];
    for (params, dy_hw) in geoms {
        // x [2,5,4,3], f [2,2,3,4]: dy [2, OH, OW, 4]
        let (x, f, dy) = ([2, 5, 4, 3], [2, 2, 3, 4], [2, dy_hw[0], dy_hw[1], 4]);
        assert_oracle(&[Spec::f64(&x), Spec::f64(&f)], &|g: &mut Graph, v: &[ValueId]| {
            Ok(vec![g.conv2d(v[0], v[1], params)?])
        });
        assert_oracle(&[Spec::f64(&x), Spec::f64(&dy)], &|g: &mut Graph, v: &[ValueId]| {
            Ok(vec![g.conv2d_backprop_filter(v[0], v[1], params, [2, 2])?])
        });
        assert_oracle(&[Spec::f64(&f), Spec::f64(&dy)], &|g: &mut Graph, v: &[ValueId]| {
            Ok(vec![g.conv2d_backprop_input(v[0], v[1], params, [5, 4])?])
        });
    }
}

/// `depthwise_conv2d_backprop_input` with a stacked filter (alone or with a stacked
/// gradient) folds the loop into channels.
#[test]
fn depthwise_backprop_input_every_pattern_without_fallback() {
    let params = p([2, 1], Padding::Same, [1, 2]);
    // x [2,5,4,3], f [2,2,3,2] -> dy [2,3,4,6]
    assert_oracle(&[Spec::f64(&[2, 2, 3, 2]), Spec::f64(&[2, 3, 4, 6])], &|g: &mut Graph, v: &[ValueId]| {
        Ok(vec![g.depthwise_conv2d_backprop_input(v[0], v[1], params, [5, 4])?])
    });
}

/// `extract_patches` and its adjoint fold the loop into the batch axis: every stacked
/// pattern, static and dynamic loop lengths (0 included), over strides, paddings,
/// dilations and channel counts.
#[test]
fn extract_patches_and_grad_fold_into_batch() {
    for (params, hw, k, c) in [
        (p([1, 1], Padding::Valid, [1, 1]), [5, 4], [2, 3], 1),
        (p([2, 2], Padding::Same, [1, 1]), [5, 4], [3, 2], 3),
        (p([1, 2], Padding::Same, [2, 1]), [6, 5], [2, 2], 2),
        (p([2, 1], Padding::Valid, [2, 2]), [7, 6], [2, 3], 1),
    ] {
        // the forward output shape gives the patch gradient's shape
        let mut g = Graph::new();
        let xv = g.input("x", DType::F64, [2, hw[0], hw[1], c]);
        let y = g.extract_patches(xv, k, params).unwrap();
        let dcol = Spec::f64(&g.shape(y).unwrap().as_fixed().unwrap());
        assert_oracle(&[Spec::f64(&[2, hw[0], hw[1], c]), dcol], &|g: &mut Graph, v: &[ValueId]| {
            Ok(vec![g.extract_patches(v[0], k, params)?, g.extract_patches_grad(v[1], k, params, hw)?])
        });
    }
}
