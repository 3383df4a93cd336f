//! The oracle: `run(pfor(body)) == stack_i run(body(i))` for every stacked/unstacked pattern
//! of the body's inputs, several loop lengths (0 and 1 included), static and dynamic n, with
//! `Fallback::Error` so a missing converter fails loudly. A static n = 1 is checked in the
//! one-row form (`PforOptions::one_row`, the default) and in the converters' form.
#![allow(dead_code)]

use crate::common::coverage::pfor_recorded;
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

/// How to generate an input's values.
#[derive(Clone, Debug)]
pub enum Gen {
    /// Standard normal floats.
    Normal,
    /// Uniform floats in [lo, hi).
    Uniform(f64, f64),
    /// Integers in [lo, hi).
    Int(i64, i64),
    /// Random booleans.
    Bool,
}

/// One body input: per-iteration shape, dtype and generator.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Per-iteration shape.
    pub shape: Vec<usize>,
    /// Dtype.
    pub dtype: DType,
    /// Values.
    pub values: Gen,
}

impl Spec {
    /// A float input (normal values).
    pub fn float(dtype: DType, shape: &[usize]) -> Spec {
        Spec { shape: shape.to_vec(), dtype, values: Gen::Normal }
    }
    /// An f64 input (normal values).
    pub fn f64(shape: &[usize]) -> Spec {
        Spec::float(DType::F64, shape)
    }
    /// An f32 input (normal values).
    pub fn f32(shape: &[usize]) -> Spec {
        Spec::float(DType::F32, shape)
    }
    /// An i64 input with values in [lo, hi).
    pub fn int(shape: &[usize], lo: i64, hi: i64) -> Spec {
        Spec { shape: shape.to_vec(), dtype: DType::I64, values: Gen::Int(lo, hi) }
    }
    /// A bool input.
    pub fn bool(shape: &[usize]) -> Spec {
        Spec { shape: shape.to_vec(), dtype: DType::Bool, values: Gen::Bool }
    }
    /// Floats uniform in [lo, hi).
    pub fn uniform(dtype: DType, shape: &[usize], lo: f64, hi: f64) -> Spec {
        Spec { shape: shape.to_vec(), dtype, values: Gen::Uniform(lo, hi) }
    }
    fn make(&self, lead: Option<usize>, seed: u64) -> Tensor {
        let mut shape = Vec::new();
        if let Some(n) = lead {
            shape.push(n);
        }
        shape.extend_from_slice(&self.shape);
        match self.values {
            Gen::Normal => Tensor::randn_f64(&shape, seed).unwrap().cast(self.dtype),
            Gen::Uniform(lo, hi) => Tensor::rand_uniform(DType::F64, &shape, lo, hi, seed).unwrap().cast(self.dtype),
            Gen::Int(lo, hi) => {
                let u = Tensor::rand_uniform(DType::F64, &shape, 0.0, 1.0, seed).unwrap().to_f64_vec();
                let v: Vec<i64> = u.iter().map(|x| lo + ((hi - lo) as f64 * x).floor() as i64).collect();
                Tensor::from_vec(&shape, v).expect("shape")
            }
            Gen::Bool => {
                let u = Tensor::rand_uniform(DType::F64, &shape, 0.0, 1.0, seed).unwrap().to_f64_vec();
                Tensor::from_vec(&shape, u.iter().map(|x| *x < 0.5).collect::<Vec<bool>>()).expect("shape")
            }
        }
    }
}

