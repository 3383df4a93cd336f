//! Derivative rules of the `linalg` family (`src/ops/linalg.rs`).
//!
//! Every op maps over the leading batch dims (equal between operands, no broadcasting), so
//! the rules work on `[..., m, n]` with `batch_matmul` products and a transpose of the last
//! two dims (`ᵀ` below). All rules are built from differentiable graph ops (inverse, solves,
//! products, masks), so second derivatives work.
//!
//! | op                     | VJP                                          | JVP                               |
//! |------------------------|----------------------------------------------|-----------------------------------|
//! | `Y = A⁻¹`              | `Ā = -Yᵀ Ȳ Yᵀ`                               | `Ẏ = -Y Ȧ Y`                      |
//! | `d = det A`            | `Ā = d̄ d A⁻ᵀ`                                | `ḋ = d tr(A⁻¹ Ȧ)`                 |
//! | `l = ln│det A│`        | `Ā = l̄ A⁻ᵀ`                                  | `l̇ = tr(A⁻¹ Ȧ)`                   |
//! | `X = op(A)⁻¹ B`        | `B̄ = op(A)⁻ᵀ X̄`, `Ā = -B̄ Xᵀ` (`-X B̄ᵀ` adj.) | `Ẋ = op(A)⁻¹ (Ḃ - op(Ȧ) X)`       |
//! | triangular solve       | the same, `Ā` masked to the triangle read    | the same, `Ȧ` masked              |
//! | `matrix_diag`          | `diag_part(Ȳ)`                               | `matrix_diag(ḋ)`                  |
//! | `matrix_diag_part`     | `Ȳ` on the main diagonal of zeros            | `diag_part(Ȧ)`                    |
//! | `trace`                | `t̄ I`                                        | `trace(Ȧ)`                        |
//!
//! Cholesky (`A = L Lᵀ`, only the lower triangle of `A` is read). With
//! `Φ(X) = tril(X) - ½ diag(X)`, the standard formulas are
//! - JVP: `L̇ = L Φ(L⁻¹ Ȧₛ L⁻ᵀ)` where `Ȧₛ = tril(Ȧ) + tril(Ȧ, -1)ᵀ` is the symmetric matrix
//!   the op actually sees;
//! - VJP: `P = Φ(Lᵀ L̄)`, `S = L⁻ᵀ P L⁻¹` (two triangular solves); the usual symmetric
//!   gradient is `½ (S + Sᵀ)`. Because the op reads only the lower triangle, the exact
//!   gradient with respect to the entries of `A` folds the upper half onto the lower one:
//!   `Ā = Φ(S + Sᵀ)` (zero above the diagonal). For symmetric perturbations both agree.
//!
//! `determinant` and `log_abs_det` need an invertible `A` for their derivatives (the inverse
//! errors with `Error::Numerical` on a singular matrix, like the forward `solve`).

use crate::autodiff::util::add_opt;
use crate::autodiff::{JvpCtx, VjpCtx};
use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::{LinalgKind, LinalgOp};
use crate::tensor::{Dim, Tensor};

/// Cotangents of the inputs.
pub fn vjp(op: &LinalgOp, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let n_in = cx.inputs.len();
    if !(0..n_in).any(|i| cx.need(i)) {
        return Ok(vec![None; n_in]);
    }
    let (a, y) = (cx.x(0), cx.y(0));
    let dy = cx.dy(0)?;
    let (need_a, need_b) = (cx.need(0), cx.need(1));
    let g = &mut *cx.g;
    let da = match op {
        LinalgOp::MatrixInverse => {
            // -Yᵀ Ȳ Yᵀ
            let t = g.batch_matmul_t(y, dy, true, false)?;
            let p = g.batch_matmul_t(t, y, false, true)?;
            g.neg(p)?
        }
        LinalgOp::Determinant => {
            let s = g.mul(dy, y)?;
            let s = expand2(g, s)?;
            let inv = g.matrix_inverse(a)?;
            let inv_t = mt(g, inv)?;
            g.mul(s, inv_t)?
        }
        LinalgOp::MatrixLogDet => {
            let s = expand2(g, dy)?;
            let inv = g.matrix_inverse(a)?;
            let inv_t = mt(g, inv)?;
            g.mul(s, inv_t)?
        }
        LinalgOp::Cholesky => cholesky_vjp(g, y, dy)?,
        LinalgOp::Solve { adjoint } | LinalgOp::TriangularSolve { adjoint, .. } => {
            let db = match op {
                LinalgOp::TriangularSolve { lower, .. } => g.triangular_solve(a, dy, *lower, !*adjoint)?,
                _ => g.solve_t(a, dy, !*adjoint)?,
            };
            let da = if need_a {
                let p = if *adjoint {
                    g.batch_matmul_t(y, db, false, true)?
                } else {
                    g.batch_matmul_t(db, y, false, true)?
                };
                let p = g.neg(p)?;
                Some(match op {
                    LinalgOp::TriangularSolve { lower, .. } => mask_triangle(g, p, *lower)?,
                    _ => p,
                })
            } else {
                None
            };
            return Ok(vec![da, need_b.then_some(db)]);
        }
        LinalgOp::MatrixDiag => g.matrix_diag_part(dy)?,
        LinalgOp::MatrixDiagPart => diag_part_adjoint(g, dy, a)?,
        LinalgOp::Trace => {
            let s = expand2(g, dy)?;
            let eye = eye_mask(g, a)?;
            g.mul(s, eye)?
        }
    };
    Ok(vec![Some(da)])
}

