//! A caching, 64-byte-aligned allocator for tensor-sized blocks: [`BufferCache`], and the
//! process-wide instance a binary installs with `#[global_allocator]`, [`TensorAllocator`].
//!
//! # Why
//!
//! Kernels allocate and free buffers of KiB to hundreds of MiB at every step. Through glibc,
//! where a buffer lands depends on which arena the allocating thread drew (a pool thread's
//! arena unmaps its heap as soon as it is free, so in some processes every step
//! page-faults its buffers in again) and its data starts 16 bytes into a chunk (so a 64-byte
//! SIMD load may straddle two cache lines). Tensor storage is `ndarray`'s `ArcArray`, a
//! `Vec` freed through the global allocator wherever its last reference drops, so the one
//! place that sees every buffer's allocation *and* release is the global allocator: a
//! binary opts in with
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;
//! ```
//!
//! # How
//!
//! A request of [`MIN_BLOCK`]..=[`MAX_BLOCK`] bytes with an alignment of at most
//! [`BUFFER_ALIGN`] is a *cached* request: its size is rounded up to its size class (four
//! classes per power of two, so at most 25 % is added) and it is served [`BUFFER_ALIGN`]
//! aligned, from that class's free list when a block is there (a hit) or else new (a miss:
//! classes of [`MAP_BLOCK`] and more are mapped from the OS directly on Linux (x86-64, AArch64), page-aligned
//! and zero, outside any glibc arena; smaller ones come from the system allocator).
//! Freeing a cached block pushes it on its class's list (LIFO: the most recently used block,
//! warm in cache, is handed out first) unless the cache would then hold more than its limit
//! ([`DEFAULT_LIMIT`], [`BufferCache::set_limit`]), in which case it goes back to the system. Every other request goes to the system allocator unchanged. The
//! lists are shared by all threads (a mutex per class): a block freed by one worker is
//! reused by any other.
//!
//! Invariants:
//! - whether a request is cached depends on its layout alone (size and alignment), never on
//!   state, so `dealloc` and `realloc` always know how a block was obtained and return it to
//!   the system with the layout it was allocated with;
//! - a cached block is handed out to one owner at a time (it is on one list, or owned);
//! - the bytes held on the lists never exceed the limit; [`BufferCache::trim`] returns them
//!   all to the system;
//! - a request that cannot be served returns null (after trimming the cache and retrying
//!   once), which `try_reserve` and the crate's `try_vec` report as `Err(OutOfMemory)`;
//! - contents are never interpreted: a block's data is what its last owner left
//!   (`alloc_zeroed` zeroes a reused block), so results do not depend on the cache.
//!
//! [`TensorAllocator`] decides once per process, at its first call, whether to cache:
//! `PFOR_NO_BUFFER_CACHE` in the environment (whatever its value, like every `PFOR_NO_*`
//! switch) makes it forward every call to the system allocator unchanged (an A/B switch for measurements; the one environment read
//! here, made before any block exists so every block follows one rule).

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Requests smaller than this go to the system allocator (its small-block caches are fast).
pub const MIN_BLOCK: usize = 1 << 10;
/// Requests larger than this go to the system allocator.
pub const MAX_BLOCK: usize = 1 << 30;
/// The alignment of every cached block: a cache line (and an AVX-512 register).
pub const BUFFER_ALIGN: usize = 64;
/// Blocks of classes at least this large are mapped from the OS directly (on Linux), so
/// their placement does not depend on glibc's arenas and fresh ones come zeroed for free.
pub const MAP_BLOCK: usize = 256 << 10;
/// The default limit on the bytes a cache holds on its free lists.
pub const DEFAULT_LIMIT: usize = 1 << 30;

const MIN_LOG: u32 = MIN_BLOCK.trailing_zeros();
const MAX_LOG: u32 = MAX_BLOCK.trailing_zeros();
/// Four classes per power of two from `MIN_BLOCK` up to `MAX_BLOCK` itself.
const CLASSES: usize = 4 * (MAX_LOG - MIN_LOG) as usize + 1;

/// The class index and the rounded size of a cached request, `None` for one the system
/// allocator serves (too small, too large, or aligned beyond [`BUFFER_ALIGN`]).
fn class_of(layout: Layout) -> Option<(usize, usize)> {
    let size = layout.size();
    if layout.align() > BUFFER_ALIGN || !(MIN_BLOCK..=MAX_BLOCK).contains(&size) {
        return None;
    }
    let k = usize::BITS - 1 - size.leading_zeros(); // 2^k <= size < 2^(k+1)
    let step = 1usize << (k - 2);
    let j = (size - (1 << k)).div_ceil(step); // 0..=4
    Some(((k - MIN_LOG) as usize * 4 + j, (1 << k) + j * step))
}

