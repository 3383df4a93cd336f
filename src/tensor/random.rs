//! Counter-based random numbers: value `c` of stream `key` is a pure function of
//! `(key, c)` (a SplitMix64-style finalizer), so results are reproducible, independent of
//! evaluation order, and a vectorized random op can produce exactly the values the
//! per-iteration op would produce for the same per-iteration key.

/// Mix a 64-bit value (SplitMix64 finalizer).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derive a new key from a key and a salt (e.g. a loop index): `fold_in`.
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{counter_normal, counter_uniform, mix_key};
/// use pfor::tensor::{stream_base, stream_bits, stream_normal, stream_uniform};
///
/// # fn main() -> Result<()> {
/// let key = 42;
/// // per-iteration keys (JAX `fold_in`): reproducible, and different per salt
/// assert_eq!(mix_key(key, 0), mix_key(key, 0));
/// assert_ne!(mix_key(key, 0), mix_key(key, 1));
/// # Ok(())
/// # }
/// ```
pub fn mix_key(key: u64, salt: u64) -> u64 {
    mix(mix(key) ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// Raw 64 random bits for counter `c` of stream `key`.
pub fn counter_bits(key: u64, c: u64) -> u64 {
    stream_bits(stream_base(key), c)
}

/// The per-stream part of `counter_bits`, computed once per key by loops that draw many
/// counters of one stream: `counter_bits(key, c) == stream_bits(stream_base(key), c)`.
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{counter_normal, counter_uniform, mix_key};
/// use pfor::tensor::{stream_base, stream_bits, stream_normal, stream_uniform};
///
/// # fn main() -> Result<()> {
/// let base = stream_base(7); // once per stream, then cheap draws
/// let u: Vec<f64> = (0..3).map(|c| stream_uniform(base, c)).collect();
/// assert_eq!(u[1], counter_uniform(7, 1)); // the values of the per-counter functions
/// # Ok(())
/// # }
/// ```
pub fn stream_base(key: u64) -> u64 {
    mix(key)
}

/// `counter_bits` from a [`stream_base`].
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{counter_normal, counter_uniform, mix_key};
/// use pfor::tensor::{stream_base, stream_bits, stream_normal, stream_uniform};
///
/// # fn main() -> Result<()> {
/// let base = stream_base(7);
/// let draws: Vec<u64> = (0..4).map(|c| stream_bits(base, c)).collect();
/// assert_eq!(draws[2], stream_bits(base, 2)); // a pure function of (key, counter): any order
/// # Ok(())
/// # }
/// ```
pub fn stream_bits(base: u64, c: u64) -> u64 {
    mix(base.wrapping_add(c.wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ 0x5851_F42D_4C95_7F2D)
}

/// Uniform `[0, 1)` from 64 random bits (their top 53).
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Uniform `[0, 1)` for counter `c` of stream `key`.
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{counter_normal, counter_uniform, mix_key};
/// use pfor::tensor::{stream_base, stream_bits, stream_normal, stream_uniform};
///
/// # fn main() -> Result<()> {
/// let u = counter_uniform(1, 0);
/// assert!((0.0..1.0).contains(&u));
/// assert_eq!(u, stream_uniform(stream_base(1), 0));
/// # Ok(())
/// # }
/// ```
pub fn counter_uniform(key: u64, c: u64) -> f64 {
    unit(counter_bits(key, c))
}

/// [`counter_uniform`] from a [`stream_base`].
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{counter_normal, counter_uniform, mix_key};
/// use pfor::tensor::{stream_base, stream_bits, stream_normal, stream_uniform};
///
/// # fn main() -> Result<()> {
/// let base = stream_base(3);
/// let mean = (0..10_000).map(|c| stream_uniform(base, c)).sum::<f64>() / 10_000.0;
/// assert!((mean - 0.5).abs() < 0.02);
/// # Ok(())
/// # }
/// ```
pub fn stream_uniform(base: u64, c: u64) -> f64 {
    unit(stream_bits(base, c))
}

/// Standard normal for counter `c` of stream `key` (Box–Muller on two sub-counters).
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{counter_normal, counter_uniform, mix_key};
/// use pfor::tensor::{stream_base, stream_bits, stream_normal, stream_uniform};
///
/// # fn main() -> Result<()> {
/// let xs: Vec<f64> = (0..10_000).map(|c| counter_normal(5, c)).collect();
/// let mean = xs.iter().sum::<f64>() / xs.len() as f64;
/// assert!(mean.abs() < 0.05 && xs.iter().all(|x| x.is_finite()));
/// # Ok(())
/// # }
/// ```
pub fn counter_normal(key: u64, c: u64) -> f64 {
    let u1 = (counter_bits(key, 2 * c) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    let u2 = counter_uniform(key, 2 * c + 1);
    let u1 = 1.0 - u1; // (0, 1]
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Standard normal for counter `c` of the stream with [`stream_base`] `base`, by the
/// ziggurat method (Marsaglia & Tsang 2000, 128 layers) — the generator of the
/// `random_normal` op. The layer index and the candidate come from disjoint bits of
/// `stream_bits(base, c)` (the low 7 and the high 32: no correlation between them, the flaw
/// Doornik (2005) found in the original); the rare rejections (~1.3 %) draw further values
/// from a private sequence seeded by those bits, so the value stays a pure function of
/// `(key, c)`. About ten times cheaper than [`counter_normal`]'s Box–Muller (two logs, a
/// square root and a cosine per value), which `Tensor::randn` keeps.
///
/// ```
/// use pfor::prelude::*;
/// use pfor::tensor::{counter_normal, counter_uniform, mix_key};
/// use pfor::tensor::{stream_base, stream_bits, stream_normal, stream_uniform};
///
/// # fn main() -> Result<()> {
/// let base = stream_base(9);
/// let xs: Vec<f64> = (0..10_000).map(|c| stream_normal(base, c)).collect();
/// let var = xs.iter().map(|x| x * x).sum::<f64>() / xs.len() as f64;
/// assert!((var - 1.0).abs() < 0.1);
/// assert_eq!(xs[17], stream_normal(base, 17)); // reproducible
/// # Ok(())
/// # }
/// ```
pub fn stream_normal(base: u64, c: u64) -> f64 {
    let bits = stream_bits(base, c);
    let t = ziggurat();
    let (hz, iz) = ((bits >> 32) as u32 as i32, (bits & 127) as usize);
    if hz.unsigned_abs() < t.k[iz] {
        return hz as f64 * t.w[iz];
    }
    ziggurat_slow(t, hz, iz, bits)
}

/// Ziggurat tables: `k[i]` the acceptance bound of layer `i` on `|hz|` (a 31-bit scale),
/// `w[i]` the layer's width per unit of `hz`, `f[i]` the density at its edge.
struct Ziggurat {
    k: [u32; 128],
    w: [f64; 128],
    f: [f64; 128],
}

/// The right edge of the base layer (the tail starts here).
const ZIG_R: f64 = 3.442_619_855_899;

fn ziggurat() -> &'static Ziggurat {
    static TABLES: std::sync::OnceLock<Ziggurat> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        // Every layer has area V (the base layer includes the tail beyond R).
        const V: f64 = 9.912_563_035_262_17e-3;
        const M: f64 = 2_147_483_648.0; // 2^31
        let (mut k, mut w, mut f) = ([0u32; 128], [0.0; 128], [0.0; 128]);
        let mut d = ZIG_R;
        let mut prev = d;
        let q = V / (-0.5 * d * d).exp();
        k[0] = ((d / q) * M) as u32;
        w[0] = q / M;
        w[127] = d / M;
        f[0] = 1.0;
        f[127] = (-0.5 * d * d).exp();
        for i in (1..=126).rev() {
            d = (-2.0 * (V / d + (-0.5 * d * d).exp()).ln()).sqrt();
            k[i + 1] = ((d / prev) * M) as u32;
            prev = d;
            f[i] = (-0.5 * d * d).exp();
            w[i] = d / M;
        }
        Ziggurat { k, w, f }
    })
}

/// The rejection path of [`stream_normal`]: the wedge test, the tail, new candidates.
#[cold]
fn ziggurat_slow(t: &Ziggurat, mut hz: i32, mut iz: usize, seed: u64) -> f64 {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(s)
    };
    loop {
        if iz == 0 {
            // The tail beyond R (Marsaglia 1964): x = -ln(u1) / R until 2y >= x^2.
            loop {
                let x = -(1.0 - unit(next())).ln() / ZIG_R;
                let y = -(1.0 - unit(next())).ln();
                if y + y >= x * x {
                    return if hz > 0 { ZIG_R + x } else { -ZIG_R - x };
                }
            }
        }
        let x = hz as f64 * t.w[iz];
        if t.f[iz] + unit(next()) * (t.f[iz - 1] - t.f[iz]) < (-0.5 * x * x).exp() {
            return x;
        }
        let bits = next();
        (hz, iz) = ((bits >> 32) as u32 as i32, (bits & 127) as usize);
        if hz.unsigned_abs() < t.k[iz] {
            return hz as f64 * t.w[iz];
        }
    }
}
