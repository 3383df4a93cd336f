//! The function-level derivative transforms (`grad`, `value_and_grad`, `vjp`, `jvp`) as a
//! user calls them (one call each), against the value-level API (`gradients`,
//! `autodiff::jvp`, `per_example_gradients`) and central finite differences; two uses of
//! one value; composition with `vectorized_map` and with themselves; errors.

use crate::common::*;
use pfor::api::{MapAxes, grad, jvp, map_fn_axes, per_example_gradients, value_and_grad, vectorized_map_axes, vjp};
use pfor::autodiff::gradients;
use pfor::prelude::*;

/// f(x, w) = Σ tanh(x · w) + Σ w², x: [3], w: [3].
fn f(g: &mut Graph, a: &[ValueId]) -> Result<ValueId> {
    let p = g.mul(a[0], a[1])?;
    let t = g.tanh(p)?;
    let s = g.sum_all(t)?;
    let w2 = g.square(a[1])?;
    let r = g.sum_all(w2)?;
    g.add(s, r)
}

/// Central finite differences of `f` w.r.t. argument `k` at `args`.
fn fd(args: &[Tensor], k: usize) -> Vec<f64> {
    let mut g = Graph::new();
    let xs: Vec<ValueId> =
        args.iter().enumerate().map(|(j, t)| g.input(&format!("a{j}"), t.dtype(), t.shape())).collect();
    let y = f(&mut g, &xs).unwrap();
    let mut sess = Session::new(&g, &[y]).unwrap();
    let base = args[k].to_f64_vec();
    let eps = 1e-6;
    (0..base.len())
        .map(|e| {
            let mut at = |d: f64| {
                let mut v = base.clone();
                v[e] += d;
                let mut feeds: Vec<(ValueId, Tensor)> = xs.iter().copied().zip(args.iter().cloned()).collect();
                feeds[k].1 = Tensor::from_vec(args[k].shape(), v).unwrap();
                sess.run(&feeds).unwrap()[0].to_f64_vec()[0]
            };
            (at(eps) - at(-eps)) / (2.0 * eps)
        })
        .collect()
}

#[track_caller]
fn close_vec(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "element {i}: {a} vs {b}");
    }
}

#[test]
fn grad_matches_gradients_and_finite_differences() {
    let (x0, w0) = (Tensor::randn_f64(&[3], 1).unwrap(), Tensor::randn_f64(&[3], 2).unwrap());
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let w = g.input("w", DType::F64, [3]);
    let d = grad(f, &[1, 0])(&mut g, &[x, w]).unwrap();
    let y = f(&mut g, &[x, w]).unwrap();
    let want = gradients(&mut g, &[y], &[w, x], None).unwrap();
    let r = run_once(&g, &[d[0], d[1], want[0], want[1]], &[(x, x0.clone()), (w, w0.clone())]).unwrap();
    assert_close(&r[0], &r[2], 1e-12);
    assert_close(&r[1], &r[3], 1e-12);
    close_vec(&r[0].to_f64_vec(), &fd(&[x0.clone(), w0.clone()], 1), 1e-6);
    close_vec(&r[1].to_f64_vec(), &fd(&[x0, w0], 0), 1e-6);
}

/// One value passed as both arguments: each argument's gradient is the partial w.r.t. that
/// use only (no `identity` needed), and the two partials add up to the value-level
/// gradient.
#[test]
fn two_uses_of_one_value_get_their_own_partials() {
    let x0 = Tensor::randn_f64(&[3], 3).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let d = grad(f, &[0, 1])(&mut g, &[x, x]).unwrap();
    let y = f(&mut g, &[x, x]).unwrap();
    let total = gradients(&mut g, &[y], &[x], None).unwrap()[0];
    let r = run_once(&g, &[d[0], d[1], total], &[(x, x0.clone())]).unwrap();
    // ∂/∂x of Σ tanh(x·w) at w = x: w (1 - tanh²(x·w)); ∂/∂w adds 2w
    let xv = x0.to_f64_vec();
    let dx: Vec<f64> = xv.iter().map(|v| v * (1.0 - (v * v).tanh().powi(2))).collect();
    let dw: Vec<f64> = dx.iter().zip(&xv).map(|(d, v)| d + 2.0 * v).collect();
    close_vec(&r[0].to_f64_vec(), &dx, 1e-12);
    close_vec(&r[1].to_f64_vec(), &dw, 1e-12);
    let sum: Vec<f64> = dx.iter().zip(&dw).map(|(a, b)| a + b).collect();
    close_vec(&r[2].to_f64_vec(), &sum, 1e-12);
}

