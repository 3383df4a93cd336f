//! The ONNX backend node test suite (`onnx.backend.test.case.node`, written into a cache by
//! `tools/onnx_testdata.sh`): every case is imported, run and compared with ONNX's numpy
//! reference at the case's own tolerances; every passing case is also run under `pfor`
//! (n = 3 perturbed copies of its inputs, strict mode) against the loop. Inputs that feed an
//! operand our ops take statically (shapes, pads, scales, sizes) are bound to the data's
//! values, as the importer's needs-a-constant error names them (`Model::bind_needed_inputs`);
//! the others are fed at run time. Counts per outcome are printed; the test fails on any
//! failure of a case whose ops and types we support.
//! Cases whose op, attribute or element type the importer refuses (an `Unsupported` error
//! naming it) and cases with sequence / map / optional values are counted and listed, not
//! failed. Without the cache the test says so loudly, and fails under CI (`CI` set).

use pfor::onnx::proto::TensorProto;
use pfor::onnx::{self, Model};
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where `tools/onnx_testdata.sh` writes the suite.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("PFOR_ONNX_TESTDATA") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/pfor/onnx-testdata"),
    }
}

/// How one case ended.
#[derive(Debug)]
pub enum Outcome {
    Pass,
    /// The importer refused the model (op, attribute, type), with its message.
    Unsupported(String),
    /// Sequence / map / optional values.
    NonTensor,
    /// Imported and ran but disagrees, or failed otherwise.
    Fail(String),
}

/// A data file's tensor and its ONNX element type.
pub fn read_tensor(p: &Path) -> Result<(Tensor, i64), String> {
    let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let t = TensorProto::decode(&bytes).map_err(|e| e.to_string())?;
    onnx::tensor::to_tensor(&t).map(|v| (v, t.data_type)).map_err(|e| e.to_string())
}

/// A tensor with its ONNX element type.
pub type Typed = (Tensor, i64);

/// A data set: inputs, and outputs with their ONNX element types.
pub type DataSet = (Vec<Tensor>, Vec<Typed>);

/// The tolerance for an output of ONNX element type `elem` whose largest magnitude is `scale`:
/// the case's own, widened for float16 / bfloat16 (we compute them in f32; the reference
/// rounds every step to the type) to twice the type's epsilon; for float32, `atol` is at
/// least one float32 epsilon of `scale`, the reference's own rounding of a result that
/// cancels to about 0 (`DFT`'s inverse: the reference, in float32, gives 1.9e-7 where the
/// exact value is 0, and ONNX's default atol is 1e-7).
fn tolerance(elem: i64, rtol: f64, atol: f64, scale: f64) -> (f64, f64) {
    match elem {
        1 => (rtol, atol.max(f64::from(f32::EPSILON) * scale)),
        10 => (rtol.max(2.0 * 9.8e-4), atol.max(1e-3)),
        16 => (rtol.max(2.0 * 7.9e-3), atol.max(1e-2)),
        _ => (rtol, atol),
    }
}

/// The data sets of a case: (inputs, outputs) per `test_data_set_k`; `None` if a value is not
/// a tensor.
fn data_sets(dir: &Path) -> Result<Option<Vec<DataSet>>, String> {
    let mut sets = Vec::new();
    for k in 0.. {
        let ds = dir.join(format!("test_data_set_{k}"));
        if !ds.is_dir() {
            break;
        }
        let (mut ins, mut outs): (Vec<Typed>, Vec<Typed>) = (Vec::new(), Vec::new());
        for (tag, out) in [("input", &mut ins), ("output", &mut outs)] {
            for i in 0.. {
                if ds.join(format!("{tag}_{i}.nontensor")).exists() {
                    return Ok(None);
                }
                let p = ds.join(format!("{tag}_{i}.pb"));
                if !p.exists() {
                    break;
                }
                match read_tensor(&p) {
                    Ok(t) => out.push(t),
                    // an element type we do not hold: the case is unsupported, not failed
                    Err(e) if e.contains("unsupported") => return Err(format!("unsupported: {e}")),
                    Err(e) => return Err(e),
                }
            }
        }
        sets.push((ins.into_iter().map(|(t, _)| t).collect(), outs));
    }
    Ok(Some(sets))
}

