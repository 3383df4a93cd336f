//! Value tests for functional control flow: cond, while, call (recursive), for.

use crate::common::*;
use pfor::prelude::*;

fn scalar_i64() -> TensorType {
    TensorType::scalar(DType::I64)
}

#[test]
fn cond_takes_the_right_branch() {
    for (p, want) in [(true, 3.0), (false, -1.0)] {
        let mut g = Graph::new();
        let pred = g.constant(Tensor::scalar(p));
        let x = g.constant(f64t(&[], &[1.0]));
        let y = g.constant(f64t(&[], &[2.0]));
        let out =
            g.cond(pred, &[x, y], |g, a| Ok(vec![g.add(a[0], a[1])?]), |g, a| Ok(vec![g.sub(a[0], a[1])?])).unwrap();
        g.verify().unwrap();
        assert_eq!(eval1(&g, out[0]), f64t(&[], &[want]));
    }
}

#[test]
fn cond_type_errors() {
    let mut g = Graph::new();
    let x = g.constant(f64t(&[2], &[1.0, 2.0]));
    let bad_pred = g.constant(boolt(&[2], &[true, false]));
    let e = g.cond(bad_pred, &[x], |_, a| Ok(vec![a[0]]), |_, a| Ok(vec![a[0]])).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "cond"), "{e}");
    let pred = g.constant(Tensor::scalar(true));
    let e = g.cond(pred, &[x], |g, a| Ok(vec![g.cast(a[0], DType::F32)?]), |_, a| Ok(vec![a[0]])).unwrap_err();
    assert!(e.to_string().contains("branches return"), "{e}");
}

#[test]
fn while_loop_sums_with_captures() {
    // i = 0; s = 0; while i < k { s += i * c; i += 1 }
    let mut g = Graph::new();
    let i0 = g.constant(Tensor::scalar(0i64));
    let s0 = g.constant(Tensor::scalar(0i64));
    let k = g.input("k", DType::I64, Shape::scalar());
    let c = g.constant(Tensor::scalar(3i64));
    let out = g
        .while_loop(
            &[i0, s0],
            &[k, c],
            |g, a| g.less(a[0], a[2]),
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let ic = g.mul(a[0], a[3])?;
                Ok(vec![g.add(a[0], one)?, g.add(a[1], ic)?])
            },
        )
        .unwrap();
    g.verify().unwrap();
    let mut s = session(&g, &out).unwrap();
    for (kv, want) in [(0i64, 0i64), (1, 0), (4, 18), (10, 135)] {
        let r = s.run(&[(k, Tensor::scalar(kv))]).unwrap();
        assert_eq!(r[0], Tensor::scalar(kv.max(0)));
        assert_eq!(r[1], Tensor::scalar(want));
    }
}

#[test]
fn while_loop_body_must_preserve_carry_types() {
    let mut g = Graph::new();
    let x = g.constant(f64t(&[2], &[1.0, 2.0]));
    let e = g
        .while_loop(
            &[x],
            &[],
            |g, a| {
                let s = g.reduce_sum(a[0], Some(&[0]), false)?;
                let z = g.scalar_like(s, 0.0)?;
                g.less(s, z)
            },
            |g, a| Ok(vec![g.concat(&[a[0], a[0]], 0)?]),
        )
        .unwrap_err();
    assert!(e.to_string().contains("body changes carry 0"), "{e}");
}

/// fib(n) = n < 2 ? n : fib(n-1) + fib(n-2), written with Cond + recursive Call.
pub fn define_fib(g: &mut Graph) {
    g.declare_function("fib", &[scalar_i64()], &[scalar_i64()]).unwrap();
    g.define_function("fib", |g, p| {
        let two = g.constant(Tensor::scalar(2i64));
        let small = g.less(p[0], two)?;
        g.cond(
            small,
            &[p[0]],
            |_, a| Ok(vec![a[0]]),
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let two = g.constant(Tensor::scalar(2i64));
                let n1 = g.sub(a[0], one)?;
                let n2 = g.sub(a[0], two)?;
                let f1 = g.call("fib", &[n1])?[0];
                let f2 = g.call("fib", &[n2])?[0];
                Ok(vec![g.add(f1, f2)?])
            },
        )
    })
    .unwrap();
}

#[test]
fn recursive_fibonacci_via_call() {
    let mut g = Graph::new();
    define_fib(&mut g);
    let n = g.input("n", DType::I64, Shape::scalar());
    let f = g.call("fib", &[n]).unwrap()[0];
    g.verify().unwrap();
    let mut s = session(&g, &[f]).unwrap();
    for (k, want) in [(0i64, 0i64), (1, 1), (5, 5), (6, 8), (9, 34), (15, 610)] {
        assert_eq!(s.run(&[(n, Tensor::scalar(k))]).unwrap()[0], Tensor::scalar(want), "fib({k})");
    }
}

#[test]
fn recursion_limit_is_a_clear_error() {
    // loop(n) = loop(n + 1): never terminates; must stop at the limit with an error.
    let mut g = Graph::new();
    g.declare_function("forever", &[scalar_i64()], &[scalar_i64()]).unwrap();
    g.define_function("forever", |g, p| {
        let one = g.constant(Tensor::scalar(1i64));
        let n1 = g.add(p[0], one)?;
        g.call("forever", &[n1])
    })
    .unwrap();
    let n = g.constant(Tensor::scalar(0i64));
    let out = g.call("forever", &[n]).unwrap()[0];
    let opts = ExecOptions { max_call_depth: 50, ..ExecOptions::default() };
    let e = Session::with_options(&g, &[out], opts).unwrap().run(&[]).unwrap_err();
    assert!(matches!(e.root(), Error::RecursionLimit { function, limit: 50 } if function == "forever"), "{e}");
    assert!(e.to_string().contains("recursion limit 50"), "{e}");
}

