//! Low-level kernels shared by several op families (GEMM).

pub mod gemm;
