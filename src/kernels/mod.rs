//! Low-level kernels shared by several op families (GEMM, vectorized f32 math).

pub mod fastmath;
pub mod gemm;
