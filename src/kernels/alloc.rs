//! Checked, fallible allocation of tensor buffers, the per-run memory budget, and the
//! tuning of the system allocator for large-tensor workloads.
//!
//! # Sizes and budgets
//!
//! Every size a buffer is allocated from goes through [`checked_len`] (element count of a
//! shape, `Err` instead of an overflow) and `try_vec` / `try_filled` (byte count checked,
//! the budget consulted, `Vec::try_reserve_exact`: `Err(Error::OutOfMemory)` instead of an
//! abort). The budget is the [`ExecOptions::max_tensor_bytes`](crate::ExecOptions) of the
//! session whose plan runs on this thread, installed for the duration of the run by
//! `budget_scope` (a thread-local: kernels without an execution context see it too;
//! allocations made on other threads, e.g. inside a parallel loop, are not budgeted, so
//! kernels allocate their outputs before going parallel). The executor checks each step's
//! outputs against it before the kernel runs where their size is known from the static
//! types, and every output after it runs (see `exec`).
//!
//! Invariants: no size computation here overflows (each is checked); an `Err` is returned
//! before anything of the refused size is allocated; outside a run there is no budget.
//!
//! # Allocator tuning
//!
//! Kernels allocate output buffers of hundreds of KiB to tens of MiB at every step of a
//! loop. glibc's `malloc` serves such blocks with `mmap` (above a threshold that starts at
//! 128 KiB) or returns the freed top of its heap to the OS (above a trim threshold), so the
//! next step's buffer is fresh memory and every page of it faults on first touch: measured
//! here, a W3 LSTM step at 512 rows took 102k page faults per 6 runs instead of 5k, and W7's
//! auto-batched leaf steps ran ~1.5x slower. TensorFlow, PyTorch and XLA avoid this with
//! their own caching allocators; a Rust library cannot choose the process allocator, so
//! [`tune_system_allocator`] is an explicit, opt-in call (the examples, benches and
//! `bench_report` make it at start-up, for every mode alike, loop baselines included).
//!
//! Invariants: the call only changes when freed memory goes back to the OS (it keeps up to
//! [`TRIM_THRESHOLD`] bytes of freed heap and serves blocks below [`MMAP_THRESHOLD`] from
//! the heap); it never changes results. It is a no-op (returning `Ok(false)`) on platforms
//! other than Linux with glibc.
//!
//! # The caching allocator
//!
//! A binary that installs [`TensorAllocator`] as its `#[global_allocator]` (the examples,
//! benches and the test binary do) gets pfor's own cache for blocks of 1 KiB to 1 GiB: size
//! classes shared by all threads, 64-byte aligned, independent of glibc's arenas once warm
//! (see [`BufferCache`]). The budget and the fallible `try_*` contract above are
//! unchanged (the cache returns null when the system refuses, after trimming itself and
//! retrying). `tune_system_allocator` still governs what the cache forwards to glibc (blocks
//! outside its classes, the misses, everything under `PFOR_NO_BUFFER_CACHE` or without it).

mod cache;

pub use cache::{
    BUFFER_ALIGN, BufferCache, CacheStats, DEFAULT_LIMIT, MAP_BLOCK, MAX_BLOCK, MIN_BLOCK, TensorAllocator,
};

use std::cell::Cell;

use crate::error::{Error, Result};

thread_local! {
    /// The budget of the run executing on this thread (see [`budget_scope`]).
    static BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Restores the previous budget of this thread when dropped.
#[must_use]
pub(crate) struct BudgetScope(Option<usize>);

/// Install `limit` as this thread's tensor budget until the returned guard is dropped.
pub(crate) fn budget_scope(limit: Option<usize>) -> BudgetScope {
    BudgetScope(BUDGET.with(|b| b.replace(limit)))
}

impl Drop for BudgetScope {
    fn drop(&mut self) {
        BUDGET.with(|b| b.set(self.0));
    }
}

/// The tensor budget in force on this thread (`None`: unlimited).
pub(crate) fn budget() -> Option<usize> {
    BUDGET.with(Cell::get)
}

/// Element count of a concrete shape; an `Err` naming `op` unless the product of its
/// nonzero dims fits in `isize` (ndarray's limit, zero dims or not, and `Vec`'s).
///
/// ```
/// use pfor::kernels::alloc::checked_len;
///
/// assert_eq!(checked_len("my_op", &[2, 3, 4]).unwrap(), 24);
/// assert_eq!(checked_len("my_op", &[0, 5]).unwrap(), 0);
/// assert!(checked_len("my_op", &[usize::MAX, 2]).unwrap_err().to_string().contains("my_op"));
/// ```
pub fn checked_len(op: &str, shape: &[usize]) -> Result<usize> {
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| isize::try_from(n).is_ok())
        .ok_or_else(|| Error::shape(op, format!("shape {shape:?} has too many elements (the count overflows)")))?;
    Ok(if shape.contains(&0) { 0 } else { nonzero })
}

/// Bytes of `n` elements of `elem_size` bytes each; an `Err` naming `op` on overflow.
///
/// ```
/// use pfor::kernels::alloc::checked_bytes;
///
/// assert_eq!(checked_bytes("my_op", 1024, 4).unwrap(), 4096);
/// assert!(checked_bytes("my_op", usize::MAX / 2, 8).is_err());
/// ```
pub fn checked_bytes(op: &str, n: usize, elem_size: usize) -> Result<usize> {
    n.checked_mul(elem_size)
        .filter(|&b| isize::try_from(b).is_ok())
        .ok_or_else(|| Error::shape(op, format!("{n} elements of {elem_size} bytes overflow the address space")))
}

