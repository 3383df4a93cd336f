//! The malformed-graph fuzz harness (issue 16): proptest draws graphs built through the
//! PUBLIC API only — valid and malformed — with random and hostile feeds, and drives every
//! entry point on them. Asserted for every case: no panic (`catch_unwind`), no hang (every
//! run has a deadline, and the whole case a watchdog), and no mismatch between `pfor` and
//! the reference loop.
//!
//! What a case is ([`Case`]): 1–3 inputs (f32 / f64 / i64 / bool, rank 0–3, dims 0–3)
//! whose declared shapes are fixed, named-dynamic, unknown or deliberately wrong; values
//! that are normal, special (NaN, ±inf, -0, 1e30), small integers, hostile integers
//! (`i64::MIN`, `-1`, `i64::MAX`: overflowing division and abs, out-of-range indices) or
//! booleans; then 1–7 [`Step`]s from every op family with hostile attributes (the op table
//! and its coverage: `fuzz_ops.rs`), control flow (cond with a captured outer value and a
//! raising branch, capped and uncapped while, recursion, a function using an outer value)
//! and foreign and stale handles. A step the builder rejects is an `Err` and is skipped.
//!
//! What each case runs:
//! 1. the graph: `Session::with_options` under a memory budget and `run_with` under a
//!    deadline, with correct feeds or one fault (wrong dtype, wrong shape, a missing feed,
//!    an extra feed of a non-input, a foreign handle);
//! 2. derivatives of its first float fetch: `gradients` (no seed, a right one, a wrong-shaped
//!    one, a foreign one) and `jvp` (a right or a wrong-shaped tangent), then run;
//! 3. the same steps as a loop body: `pfor` or `vectorized_map` in strict mode
//!    (`Fallback::Error`, `Randomness::Same`) against `for_loop`, over stacked or
//!    loop-invariant sources (constants, or inputs fed at run time), static or dynamic n
//!    (0 included), each in its own graph, each run under the budget and the deadline.
//!
//! The pfor rule (see [`compare`]): where the loop runs `Ok`, pfor must build and run `Ok`
//! with equal values (ints and bools exactly, floats within a tolerance for reassociated
//! reductions, NaN == NaN, non-finite == non-finite of the same sign), unless its error is
//! one the loop could not have avoided on this input or that the docs allow:
//! - `NoConverter` (strict mode: no converter for an input pattern; the same case is then
//!   converted again with `Fallback::Silent`, which must succeed and match);
//! - `OutOfMemory` against the budget (pfor holds all iterations in one tensor, so a budget
//!   the loop's per-iteration tensors fit may refuse pfor's: the budget is per tensor);
//! - `DeadlineExceeded` (the loop finished in time; pfor need not);
//! - a ragged result (`nonzero` whose per-iteration lengths differ: documented in README
//!   "Semantics worth knowing");
//! - with n = 0, any error when the loop fails with n = 1 ([`raised_with_one_iteration`]:
//!   the empty loop runs nothing, pfor still evaluates its ops on the invariant data).
//!
//! Where the loop fails, pfor may fail or succeed: counted (`loop err, pfor ok`), not
//! asserted (pfor evaluates ops in another order and may not reach a failing op whose
//! result no output reads, e.g. after simplification).
//!
//! A step whose builder rejects its operands' dtypes is retried once with the operands cast
//! to the first one's dtype, so that graphs grow past dtype mismatches. The loop-body
//! sources are declared with correct shapes (fixed, dynamic or unknown): graph mode covers
//! the wrong declarations.
//!
//! Sizing and seeds: [`CASES`] cases (≥ 2,000) in CI; a fixed seed, so CI is reproducible,
//! and `PFOR_FUZZ_SEED=<u64>` / `PFOR_FUZZ_CASES=<n>` explore further. A failing case is
//! shrunk by proptest and its seed saved in `proptest-regressions/robustness/fuzz.txt`,
//! replayed first on every later run. Huge allocations cannot abort the process: every
//! session runs with `max_tensor_bytes` = [`BUDGET`], and every feed and constant the
//! harness makes is tiny (declared dims may be huge, the tensors fed are not).
//!
//! Outcomes are counted by class and printed (`--nocapture`).

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngAlgorithm, TestRng, TestRunner};

