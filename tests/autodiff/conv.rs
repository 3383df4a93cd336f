//! Derivative tests of the `conv` family: every kind with strides 1 and 2, SAME and VALID
//! padding and dilation 2, first order everywhere and second order for the convolutions
//! and their backprop ops (bilinear: the second derivative is a cross term).

use super::fd::{FdCase, case, check, randn};
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

fn p(strides: [usize; 2], padding: Padding, dilations: [usize; 2]) -> Conv2dParams {
    Conv2dParams { strides, padding, dilations }
}

/// The geometries every convolution kind is checked with.
fn geometries() -> Vec<Conv2dParams> {
    vec![
        p([1, 1], Padding::Valid, [1, 1]),
        p([1, 1], Padding::Same, [1, 1]),
        p([2, 2], Padding::Valid, [1, 1]),
        p([2, 2], Padding::Same, [1, 1]),
        p([1, 1], Padding::Same, [2, 2]),
        p([2, 1], Padding::Valid, [1, 2]),
    ]
}

/// Output `[OH, OW]` of a window (built once on a scratch graph).
fn out_hw(x: &[usize], k: [usize; 2], params: Conv2dParams) -> [usize; 2] {
    let mut g = Graph::new();
    let xi = g.input("x", DType::F64, x);
    let w = g.input("w", DType::F64, [k[0], k[1], x[3], 1]);
    let y = g.conv2d(xi, w, params).unwrap();
    let s = g.shape(y).unwrap().as_fixed().unwrap();
    [s[1], s[2]]
}

const X: [usize; 4] = [2, 6, 5, 3];
const K: [usize; 2] = [3, 2];
const O: usize = 2; // output channels / depthwise multiplier

fn conv_cases() -> Vec<FdCase> {
    let mut v = Vec::new();
    for (i, params) in geometries().into_iter().enumerate() {
        let s = 10 * i as u64;
        let [oh, ow] = out_hw(&X, K, params);
        let w = [K[0], K[1], X[3], O];
        let tag = format!("{:?} {} {:?}", params.strides, params.padding, params.dilations);
        v.push(
            case(&format!("conv2d {tag}"), vec![randn(&X, s), randn(&w, s + 1)], move |g, x| {
                Ok(vec![g.conv2d(x[0], x[1], params)?])
            })
            .second(),
        );
        v.push(
            case(
                &format!("conv2d_backprop_input {tag}"),
                vec![randn(&w, s + 2), randn(&[X[0], oh, ow, O], s + 3)],
                move |g, x| Ok(vec![g.conv2d_backprop_input(x[0], x[1], params, [X[1], X[2]])?]),
            )
            .second(),
        );
        v.push(
            case(
                &format!("conv2d_backprop_filter {tag}"),
                vec![randn(&X, s + 4), randn(&[X[0], oh, ow, O], s + 5)],
                move |g, x| Ok(vec![g.conv2d_backprop_filter(x[0], x[1], params, K)?]),
            )
            .second(),
        );
        v.push(
            case(&format!("depthwise_conv2d {tag}"), vec![randn(&X, s + 6), randn(&w, s + 7)], move |g, x| {
                Ok(vec![g.depthwise_conv2d(x[0], x[1], params)?])
            })
            .second(),
        );
        v.push(
            case(
                &format!("depthwise_conv2d_backprop_input {tag}"),
                vec![randn(&w, s + 8), randn(&[X[0], oh, ow, X[3] * O], s + 9)],
                move |g, x| Ok(vec![g.depthwise_conv2d_backprop_input(x[0], x[1], params, [X[1], X[2]])?]),
            )
            .second(),
        );
        v.push(
            case(
                &format!("depthwise_conv2d_backprop_filter {tag}"),
                vec![randn(&X, s + 10), randn(&[X[0], oh, ow, X[3] * O], s + 11)],
                move |g, x| Ok(vec![g.depthwise_conv2d_backprop_filter(x[0], x[1], params, K)?]),
            )
            .second(),
        );
    }
    v
}

