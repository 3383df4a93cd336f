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
//! The serialization coverage test (`tests/core/serialize.rs`) runs the value tests again in a
//! child with [`ROUNDTRIP_ENV`] set instead: there [`run_recorded`] also saves each graph it
//! ran, loads it back, checks that saving the loaded graph gives the same bytes and that it
//! computes the same outputs, and records the kinds of each graph that passed as
//! `serialize <family>/<kind>` (a failure as a `serialize-fail <message>` line); [`session`],
//! whose caller runs the graph, checks the bytes and that the loaded graph compiles (the
//! outputs of the kinds only such tests hold are compared in `tests/core/serialize.rs`).
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
    /// A graph holding the kind ran, and its serialization round trip gave the same bytes
    /// and outputs (value tests in a round-trip child).
    Serialized,
}

impl Area {
    fn tag(self) -> &'static str {
        match self {
            Area::Value => "value",
            Area::Converter => "converter",
            Area::Serialized => "serialize",
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

/// Names the file the serialization round trips of [`run_recorded`] are recorded to.
pub const ROUNDTRIP_ENV: &str = "PFOR_TEST_ROUNDTRIP";

fn roundtrip_target() -> Option<&'static PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var_os(ROUNDTRIP_ENV).map(PathBuf::from)).as_ref()
}

fn append(path: &Path, lines: &str) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("coverage file");
    f.write_all(lines.as_bytes()).expect("coverage file");
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
        append(path, &lines);
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

/// `run_once` for value tests: runs `g` and records its kinds when the run succeeds (and,
/// in a round-trip child, checks and records its serialization round trip).
pub fn run_recorded(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
    let out = run_once(g, fetches, feeds)?;
    record_values(g);
    record_roundtrip(g, || roundtrip(g, fetches, feeds, &out));
    Ok(out)
}

/// Save `g` (with the fetched and fed values as its outputs), load it, save the loaded graph
/// (the same bytes) and run it on the same feeds: integers and booleans identical, floats
/// within a few ulps (some kernels reduce in parallel in a varying order: running the
/// same graph twice differs as much).
fn roundtrip(
    g: &Graph,
    fetches: &[ValueId],
    feeds: &[(ValueId, Tensor)],
    want: &[Tensor],
) -> std::result::Result<(), String> {
    let mut outs = fetches.to_vec();
    outs.extend(feeds.iter().map(|(v, _)| *v));
    let (h, map) = structural_roundtrip(g, &outs)?;
    let feeds: Vec<(ValueId, Tensor)> =
        feeds.iter().zip(&map[fetches.len()..]).map(|((_, t), v)| (*v, t.clone())).collect();
    let got = run_once(&h, &map[..fetches.len()], &feeds).map_err(|e| format!("run the loaded graph: {e}"))?;
    for (k, (a, b)) in got.iter().zip(want).enumerate() {
        let tol = if a.dtype() == DType::F32 { 1e-5 } else { 1e-11 };
        pfor::tensor::assert_close(a, b, tol, tol)
            .map_err(|e| format!("output {k} differs after a round trip: {e}\n{g}"))?;
    }
    Ok(())
}

/// `Session::new` for value tests: records `g`'s kinds (the caller runs the session and
/// asserts on its values).
pub fn session(g: &Graph, fetches: &[ValueId]) -> Result<Session> {
    let s = Session::new(g, fetches)?;
    record_values(g);
    record_roundtrip(g, || structural_roundtrip(g, fetches).map(|_| ()));
    Ok(s)
}

/// In a round-trip child, run `check` unless `g` holds a custom op (which cannot be saved:
/// `tests/core/serialize.rs` checks that error) and record its outcome.
fn record_roundtrip(g: &Graph, check: impl FnOnce() -> std::result::Result<(), String>) {
    let Some(path) = roundtrip_target() else { return };
    let mut kinds: Vec<OpKind> = graph_kinds(g).collect();
    kinds.extend(library_kinds(g, |_| true));
    if kinds.contains(&OpKind::Custom) {
        return;
    }
    let line = match check() {
        Ok(()) => kinds.iter().map(|k| format!("{} {}\n", Area::Serialized.tag(), kind_name(*k))).collect(),
        Err(e) => format!("serialize-fail {}\n", e.replace('\n', " ")),
    };
    append(path, &line);
}

/// Save `g` with `outputs`, load it, and save the loaded graph: the same bytes; the loaded
/// graph, verified by loading, compiles a session for the loaded outputs. Returns the loaded
/// graph and outputs.
fn structural_roundtrip(g: &Graph, outputs: &[ValueId]) -> std::result::Result<(Graph, Vec<ValueId>), String> {
    let bytes = g.to_bytes(outputs).map_err(|e| format!("save: {e}"))?;
    let (h, map) = Graph::from_bytes(&bytes).map_err(|e| format!("load: {e}"))?;
    let again = h.to_bytes(&map).map_err(|e| format!("save the loaded graph: {e}"))?;
    if again != bytes {
        return Err(format!("saving the loaded graph gives other bytes:\n{g}"));
    }
    Session::new(&h, &map).map_err(|e| format!("compile the loaded graph: {e}"))?;
    Ok((h, map))
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
    COVERED.get_or_init(|| run_child(FILTERS, SKIP, ENV, "coverage"))
}

/// The `(serialize | serialize-fail, family/kind | message)` lines of a child running the value
/// tests with [`ROUNDTRIP_ENV`] set (see the module doc).
pub fn roundtrip_covered() -> HashSet<(String, String)> {
    run_child(&["ops::"], &["every_op_kind_has", "round_trip_coverage"], ROUNDTRIP_ENV, "roundtrip")
}

/// Run this test binary as a child with `filters`, skipping `skip`, with `env` naming the file
/// it records to; the recorded lines.
fn run_child(filters: &[&str], skip: &[&str], env: &str, tag: &str) -> HashSet<(String, String)> {
    let exe = std::env::current_exe().expect("current_exe");
    let file = std::env::temp_dir().join(format!("pfor-{tag}-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut cmd = Command::new(exe);
    cmd.args(filters).arg("--test-threads=2").env(env, &file);
    for s in skip {
        cmd.arg("--skip").arg(s);
    }
    let out = cmd.output().expect("spawn the coverage child");
    assert!(
        out.status.success(),
        "{tag} child {filters:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    read(&file)
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