pub fn is_unsupported(e: &Error) -> bool {
    matches!(e.root(), Error::Unsupported { .. })
}

/// The model with the inputs bound that an operand it needs as a constant depends on (many
/// cases pass shapes, axes, sizes, pads or scales as inputs, which our ops take statically):
/// the importer names them ([`Model::bind_needed_inputs`]), no list here. Returns the bound
/// model and the values of its remaining inputs.
fn bind(m: &Model, inputs: &[Tensor]) -> Result<(Model, Vec<Tensor>), Error> {
    let bound = m.clone().bind_needed_inputs(inputs)?;
    let rest = bound
        .inputs()
        .iter()
        .map(|(name, _)| {
            let k = m.inputs().iter().position(|(n, _)| n == name).expect("a remaining input is an input");
            inputs[k].clone()
        })
        .collect();
    Ok((bound, rest))
}

/// Builds the model on inputs of the data's shapes and runs it: the inputs it needs as
/// constants bound ([`bind`]), the others fed at run time.
fn run_model(m: &Model, inputs: &[Tensor]) -> Result<Vec<Tensor>, Error> {
    let (m, rest) = bind(m, inputs)?;
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    for ((n, _), t) in m.inputs().iter().zip(rest) {
        let v = g.input(n, t.dtype(), Shape::fixed(t.shape()));
        feeds.push((v, t));
    }
    let ins: Vec<ValueId> = feeds.iter().map(|(v, _)| *v).collect();
    let outs = m.call(&mut g, &ins)?;
    run_once(&g, &outs, &feeds)
}

/// `pfor` of the model over 3 perturbed copies of the float inputs vs the loop, strict mode
/// (the inputs needed as constants bound, as in [`run_model`]; the other integer and bool
/// inputs are loop-invariant).
fn run_under_pfor(m: &Model, inputs: &[Tensor]) -> Result<(), String> {
    const N: usize = 3;
    let (m, inputs) = bind(m, inputs).map_err(|e| format!("bind: {e}"))?;
    let m = &m;
    let mut g = Graph::new();
    let stacked: Vec<(ValueId, bool)> = inputs
        .iter()
        .map(|t| {
            if !t.dtype().is_float() {
                return (g.constant(t.clone()), false);
            }
            let copies: Vec<Tensor> = (0..N)
                .map(|i| {
                    // scaled by 1 + i/20: signs and zeros kept
                    let v: Vec<f64> = t.to_f64_vec().iter().map(|x| x * (1.0 + i as f64 / 20.0)).collect();
                    Tensor::from_vec(t.shape(), v).unwrap().cast(t.dtype())
                })
                .collect();
            (g.constant(Tensor::stack(&copies, t.dtype(), t.shape()).expect("stack")), true)
        })
        .collect();
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let xs: Vec<ValueId> =
            stacked.iter().map(|&(s, st)| if st { g.gather(s, i, 0) } else { Ok(s) }).collect::<Result<_>>()?;
        m.call(g, &xs)
    };
    let vec_out = pfor_with(&mut g, N, &PforOptions::strict(), body).map_err(|e| format!("pfor: {e}"))?;
    let loop_out = for_loop(&mut g, N, body).map_err(|e| format!("loop: {e}"))?;
    let mut fetch = vec_out.clone();
    fetch.extend(&loop_out);
    let r = run_once(&g, &fetch, &[]).map_err(|e| format!("run: {e}"))?;
    let k = vec_out.len();
    for j in 0..k {
        let tol = if r[k + j].dtype() == DType::F32 { 1e-4 } else { 1e-9 };
        pfor::tensor::assert_close(&r[j], &r[k + j], tol, tol).map_err(|e| format!("pfor vs loop, output {j}: {e}"))?;
    }
    Ok(())
}