use super::fuzz_ops::{FAMILIES, Hostile, Step, apply, graph_with_recursion, hostile};
use pfor::api::vectorized_map_with;
use pfor::autodiff::{gradients, jvp};
use pfor::prelude::*;
use pfor::vectorize::{Fallback, PforOptions, Randomness, pfor_with};

/// Cases per CI run.
const CASES: u32 = 2000;
/// The memory budget of every session: 4 MiB per tensor.
const BUDGET: usize = 4 << 20;
/// Deadline of every run.
const DEADLINE: Duration = Duration::from_millis(1500);
/// Watchdog of a whole case (building included): past it, the case hangs.
const WATCHDOG: Duration = Duration::from_secs(60);

/// One input of a case.
#[derive(Clone, Debug)]
pub struct InSpec {
    pub dtype: DType,
    /// The concrete dims fed (per iteration in a loop body).
    pub dims: Vec<usize>,
    /// Per dim: 0 fixed, 1 dynamic named, 2 unknown, 3 a wrong fixed dim, 4 a huge fixed dim.
    pub decl: Vec<u8>,
    /// Value generator (see [`values`]).
    pub data: u8,
    /// Varies per iteration in the loop body.
    pub stacked: bool,
}

/// A feed fault in graph mode.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    None,
    WrongDtype(usize),
    WrongShape(usize),
    Missing(usize),
    ExtraNonInput,
    Foreign,
}

/// One fuzz case.
#[derive(Clone, Debug)]
pub struct Case {
    pub inputs: Vec<InSpec>,
    pub steps: Vec<Step>,
    /// How many of the last values to fetch (1–3).
    pub fetch: usize,
    pub fault: Fault,
    /// Loop length.
    pub n: usize,
    pub dynamic_n: bool,
    /// Loop-body sources are fed inputs (else constants).
    pub fed_sources: bool,
    pub vmap: bool,
    pub stale: bool,
    /// Seed / tangent choice for the derivatives (0–3).
    pub seeds: u8,
    pub seed: u64,
}

fn hostile_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        12 => -3i64..6,
        1 => Just(i64::MAX),
        1 => Just(i64::MIN),
        1 => Just(1i64 << 40),
        1 => Just(-(1i64 << 33)),
        1 => Just(1i64 << 20),
    ]
}

fn hostile_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => -2.0f64..2.0,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(0.0),
        1 => Just(1e300),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<[u8; 3]>(),
        prop::collection::vec(hostile_int(), 0..5),
        hostile_float(),
        any::<[bool; 2]>(),
    )
        .prop_map(|(family, sub, args, ints, float, flags)| Step { family, sub, args, ints, float, flags })
}

fn in_spec() -> impl Strategy<Value = InSpec> {
    (0u8..4, prop::collection::vec(0usize..4, 0..4), any::<u64>(), any::<u8>(), any::<bool>()).prop_map(
        |(dt, dims, decl_bits, data, stacked)| {
            let dtype = [DType::F32, DType::F64, DType::I64, DType::Bool][dt as usize];
            // mostly fixed; sometimes dynamic, unknown, wrong or huge
            let decl = (0..dims.len())
                .map(|k| match (decl_bits >> (8 * k)) as u8 % 16 {
                    0..=9 => 0,
                    10 | 11 => 1,
                    12 => 2,
                    13 | 14 => 3,
                    _ => 4,
                })
                .collect();
            InSpec { dtype, dims, decl, data, stacked }
        },
    )
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        10 => Just(Fault::None),
        1 => (0usize..3).prop_map(Fault::WrongDtype),
        1 => (0usize..3).prop_map(Fault::WrongShape),
        1 => (0usize..3).prop_map(Fault::Missing),
        1 => Just(Fault::ExtraNonInput),
        1 => Just(Fault::Foreign),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(in_spec(), 1..4),
        prop::collection::vec(step(), 1..8),
        1usize..4,
        fault(),
        prop_oneof![Just(0usize), Just(1usize), 2usize..4],
        any::<[bool; 4]>(),
        0u8..4,
        any::<u64>(),
    )
        .prop_map(|(inputs, steps, fetch, fault, n, [dynamic_n, fed_sources, vmap, stale], seeds, seed)| Case {
            inputs,
            steps,
            fetch,
            fault,
            n,
            dynamic_n,
            fed_sources,
            vmap,
            stale,
            seeds,
            seed,
        })
}

