//! Derivative tests of the `control` family: cond (both branches, captured values), while
//! with a data-dependent trip count (first and second order), cond nested in while, for,
//! call; the O(T) recording of while gradients; the jacobian of while loops with per-row
//! trip counts under strict pfor.

use super::fd::{FdCase, case, check};
use pfor::prelude::*;
use pfor::reference::{LoopLen, for_loop};

fn t(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

/// `cond(Σx > 0, then: sin(x)·w + x², else: x·w - exp(w))` on `(x, w)`.
fn cond_case(name: &str, x: &[f64]) -> FdCase {
    case(name, vec![t(&[3], x), t(&[3], &[0.7, -1.3, 0.4])], |g, a| {
        let s = g.sum_all(a[0])?;
        let z = g.scalar(DType::F64, 0.0);
        let p = g.greater(s, z)?;
        let out = g.cond(
            p,
            &[a[0], a[1]],
            |g, b| {
                let s = g.sin(b[0])?;
                let m = g.mul(s, b[1])?;
                let q = g.square(b[0])?;
                Ok(vec![g.add(m, q)?])
            },
            |g, b| {
                let m = g.mul(b[0], b[1])?;
                let e = g.exp(b[1])?;
                Ok(vec![g.sub(m, e)?])
            },
        )?;
        Ok(out)
    })
    .second()
}

/// `x ← x·c + sin(x)` with a counter, until `Σ|x| > bound`; outputs `(x, count)`.
fn while_loop(g: &mut Graph, x: ValueId, c: ValueId, bound: f64) -> Result<Vec<ValueId>> {
    let i0 = g.constant(Tensor::scalar(0i64));
    let b = g.scalar(DType::F64, bound);
    let out = g.while_loop(
        &[i0, x],
        &[c, b],
        |g, a| {
            let ab = g.abs(a[1])?;
            let s = g.sum_all(ab)?;
            g.less_equal(s, a[3])
        },
        |g, a| {
            let xc = g.mul(a[1], a[2])?;
            let sx = g.sin(a[1])?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(a[0], one)?, g.add(xc, sx)?])
        },
    )?;
    Ok(vec![out[1], out[0]])
}

/// Like [`while_loop`] with a cond in the body: even steps `x·c + sin(x)`, odd steps
/// `x + c·cos(x)`.
fn while_cond_loop(g: &mut Graph, x: ValueId, c: ValueId, bound: f64) -> Result<Vec<ValueId>> {
    let i0 = g.constant(Tensor::scalar(0i64));
    let b = g.scalar(DType::F64, bound);
    let out = g.while_loop(
        &[i0, x],
        &[c, b],
        |g, a| {
            let ab = g.abs(a[1])?;
            let s = g.sum_all(ab)?;
            g.less_equal(s, a[3])
        },
        |g, a| {
            let two = g.constant(Tensor::scalar(2i64));
            let r = g.floor_mod(a[0], two)?;
            let zero = g.constant(Tensor::scalar(0i64));
            let even = g.equal(r, zero)?;
            let x = g.cond(
                even,
                &[a[1], a[2]],
                |g, b| {
                    let xc = g.mul(b[0], b[1])?;
                    let sx = g.sin(b[0])?;
                    Ok(vec![g.add(xc, sx)?])
                },
                |g, b| {
                    let cx = g.cos(b[0])?;
                    let m = g.mul(b[1], cx)?;
                    Ok(vec![g.add(b[0], m)?])
                },
            )?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(a[0], one)?, x[0]])
        },
    )?;
    Ok(vec![out[1], out[0]])
}

fn trips(build: impl Fn(&mut Graph, ValueId, ValueId) -> Result<Vec<ValueId>>, x: &Tensor, c: &Tensor) -> i64 {
    let mut g = Graph::new();
    let (xv, cv) = (g.input("x", DType::F64, x.shape()), g.input("c", DType::F64, c.shape()));
    let out = build(&mut g, xv, cv).unwrap();
    run_once(&g, &[out[1]], &[(xv, x.clone()), (cv, c.clone())]).unwrap()[0].scalar_i64().unwrap()
}

