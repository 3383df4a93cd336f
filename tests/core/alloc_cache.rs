//! Core tests: pfor's caching allocator (`kernels::alloc::BufferCache`, installed in this
//! test binary as `TensorAllocator` under the counting allocator of `common::alloc_count`):
//! reuse by size class, 64-byte alignment, the limit, trimming, concurrent use, a refused
//! allocation as an `Err` (after the cache trimmed itself), and results bit-identical when
//! runs reuse blocks that earlier owners filled with garbage.

use std::alloc::{GlobalAlloc, Layout};
use std::process::Command;

use pfor::TensorAllocator;
use pfor::kernels::alloc::{BUFFER_ALIGN, BufferCache, MAP_BLOCK, MIN_BLOCK};
use pfor::prelude::*;

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// Allocate through `c`, check the pointer, fill the block with `byte`.
fn take(c: &BufferCache, l: Layout, byte: u8) -> *mut u8 {
    // SAFETY: `l` has a nonzero size.
    let p = unsafe { c.alloc(l) };
    assert!(!p.is_null(), "{l:?} refused");
    // SAFETY: `p` is a fresh block of `l.size()` bytes.
    unsafe { p.write_bytes(byte, l.size()) };
    p
}

fn give(c: &BufferCache, p: *mut u8, l: Layout) {
    // SAFETY: `p` came from `c.alloc(l)`.
    unsafe { c.dealloc(p, l) };
}

#[test]
fn a_freed_block_is_reused_by_any_request_of_its_size_class() {
    let c = BufferCache::new();
    // 5000 and 4500 bytes are both in the 5 KiB class (4 classes per power of two)
    let (a, b) = (layout(5000, 4), layout(4500, 8));
    let p = take(&c, a, 1);
    give(&c, p, a);
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.cached_blocks, s.cached_bytes), (0, 1, 1, 5 << 10));
    let q = take(&c, b, 2);
    assert_eq!(q, p, "the cached block is handed out again");
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.cached_blocks, s.cached_bytes), (1, 1, 0, 0));
    // another class misses
    let r = take(&c, layout(6000, 4), 3);
    assert_ne!(r, q);
    assert_eq!(c.stats().misses, 2);
    give(&c, q, b);
    give(&c, r, layout(6000, 4));
    assert_eq!(c.trim(), (5 << 10) + (6 << 10));
}

#[test]
fn cached_blocks_are_64_byte_aligned_and_others_pass_through() {
    let c = BufferCache::new();
    let sizes = [MIN_BLOCK, 1500, 4096, 100_000, MAP_BLOCK - 1, MAP_BLOCK + 1, 3 << 20];
    for &size in &sizes {
        for align in [1, 4, 8, 16, 64] {
            let l = layout(size, align);
            let p = take(&c, l, 7);
            assert_eq!(p as usize % BUFFER_ALIGN, 0, "{l:?}");
            give(&c, p, l);
        }
    }
    let s = c.stats();
    assert_eq!(s.hits + s.misses, (sizes.len() * 5) as u64);
    assert_eq!(s.misses, sizes.len() as u64, "one miss per class, then hits");
    // below MIN_BLOCK, or aligned beyond a cache line: the system allocator's, uncounted
    for l in [layout(MIN_BLOCK - 1, 8), layout(64, 64), layout(8192, 4096)] {
        let p = take(&c, l, 9);
        assert_eq!(p as usize % l.align(), 0);
        give(&c, p, l);
    }
    assert_eq!(c.stats().hits + c.stats().misses, (sizes.len() * 5) as u64);
    c.trim();
    assert_eq!((c.stats().cached_bytes, c.stats().cached_blocks), (0, 0));
}

