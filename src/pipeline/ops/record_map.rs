//! Filter and map on serialized records (the user's functions). No state of
//! its own: a restore applies the map again to the records it reads again
//! ([`apply_map`]), so the map must be deterministic.

use std::sync::Arc;

use bytes::Bytes;

use crate::pipeline::accounting::Accounts;
use crate::pipeline::checkpoint::{Identity, SavedParts};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::{Item, UNMEASURED};

use super::{EpochInput, Restore};

/// A filter on serialized records.
pub type RecordFilter = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;
/// A map on serialized records; it must be deterministic, since a restored
/// pipeline applies it again to records it reads again.
pub type RecordMap = Arc<dyn Fn(Bytes) -> Bytes + Send + Sync>;

/// The words of `filter` and `map` on records, as the builder collected
/// them.
#[derive(Clone, Default)]
pub(crate) struct RecordMapSettings {
    pub filter: Option<RecordFilter>,
    pub map: Option<RecordMap>,
}

/// Keeps the records `filter` accepts and replaces each by `map(record)`.
pub(crate) struct RecordMapOp<I> {
    input: I,
    filter: Option<RecordFilter>,
    map: Option<RecordMap>,
    /// Counts the records the filter drops.
    accounts: Arc<Accounts>,
}

impl<I: EpochInput> RecordMapOp<I> {
    pub fn new(input: I, settings: &RecordMapSettings, accounts: Arc<Accounts>) -> Self {
        RecordMapOp {
            input,
            filter: settings.filter.clone(),
            map: settings.map.clone(),
            accounts,
        }
    }
}

/// Applies the map (if any) to a record (one read, or read again on
/// restore).
pub(crate) fn apply_map(map: Option<&RecordMap>, mut item: Item) -> Item {
    if let Some(map) = map {
        item.data = map(item.data);
        // The map's output may be anything: not known to be mapped, nor
        // measured.
        item.mapped = false;
        item.measured = UNMEASURED;
    }
    item
}

impl<I: EpochInput> EpochInput for RecordMapOp<I> {
    #[inline]
    fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        loop {
            let Some(item) = self.input.next()? else {
                return Ok(None);
            };
            if let Some(filter) = &self.filter
                && !filter(&item.data)
            {
                self.accounts.filtered(1);
                continue;
            }
            return Ok(Some(apply_map(self.map.as_ref(), item)));
        }
    }

    fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        if self.filter.is_some() || self.map.is_some() {
            return self.next().map(|item| out.extend(item));
        }
        self.input.next_run(out, max)
    }

    fn stop(&mut self) {
        self.input.stop();
    }

    fn start_epoch(&mut self, epoch: u64) {
        self.input.start_epoch(epoch);
    }

    fn input_done(&self) -> bool {
        self.input.input_done()
    }

    /// Filter and map keep no state: no part of their own.
    fn save(&self, parts: &mut SavedParts) {
        self.input.save(parts);
    }

    /// No part: the input's count passes through (a filter only lowers it).
    fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        self.input.restore(r)
    }

    /// The functions cannot be compared: only whether they are set.
    fn identity(&self, id: &mut Identity) {
        self.input.identity(id);
        if self.filter.is_some() || self.map.is_some() {
            id.step("record_map")
                .bool(self.filter.is_some())
                .bool(self.map.is_some());
        }
    }
}
