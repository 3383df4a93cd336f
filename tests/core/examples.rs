//! The examples keep the README's promise (issue 20): every example target ends with a
//! verdict line (`verdict: matches the reference (max |diff| = … <= tol …)` or `verdict:
//! MISMATCH …`) and exits non-zero on a mismatch, and the README's table lists each with its
//! arguments. Checked in the source, so that `cargo test` needs no example build or run:
//! `main` ends with `println!("{v}"); v.into_result()` (a `pfor::tensor::Verdict`), or, for a
//! check that compares something other than tensors, with a `verdict: matches` line and a
//! `verdict: MISMATCH` line followed by `std::process::exit(1)`.
//!
//! Exempt (measurement tools with no reference to agree with): `bench_report` prints the
//! benchmark tables, and every probe and profile under `benches/probes/` times or counts one
//! kernel, pass or workload mode; the workloads' agreement with their loops is what the
//! examples (and `tests/benches/`) check.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Exempt example targets: by name, and every target under this folder.
const EXEMPT: &[&str] = &["bench_report"];
const EXEMPT_DIR: &str = "benches/probes/";

/// Every example target: `(name, path)` from `examples/` (auto-discovered: `NAME.rs` and
/// `NAME/main.rs`) and from the `[[example]]` sections of `Cargo.toml` that give a path.
fn example_targets() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let dir = Path::new(ROOT).join("examples");
    for e in std::fs::read_dir(&dir).expect("examples/").flatten() {
        let p = e.path();
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if p.is_dir() && p.join("main.rs").exists() {
            out.push((stem, p.join("main.rs")));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((stem, p));
        }
    }
    let manifest = std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).expect("Cargo.toml");
    for section in manifest.split("[[example]]").skip(1) {
        let section = section.split("\n[").next().unwrap_or_default();
        let field = |key: &str| {
            section.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        if let (Some(name), Some(path)) = (field("name"), field("path")) {
            out.push((name, Path::new(ROOT).join(path)));
        }
    }
    out.sort();
    out
}

fn exempt(name: &str, path: &Path) -> bool {
    EXEMPT.contains(&name) || path.starts_with(Path::new(ROOT).join(EXEMPT_DIR))
}

/// The lines of `fn main`'s body, trimmed, without blank lines and comments.
fn main_body(src: &str) -> Vec<&str> {
    let Some(start) = src.find("\nfn main(") else { return vec![] };
    let body = &src[start..];
    let end = body.find("\n}\n").map_or(body.len(), |e| e + 1);
    body[..end].lines().skip(1).map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).collect()
}

/// Why `src` (an example's source) does not end with a verdict line and a non-zero exit on
/// a mismatch, or `None` when it does.
fn verdict_problem(src: &str) -> Option<String> {
    if !src.lines().take_while(|l| l.starts_with("//!")).any(|l| l.contains("verdict")) {
        return Some("its module docs do not mention the verdict".into());
    }
    let body = main_body(src);
    let tail: Vec<&str> = body.iter().rev().take(8).rev().copied().collect();
    if let [.., print, last] = tail.as_slice()
        && let Some(v) = last.strip_suffix(".into_result()")
        && *print == format!("println!(\"{{{v}}}\");")
    {
        return None;
    }
    let text = tail.join("\n");
    if text.contains("\"verdict: matches") && text.contains("\"verdict: MISMATCH") && text.contains("process::exit(1)")
    {
        return None;
    }
    Some(format!("`main` does not end with `println!(\"{{v}}\"); v.into_result()`; its last lines:\n{text}"))
}

#[test]
fn every_example_ends_with_a_verdict_and_fails_on_a_mismatch() {
    let targets = example_targets();
    assert!(targets.iter().any(|(n, _)| n == "quickstart"), "no examples found: {targets:?}");
    let mut problems = Vec::new();
    for (name, path) in targets.iter().filter(|(n, p)| !exempt(n, p)) {
        let src = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(why) = verdict_problem(&src) {
            problems.push(format!("{name} ({}): {why}", path.display()));
        }
    }
    assert!(problems.is_empty(), "examples without a verdict:\n{}", problems.join("\n\n"));
}

/// An example that ends with its verdict.
const GOOD: &str = r#"//! Checks itself (the last line is the verdict).

fn main() -> Result<()> {
    let v = check()?;
    println!("{v}");
    v.into_result()
}
"#;

/// One that can end without a verdict (the jacobian example did, given no size).
const NO_VERDICT_PATH: &str = r#"//! Checks itself (the last line is the verdict).

fn main() -> Result<()> {
    match worst {
        Some(v) => {
            println!("{v}");
            v.into_result()
        }
        None => Ok(()),
    }
}
"#;

#[test]
fn the_verdict_check_rejects_an_example_that_can_end_without_one() {
    assert_eq!(verdict_problem(GOOD), None);
    assert!(verdict_problem(NO_VERDICT_PATH).is_some());
    // the verdict printed on a line of its own, right before the exit status is decided
    let buried = GOOD.replace("println!(\"{v}\");", "println!(\"3 rows: {v}\");");
    assert!(verdict_problem(&buried).is_some());
    let undocumented = GOOD.replace("(the last line is the verdict)", "(times things)");
    assert!(verdict_problem(&undocumented).is_some());
}

#[test]
fn the_readme_lists_every_example_with_its_arguments() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README.md");
    let missing: Vec<String> = example_targets()
        .into_iter()
        .filter(|(n, p)| !p.starts_with(Path::new(ROOT).join(EXEMPT_DIR)) && !readme.contains(&format!("| `{n}` | ")))
        .map(|(n, _)| n)
        .collect();
    assert!(missing.is_empty(), "examples missing from the README's table (`| `name` | arguments | …`): {missing:?}");
    // the probes are listed together, by folder
    assert!(readme.contains(EXEMPT_DIR), "the README does not point to {EXEMPT_DIR}");
}