fn x0() -> Tensor {
    t(&[3], &[0.3, -0.2, 0.5])
}
fn c0() -> Tensor {
    t(&[3], &[1.1, 1.2, 0.9])
}

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    vec![
        cond_case("cond then-branch", &[0.5, -0.2, 0.9]),
        cond_case("cond else-branch", &[-0.5, 0.2, -0.9]),
        case("while data-dependent trip count", vec![x0(), c0()], |g, a| while_loop(g, a[0], a[1], 6.0)).second(),
        case("while with zero trips", vec![x0(), c0()], |g, a| while_loop(g, a[0], a[1], 0.1)).second(),
        case("cond nested in while", vec![x0(), c0()], |g, a| while_cond_loop(g, a[0], a[1], 6.0)).second(),
        case("for over captures", vec![t(&[2], &[0.4, -0.7]), t(&[2], &[1.5, 0.3])], |g, a| {
            let (x, w) = (a[0], a[1]);
            for_loop(g, LoopLen::Static(4), |g, j| {
                let jf = g.cast(j, DType::F64)?;
                let xj = g.mul(x, jf)?;
                let s = g.sin(xj)?;
                let y = g.mul(s, w)?;
                Ok(vec![g.add(y, x)?])
            })
        })
        .second(),
        case("call of a library function", vec![t(&[3], &[0.4, -0.7, 1.1]), t(&[3], &[1.5, 0.3, -0.8])], |g, a| {
            let ty = TensorType::new(DType::F64, [3]);
            g.function("f", &[ty.clone(), ty], |g, p| {
                let e = g.tanh(p[0])?;
                let m = g.mul(e, p[1])?;
                Ok(vec![m, g.sin(p[1])?])
            })?;
            let r = g.call("f", &[a[0], a[1]])?;
            // A second call through another function: nested calls are inlined too.
            let ty = TensorType::new(DType::F64, [3]);
            g.function("h", &[ty], |g, p| {
                let r = g.call("f", &[p[0], p[0]])?;
                Ok(vec![g.add(r[0], r[1])?])
            })?;
            let r2 = g.call("h", &[r[0]])?;
            Ok(vec![r[1], r2[0]])
        })
        .second(),
    ]
}

#[test]
fn control_derivatives_match_finite_differences() {
    // The cases exercise the loops they claim to.
    assert!(trips(|g, x, c| while_loop(g, x, c, 6.0), &x0(), &c0()) >= 3);
    assert_eq!(trips(|g, x, c| while_loop(g, x, c, 0.1), &x0(), &c0()), 0);
    assert!(trips(|g, x, c| while_cond_loop(g, x, c, 6.0), &x0(), &c0()) >= 3);
    for c in cases() {
        check(&c);
    }
}

#[test]
fn gradient_of_a_recursive_call_is_a_clear_error() {
    let mut g = Graph::new();
    let ty = TensorType::scalar(DType::F64);
    g.declare_function("r", &[ty.clone()], &[ty]).unwrap();
    g.define_function("r", |g, p| {
        let z = g.scalar(DType::F64, 0.0);
        let pos = g.greater(p[0], z)?;
        g.cond(
            pos,
            &[p[0]],
            |g, q| {
                let d = g.add_scalar(q[0], -1.0)?;
                let r = g.call("r", &[d])?;
                Ok(vec![g.add(r[0], q[0])?])
            },
            |_, q| Ok(vec![q[0]]),
        )
    })
    .unwrap();
    let x = g.input("x", DType::F64, Shape::scalar());
    let y = g.call("r", &[x]).unwrap();
    let err = pfor::autodiff::gradients(&mut g, &[y[0]], &[x], None).unwrap_err().to_string();
    assert!(err.contains("recursive") && err.contains("'r'"), "{err}");
}
