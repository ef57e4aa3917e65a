//! Record sharding: with fewer files than hosts, each host reads every file
//! and keeps the records whose ordinal in the interleaved stream is its
//! index modulo the host count. Its state: the records seen this epoch.

use crate::pipeline::checkpoint::{Identity, SavedParts, prost_part};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;

use super::{EpochInput, Restore};

/// The record shard's part of a state.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RecordShardPart {
    /// Records the interleave produced this epoch.
    #[prost(uint64, tag = "1")]
    pub ordinal: u64,
}
prost_part!(RecordShardPart, "record_shard", 1);

/// Keeps every `count`-th record, from the `index`-th.
pub(crate) struct RecordShard<I> {
    input: I,
    /// (index, count); `None`: keep every record.
    shard: Option<(u64, u64)>,
    /// Records the interleave produced this epoch.
    ordinal: u64,
}

impl<I: EpochInput> RecordShard<I> {
    pub fn new(input: I, shard: Option<(u64, u64)>) -> Self {
        RecordShard {
            input,
            shard,
            ordinal: 0,
        }
    }
}

impl<I: EpochInput> EpochInput for RecordShard<I> {
    #[inline]
    fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        loop {
            let Some(item) = self.input.next()? else {
                return Ok(None);
            };
            let ordinal = self.ordinal;
            self.ordinal += 1;
            match self.shard {
                Some((index, count)) if ordinal % count != index => continue,
                _ => return Ok(Some(item)),
            }
        }
    }

    fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        if self.shard.is_some() {
            return self.next().map(|item| out.extend(item));
        }
        let before = out.len();
        self.input.next_run(out, max)?;
        self.ordinal += (out.len() - before) as u64;
        Ok(())
    }

    fn stop(&mut self) {
        self.input.stop();
    }

    fn start_epoch(&mut self, epoch: u64) {
        self.ordinal = 0;
        self.input.start_epoch(epoch);
    }

    fn input_done(&self) -> bool {
        self.input.input_done()
    }

    fn save(&self, parts: &mut SavedParts) {
        parts.push(RecordShardPart {
            ordinal: self.ordinal,
        });
        self.input.save(parts);
    }

    /// Its counter, which the op above checks its own against (it cannot
    /// have passed on more records than the interleave produced).
    fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let part: RecordShardPart = r.take()?;
        self.input.restore(r)?;
        self.ordinal = part.ordinal;
        r.passed = Some(part.ordinal);
        Ok(())
    }

    /// Which records it keeps, when it keeps a share.
    fn identity(&self, id: &mut Identity) {
        self.input.identity(id);
        if let Some((index, count)) = self.shard {
            id.step("record_shard").u64(index).u64(count);
        }
    }
}
