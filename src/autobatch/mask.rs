//! Thread masks (bitsets over the batch) and the wait queue of the schedulers.
//!
//! Invariants: a [`Mask`] of length `len` never has a bit set at or beyond `len` (every
//! constructor and operation keeps the tail of the last word clear), so `count` and
//! equality are exact. The [`WaitQueue`] never stores an empty mask and holds at most one
//! entry per program counter: entries for the same pc are OR-coalesced, which is where
//! diverged threads re-converge.

use std::collections::BTreeMap;

/// A set of logical threads (batch rows), as a bitset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mask {
    words: Vec<u64>,
    len: usize,
}

impl Mask {
    /// Every thread of a batch of `len`.
    pub(crate) fn all(len: usize) -> Mask {
        let mut words = vec![u64::MAX; len.div_ceil(64)];
        if !len.is_multiple_of(64)
            && let Some(last) = words.last_mut()
        {
            *last = (1u64 << (len % 64)) - 1;
        }
        Mask { words, len }
    }

    /// No thread of a batch of `len`.
    pub(crate) fn none(len: usize) -> Mask {
        Mask { words: vec![0; len.div_ceil(64)], len }
    }

    /// The batch size this mask ranges over.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of threads in the set.
    pub(crate) fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True if no thread is in the set.
    pub(crate) fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Add thread `i` (ignored when out of range).
    pub(crate) fn set(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] |= 1 << (i % 64);
        }
    }

    /// `self |= other`.
    pub(crate) fn or_assign(&mut self, other: &Mask) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// The thread indices in the set, ascending.
    pub(crate) fn indices(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.count());
        for (wi, &w) in self.words.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                let b = w.trailing_zeros() as usize;
                out.push(wi * 64 + b);
                w &= w - 1;
            }
        }
        out
    }

    /// Split the threads `idx` (members of this mask's batch) by a flag per thread:
    /// `(threads whose flag is set, the others)`.
    pub(crate) fn split(len: usize, idx: &[usize], flags: &[bool]) -> (Mask, Mask) {
        let mut yes = Mask::none(len);
        let mut no = Mask::none(len);
        for &i in idx {
            if flags.get(i).copied().unwrap_or(false) {
                yes.set(i);
            } else {
                no.set(i);
            }
        }
        (yes, no)
    }
}

/// Waiting points of a scheduler: program counter → threads waiting to run from there.
#[derive(Debug, Default)]
pub(crate) struct WaitQueue {
    waiting: BTreeMap<usize, Mask>,
}

impl WaitQueue {
    /// Threads in `mask` wait at `pc`; empty masks are dropped, same-pc entries coalesce.
    pub(crate) fn enqueue(&mut self, pc: usize, mask: Mask) {
        if mask.is_empty() {
            return;
        }
        match self.waiting.get_mut(&pc) {
            Some(m) => m.or_assign(&mask),
            None => {
                self.waiting.insert(pc, mask);
            }
        }
    }

    /// The smallest waiting pc and all threads waiting there.
    pub(crate) fn pop_min(&mut self) -> Option<(usize, Mask)> {
        self.waiting.pop_first()
    }
}
