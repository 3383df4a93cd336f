//! [`Geom`]: the concrete window geometry of one conv or pool application, which the kernels
//! loop over (built and checked by `ops::conv`, see `Geom::new` there).
//!
//! Invariants: the tap iterators yield exactly the in-bounds taps (padding contributes
//! nothing), so kernels need no bounds checks of their own.

/// Concrete geometry of one op application (`o`: conv output channels, depthwise channel
/// multiplier, or `c` for pools).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geom {
    pub(crate) n: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) c: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) o: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) sh: usize,
    pub(crate) sw: usize,
    pub(crate) dh: usize,
    pub(crate) dw: usize,
    pub(crate) pt: usize,
    pub(crate) pl: usize,
}

impl Geom {
    /// A 1x1 stride-1 window without padding (explicit pads can pad even a 1x1 window): the
    /// conv is a plain GEMM on the input.
    pub(crate) fn pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.sh == 1 && self.sw == 1 && self.oh == self.h && self.ow == self.w
    }
    /// `(ky, iy)` for the in-bounds taps of output row `oy`.
    pub(crate) fn taps_y(&self, oy: usize) -> impl Iterator<Item = (usize, usize)> + use<> {
        taps(oy * self.sh, self.pt, self.dh, self.kh, self.h)
    }
    /// `(kx, ix)` for the in-bounds taps of output column `ox`.
    pub(crate) fn taps_x(&self, ox: usize) -> impl Iterator<Item = (usize, usize)> + use<> {
        taps(ox * self.sw, self.pl, self.dw, self.kw, self.w)
    }
    /// `(ky, oy)` for the output rows whose window covers input row `iy`.
    pub(crate) fn rev_taps_y(&self, iy: usize) -> impl Iterator<Item = (usize, usize)> + use<> {
        rev_taps(iy + self.pt, self.dh, self.sh, self.kh, self.oh)
    }
    /// The output columns whose tap `kx` is in bounds; their input column is [`Geom::ix`].
    pub(crate) fn cols_for_tap(&self, kx: usize) -> std::ops::Range<usize> {
        let off = kx * self.dw;
        let lo = self.pl.saturating_sub(off).div_ceil(self.sw);
        let hi = (self.w + self.pl).saturating_sub(off).div_ceil(self.sw).min(self.ow);
        lo..hi.max(lo)
    }
    /// Input column of output column `ox`, tap `kx` (in bounds for `ox` in `cols_for_tap(kx)`).
    pub(crate) fn ix(&self, ox: usize, kx: usize) -> usize {
        ox * self.sw + kx * self.dw - self.pl
    }
}

pub(crate) fn taps(start: usize, pad: usize, d: usize, k: usize, limit: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..k).filter_map(move |t| (start + t * d).checked_sub(pad).filter(|&p| p < limit).map(|p| (t, p)))
}

pub(crate) fn rev_taps(
    padded: usize,
    d: usize,
    s: usize,
    k: usize,
    limit: usize,
) -> impl Iterator<Item = (usize, usize)> {
    (0..k).filter_map(move |t| {
        let q = padded.checked_sub(t * d)?;
        (q % s == 0 && q / s < limit).then_some((t, q / s))
    })
}