#[test]
fn value_and_grad_returns_the_value_first() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::randn_f64(&[3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let vg = value_and_grad(f, &[1])(&mut g, &[x, w]).unwrap();
    let d = grad(f, &[1])(&mut g, &[x, w]).unwrap();
    let y = f(&mut g, &[x, w]).unwrap();
    let r = eval(&g, &[vg[0], vg[1], y, d[0]]);
    assert_eq!(vg.len(), 2);
    assert_close(&r[0], &r[2], 1e-12);
    assert_close(&r[1], &r[3], 1e-12);
}

/// Per-example gradients in one call: `vectorized_map` of `grad` with the weights
/// broadcast, against `per_example_gradients` and the loop (`map_fn`).
#[test]
fn vectorized_map_of_grad_gives_per_example_gradients() {
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[6, 3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let axes = MapAxes::new().in_axes(&[Some(0), None]);
    let v = vectorized_map_axes(&mut g, grad(f, &[1]), &[xs, w], &axes).unwrap();
    let l = map_fn_axes(&mut g, grad(f, &[1]), &[xs, w], &axes).unwrap();
    let p = per_example_gradients(&mut g, |g, rows, p| f(g, &[rows[0], p[0]]), &[xs], &[w]).unwrap();
    let r = eval(&g, &[v[0], l[0], p[0]]);
    assert_eq!(r[0].shape(), &[6, 3]);
    assert_close(&r[0], &r[1], 1e-12);
    assert_close(&r[0], &r[2], 1e-12);
}

/// grad of grad: the second derivative of a scalar function, and a hessian-vector product
/// (grad of ⟨grad f, v⟩) against the analytic hessian.
#[test]
fn grad_of_grad_is_the_second_derivative() {
    let mut g = Graph::new();
    let s = g.constant(Tensor::scalar(0.7f64));
    let cube_sin = |g: &mut Graph, a: &[ValueId]| {
        let c = g.mul(a[0], a[0])?;
        let c = g.mul(c, a[0])?;
        let sn = g.sin(a[0])?;
        g.add(c, sn)
    };
    let d2 = grad(grad(cube_sin, &[0]), &[0])(&mut g, &[s]).unwrap();
    let v = eval1(&g, d2[0]).to_f64_vec()[0];
    assert!((v - (6.0 * 0.7 - 0.7f64.sin())).abs() < 1e-12, "{v}");
    // hvp of Σ x³: H = diag(6x)
    let x = g.constant(Tensor::vec1(&[1.0f64, -2.0, 0.5]));
    let dir = g.constant(Tensor::vec1(&[1.0f64, 1.0, 2.0]));
    let cube = |g: &mut Graph, a: &[ValueId]| {
        let c = g.mul(a[0], a[0])?;
        let c = g.mul(c, a[0])?;
        g.sum_all(c)
    };
    let hvp = grad(
        |g: &mut Graph, a: &[ValueId]| {
            let d = grad(cube, &[0])(g, a)?;
            let p = g.mul(d[0], dir)?;
            g.sum_all(p)
        },
        &[0],
    )(&mut g, &[x])
    .unwrap();
    assert_eq!(eval1(&g, hvp[0]), Tensor::vec1(&[6.0f64, -12.0, 6.0]));
}

#[test]
fn vjp_matches_gradients_with_cotangents() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::randn_f64(&[3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let ct0 = g.constant(Tensor::randn_f64(&[3], 3).unwrap());
    let ct1 = g.constant(Tensor::scalar(2.0f64));
    let two = |g: &mut Graph, a: &[ValueId]| Ok(vec![g.mul(a[0], a[1])?, f(g, a)?]);
    let (outs, cts) = vjp(&mut g, two, &[x, w], &[ct0, ct1]).unwrap();
    let ys = two(&mut g, &[x, w]).unwrap();
    let want = gradients(&mut g, &ys, &[x, w], Some(&[ct0, ct1])).unwrap();
    let r = eval(&g, &[outs[0], ys[0], cts[0], want[0], cts[1], want[1]]);
    assert_close(&r[0], &r[1], 1e-12);
    assert_close(&r[2], &r[3], 1e-12);
    assert_close(&r[4], &r[5], 1e-12);
}

#[test]
fn jvp_matches_finite_differences_and_the_value_level_jvp() {
    let (x0, w0) = (Tensor::randn_f64(&[3], 1).unwrap(), Tensor::randn_f64(&[3], 2).unwrap());
    let mut g = Graph::new();
    let x = g.constant(x0.clone());
    let w = g.constant(w0.clone());
    let tx = g.constant(Tensor::vec1(&[0.0f64, 1.0, 0.0]));
    let tw = g.zeros_like(w).unwrap();
    let (y, dy) = jvp(&mut g, f, &[x, w], &[tx, tw]).unwrap();
    let y2 = f(&mut g, &[x, w]).unwrap();
    let want = pfor::autodiff::jvp(&mut g, &[y2], &[x, w], &[tx, tw]).unwrap();
    let r = eval(&g, &[y[0], y2, dy[0], want[0]]);
    assert_close(&r[0], &r[1], 1e-12);
    assert_close(&r[2], &r[3], 1e-12);
    let d = r[2].to_f64_vec()[0];
    assert!((d - fd(&[x0, w0], 0)[1]).abs() < 1e-6, "{d}");
}

#[test]
fn bad_arguments_are_errors_naming_the_transform() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::randn_f64(&[3], 1).unwrap());
    let k = g.constant(Tensor::scalar(2i64));
    let e = grad(f, &[2])(&mut g, &[x, x]).unwrap_err().to_string();
    assert!(e.contains("grad") && e.contains("argnums entry 2") && e.contains("2 arguments"), "{e}");
    let vec_out = |g: &mut Graph, a: &[ValueId]| g.sin(a[0]);
    let e = grad(vec_out, &[0])(&mut g, &[x]).unwrap_err().to_string();
    assert!(e.contains("grad") && e.contains("scalar") && e.contains("[3]"), "{e}");
    let e = grad(|g: &mut Graph, a: &[ValueId]| g.cast(a[0], DType::F64), &[0])(&mut g, &[k]).unwrap_err().to_string();
    assert!(e.contains("argument 0") && e.contains("i64"), "{e}");
    let e = jvp(&mut g, vec_out, &[x], &[]).unwrap_err().to_string();
    assert!(e.contains("jvp") && e.contains("0 tangents for 1 arguments"), "{e}");
    let s = g.constant(Tensor::scalar(1.0f64));
    let e = vjp(&mut g, vec_out, &[x], &[s]).unwrap_err().to_string();
    assert!(e.contains("vjp") && e.contains("cotangent 0"), "{e}");
}
