//! The peers' data, bit for bit: numpy's legacy `RandomState` (MT19937, `random_sample`,
//! the polar-method `standard_normal`) and the two generators of `benches/peers/peerlib.py`
//! that W9 shares with its TF `tf.data` peer: `cnn_params()` (the MNIST CNN's weights) and
//! `mnist(n, seed)` (the images).
//!
//! Invariant: [`RandomState::new`]`(s)` yields the same stream as `np.random.RandomState(s)`
//! for a seed `s < 2^32` (numpy seeds an integer with MT19937's `init_genrand`), and every
//! function here draws in peerlib's order, so both sides compute the same function on the
//! same data (checked against numpy's values in `tests/benches/peerlib.rs`).

use pfor::prelude::*;

const N: usize = 624;
const M: usize = 397;

/// numpy's legacy `RandomState`: MT19937 with the cached second normal of the polar method.
pub struct RandomState {
    mt: [u32; N],
    pos: usize,
    gauss: Option<f64>,
}

impl RandomState {
    /// `np.random.RandomState(seed)`.
    pub fn new(seed: u32) -> RandomState {
        let mut mt = [0u32; N];
        mt[0] = seed;
        for i in 1..N {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        RandomState { mt, pos: N, gauss: None }
    }

    fn twist(&mut self) {
        for i in 0..N {
            let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % N] & 0x7fff_ffff);
            let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
            self.mt[i] = self.mt[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    /// The next 32 bits of the stream.
    pub fn next_u32(&mut self) -> u32 {
        if self.pos == N {
            self.twist();
        }
        let mut y = self.mt[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random_sample()`: 53 random bits in `[0, 1)`.
    pub fn random_sample(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// `standard_normal()`: the legacy polar method, which returns the second of each pair
    /// first and caches the other.
    pub fn standard_normal(&mut self) -> f64 {
        if let Some(g) = self.gauss.take() {
            return g;
        }
        loop {
            let x1 = 2.0 * self.random_sample() - 1.0;
            let x2 = 2.0 * self.random_sample() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }
}

/// peerlib's `CNN_KEYS` shapes, in its order (NHWC: conv weights HWIO, `d1w` rows in
/// `(h, w, c)` order), the order of `MnistParams`.
pub const CNN_SHAPES: [&[usize]; 8] =
    [&[5, 5, 1, 32], &[32], &[5, 5, 32, 64], &[64], &[3136, 1024], &[1024], &[1024, 10], &[10]];

/// peerlib's `cnn_params()`: the 8 weights drawn in order from `RandomState(1)`, He-scaled
/// (`sqrt(2 / fan_in)`; biases 0.01), rounded to f32.
pub fn cnn_params() -> Result<Vec<Tensor>> {
    let mut r = RandomState::new(1);
    CNN_SHAPES
        .iter()
        .map(|s| {
            let scale =
                if s.len() > 1 { (2.0 / s[..s.len() - 1].iter().product::<usize>() as f64).sqrt() } else { 0.01 };
            let n: usize = s.iter().product();
            Tensor::from_vec(s, (0..n).map(|_| (r.standard_normal() * scale) as f32).collect())
        })
        .collect()
}

/// The images of peerlib's `mnist(n, seed)`: `[n, 28, 28, 1]` f32 ~ U[0, 1).
pub fn mnist_images(n: usize, seed: u32) -> Result<Tensor> {
    let mut r = RandomState::new(seed);
    Tensor::from_vec(&[n, 28, 28, 1], (0..n * 784).map(|_| r.random_sample() as f32).collect())
}