#[test]
fn call_errors() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::scalar(1.0f64));
    assert!(matches!(g.call("nope", &[x]), Err(Error::UnknownFunction { .. })));
    g.declare_function("f", &[scalar_i64()], &[scalar_i64()]).unwrap();
    let e = g.call("f", &[x]).unwrap_err();
    assert!(e.to_string().contains("function 'f'"), "{e}");
    // declared but never defined: an error at run time
    let y = g.constant(Tensor::scalar(1i64));
    let out = g.call("f", &[y]).unwrap()[0];
    assert!(matches!(run_recorded(&g, &[out], &[]).unwrap_err().root(), Error::UnknownFunction { .. }));
}

#[test]
fn for_loop_stacks_iterations() {
    let mut g = Graph::new();
    let a = g.constant(f64t(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let out = for_loop(&mut g, 3, |g, i| {
        let row = g.gather(a, i, 0)?;
        let fi = g.cast(i, DType::F64)?;
        Ok(vec![g.mul(row, fi)?, fi])
    })
    .unwrap();
    g.verify().unwrap();
    let r = eval(&g, &out);
    assert_eq!(r[0], f64t(&[3, 2], &[0.0, 0.0, 3.0, 4.0, 10.0, 12.0]));
    assert_eq!(r[1], f64t(&[3], &[0.0, 1.0, 2.0]));
    // zero iterations: empty stacked outputs of the right shape
    let mut g = Graph::new();
    let a = g.constant(f64t(&[3, 2], &[0.0; 6]));
    let out = for_loop(&mut g, 0, |g, i| Ok(vec![g.gather(a, i, 0)?])).unwrap();
    assert_eq!(eval1(&g, out[0]).shape(), &[0, 2]);
}

/// A plain-Rust LSTM cell (gates i, f, o, g from one fused projection, as `pfor::api::lstm_cell`) — the oracle.
fn lstm_ref(x: &[Vec<f64>], w: &[f64], b: &[f64], d_in: usize, d_h: usize) -> Vec<f64> {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let (mut h, mut c) = (vec![0.0; d_h], vec![0.0; d_h]);
    for xt in x {
        let inp: Vec<f64> = xt.iter().chain(h.iter()).copied().collect();
        let z: Vec<f64> =
            (0..4 * d_h).map(|j| b[j] + (0..d_in + d_h).map(|k| inp[k] * w[k * 4 * d_h + j]).sum::<f64>()).collect();
        for u in 0..d_h {
            let (i, f, o, g) = (sig(z[u]), sig(z[d_h + u]), sig(z[2 * d_h + u]), z[3 * d_h + u].tanh());
            c[u] = f * c[u] + i * g;
            h[u] = o * c[u].tanh();
        }
    }
    h
}

#[test]
fn lstm_cell_in_a_while_loop_to_a_per_example_length() {
    let (d_in, d_h, t_max) = (3usize, 2usize, 6usize);
    let xs = Tensor::randn_f64(&[t_max, d_in], 1).unwrap();
    let w = Tensor::randn_f64(&[d_in + d_h, 4 * d_h], 2).unwrap();
    let b = Tensor::randn_f64(&[4 * d_h], 3).unwrap();
    let mut g = Graph::new();
    let xc = g.constant(xs.clone());
    let wc = g.constant(w.clone());
    let bc = g.constant(b.clone());
    let len = g.input("len", DType::I64, Shape::scalar());
    let t0 = g.constant(Tensor::scalar(0i64));
    let h0 = g.constant(Tensor::zeros(DType::F64, &[1, d_h]).unwrap());
    let c0 = g.constant(Tensor::zeros(DType::F64, &[1, d_h]).unwrap());
    let out = g
        .while_loop(
            &[t0, h0, c0],
            &[len, xc, wc, bc],
            |g, a| g.less(a[0], a[3]),
            |g, a| {
                let (t, h, c, x, w, b) = (a[0], a[1], a[2], a[4], a[5], a[6]);
                let xt = g.gather(x, t, 0)?;
                let xt = g.expand_dims(xt, 0)?;
                let (h2, c2) = pfor::api::lstm_cell(g, xt, h, c, w, b)?;
                let one = g.constant(Tensor::scalar(1i64));
                Ok(vec![g.add(t, one)?, h2, c2])
            },
        )
        .unwrap();
    g.verify().unwrap();
    let mut s = session(&g, &[out[1]]).unwrap();
    let xv = xs.to_vec::<f64>().unwrap();
    let rows: Vec<Vec<f64>> = xv.chunks(d_in).map(|r| r.to_vec()).collect();
    for l in [0usize, 1, 4, 6] {
        let h = s.run(&[(len, Tensor::scalar(l as i64))]).unwrap().remove(0);
        let want = lstm_ref(&rows[..l], &w.to_vec::<f64>().unwrap(), &b.to_vec::<f64>().unwrap(), d_in, d_h);
        assert_close(&h, &f64t(&[1, d_h], &want), 1e-12);
    }
}