/// Tangents of the outputs.
pub fn jvp(op: &LinalgOp, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
    let (a, y) = (cx.x(0), cx.y(0));
    let (ta, tb) = (cx.t(0), cx.t(1));
    let g = &mut *cx.g;
    let out = match op {
        LinalgOp::Solve { adjoint } | LinalgOp::TriangularSolve { adjoint, .. } => {
            // op(A)⁻¹ (Ḃ - op(Ȧ) X)
            let from_a = match ta {
                Some(t) => {
                    let t = match op {
                        LinalgOp::TriangularSolve { lower, .. } => mask_triangle(g, t, *lower)?,
                        _ => t,
                    };
                    let p = g.batch_matmul_t(t, y, *adjoint, false)?;
                    Some(g.neg(p)?)
                }
                None => None,
            };
            let Some(rhs) = add_opt(g, tb, from_a)? else { return Ok(vec![None]) };
            match op {
                LinalgOp::TriangularSolve { lower, .. } => g.triangular_solve(a, rhs, *lower, *adjoint)?,
                _ => g.solve_t(a, rhs, *adjoint)?,
            }
        }
        _ => {
            let Some(t) = ta else { return Ok(vec![None]) };
            match op {
                LinalgOp::MatrixInverse => {
                    let p = g.batch_matmul(y, t)?;
                    let p = g.batch_matmul(p, y)?;
                    g.neg(p)?
                }
                LinalgOp::Determinant => {
                    let tr = inv_trace(g, a, t)?;
                    g.mul(y, tr)?
                }
                LinalgOp::MatrixLogDet => inv_trace(g, a, t)?,
                LinalgOp::Cholesky => cholesky_jvp(g, y, t)?,
                LinalgOp::MatrixDiag => g.matrix_diag(t)?,
                LinalgOp::MatrixDiagPart => g.matrix_diag_part(t)?,
                LinalgOp::Trace => g.trace(t)?,
                LinalgOp::Solve { .. } | LinalgOp::TriangularSolve { .. } => {
                    Err(Error::InvalidArgument("linalg jvp: solves are handled above".into()))?
                }
            }
        }
    };
    Ok(vec![Some(out)])
}

/// Whether derivatives flow through this kind.
pub fn differentiable(_k: LinalgKind) -> bool {
    true
}

/// Transpose of the last two dims.
fn mt(g: &mut Graph, x: ValueId) -> Result<ValueId> {
    let r = g.shape(x)?.rank();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    g.transpose(x, &perm)
}

/// `[...] -> [..., 1, 1]`.
fn expand2(g: &mut Graph, x: ValueId) -> Result<ValueId> {
    let x = g.expand_dims(x, -1)?;
    g.expand_dims(x, -1)
}

/// `tr(A⁻¹ Ȧ)` per batch item.
fn inv_trace(g: &mut Graph, a: ValueId, t: ValueId) -> Result<ValueId> {
    let s = g.solve(a, t)?;
    g.trace(s)
}

/// Which entries of a `[..., m, n]` matrix to keep.
#[derive(Clone, Copy)]
enum Pattern {
    /// `i == j`.
    Diagonal,
    /// `i >= j` (`diag` on the diagonal, 1 below).
    Lower { diag: f64 },
    /// `i <= j`.
    Upper,
}

/// The largest `[m, n]` mask [`mask`] builds as a constant (larger or dynamic ones are
/// built as graph ops, sized at run time under the session's memory budget).
const MAX_CONST_MASK: usize = 1 << 20;

