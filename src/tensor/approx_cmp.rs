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

/// `Ok(())` if `a ≈ b`, else an error describing the first mismatch.
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
                "mismatch at flat index {i} of shape {:?}: {p} vs {q}",
                a.shape()
            )));
        }
    }
    Ok(())
}
