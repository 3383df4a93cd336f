//! The test programs, written with the public `ProgramBuilder` DSL as a user would.
#![allow(dead_code)]

use pfor::autobatch::{FuncId, FunctionBuilder, PrimOp, Program, ProgramBuilder, Var, VarType};
use pfor::prelude::*;

/// A one-output closure applying `f` to every i64 element of input 0.
pub fn map_i64(f: fn(i64) -> i64) -> impl Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static {
    move |x| Ok(x[0].array::<i64>()?.mapv(f).into())
}

/// A one-output closure applying the predicate `f` to every i64 element of input 0.
pub fn test_i64(f: fn(i64) -> bool) -> impl Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static {
    move |x| Ok(x[0].array::<i64>()?.mapv(f).into())
}

/// Elementwise sum of two i64 inputs, as a multi-output closure.
pub fn add_i64(x: &[Tensor]) -> Result<Vec<Tensor>> {
    Ok(vec![(x[0].array::<i64>()? + x[1].array::<i64>()?).into()])
}

fn i64s() -> Vec<VarType> {
    vec![VarType::scalar(DType::I64)]
}

/// The Fibonacci body of TFP's test program, with fib(0) = fib(1) = 1:
/// `cond = n > 1; if cond { nm1 = n-1; fibm1 = fib(nm1); nm2 = n-2; fibm2 = fib(nm2);
/// ans = fibm1 + fibm2 } else { ans = 1 }; return ans`.
pub fn define_fib(pb: &mut ProgramBuilder, fib: FuncId) -> Result<()> {
    pb.define(fib, |f| {
        let n = f.param(0)?;
        let ans = f.result(0)?;
        let fibm1 = f.local("fibm1");
        let fibm2 = f.local("fibm2");
        let cond = f.prim("cond", &[n], test_i64(|n| n > 1))?;
        f.if_else(
            cond,
            |f| {
                let nm1 = f.prim("nm1", &[n], map_i64(|n| n - 1))?;
                f.call_into(fib, &[nm1], &[fibm1])?;
                let nm2 = f.prim("nm2", &[n], map_i64(|n| n - 2))?;
                f.call_into(fib, &[nm2], &[fibm2])?;
                f.prim_into("add", &[fibm1, fibm2], &[ans], add_i64)?;
                f.ret(&[ans])
            },
            |f| {
                f.constant_into(ans, 1i64)?;
                f.ret(&[ans])
            },
        )
    })
}

/// fibonacci as a program of one i64 input.
pub fn fibonacci() -> Program {
    let mut pb = ProgramBuilder::new();
    let fib = pb.declare("fib", &["n"], &["ans"]).unwrap();
    define_fib(&mut pb, fib).unwrap();
    pb.build(fib, &i64s()).unwrap()
}

/// fib(n) with fib(0) = fib(1) = 1, directly.
pub fn fib_ref(n: i64) -> i64 {
    let (mut a, mut b) = (1i64, 1i64);
    for _ in 0..n.max(0) {
        (a, b) = (b, a + b);
    }
    a
}

/// Mutually recursive is_even / is_odd (declare both, then define both).
pub fn even_odd() -> Program {
    let mut pb = ProgramBuilder::new();
    let even = pb.declare("is_even", &["n"], &["ans"]).unwrap();
    let odd = pb.declare("is_odd", &["m"], &["res"]).unwrap();
    let body = |other: FuncId, base: bool| {
        move |f: &mut FunctionBuilder| -> Result<()> {
            let n = f.param(0)?;
            let out = f.result(0)?;
            let zero = f.prim("at_zero", &[n], test_i64(|n| n <= 0))?;
            f.if_else(
                zero,
                |f| {
                    f.constant_into(out, base)?;
                    f.ret(&[out])
                },
                |f| {
                    let nm1 = f.prim("dec", &[n], map_i64(|n| n - 1))?;
                    f.call_into(other, &[nm1], &[out])?;
                    f.ret(&[out])
                },
            )
        }
    };
    pb.define(even, body(odd, true)).unwrap();
    pb.define(odd, body(even, false)).unwrap();
    pb.build(even, &i64s()).unwrap()
}

