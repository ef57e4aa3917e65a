//! Epochs (`repeat`): runs the ops below it `epochs` times (or forever),
//! restarting them at each epoch. An epoch that produced no record ends a
//! finite run (every later epoch reads the same data) and is an error in an
//! endless one, which would otherwise spin. Its state: the epoch and the
//! records it produced.

use std::sync::Arc;

use crate::pipeline::error::{PipelineError, StateError};
use crate::pipeline::stats::StageStats;

use crate::pipeline::checkpoint::{SavedParts, prost_part};

use super::{EpochInput, Item};

/// The epochs' part of a state.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct EpochsPart {
    #[prost(uint64, tag = "1")]
    pub epoch: u64,
    /// Records this epoch emitted so far.
    #[prost(uint64, tag = "2")]
    pub emitted: u64,
}
prost_part!(EpochsPart, "epochs", 1);

/// Repeats its input.
pub(crate) struct Epochs<I> {
    input: I,
    /// Epochs to read; `None`: forever.
    epochs: Option<u64>,
    epoch: u64,
    /// Records this epoch that reached the shuffle buffer (or the output).
    emitted: u64,
    stats: Arc<StageStats>,
}

impl<I: EpochInput> Epochs<I> {
    pub fn new(input: I, epochs: Option<u64>, stats: Arc<StageStats>) -> Self {
        Epochs {
            input,
            epochs,
            epoch: 0,
            emitted: 0,
            stats,
        }
    }

    /// Checks the epochs' part before the input is restored (the input's
    /// file order depends on the epoch); `passed`: the records that passed
    /// the record shard this epoch.
    pub fn check(epochs: Option<u64>, part: &EpochsPart, passed: u64) -> Result<(), StateError> {
        if let Some(n) = epochs.filter(|&n| part.epoch >= n) {
            return Err(StateError::Invalid {
                field: "epoch",
                value: part.epoch,
                reason: format!("the pipeline reads {n} epochs"),
            });
        }
        if part.emitted > passed {
            return Err(StateError::Invalid {
                field: "records emitted this epoch",
                value: part.emitted,
                reason: format!("only {passed} records passed the record shard"),
            });
        }
        Ok(())
    }

    /// Continues from `part` (checked with [`check`](Self::check)).
    pub fn restore(
        input: I,
        epochs: Option<u64>,
        stats: Arc<StageStats>,
        part: &EpochsPart,
    ) -> Self {
        Epochs {
            input,
            epochs,
            epoch: part.epoch,
            emitted: part.emitted,
            stats,
        }
    }

    /// The next record of this epoch, `None` when its input is done.
    #[inline]
    pub fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        let item = self.input.next()?;
        if let Some(item) = &item {
            self.emitted += 1;
            self.stats.add_records(1);
            self.stats.add_bytes(item.data.len() as u64);
        }
        Ok(item)
    }

    /// True in the last epoch of a finite run.
    pub fn is_last(&self) -> bool {
        self.epochs.is_some_and(|n| self.epoch + 1 >= n)
    }

    /// True when a finished run may stop in this epoch: the last one, or
    /// one that produced nothing.
    pub fn may_finish(&self) -> bool {
        self.epochs.is_some() && (self.is_last() || self.emitted == 0)
    }

    /// True when this epoch's input is done.
    pub fn input_done(&self) -> bool {
        self.input.input_done()
    }

    /// Moves to the next epoch if there is one.
    pub fn advance(&mut self) -> Result<bool, PipelineError> {
        if self.is_last() {
            return Ok(false);
        }
        if self.emitted == 0 {
            return match self.epochs {
                Some(_) => Ok(false),
                None => Err(PipelineError::EmptyEpoch { epoch: self.epoch }),
            };
        }
        self.epoch += 1;
        self.emitted = 0;
        self.input.start_epoch(self.epoch);
        Ok(true)
    }

    pub fn save(&self, parts: &mut SavedParts) {
        parts.push(EpochsPart {
            epoch: self.epoch,
            emitted: self.emitted,
        });
        self.input.save(parts);
    }
}