/// The layout a cached block of `rounded` bytes is allocated from the system with.
fn block_layout(rounded: usize) -> Layout {
    // `rounded` <= MAX_BLOCK and BUFFER_ALIGN is a power of two: always a valid layout.
    Layout::from_size_align(rounded, BUFFER_ALIGN).expect("a size class is a valid layout")
}

/// A new block of a class of `rounded` bytes (zeroed if asked), null if refused: mapped
/// from the OS at [`MAP_BLOCK`] and above on Linux (page-aligned, zero, no arena), else
/// from the system allocator with [`block_layout`].
fn new_block(rounded: usize, zeroed: bool) -> *mut u8 {
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    if rounded >= MAP_BLOCK {
        return os::map(rounded);
    }
    let layout = block_layout(rounded);
    // SAFETY: `layout` has a nonzero size (>= MIN_BLOCK).
    unsafe { if zeroed { System.alloc_zeroed(layout) } else { System.alloc(layout) } }
}

/// Return a block of a class of `rounded` bytes obtained from [`new_block`] to the system.
///
/// # Safety
/// `p` is such a block, owned by the caller and not used again.
unsafe fn release_block(p: *mut u8, rounded: usize) {
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    if rounded >= MAP_BLOCK {
        // SAFETY: the caller's contract: `p` was mapped by `os::map(rounded)`.
        return unsafe { os::unmap(p, rounded) };
    }
    // SAFETY: the caller's contract: `p` came from the system allocator with this layout.
    unsafe { System.dealloc(p, block_layout(rounded)) }
}

#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod os {
    use std::ffi::{c_int, c_long, c_void};

    unsafe extern "C" {
        fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: c_long) -> *mut c_void;
        fn munmap(addr: *mut c_void, len: usize) -> c_int;
    }
    // From Linux's <sys/mman.h>.
    const PROT_READ: c_int = 1;
    const PROT_WRITE: c_int = 2;
    const MAP_PRIVATE: c_int = 2;
    const MAP_ANONYMOUS: c_int = 0x20;

    /// `len` bytes of fresh, zeroed, page-aligned memory; null if the OS refuses.
    pub fn map(len: usize) -> *mut u8 {
        // SAFETY: an anonymous private mapping at an address of the kernel's choice touches
        // no existing memory.
        let p = unsafe { mmap(std::ptr::null_mut(), len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) };
        if p.addr() == usize::MAX { std::ptr::null_mut() } else { p.cast() }
    }

    /// Unmap a mapping made by [`map`] with the same `len`.
    ///
    /// # Safety
    /// `p` came from `map(len)` and is not used again.
    pub unsafe fn unmap(p: *mut u8, len: usize) {
        // SAFETY: the caller's contract. A failure (only possible for invalid arguments)
        // leaves the mapping in place: a leak, never a fault.
        unsafe { munmap(p.cast(), len) };
    }
}

/// One class's free blocks, linked through their first word.
struct FreeList {
    head: Option<NonNull<u8>>,
}

// SAFETY: the blocks a list links are owned by the cache (no owner holds them), so the list
// may move between threads; it is only touched under its mutex.
unsafe impl Send for FreeList {}

/// Counters of a cache (see [`BufferCache::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Cached requests served from a free list.
    pub hits: u64,
    /// Cached requests served by the system allocator.
    pub misses: u64,
    /// Cached blocks returned to the system (over the limit, trimmed).
    pub released: u64,
    /// Bytes held on the free lists now.
    pub cached_bytes: usize,
    /// Blocks held on the free lists now.
    pub cached_blocks: usize,
    /// The limit on `cached_bytes`.
    pub limit: usize,
}

/// A size-class caching allocator over the system allocator (see the module docs); it
/// implements [`GlobalAlloc`], so an instance serves any `Layout` soundly.
pub struct BufferCache {
    lists: [Mutex<FreeList>; CLASSES],
    cached_bytes: AtomicUsize,
    cached_blocks: AtomicUsize,
    limit: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    released: AtomicU64,
}

impl Default for BufferCache {
    fn default() -> Self {
        Self::new()
    }
}

impl BufferCache {
    /// An empty cache holding at most [`DEFAULT_LIMIT`] bytes.
    pub const fn new() -> Self {
        Self::with_limit(DEFAULT_LIMIT)
    }