// ---------------------------------------------------------------------------------------
// Values

fn splitmix(z: &mut u64) -> u64 {
    *z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut x = *z;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A tensor of `dtype` and `shape` from generator `data`: floats normal / special / small
/// integers; i64 small / hostile / index-like; bools.
fn values(dtype: DType, shape: &[usize], data: u8, seed: u64) -> Tensor {
    let len: usize = shape.iter().product();
    let mut z = seed;
    let mut next = || splitmix(&mut z);
    const SPECIAL: [f64; 8] = [0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.0, -1.0, -0.0, 1e30];
    const HOSTILE: [i64; 6] = [i64::MIN, -1, 0, i64::MAX, 3, 1];
    let t = match dtype {
        DType::F32 | DType::F64 => {
            let v: Vec<f64> = (0..len)
                .map(|_| match data % 3 {
                    0 => (next() % 2001) as f64 / 500.0 - 2.0,
                    1 => SPECIAL[(next() % 8) as usize],
                    _ => (next() % 6) as f64 - 2.0,
                })
                .collect();
            Tensor::from_vec(shape, v).map(|t| t.cast(dtype))
        }
        DType::I64 => {
            let v: Vec<i64> = (0..len)
                .map(|_| match data % 3 {
                    0 => (next() % 7) as i64 - 2,
                    1 => HOSTILE[(next() % 6) as usize],
                    _ => (next() % 3) as i64,
                })
                .collect();
            Tensor::from_vec(shape, v)
        }
        DType::Bool => Tensor::from_vec(shape, (0..len).map(|_| next() % 2 == 0).collect::<Vec<bool>>()),
    };
    t.expect("harness tensors are small")
}

fn declared(spec: &InSpec, lead: Option<usize>) -> Shape {
    let mut dims: Vec<Dim> = lead.map(Dim::fixed).into_iter().collect();
    for (k, (&d, &how)) in spec.dims.iter().zip(&spec.decl).enumerate() {
        dims.push(match how {
            0 => Dim::fixed(d),
            1 => Dim::dynamic(&format!("d{k}")),
            2 => Dim::unknown(),
            3 => Dim::fixed(d + 1),
            _ => Dim::fixed(1 << 40),
        });
    }
    Shape::from(dims)
}

fn with_lead(lead: Option<usize>, dims: &[usize]) -> Vec<usize> {
    lead.into_iter().chain(dims.iter().copied()).collect()
}

// ---------------------------------------------------------------------------------------
// Outcomes

/// Outcome counts by class.
#[derive(Default, Debug)]
pub struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn add(&mut self, class: impl Into<String>) {
        *self.0.entry(class.into()).or_default() += 1;
    }
    fn merge(&mut self, other: Tally) {
        for (k, v) in other.0 {
            *self.0.entry(k).or_default() += v;
        }
    }
}

/// The variant of an error's root (its class).
fn kind(e: &Error) -> String {
    let s = format!("{:?}", e.root());
    s.split([' ', '(', '{']).next().unwrap_or("?").to_string()
}

fn class(what: &str, r: &Result<impl Sized>) -> String {
    match r {
        Ok(_) => format!("{what}: ok"),
        Err(e) => format!("{what}: err {}", kind(e)),
    }
}

