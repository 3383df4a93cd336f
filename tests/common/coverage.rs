//! Op-kind coverage derived from the graphs the tests actually run (issue 17, item 6).
//!
//! A coverage test cannot trust a list the test files write by hand (a list that names every
//! kind passes whatever the tests do). Instead, the helpers that run graphs for value tests
//! (`eval`, [`run_recorded`], [`session`]) and the converter tests' [`pfor_recorded`] record
//! the op kinds they really ran or converted, and the coverage tests compare those with `OpKind::all()`.
//!
//! Recording is off unless the environment variable [`ENV`] names a file: then each recorded
//! kind is appended to it once per process as a line `<area> <family>/<kind>`. A coverage
//! test runs the test binary itself again as a child process with [`ENV`] set and a filter
//! (e.g. `ops::`), so the result does not depend on the order in which the parent's tests
//! run; the coverage tests do nothing in that child.
//!
//! Invariants: a value test counts a kind only if a graph holding it (at top level or in a
//! function of its library) was run to completion by a recording helper; a converter test
//! counts a kind only for body nodes that pfor converts (they depend on the loop index or
//! are stateful) in a conversion that succeeded, plus every kind inside the functions the body
//! defines. A test that then finds a mismatch fails on its own.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

/// Names the file that recorded kinds are appended to (recording is off when unset).
pub const ENV: &str = "PFOR_TEST_COVERAGE";

/// What a recorded kind was covered by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Area {
    /// A graph holding the kind ran (value tests).
    Value,
    /// pfor converted a node of the kind and the result matched the loop (converter tests).
    Converter,
}

impl Area {
    fn tag(self) -> &'static str {
        match self {
            Area::Value => "value",
            Area::Converter => "converter",
        }
    }
}

/// `family/kind`, the name coverage reports use.
pub fn kind_name(k: OpKind) -> String {
    format!("{}/{}", k.family(), k)
}

fn target() -> Option<&'static PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var_os(ENV).map(PathBuf::from)).as_ref()
}

/// Whether this process records (it is a coverage child).
pub fn recording() -> bool {
    target().is_some()
}

fn write(area: Area, kinds: impl IntoIterator<Item = OpKind>) {
    let Some(path) = target() else { return };
    static SEEN: Mutex<Option<HashSet<(Area, OpKind)>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(HashSet::new);
    let mut lines = String::new();
    for k in kinds {
        if seen.insert((area, k)) {
            lines.push_str(&format!("{} {}\n", area.tag(), kind_name(k)));
        }
    }
    if !lines.is_empty() {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("coverage file");
        f.write_all(lines.as_bytes()).expect("coverage file");
    }
}

/// The kinds of `g`'s nodes.
fn graph_kinds(g: &Graph) -> impl Iterator<Item = OpKind> + '_ {
    g.node_ids().into_iter().filter_map(|n| g.node(n).ok().map(|nd| nd.op.kind()))
}

/// Every kind in the functions of `g`'s library whose name passes `keep`.
fn library_kinds(g: &Graph, keep: impl Fn(&str) -> bool) -> Vec<OpKind> {
    let lib = g.library();
    let mut out = Vec::new();
    for name in lib.function_names().into_iter().filter(|f| keep(f)) {
        if let Ok(f) = lib.get(&name) {
            out.extend(graph_kinds(f.graph()));
        }
    }
    out
}

/// Record every kind of `g` (and of its library's functions) as covered by a value test.
pub fn record_values(g: &Graph) {
    if !recording() {
        return;
    }
    let mut kinds: Vec<OpKind> = graph_kinds(g).collect();
    kinds.extend(library_kinds(g, |_| true));
    write(Area::Value, kinds);
}

/// `pfor_with` for converter tests: records the kinds pfor converts when it succeeds — the
/// body's nodes that depend on the loop index (transitively) or are stateful (converted even
/// when invariant), and every kind inside the functions the body defines (branches and loop
/// bodies, converted recursively).
pub fn pfor_recorded(
    g: &mut Graph,
    n: impl Into<LoopLen>,
    options: &PforOptions,
    body: impl FnOnce(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    if !recording() {
        return pfor_with(g, n, options, body);
    }
    let mut kinds = Vec::new();
    let out = pfor_with(g, n, options, |g, i| {
        let before: HashSet<NodeId> = g.node_ids().into_iter().collect();
        let fns_before: HashSet<String> = g.library().function_names().into_iter().collect();
        let outs = body(g, i)?;
        let new: Vec<NodeId> = g.node_ids().into_iter().filter(|n| !before.contains(n)).collect();
        let mut variant: HashSet<NodeId> = HashSet::from([i.node]);
        for &n in &new {
            // nodes are created after their inputs, so one pass in creation order suffices
            if g.node(n).is_ok_and(|nd| nd.op.is_stateful() || nd.inputs.iter().any(|v| variant.contains(&v.node))) {
                variant.insert(n);
            }
        }
        kinds.extend(new.iter().filter(|n| variant.contains(n)).filter_map(|&n| g.node(n).ok().map(|nd| nd.op.kind())));
        kinds.extend(library_kinds(g, |f| !fns_before.contains(f)));
        Ok(outs)
    })?;
    write(Area::Converter, kinds);
    Ok(out)
}

/// `run_once` for value tests: runs `g` and records its kinds when the run succeeds.
pub fn run_recorded(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
    let out = run_once(g, fetches, feeds)?;
    record_values(g);
    Ok(out)
}

/// `Session::new` for value tests: records `g`'s kinds (the caller runs the session and
/// asserts on its values).
pub fn session(g: &Graph, fetches: &[ValueId]) -> Result<Session> {
    let s = Session::new(g, fetches)?;
    record_values(g);
    Ok(s)
}

/// The tests the coverage child runs: the value tests and the converter tests (the coverage
/// tests themselves excluded).
const FILTERS: &[&str] = &["ops::", "converters::"];
const SKIP: &[&str] = &["every_op_kind_has"];

/// The `(area, family/kind)` pairs the value and converter tests cover: this test binary runs
/// again as a child with the filters [`FILTERS`] and recording on (once per process; the
/// coverage tests share the result). Panics if the child fails (a failing test there fails in
/// the parent's own run too).
pub fn covered() -> &'static HashSet<(String, String)> {
    static COVERED: OnceLock<HashSet<(String, String)>> = OnceLock::new();
    COVERED.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        let file = std::env::temp_dir().join(format!("pfor-coverage-{}.txt", std::process::id()));
        let _ = std::fs::remove_file(&file);
        let mut cmd = Command::new(exe);
        cmd.args(FILTERS).arg("--test-threads=2").env(ENV, &file);
        for s in SKIP {
            cmd.arg("--skip").arg(s);
        }
        let out = cmd.output().expect("spawn the coverage child");
        assert!(
            out.status.success(),
            "coverage child {FILTERS:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        read(&file)
    })
}

fn read(file: &Path) -> HashSet<(String, String)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let _ = std::fs::remove_file(file);
    text.lines().filter_map(|l| l.split_once(' ')).map(|(a, k)| (a.to_string(), k.to_string())).collect()
}

/// The kinds of `OpKind::all()` that `covered` lacks for `area`, as `family/kind`.
pub fn missing(
    covered: &HashSet<(String, String)>,
    area: Area,
    kinds: impl IntoIterator<Item = OpKind>,
) -> Vec<String> {
    kinds.into_iter().map(kind_name).filter(|k| !covered.contains(&(area.tag().to_string(), k.clone()))).collect()
}
