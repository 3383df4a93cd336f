//! Vectorizable f32 `sigmoid` and `tanh` over slices (the LSTM gate nonlinearities).
//!
//! The per-element libm calls (`expf`, `expm1f`, `tanhf`) cannot be auto-vectorized and
//! dominated recurrent workloads; these kernels use only arithmetic, comparisons and
//! bit operations, so the loops vectorize on every x86-64 / aarch64 baseline.
//!
//! Invariants:
//! - `exp` is evaluated only on non-positive arguments (`exp(-|x|)`, `exp(-2|x|)`), so it
//!   never overflows: Cody–Waite reduction `y = n·ln2 + r`, `|r| ≤ ln2/2`, a degree-5
//!   polynomial for `e^r` (Chebyshev interpolant on that interval, computed with mpmath's
//!   `chebyfit`: error < 8e-8) and `2^n` built from exponent bits;
//!   arguments below `-87.5` (results below 1.1e-38, near the smallest normal f32) give 0;
//! - `sigmoid(x) = 1/(1+e)` for `x ≥ 0` and `e/(1+e)` for `x < 0` with `e = exp(-|x|)`:
//!   no cancellation on either side;
//! - `tanh(x)`: `x·g(x²)` for `|x| < 0.5`, `g` the degree-4 Chebyshev interpolant of
//!   `tanh(√z)/√z` on `[0, 1/4]` (relative error < 2e-8; `g(0)` rounds to 1, so tiny
//!   arguments come back exact), `(1-e)/(1+e)` with `e = exp(-2|x|)` above, sign restored
//!   with `copysign`;
//! - NaN in gives NaN out, `±inf` give the exact limits; the maximum relative error
//!   against the f64 functions is below 1e-6 (tested over a dense sweep).

/// `exp(y)` for `y ≤ 0` (callers guarantee the sign; larger `y` are clamped to 0).
#[inline(always)]
fn exp_nonpos(y: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75; // ln 2 split so that n·LN2_HI is exact
    const LN2_LO: f32 = 1.428_606_8e-6;
    const MAGIC: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer
    let yc = y.clamp(-87.5, 0.0);
    let t = yc * LOG2E + MAGIC;
    let n = t - MAGIC; // round(y·log2 e), exactly representable
    let r = (yc - n * LN2_HI) - n * LN2_LO;
    let p = 1.000_000_1
        + r * (1.000_000_0 + r * (0.499_988_7 + r * (0.166_665_05 + r * (0.041_917_507 + r * 0.008_369_149))));
    // t's low mantissa bits hold n (|n| ≤ 126): 2^n from the exponent field.
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let pow2n = f32::from_bits((ni.wrapping_add(127) << 23) as u32);
    if y < -87.5 { 0.0 } else { p * pow2n }
}

#[inline(always)]
fn sigmoid1(x: f32) -> f32 {
    let e = exp_nonpos(-x.abs());
    let s = 1.0 / (1.0 + e);
    let v = if x >= 0.0 { s } else { e * s };
    if x.is_nan() { x } else { v }
}

#[inline(always)]
fn tanh1(x: f32) -> f32 {
    let a = x.abs();
    // tanh a = a g(z), z = a², g near-minimax on [0, 1/4]
    let z = a * a;
    let small = a * (1.0 + z * (-0.333_330_7 + z * (0.133_247_5 + z * (-0.052_984_24 + z * 0.017_131_344))));
    let e = exp_nonpos(-2.0 * a);
    let large = (1.0 - e) / (1.0 + e);
    let v = if a < 0.5 { small } else { large };
    if x.is_nan() { x } else { v.copysign(x) }
}

/// `x ← sigmoid(x)` elementwise, compiled for the widest vector unit
/// ([`widest`](crate::kernels::simd::widest): 16 or 8 lanes, VEX/EVEX-encoded, bit-identical
/// to the baseline build).
///
/// ```
/// use pfor::kernels::fastmath::{sigmoid_f32, tanh_f32};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut xs = [0.0f32, 100.0, -100.0, f32::NAN];
/// sigmoid_f32(&mut xs);
/// assert_eq!(&xs[..3], [0.5, 1.0, 0.0]);
/// assert!(xs[3].is_nan());
/// # Ok(())
/// # }
/// ```
pub fn sigmoid_f32(xs: &mut [f32]) {
    crate::kernels::simd::widest(
        #[inline(always)]
        || {
            for x in xs {
                *x = sigmoid1(*x);
            }
        },
    )
}

/// `x ← tanh(x)` elementwise, compiled for the widest vector unit (see [`sigmoid_f32`]).
///
/// ```
/// use pfor::kernels::fastmath::{sigmoid_f32, tanh_f32};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut xs = [0.0f32, 0.5, -20.0];
/// tanh_f32(&mut xs);
/// assert_eq!((xs[0], xs[2]), (0.0, -1.0));
/// assert!((xs[1] - 0.5f32.tanh()).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub fn tanh_f32(xs: &mut [f32]) {
    crate::kernels::simd::widest(
        #[inline(always)]
        || {
            for x in xs {
                *x = tanh1(*x);
            }
        },
    )
}
