//! A register-blocked AVX-512 f32 micro-kernel and the small products built on it.
//!
//! [`micro`] computes an `R x 16V` block (`V` ≤ 4 vectors, `R x V` ≤ 24 accumulators
//! plus `V` loaded vectors, within the 32 ZMM registers: 6 x 4 up to 16 x 1) of `A · B`,
//! with `A` read through arbitrary row and depth strides (broadcast one element at a time)
//! and `B` by rows of `16V` contiguous values (the last vector's lanes masked, for widths
//! that are not whole vectors). Users: [`ab`], the plain row-major product (the Winograd
//! conv's 36 point GEMMs, `kernels::conv::winograd`, and `kernels::gemm`'s in-place
//! products), and [`atb`], the product `Aᵀ B` of two
//! depth-major operands (per-example weight gradients: `batch_matmul(adj_a)` of patches
//! and output gradients), which needs no packing since each depth step reads one
//! contiguous row of each operand.
//!
//! A block may be finished in registers before it is stored ([`Finish`]: a conv's `+ bias`,
//! `+ residual`, relu), which saves the in-place GEMM's convs a pass over their output.
//!
//! Invariants: every output element is the sum over the depth in order from zero, one fused
//! multiply-add per step, so a result does not depend on how the caller blocks rows or
//! columns, nor on threads; a [`Finish`] applies the epilogue's arithmetic in its order
//! (`conv::im2col::Epilogue`: the same f32 additions, relu keeping `v > 0` and NaN), so a
//! finished block equals the stored block with the epilogue applied afterwards, bit for
//! bit; the functions here are `unsafe` `#[target_feature]` code that the caller reaches
//! only after checking AVX-512F, with in-bounds pointers as documented.

#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::{FULL, ab, ab_strided, atb, micro_dyn};

/// A raw pointer to an f32 buffer that parallel tasks write through, each only its own
/// disjoint elements (the tiles' rows of a Winograd group's transformed inputs `V`),
/// with nothing reading them until every task has finished: the callers' invariant.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut(pub(crate) *mut f32);
// SAFETY: see the type's doc: the tasks sharing it write disjoint elements.
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    /// The pointer (a method, so that closures capture the whole `SharedMut`).
    pub(crate) fn ptr(self) -> *mut f32 {
        self.0
    }
}

/// f32 lanes of one ZMM register.
pub(crate) const LANES: usize = 16;

/// What a micro-kernel applies to a finished block before storing it: `+ bias[column]`,
/// then `+ residual[row][column]`, then relu (kept where `v > 0` or NaN, else `0.0`), as
/// `conv::im2col::Epilogue` computes them. The pointers address the block's first row and
/// column (null: no such term); residual rows are `ldr` elements apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Finish {
    /// The bias of the block's first column, or null.
    pub bias: *const f32,
    /// The residual of the block's first row and column, or null.
    pub res: *const f32,
    /// Elements between residual rows.
    pub ldr: usize,
    /// Apply relu last.
    pub relu: bool,
}

// SAFETY: a `Finish` only reads through its pointers (the epilogue's bias and residual,
// which outlive the product whose parallel tasks share it).
unsafe impl Send for Finish {}
unsafe impl Sync for Finish {}

impl Finish {
    /// Nothing to apply: the block is stored as summed.
    pub(crate) const NONE: Finish = Finish { bias: std::ptr::null(), res: std::ptr::null(), ldr: 0, relu: false };

    /// Whether there is nothing to apply.
    pub(crate) fn is_none(&self) -> bool {
        self.bias.is_null() && self.res.is_null() && !self.relu
    }

    /// The finish of the block whose first element is `row` rows and `col` columns further
    /// (null pointers stay null).
    pub(crate) fn at(self, row: usize, col: usize) -> Finish {
        let shift = |p: *const f32, by: usize| if p.is_null() { p } else { p.wrapping_add(by) };
        Finish { bias: shift(self.bias, col), res: shift(self.res, row * self.ldr + col), ..self }
    }
}

