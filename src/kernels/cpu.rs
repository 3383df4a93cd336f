//! CPU capabilities, probed once into one table ([`caps`]) that every kernel reads.
//!
//! Invariants: the table is probed on first use and never changes afterwards; a kernel
//! compiled with `#[target_feature(enable = "...")]` runs only where the matching field is
//! true (that is the safety argument of every such call in `kernels`); on other
//! architectures every field is false, so only the portable paths run.

use std::sync::LazyLock;

/// What the CPU running this process supports (x86-64 vector extensions the kernels use).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuCaps {
    /// AVX (256-bit registers; `vzeroupper`).
    pub avx: bool,
    /// AVX2.
    pub avx2: bool,
    /// AVX-512 Foundation (the register-blocked micro-kernels, Winograd, the narrow conv,
    /// the depth-major GEMM, streamed stores).
    pub avx512f: bool,
}

impl CpuCaps {
    /// Probe the CPU (what [`caps`] holds).
    ///
    /// ```
    /// use pfor::kernels::cpu::{CpuCaps, caps};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let c = CpuCaps::detect();
    /// assert_eq!(c, caps()); // what the table holds
    /// assert!(!c.avx512f || c.avx); // AVX-512 implies AVX
    /// # Ok(())
    /// # }
    /// ```
    pub fn detect() -> CpuCaps {
        #[cfg(target_arch = "x86_64")]
        {
            CpuCaps {
                avx: std::arch::is_x86_feature_detected!("avx"),
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            CpuCaps::default()
        }
    }
}

static CAPS: LazyLock<CpuCaps> = LazyLock::new(CpuCaps::detect);

/// The capabilities of this CPU, probed once per process.
///
/// ```
/// use pfor::kernels::cpu::{CpuCaps, caps};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let c = caps(); // probed once per process
/// println!("avx2: {}, avx512f: {}", c.avx2, c.avx512f);
/// # Ok(())
/// # }
/// ```
#[inline]
pub fn caps() -> CpuCaps {
    *CAPS
}