#[test]
fn alloc_zeroed_zeroes_a_reused_block_and_realloc_keeps_the_contents() {
    let c = BufferCache::new();
    for size in [2000, 400_000] {
        let l = layout(size, 4);
        let p = take(&c, l, 0xAB);
        give(&c, p, l);
        // SAFETY: nonzero size.
        let q = unsafe { c.alloc_zeroed(l) };
        assert_eq!(q, p, "reused");
        // SAFETY: `q` holds `size` initialized bytes.
        assert!(unsafe { std::slice::from_raw_parts(q, size) }.iter().all(|&b| b == 0));
        // grow within the class (in place), then to another class (moved, contents kept)
        // SAFETY: `q` came from `c` with `l`; the new sizes are nonzero.
        let r = unsafe { c.realloc(q, l, size + 16) };
        assert_eq!(r, q, "same class: in place");
        // SAFETY: as above.
        unsafe { r.write_bytes(5, size + 16) };
        let big = layout(size + 16, 4);
        // SAFETY: `r` came from `c` with `big`.
        let m = unsafe { c.realloc(r, big, 4 * size) };
        assert!(!m.is_null() && (m as usize).is_multiple_of(BUFFER_ALIGN));
        // SAFETY: the first `size + 16` bytes were copied.
        assert!(unsafe { std::slice::from_raw_parts(m, size + 16) }.iter().all(|&b| b == 5));
        give(&c, m, layout(4 * size, 4));
    }
    c.trim();
}

#[test]
fn the_limit_bounds_the_cached_bytes_and_trim_releases_them() {
    let c = BufferCache::with_limit(8 << 10);
    let l = layout(4 << 10, 4);
    let ps: Vec<_> = (0..3).map(|i| take(&c, l, i)).collect();
    for &p in &ps {
        give(&c, p, l);
    }
    let s = c.stats();
    assert_eq!((s.cached_bytes, s.cached_blocks, s.released, s.limit), (8 << 10, 2, 1, 8 << 10));
    c.set_limit(4 << 10);
    assert_eq!((c.stats().cached_bytes, c.stats().released), (4 << 10, 2));
    assert_eq!(c.trim(), 4 << 10);
    assert_eq!((c.stats().cached_bytes, c.stats().cached_blocks, c.stats().released), (0, 0, 3));
    // a limit of zero keeps nothing
    c.set_limit(0);
    let p = take(&c, l, 1);
    give(&c, p, l);
    assert_eq!(c.stats().cached_blocks, 0);
}

#[test]
fn concurrent_threads_never_share_a_block() {
    let c = BufferCache::with_limit(64 << 20);
    let sizes = [1 << 10, 3000, 70_000, MAP_BLOCK, 1 << 20];
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let c = &c;
            s.spawn(move || {
                for i in 0..400 {
                    let ls: Vec<_> = sizes.iter().map(|&n| layout(n + i % 7, 4)).collect();
                    let ps: Vec<_> = ls.iter().map(|&l| take(c, l, t)).collect();
                    for (&p, &l) in ps.iter().zip(&ls) {
                        // SAFETY: `p` holds `l.size()` bytes written by this thread.
                        let block = unsafe { std::slice::from_raw_parts(p, l.size()) };
                        assert!(block.iter().all(|&b| b == t), "a block was handed to two owners");
                        give(c, p, l);
                    }
                }
            });
        }
    });
    let s = c.stats();
    assert_eq!(s.hits + s.misses, 4 * 400 * sizes.len() as u64);
    assert!(s.hits > s.misses, "{s:?}");
    assert!(s.cached_bytes <= s.limit);
    c.trim();
    assert_eq!((c.stats().cached_bytes, c.stats().cached_blocks), (0, 0));
}

#[test]
fn this_binary_runs_on_the_cache_and_tensor_buffers_are_aligned() {
    let t = Tensor::zeros(DType::F32, &[1000]).unwrap();
    assert!(TensorAllocator::is_caching());
    let u = Tensor::randn(&[3, 333], 1).unwrap();
    let v = u.cast(DType::F64); // allocated by ndarray
    for (name, p) in [
        ("zeros", t.array::<f32>().unwrap().as_ptr() as usize),
        ("randn", u.array::<f32>().unwrap().as_ptr() as usize),
        ("cast", v.array::<f64>().unwrap().as_ptr() as usize),
    ] {
        assert_eq!(p % BUFFER_ALIGN, 0, "{name}");
    }
    assert!(TensorAllocator::stats().misses > 0);
}

