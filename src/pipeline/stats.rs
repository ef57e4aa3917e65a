//! Per-stage counters: records, bytes, busy and waiting time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use super::accounting::Accounts;

/// What a logical stream's chain counts into: its shard readers' stage,
/// the record thread's stage and the host's record account (a run shares
/// them among its streams; a count by grouping has its own).
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamCounters {
    pub read: Arc<StageStats>,
    pub stream: Arc<StageStats>,
    pub accounts: Arc<Accounts>,
}

/// Counters of one pipeline stage, shared by its threads.
#[derive(Debug, Default)]
pub struct StageStats {
    records: AtomicU64,
    bytes: AtomicU64,
    busy_ns: AtomicU64,
    wait_ns: AtomicU64,
    skipped_records: AtomicU64,
    skipped_bytes: AtomicU64,
    buffer_bytes: AtomicU64,
    buffer_payload_bytes: AtomicU64,
    buffer_mapped_bytes: AtomicU64,
    retries: AtomicU64,
}

/// A snapshot of one stage's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageFigures {
    pub records: u64,
    pub bytes: u64,
    /// Time spent working.
    pub busy_ns: u64,
    /// Time spent waiting for input or for room downstream.
    pub wait_ns: u64,
    /// Corrupt regions skipped (under the skip policy) and their bytes.
    pub skipped_records: u64,
    pub skipped_bytes: u64,
    /// Peak bytes a buffering stage (the shuffle buffer) allocated, and
    /// the peak payload it held, sampled: their ratio is its overhead.
    pub buffer_bytes: u64,
    pub buffer_payload_bytes: u64,
    /// Peak bytes of records it held as views of mapped files (page cache,
    /// counted in RSS but not allocated by it; `ReadOptions::mmap`).
    pub buffer_mapped_bytes: u64,
    /// Cloud requests that failed transiently (5xx, reset, timeout) and
    /// were retried, resuming at the byte where the data stopped.
    pub retries: u64,
}

impl StageFigures {
    /// The counts and times added since `earlier` (a snapshot of the same
    /// stage); no peaks.
    pub(crate) fn since(&self, earlier: &StageFigures) -> StageFigures {
        StageFigures {
            records: self.records.saturating_sub(earlier.records),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            busy_ns: self.busy_ns.saturating_sub(earlier.busy_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
            skipped_records: self.skipped_records.saturating_sub(earlier.skipped_records),
            skipped_bytes: self.skipped_bytes.saturating_sub(earlier.skipped_bytes),
            retries: self.retries.saturating_sub(earlier.retries),
            ..StageFigures::default()
        }
    }
}

/// Adds the time from its creation to its drop to a counter.
pub struct Timer<'a> {
    start: Instant,
    counter: &'a AtomicU64,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.counter
            .fetch_add(self.start.elapsed().as_nanos() as u64, Relaxed);
    }
}

impl StageStats {
    pub fn add_records(&self, n: u64) {
        self.records.fetch_add(n, Relaxed);
    }

    pub fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Relaxed);
    }

    pub fn add_skipped(&self, records: u64, bytes: u64) {
        self.skipped_records.fetch_add(records, Relaxed);
        self.skipped_bytes.fetch_add(bytes, Relaxed);
    }

    pub fn add_retries(&self, n: u64) {
        self.retries.fetch_add(n, Relaxed);
    }

    /// Records a sample of the stage's buffer memory (peaks are kept).
    pub fn note_buffer(&self, allocated: usize, payload: usize, mapped: usize) {
        self.buffer_bytes.fetch_max(allocated as u64, Relaxed);
        self.buffer_payload_bytes.fetch_max(payload as u64, Relaxed);
        self.buffer_mapped_bytes.fetch_max(mapped as u64, Relaxed);
    }

    /// Counts the time until the returned guard drops as busy.
    pub fn busy_timer(&self) -> Timer<'_> {
        Timer {
            start: Instant::now(),
            counter: &self.busy_ns,
        }
    }

    /// Counts `time` as waiting.
    pub fn add_wait(&self, time: std::time::Duration) {
        self.wait_ns.fetch_add(time.as_nanos() as u64, Relaxed);
    }

    /// Counts the time until the returned guard drops as waiting.
    pub fn wait_timer(&self) -> Timer<'_> {
        Timer {
            start: Instant::now(),
            counter: &self.wait_ns,
        }
    }

    /// Adds the counts and times of `f` (not its peaks): what a reader
    /// that counted apart did, passed on.
    pub(crate) fn add_figures(&self, f: &StageFigures) {
        self.records.fetch_add(f.records, Relaxed);
        self.bytes.fetch_add(f.bytes, Relaxed);
        self.busy_ns.fetch_add(f.busy_ns, Relaxed);
        self.wait_ns.fetch_add(f.wait_ns, Relaxed);
        self.skipped_records.fetch_add(f.skipped_records, Relaxed);
        self.skipped_bytes.fetch_add(f.skipped_bytes, Relaxed);
        self.retries.fetch_add(f.retries, Relaxed);
    }

    /// The counters now.
    pub fn figures(&self) -> StageFigures {
        StageFigures {
            records: self.records.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            busy_ns: self.busy_ns.load(Relaxed),
            wait_ns: self.wait_ns.load(Relaxed),
            skipped_records: self.skipped_records.load(Relaxed),
            skipped_bytes: self.skipped_bytes.load(Relaxed),
            buffer_bytes: self.buffer_bytes.load(Relaxed),
            buffer_payload_bytes: self.buffer_payload_bytes.load(Relaxed),
            buffer_mapped_bytes: self.buffer_mapped_bytes.load(Relaxed),
            retries: self.retries.load(Relaxed),
        }
    }
}
