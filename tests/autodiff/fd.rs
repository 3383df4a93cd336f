//! The derivative oracle: reverse-mode gradients and forward-mode JVPs of a small graph
//! against central finite differences in f64, plus reverse/forward consistency
//! (`<vjp(r), t> == <r, jvp(t)>`) and, on request, second derivatives (the gradient of a
//! gradient against finite differences of the gradient). [`check_second_variant`] builds a
//! case's graph with some differentiated inputs as graph CONSTANTS and a random head on its
//! outputs, and checks its second derivatives against the all-inputs graph and finite
//! differences (derivative rules must not treat constants differently).
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
    /// Whether `xs[i]` is a graph input (fed) rather than a constant.
    fed: Vec<bool>,
    wrt: Vec<usize>,
    loss: ValueId,
    ys: Vec<ValueId>,
    weights: Vec<Option<ValueId>>,
}

fn build(c: &FdCase) -> Built {
    build_with(c, &[], &[], 0)
}

/// A unary op applied to every float output before the loss (see [`Variant::heads`]).
#[derive(Clone, Copy, Debug)]
pub enum Head {
    Tanh,
    Square,
    Sin,
    Swish,
}

impl Head {
    pub const ALL: [Head; 4] = [Head::Tanh, Head::Square, Head::Sin, Head::Swish];

    fn apply(self, g: &mut Graph, y: ValueId) -> Result<ValueId> {
        match self {
            Head::Tanh => g.tanh(y),
            Head::Square => g.square(y),
            Head::Sin => g.sin(y),
            Head::Swish => {
                let s = g.sigmoid(y)?;
                g.mul(y, s)
            }
        }
    }
}

/// Build `c` with the inputs listed in `consts` as graph constants (of the same values),
/// `heads` applied to every float output, and loss weights drawn from `seed`.
fn build_with(c: &FdCase, consts: &[usize], heads: &[Head], seed: u64) -> Built {
    let mut g = Graph::new();
    let fed: Vec<bool> = (0..c.inputs.len()).map(|i| !consts.contains(&i)).collect();
    let xs: Vec<ValueId> = c
        .inputs
        .iter()
        .enumerate()
        .map(|(i, t)| if fed[i] { g.input(&format!("x{i}"), t.dtype(), t.shape()) } else { g.constant(t.clone()) })
        .collect();
    let ys = (c.build)(&mut g, &xs).unwrap_or_else(|e| panic!("{}: build failed: {e}", c.name));
    let vals = run_once(&g, &ys, &feeds_of(&xs, &fed, &c.inputs))
        .unwrap_or_else(|e| panic!("{}: forward failed: {e}", c.name));
    // loss = Σ_k Σ head(y_k) · r_k with fixed random weights r_k.
    let mut loss: Option<ValueId> = None;
    let mut weights = Vec::new();
    for (k, (y, v)) in ys.iter().zip(&vals).enumerate() {
        if !v.dtype().is_float() {
            weights.push(None);
            continue;
        }
        let r = g.constant(randn(v.shape(), 1000 + seed + k as u64).cast(v.dtype()));
        weights.push(Some(r));
        let mut y = *y;
        for h in heads {
            y = h.apply(&mut g, y).unwrap();
        }
        let p = g.mul(y, r).unwrap();
        let s = g.sum_all(p).unwrap();
        let s = if v.dtype() == DType::F64 { s } else { g.cast(s, DType::F64).unwrap() };
        loss = Some(match loss {
            None => s,
            Some(l) => g.add(l, s).unwrap(),
        });
    }
    let loss = loss.unwrap_or_else(|| panic!("{}: no float output", c.name));
    Built { g, xs, fed, wrt: wrt_of(c), loss, ys, weights }
}

/// The inputs a case differentiates: its `wrt`, or every f64 input.
fn wrt_of(c: &FdCase) -> Vec<usize> {
    c.wrt.clone().unwrap_or_else(|| {
        c.inputs.iter().enumerate().filter(|(_, t)| t.dtype() == DType::F64).map(|(i, _)| i).collect()
    })
}

/// Feeds of the graph inputs among `xs` (constants are not fed).
fn feeds_of(xs: &[ValueId], fed: &[bool], inputs: &[Tensor]) -> Vec<(ValueId, Tensor)> {
    xs.iter().copied().zip(inputs.iter().cloned()).zip(fed).filter(|(_, f)| **f).map(|(x, _)| x).collect()
}

fn feeds_with(b: &Built, inputs: &[Tensor]) -> Vec<(ValueId, Tensor)> {
    feeds_of(&b.xs, &b.fed, inputs)
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
        assert!(ok, "{name}: {what}[{j}]: got {a}, want {b}\n got: {got:?}\nwant: {want:?}");
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
    let (g, s, got) = hessian_vector(c, b, grads, 300);
    second_against_fd(c, b, g, s, &got);
}