fn pool_cases() -> Vec<FdCase> {
    let windows: [([usize; 2], [usize; 2], Padding); 4] = [
        ([2, 2], [1, 1], Padding::Valid),
        ([2, 2], [2, 2], Padding::Same),
        ([3, 2], [2, 2], Padding::Valid),
        ([3, 3], [1, 2], Padding::Same),
    ];
    let mut v = Vec::new();
    for (i, (k, st, pad)) in windows.into_iter().enumerate() {
        let s = 500 + 10 * i as u64;
        let [oh, ow] = out_hw(&X, k, p(st, pad, [1, 1]));
        let tag = format!("{k:?} {st:?} {pad}");
        let dy = [X[0], oh, ow, X[3]];
        v.push(
            case(&format!("max_pool {tag}"), vec![randn(&X, s)], move |g, x| Ok(vec![g.max_pool(x[0], k, st, pad)?]))
                .second(),
        );
        v.push(
            case(&format!("avg_pool {tag}"), vec![randn(&X, s + 1)], move |g, x| {
                Ok(vec![g.avg_pool(x[0], k, st, pad)?])
            })
            .second(),
        );
        v.push(
            case(&format!("max_pool_grad {tag}"), vec![randn(&X, s + 2), randn(&dy, s + 3)], move |g, x| {
                Ok(vec![g.max_pool_grad(x[0], x[1], k, st, pad)?])
            })
            .second(),
        );
        v.push(
            case(&format!("avg_pool_grad {tag}"), vec![randn(&dy, s + 4)], move |g, x| {
                Ok(vec![g.avg_pool_grad(x[0], k, st, pad, [X[1], X[2]])?])
            })
            .second(),
        );
    }
    v
}

/// `extract_patches` and its adjoint over every geometry (linear: the second derivative
/// is zero, and checks that the rules' own derivatives build).
fn patches_cases() -> Vec<FdCase> {
    let mut v = Vec::new();
    for (i, params) in geometries().into_iter().enumerate() {
        let s = 900 + 10 * i as u64;
        let [oh, ow] = out_hw(&X, K, params);
        let tag = format!("{:?} {} {:?}", params.strides, params.padding, params.dilations);
        v.push(
            case(&format!("extract_patches {tag}"), vec![randn(&X, s)], move |g, x| {
                let p = g.extract_patches(x[0], K, params)?;
                Ok(vec![g.square(p)?])
            })
            .second(),
        );
        v.push(
            case(
                &format!("extract_patches_grad {tag}"),
                vec![randn(&[X[0], oh, ow, K[0] * K[1] * X[3]], s + 1)],
                move |g, x| {
                    let dx = g.extract_patches_grad(x[0], K, params, [X[1], X[2]])?;
                    Ok(vec![g.square(dx)?])
                },
            )
            .second(),
        );
    }
    v
}

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    let mut v = conv_cases();
    v.extend(pool_cases());
    v.extend(patches_cases());
    v
}

#[test]
fn conv_derivatives_match_finite_differences() {
    for c in conv_cases() {
        check(&c);
    }
}

#[test]
fn extract_patches_derivatives_match_finite_differences() {
    for c in patches_cases() {
        check(&c);
    }
}

/// The VJP of each op is the other: reverse mode of `<extract_patches(x), y>` w.r.t. `x` is
/// `extract_patches_grad(y)`, and the forward-mode tangent is the op applied to the tangent.
#[test]
fn extract_patches_rules_are_the_adjoint_ops() {
    let params = p([2, 1], Padding::Same, [1, 2]);
    let [oh, ow] = out_hw(&X, K, params);
    let ys = [X[0], oh, ow, K[0] * K[1] * X[3]];
    let mut g = Graph::new();
    let (x, y, t) = (g.input("x", DType::F64, X), g.input("y", DType::F64, ys), g.input("t", DType::F64, X));
    let px = g.extract_patches(x, K, params).unwrap();
    let prod = g.mul(px, y).unwrap();
    let l = g.sum_all(prod).unwrap();
    let gr = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let want = g.extract_patches_grad(y, K, params, [X[1], X[2]]).unwrap();
    let jv = pfor::autodiff::jvp(&mut g, &[px], &[x], &[t]).unwrap();
    let want_t = g.extract_patches(t, K, params).unwrap();
    let feeds = [(x, randn(&X, 1)), (y, randn(&ys, 2)), (t, randn(&X, 3))];
    let out = run_once(&g, &[gr[0], want, jv[0], want_t], &feeds).unwrap();
    assert_eq!(out[0].to_f64_vec(), out[1].to_f64_vec());
    assert_eq!(out[2].to_f64_vec(), out[3].to_f64_vec());
}

#[test]
fn pool_derivatives_match_finite_differences() {
    for c in pool_cases() {
        check(&c);
    }
}

