//! Linear algebra on batches of matrices: every op works on the last two dims (`[..., m, n]`)
//! and maps over the leading (batch) dims, which must match exactly between operands (no
//! broadcasting).
//!
//! Invariants and semantics:
//! - dtypes: f32 and f64 only (all inputs of one op share the dtype);
//! - `matrix_inverse`, `determinant`, `log_abs_det`, `cholesky` need square matrices;
//!   `determinant` and `log_abs_det` (`ln |det|`, `-inf` for a singular matrix) drop the two
//!   matrix dims; the determinant of a `0×0` matrix is 1;
//! - `matrix_inverse` and `solve` factor with LU and partial pivoting; a pivot with
//!   `|u_ii| <= n · eps · ‖A‖∞` (singular to working precision) is an [`Error::Numerical`];
//! - `cholesky` returns the lower factor `L` (`A = L Lᵀ`), reading only the lower triangle of
//!   `A`; a matrix that is not positive definite is an [`Error::Numerical`];
//! - `solve{adjoint}`: `A X = B` (or `Aᵀ X = B`) with `A` `[..., n, n]`, `B` `[..., n, k]`;
//! - `triangular_solve{lower, adjoint}`: the same with a triangular `A`, reading only the
//!   triangle named by `lower`; an exactly zero diagonal entry is an [`Error::Numerical`];
//! - `matrix_diag`: `[..., n] → [..., n, n]`; `matrix_diag_part`: `[..., m, n] → [..., min(m, n)]`;
//!   `trace`: `[..., m, n] → [...]` (sum of the main diagonal).
//!
//! Kernels use faer (pure Rust); with the `lapack` feature, inverse, solve, cholesky and
//! determinant go through ndarray-linalg (LAPACK) instead, with the same error rules. Batches
//! of small matrices run on rayon.

use std::fmt;

use faer::{MatMut, MatRef, Par};
use ndarray::{ArcArray, IxDyn};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::kernels::gemm::PAR_FLOPS;
use crate::ops::{Op, Raises, expect_arity, expect_float};
use crate::tensor::{Dim, Element, Shape, Tensor, TensorType};

mod builders;

/// Total work (≈ flops) of a batch above which batch items are spread over rayon.
const BATCH_PAR_WORK: usize = 1 << 15;

/// Ops of the linalg family.
#[derive(Clone, Debug, PartialEq)]
pub enum LinalgOp {
    /// Inverse of each square matrix.
    MatrixInverse,
    /// Determinant of each square matrix.
    Determinant,
    /// `ln |det|` of each square matrix.
    MatrixLogDet,
    /// Lower Cholesky factor of each symmetric positive definite matrix.
    Cholesky,
    /// Solve `A X = B` (or `Aᵀ X = B`).
    Solve {
        /// Solve with `Aᵀ` instead of `A`.
        adjoint: bool,
    },
    /// Solve `A X = B` (or `Aᵀ X = B`) with a triangular `A`.
    TriangularSolve {
        /// `A` is lower triangular (else upper); only that triangle is read.
        lower: bool,
        /// Solve with `Aᵀ` instead of `A`.
        adjoint: bool,
    },
    /// Build diagonal matrices from vectors.
    MatrixDiag,
    /// Extract the main diagonal.
    MatrixDiagPart,
    /// Sum of the main diagonal.
    Trace,
}

/// Kinds of the linalg family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinalgKind {
    /// [`LinalgOp::MatrixInverse`].
    MatrixInverse,
    /// [`LinalgOp::Determinant`].
    Determinant,
    /// [`LinalgOp::MatrixLogDet`].
    MatrixLogDet,
    /// [`LinalgOp::Cholesky`].
    Cholesky,
    /// [`LinalgOp::Solve`].
    Solve,
    /// [`LinalgOp::TriangularSolve`].
    TriangularSolve,
    /// [`LinalgOp::MatrixDiag`].
    MatrixDiag,
    /// [`LinalgOp::MatrixDiagPart`].
    MatrixDiagPart,
    /// [`LinalgOp::Trace`].
    Trace,
}