/// `(graph, s, values of d s / d wrt)` for `s = Σ_k <grads[k], v_k>` with random directions
/// `v_k` drawn from `seed`, built on a copy of `b`'s graph.
fn hessian_vector(c: &FdCase, b: &Built, grads: &[ValueId], seed: u64) -> (Graph, ValueId, Vec<Tensor>) {
    let name = c.name.as_str();
    let mut g = b.g.clone();
    let wrt_vals: Vec<ValueId> = b.wrt.iter().map(|&i| b.xs[i]).collect();
    let mut s: Option<ValueId> = None;
    for (k, gr) in grads.iter().enumerate() {
        let shape = c.inputs[b.wrt[k]].shape().to_vec();
        let v = g.constant(randn(&shape, seed + k as u64));
        let p = g.mul(*gr, v).unwrap();
        let t = g.sum_all(p).unwrap();
        s = Some(match s {
            None => t,
            Some(a) => g.add(a, t).unwrap(),
        });
    }
    let s = s.unwrap();
    let hv = gradients(&mut g, &[s], &wrt_vals, None).unwrap_or_else(|e| panic!("{name}: second order: {e}"));
    let got = run_once(&g, &hv, &feeds_with(b, &c.inputs)).unwrap_or_else(|e| panic!("{name}: second order run: {e}"));
    (g, s, got)
}

/// `got` (d s / d wrt, all of `b`'s wrt inputs fed) against central differences of `s`.
#[track_caller]
fn second_against_fd(c: &FdCase, b: &Built, g: Graph, s: ValueId, got: &[Tensor]) {
    let b2 = Built {
        g: g.clone(),
        xs: b.xs.clone(),
        fed: b.fed.clone(),
        wrt: b.wrt.clone(),
        loss: s,
        ys: vec![],
        weights: vec![],
    };
    let mut sess = Session::new(&g, &[s]).unwrap();
    for (k, &i) in b.wrt.iter().enumerate() {
        let want = fd_grad(&mut sess, &b2, &c.inputs, i, 1e-5);
        compare(&c.name, &format!("second order d/dx{i}"), &got[k].to_f64_vec(), &want, c.tol * 100.0);
    }
}

/// The random parts of a second-order check: which differentiated inputs become graph
/// constants, the heads on the outputs, and the seed of the loss weights and directions.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Bit `j` set: the `j`-th differentiated input is a constant (at least one always is).
    pub const_mask: u64,
    /// Applied in order to every float output.
    pub heads: Vec<Head>,
    /// Seeds the loss weights and the directions of the hessian-vector product.
    pub seed: u64,
}

/// Second derivatives of `c` under `v`: with the chosen inputs as graph constants, and with
/// every differentiated input a constant, they must equal those with every input fed the
/// same values (up to rounding: `1e-9` relative), and those must match finite differences
/// (the case's tolerance × 100).
#[track_caller]
pub fn check_second_variant(c: &FdCase, v: &Variant) {
    let name = c.name.as_str();
    let wrt = wrt_of(c);
    assert!(!wrt.is_empty(), "{name}: no f64 input to differentiate");
    let mut consts: Vec<usize> =
        wrt.iter().enumerate().filter(|(j, _)| v.const_mask >> (j % 64) & 1 == 1).map(|(_, &i)| i).collect();
    if consts.is_empty() {
        consts.push(wrt[(v.const_mask as usize / 2) % wrt.len()]);
    }
    let hv_of = |consts: &[usize]| {
        let mut b = build_with(c, consts, &v.heads, v.seed);
        let wrt_vals: Vec<ValueId> = b.wrt.iter().map(|&i| b.xs[i]).collect();
        let grads =
            gradients(&mut b.g, &[b.loss], &wrt_vals, None).unwrap_or_else(|e| panic!("{name}: gradients: {e}"));
        let (g, s, got) = hessian_vector(c, &b, &grads, 300 + v.seed);
        (b, g, s, got)
    };
    let (b, g, s, fed) = hv_of(&[]);
    second_against_fd(c, &b, g, s, &fed);
    for consts in [consts, wrt.clone()] {
        let (_, _, _, with_consts) = hv_of(&consts);
        for (k, (a, e)) in with_consts.iter().zip(&fed).enumerate() {
            let what = format!("second order d/dx{} with x{consts:?} constants vs inputs", b.wrt[k]);
            compare(name, &what, &a.to_f64_vec(), &e.to_f64_vec(), 1e-9);
        }
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