/// The body: per-iteration input values → outputs.
pub type Body<'a> = &'a dyn Fn(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>;

fn tolerance(dt: DType) -> f64 {
    match dt {
        DType::F32 => 2e-4,
        _ => 1e-9,
    }
}

/// Check one case: loop length `n`, `stacked[k]` says whether input k varies per iteration,
/// `dynamic_n` feeds n at run time. Returns a description of the first mismatch.
pub fn check_case(
    specs: &[Spec],
    stacked: &[bool],
    n: usize,
    dynamic_n: bool,
    seed: u64,
    body: Body,
) -> Result<(), String> {
    check_case_with(specs, stacked, n, dynamic_n, seed, &PforOptions::strict(), body)?;
    if n == 1 && !dynamic_n {
        // a static n = 1 takes the one-row form (the body on row 0); the converters' own
        // forms at one row are checked too
        check_case_with(specs, stacked, n, dynamic_n, seed, &PforOptions::strict().with_one_row(false), body)?;
    }
    Ok(())
}

/// [`check_case`] with the given pfor options.
pub fn check_case_with(
    specs: &[Spec],
    stacked: &[bool],
    n: usize,
    dynamic_n: bool,
    seed: u64,
    opts: &PforOptions,
    body: Body,
) -> Result<(), String> {
    let ctx = |e: Error| format!("n={n} stacked={stacked:?} dynamic_n={dynamic_n}: {e}");
    let mut g = Graph::new();
    let mut consts = Vec::with_capacity(specs.len());
    for (k, (s, &st)) in specs.iter().zip(stacked).enumerate() {
        let t = s.make(if st { Some(n) } else { None }, seed.wrapping_mul(31).wrapping_add(k as u64));
        consts.push(g.constant(t));
    }
    let n_in = g.input("n", DType::I64, Shape::scalar());
    let per_iter = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let mut xs = Vec::with_capacity(consts.len());
        for (&c, &st) in consts.iter().zip(stacked) {
            xs.push(if st { g.gather(c, i, 0)? } else { c });
        }
        body(g, &xs)
    };
    let (vec_out, loop_out) = if dynamic_n {
        (pfor_recorded(&mut g, n_in, opts, per_iter).map_err(ctx)?, for_loop(&mut g, n_in, per_iter).map_err(ctx)?)
    } else {
        (pfor_recorded(&mut g, n, opts, per_iter).map_err(ctx)?, for_loop(&mut g, n, per_iter).map_err(ctx)?)
    };
    g.verify().map_err(ctx)?;
    let mut fetch = vec_out.clone();
    fetch.extend(&loop_out);
    let feeds = if dynamic_n { vec![(n_in, Tensor::scalar(n as i64))] } else { vec![] };
    let r = run_once(&g, &fetch, &feeds).map_err(|e| ctx(e) + &format!("\n{g}"))?;
    let k = vec_out.len();
    for j in 0..k {
        let (a, b) = (&r[j], &r[k + j]);
        let tol = tolerance(b.dtype());
        if n == 0 && b.is_empty() && a.is_empty() && a.rank() == b.rank() && a.dtype() == b.dtype() {
            // zero iterations: the loop cannot know dynamic per-iteration dims (it reports 0)
            continue;
        }
        pfor::tensor::assert_close(a, b, tol, tol).map_err(|e| {
            format!("n={n} stacked={stacked:?} dynamic_n={dynamic_n} output {j}: {e}\npfor: {a}\nloop: {b}")
        })?;
    }
    Ok(())
}

/// Every stacked/unstacked pattern of the inputs × n ∈ {0, 1, 2, 7} × static/dynamic n.
pub fn check_all(specs: &[Spec], body: Body) -> Result<(), String> {
    check_patterns(specs, &[0, 1, 2, 7], body)
}

/// Every pattern for the given loop lengths.
pub fn check_patterns(specs: &[Spec], ns: &[usize], body: Body) -> Result<(), String> {
    let k = specs.len();
    for mask in 0..(1u32 << k) {
        let stacked: Vec<bool> = (0..k).map(|b| mask & (1 << b) != 0).collect();
        for &n in ns {
            for dynamic_n in [false, true] {
                check_case(specs, &stacked, n, dynamic_n, 17 + n as u64 + mask as u64, body)?;
            }
        }
    }
    Ok(())
}

/// Panic with the mismatch description.
#[track_caller]
pub fn assert_oracle(specs: &[Spec], body: Body) {
    if let Err(e) = check_all(specs, body) {
        panic!("{e}");
    }
}
