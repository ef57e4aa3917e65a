//! Software prefetch: a hint that loads memory into the cache ahead of its
//! use. The record thread reads from many places at once (a random shuffle
//! slot, and the next record of each of 16 interleaved shards), more
//! streams than the hardware prefetcher follows; each miss there costs
//! the one thread that orders records ~100 ns.

/// Asks the CPU to load the cache lines of `bytes` (a hint: it reads and
/// changes nothing, and is a no-op off x86-64).
#[inline]
pub(crate) fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch only hints the cache; the pointer is in bounds
        // and nothing is read or written through it.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