impl LinalgKind {
    /// Every kind.
    pub const ALL: &'static [LinalgKind] = &[
        LinalgKind::MatrixInverse,
        LinalgKind::Determinant,
        LinalgKind::MatrixLogDet,
        LinalgKind::Cholesky,
        LinalgKind::Solve,
        LinalgKind::TriangularSolve,
        LinalgKind::MatrixDiag,
        LinalgKind::MatrixDiagPart,
        LinalgKind::Trace,
    ];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {
            LinalgKind::MatrixInverse => "matrix_inverse",
            LinalgKind::Determinant => "determinant",
            LinalgKind::MatrixLogDet => "log_abs_det",
            LinalgKind::Cholesky => "cholesky",
            LinalgKind::Solve => "solve",
            LinalgKind::TriangularSolve => "triangular_solve",
            LinalgKind::MatrixDiag => "matrix_diag",
            LinalgKind::MatrixDiagPart => "matrix_diag_part",
            LinalgKind::Trace => "trace",
        }
    }
    /// Which inputs' values can make the op fail ([`Raises`]): the matrix of
    /// `matrix_inverse`, `solve` (singular), `cholesky` (not positive definite) and
    /// `triangular_solve` (zero diagonal); the determinants and diagonal ops never fail.
    pub fn raises(self) -> Raises {
        use LinalgKind::*;
        match self {
            MatrixInverse | Cholesky | Solve | TriangularSolve => Raises::On(&[0]),
            Determinant | MatrixLogDet | MatrixDiag | MatrixDiagPart | Trace => Raises::Never,
        }
    }
}

impl LinalgOp {
    /// The kind.
    pub fn kind(&self) -> LinalgKind {
        match self {
            LinalgOp::MatrixInverse => LinalgKind::MatrixInverse,
            LinalgOp::Determinant => LinalgKind::Determinant,
            LinalgOp::MatrixLogDet => LinalgKind::MatrixLogDet,
            LinalgOp::Cholesky => LinalgKind::Cholesky,
            LinalgOp::Solve { .. } => LinalgKind::Solve,
            LinalgOp::TriangularSolve { .. } => LinalgKind::TriangularSolve,
            LinalgOp::MatrixDiag => LinalgKind::MatrixDiag,
            LinalgOp::MatrixDiagPart => LinalgKind::MatrixDiagPart,
            LinalgOp::Trace => LinalgKind::Trace,
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        let two = matches!(self, LinalgOp::Solve { .. } | LinalgOp::TriangularSolve { .. });
        expect_arity(op, inputs, if two { 2 } else { 1 })?;
        let a = &inputs[0];
        expect_float(op, a)?;
        let dims = a.shape.dims();
        let r = dims.len();
        let min_rank = if matches!(self, LinalgOp::MatrixDiag) { 1 } else { 2 };
        if r < min_rank {
            return Err(Error::shape(op, format!("expected rank >= {min_rank}, got {}", a.shape)));
        }
        let out = |dims: Vec<Dim>| Ok(vec![TensorType { dtype: a.dtype, shape: Shape::from_dims(dims) }]);
        match self {
            LinalgOp::MatrixInverse | LinalgOp::Cholesky => {
                let n = square(op, &a.shape)?;
                out(dims[..r - 2].iter().cloned().chain([n.clone(), n]).collect())
            }
            LinalgOp::Determinant | LinalgOp::MatrixLogDet => {
                square(op, &a.shape)?;
                out(dims[..r - 2].to_vec())
            }
            LinalgOp::Solve { .. } | LinalgOp::TriangularSolve { .. } => {
                let b = &inputs[1];
                if b.dtype != a.dtype {
                    return Err(Error::dtype(op, format!("{} (same as input 0)", a.dtype), b.dtype));
                }
                let n = square(op, &a.shape)?;
                let bd = b.shape.dims();
                let mismatch = || {
                    Error::shape(
                        op,
                        format!(
                            "lhs {} and rhs {} must be [..., n, n] and [..., n, k] with equal batch dims \
                             (no broadcasting)",
                            a.shape, b.shape
                        ),
                    )
                };
                if bd.len() != r {
                    return Err(mismatch());
                }
                let mut out_dims = Vec::with_capacity(r);
                for (x, y) in dims[..r - 2].iter().zip(&bd[..r - 2]) {
                    out_dims.push(x.unify(y).ok_or_else(mismatch)?);
                }
                out_dims.push(n.unify(&bd[r - 2]).ok_or_else(mismatch)?);
                out_dims.push(bd[r - 1].clone());
                out(out_dims)
            }
            LinalgOp::MatrixDiag => out(dims.iter().cloned().chain([dims[r - 1].clone()]).collect()),
            LinalgOp::MatrixDiagPart => {
                out(dims[..r - 2].iter().cloned().chain([dim_min(&dims[r - 2], &dims[r - 1])]).collect())
            }
            LinalgOp::Trace => out(dims[..r - 2].to_vec()),
        }
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        let two = matches!(self, LinalgOp::Solve { .. } | LinalgOp::TriangularSolve { .. });
        expect_arity(op, &inputs, if two { 2 } else { 1 })?;
        let a = &inputs[0];
        let out = crate::dispatch_float!(a.dtype(), T => {
            let x = a.array::<T>().map_err(|_| Error::dtype(op, "a float type (f32 or f64)", a.dtype()))?;
            let b = match inputs.get(1) {
                Some(t) => Some(t.array::<T>().map_err(|_| Error::dtype(op, format!("{} (same as input 0)", a.dtype()), t.dtype()))?),
                None => None,
            };
            T::wrap(eval_typed::<T>(self, op, x, b)?)
        }, _ => return Err(Error::dtype(op, "a float type (f32 or f64)", a.dtype())));
        Ok(vec![out])
    }
}

impl fmt::Display for LinalgOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinalgOp::Solve { adjoint } => write!(f, "solve{{adjoint={adjoint}}}"),
            LinalgOp::TriangularSolve { lower, adjoint } => {
                write!(f, "triangular_solve{{lower={lower}, adjoint={adjoint}}}")
            }
            o => f.write_str(o.kind().name()),
        }
    }
}