/// TFP's single-if program: `if input > 1 { ans = 2 } else { ans = 0 }; return ans`.
pub fn single_if() -> Program {
    let mut pb = ProgramBuilder::new();
    let f = pb
        .function("single_if", &["input"], &["ans"], |f| {
            let input = f.param(0)?;
            let ans = f.result(0)?;
            let cond = f.prim("cond", &[input], test_i64(|x| x > 1))?;
            f.if_else(cond, |f| f.constant_into(ans, 2i64), |f| f.constant_into(ans, 0i64))?;
            f.ret(&[ans])
        })
        .unwrap();
    pb.build(f, &i64s()).unwrap()
}

/// Product-typed results: `pair(n) = (F(n), F(n-1), [F(n), F(n-1)] as f32[2])`, recursive.
pub fn fib_pair() -> Program {
    let mut pb = ProgramBuilder::new();
    let pair = pb.declare("pair", &["n"], &["a", "b", "v"]).unwrap();
    pb.define(pair, |f| {
        let n = f.param(0)?;
        let [a, b, v] = [f.result(0)?, f.result(1)?, f.result(2)?];
        let base = f.prim("base", &[n], test_i64(|n| n <= 0))?;
        f.if_else(
            base,
            |f| {
                f.constant_into(a, 1i64)?;
                f.constant_into(b, 0i64)?;
                Ok(())
            },
            |f| {
                let nm1 = f.prim("dec", &[n], map_i64(|n| n - 1))?;
                let r = f.call(pair, &[nm1])?;
                f.prim_into("step", &[r[0], r[1]], &[a, b], |x| {
                    Ok(vec![(x[0].array::<i64>()? + x[1].array::<i64>()?).into(), x[0].clone()])
                })
            },
        )?;
        f.prim_into("pack", &[a, b], &[v], |x| {
            let (a, b) = (x[0].to_vec::<i64>()?, x[1].to_vec::<i64>()?);
            let data: Vec<f32> = a.iter().zip(&b).flat_map(|(a, b)| [*a as f32, *b as f32]).collect();
            Ok(vec![Tensor::from_vec(&[a.len(), 2], data)?])
        })?;
        f.ret(&[a, b, v])
    })
    .unwrap();
    pb.build(pair, &i64s()).unwrap()
}

/// Tail recursion: `sum_to(n, acc) = if n <= 0 { acc } else { sum_to(n - 1, acc + n) }`.
pub fn sum_to() -> Program {
    let mut pb = ProgramBuilder::new();
    let s = pb.declare("sum_to", &["k", "acc"], &["total"]).unwrap();
    pb.define(s, |f| {
        let (k, acc) = (f.param(0)?, f.param(1)?);
        let done = f.prim("done", &[k], test_i64(|k| k <= 0))?;
        f.if_else(
            done,
            |f| f.ret(&[acc]),
            |f| {
                let k1 = f.prim("k1", &[k], map_i64(|k| k - 1))?;
                let acc1 = f.local("acc1");
                f.prim_into("accumulate", &[acc, k], &[acc1], add_i64)?;
                let r = f.call(s, &[k1, acc1])?;
                f.ret(&r)
            },
        )
    })
    .unwrap();
    pb.build(s, &[VarType::scalar(DType::I64), VarType::scalar(DType::I64)]).unwrap()
}

/// Collatz step count with a while loop: per-thread trip counts.
pub fn collatz() -> Program {
    collatz_capped(None)
}

/// [`collatz`] with the loop under `cap`.
pub fn collatz_capped(cap: Option<IterationCap>) -> Program {
    let mut pb = ProgramBuilder::new();
    let f = pb
        .function("collatz", &["x"], &["steps"], |f| {
            let x = f.param(0)?;
            let steps = f.result(0)?;
            f.constant_into(steps, 0i64)?;
            f.while_loop_with(
                cap,
                |f| f.prim("not_one", &[x], test_i64(|x| x > 1)),
                |f| {
                    f.prim_into("collatz_step", &[x, steps], &[x, steps], |t| {
                        let x = t[0].array::<i64>()?.mapv(|x| if x % 2 == 0 { x / 2 } else { 3 * x + 1 });
                        Ok(vec![x.into(), (t[1].array::<i64>()? + 1).into()])
                    })
                },
            )?;
            f.ret(&[steps])
        })
        .unwrap();
    pb.build(f, &i64s()).unwrap()
}

