//! Low-level kernels shared by several op families (GEMM, the AVX-512 register-blocked
//! micro-kernel of Winograd and per-example filter gradients, vectorized f32 math), and the
//! opt-in allocator tuning for large-tensor workloads ([`alloc::tune_system_allocator`]).

pub mod alloc;
pub mod fastmath;
pub mod gemm;
pub(crate) mod micro;
pub mod simd;