/// `PFOR_FUZZ_TRACE=1` prints each phase of a case as it starts (to find a hang).
fn phase(what: &str) {
    if std::env::var_os("PFOR_FUZZ_TRACE").is_some() {
        eprintln!("fuzz phase: {what}");
    }
}

fn options() -> ExecOptions {
    ExecOptions { max_tensor_bytes: Some(BUDGET), ..ExecOptions::default() }
}

fn run(g: &Graph, fetch: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
    phase("run");
    let mut s = Session::with_options(g, fetch, options())?;
    s.run_with(feeds, &RunOptions::timeout(DEADLINE))
}

/// Apply every step, skipping the ones the builders reject; the last `fetch` values.
fn trace(g: &mut Graph, case: &Case, mut vals: Vec<ValueId>, h: &Hostile, tally: &mut Tally) -> Vec<ValueId> {
    for s in &case.steps {
        phase(&format!("step {s:?}"));
        let family = FAMILY_NAMES[(s.family % FAMILIES) as usize];
        let mut r = apply(g, s, &vals, h);
        if let Err(e) = &r
            && matches!(e.root(), Error::DType { .. })
        {
            // Retry once with the operands cast to the first one's dtype (so that steps
            // reach past dtype mismatches into deeper graphs).
            tally.add(format!("build step: err DType, retried with cast operands ({family})"));
            r = coerced(g, s, &vals).and_then(|(step, vs)| apply(g, &step, &vs, h));
        }
        match r {
            Ok(vs) => {
                tally.add(format!("build step: ok ({family})"));
                vals.extend(vs)
            }
            Err(e) => tally.add(format!("build step: err {}", kind(&e))),
        }
    }
    let k = case.fetch.min(vals.len());
    vals[vals.len() - k..].to_vec()
}

/// The family names of `fuzz_ops::apply`, for the tally.
const FAMILY_NAMES: [&str; FAMILIES as usize] = [
    "unary",
    "binary",
    "elementwise",
    "reduce",
    "shape",
    "slicing",
    "indexing",
    "linear",
    "conv",
    "nn",
    "linalg",
    "random",
    "cond",
    "while",
    "call/handles",
];

/// `s`'s operands cast to its first operand's dtype, and `s` reading them in order.
fn coerced(g: &mut Graph, s: &Step, vals: &[ValueId]) -> Result<(Step, Vec<ValueId>)> {
    let picked: Vec<ValueId> = s.args.iter().map(|&k| vals[k as usize % vals.len()]).collect();
    let dt = g.value_type(picked[0])?.dtype;
    let vs = picked.iter().map(|&v| g.cast(v, dt)).collect::<Result<Vec<_>>>()?;
    Ok((Step { args: [0, 1, 2], ..s.clone() }, vs))
}

fn new_graph(case: &Case) -> (Graph, Hostile) {
    let mut g = graph_with_recursion();
    let h = hostile(&mut g, case.stale).expect("a graph without nodes");
    (g, h)
}

// ---------------------------------------------------------------------------------------
// 1 + 2: the graph, its feeds, its derivatives

fn graph_mode(case: &Case, tally: &mut Tally) {
    let (mut g, h) = new_graph(case);
    let inputs: Vec<ValueId> =
        case.inputs.iter().enumerate().map(|(k, s)| g.input(&format!("x{k}"), s.dtype, declared(s, None))).collect();
    let fetch = trace(&mut g, case, inputs.clone(), &h, tally);
    let mut feeds: Vec<(ValueId, Tensor)> = case
        .inputs
        .iter()
        .zip(&inputs)
        .enumerate()
        .map(|(k, (s, &x))| (x, values(s.dtype, &s.dims, s.data, case.seed.wrapping_add(k as u64))))
        .collect();
    let nth = |k: usize| k % feeds.len();
    match case.fault {
        Fault::None => {}
        Fault::WrongDtype(k) => {
            let k = nth(k);
            let to = if feeds[k].1.dtype() == DType::F32 { DType::I64 } else { DType::F32 };
            feeds[k].1 = feeds[k].1.cast(to);
        }
        Fault::WrongShape(k) => {
            let k = nth(k);
            let t = &feeds[k].1;
            feeds[k].1 = values(t.dtype(), &with_lead(Some(2), t.shape()), 0, case.seed);
        }
        Fault::Missing(k) => {
            feeds.remove(nth(k));
        }
        Fault::ExtraNonInput => feeds.push((fetch[0], Tensor::scalar(1.0f32))),
        Fault::Foreign => feeds.push((h.foreign, Tensor::zeros(DType::F32, &[2]).expect("small"))),
    }
    tally.add(class("graph run", &run(&g, &fetch, &feeds)));
    derivatives(&mut g, case, &inputs, &fetch, &feeds, &h, tally);
}

