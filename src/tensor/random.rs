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
pub fn mix_key(key: u64, salt: u64) -> u64 {
    mix(mix(key) ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// Raw 64 random bits for counter `c` of stream `key`.
pub fn counter_bits(key: u64, c: u64) -> u64 {
    mix(mix(key).wrapping_add(c.wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ 0x5851_F42D_4C95_7F2D)
}

/// Uniform `[0, 1)` for counter `c` of stream `key`.
pub fn counter_uniform(key: u64, c: u64) -> f64 {
    (counter_bits(key, c) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Standard normal for counter `c` of stream `key` (Box–Muller on two sub-counters).
pub fn counter_normal(key: u64, c: u64) -> f64 {
    let u1 = (counter_bits(key, 2 * c) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    let u2 = counter_uniform(key, 2 * c + 1);
    let u1 = 1.0 - u1; // (0, 1]
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
