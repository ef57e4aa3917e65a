//! Software prefetch: a hint that loads memory into the cache ahead of its
//! use. The record thread reads from many places at once (a random shuffle
//! slot, and the next record of each of 16 interleaved shards), more
//! streams than the hardware prefetcher follows; each miss there costs
//! the one thread that orders records ~100 ns. A worker reads a batch's
//! records, each from a random place when the shuffle held them as views
//! of mapped shards ([`prefetch_ahead`]).

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

/// Asks the CPU to load the cache line(s) of `value` (a hint, as
/// [`prefetch`]): a slot of a table read at a random index.
#[inline]
pub(crate) fn prefetch_value<T>(value: &T) {
    // SAFETY: `value` is a live reference, so its `size_of::<T>()` bytes
    // are readable; the slice only names them for the hint.
    let bytes =
        unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) };
    prefetch(bytes);
}

/// Records ahead of the one a worker reads whose lines it prefetches: the
/// lines arrive while it works on the record in between.
const AHEAD: usize = 2;
/// Bytes of a record's start that the record thread prefetches before
/// measuring it (its map entries, where the lengths lie; an average lm
/// record is ~1 KB).
pub(crate) const AHEAD_BYTES: usize = 1024;
/// The most of a record a worker prefetches when it reads the record whole
/// in one pass (fixed-length features, `batch/direct_dense.rs`): all of an
/// image record (~3 KB). Its batch's records came from read chunks that
/// other chunks have since pushed out of this core's cache, and the
/// hardware prefetcher did not follow them soon enough: prefetching the
/// whole record rather than its first KiB made lm 13% and img 9% faster
/// pinned to one core (docs/architecture.md, "Decisions"; lm's decoder has
/// since come to prefetch its runs itself, [`START_BYTES`]). A
/// longer record's rest streams in behind its start.
pub(crate) const WHOLE_RECORD_BYTES: usize = 8192;

/// How much of a record's start the scan that locates its varint runs
/// prefetches (`ExampleParser::locate_runs`): where its first map entries
/// lie. That scan skips the runs themselves, and the pass that decodes them
/// prefetches each run just ahead of it (`example/runs.rs`), so the whole
/// record here only filled the cache with lines evicted again before their
/// use: lm 2–3% faster pinned with the start alone (docs/performance.md).
pub(crate) const START_BYTES: usize = 256;

/// Prefetches up to `bytes` of the start of the record a few after record
/// `i` of a batch ([`WHOLE_RECORD_BYTES`] or [`START_BYTES`]).
#[inline]
pub(crate) fn prefetch_ahead<R: AsRef<[u8]>>(records: &[R], i: usize, bytes: usize) {
    if let Some(ahead) = records.get(i + AHEAD) {
        let ahead = ahead.as_ref();
        prefetch(&ahead[..ahead.len().min(bytes)]);
    }
}