/// Collatz step count, directly.
pub fn collatz_ref(mut x: i64) -> i64 {
    let mut s = 0;
    while x > 1 {
        x = if x % 2 == 0 { x / 2 } else { 3 * x + 1 };
        s += 1;
    }
    s
}

/// Threads reach a costly leaf at different recursion depths:
/// `descend(n, x) = if n > 0 { y = descend(n - 1, x); return y + 0 } else { return leaf(x) }`.
pub fn descend() -> Program {
    let mut pb = ProgramBuilder::new();
    let d = pb.declare("descend", &["n", "x"], &["y"]).unwrap();
    pb.define(d, |f| {
        let (n, x) = (f.param(0)?, f.param(1)?);
        let y = f.result(0)?;
        let more = f.prim("more", &[n], test_i64(|n| n > 0))?;
        f.if_else(
            more,
            |f| {
                let n1 = f.prim("dec", &[n], map_i64(|n| n - 1))?;
                let r = f.call(d, &[n1, x])?;
                f.prim_into("keep", &r, &[y], |t| Ok(vec![t[0].clone()]))?;
                f.ret(&[y])
            },
            |f| {
                f.prim_into("leaf", &[x], &[y], |t| Ok(vec![t[0].array::<f64>()?.mapv(|v| v * 2.0 + 1.0).into()]))?;
                f.ret(&[y])
            },
        )
    })
    .unwrap();
    pb.build(d, &[VarType::scalar(DType::I64), VarType::scalar(DType::F64)]).unwrap()
}

/// Naive batched matvec `[k, d] x [d, d]^T -> [k, d]` (deterministic per row).
pub fn matvec(m: &[f64], d: usize, x: &Tensor) -> Result<Tensor> {
    let xs = x.to_vec::<f64>()?;
    let k = x.shape()[0];
    let mut out = vec![0.0; k * d];
    for r in 0..k {
        for i in 0..d {
            out[r * d + i] = (0..d).map(|j| m[i * d + j] * xs[r * d + j]).sum();
        }
    }
    Tensor::from_vec(&[k, d], out)
}

/// A NUTS-like doubling tree over (q, p, g, logw): depth 0 is a leapfrog step with gradient
/// `g = A q`; depth d builds two subtrees of depth d-1 and combines their log weights.
/// Returns the program (inputs: depth i64[], q f64[d], p f64[d]; outputs q, p, logw).
pub fn nuts(dim: usize, eps: f64) -> Program {
    let a = a_matrix(dim);
    let mut pb = ProgramBuilder::new();
    let tree = pb.declare("tree", &["depth", "q", "p", "g"], &["q_out", "p_out", "g_out", "logw"]).unwrap();
    pb.define(tree, |f| {
        let [depth, q, p, g] = [f.param(0)?, f.param(1)?, f.param(2)?, f.param(3)?];
        let outs = f.results();
        let leaf = f.prim("is_leaf", &[depth], test_i64(|d| d <= 0))?;
        let a = a.clone();
        f.if_else(
            leaf,
            move |f| {
                f.prim_into("leapfrog", &[q, p, g], &outs, move |t| {
                    let (q, p, g) = (t[0].array::<f64>()?, t[1].array::<f64>()?, t[2].array::<f64>()?);
                    let ph = p - &(g * (eps / 2.0));
                    let qn = q + &(&ph * eps);
                    let gn = matvec(&a, dim, &Tensor::from_array(qn.to_owned()))?;
                    let gn = gn.array::<f64>()?;
                    let pn = &ph - &(gn * (eps / 2.0));
                    let logw = pn.mapv(|v| -0.5 * v * v).sum_axis(ndarray::Axis(1));
                    Ok(vec![qn.into(), pn.into(), gn.to_owned().into(), logw.into()])
                })?;
                f.ret(&outs)
            },
            |f| {
                let d1 = f.prim("dec", &[depth], map_i64(|d| d - 1))?;
                let left = f.call(tree, &[d1, q, p, g])?;
                let right = f.call(tree, &[d1, left[0], left[1], left[2]])?;
                let w = f.local("w");
                f.prim_into("logaddexp", &[left[3], right[3]], &[w], |t| {
                    let (a, b) = (t[0].array::<f64>()?, t[1].array::<f64>()?);
                    let m = ndarray::Zip::from(a).and(b).map_collect(|&x, &y| {
                        let hi = x.max(y);
                        hi + ((x - hi).exp() + (y - hi).exp()).ln()
                    });
                    Ok(vec![m.into()])
                })?;
                f.ret(&[right[0], right[1], right[2], w])
            },
        )
    })
    .unwrap();
    let main = pb
        .function("nuts", &["d", "q0", "p0"], &["q", "p", "logw"], |f| {
            let [d, q0, p0] = [f.param(0)?, f.param(1)?, f.param(2)?];
            let g0 = f.local("g0");
            let a = a_matrix(dim);
            f.prim_into("grad0", &[q0], &[g0], move |t| Ok(vec![matvec(&a, dim, &t[0])?]))?;
            let r = f.call(tree, &[d, q0, p0, g0])?;
            f.ret(&[r[0], r[1], r[3]])
        })
        .unwrap();
    let vec_t = VarType::new(DType::F64, &[dim]);
    pb.build(main, &[VarType::scalar(DType::I64), vec_t.clone(), vec_t]).unwrap()
}