    /// An empty cache holding at most `limit` bytes on its free lists (0: it keeps none).
    pub const fn with_limit(limit: usize) -> Self {
        BufferCache {
            lists: [const { Mutex::new(FreeList { head: None }) }; CLASSES],
            cached_bytes: AtomicUsize::new(0),
            cached_blocks: AtomicUsize::new(0),
            limit: AtomicUsize::new(limit),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            released: AtomicU64::new(0),
        }
    }

    /// The counters (each read on its own: under concurrent use, a near-instant snapshot).
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            released: self.released.load(Relaxed),
            cached_bytes: self.cached_bytes.load(Relaxed),
            cached_blocks: self.cached_blocks.load(Relaxed),
            limit: self.limit.load(Relaxed),
        }
    }

    /// Hold at most `limit` bytes from now on, returning the excess (largest blocks first)
    /// to the system.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Relaxed);
        self.shrink_to(limit);
    }

    /// Return every cached block to the system; the number of bytes released.
    pub fn trim(&self) -> usize {
        let before = self.cached_bytes.load(Relaxed);
        self.shrink_to(0);
        before.saturating_sub(self.cached_bytes.load(Relaxed))
    }

    fn list(&self, class: usize) -> MutexGuard<'_, FreeList> {
        // Nothing panics while a list is locked, so a poisoned lock holds a consistent list.
        self.lists[class].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Pop a block of `class`, if any.
    fn pop(&self, class: usize) -> Option<NonNull<u8>> {
        let mut list = self.list(class);
        let block = list.head?;
        // SAFETY: a listed block is a live, BUFFER_ALIGN-aligned allocation of at least
        // MIN_BLOCK bytes whose first word holds the next block (written by `push`).
        list.head = NonNull::new(unsafe { block.as_ptr().cast::<*mut u8>().read() });
        Some(block)
    }

    /// Release cached blocks, largest classes first, until at most `target` bytes remain.
    fn shrink_to(&self, target: usize) {
        for class in (0..CLASSES).rev() {
            while self.cached_bytes.load(Relaxed) > target {
                let Some(block) = self.pop(class) else { break };
                let rounded = Self::class_size(class);
                self.cached_bytes.fetch_sub(rounded, Relaxed);
                self.cached_blocks.fetch_sub(1, Relaxed);
                self.released.fetch_add(1, Relaxed);
                // SAFETY: a listed block came from `new_block(rounded)` and is now unowned.
                unsafe { release_block(block.as_ptr(), rounded) };
            }
        }
    }

    /// The rounded size of `class`.
    fn class_size(class: usize) -> usize {
        let (k, j) = (MIN_LOG as usize + class / 4, class % 4);
        (1 << k) + j * (1 << (k - 2))
    }

    /// A block of `class` from its list, or `None`.
    fn reuse(&self, class: usize, rounded: usize) -> Option<*mut u8> {
        let block = self.pop(class)?;
        self.cached_bytes.fetch_sub(rounded, Relaxed);
        self.cached_blocks.fetch_sub(1, Relaxed);
        self.hits.fetch_add(1, Relaxed);
        Some(block.as_ptr())
    }

    /// A new block of `rounded` bytes from the system (zeroed if asked); on failure the
    /// cache is trimmed and the request retried once; null if that fails too.
    fn fresh(&self, rounded: usize, zeroed: bool) -> *mut u8 {
        self.misses.fetch_add(1, Relaxed);
        let p = new_block(rounded, zeroed);
        if !p.is_null() || self.trim() == 0 {
            return p;
        }
        new_block(rounded, zeroed)
    }
}

