//! Filter and map on serialized records (the user's functions). No state of
//! its own: a restore applies the map again to the records it reads again
//! ([`apply_map`]), so the map must be deterministic.

use crate::pipeline::error::PipelineError;

use crate::pipeline::checkpoint::SavedParts;

use super::{EpochInput, Item, RecordFilter, RecordMap};

/// Keeps the records `filter` accepts and replaces each by `map(record)`.
pub(crate) struct RecordMapOp<I> {
    input: I,
    filter: Option<RecordFilter>,
    map: Option<RecordMap>,
}

impl<I: EpochInput> RecordMapOp<I> {
    pub fn new(input: I, filter: Option<RecordFilter>, map: Option<RecordMap>) -> Self {
        RecordMapOp { input, filter, map }
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
        item.measured = super::UNMEASURED;
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
            if let Some(filter) = &self.filter {
                if !filter(&item.data) {
                    continue;
                }
            }
            return Ok(Some(apply_map(self.map.as_ref(), item)));
        }
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
}