/// A float mask broadcastable to `like` (`[..., m, n]`) selecting `pattern`: a `[m, n]`
/// constant when the matrix dims are static and the mask has at most [`MAX_CONST_MASK`]
/// elements (a huge or empty-by-a-huge-dim static matrix is never looped over at build
/// time), else built from cumulative sums of ones (the row and column indices), which works
/// for dynamic dims too.
fn mask(g: &mut Graph, like: ValueId, pattern: Pattern) -> Result<ValueId> {
    let s = g.shape(like)?;
    let dt = g.dtype(like)?;
    let r = s.rank();
    if let (Dim::Fixed(m), Dim::Fixed(n)) = (s.dim(r - 2), s.dim(r - 1))
        && m.checked_mul(*n).is_some_and(|len| len <= MAX_CONST_MASK)
        && *m.max(n) <= MAX_CONST_MASK
    {
        let (m, n) = (*m, *n);
        let mut v = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                v[i * n + j] = match pattern {
                    Pattern::Diagonal => (i == j) as u8 as f64,
                    Pattern::Lower { diag } if i == j => diag,
                    Pattern::Lower { .. } => (i > j) as u8 as f64,
                    Pattern::Upper => (i <= j) as u8 as f64,
                };
            }
        }
        return Ok(g.constant(Tensor::from_vec(&[m, n], v)?.cast(dt)));
    }
    let ones = g.ones_like(like)?;
    let rows = g.cumsum(ones, -2, false, false)?;
    let cols = g.cumsum(ones, -1, false, false)?;
    let m = match pattern {
        Pattern::Diagonal => g.equal(rows, cols)?,
        Pattern::Lower { .. } => g.greater_equal(rows, cols)?,
        Pattern::Upper => g.less_equal(rows, cols)?,
    };
    let m = g.cast(m, dt)?;
    match pattern {
        Pattern::Lower { diag } if diag != 1.0 => {
            let eye = g.equal(rows, cols)?;
            let eye = g.cast(eye, dt)?;
            let eye = g.mul_scalar(eye, 1.0 - diag)?;
            g.sub(m, eye)
        }
        _ => Ok(m),
    }
}

fn eye_mask(g: &mut Graph, like: ValueId) -> Result<ValueId> {
    mask(g, like, Pattern::Diagonal)
}

/// `x` with everything outside the triangle a triangular solve reads set to zero.
fn mask_triangle(g: &mut Graph, x: ValueId, lower: bool) -> Result<ValueId> {
    let m = mask(g, x, if lower { Pattern::Lower { diag: 1.0 } } else { Pattern::Upper })?;
    g.mul(x, m)
}

/// `Φ(X) = tril(X) - ½ diag(X)`.
fn phi(g: &mut Graph, x: ValueId) -> Result<ValueId> {
    let m = mask(g, x, Pattern::Lower { diag: 0.5 })?;
    g.mul(x, m)
}

/// The cotangent of `A` for `d = diag_part(A)`: `d̄` on the main diagonal of a zero matrix
/// shaped like `A` (rectangular `A` needs static matrix dims, or provably equal ones).
fn diag_part_adjoint(g: &mut Graph, dy: ValueId, a: ValueId) -> Result<ValueId> {
    let s = g.shape(a)?;
    let r = s.rank();
    let (dm, dn) = (s.dim(r - 2).clone(), s.dim(r - 1).clone());
    let expanded = match (&dm, &dn) {
        (Dim::Fixed(m), Dim::Fixed(n)) if m != n => {
            // p = min(m, n) entries; broadcast along the longer side, then mask.
            let axis = if m < n { -1 } else { -2 };
            g.expand_dims(dy, axis)?
        }
        // Square for sure: equal fixed sizes, or one named dynamic dim.
        (Dim::Fixed(_), Dim::Fixed(_)) | (Dim::Dynamic(Some(_)), Dim::Dynamic(Some(_))) if dm == dn => {
            return g.matrix_diag(dy);
        }
        _ => {
            return Err(Error::unsupported(
                "matrix_diag_part",
                format!("gradient of a diagonal of a matrix with unrelated dynamic dims {s}"),
            ));
        }
    };
    let eye = eye_mask(g, a)?;
    g.mul(expanded, eye)
}

/// `L̇ = L Φ(L⁻¹ Ȧₛ L⁻ᵀ)`, `Ȧₛ = tril(Ȧ) + tril(Ȧ, -1)ᵀ`.
fn cholesky_jvp(g: &mut Graph, l: ValueId, t: ValueId) -> Result<ValueId> {
    let lo = mask(g, t, Pattern::Lower { diag: 1.0 })?;
    let strict = mask(g, t, Pattern::Lower { diag: 0.0 })?;
    let tl = g.mul(t, lo)?;
    let ts = g.mul(t, strict)?;
    let ts = mt(g, ts)?;
    let sym = g.add(tl, ts)?;
    // L⁻¹ Ȧₛ L⁻ᵀ = (L⁻¹ (L⁻¹ Ȧₛ)ᵀ)ᵀ
    let x = g.triangular_solve(l, sym, true, false)?;
    let xt = mt(g, x)?;
    let mtx = g.triangular_solve(l, xt, true, false)?;
    let mtx = mt(g, mtx)?;
    let p = phi(g, mtx)?;
    g.batch_matmul(l, p)
}

/// `Ā = Φ(S + Sᵀ)`, `S = L⁻ᵀ Φ(Lᵀ L̄) L⁻¹`.
fn cholesky_vjp(g: &mut Graph, l: ValueId, dl: ValueId) -> Result<ValueId> {
    let p = g.batch_matmul_t(l, dl, true, false)?;
    let p = phi(g, p)?;
    // Sᵀ = L⁻ᵀ (L⁻ᵀ P)ᵀ
    let y = g.triangular_solve(l, p, true, true)?;
    let yt = mt(g, y)?;
    let st = g.triangular_solve(l, yt, true, true)?;
    let s = mt(g, st)?;
    let sum = g.add(s, st)?;
    phi(g, sum)
}