// SAFETY: a cached request gets a block of at least its size, aligned to BUFFER_ALIGN >= its
// alignment, owned by nobody else (popped from a list under its lock, or fresh); a block
// returns to a list only through `dealloc`, whose layout maps to the same class as the
// allocation's (the class depends on the layout alone), so it is released with the layout it
// was allocated with. Every other request is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for BufferCache {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some((class, rounded)) => self.reuse(class, rounded).unwrap_or_else(|| self.fresh(rounded, false)),
            // SAFETY: forwarded with the caller's guarantees.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some((class, rounded)) => match self.reuse(class, rounded) {
                Some(p) => {
                    // SAFETY: `p` is an owned block of at least `layout.size()` bytes.
                    unsafe { ptr::write_bytes(p, 0, layout.size()) };
                    p
                }
                None => self.fresh(rounded, true),
            },
            // SAFETY: forwarded with the caller's guarantees.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let Some((class, rounded)) = class_of(layout) else {
            // SAFETY: not a cached layout, so `p` came from the system with this layout.
            return unsafe { System.dealloc(p, layout) };
        };
        let limit = self.limit.load(Relaxed);
        if self.cached_bytes.fetch_add(rounded, Relaxed) + rounded > limit {
            self.cached_bytes.fetch_sub(rounded, Relaxed);
            self.released.fetch_add(1, Relaxed);
            // SAFETY: a cached layout's block came from `new_block(rounded)`.
            return unsafe { release_block(p, rounded) };
        }
        self.cached_blocks.fetch_add(1, Relaxed);
        let mut list = self.list(class);
        let next = list.head.map_or(ptr::null_mut(), NonNull::as_ptr);
        // SAFETY: `p` is a block of >= MIN_BLOCK bytes aligned to BUFFER_ALIGN, now unowned:
        // its first word may link the list.
        unsafe { p.cast::<*mut u8>().write(next) };
        list.head = NonNull::new(p);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY (of the caller's contract): `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new_layout)) {
            (Some((a, _)), Some((b, _))) if a == b => p,
            // SAFETY: neither layout is cached: the system allocator owns the block.
            (None, None) => unsafe { System.realloc(p, layout, new_size) },
            _ => {
                // SAFETY: `new_layout` is valid and nonzero (the caller's contract).
                let q = unsafe { self.alloc(new_layout) };
                if !q.is_null() {
                    // SAFETY: both blocks are live, distinct and at least this long.
                    unsafe {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                }
                q
            }
        }
    }
}

/// The process's [`BufferCache`], behind [`TensorAllocator`].
static GLOBAL: BufferCache = BufferCache::new();

/// Whether [`TensorAllocator`] caches: 0 not yet decided, 1 caching, 2 forwarding.
static MODE: AtomicU8 = AtomicU8::new(0);

/// True when `PFOR_NO_BUFFER_CACHE` is set (read without allocating).
fn disabled_by_env() -> bool {
    #[cfg(unix)]
    {
        unsafe extern "C" {
            fn getenv(name: *const std::ffi::c_char) -> *const std::ffi::c_char;
        }
        // SAFETY: a NUL-terminated name; only the nullness of the result is used.
        !unsafe { getenv(c"PFOR_NO_BUFFER_CACHE".as_ptr()) }.is_null()
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// Whether [`TensorAllocator`] caches, decided at its first call and fixed from then on.
fn caching() -> bool {
    match MODE.load(Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let mode = if disabled_by_env() { 2 } else { 1 };
            // The first decision wins, so that every block of the process follows one rule.
            match MODE.compare_exchange(0, mode, Relaxed, Relaxed) {
                Ok(_) => mode == 1,
                Err(decided) => decided == 1,
            }
        }
    }
}

/// The global allocator pfor's binaries install: a process-wide [`BufferCache`] (or the
/// system allocator unchanged under `PFOR_NO_BUFFER_CACHE`). Install it in a binary with
/// `#[global_allocator] static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;`.
///
/// ```
/// let stats = pfor::TensorAllocator::stats(); // all zero where it is not installed
/// assert!(stats.cached_bytes <= stats.limit);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct TensorAllocator;

impl TensorAllocator {
    /// True once the installed allocator has served a call with caching on (false where it
    /// is not the global allocator, or under `PFOR_NO_BUFFER_CACHE`).
    pub fn is_caching() -> bool {
        MODE.load(Relaxed) == 1
    }
    /// The process cache's counters.
    pub fn stats() -> CacheStats {
        GLOBAL.stats()
    }
    /// Return every cached block to the system (e.g. between workloads); bytes released.
    pub fn trim() -> usize {
        GLOBAL.trim()
    }
    /// Limit the bytes the process cache holds (default [`DEFAULT_LIMIT`]; 0 keeps none).
    pub fn set_limit(limit: usize) {
        GLOBAL.set_limit(limit);
    }
}

// SAFETY: forwards every call either to `GLOBAL` (a sound `GlobalAlloc`) or to the system
// allocator, by a choice made once per process before the first block is handed out.
unsafe impl GlobalAlloc for TensorAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { if caching() { GLOBAL.alloc(layout) } else { System.alloc(layout) } }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { if caching() { GLOBAL.alloc_zeroed(layout) } else { System.alloc_zeroed(layout) } }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { if caching() { GLOBAL.dealloc(p, layout) } else { System.dealloc(p, layout) } }
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { if caching() { GLOBAL.realloc(p, layout, new_size) } else { System.realloc(p, layout, new_size) } }
    }
}
