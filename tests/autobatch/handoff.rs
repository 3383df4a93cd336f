//! The pfor → auto-batching hand-off: a recursive `Call` inside a pfor body becomes ONE
//! `autobatch_call` node running the VM on all iterations; checked against the reference
//! loop for static and dynamic n (strict mode: no per-op fallback anywhere); a static n of
//! 1 runs the recursive call itself (the one-row form).

use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with_report};

use crate::common::{assert_close, i64t};

type Body<'a> = &'a dyn Fn(&mut Graph, ValueId) -> Result<Vec<ValueId>>;

fn scalar_i64() -> TensorType {
    TensorType::scalar(DType::I64)
}

/// Deterministic pseudo-random integers in `0..hi`.
fn random_ints(n: usize, hi: i64, seed: u64) -> Vec<i64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % hi as u64) as i64
        })
        .collect()
}

/// Count the `autobatch_call` nodes of `g`.
fn autobatch_nodes(g: &Graph) -> usize {
    g.node_ids().into_iter().filter(|n| g.node(*n).is_ok_and(|nd| nd.op.name() == "autobatch_call")).count()
}

/// pfor (static and dynamic n, strict) == for_loop for `body(g, x_i)`, over each `n` in
/// `ns` with random inputs in `0..hi`; `define` adds the library functions; the conversion
/// emits `handoffs` hand-off nodes (one per loop-variant recursive call).
fn check(ns: &[usize], hi: i64, handoffs: usize, define: fn(&mut Graph), body: Body) {
    for &n in ns {
        let x = i64t(&[n], &random_ints(n, hi, n as u64 + 7));
        for dynamic in [false, true] {
            let mut g = Graph::new();
            define(&mut g);
            let xc = g.constant(x.clone());
            let nv = g.input("n", DType::I64, Shape::scalar());
            let per = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
                let xi = g.gather(xc, i, 0)?;
                body(g, xi)
            };
            let opts = PforOptions::strict();
            let (v, report) = if dynamic {
                pfor_with_report(&mut g, nv, &opts, per)
            } else {
                pfor_with_report(&mut g, n, &opts, per)
            }
            .unwrap_or_else(|e| panic!("n = {n}, dynamic = {dynamic}: {e}"));
            assert!(report.fallbacks.is_empty(), "{:?}", report.fallbacks);
            // a static n = 1 takes the one-row form: the body's recursive call as the loop
            // runs it, after the conversion (with its hand-off) succeeded
            let want = if n == 1 && !dynamic { 0 } else { handoffs };
            assert_eq!(report.one_row, n == 1 && !dynamic);
            assert_eq!(autobatch_nodes(&g), want, "hand-off nodes");
            let l = for_loop(&mut g, n, per).unwrap();
            g.verify().unwrap();
            let mut fetch = v.clone();
            fetch.extend(&l);
            let r = run_once(&g, &fetch, &[(nv, Tensor::scalar(n as i64))])
                .unwrap_or_else(|e| panic!("n = {n}, dynamic = {dynamic}: {e}"));
            let k = v.len();
            for j in 0..k {
                assert_eq!(r[j].shape(), r[k + j].shape(), "n = {n}, dynamic = {dynamic}, output {j}");
                assert_close(&r[j], &r[k + j], 0.0);
            }
        }
    }
}

fn fib_body(g: &mut Graph, xi: ValueId) -> Result<Vec<ValueId>> {
    g.call("fib", &[xi])
}

#[test]
fn recursive_fib_in_pfor_matches_the_loop() {
    check(&[0, 1, 7], 12, 1, crate::ops::control::define_fib, &fib_body);
}

#[test]
fn recursive_fib_with_loop_variant_and_invariant_arguments() {
    // fib(x_i) * 2 + fib(3): the invariant call is reused as is, the variant one handed off.
    check(&[0, 1, 7], 12, 1, crate::ops::control::define_fib, &|g, xi| {
        let three = g.constant(Tensor::scalar(3i64));
        let a = g.call("fib", &[xi])?[0];
        let b = g.call("fib", &[three])?[0];
        let two = g.constant(Tensor::scalar(2i64));
        let a2 = g.mul(a, two)?;
        Ok(vec![g.add(a2, b)?])
    });
}