fn derivatives(
    g: &mut Graph,
    case: &Case,
    inputs: &[ValueId],
    fetch: &[ValueId],
    feeds: &[(ValueId, Tensor)],
    h: &Hostile,
    tally: &mut Tally,
) {
    let is_float = |g: &Graph, v: ValueId| g.value_type(v).map(|t| t.dtype.is_float()).unwrap_or(false);
    let Some(&y) = fetch.iter().find(|&&v| is_float(g, v)) else { return };
    let xs: Vec<ValueId> = inputs.iter().copied().filter(|&x| is_float(g, x)).collect();
    let Some(&x0) = xs.first() else { return };
    phase("derivatives");
    let grads = (|| {
        let s = g.sum_all(y)?;
        let seed = match case.seeds {
            0 => None,
            1 => Some(g.ones_like(s)?),
            2 => Some(g.constant(Tensor::zeros(DType::F32, &[3])?)),
            _ => Some(h.foreign),
        };
        let seeds = seed.map(|v| vec![v]);
        gradients(g, &[s], &xs, seeds.as_deref())
    })();
    tally.add(class("gradients build", &grads));
    if let Ok(d) = grads {
        tally.add(class("gradients run", &run(g, &d, feeds)));
    }
    let tangents = (|| {
        let t =
            if case.seeds.is_multiple_of(2) { g.ones_like(x0)? } else { g.constant(Tensor::zeros(DType::F64, &[5])?) };
        jvp(g, &[y], &[x0], &[t])
    })();
    tally.add(class("jvp build", &tangents));
    if let Ok(d) = tangents {
        tally.add(class("jvp run", &run(g, &d, feeds)));
    }
}

// ---------------------------------------------------------------------------------------
// 3: pfor / vectorized_map against for_loop

/// How the loop was built and ran.
enum Side {
    Built(Result<Vec<Tensor>>),
    BuildErr(Error),
}

