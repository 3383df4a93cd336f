//! Approximate comparison helpers for tests and oracles.

use super::Tensor;
use crate::error::{Error, Result};

/// Largest absolute elementwise difference (as f64); `None` if dtype or shape differ.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Option<f64> {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return None;
    }
    let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
    Some(x.iter().zip(&y).fold(
        0.0f64,
        |m, (p, q)| {
            if p.is_nan() && q.is_nan() || p == q { m } else { m.max((p - q).abs()) }
        },
    ))
}

pub(crate) fn allclose(a: &Tensor, b: &Tensor, rtol: f64, atol: f64) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
    x.iter().zip(&y).all(|(p, q)| (p.is_nan() && q.is_nan()) || p == q || (p - q).abs() <= atol + rtol * q.abs())
}

/// `Ok(())` if `a ≈ b` (every element: `|a - b| <= atol + rtol * |b|`, NaN matching NaN),
/// else an error describing the first mismatch, with the tolerances used.
pub fn assert_close(a: &Tensor, b: &Tensor, rtol: f64, atol: f64) -> Result<()> {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return Err(Error::InvalidArgument(format!(
            "mismatch: {}{:?} vs {}{:?}",
            a.dtype(),
            a.shape(),
            b.dtype(),
            b.shape()
        )));
    }
    let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        let ok = (p.is_nan() && q.is_nan()) || p == q || (p - q).abs() <= atol + rtol * q.abs();
        if !ok {
            return Err(Error::InvalidArgument(format!(
                "mismatch at flat index {i} of shape {:?}: {p} vs {q} (|diff| = {:e} > atol + rtol * |want| = {:e}, \
                 with rtol = {rtol:e}, atol = {atol:e})",
                a.shape(),
                (p - q).abs(),
                atol + rtol * q.abs()
            )));
        }
    }
    Ok(())
}

/// How far computed tensors are from their reference, against a tolerance: the line every
/// example ends with (`verdict: matches the reference (max |diff| = … <= tol …)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// The largest absolute elementwise difference (infinite when a dtype, shape or count
    /// differs, or one side has a NaN where the other has none).
    pub max_diff: f64,
    /// The largest difference that still matches.
    pub tol: f64,
}

impl Verdict {
    /// Compare `got[k]` with `want[k]` for every `k`.
    pub fn compare(got: &[Tensor], want: &[Tensor], tol: f64) -> Verdict {
        let mut max_diff = if got.len() == want.len() { 0.0f64 } else { f64::INFINITY };
        for (a, b) in got.iter().zip(want) {
            if a.dtype() != b.dtype() || a.shape() != b.shape() {
                max_diff = f64::INFINITY;
                continue;
            }
            for (p, q) in a.to_f64_vec().into_iter().zip(b.to_f64_vec()) {
                let d = match (p.is_nan(), q.is_nan()) {
                    (true, true) => 0.0,
                    (false, false) if p == q => 0.0,
                    (false, false) => (p - q).abs(),
                    _ => f64::INFINITY,
                };
                max_diff = max_diff.max(d);
            }
        }
        Verdict { max_diff, tol }
    }

    /// True if the largest difference is within the tolerance.
    pub fn matches(&self) -> bool {
        self.max_diff <= self.tol
    }

    /// `Ok(())` if it matches, else an error stating the difference (so `main` exits non-zero).
    pub fn into_result(self) -> Result<()> {
        if self.matches() { Ok(()) } else { Err(Error::InvalidArgument(format!("{self}"))) }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.matches() {
            write!(f, "verdict: matches the reference (max |diff| = {:.2e} <= tol {:.0e})", self.max_diff, self.tol)
        } else {
            write!(
                f,
                "verdict: MISMATCH with the reference (max |diff| = {:.2e} > tol {:.0e})",
                self.max_diff, self.tol
            )
        }
    }
}
