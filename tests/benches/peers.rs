//! The peer benchmarks live in the repository: `benches/peers/` (runner, scripts, reference
//! medians) and bench_report's reading of them (`examples/bench_report/peers.rs`).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

#[allow(dead_code)]
#[path = "../../examples/bench_report/peers.rs"]
mod report_peers;

use report_peers::{Peers, default_dir};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh empty directory under the system temp dir, unique to this process and `name`.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pfor-test-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `dir/file` (a one-row peers CSV) with the given modification time.
fn results_file(dir: &Path, file: &str, modified: SystemTime) {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join(file);
    fs::write(
        &path,
        "peer,workload,mode,batch,median_seconds,throughput,unit\ntf,W1_linear,vectorized,1,1,1,GFLOP/s\n",
    )
    .unwrap();
    File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
}

#[test]
fn reference_medians_cover_every_peer_cell_of_the_report() {
    let p = Peers::load(&repo().join("benches/peers/reference"));
    let dense: [(&str, &[usize]); 4] = [
        ("W1_linear", &[1, 8, 64, 512, 4096]),
        ("W2_mnist_cnn", &[1, 16, 128, 512]),
        ("W4_per_example_grad", &[1, 8, 32, 128]),
        ("W5_lstm_jacobian", &[1, 8, 32, 128]),
    ];
    for (wl, sizes) in dense {
        for &n in sizes {
            assert!(p.vectorized(wl, n).iter().all(Option::is_some), "{wl} n={n}: {:?}", p.vectorized(wl, n));
        }
    }
    for n in [1, 16, 128, 512] {
        // torch.func.vmap cannot run W3's data-dependent loop: a FAILED row, no number
        assert!(matches!(p.vectorized("W3_lstm_varlen", n), [Some(_), Some(_), None]), "W3 n={n}");
    }
    for n in [1, 16, 128] {
        for mode in ["numpy_stackless", "tf_function_stack"] {
            assert!(p.get("tfp_autobatch", "fib_n3..12", mode, n).is_some(), "{mode} n={n}");
        }
    }
    for (peer, mode) in [("tf", "vectorized"), ("jax", "sequential"), ("torch", "ref_nonprivate"), ("opacus", "ghost")]
    {
        assert!(p.get(peer, "W8_dpsgd_step", mode, 512).is_some(), "W8 {peer} {mode}");
    }
}

#[test]
fn default_peers_dir_is_the_newest_run_output_else_the_reference() {
    let root = scratch("default-peers-dir");
    let (out, target) = (root.join("out"), root.join("target/peers"));
    let reference = root.join("benches/peers/reference");
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    assert_eq!(default_dir(&root, Some(&out)), reference, "no run output anywhere");
    results_file(&target, "results_tf.csv", t0);
    assert_eq!(default_dir(&root, Some(&out)), target, "only target/peers has results");
    results_file(&out, "results_jax.csv", t0 + Duration::from_secs(60));
    assert_eq!(default_dir(&root, Some(&out)), out, "$PEERS_OUT written last");
    assert_eq!(default_dir(&root, None), target, "PEERS_OUT unset");
    results_file(&target, "results_w8_torch.csv", t0 + Duration::from_secs(120));
    assert_eq!(default_dir(&root, Some(&out)), target, "target/peers written last");
    fs::write(out.join("notes.txt"), "not a results file").unwrap();
    assert_eq!(default_dir(&root, Some(&out)), target, "only results_*.csv count");
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn nothing_in_the_repository_points_at_peer_scripts_outside_it() {
    let needle = ["shared", "/peers"].concat();
    let mut hits = Vec::new();
    let mut stack = vec![repo().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || (dir == repo() && name == "target") {
                continue;
            }
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(text) = fs::read(&path) {
                let text = String::from_utf8_lossy(&text);
                hits.extend(
                    text.lines().enumerate().filter(|(_, l)| l.contains(&needle)).map(|(i, l)| {
                        format!("{}:{}: {}", path.strip_prefix(repo()).unwrap().display(), i + 1, l.trim())
                    }),
                );
            }
        }
    }
    assert!(hits.is_empty(), "references to {needle} outside the repository:\n{}", hits.join("\n"));
}