/// Build the loop (`vectorize = None`) or pfor with `fallback` in a fresh graph and run it.
fn loop_side(case: &Case, vectorize: Option<Fallback>, tally: &mut Tally) -> Side {
    let (mut g, h) = new_graph(case);
    let mut feeds = Vec::new();
    let sources: Vec<(ValueId, bool)> = case
        .inputs
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let lead = s.stacked.then_some(case.n);
            let t = values(s.dtype, &with_lead(lead, &s.dims), s.data, case.seed.wrapping_add(k as u64));
            let v = if case.fed_sources {
                // graph mode covers wrong declarations; here only fixed / dynamic / unknown
                let decl = s.decl.iter().map(|&d| if d >= 3 { 0 } else { d }).collect();
                let x = g.input(&format!("x{k}"), s.dtype, declared(&InSpec { decl, ..s.clone() }, lead));
                feeds.push((x, t));
                x
            } else {
                g.constant(t)
            };
            (v, s.stacked)
        })
        .collect();
    let n: LoopLen = if case.dynamic_n {
        let v = g.input("n", DType::I64, Shape::scalar());
        feeds.push((v, Tensor::scalar(case.n as i64)));
        v.into()
    } else {
        case.n.into()
    };
    let mut body_tally = Tally::default();
    let mut body =
        |g: &mut Graph, xs: Vec<ValueId>| -> Result<Vec<ValueId>> { Ok(trace(g, case, xs, &h, &mut body_tally)) };
    phase(&format!("build {vectorize:?}"));
    let built = match vectorize {
        None => for_loop(&mut g, n, |g, i| {
            let xs = rows(g, &sources, i)?;
            body(g, xs)
        }),
        Some(fallback) => {
            let opts = PforOptions::strict().with_fallback(fallback).with_randomness(Randomness::Same);
            let elems: Vec<ValueId> = sources.iter().filter(|s| s.1).map(|s| s.0).collect();
            if case.vmap && !elems.is_empty() && !case.dynamic_n {
                vectorized_map_with(
                    &mut g,
                    &opts,
                    |g, rows| {
                        let mut rows = rows.iter();
                        let xs =
                            sources.iter().map(|&(v, st)| if st { *rows.next().expect("a row") } else { v }).collect();
                        body(g, xs)
                    },
                    &elems,
                )
            } else {
                pfor_with(&mut g, n, &opts, |g, i| {
                    let xs = rows(g, &sources, i)?;
                    body(g, xs)
                })
            }
        }
    };
    if vectorize.is_none() {
        tally.merge(body_tally);
    }
    match built {
        Ok(outs) => Side::Built(run(&g, &outs, &feeds)),
        Err(e) => Side::BuildErr(e),
    }
}

fn rows(g: &mut Graph, sources: &[(ValueId, bool)], i: ValueId) -> Result<Vec<ValueId>> {
    sources.iter().map(|&(v, stacked)| if stacked { g.gather(v, i, 0) } else { Ok(v) }).collect()
}

/// Whether a pfor error is allowed where the loop ran `Ok` (see the module docs).
fn allowed(e: &Error) -> bool {
    match e.root() {
        Error::OutOfMemory { limit: Some(_), .. } | Error::DeadlineExceeded { .. } | Error::NoConverter { .. } => true,
        other => other.to_string().contains("iterations' results differ in length"),
    }
}

/// With zero iterations the loop runs nothing, so it cannot raise what every iteration
/// would, while pfor still evaluates its batched ops (on empty stacked values and the
/// loop-invariant ones, which are then the only data). Its error is allowed when the loop
/// fails with one iteration (same invariant inputs): the body fails on this input, and
/// which of its failing ops reports first is not specified (pfor runs ops in another
/// order). Loops of one or more iterations are held to the strict rule.
fn raised_with_one_iteration(case: &Case) -> bool {
    let one = Case { n: 1, ..case.clone() };
    let mut scratch = Tally::default();
    matches!(loop_side(&one, None, &mut scratch), Side::BuildErr(_) | Side::Built(Err(_)))
}

/// Equal values: exact for ints and bools, a tolerance for floats (pfor may reassociate a
/// reduction), NaN == NaN, non-finite values equal when of the same kind.
fn same(a: &Tensor, b: &Tensor) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    let tol = if a.dtype() == DType::F32 { 1e-3 } else { 1e-7 };
    a.to_f64_vec().iter().zip(b.to_f64_vec()).all(|(&p, q)| {
        (p.is_nan() && q.is_nan())
            || p == q
            || (p.is_finite() && q.is_finite() && (p - q).abs() <= tol * (1.0 + q.abs()))
    })
}

