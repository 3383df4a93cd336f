//! Approximate comparison helpers for tests and oracles.

use super::Tensor;
use crate::error::{Error, Result};

/// Largest absolute elementwise difference (as f64); `None` if dtype or shape differ.
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{Verdict, assert_close, max_abs_diff};
///
/// # fn main() -> Result<()> {
/// let a = Tensor::vec1(&[1.0f32, 2.0, f32::NAN]);
/// let b = Tensor::vec1(&[1.0f32, 2.5, f32::NAN]); // NaN matches NaN
/// assert_eq!(max_abs_diff(&a, &b), Some(0.5));
/// assert_eq!(max_abs_diff(&a, &Tensor::vec1(&[1.0f32])), None); // shapes differ
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{Verdict, assert_close, max_abs_diff};
///
/// # fn main() -> Result<()> {
/// let a = Tensor::vec1(&[1.0f64, 100.0]);
/// let b = Tensor::vec1(&[1.0f64, 100.5]);
/// assert!(assert_close(&a, &b, 1e-2, 0.0).is_ok()); // |diff| <= rtol * |b|
/// let e = assert_close(&a, &b, 1e-4, 1e-6).unwrap_err();
/// assert!(e.to_string().contains("with rtol = 1e-4, atol = 1e-6")); // names the tolerances
/// # Ok(())
/// # }
/// ```
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
    ///
    /// ```
    /// use pfor::prelude::*;
    /// use pfor::tensor::{Verdict, assert_close, max_abs_diff};
    ///
    /// # fn main() -> Result<()> {
    /// let got = [Tensor::vec1(&[1.0f32, 2.00001])];
    /// let want = [Tensor::vec1(&[1.0f32, 2.0])];
    /// let v = Verdict::compare(&got, &want, 1e-4);
    /// assert!(v.matches());
    /// assert!(v.to_string().starts_with("verdict: matches the reference (max |diff| = "));
    /// // a shape, dtype or count that differs is an infinite difference
    /// assert_eq!(Verdict::compare(&got, &[], 1e-4).max_diff, f64::INFINITY);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::prelude::*;
    /// use pfor::tensor::{Verdict, assert_close, max_abs_diff};
    ///
    /// # fn main() -> Result<()> {
    /// assert!(Verdict { max_diff: 1e-5, tol: 1e-4 }.matches());
    /// assert!(!Verdict { max_diff: f64::NAN, tol: 1e-4 }.matches());
    /// # Ok(())
    /// # }
    /// ```
    pub fn matches(&self) -> bool {
        self.max_diff <= self.tol
    }

    /// `Ok(())` if it matches, else an error stating the difference (so `main` exits non-zero).
    ///
    /// ```
    /// use pfor::prelude::*;
    /// use pfor::tensor::{Verdict, assert_close, max_abs_diff};
    ///
    /// # fn main() -> Result<()> {
    /// // what an example's `main` ends with: an `Err` (a non-zero exit) on a mismatch
    /// let v = Verdict { max_diff: 0.5, tol: 1e-4 };
    /// assert_eq!(v.to_string(), "verdict: MISMATCH with the reference (max |diff| = 5.00e-1 > tol 1e-4)");
    /// assert!(v.into_result().is_err());
    /// assert!(Verdict { max_diff: 0.0, tol: 0.0 }.into_result().is_ok());
    /// # Ok(())
    /// # }
    /// ```
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
