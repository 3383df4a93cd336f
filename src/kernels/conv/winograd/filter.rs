//! The Winograd filter transform `U = G g Gᵀ` and its process-wide cache.
//!
//! A plan's constant filter is the same buffer on every run (tensors share their storage),
//! so the transform of a filter is kept, keyed by the filter's address, algorithm and
//! channel counts, together with a copy of the filter: an entry is used only when the
//! filter's bits equal the copy's (a buffer reused for different values, such as a weight
//! updated in place, gets a fresh transform). At most [`CACHE_BYTES`] of transforms are
//! kept; the least recently used go first.
//!
//! Invariants: [`transformed`] returns exactly what [`transform`] computes for the filter
//! it is given (a hit compares every bit), so results never depend on the cache's state.

use std::sync::{Arc, Mutex};

use super::{Alg, POINTS, T6};

/// Most bytes of transformed filters the cache holds (ResNet-50's 3x3 convs take ~180 MB).
const CACHE_BYTES: usize = 256 << 20;

struct Entry {
    addr: usize,
    alg: Alg,
    c: usize,
    o: usize,
    /// The filter the transform was computed from.
    w: Vec<f32>,
    u: Arc<Vec<f32>>,
    used: u64,
}

struct Cache {
    entries: Vec<Entry>,
    clock: u64,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache { entries: Vec::new(), clock: 0 });

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `U [36, C, O]` of the `[k, k, C, O]` filter `w`, from the cache when this buffer's
/// transform is there with the same bits, else computed (and kept when `keep`).
pub(super) fn transformed(alg: Alg, c: usize, o: usize, w: &[f32], keep: bool) -> Arc<Vec<f32>> {
    let addr = w.as_ptr() as usize;
    if keep {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        cache.clock += 1;
        let now = cache.clock;
        if let Some(e) = cache
            .entries
            .iter_mut()
            .find(|e| e.addr == addr && e.alg == alg && e.c == c && e.o == o && same_bits(&e.w, w))
        {
            e.used = now;
            return e.u.clone();
        }
    }
    let u = Arc::new(transform(alg, c, o, w));
    if keep {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let cache = &mut *cache;
        cache.entries.retain(|e| !(e.addr == addr && e.alg == alg && e.c == c && e.o == o));
        let bytes = |es: &[Entry]| es.iter().map(|e| (e.u.len() + e.w.len()) * 4).sum::<usize>();
        let need = (u.len() + w.len()) * 4;
        while !cache.entries.is_empty() && bytes(&cache.entries) + need > CACHE_BYTES {
            let (i, _) = cache.entries.iter().enumerate().min_by_key(|(_, e)| e.used).expect("non-empty");
            cache.entries.swap_remove(i);
        }
        if need <= CACHE_BYTES {
            cache.entries.push(Entry { addr, alg, c, o, w: w.to_vec(), u: u.clone(), used: cache.clock });
        }
    }
    u
}

/// `U [36, C, O] = G g Gᵀ` per `(c, o)`, `g` the `k x k` taps of `w [k, k, C, O]`.
pub(super) fn transform(alg: Alg, c: usize, o: usize, w: &[f32]) -> Vec<f32> {
    let (k, gm) = (alg.k(), alg.g());
    let mut u = vec![0.0f32; POINTS * c * o];
    // `gw [6, k, O]`: G applied along the filter rows, for one input channel
    let mut gw = vec![0.0f32; T6 * k * o];
    for ci in 0..c {
        gw.fill(0.0);
        for (xi, grow) in gm.iter().enumerate() {
            for (ky, &gk) in grow.iter().enumerate().take(k) {
                if gk == 0.0 {
                    continue;
                }
                for kx in 0..k {
                    let src = &w[((ky * k + kx) * c + ci) * o..][..o];
                    let dst = &mut gw[(xi * k + kx) * o..][..o];
                    dst.iter_mut().zip(src).for_each(|(d, &s)| *d += gk * s);
                }
            }
        }
        for xi in 0..T6 {
            for (nu, grow) in gm.iter().enumerate() {
                let dst = &mut u[((xi * T6 + nu) * c + ci) * o..][..o];
                for (kx, &gk) in grow.iter().enumerate().take(k) {
                    if gk == 0.0 {
                        continue;
                    }
                    let src = &gw[(xi * k + kx) * o..][..o];
                    dst.iter_mut().zip(src).for_each(|(d, &s)| *d += gk * s);
                }
            }
        }
    }
    u
}