/// The (unified) size of the two last dims, which must be equal.
fn square(op: &str, s: &Shape) -> Result<Dim> {
    let r = s.rank();
    s.dim(r - 2)
        .unify(s.dim(r - 1))
        .ok_or_else(|| Error::shape(op, format!("expected square matrices [..., n, n], got {s}")))
}

fn dim_min(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (Dim::Fixed(x), Dim::Fixed(y)) => Dim::Fixed(*x.min(y)),
        (Dim::Fixed(0), _) | (_, Dim::Fixed(0)) => Dim::Fixed(0),
        (x, y) if x == y => x.clone(),
        _ => Dim::unknown(),
    }
}

/// Float element types with faer (and, with the `lapack` feature, LAPACK) kernels.
#[cfg(not(feature = "lapack"))]
trait LaElem: Element + faer::traits::RealField + Default {
    const EPS: f64;
}
#[cfg(feature = "lapack")]
trait LaElem:
    Element + faer::traits::RealField + Default + ndarray_linalg::Lapack + ndarray_linalg::Scalar<Real = Self>
{
    const EPS: f64;
}
impl LaElem for f32 {
    const EPS: f64 = f32::EPSILON as f64;
}
impl LaElem for f64 {
    const EPS: f64 = f64::EPSILON;
}

fn numerical(op: &str, msg: impl Into<String>) -> Error {
    Error::Numerical { op: op.into(), msg: msg.into() }
}

/// faer parallelism for one item of a batch of `batch` n×n problems.
fn par_for(batch: usize, n: usize) -> Par {
    if batch == 1 && n.saturating_mul(n).saturating_mul(n) >= PAR_FLOPS && rayon::current_num_threads() > 1 {
        Par::rayon(0)
    } else {
        Par::Seq
    }
}

/// Fill `out` by chunks of `item` elements: `f(i, chunk)` for batch item `i`, on rayon when
/// the batch is large (`work` ≈ flops per item).
fn for_each_item<T: Send>(
    out: &mut [T],
    item: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) -> Result<()> + Sync + Send,
) -> Result<()> {
    if out.is_empty() || item == 0 {
        return Ok(());
    }
    let batch = out.len() / item;
    if batch > 1 && batch.saturating_mul(work) >= BATCH_PAR_WORK && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(item).enumerate().try_for_each(|(i, c)| f(i, c))
    } else {
        out.chunks_mut(item).enumerate().try_for_each(|(i, c)| f(i, c))
    }
}

