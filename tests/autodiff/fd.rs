//! The derivative oracle: reverse-mode gradients and forward-mode JVPs of a small graph
//! against central finite differences in f64, plus reverse/forward consistency
//! (`<vjp(r), t> == <r, jvp(t)>`) and, on request, second derivatives (the gradient of a
//! gradient against finite differences of the gradient).
#![allow(dead_code)]

use pfor::autodiff::{gradients, jvp};
use pfor::prelude::*;

type Build = Box<dyn Fn(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>>;

/// One derivative test: input values (f64 ones are differentiated; integer and bool ones
/// are fed unchanged) and a graph builder.
pub struct FdCase {
    /// A readable name for failures.
    pub name: String,
    /// The input values.
    pub inputs: Vec<Tensor>,
    /// Builds the outputs from the inputs.
    pub build: Build,
    /// Relative / absolute tolerance.
    pub tol: f64,
    /// Also check second derivatives.
    pub second_order: bool,
    /// Indices of the inputs to differentiate (default: every f64 input).
    pub wrt: Option<Vec<usize>>,
}

/// A case with the default tolerance (1e-5), first order only.
pub fn case(
    name: &str,
    inputs: Vec<Tensor>,
    build: impl Fn(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>> + 'static,
) -> FdCase {
    FdCase { name: name.to_string(), inputs, build: Box::new(build), tol: 1e-5, second_order: false, wrt: None }
}

impl FdCase {
    /// Also check second derivatives.
    pub fn second(mut self) -> Self {
        self.second_order = true;
        self
    }
    /// Set the tolerance.
    pub fn tol(mut self, tol: f64) -> Self {
        self.tol = tol;
        self
    }
    /// Differentiate only these inputs.
    pub fn wrt(mut self, idx: &[usize]) -> Self {
        self.wrt = Some(idx.to_vec());
        self
    }
}

/// Normal f64 values.
pub fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_f64(shape, seed).unwrap()
}
/// Uniform f64 values in [lo, hi).
pub fn unif(shape: &[usize], lo: f64, hi: f64, seed: u64) -> Tensor {
    Tensor::rand_uniform(DType::F64, shape, lo, hi, seed).unwrap()
}

/// The op kinds a case's graph uses (for the coverage test).
pub fn kinds(c: &FdCase) -> Vec<OpKind> {
    let mut g = Graph::new();
    let xs: Vec<ValueId> =
        c.inputs.iter().enumerate().map(|(i, t)| g.input(&format!("x{i}"), t.dtype(), t.shape())).collect();
    (c.build)(&mut g, &xs).unwrap_or_else(|e| panic!("{}: build failed: {e}", c.name));
    g.node_ids().into_iter().map(|n| g.node(n).unwrap().op.kind()).collect()
}

struct Built {
    g: Graph,
    xs: Vec<ValueId>,
    wrt: Vec<usize>,
    loss: ValueId,
    ys: Vec<ValueId>,
    weights: Vec<Option<ValueId>>,
}

fn build(c: &FdCase) -> Built {
    let mut g = Graph::new();
    let xs: Vec<ValueId> =
        c.inputs.iter().enumerate().map(|(i, t)| g.input(&format!("x{i}"), t.dtype(), t.shape())).collect();
    let ys = (c.build)(&mut g, &xs).unwrap_or_else(|e| panic!("{}: build failed: {e}", c.name));
    let feeds: Vec<(ValueId, Tensor)> = xs.iter().copied().zip(c.inputs.iter().cloned()).collect();
    let vals = run_once(&g, &ys, &feeds).unwrap_or_else(|e| panic!("{}: forward failed: {e}", c.name));
    // loss = Σ_k Σ y_k · r_k with fixed random weights r_k.
    let mut loss: Option<ValueId> = None;
    let mut weights = Vec::new();
    for (k, (y, v)) in ys.iter().zip(&vals).enumerate() {
        if !v.dtype().is_float() {
            weights.push(None);
            continue;
        }
        let r = g.constant(randn(v.shape(), 1000 + k as u64).cast(v.dtype()));
        weights.push(Some(r));
        let p = g.mul(*y, r).unwrap();
        let s = g.sum_all(p).unwrap();
        let s = if v.dtype() == DType::F64 { s } else { g.cast(s, DType::F64).unwrap() };
        loss = Some(match loss {
            None => s,
            Some(l) => g.add(l, s).unwrap(),
        });
    }
    let loss = loss.unwrap_or_else(|| panic!("{}: no float output", c.name));
    let wrt = c.wrt.clone().unwrap_or_else(|| {
        c.inputs.iter().enumerate().filter(|(_, t)| t.dtype() == DType::F64).map(|(i, _)| i).collect()
    });
    Built { g, xs, wrt, loss, ys, weights }
}

fn feeds_with(b: &Built, inputs: &[Tensor]) -> Vec<(ValueId, Tensor)> {
    b.xs.iter().copied().zip(inputs.iter().cloned()).collect()
}

/// Central differences of `f` (a scalar f64 fetch) w.r.t. every element of input `i`.
fn fd_grad(sess: &mut Session, b: &Built, inputs: &[Tensor], i: usize, eps: f64) -> Vec<f64> {
    let base = inputs[i].to_f64_vec();
    let shape = inputs[i].shape().to_vec();
    let mut out = Vec::with_capacity(base.len());
    for j in 0..base.len() {
        let mut eval_at = |d: f64| {
            let mut v = base.clone();
            v[j] += d;
            let mut ins = inputs.to_vec();
            ins[i] = Tensor::from_vec(&shape, v).unwrap();
            sess.run(&feeds_with(b, &ins)).unwrap()[0].scalar_f64().unwrap()
        };
        out.push((eval_at(eps) - eval_at(-eps)) / (2.0 * eps));
    }
    out
}

#[track_caller]
fn compare(name: &str, what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{name}: {what}: length");
    for (j, (a, b)) in got.iter().zip(want).enumerate() {
        let ok = (a - b).abs() <= tol * (1.0 + b.abs()) || (a.is_nan() && b.is_nan());
        assert!(ok, "{name}: {what}[{j}]: got {a}, want {b} (finite differences)\n got: {got:?}\nwant: {want:?}");
    }
}

/// Run every check of a case; panics with the case name and the element that differs.
#[track_caller]
pub fn check(c: &FdCase) {
    let mut b = build(c);
    let name = c.name.as_str();
    let wrt_vals: Vec<ValueId> = b.wrt.iter().map(|&i| b.xs[i]).collect();
    let grads = gradients(&mut b.g, &[b.loss], &wrt_vals, None).unwrap_or_else(|e| panic!("{name}: gradients: {e}"));

    // Forward mode: random tangents for every differentiated input.
    let tangents: Vec<Tensor> =
        b.wrt.iter().enumerate().map(|(k, &i)| randn(c.inputs[i].shape(), 77 + k as u64)).collect();
    let tvals: Vec<ValueId> = tangents.iter().map(|t| b.g.constant(t.clone())).collect();
    let jv = jvp(&mut b.g, &b.ys, &wrt_vals, &tvals).unwrap_or_else(|e| panic!("{name}: jvp: {e}"));
    // <r, jvp(t)>
    let mut dir: Option<ValueId> = None;
    for (t, r) in jv.iter().zip(&b.weights) {
        if let Some(r) = r {
            let p = b.g.mul(*t, *r).unwrap();
            let s = b.g.sum_all(p).unwrap();
            let s = if b.g.dtype(s).unwrap() == DType::F64 { s } else { b.g.cast(s, DType::F64).unwrap() };
            dir = Some(match dir {
                None => s,
                Some(d) => b.g.add(d, s).unwrap(),
            });
        }
    }
    let dir = dir.unwrap();
    b.g.verify().unwrap_or_else(|e| panic!("{name}: derivative graph does not verify: {e}"));

    let mut fetches = grads.clone();
    fetches.push(dir);
    let feeds = feeds_with(&b, &c.inputs);
    let got = run_once(&b.g, &fetches, &feeds).unwrap_or_else(|e| panic!("{name}: running derivatives: {e}"));
    let mut sess = Session::new(&b.g, &[b.loss]).unwrap();
    let eps = 1e-6;
    let mut directional_fd = 0.0;
    let mut directional_rev = 0.0;
    for (k, &i) in b.wrt.iter().enumerate() {
        let want = fd_grad(&mut sess, &b, &c.inputs, i, eps);
        let g = got[k].to_f64_vec();
        compare(name, &format!("d loss / d x{i}"), &g, &want, c.tol);
        let t = tangents[k].to_f64_vec();
        directional_fd += want.iter().zip(&t).map(|(a, b)| a * b).sum::<f64>();
        directional_rev += g.iter().zip(&t).map(|(a, b)| a * b).sum::<f64>();
    }
    let fwd = got[b.wrt.len()].scalar_f64().unwrap();
    compare(name, "jvp (directional derivative)", &[fwd], &[directional_fd], c.tol);
    compare(name, "jvp vs vjp", &[fwd], &[directional_rev], c.tol);

    if c.second_order {
        check_second(c, &b, &grads);
    }
}

/// Hessian-vector products: d/dx <grad(x), v> against finite differences of the gradient.
fn check_second(c: &FdCase, b: &Built, grads: &[ValueId]) {
    let name = c.name.as_str();
    let mut g = b.g.clone();
    let wrt_vals: Vec<ValueId> = b.wrt.iter().map(|&i| b.xs[i]).collect();
    let mut s: Option<ValueId> = None;
    for (k, gr) in grads.iter().enumerate() {
        let shape = c.inputs[b.wrt[k]].shape().to_vec();
        let v = g.constant(randn(&shape, 300 + k as u64));
        let p = g.mul(*gr, v).unwrap();
        let t = g.sum_all(p).unwrap();
        s = Some(match s {
            None => t,
            Some(a) => g.add(a, t).unwrap(),
        });
    }
    let s = s.unwrap();
    let hv = gradients(&mut g, &[s], &wrt_vals, None).unwrap_or_else(|e| panic!("{name}: second order: {e}"));
    let feeds = feeds_with(b, &c.inputs);
    let got = run_once(&g, &hv, &feeds).unwrap_or_else(|e| panic!("{name}: second order run: {e}"));
    let b2 = Built { g: g.clone(), xs: b.xs.clone(), wrt: b.wrt.clone(), loss: s, ys: vec![], weights: vec![] };
    let mut sess = Session::new(&g, &[s]).unwrap();
    for (k, &i) in b.wrt.iter().enumerate() {
        let want = fd_grad(&mut sess, &b2, &c.inputs, i, 1e-5);
        compare(name, &format!("second order d/dx{i}"), &got[k].to_f64_vec(), &want, c.tol * 100.0);
    }
}

/// Apply `f` to every element of an f64 tensor.
pub fn map(t: &Tensor, f: impl Fn(f64) -> f64) -> Tensor {
    Tensor::from_vec(t.shape(), t.to_f64_vec().into_iter().map(f).collect::<Vec<f64>>()).unwrap()
}

/// `x` with every dim dynamic (its shape known only at run time): derivative rules then
/// cannot read static dims.
pub fn dyn_dims(g: &mut Graph, x: ValueId) -> Result<ValueId> {
    let s = g.shape_of(x)?;
    g.reshape_dyn(x, s)
}
