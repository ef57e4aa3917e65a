//! Counters of a source's work.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// Counters of a source's work, shared by every reader given the same `Arc`
/// (the pipeline reports them per stage). All counts only grow.
#[derive(Debug, Default)]
pub struct ReadStats {
    /// Payload bytes delivered by successful reads (bytes of a failed
    /// attempt that were kept count too: they are not read again).
    pub bytes: AtomicU64,
    /// Requests issued: range GETs, HEADs, LIST pages (local: reads, stats,
    /// directory listings).
    pub requests: AtomicU64,
    /// Requests that failed and were retried (a request that is given up on
    /// is not a retry).
    pub retries: AtomicU64,
    /// Failures that were timeouts: no response, or no data, for
    /// `request_timeout` (a stalled body).
    pub timeouts: AtomicU64,
    /// Range reads finished (one per chunk delivered).
    pub chunks: AtomicU64,
    /// Entries (objects and common prefixes, or directory entries) returned by
    /// listings: proof that a glob listed only what it had to.
    pub listed: AtomicU64,
    /// Chunk buffers allocated by cloud range reads. A chunk released
    /// downstream is filled again, so this stays at the most chunks in use
    /// at once (in flight plus held), not one per chunk.
    pub buffers: AtomicU64,
}

impl ReadStats {
    /// A fresh set of counters, ready to share.
    pub fn new() -> Arc<ReadStats> {
        Arc::new(ReadStats::default())
    }
}