/// `Err(OutOfMemory)` if a tensor of `bytes` exceeds this thread's budget.
pub(crate) fn admit(op: &str, bytes: usize) -> Result<()> {
    match budget() {
        Some(limit) if bytes > limit => Err(Error::OutOfMemory { op: op.into(), bytes, limit: Some(limit) }),
        _ => Ok(()),
    }
}

/// An empty vector with room for exactly `n` elements: the size checked, the budget
/// consulted and the memory reserved fallibly (`Err(OutOfMemory)`, never an abort).
pub(crate) fn try_vec<T>(op: &str, n: usize) -> Result<Vec<T>> {
    let bytes = checked_bytes(op, n, std::mem::size_of::<T>())?;
    admit(op, bytes)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory { op: op.into(), bytes, limit: None })?;
    Ok(v)
}

/// Element types whose all-zero bit pattern is their zero value (`0.0`, `0`, `false`).
pub(crate) trait Zeroable: Copy + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! zeroable {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Zeroable for $t {}
    )*};
}
zeroable!(f32, f64, i64, bool);

/// `n` zeros, allocated as by [`try_vec`] but zeroed by the allocator (`calloc`: fresh pages
/// are not written twice), like `vec![0; n]`.
pub(crate) fn try_zeroed<T: Zeroable>(op: &str, n: usize) -> Result<Vec<T>> {
    let bytes = checked_bytes(op, n, std::mem::size_of::<T>())?;
    admit(op, bytes)?;
    if bytes == 0 {
        return Ok(Vec::new());
    }
    let oom = || Error::OutOfMemory { op: op.into(), bytes, limit: None };
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| oom())?;
    // SAFETY: `layout` has a nonzero size (checked above).
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return Err(oom());
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of `[T; n]` (which
    // `Vec` frees it with), it is zeroed, and all-zero bits are a valid `T` for every
    // `Zeroable` type (sealed: f32, f64, i64, bool); length = capacity = `n`.
    Ok(unsafe { Vec::from_raw_parts(p, n, n) })
}

/// `n` copies of `v`, allocated as by [`try_vec`].
pub(crate) fn try_filled<T: Clone>(op: &str, n: usize, v: T) -> Result<Vec<T>> {
    let mut out = try_vec(op, n)?;
    out.resize(n, v);
    Ok(out)
}

/// Outputs at least this large that are larger than every input of their step (so not a
/// view or an in-place result) are reserved once before the kernel runs: see `probe`.
pub const PROBE_BYTES: usize = 256 << 20;

/// Reserve and release `bytes` (an `Err(OutOfMemory)` if the allocator refuses): run before
/// a kernel that will allocate that much infallibly, so that a request the system cannot
/// serve (an address-space limit, an allocation larger than memory and swap) is an error
/// instead of an abort. Pages are never touched, so the cost is one `mmap`/`munmap` pair.
pub(crate) fn probe(op: &str, bytes: usize) -> Result<()> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(bytes).map_err(|_| Error::OutOfMemory { op: op.into(), bytes, limit: None })
}

/// Blocks below this size come from the heap, not from a fresh `mmap` (glibc's maximum).
pub const MMAP_THRESHOLD: usize = 32 << 20;
/// Freed memory kept in the heap before glibc trims it back to the OS.
pub const TRIM_THRESHOLD: usize = 512 << 20;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::os::raw::c_int;

    // Parameter numbers from glibc's <malloc.h>.
    pub const M_TRIM_THRESHOLD: c_int = -1;
    pub const M_MMAP_THRESHOLD: c_int = -3;

    unsafe extern "C" {
        pub fn mallopt(param: c_int, value: c_int) -> c_int;
    }

    /// `mallopt(param, value)`; true on success.
    pub fn set(param: c_int, value: usize) -> bool {
        let Ok(v) = c_int::try_from(value) else { return false };
        // SAFETY: `mallopt` only updates allocator parameters; it takes plain integers and
        // is safe to call at any time from any thread (glibc takes its arena locks).
        unsafe { mallopt(param, v) == 1 }
    }
}

/// Keep freed tensor buffers in the process heap instead of returning them to the OS after
/// every kernel (see the module docs). Returns `Ok(true)` when applied, `Ok(false)` on
/// platforms without glibc; an `Err` if glibc rejected a parameter.
///
/// ```
/// # fn main() -> pfor::Result<()> {
/// // once, at start-up, before the first large tensor
/// let applied = pfor::tune_system_allocator()?; // false where the allocator is not glibc's
/// # let _ = applied;
/// # Ok(())
/// # }
/// ```
pub fn tune_system_allocator() -> Result<bool> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if !glibc::set(glibc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) {
            return Err(Error::InvalidArgument(format!("mallopt(M_MMAP_THRESHOLD, {MMAP_THRESHOLD}) was rejected")));
        }
        if !glibc::set(glibc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) {
            return Err(Error::InvalidArgument(format!("mallopt(M_TRIM_THRESHOLD, {TRIM_THRESHOLD}) was rejected")));
        }
        Ok(true)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        Ok(false)
    }
}
