//! Issue 17D's boundaries: the call-graph utility in `ir`, the layering (`autobatch` below the
//! vectorizer), self-contained examples that end with a verdict, and the verdict itself.

use std::path::Path;

use pfor::prelude::*;
use pfor::tensor::Verdict;

fn scalar() -> TensorType {
    TensorType::new(DType::I64, Shape::scalar())
}

/// `f` calls `g` (inside a cond), `g` calls `f` and `h`, `h` calls nothing: `f` and `g` are
/// mutually recursive, `h` is not.
fn library() -> Graph {
    let mut gr = Graph::new();
    for name in ["f", "g", "h"] {
        gr.declare_function(name, &[scalar()], &[scalar()]).unwrap();
    }
    gr.define_function("h", |g, p| Ok(vec![g.neg(p[0])?])).unwrap();
    gr.define_function("g", |g, p| {
        let a = g.call("f", &[p[0]])?;
        g.call("h", &a)
    })
    .unwrap();
    gr.define_function("f", |g, p| {
        let zero = g.constant(Tensor::scalar(0i64));
        let pos = g.less(zero, p[0])?;
        g.cond(pos, &[p[0]], |g, a| g.call("g", a), |_, a| Ok(a.to_vec()))
    })
    .unwrap();
    gr
}

#[test]
fn call_graph_reachable_functions_and_recursion() {
    let gr = library();
    let lib = gr.library();
    let names: Vec<String> = lib.reachable("f").unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["f", "g", "h"]);
    let names: Vec<String> = lib.reachable("h").unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["h"]);
    assert_eq!(lib.recursion_via("f").unwrap().as_deref(), Some("g"));
    assert_eq!(lib.recursion_via("g").unwrap().as_deref(), Some("f"));
    assert_eq!(lib.recursion_via("h").unwrap(), None);
    // calls inside a cond's branch count
    assert_eq!(lib.get("f").unwrap().graph().direct_calls(), ["g"]);
    assert!(matches!(lib.reachable("nope"), Err(Error::UnknownFunction { ref name }) if name == "nope"));
}

#[test]
fn a_call_to_a_declared_but_undefined_function_is_an_error_naming_it() {
    let mut gr = Graph::new();
    gr.declare_function("later", &[scalar()], &[scalar()]).unwrap();
    gr.function("uses", &[scalar()], |g, p| g.call("later", p)).unwrap();
    let lib = gr.library();
    assert!(matches!(lib.reachable("uses"), Err(Error::UnknownFunction { ref name }) if name == "later"));
    assert!(matches!(lib.recursion_via("uses"), Err(Error::UnknownFunction { ref name }) if name == "later"));
}

fn rust_files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((p.display().to_string(), std::fs::read_to_string(&p).unwrap()));
        }
    }
    out
}

/// The code lines of `src` (comment lines dropped).
fn code(src: &str) -> impl Iterator<Item = &str> {
    src.lines().map(str::trim_start).filter(|l| !l.starts_with("//"))
}

#[test]
fn autobatch_imports_neither_the_vectorizer_nor_the_converters() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/autobatch");
    for (path, src) in rust_files(&dir) {
        for l in code(&src) {
            assert!(
                !l.contains("crate::vectorize") && !l.contains("crate::converters"),
                "{path}: autobatch sits below the vectorizer (the hand-off is vectorize::handoff): {l}"
            );
        }
    }
}

#[test]
fn examples_are_self_contained_and_end_with_a_verdict() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        // bench_report/ is the benchmark driver (it runs the benches' workloads)
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let src = std::fs::read_to_string(&p).unwrap();
        let name = p.display();
        assert!(!code(&src).any(|l| l.starts_with("#[path")), "{name} includes other files through #[path]");
        assert!(
            src.contains("Verdict") && (src.contains(".into_result()") || src.contains("process::exit")),
            "{name} must print a verdict and exit non-zero on a mismatch"
        );
        for probe in ["_probe", "_profile", "gemm_rates", "fusion_micro", "simplify_counts"] {
            assert!(!name.to_string().contains(probe), "{name} is a probe: it belongs in benches/probes/");
        }
        seen += 1;
    }
    assert!(seen >= 5, "{seen} examples found");
}

#[test]
fn verdict_matches_within_tolerance_and_fails_beyond_it() {
    let a = Tensor::vec1(&[1.0f32, 2.0, 3.0]);
    let b = Tensor::vec1(&[1.0f32, 2.0, 3.5]);
    let v = Verdict::compare(std::slice::from_ref(&a), std::slice::from_ref(&b), 0.6);
    assert!(v.matches() && v.into_result().is_ok());
    assert!(v.to_string().starts_with("verdict: matches the reference (max |diff| = 5.00e-1 <= tol"), "{v}");
    let v = Verdict::compare(std::slice::from_ref(&a), std::slice::from_ref(&b), 0.1);
    assert!(!v.matches());
    assert!(v.into_result().unwrap_err().to_string().contains("MISMATCH"));
    // a NaN where the reference has a number, a shape or a count difference never match
    let nan = Tensor::vec1(&[1.0f32, f32::NAN, 3.0]);
    let nan = std::slice::from_ref(&nan);
    assert_eq!(Verdict::compare(nan, std::slice::from_ref(&a), 1e9).max_diff, f64::INFINITY);
    assert_eq!(Verdict::compare(nan, nan, 0.0).max_diff, 0.0);
    assert_eq!(Verdict::compare(&[Tensor::vec1(&[1.0f32])], std::slice::from_ref(&a), 1e9).max_diff, f64::INFINITY);
    assert_eq!(Verdict::compare(&[], std::slice::from_ref(&a), 1e9).max_diff, f64::INFINITY);
}