fn eval_typed<T: LaElem>(
    o: &LinalgOp,
    op: &str,
    a: &ArcArray<T, IxDyn>,
    b: Option<&ArcArray<T, IxDyn>>,
) -> Result<ArcArray<T, IxDyn>> {
    let sa = a.shape().to_vec();
    let r = sa.len();
    let min_rank = if matches!(o, LinalgOp::MatrixDiag) { 1 } else { 2 };
    if r < min_rank {
        return Err(Error::shape(op, format!("expected rank >= {min_rank}, got {sa:?}")));
    }
    let av = a.as_standard_layout();
    let ad = av.as_slice().ok_or_else(|| Error::shape(op, "input is not contiguous"))?;
    let batch_shape = &sa[..r.saturating_sub(2)];
    let batch: usize = batch_shape.iter().product();
    let mut out_shape = batch_shape.to_vec();
    let out = match o {
        LinalgOp::MatrixDiag => {
            let n = sa[r - 1];
            out_shape = sa.clone();
            out_shape.push(n);
            let mut out = vec![T::default(); ad.len() * n];
            for_each_item(&mut out, n * n, n, |i, c| {
                for j in 0..n {
                    c[j * n + j] = ad[i * n + j];
                }
                Ok(())
            })?;
            out
        }
        LinalgOp::MatrixDiagPart | LinalgOp::Trace => {
            let (m, n) = (sa[r - 2], sa[r - 1]);
            let p = m.min(n);
            let diag = |i: usize| (0..p).map(move |j| ad[i * m * n + j * n + j]);
            if matches!(o, LinalgOp::Trace) {
                (0..batch).map(|i| diag(i).fold(T::default(), |s, x| s + x)).collect()
            } else {
                out_shape.push(p);
                (0..batch).flat_map(diag).collect()
            }
        }
        _ => {
            let n = sa[r - 1];
            if sa[r - 2] != n {
                return Err(Error::shape(op, format!("expected square matrices [..., n, n], got {sa:?}")));
            }
            let par = par_for(batch, n);
            let nn = n * n;
            let work = nn * n.max(1);
            match o {
                LinalgOp::MatrixInverse => {
                    out_shape.extend([n, n]);
                    let mut out = vec![T::default(); batch * nn];
                    for_each_item(&mut out, nn, work, |i, c| inverse(op, &ad[i * nn..(i + 1) * nn], n, c, par))?;
                    out
                }
                LinalgOp::Determinant | LinalgOp::MatrixLogDet => {
                    let log = matches!(o, LinalgOp::MatrixLogDet);
                    let mut out = vec![T::default(); batch];
                    for_each_item(&mut out, 1, work, |i, c| {
                        let (sign, logdet) = slogdet(&ad[i * nn..(i + 1) * nn], n, par);
                        c[0] = <T as Element>::from_f64(if log { logdet } else { sign * logdet.exp() });
                        Ok(())
                    })?;
                    out
                }
                LinalgOp::Cholesky => {
                    out_shape.extend([n, n]);
                    let mut out = vec![T::default(); batch * nn];
                    for_each_item(&mut out, nn, work, |i, c| cholesky(op, &ad[i * nn..(i + 1) * nn], n, c, par))?;
                    out
                }
                LinalgOp::Solve { .. } | LinalgOp::TriangularSolve { .. } => {
                    let b = b.ok_or_else(|| Error::arity(op, "2", 1))?;
                    let sb = b.shape();
                    if sb.len() != r || sb[..r - 2] != sa[..r - 2] || sb[r - 2] != n {
                        return Err(Error::shape(
                            op,
                            format!(
                                "lhs {sa:?} and rhs {sb:?} must be [..., n, n] and [..., n, k] with equal batch \
                                 dims (no broadcasting)"
                            ),
                        ));
                    }
                    let k = sb[r - 1];
                    out_shape.extend([n, k]);
                    let bv = b.as_standard_layout();
                    let bd = bv.as_slice().ok_or_else(|| Error::shape(op, "input is not contiguous"))?;
                    let mut out = bd.to_vec();
                    let nk = n * k;
                    let work = work + nn * k;
                    for_each_item(&mut out, nk, work, |i, c| {
                        let ai = &ad[i * nn..(i + 1) * nn];
                        match *o {
                            LinalgOp::Solve { adjoint } => solve(op, ai, n, c, k, adjoint, par),
                            LinalgOp::TriangularSolve { lower, adjoint } => {
                                triangular_solve(op, ai, n, c, k, lower, adjoint, par)
                            }
                            _ => Ok(()),
                        }
                    })?;
                    out
                }
                _ => Vec::new(),
            }
        }
    };
    ArcArray::from_shape_vec(IxDyn(&out_shape), out).map_err(|e| Error::shape(op, format!("output {out_shape:?}: {e}")))
}