/// A CNN layer stack (conv, relu, max pool, avg pool) end to end, second order.
#[test]
fn cnn_stack_second_order() {
    let c = case("conv-relu-maxpool-avgpool", vec![randn(&[1, 6, 6, 2], 7), randn(&[3, 3, 2, 3], 8)], |g, x| {
        let same = p([1, 1], Padding::Same, [1, 1]);
        let h = g.conv2d(x[0], x[1], same)?;
        let h = g.tanh(h)?;
        let h = g.max_pool(h, [2, 2], [2, 2], Padding::Valid)?;
        let h = g.avg_pool(h, [2, 2], [1, 1], Padding::Same)?;
        Ok(vec![g.square(h)?])
    })
    .second();
    check(&c);
}

/// Ties in a max-pool window: forward mode and reverse mode both use the FIRST maximal
/// element (row-major), so the tangent is exactly the tangent of that element.
#[test]
fn max_pool_tie_rule_is_first_maximal_element() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [1, 2, 2, 1]);
    let t = g.input("t", DType::F64, [1, 2, 2, 1]);
    let y = g.max_pool(x, [2, 2], [2, 2], Padding::Valid).unwrap();
    let jv = pfor::autodiff::jvp(&mut g, &[y], &[x], &[t]).unwrap();
    let gr = pfor::autodiff::gradients(&mut g, &[y], &[x], None).unwrap();
    let xv = Tensor::from_vec(&[1, 2, 2, 1], vec![1.0f64, 3.0, 3.0, 2.0]).unwrap();
    let tv = Tensor::from_vec(&[1, 2, 2, 1], vec![10.0f64, 20.0, 30.0, 40.0]).unwrap();
    let out = run_once(&g, &[jv[0], gr[0]], &[(x, xv), (t, tv)]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![20.0]);
    assert_eq!(out[1].to_f64_vec(), vec![0.0, 1.0, 0.0, 0.0]);
}

/// Per-example gradients of a small CNN (conv, bias, relu, max pool, strided dilated conv,
/// global average, sparse softmax cross-entropy) under STRICT pfor (no loop fallback: the
/// filter gradient with a stacked input and a stacked output gradient is one batched
/// GEMM) equal a loop of gradients.
#[test]
fn per_example_cnn_gradients_vectorize_without_fallback() {
    use pfor::api::{per_example_gradients_loop, per_example_gradients_with};
    for n in [0usize, 1, 4] {
        let mut g = Graph::new();
        let xs = g.input("x", DType::F64, [n, 6, 6, 2]);
        let ys = g.input("y", DType::I64, [n]);
        let shapes: [&[usize]; 3] = [&[3, 3, 2, 4], &[4], &[2, 2, 4, 3]];
        let params: Vec<ValueId> =
            shapes.iter().enumerate().map(|(k, s)| g.input(&format!("p{k}"), DType::F64, *s)).collect();
        let loss = |g: &mut Graph, rows: &[ValueId], w: &[ValueId]| -> Result<ValueId> {
            let x = g.expand_dims(rows[0], 0)?;
            let h = g.conv2d(x, w[0], Conv2dParams { padding: Padding::Same, ..Default::default() })?;
            let h = g.bias_add(h, w[1])?;
            let h = g.relu(h)?;
            let h = g.max_pool(h, [2, 2], [1, 1], Padding::Same)?;
            let h = g.conv2d(h, w[2], p([2, 2], Padding::Valid, [2, 1]))?;
            let logits = g.reduce_mean(h, Some(&[1, 2]), false)?;
            let y = g.reshape(rows[1], &[1])?;
            let l = g.sparse_softmax_cross_entropy(y, logits)?;
            g.sum_all(l)
        };
        let pv = per_example_gradients_with(&mut g, &PforOptions::strict(), loss, &[xs, ys], &params).unwrap();
        let pl = per_example_gradients_loop(&mut g, loss, &[xs, ys], &params).unwrap();
        let mut feeds = vec![
            (xs, randn(&[n, 6, 6, 2], 40)),
            (ys, Tensor::from_vec(&[n], (0..n as i64).map(|i| i % 3).collect::<Vec<i64>>()).unwrap()),
        ];
        for (k, s) in shapes.iter().enumerate() {
            feeds.push((params[k], randn(s, 41 + k as u64)));
        }
        let mut fetch = pv.clone();
        fetch.extend(&pl);
        let v = run_once(&g, &fetch, &feeds).unwrap();
        for k in 0..params.len() {
            let (a, b) = (&v[k], &v[k + params.len()]);
            assert_eq!(a.shape(), b.shape(), "param {k} (n = {n})");
            for (x, y) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
                assert!((x - y).abs() <= 1e-10 * (1.0 + y.abs()), "param {k} (n = {n}): {x} vs {y}");
            }
        }
    }
}
