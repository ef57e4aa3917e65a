//! What became of every record a host's streams took in: delivered in a
//! batch's real rows, or left out, and why ([`RecordAccount`]).
//!
//! Each cause is counted where it happens, not derived from the others:
//! records are taken in where they pass skip/take (after the host's
//! shard, so a host counts only its own records) and from a restored state;
//! skip/take and the record filter count what they drop; the record thread
//! counts what `filter_rows` drops, what packing cannot place (records of
//! no values) and what its grouping never emits (a remainder dropped, the
//! records held when a fixed batch count is reached); the workers count the
//! rows they leave out (an image that does not decode, under the skip
//! policy); the consumer counts what it delivers and what `skip_steps`
//! leaves out. So for a run read to its end, `read == delivered +
//! left_out.total()` is a check, not an identity (docs/many-hosts.md gives
//! the rule per op).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The host's counters, shared by its threads.
#[derive(Debug, Default)]
pub(crate) struct Accounts {
    read: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
    sliced: AtomicU64,
    skipped_steps: AtomicU64,
    filtered: AtomicU64,
    corrupt: AtomicU64,
    empty: AtomicU64,
    mixture_end: AtomicU64,
}

/// What became of the records a host's streams took in, over a run (since
/// `build`, or since the restore it started from).
///
/// For a run read to its end, `read == delivered + left_out.total()`; a
/// run still going holds the rest in its buffers and batches in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordAccount {
    /// Records taken in: those of the host's share of its files that
    /// reached skip/take, the records a restored state holds (its shuffle
    /// buffers, the records waiting in its grouping) and the corrupt
    /// regions skipped under [`CorruptPolicy::Skip`], one each.
    ///
    /// [`CorruptPolicy::Skip`]: crate::record::CorruptPolicy::Skip
    pub read: u64,
    /// Records in the real rows of delivered batches; a record cut over
    /// rows or batches (packing) counts once, in the batch of its first
    /// piece.
    pub delivered: u64,
    pub left_out: LeftOut,
}

/// Records left out, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// By the grouping: a last, partly filled batch under `drop_remainder`,
    /// and what a stream held when `equal_batches(Drop)` reached its count.
    pub dropped: u64,
    /// By `skip` and `take` (the record after the `take`-th of an epoch is
    /// read, and ends it).
    pub sliced: u64,
    /// In the batches of steps that `skip_steps` leaves out.
    pub skipped_steps: u64,
    /// By a record `filter` and by `filter_rows`.
    pub filtered: u64,
    /// Corrupt regions of shards (under the skip policy) and records whose
    /// image does not decode (likewise).
    pub corrupt: u64,
    /// Packed records with no values (they take no room).
    pub empty: u64,
    /// Held in a mixture's sources (their shuffle buffers) when it ended.
    pub mixture_end: u64,
}

impl LeftOut {
    /// All records left out.
    pub fn total(&self) -> u64 {
        self.dropped
            + self.sliced
            + self.skipped_steps
            + self.filtered
            + self.corrupt
            + self.empty
            + self.mixture_end
    }
}

impl RecordAccount {
    /// Every record taken in is delivered or left out (true for a run read
    /// to its end).
    pub fn balanced(&self) -> bool {
        self.read == self.delivered + self.left_out.total()
    }
}

impl Accounts {
    pub fn read(&self, n: u64) {
        self.read.fetch_add(n, Relaxed);
    }

    pub fn delivered(&self, n: u64) {
        self.delivered.fetch_add(n, Relaxed);
    }

    pub fn dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Relaxed);
    }

    pub fn sliced(&self, n: u64) {
        self.sliced.fetch_add(n, Relaxed);
    }

    pub fn skipped_steps(&self, n: u64) {
        self.skipped_steps.fetch_add(n, Relaxed);
    }

    pub fn filtered(&self, n: u64) {
        self.filtered.fetch_add(n, Relaxed);
    }

    pub fn corrupt(&self, n: u64) {
        self.corrupt.fetch_add(n, Relaxed);
    }

    pub fn empty(&self, n: u64) {
        self.empty.fetch_add(n, Relaxed);
    }

    pub fn mixture_end(&self, n: u64) {
        self.mixture_end.fetch_add(n, Relaxed);
    }

    /// The counts now, with `corrupt_regions` skipped by the shard readers
    /// (they count them as they frame) taken in and left out.
    pub fn account(&self, corrupt_regions: u64) -> RecordAccount {
        let load = |c: &AtomicU64| c.load(Relaxed);
        RecordAccount {
            read: load(&self.read) + corrupt_regions,
            delivered: load(&self.delivered),
            left_out: LeftOut {
                dropped: load(&self.dropped),
                sliced: load(&self.sliced),
                skipped_steps: load(&self.skipped_steps),
                filtered: load(&self.filtered),
                corrupt: load(&self.corrupt) + corrupt_regions,
                empty: load(&self.empty),
                mixture_end: load(&self.mixture_end),
            },
        }
    }
}

/// What a worker's batch holds: the records whose first piece is in it,
/// and those of them the worker left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BatchTally {
    pub records: u64,
    pub left_out: u64,
}

impl BatchTally {
    /// Counts the batch as delivered, or as left out by `skip_steps`.
    pub fn count(&self, accounts: &Accounts, skipped: bool) {
        let kept = self.records.saturating_sub(self.left_out);
        if skipped {
            accounts.skipped_steps(kept);
        } else {
            accounts.delivered(kept);
        }
        accounts.corrupt(self.left_out);
    }
}

thread_local! {
    /// Rows the batch being made on this worker left out (the batch
    /// function's ops count them here; the worker takes the count after
    /// each batch).
    static LEFT_OUT_HERE: Cell<u64> = const { Cell::new(0) };
}

/// A row of the batch being made on this thread is left out.
#[cfg_attr(not(feature = "images"), allow(dead_code))]
pub(crate) fn leave_out_here() {
    LEFT_OUT_HERE.set(LEFT_OUT_HERE.get() + 1);
}

/// The rows left out on this thread since the last call.
pub(crate) fn take_left_out_here() -> u64 {
    LEFT_OUT_HERE.replace(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_balances_only_when_every_record_is_placed() {
        let a = Accounts::default();
        a.read(10);
        a.delivered(6);
        a.sliced(1);
        a.filtered(1);
        let acc = a.account(2);
        assert_eq!(acc.read, 12);
        assert_eq!(acc.left_out.corrupt, 2);
        assert!(!acc.balanced());
        a.dropped(2);
        assert!(a.account(2).balanced());
        // A batch of 4 records, one left out by its worker, skipped.
        BatchTally {
            records: 4,
            left_out: 1,
        }
        .count(&a, true);
        let acc = a.account(0);
        assert_eq!((acc.left_out.skipped_steps, acc.left_out.corrupt), (3, 1));
        assert_eq!(take_left_out_here(), 0);
        leave_out_here();
        leave_out_here();
        assert_eq!(take_left_out_here(), 2);
        assert_eq!(take_left_out_here(), 0);
    }
}