#[cfg(not(feature = "lapack"))]
mod faer_kernels {
    //! faer versions of the LU / Cholesky kernels.
    use faer::Conj;
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::lu::partial_pivoting::{factor as lu_factor, inverse as lu_inverse, solve as lu_solve};
    use faer::perm::PermRef;

    use super::*;

    /// `‖A‖∞` (max absolute row sum) of a row-major n×n matrix.
    fn norm_inf<T: LaElem>(a: &[T], n: usize) -> f64 {
        a.chunks(n.max(1)).map(|row| row.iter().map(|x| Element::to_f64(*x).abs()).sum::<f64>()).fold(0.0, f64::max)
    }

    /// Error if a pivot of an LU factorization (diagonal `piv`) is singular to working precision.
    fn check_pivots<T: LaElem>(op: &str, piv: impl Iterator<Item = T>, n: usize, norm: f64) -> Result<()> {
        if !norm.is_finite() {
            return Ok(()); // inf/NaN entries propagate into the result
        }
        let tol = n as f64 * T::EPS * norm;
        for (i, p) in piv.enumerate() {
            let p = Element::to_f64(p);
            if p.abs() <= tol {
                return Err(numerical(op, format!("matrix is singular (pivot {i} is {p:e}, tolerance {tol:e})")));
            }
        }
        Ok(())
    }

    /// An LU factorization with partial pivoting of a row-major n×n matrix (faer).
    struct Lu<T> {
        lu: Vec<T>,
        fwd: Vec<usize>,
        bwd: Vec<usize>,
        n: usize,
        swaps: usize,
    }

