//! Graph builders of the linalg ops (`Graph::…` methods that check their operands and add
//! one node), kept apart from the op definitions and kernels in the parent module.

use super::*;
use crate::ir::{Graph, ValueId};

impl Graph {
    fn linalg1(&mut self, o: LinalgOp, a: ValueId) -> Result<ValueId> {
        self.add_op(Op::Linalg(o), &[a])
    }
    /// Inverse of each square matrix `[..., n, n]` (singular → `Error::Numerical`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.input("a", DType::F64, [2, 2]);
    /// let inv = g.matrix_inverse(a)?;
    /// let r = run_once(&g, &[inv], &[(a, Tensor::from_vec(&[2, 2], vec![2.0f64, 0.0, 0.0, 4.0])?)])?;
    /// assert_eq!(r[0].to_vec::<f64>()?, [0.5, 0.0, 0.0, 0.25]);
    /// // a singular matrix is an error when it runs
    /// assert!(run_once(&g, &[inv], &[(a, Tensor::zeros(DType::F64, &[2, 2])?)]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn matrix_inverse(&mut self, a: ValueId) -> Result<ValueId> {
        self.linalg1(LinalgOp::MatrixInverse, a)
    }
    /// Determinant of each square matrix: `[..., n, n] → [...]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0])?);
    /// let d = g.determinant(a)?;
    /// assert!((run_once(&g, &[d], &[])?[0].scalar_f64()? + 2.0).abs() < 1e-12);
    /// # Ok(())
    /// # }
    /// ```
    pub fn determinant(&mut self, a: ValueId) -> Result<ValueId> {
        self.linalg1(LinalgOp::Determinant, a)
    }
    /// `ln |det|` of each square matrix: `[..., n, n] → [...]` (`-inf` when singular).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0])?);
    /// let l = g.log_abs_det(a)?; // ln |-2|
    /// assert!((run_once(&g, &[l], &[])?[0].scalar_f64()? - 2f64.ln()).abs() < 1e-12);
    /// # Ok(())
    /// # }
    /// ```
    pub fn log_abs_det(&mut self, a: ValueId) -> Result<ValueId> {
        self.linalg1(LinalgOp::MatrixLogDet, a)
    }
    /// Lower Cholesky factor `L` (`A = L Lᵀ`) of each positive definite matrix.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 2], vec![4.0f64, 2.0, 2.0, 5.0])?);
    /// let l = g.cholesky(a)?;
    /// assert_eq!(run_once(&g, &[l], &[])?[0].to_vec::<f64>()?, [2.0, 0.0, 1.0, 2.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cholesky(&mut self, a: ValueId) -> Result<ValueId> {
        self.linalg1(LinalgOp::Cholesky, a)
    }
    /// Solve `A X = B` for `A` `[..., n, n]`, `B` `[..., n, k]` (equal batch dims).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 2], vec![2.0f64, 0.0, 0.0, 4.0])?);
    /// let b = g.constant(Tensor::from_vec(&[2, 1], vec![2.0f64, 2.0])?);
    /// let x = g.solve(a, b)?;
    /// assert_eq!(run_once(&g, &[x], &[])?[0].to_vec::<f64>()?, [1.0, 0.5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn solve(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.solve_t(a, b, false)
    }
    /// Solve `A X = B`, or `Aᵀ X = B` when `adjoint`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 1.0, 0.0, 1.0])?);
    /// let b = g.constant(Tensor::from_vec(&[2, 1], vec![1.0f64, 3.0])?);
    /// let x = g.solve_t(a, b, true)?; // aᵀ x = b
    /// let r = run_once(&g, &[x], &[])?[0].to_vec::<f64>()?;
    /// assert!((r[0] - 1.0).abs() < 1e-12 && (r[1] - 2.0).abs() < 1e-12);
    /// # Ok(())
    /// # }
    /// ```
    pub fn solve_t(&mut self, a: ValueId, b: ValueId, adjoint: bool) -> Result<ValueId> {
        self.add_op(Op::Linalg(LinalgOp::Solve { adjoint }), &[a, b])
    }
    /// Solve `op(A) X = B` for a lower (or upper) triangular `A`; `op` transposes when `adjoint`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let l = g.constant(Tensor::from_vec(&[2, 2], vec![2.0f64, 0.0, 1.0, 1.0])?);
    /// let b = g.constant(Tensor::from_vec(&[2, 1], vec![4.0f64, 5.0])?);
    /// let x = g.triangular_solve(l, b, true, false)?; // lower, l x = b
    /// assert_eq!(run_once(&g, &[x], &[])?[0].to_vec::<f64>()?, [2.0, 3.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn triangular_solve(&mut self, a: ValueId, b: ValueId, lower: bool, adjoint: bool) -> Result<ValueId> {
        self.add_op(Op::Linalg(LinalgOp::TriangularSolve { lower, adjoint }), &[a, b])
    }
    /// Diagonal matrices from vectors: `[..., n] → [..., n, n]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let d = g.constant(Tensor::vec1(&[1.0f32, 2.0]));
    /// let m = g.matrix_diag(d)?;
    /// assert_eq!(run_once(&g, &[m], &[])?[0].to_vec::<f32>()?, [1.0, 0.0, 0.0, 2.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn matrix_diag(&mut self, d: ValueId) -> Result<ValueId> {
        self.linalg1(LinalgOp::MatrixDiag, d)
    }
    /// Main diagonals: `[..., m, n] → [..., min(m, n)]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let d = g.matrix_diag_part(a)?;
    /// assert_eq!(run_once(&g, &[d], &[])?[0].to_vec::<f32>()?, [1.0, 5.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn matrix_diag_part(&mut self, a: ValueId) -> Result<ValueId> {
        self.linalg1(LinalgOp::MatrixDiagPart, a)
    }
    /// Sum of each main diagonal: `[..., m, n] → [...]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 2, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])?);
    /// let t = g.trace(a)?; // one per matrix
    /// assert_eq!(run_once(&g, &[t], &[])?[0].to_vec::<f64>()?, [5.0, 13.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn trace(&mut self, a: ValueId) -> Result<ValueId> {
        self.linalg1(LinalgOp::Trace, a)
    }
}
