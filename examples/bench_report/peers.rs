//! Peer measurements: the CSVs `results_<peer>.csv` written by `benches/peers/run.sh`
//! (`peer,workload,mode,batch,median_seconds,throughput,unit`), looked up by
//! (peer, workload, mode, batch) so their numbers sit in the same table as ours.
//! Where they come from by default: [`default_dir`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The peers directory read when none is named: of `peers_out` (the runner's `$PEERS_OUT`)
/// and `<repo>/target/peers` (its default), the one whose `results_*.csv` were written last;
/// where neither holds results, the reference medians `<repo>/benches/peers/reference`.
pub fn default_dir(repo: &Path, peers_out: Option<&Path>) -> PathBuf {
    let target = repo.join("target").join("peers");
    peers_out
        .into_iter()
        .chain([target.as_path()])
        .filter_map(|d| newest_results(d).map(|t| (t, d)))
        .max_by_key(|(t, _)| *t)
        .map_or_else(|| repo.join("benches").join("peers").join("reference"), |(_, d)| d.to_path_buf())
}

/// When the newest `results_*.csv` of `dir` was modified (`None`: no such file).
fn newest_results(dir: &Path) -> Option<SystemTime> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| is_results(&e.file_name().to_string_lossy()))
        .filter_map(|e| e.metadata().and_then(|m| m.modified()).ok())
        .max()
}

fn is_results(name: &str) -> bool {
    name.starts_with("results_") && name.ends_with(".csv")
}

/// Peer throughputs keyed by (peer, workload, mode, batch).
#[derive(Default)]
pub struct Peers {
    rates: HashMap<(String, String, String, usize), f64>,
    /// Where they were read from.
    pub source: Option<PathBuf>,
}

impl Peers {
    /// Read every `results_*.csv` of `dir` (missing dir or files: no peers; a mode that
    /// failed, `nan` in the CSV, has no rate).
    pub fn load(dir: &Path) -> Peers {
        let mut p = Peers::default();
        let Ok(entries) = std::fs::read_dir(dir) else { return p };
        for e in entries.flatten() {
            if !is_results(&e.file_name().to_string_lossy()) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(e.path()) else { continue };
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split(',').collect();
                if f.len() < 6 {
                    continue;
                }
                let (Ok(batch), Ok(rate)) = (f[3].trim().parse::<usize>(), f[5].trim().parse::<f64>()) else {
                    continue;
                };
                if !rate.is_finite() {
                    continue; // a FAILED row (`nan`): no number
                }
                p.rates.insert((f[0].into(), f[1].into(), f[2].into(), batch), rate);
            }
            p.source = Some(dir.to_path_buf());
        }
        p
    }

    /// One peer's throughput.
    pub fn get(&self, peer: &str, workload: &str, mode: &str, batch: usize) -> Option<f64> {
        self.rates.get(&(peer.into(), workload.into(), mode.into(), batch)).copied()
    }

    /// The vectorized throughputs of TF, JAX and torch (in that order).
    pub fn vectorized(&self, workload: &str, batch: usize) -> [Option<f64>; 3] {
        ["tf", "jax", "torch"].map(|p| self.get(p, workload, "vectorized", batch))
    }
}

/// A cell: the number with `prec` decimals, or `–`.
pub fn cell(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) if x > 0.0 => format!("{x:.prec$}"),
        _ => "–".into(),
    }
}

/// `a / b` as a ratio cell.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => format!("{:.2}", a / b),
        _ => "–".into(),
    }
}

/// The best of several optional rates.
pub fn best(v: &[Option<f64>]) -> Option<f64> {
    v.iter().flatten().copied().fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
}