    impl<T: LaElem> Lu<T> {
        fn new(a: &[T], n: usize, par: Par) -> Lu<T> {
            let mut lu = a.to_vec();
            let (mut fwd, mut bwd) = (vec![0usize; n], vec![0usize; n]);
            let mut mem = MemBuffer::new(lu_factor::lu_in_place_scratch::<usize, T>(n, n, par, Default::default()));
            let (info, _) = lu_factor::lu_in_place(
                MatMut::from_row_major_slice_mut(&mut lu, n, n),
                &mut fwd,
                &mut bwd,
                par,
                MemStack::new(&mut mem),
                Default::default(),
            );
            Lu { lu, fwd, bwd, n, swaps: info.transposition_count }
        }
        fn mat(&self) -> MatRef<'_, T> {
            MatRef::from_row_major_slice(&self.lu, self.n, self.n)
        }
        fn perm(&self) -> PermRef<'_, usize> {
            PermRef::new_checked(&self.fwd, &self.bwd, self.n)
        }
        fn diag(&self) -> impl Iterator<Item = T> + '_ {
            (0..self.n).map(|i| self.lu[i * self.n + i])
        }
        /// `(sign, ln |det|)`.
        fn slogdet(&self) -> (f64, f64) {
            let mut sign = if self.swaps.is_multiple_of(2) { 1.0 } else { -1.0 };
            let mut log = 0.0;
            for p in self.diag() {
                let p = Element::to_f64(p);
                sign *= p.signum();
                log += p.abs().ln();
            }
            (sign, log)
        }
    }

    /// `out = A⁻¹` (row-major n×n).
    pub(super) fn inverse<T: LaElem>(op: &str, a: &[T], n: usize, out: &mut [T], par: Par) -> Result<()> {
        let lu = Lu::new(a, n, par);
        check_pivots(op, lu.diag(), n, norm_inf(a, n))?;
        let mut mem = MemBuffer::new(lu_inverse::inverse_scratch::<usize, T>(n, par));
        lu_inverse::inverse(
            MatMut::from_row_major_slice_mut(out, n, n),
            lu.mat(),
            lu.mat(),
            lu.perm(),
            par,
            MemStack::new(&mut mem),
        );
        Ok(())
    }

    /// `(sign, ln |det A|)`.
    pub(super) fn slogdet<T: LaElem>(a: &[T], n: usize, par: Par) -> (f64, f64) {
        Lu::new(a, n, par).slogdet()
    }

    /// `out = L` with `A = L Lᵀ` (only the lower triangle of `A` is read).
    pub(super) fn cholesky<T: LaElem>(op: &str, a: &[T], n: usize, out: &mut [T], par: Par) -> Result<()> {
        use faer::linalg::cholesky::llt::factor;
        copy_lower(a, n, out);
        let mut mem = MemBuffer::new(factor::cholesky_in_place_scratch::<T>(n, par, Default::default()));
        factor::cholesky_in_place(
            MatMut::from_row_major_slice_mut(out, n, n),
            Default::default(),
            par,
            MemStack::new(&mut mem),
            Default::default(),
        )
        .map_err(|factor::LltError::NonPositivePivot { index }| {
            numerical(op, format!("matrix is not positive definite (non-positive pivot at index {index})"))
        })?;
        zero_strict_upper(out, n);
        Ok(())
    }

    /// `x` (`[n, k]`, holding `B` on entry) `= A⁻¹ B` or `A⁻ᵀ B`.
    pub(super) fn solve<T: LaElem>(
        op: &str,
        a: &[T],
        n: usize,
        x: &mut [T],
        k: usize,
        adjoint: bool,
        par: Par,
    ) -> Result<()> {
        let lu = Lu::new(a, n, par);
        check_pivots(op, lu.diag(), n, norm_inf(a, n))?;
        let rhs = MatMut::from_row_major_slice_mut(x, n, k);
        if adjoint {
            let mut mem = MemBuffer::new(lu_solve::solve_transpose_in_place_scratch::<usize, T>(n, k, par));
            let stack = MemStack::new(&mut mem);
            lu_solve::solve_transpose_in_place_with_conj(lu.mat(), lu.mat(), lu.perm(), Conj::No, rhs, par, stack);
        } else {
            let mut mem = MemBuffer::new(lu_solve::solve_in_place_scratch::<usize, T>(n, k, par));
            let stack = MemStack::new(&mut mem);
            lu_solve::solve_in_place_with_conj(lu.mat(), lu.mat(), lu.perm(), Conj::No, rhs, par, stack);
        }
        Ok(())
    }

    /// `out` = the lower triangle of `a` (strict upper set to zero).
    fn copy_lower<T: LaElem>(a: &[T], n: usize, out: &mut [T]) {
        for i in 0..n {
            out[i * n..i * n + i + 1].copy_from_slice(&a[i * n..i * n + i + 1]);
            out[i * n + i + 1..(i + 1) * n].fill(T::default());
        }
    }
}
#[cfg(not(feature = "lapack"))]
use faer_kernels::{cholesky, inverse, slogdet, solve};

#[cfg(feature = "lapack")]
mod lapack {
    //! LAPACK (ndarray-linalg) versions of the factorization kernels. Singularity: getrf's
    //! exact zero pivot, or a reciprocal condition number (1-norm) `<= n · eps`.
    use ndarray::{Array1, Array2, OwnedRepr};
    use ndarray_linalg::error::LinalgError;
    use ndarray_linalg::{
        CholeskyInto, DeterminantInto, FactorizeInto, InverseInto, LUFactorized, ReciprocalConditionNum, Solve, UPLO,
    };

    use super::*;

    fn mat<T: LaElem>(a: &[T], n: usize) -> Result<Array2<T>> {
        Array2::from_shape_vec((n, n), a.to_vec()).map_err(|e| Error::shape("linalg", e.to_string()))
    }