/// Runs one case directory.
pub fn run_case(dir: &Path) -> (Outcome, Option<String>) {
    let bytes = match std::fs::read(dir.join("model.onnx")) {
        Ok(b) => b,
        Err(e) => return (Outcome::Fail(format!("read model: {e}")), None),
    };
    let (rtol, atol) = std::fs::read_to_string(dir.join("tolerance.txt"))
        .ok()
        .and_then(|s| {
            let v: Vec<f64> = s.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            (v.len() == 2).then(|| (v[0], v[1]))
        })
        .unwrap_or((1e-3, 1e-7));
    let model = match onnx::load_bytes(&bytes) {
        Ok(m) => m,
        Err(e) if is_unsupported(&e) => return (Outcome::Unsupported(e.to_string()), None),
        Err(e) => return (Outcome::Fail(format!("load: {e}")), None),
    };
    let sets = match data_sets(dir) {
        Ok(Some(s)) => s,
        Ok(None) => return (Outcome::NonTensor, None),
        Err(e) if e.starts_with("unsupported") => return (Outcome::Unsupported(e), None),
        Err(e) => return (Outcome::Fail(e), None),
    };
    check_sets(&model, &sets, rtol, atol, true)
}

/// Runs `model` on every data set and compares with the expected outputs at (`rtol`, `atol`)
/// (widened for float16 / bfloat16, see [`tolerance`]); when they all agree and `under_pfor`,
/// also runs the first data set under `pfor` vs the loop ([`run_under_pfor`]).
pub fn check_sets(
    model: &Model,
    sets: &[DataSet],
    rtol: f64,
    atol: f64,
    under_pfor: bool,
) -> (Outcome, Option<String>) {
    for (k, (inputs, expected)) in sets.iter().enumerate() {
        if inputs.len() != model.inputs().len() {
            return (
                Outcome::Fail(format!(
                    "data set {k}: {} inputs, the model takes {}",
                    inputs.len(),
                    model.inputs().len()
                )),
                None,
            );
        }
        let got = match run_model(model, inputs) {
            Ok(r) => r,
            Err(e) if is_unsupported(&e) => return (Outcome::Unsupported(e.to_string()), None),
            Err(e) => return (Outcome::Fail(format!("data set {k}: {e}")), None),
        };
        if got.len() != expected.len() {
            return (Outcome::Fail(format!("data set {k}: {} outputs, {} expected", got.len(), expected.len())), None);
        }
        for (j, (a, (b, elem))) in got.iter().zip(expected).enumerate() {
            let scale = b.to_f64_vec().iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
            let (rtol, atol) = tolerance(*elem, rtol, atol, scale);
            if let Err(e) = pfor::tensor::assert_close(a, b, rtol, atol) {
                return (Outcome::Fail(format!("data set {k} output {j}: {e}")), None);
            }
        }
    }
    let pfor_err =
        if under_pfor { sets.first().and_then(|(inputs, _)| run_under_pfor(model, inputs).err()) } else { None };
    (Outcome::Pass, pfor_err)
}

/// What an unsupported case lacks, for the summary: the op type ("onnx Conv (node ...") or
/// the element type or value kind.
fn op_of(msg: &str) -> String {
    if let Some(t) = msg.split("element type ").nth(1) {
        return format!("type {}", t.split_whitespace().next().unwrap_or("?"));
    }
    if let Some(op) = msg.split("onnx ").nth(1).and_then(|s| s.split_whitespace().next())
        && op.chars().next().is_some_and(char::is_uppercase)
        && !op.ends_with(':')
    {
        return op.to_string();
    }
    msg.chars().take(60).collect()
}