/// The symmetric-ish `[dim, dim]` matrix of the NUTS-like test target.
pub fn a_matrix(dim: usize) -> Vec<f64> {
    (0..dim * dim).map(|i| if i % (dim + 1) == 0 { 1.0 } else { 0.1 / (1 + i % 7) as f64 }).collect()
}

/// The variable named `name` (panics in tests if missing).
pub fn var(p: &Program, name: &str) -> Var {
    p.var(name).unwrap_or_else(|| panic!("no variable {name} in\n{p}"))
}

/// Copies that the executors' plans may forward or drop, and ones they must not:
/// `copies(x) = if x > 3 { t = x; x = x + 1; u = t; (u * 10 + x) } else { a = x; double = 2x;
/// (a, double) = (double, a); x = x; (a * 100 + double) }`, i.e. `11x + 1` or `201x`. `t`, `u`, `a`, `double`
/// are block temporaries; `t`'s source is overwritten before `t` is read (through `u`).
pub fn copies() -> Program {
    let mut pb = ProgramBuilder::new();
    let f = pb
        .function("copies", &["x"], &["y"], |f| {
            let x = f.param(0)?;
            let y = f.result(0)?;
            let big = f.prim("big", &[x], test_i64(|x| x > 3))?;
            f.if_else(
                big,
                |f| {
                    let (t, u) = (f.local("t"), f.local("u"));
                    f.op(PrimOp::copy("save", &[x], &[t]))?;
                    f.prim_into("inc", &[x], &[x], |v| Ok(vec![v[0].array::<i64>()?.mapv(|x| x + 1).into()]))?;
                    f.op(PrimOp::copy("chain", &[t], &[u]))?;
                    f.prim_into("combine", &[u, x], &[y], |v| {
                        Ok(vec![(v[0].array::<i64>()? * 10 + v[1].array::<i64>()?).into()])
                    })
                },
                |f| {
                    let a = f.local("a");
                    f.op(PrimOp::copy("take", &[x], &[a]))?;
                    let b = f.prim("double", &[x], map_i64(|x| 2 * x))?;
                    f.op(PrimOp::copy("swap", &[b, a], &[a, b]))?;
                    f.op(PrimOp::copy("same", &[x], &[x]))?;
                    f.prim_into("mix", &[a, b], &[y], |v| {
                        Ok(vec![(v[0].array::<i64>()? * 100 + v[1].array::<i64>()?).into()])
                    })
                },
            )?;
            f.ret(&[y])
        })
        .unwrap();
    pb.build(f, &i64s()).unwrap()
}
