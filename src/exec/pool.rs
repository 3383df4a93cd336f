//! Recycling of large output buffers between kernels and between runs.
//!
//! Writing a large fresh buffer is dominated by page faults on this kind of machine (the
//! allocator returns blocks above 32 MiB to the OS on free, so every run faults them in
//! again at ~1 GB/s, 5–10× slower than rewriting memory already mapped). A session keeps:
//! - the tensors its last run returned: when the caller has dropped its copy by the next
//!   run (the array is uniquely owned again), the buffer is offered to the kernels;
//! - large intermediates released during a run (uniquely owned), offered to later kernels
//!   of the same run.
//!
//! Invariants: only uniquely owned, standard-layout buffers of at least [`MIN_BYTES`] enter
//! the pool, so handing one to a kernel can never alias a live tensor; a kernel that takes
//! a buffer overwrites every element (its content is stale); the pool holds at most
//! [`MAX_BUFFERS`] buffers (the smallest evicted), kept between runs (like a framework's
//! caching allocator: a session that runs again finds its large intermediates already
//! mapped); a buffer that stays in the pool through a whole run without being taken is
//! dropped at the end of that run ([`BufferPool::start_run`] / [`BufferPool::end_run`]), so
//! a buffer no kernel can use (e.g. an output of a shape no kernel writes) is never kept
//! for more than one run — without this, each run's unused output joined the pool and a
//! session held up to `MAX_BUFFERS` copies of it (W4's loop: 8 × 1.6 GB). The memory a
//! session holds between runs is thus bounded by its last outputs plus `MAX_BUFFERS` of
//! the intermediates of its last run; `ExecOptions::recycle_buffers = false` turns all of
//! this off.

use crate::tensor::{DType, Tensor};

/// Smallest buffer worth recycling (smaller ones are reused by the allocator anyway).
pub const MIN_BYTES: usize = 4 << 20;
/// Most buffers the pool holds at once.
pub const MAX_BUFFERS: usize = 8;

/// A small set of recyclable buffers.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    bufs: Vec<Pooled>,
}

/// A pooled buffer; `idle`: in the pool since before the current run started.
#[derive(Debug)]
struct Pooled {
    t: Tensor,
    idle: bool,
}

fn recyclable(t: &Tensor) -> bool {
    crate::dispatch!(t, a => a.is_unique() && a.is_standard_layout()) && t.nbytes() >= MIN_BYTES
}

impl BufferPool {
    /// Offer a tensor that is no longer needed (kept only if recyclable).
    pub fn donate(&mut self, t: Tensor) {
        if recyclable(&t) {
            self.bufs.push(Pooled { t, idle: false });
            if self.bufs.len() > MAX_BUFFERS {
                // evict the smallest: page faults cost in proportion to size
                if let Some((i, _)) = self.bufs.iter().enumerate().min_by_key(|(_, b)| b.t.nbytes()) {
                    self.bufs.swap_remove(i);
                }
            }
        }
    }

    /// A pooled tensor of `dtype` with exactly `len` elements (stale content), if one is
    /// pooled (its buffer is taken with `<dyn EvalCtx>::recycled`).
    pub fn take(&mut self, dtype: DType, len: usize) -> Option<Tensor> {
        let pos = self.bufs.iter().position(|b| b.t.dtype() == dtype && b.t.len() == len)?;
        Some(self.bufs.swap_remove(pos).t)
    }

    /// A run starts: every buffer pooled so far (the last run's outputs included) must be
    /// taken during it to stay.
    pub fn start_run(&mut self) {
        for b in &mut self.bufs {
            b.idle = true;
        }
    }

    /// A run ended: drop the buffers pooled before it started that it did not take.
    pub fn end_run(&mut self) {
        self.bufs.retain(|b| !b.idle);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.t.nbytes()).sum()
    }
}