/// The pfor rule; `Err` describes a violation.
fn compare(case: &Case, tally: &mut Tally) -> std::result::Result<(), String> {
    let lp = loop_side(case, None, tally);
    let want = match lp {
        Side::BuildErr(e) => {
            tally.add(format!("loop build: err {}", kind(&e)));
            return Ok(());
        }
        Side::Built(Err(e)) => {
            tally.add(format!("loop run: err {}", kind(&e)));
            let pf = loop_side(case, Some(Fallback::Silent), tally);
            tally.add(match pf {
                Side::Built(Ok(_)) => "loop err, pfor ok",
                _ => "loop err, pfor err",
            });
            return Ok(());
        }
        Side::Built(Ok(v)) => v,
    };
    let mut got = loop_side(case, Some(Fallback::Error), tally);
    if let Side::BuildErr(e) | Side::Built(Err(e)) = &got
        && matches!(e.root(), Error::NoConverter { .. })
    {
        tally.add("pfor strict: NoConverter, retried with Fallback::Silent");
        got = loop_side(case, Some(Fallback::Silent), tally);
    }
    match got {
        Side::BuildErr(e) | Side::Built(Err(e)) if allowed(&e) && !matches!(e.root(), Error::NoConverter { .. }) => {
            tally.add(format!("loop ok, pfor allowed err {}", kind(&e)));
            Ok(())
        }
        Side::BuildErr(e) | Side::Built(Err(e)) if case.n == 0 && raised_with_one_iteration(case) => {
            tally.add(format!("n = 0, pfor err {}, the loop fails at n = 1", kind(&e)));
            Ok(())
        }
        Side::BuildErr(e) => Err(format!("the loop ran, pfor failed to build: {e}")),
        Side::Built(Err(e)) => Err(format!("the loop ran, pfor failed: {e}")),
        Side::Built(Ok(got)) => {
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                let zero_trip = case.n == 0 && a.is_empty() && b.is_empty() && a.rank() == b.rank();
                if !zero_trip && !same(a, b) {
                    return Err(format!("output {k} differs:\npfor: {a:?}\nloop: {b:?}"));
                }
            }
            tally.add("loop ok, pfor equal");
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------
// The runner

/// Run one case under `catch_unwind` on its own thread (64 MiB stack, like pfor's workers)
/// with a watchdog; `Err` describes a panic, a hang or a mismatch.
pub fn check(case: &Case) -> std::result::Result<Tally, String> {
    let (tx, rx) = mpsc::channel();
    let c = case.clone();
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| {
                let mut tally = Tally::default();
                graph_mode(&c, &mut tally);
                compare(&c, &mut tally).map(|()| tally)
            }));
            let _ = tx.send(r.unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(format!("panic: {msg}"))
            }));
        })
        .map_err(|e| format!("spawn: {e}"))?;
    rx.recv_timeout(WATCHDOG).unwrap_or_else(|_| Err(format!("hang: no outcome after {WATCHDOG:?}")))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[test]
fn malformed_graphs_never_panic_hang_or_disagree_with_the_loop() {
    let cases = env_u64("PFOR_FUZZ_CASES").map_or(CASES, |n| n as u32);
    let seed = env_u64("PFOR_FUZZ_SEED").unwrap_or(0x00f0_5eed);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/robustness/fuzz.txt"))),
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    // PFOR_FUZZ_SURVEY=1: record every failure (first of each kind, with its case) instead
    // of stopping and shrinking at the first one: for triage.
    let survey = std::env::var_os("PFOR_FUZZ_SURVEY").is_some();
    let total = std::sync::Mutex::new(Tally::default());
    let failures = std::sync::Mutex::new(BTreeMap::<String, String>::new());
    let result = runner.run(&case(), |c| {
        match check(&c) {
            Ok(t) => total.lock().expect("tally").merge(t),
            Err(e) if survey => {
                let key: String = e.lines().next().unwrap_or("").chars().filter(|c| !c.is_ascii_digit()).collect();
                failures.lock().expect("failures").entry(key).or_insert_with(|| format!("{e}\n{c:?}"));
            }
            Err(e) => return Err(TestCaseError::fail(e)),
        }
        Ok(())
    });
    let total = total.into_inner().expect("tally");
    let mut report = format!("fuzz: {cases} cases, seed {seed:#x}\n");
    for (k, v) in &total.0 {
        report += &format!("  {v:6}  {k}\n");
    }
    for f in failures.into_inner().expect("failures").values() {
        report += &format!("FAILURE {f}\n\n");
    }
    println!("{report}");
    if let Err(e) = result {
        panic!("{e}\n{report}");
    }
}
