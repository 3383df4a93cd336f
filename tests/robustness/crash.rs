//! The crash-class harness: cases that could kill the whole process — an allocation the
//! system refuses (formerly an abort), a stack overflow — run each in a CHILD process: this
//! test binary re-executed with `PFOR_CRASH_CASE=<name>`, under an address-space limit
//! (`ulimit -v`) and a timeout. The child must exit normally having seen the expected `Err`;
//! a signal (abort, SIGSEGV), a panic, a success or a hang fails the parent test.
//!
//! Run alone with `cargo test --test main robustness::crash` (it is part of `cargo test`).
//! Each case allocates almost nothing for real (its huge request is refused up front), so
//! the whole table takes about a second on 2 cores.
//!
//! Extension point: add a row to [`CASES`] — a name, the child's memory limit, the body
//! (returning the run's `Result`) and the predicate its error must satisfy. A stack-overflow
//! case needs no memory limit (`mem_limit_mib: None`).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pfor::autobatch::{ExecConfig, Program, ProgramBuilder, VarType, vm};
use pfor::prelude::*;

/// The environment variable naming the case a child runs.
const ENV: &str = "PFOR_CRASH_CASE";
/// What a child prints when its case ended with the expected error.
const MARK: &str = "crash-case-ok: ";
/// How long a child may run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// One case of the table.
pub struct Case {
    /// Unique name (passed to the child).
    pub name: &'static str,
    /// Address-space limit of the child in MiB (`None`: the parent's limits).
    pub mem_limit_mib: Option<u64>,
    /// The work; must return the expected `Err`.
    pub body: fn() -> Result<()>,
    /// Whether the error is the expected one.
    pub expect: fn(&Error) -> bool,
}

/// Every case. The 1.5 GiB limit leaves room for the test binary itself (threads, malloc
/// arenas) and is far below each case's request.
pub const CASES: &[Case] = &[
    Case { name: "matmul_16_gib", mem_limit_mib: Some(1536), body: matmul_16_gib, expect: matmul_oom },
    Case { name: "random_uniform_2_pow_40", mem_limit_mib: Some(1536), body: random_2_pow_40, expect: random_oom },
    Case { name: "vm_stack_of_a_wide_batch", mem_limit_mib: Some(1536), body: vm_wide_batch, expect: vm_oom },
];

/// An `OutOfMemory` of `op` for `bytes` (`None`: any size) refused by the allocator (no
/// budget is set in these cases).
fn refused(e: &Error, op: &str, bytes: Option<usize>) -> bool {
    matches!(e.root(), Error::OutOfMemory { op: o, bytes: b, limit: None } if o == op && bytes.is_none_or(|n| n == *b))
}

fn matmul_oom(e: &Error) -> bool {
    refused(e, "matmul", Some(1 << 34))
}

fn random_oom(e: &Error) -> bool {
    refused(e, "random_uniform", Some(4 << 40))
}

fn vm_oom(e: &Error) -> bool {
    refused(e, "autobatch vm: stack", Some(4 * 4 * WIDE))
}

/// `[65536, 1] x [1, 65536]` f32: a 16 GiB output from 512 KiB of inputs.
fn matmul_16_gib() -> Result<()> {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, [65536, 1]);
    let b = g.input("b", DType::F32, [1, 65536]);
    let c = g.matmul(a, b)?;
    let feeds = [(a, Tensor::ones(DType::F32, &[65536, 1])?), (b, Tensor::ones(DType::F32, &[1, 65536])?)];
    run_once(&g, &[c], &feeds).map(drop)
}

/// `random_uniform` of `[2^40]` f32 (4 TiB) from a scalar key.
fn random_2_pow_40() -> Result<()> {
    let mut g = Graph::new();
    let key = g.constant(Tensor::scalar(5i64));
    let r = g.random_uniform(key, &[1 << 40], DType::F32, 0.0, 1.0)?;
    run_once(&g, &[r], &[]).map(drop)
}

/// Event size of [`wide_recursion`]'s saved vector: 2^27 f32 = 512 MiB per thread (zeroed
/// by the allocator, never touched), so its stack (4 levels to start) needs 2 GiB.
const WIDE: usize = 1 << 27;

/// `f(n) = n > 0 ? (v = zeros[WIDE]; f(n - 1); use v) : n`: `v` lives across the recursive
/// call, so the VM saves it on a per-thread stack.
fn wide_recursion() -> Result<Program> {
    let mut pb = ProgramBuilder::new();
    let f = pb.declare("f", &["n"], &["ans"])?;
    pb.define(f, |b| {
        let n = b.param(0)?;
        let ans = b.result(0)?;
        let more = b.prim("more", &[n], |x| Ok(x[0].array::<i64>()?.mapv(|n| n > 0).into()))?;
        b.if_else(
            more,
            |b| {
                let v = b.prim("v", &[n], |x| Tensor::zeros(DType::F32, &[x[0].len(), WIDE]))?;
                let m = b.prim("m", &[n], |x| Ok(x[0].array::<i64>()?.mapv(|n| n - 1).into()))?;
                let r = b.call(f, &[m])?;
                b.prim_into("use_v", &[r[0], v], &[ans], |x| Ok(vec![x[0].clone()]))?;
                b.ret(&[ans])
            },
            |b| {
                b.assign(ans, n)?;
                b.ret(&[ans])
            },
        )
    })?;
    pb.build(f, &[VarType::scalar(DType::I64)])
}

fn vm_wide_batch() -> Result<()> {
    let p = wide_recursion()?;
    let n = Tensor::from_vec(&[1], vec![3i64])?;
    vm::execute_with(&p, &[n], &ExecConfig::default()).map(drop)
}

/// Child side: runs the case named by `PFOR_CRASH_CASE`; a no-op in a normal test run.
#[test]
fn crash_case_child() {
    let Ok(name) = std::env::var(ENV) else { return };
    let case = CASES.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no crash case '{name}'"));
    match (case.body)() {
        Err(e) if (case.expect)(&e) => println!("{MARK}{name}: {e}"),
        Err(e) => panic!("case {name}: unexpected error: {e}"),
        Ok(()) => panic!("case {name}: succeeded, but an error was expected"),
    }
}

/// Run `case` in a child process; `Err` describes how it failed.
fn run_child(case: &Case) -> std::result::Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let args = ["robustness::crash::crash_case_child", "--exact", "--nocapture", "--test-threads=1"];
    let mut cmd = match case.mem_limit_mib {
        Some(mib) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(r#"ulimit -v "$1" && shift && exec "$@""#).arg("sh").arg((mib * 1024).to_string());
            c.arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(args).env(ENV, case.name).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = read(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| format!("wait: {e}"))? {
            Some(s) => break s,
            None if start.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {TIMEOUT:?}"));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    let ok_line = format!("{MARK}{}:", case.name);
    if status.success() && out.contains(&ok_line) {
        return Ok(());
    }
    use std::os::unix::process::ExitStatusExt;
    let how = match status.signal() {
        Some(sig) => format!("killed by signal {sig}"),
        None => format!("exited with {status}"),
    };
    Err(format!("{how}\n--- stdout\n{out}\n--- stderr\n{err}"))
}

#[test]
fn crash_cases_end_with_a_clean_error_in_a_child_process() {
    if std::env::var_os(ENV).is_some() {
        return; // inside a child
    }
    let failed: Vec<String> =
        CASES.iter().filter_map(|c| run_child(c).err().map(|why| format!("case {}: {why}", c.name))).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
