//! Vectorizable f32 `sigmoid` and `tanh` over slices (the LSTM gate nonlinearities).
//!
//! The per-element libm calls (`expf`, `expm1f`, `tanhf`) cannot be auto-vectorized and
//! dominated recurrent workloads; these kernels use only arithmetic, comparisons and
//! bit operations, so the loops vectorize on every x86-64 / aarch64 baseline.
//!
//! Invariants:
//! - `exp` is evaluated only on non-positive arguments (`exp(-|x|)`, `exp(-2|x|)`), so it
//!   never overflows: Cody–Waite reduction `y = n·ln2 + r`, `|r| ≤ ln2/2`, a degree-7
//!   Taylor polynomial for `e^r` (truncation < 6e-9) and `2^n` built from exponent bits;
//!   arguments below `-87.5` (results below 1.1e-38, near the smallest normal f32) give 0;
//! - `sigmoid(x) = 1/(1+e)` for `x ≥ 0` and `e/(1+e)` for `x < 0` with `e = exp(-|x|)`:
//!   no cancellation on either side;
//! - `tanh(x)`: the odd Taylor series up to `x^15` for `|x| < 0.5` (truncation < 1e-8
//!   relative), `(1-e)/(1+e)` with `e = exp(-2|x|)` above, sign restored with `copysign`;
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
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
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
    // odd Taylor series: tanh a = a (1 + z (c3 + z (c5 + ...))), z = a²
    let z = a * a;
    let small = a
        * (1.0
            + z * (-1.0 / 3.0
                + z * (2.0 / 15.0
                    + z * (-17.0 / 315.0
                        + z * (62.0 / 2835.0
                            + z * (-1382.0 / 155_925.0
                                + z * (21_844.0 / 6_081_075.0 + z * (-929_569.0 / 638_512_875.0))))))));
    let e = exp_nonpos(-2.0 * a);
    let large = (1.0 - e) / (1.0 + e);
    let v = if a < 0.5 { small } else { large };
    if x.is_nan() { x } else { v.copysign(x) }
}

/// `x ← sigmoid(x)` elementwise, compiled for the widest vector unit
/// ([`widest`](crate::kernels::simd::widest): 16 or 8 lanes, VEX/EVEX-encoded, bit-identical
/// to the baseline build).
pub fn sigmoid_f32(xs: &mut [f32]) {
    crate::kernels::simd::widest(|| {
        for x in xs {
            *x = sigmoid1(*x);
        }
    })
}

/// `x ← tanh(x)` elementwise, compiled for the widest vector unit (see [`sigmoid_f32`]).
pub fn tanh_f32(xs: &mut [f32]) {
    crate::kernels::simd::widest(|| {
        for x in xs {
            *x = tanh1(*x);
        }
    })
}