fn bits(ts: &[Tensor]) -> Vec<Vec<u64>> {
    ts.iter().map(|t| t.to_f64_vec().iter().map(|v| v.to_bits()).collect()).collect()
}

/// Fill blocks of many size classes with NaN bytes and free them into the process cache.
fn poison_the_cache() {
    let mut size = MIN_BLOCK;
    while size <= 1 << 20 {
        for _ in 0..2 {
            drop(std::hint::black_box(vec![0xFFu8; size]));
        }
        size = size * 9 / 8 + 8;
    }
}

#[test]
fn results_are_bit_identical_when_runs_reuse_poisoned_blocks() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, Shape::fixed(&[64, 384]));
    let w = g.constant(Tensor::randn(&[384, 1024], 3).unwrap());
    let h = g.matmul(x, w).unwrap();
    let h = g.tanh(h).unwrap();
    let e = g.exp(h).unwrap();
    let y = g.mul(h, e).unwrap();
    let s = g.reduce_sum(y, Some(&[1]), false).unwrap();
    let feed = [(x, Tensor::randn(&[64, 384], 4).unwrap())];
    let want = bits(&run_once(&g, &[y, s], &feed).unwrap());
    for on_workers in [false, true] {
        let mut sess =
            Session::with_options(&g, &[y, s], ExecOptions { on_workers, ..ExecOptions::default() }).unwrap();
        for _ in 0..3 {
            poison_the_cache();
            assert_eq!(bits(&sess.run(&feed).unwrap()), want, "on workers: {on_workers}");
        }
    }
}

const CASE: &str = "PFOR_ALLOC_CASE";

/// Runs only when re-executed by `a_refused_allocation_is_an_error_after_the_cache_is_trimmed`:
/// under an address-space limit, a request the system refuses while the cache holds blocks
/// is served after the cache returns them; one refused even then is `Err(OutOfMemory)`.
#[cfg(target_os = "linux")]
#[test]
fn oom_case_in_child_process() {
    if std::env::var_os(CASE).is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    let limit = (vm_kib << 10) + (900 << 20);
    unsafe extern "C" {
        fn setrlimit(resource: std::ffi::c_int, rlim: *const [u64; 2]) -> std::ffi::c_int;
    }
    const RLIMIT_AS: std::ffi::c_int = 9;
    // SAFETY: a valid resource number and a pointer to {soft, hard} limits.
    assert_eq!(unsafe { setrlimit(RLIMIT_AS, &[limit as u64, limit as u64]) }, 0);
    // 3 x 256 MiB fit; freed, they stay in the cache
    let held: Vec<_> = (0..3).map(|_| Tensor::zeros(DType::F32, &[64 << 20]).unwrap()).collect();
    drop(held);
    assert!(TensorAllocator::stats().cached_bytes >= 768 << 20);
    // 512 MiB more does not fit beside them: the cache gives them back and the retry succeeds
    let big = Tensor::zeros(DType::F32, &[128 << 20]).expect("served after trimming the cache");
    assert!(TensorAllocator::stats().cached_bytes < 1 << 20, "the cache was trimmed");
    // a second 512 MiB does not fit at all: an error, not an abort
    let e = Tensor::zeros(DType::F32, &[128 << 20]).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { bytes, .. } if bytes == 512 << 20), "{e}");
    drop(big);
    println!("case oom: ok");
}

#[cfg(target_os = "linux")]
#[test]
fn a_refused_allocation_is_an_error_after_the_cache_is_trimmed() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "core::alloc_cache::oom_case_in_child_process", "--nocapture", "--test-threads=1"])
        .env(CASE, "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child died ({}):\n{text}", out.status);
    assert!(text.contains("case oom: ok"), "the case did not run:\n{text}");
}