/// The depth walk of a [`micro_dyn`] product: three nested counts (outermost first) and, per
/// level, the element stride of `A`'s and `B`'s pointers (a conv filter gradient walks
/// examples, output rows and output columns; a plain product walks one level).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Depth {
    /// Steps per level.
    pub n: [usize; 3],
    /// `A` stride per level.
    pub sa: [usize; 3],
    /// `B` stride per level.
    pub sb: [usize; 3],
}

impl Depth {
    /// `k` steps of strides `sa` and `sb`.
    pub(crate) fn flat(k: usize, sa: usize, sb: usize) -> Depth {
        Depth { n: [1, 1, k], sa: [0, 0, sa], sb: [0, 0, sb] }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Depth, Finish, LANES};

    /// The lane mask of a whole vector (the `last` argument of the micro-kernels).
    pub(crate) const FULL: u16 = u16::MAX;

    /// `c [m, n] = aᵀ b` for `a [k, m]` and `b [k, n]` row-major, `n` a multiple of 16.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `a`, `b` and `c` hold `k*m`, `k*n` and `m*n` elements.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn atb(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
        debug_assert!(n.is_multiple_of(LANES) && a.len() == k * m && b.len() == k * n && c.len() == m * n);
        let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        let depth = Depth::flat(k, m, n);
        for n0 in (0..n).step_by(4 * LANES) {
            let nv = ((n - n0) / LANES).min(4);
            for m0 in (0..m).step_by(6) {
                let r = (m - m0).min(6);
                // SAFETY: rows m0..m0+r of c and columns m0..m0+r of a, columns n0..n0+16nv
                // of b and c: inside the buffers.
                unsafe {
                    micro_dyn(
                        r,
                        nv,
                        ap.add(m0),
                        1,
                        bp.add(n0),
                        &depth,
                        cp.add(m0 * n + n0),
                        n,
                        FULL,
                        false,
                        Finish::NONE,
                    )
                };
            }
        }
    }

    /// `c [m, n] = a [m, k] · b [k, n]`, all row-major: per 64-column block of `b` (in
    /// L1/L2 while it is reused), every row block of `a` (read in place: no packing). A
    /// block narrower than 64 columns takes more rows per micro-kernel call ([`rows_for`]),
    /// so that every call keeps enough independent accumulators to hide the FMA latency.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `a`, `b`, `c` hold `[m, k]`, `[k, n]`, `[m, n]`.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn ab(m: usize, k: usize, n: usize, a: *const f32, b: *const f32, c: *mut f32) {
        // SAFETY: the caller's bounds, with row strides k, n, n.
        unsafe { ab_strided(m, k, n, a, b, n, c, n, Finish::NONE) }
    }

    /// [`ab`] with the row strides of `b` and `c` given (`ldb`, `ldc` ≥ `n`: the columns
    /// `n` of wider matrices, a parallel task's column range), for any width `n` (the last
    /// vector of each row masked where `n` is not a multiple of 16), every block finished
    /// by `fin` (addressing `c`'s first row and column) before it is stored.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `a` holds `[m, k]`, `b[d * ldb ..][..n]` and
    /// `c[r * ldc ..][..n]` are in bounds for every `d < k`, `r < m`, and so are `fin`'s
    /// terms for every row `r < m` and column `< n`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn ab_strided(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        b: *const f32,
        ldb: usize,
        c: *mut f32,
        ldc: usize,
        fin: Finish,
    ) {
        let depth = Depth::flat(k, 1, ldb);
        for n0 in (0..n).step_by(4 * LANES) {
            let nv = (n - n0).div_ceil(LANES).min(4);
            // the lanes of the block's last vector inside the `n` columns
            let last = match (n - n0).min(4 * LANES) % LANES {
                0 => FULL,
                t => (1u16 << t) - 1,
            };
            let (rows, b) = (rows_for(nv), b.wrapping_add(n0));
            let mut m0 = 0;
            while m0 < m {
                let r = (m - m0).min(rows);
                let (a, c, f) = (a.wrapping_add(m0 * k), c.wrapping_add(m0 * ldc + n0), fin.at(m0, n0));
                // SAFETY: rows m0..m0+r of a and c, columns n0..n0+16nv of b and c: inside
                // the buffers (the caller's bounds).
                unsafe {
                    match (r, nv) {
                        (16, 1) => micro::<16, 1>(a, k, b, &depth, c, ldc, last, false, f),
                        (12, 2) => micro::<12, 2>(a, k, b, &depth, c, ldc, last, false, f),
                        (8, 3) => micro::<8, 3>(a, k, b, &depth, c, ldc, last, false, f),
                        _ => {
                            // the last rows, in blocks of at most 6
                            for r0 in (0..r).step_by(6) {
                                let (a, c) = (a.wrapping_add(r0 * k), c.wrapping_add(r0 * ldc));
                                micro_dyn((r - r0).min(6), nv, a, k, b, &depth, c, ldc, last, false, f.at(r0, 0));
                            }
                        }
                    }
                }
                m0 += r;
            }
        }
    }

    /// Rows per micro-kernel call for a block of `nv` vectors: at most 24 accumulators (and
    /// at least 12 where there is room: 16 x 1, 12 x 2, 8 x 3, 6 x 4).
    pub(crate) fn rows_for(nv: usize) -> usize {
        match nv {
            1 => 16,
            2 => 12,
            3 => 8,
            _ => 6,
        }
    }

    /// [`micro`] for `r` (1..=6) rows and `nv` (1..=4) vectors (`load`: accumulate onto
    /// `out`; `fin`: applied before the store).
    ///
    /// # Safety
    /// As [`micro`].
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn micro_dyn(
        r: usize,
        nv: usize,
        a: *const f32,
        a_row: usize,
        b: *const f32,
        depth: &Depth,
        out: *mut f32,
        ldc: usize,
        last: u16,
        load: bool,
        fin: Finish,
    ) {
        macro_rules! arms {
            ($(($r:literal, $v:literal)),*) => {
                match (r, nv) {
                    $(($r, $v) => unsafe { micro::<$r, $v>(a, a_row, b, depth, out, ldc, last, load, fin) },)*
                    _ => unreachable!("micro-kernel shape {r}x{nv}"),
                }
            };
        }
        arms!(
            (6, 4),
            (6, 3),
            (6, 2),
            (6, 1),
            (5, 4),
            (5, 3),
            (5, 2),
            (5, 1),
            (4, 4),
            (4, 3),
            (4, 2),
            (4, 1),
            (3, 4),
            (3, 3),
            (3, 2),
            (3, 1),
            (2, 4),
            (2, 3),
            (2, 2),
            (2, 1),
            (1, 4),
            (1, 3),
            (1, 2),
            (1, 1)
        )
    }

    /// `out [R, 16V] = A [R, D] · B [D, 16V]` (`load`: `out += A · B`, the sums continuing
    /// from the values `out` holds, so a depth split into consecutive calls sums exactly as
    /// one call) over the depth `D` that `depth` walks, with
    /// `A[r][d] = a[r*a_row + depth.a(d)]`, `B[d] = b[depth.b(d) ..][..16V]`, `ldc` the row
    /// stride of `out`: the sum over `d` in walk order from zero, one fused multiply-add per
    /// step. Only the lanes of `last` ([`FULL`]: all) of the last vector of each `B` row
    /// are read and of each `out` row written. `fin` is applied to the finished sums before
    /// they are stored (after the loaded values were added: the finish of the whole sum).
    ///
    /// # Safety
    /// The CPU has AVX-512F; every `A[r][d]`, `B[d]` and `out[r*ldc ..][..16V]` (the last
    /// vector: its `last` lanes) for `r < R`
    /// and every `d` of the walk is in bounds, and so are `fin`'s terms of those rows and
    /// lanes.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn micro<const R: usize, const V: usize>(
        a: *const f32,
        a_row: usize,
        b: *const f32,
        depth: &Depth,
        out: *mut f32,
        ldc: usize,
        last: u16,
        load: bool,
        fin: Finish,
    ) {
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        if load {
            for (r, row) in acc.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    // SAFETY: the caller's bounds (the last vector: the lanes of `last`).
                    *v = unsafe {
                        if j + 1 == V {
                            _mm512_maskz_loadu_ps(last, out.add(r * ldc + j * LANES))
                        } else {
                            _mm512_loadu_ps(out.add(r * ldc + j * LANES))
                        }
                    };
                }
            }
        }
        let (n, sa, sb) = (depth.n, depth.sa, depth.sb);
        for i0 in 0..n[0] {
            for i1 in 0..n[1] {
                // SAFETY (all pointer arithmetic and loads below): the caller's bounds.
                let (mut ap, mut bp) = unsafe { (a.add(i0 * sa[0] + i1 * sa[1]), b.add(i0 * sb[0] + i1 * sb[1])) };
                for _ in 0..n[2] {
                    let bv: [__m512; V] = std::array::from_fn(|j| unsafe {
                        if j + 1 == V {
                            _mm512_maskz_loadu_ps(last, bp.add(j * LANES))
                        } else {
                            _mm512_loadu_ps(bp.add(j * LANES))
                        }
                    });
                    for (r, row) in acc.iter_mut().enumerate() {
                        let av = _mm512_set1_ps(unsafe { *ap.add(r * a_row) });
                        for (acc, &bj) in row.iter_mut().zip(&bv) {
                            *acc = _mm512_fmadd_ps(av, bj, *acc);
                        }
                    }
                    // wrapping: after the last step the pointers may pass the buffers' ends
                    // (never read); `add` would require them in bounds
                    (ap, bp) = (ap.wrapping_add(sa[2]), bp.wrapping_add(sb[2]));
                }
            }
        }
        if !fin.is_none() {
            // SAFETY: the caller's bounds for `fin`'s terms.
            unsafe { finish(&mut acc, &fin, last) };
        }
        for (r, row) in acc.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                // SAFETY: the caller's bounds (the last vector: the lanes of `last`).
                unsafe {
                    if j + 1 == V {
                        _mm512_mask_storeu_ps(out.add(r * ldc + j * LANES), last, v)
                    } else {
                        _mm512_storeu_ps(out.add(r * ldc + j * LANES), v)
                    }
                };
            }
        }
    }

    /// `fin` applied to the block `acc` (rows of `V` vectors, the last one's `last` lanes
    /// meaningful): `+ bias`, `+ residual`, relu, in the epilogue's order.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `fin`'s terms are readable for the block's rows and lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn finish<const R: usize, const V: usize>(acc: &mut [[__m512; V]; R], fin: &Finish, last: u16) {
        // the lanes read of vector j of a row (the last one masked)
        let mask = |j: usize| if j + 1 == V { last } else { FULL };
        for (r, row) in acc.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                // SAFETY (loads): the caller's bounds, masked to the lanes of the block.
                if !fin.bias.is_null() {
                    *v = _mm512_add_ps(*v, unsafe { _mm512_maskz_loadu_ps(mask(j), fin.bias.add(j * LANES)) });
                }
                if !fin.res.is_null() {
                    let res = unsafe { _mm512_maskz_loadu_ps(mask(j), fin.res.add(r * fin.ldr + j * LANES)) };
                    *v = _mm512_add_ps(*v, res);
                }
                if fin.relu {
                    // kept where v > 0 or v is NaN (not less-or-equal, unordered); 0.0 elsewhere
                    *v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_NLE_UQ>(*v, _mm512_setzero_ps()), *v);
                }
            }
        }
    }
}