    fn lapack_err(op: &str, e: LinalgError) -> Error {
        numerical(op, format!("LAPACK: {e}"))
    }

    /// LU-factor and reject matrices that are singular to working precision.
    fn factor<T: LaElem>(op: &str, a: &[T], n: usize) -> Result<LUFactorized<OwnedRepr<T>>> {
        let f = mat(a, n)?.factorize_into().map_err(|e| numerical(op, format!("matrix is singular (LAPACK: {e})")))?;
        let rcond = Element::to_f64(f.rcond().map_err(|e| lapack_err(op, e))?);
        let tol = n as f64 * T::EPS;
        if rcond <= tol {
            return Err(numerical(
                op,
                format!("matrix is singular (reciprocal condition number {rcond:e} <= {tol:e})"),
            ));
        }
        Ok(f)
    }

    pub(super) fn inverse<T: LaElem>(op: &str, a: &[T], n: usize, out: &mut [T], _par: Par) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let inv = factor(op, a, n)?.inv_into().map_err(|e| lapack_err(op, e))?;
        out.iter_mut().zip(inv.iter()).for_each(|(o, &v)| *o = v);
        Ok(())
    }

    pub(super) fn slogdet<T: LaElem>(a: &[T], n: usize, _par: Par) -> (f64, f64) {
        if n == 0 {
            return (1.0, 0.0);
        }
        match mat(a, n).map(|m| m.sln_det_into()) {
            Ok(Ok((sign, log))) => (Element::to_f64(sign), Element::to_f64(log)),
            _ => (f64::NAN, f64::NAN),
        }
    }

    pub(super) fn cholesky<T: LaElem>(op: &str, a: &[T], n: usize, out: &mut [T], _par: Par) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let l = mat(a, n)?
            .cholesky_into(UPLO::Lower)
            .map_err(|e| numerical(op, format!("matrix is not positive definite (LAPACK: {e})")))?;
        out.iter_mut().zip(l.iter()).for_each(|(o, &v)| *o = v);
        zero_strict_upper(out, n);
        Ok(())
    }

    pub(super) fn solve<T: LaElem>(
        op: &str,
        a: &[T],
        n: usize,
        x: &mut [T],
        k: usize,
        adjoint: bool,
        _par: Par,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let f = factor(op, a, n)?;
        let mut col = Array1::<T>::zeros(n);
        for j in 0..k {
            col.iter_mut().enumerate().for_each(|(i, c)| *c = x[i * k + j]);
            if adjoint {
                f.solve_t_inplace(&mut col).map_err(|e| lapack_err(op, e))?;
            } else {
                f.solve_inplace(&mut col).map_err(|e| lapack_err(op, e))?;
            }
            col.iter().enumerate().for_each(|(i, &c)| x[i * k + j] = c);
        }
        Ok(())
    }
}
#[cfg(feature = "lapack")]
use lapack::{cholesky, inverse, slogdet, solve};

/// `x` (`[n, k]`, holding `B` on entry) `= op(A)⁻¹ B` for a triangular `A` (faer).
#[allow(clippy::too_many_arguments)]
fn triangular_solve<T: LaElem>(
    op: &str,
    a: &[T],
    n: usize,
    x: &mut [T],
    k: usize,
    lower: bool,
    adjoint: bool,
    par: Par,
) -> Result<()> {
    use faer::linalg::triangular_solve as ts;
    if let Some(i) = (0..n).find(|&i| a[i * n + i] == T::default()) {
        return Err(numerical(op, format!("triangular matrix is singular (zero diagonal entry {i})")));
    }
    let tri = MatRef::from_row_major_slice(a, n, n);
    let tri = if adjoint { tri.transpose() } else { tri };
    let rhs = MatMut::from_row_major_slice_mut(x, n, k);
    if lower ^ adjoint {
        ts::solve_lower_triangular_in_place(tri, rhs, par);
    } else {
        ts::solve_upper_triangular_in_place(tri, rhs, par);
    }
    Ok(())
}

fn zero_strict_upper<T: LaElem>(out: &mut [T], n: usize) {
    for i in 0..n {
        out[i * n + i + 1..(i + 1) * n].fill(T::default());
    }
}
