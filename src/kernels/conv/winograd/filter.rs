//! The Winograd filter transform `U = G g Gᵀ`, and filters transformed ahead of time.
//!
//! A plan's constant filter is transformed once, when the plan is compiled
//! (`exec::pretranspose::winograd_filter` builds a [`Prepared`] that the fused conv step
//! holds and hands to the kernel through its epilogue); any other filter (a fed or computed
//! one, a weight that changes between runs) is transformed on every call. No cache, no keys:
//! what a run uses is what its plan holds or what it computes from the filter it is given.
//!
//! Invariants: a [`Prepared`] holds exactly what [`transform`] computes for its filter, and
//! the kernel uses one only for the algorithm and channel counts it was made for, so results
//! never depend on whether the transform was prepared. [`transforms_on_this_thread`] counts
//! the transforms computed on the calling thread (for tests: a prepared plan computes none).

use std::cell::Cell;

use super::{Alg, POINTS, T6};

/// The transform `U [36, C, O]` of a `[k, k, C, O]` filter, for algorithm `alg`.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(super) alg: Alg,
    pub(super) c: usize,
    pub(super) o: usize,
    pub(super) u: Vec<f32>,
}

impl Prepared {
    /// The transform of the `[k, k, C, O]` filter `w` for a conv of geometry `g`, where the
    /// Winograd kernel takes `g` (see `winograd::applies`).
    pub(crate) fn new(g: &super::Geom, w: &[f32]) -> Option<Prepared> {
        let alg = Alg::of(g)?;
        (super::applies(g) && w.len() == alg.k() * alg.k() * g.c * g.o).then(|| Prepared {
            alg,
            c: g.c,
            o: g.o,
            u: transform(alg, g.c, g.o, w),
        })
    }
    /// `U` when it was made for this algorithm and these channel counts.
    pub(super) fn get(&self, alg: Alg, c: usize, o: usize) -> Option<&[f32]> {
        (self.alg == alg && self.c == c && self.o == o).then_some(&self.u[..])
    }
}

thread_local! {
    static TRANSFORMS: Cell<u64> = const { Cell::new(0) };
}

/// Filter transforms computed on the calling thread so far.
pub(crate) fn transforms_on_this_thread() -> u64 {
    TRANSFORMS.with(Cell::get)
}

/// `U [36, C, O] = G g Gᵀ` per `(c, o)`, `g` the `k x k` taps of `w [k, k, C, O]`.
pub(super) fn transform(alg: Alg, c: usize, o: usize, w: &[f32]) -> Vec<f32> {
    TRANSFORMS.with(|n| n.set(n.get() + 1));
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