/// The cache directory of `suite`, or `None` (said loudly; a failure under CI, `CI` set) when
/// `tools/onnx_testdata.sh` has not written it.
pub fn suite_dir(suite: &str) -> Option<PathBuf> {
    let root = cache_dir().join(suite);
    if root.is_dir() {
        return Some(root);
    }
    let msg = format!(
        "\n\n!!!!!!!! ONNX {suite} test suite NOT RUN: no cache at {} !!!!!!!!\n\
         !!!!!!!! create it with `bash tools/onnx_testdata.sh` (needs python3 and PyPI) !!!!!!!!\n",
        root.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("{msg}");
    None
}

/// The case directories (or files) of a suite, sorted, filtered by `PFOR_ONNX_CASE`.
pub fn suite_cases(root: &Path) -> Vec<PathBuf> {
    let filter = std::env::var("PFOR_ONNX_CASE").ok();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("read cache")
        .flatten()
        .map(|e| e.path())
        .filter(|p| filter.as_deref().is_none_or(|f| p.file_name().unwrap().to_string_lossy().contains(f)))
        .collect();
    cases.sort();
    cases
}

/// The outcomes of a suite's cases: counted, listed, and asserted (no failure among the cases
/// we support, none under pfor).
#[derive(Default)]
pub struct Tally {
    pass: usize,
    nontensor: usize,
    unsupported: BTreeMap<String, Vec<String>>,
    failures: Vec<String>,
    pfor_failures: Vec<String>,
    pfor_checked: usize,
}

impl Tally {
    /// Records case `name`'s outcome; `pfor_err` is `None` when it agreed (or was not run:
    /// `pfor_checked` says whether it was).
    pub fn add(&mut self, name: &str, (outcome, pfor_err): (Outcome, Option<String>), pfor_checked: bool) {
        match outcome {
            Outcome::Pass => {
                self.pass += 1;
                self.pfor_checked += usize::from(pfor_checked);
            }
            Outcome::NonTensor => self.nontensor += 1,
            Outcome::Unsupported(m) => self.unsupported.entry(op_of(&m)).or_default().push(format!("{name}: {m}")),
            Outcome::Fail(m) => self.failures.push(format!("{name}: {m}")),
        }
        if let Some(e) = pfor_err {
            self.pfor_failures.push(format!("{name}: {e}"));
        }
    }

    /// Prints the per-outcome counts of `suite` (at `root`) and fails on any failure.
    pub fn report(&self, suite: &str, root: &Path) {
        let (pass, failures, pfor_failures) = (self.pass, &self.failures, &self.pfor_failures);
        let n_unsup: usize = self.unsupported.values().map(Vec::len).sum();
        let total = pass + failures.len() + n_unsup + self.nontensor;
        eprintln!("ONNX {suite} suite ({}): {total} cases", root.display());
        eprintln!(
            "  pass {pass} / supported {} ; fail {} ; unsupported op/attr/type {n_unsup} ; non-tensor values {}",
            pass + failures.len(),
            failures.len(),
            self.nontensor
        );
        eprintln!(
            "  under pfor (n = 3, strict) vs the loop: {} of {} checked passing cases agree",
            self.pfor_checked - pfor_failures.len().min(self.pfor_checked),
            self.pfor_checked
        );
        if std::env::var_os("PFOR_ONNX_VERBOSE").is_some() {
            for (op, list) in &self.unsupported {
                eprintln!("  unsupported {op}: {} cases, e.g. {}", list.len(), list[0]);
            }
        } else {
            let ops: Vec<String> = self.unsupported.iter().map(|(op, l)| format!("{op} ({})", l.len())).collect();
            eprintln!("  unsupported by op (PFOR_ONNX_VERBOSE=1 for messages): {}", ops.join(", "));
        }
        for f in failures {
            eprintln!("  FAIL {f}");
        }
        for f in pfor_failures {
            eprintln!("  PFOR FAIL {f}");
        }
        assert!(
            failures.is_empty() && pfor_failures.is_empty(),
            "{} {suite} cases fail, {} fail under pfor",
            failures.len(),
            pfor_failures.len()
        );
    }
}

#[test]
fn onnx_backend_node_suite() {
    let Some(root) = suite_dir("node") else { return };
    let mut tally = Tally::default();
    for dir in &suite_cases(&root) {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        tally.add(&name, run_case(dir), true);
    }
    tally.report("node", &root);
}