/// halve(n, x) = n <= 0 ? (0, x) : let (c, a) = halve(n - 1, x / 2 + 1) in (c + 1, a + 0.25):
/// two results of different dtypes.
fn define_halve(g: &mut Graph) {
    let f64s = TensorType::scalar(DType::F64);
    g.declare_function("halve", &[scalar_i64(), f64s.clone()], &[scalar_i64(), f64s]).unwrap();
    g.define_function("halve", |g, p| {
        let zero = g.constant(Tensor::scalar(0i64));
        let done = g.less_equal(p[0], zero)?;
        g.cond(
            done,
            &[p[0], p[1]],
            |g, a| Ok(vec![g.constant(Tensor::scalar(0i64)), a[1]]),
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let n1 = g.sub(a[0], one)?;
                let half = g.constant(Tensor::scalar(0.5f64));
                let onef = g.constant(Tensor::scalar(1.0f64));
                let x1 = g.mul(a[1], half)?;
                let x2 = g.add(x1, onef)?;
                let r = g.call("halve", &[n1, x2])?;
                let quarter = g.constant(Tensor::scalar(0.25f64));
                Ok(vec![g.add(r[0], one)?, g.add(r[1], quarter)?])
            },
        )
    })
    .unwrap();
}

#[test]
fn recursive_function_with_two_results() {
    check(&[0, 1, 7], 12, 1, define_halve, &|g, xi| {
        let xf = g.cast(xi, DType::F64)?;
        let ten = g.constant(Tensor::scalar(10.0f64));
        let x = g.mul(xf, ten)?;
        g.call("halve", &[xi, x])
    });
}

/// is_even(n) = n == 0 || is_odd(n - 1); is_odd(n) = n != 0 && is_even(n - 1).
fn define_even_odd(g: &mut Graph) {
    let b = TensorType::scalar(DType::Bool);
    g.declare_function("is_even", &[scalar_i64()], std::slice::from_ref(&b)).unwrap();
    g.declare_function("is_odd", &[scalar_i64()], &[b]).unwrap();
    for (name, other, base) in [("is_even", "is_odd", true), ("is_odd", "is_even", false)] {
        g.define_function(name, |g, p| {
            let zero = g.constant(Tensor::scalar(0i64));
            let is_zero = g.equal(p[0], zero)?;
            g.cond(
                is_zero,
                &[p[0]],
                |g, _| Ok(vec![g.constant(Tensor::scalar(base))]),
                |g, a| {
                    let one = g.constant(Tensor::scalar(1i64));
                    let n1 = g.sub(a[0], one)?;
                    g.call(other, &[n1])
                },
            )
        })
        .unwrap();
    }
}

#[test]
fn mutual_recursion_even_odd() {
    check(&[0, 1, 7], 12, 2, define_even_odd, &|g, xi| {
        let e = g.call("is_even", &[xi])?[0];
        let o = g.call("is_odd", &[xi])?[0];
        Ok(vec![e, o])
    });
}

/// tri(n) = n <= 0 ? 0 : tri(n - 1) + (sum of 1..=n by a while loop).
fn define_tri(g: &mut Graph) {
    g.declare_function("tri", &[scalar_i64()], &[scalar_i64()]).unwrap();
    g.define_function("tri", |g, p| {
        let zero = g.constant(Tensor::scalar(0i64));
        let done = g.less_equal(p[0], zero)?;
        g.cond(
            done,
            &[p[0]],
            |g, _| Ok(vec![g.constant(Tensor::scalar(0i64))]),
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let n1 = g.sub(a[0], one)?;
                let t = g.call("tri", &[n1])?[0];
                let i0 = g.constant(Tensor::scalar(0i64));
                let s0 = g.constant(Tensor::scalar(0i64));
                let r = g.while_loop(
                    &[i0, s0],
                    &[a[0]],
                    |g, c| g.less(c[0], c[2]),
                    |g, c| {
                        let one = g.constant(Tensor::scalar(1i64));
                        let i1 = g.add(c[0], one)?;
                        Ok(vec![i1, g.add(c[1], i1)?])
                    },
                )?;
                Ok(vec![g.add(t, r[1])?])
            },
        )
    })
    .unwrap();
}

#[test]
fn recursion_with_a_while_loop_inside() {
    check(&[0, 1, 7], 12, 1, define_tri, &|g, xi| g.call("tri", &[xi]));
}
