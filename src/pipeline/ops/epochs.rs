//! Epochs (`repeat`): runs the ops below it `epochs` times (or forever),
//! restarting them at each epoch. An epoch that produced no record ends a
//! finite run (every later epoch reads the same data) and is an error in an
//! endless one, which would otherwise spin. Its state: the epoch and the
//! records it produced.

use std::sync::Arc;

use crate::pipeline::checkpoint::{Identity, SavedParts, prost_part};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;
use crate::pipeline::stats::StageStats;

use super::{EpochInput, Restore, invalid};

/// The word `repeat`, as the builder collected it: `None` when not given
/// (one epoch), `Some(None)` forever, `Some(Some(n))` `n` epochs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EpochsSettings {
    pub repeat: Option<Option<u64>>,
}

impl EpochsSettings {
    /// Epochs to read; `None`: forever.
    pub fn epochs(self) -> Option<u64> {
        match self.repeat {
            None => Some(1),
            Some(epochs) => epochs,
        }
    }

    /// True when the data is read forever.
    pub fn endless(self) -> bool {
        self.repeat == Some(None)
    }
}

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
    pub fn new(input: I, settings: EpochsSettings, stats: Arc<StageStats>) -> Self {
        Epochs {
            input,
            epochs: settings.epochs(),
            epoch: 0,
            emitted: 0,
            stats,
        }
    }

    /// Opens the first epoch.
    pub fn start(&mut self) {
        self.input.start_epoch(0);
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

    /// A run of this epoch's records (see [`EpochInput::next_run`]).
    #[inline]
    pub fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        let before = out.len();
        self.input.next_run(out, max)?;
        let run = &out[before..];
        if !run.is_empty() {
            self.emitted += run.len() as u64;
            self.stats.add_records(run.len() as u64);
            self.stats
                .add_bytes(run.iter().map(|item| item.data.len() as u64).sum());
        }
        Ok(())
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

    /// Its epoch, checked before the ops below restore (their file order
    /// depends on it); its count, checked against what they passed on.
    pub fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let part: EpochsPart = r.take()?;
        if let Some(n) = self.epochs.filter(|&n| part.epoch >= n) {
            return Err(invalid(
                "epoch",
                part.epoch,
                format!("the pipeline reads {n} epochs"),
            ));
        }
        r.epoch = part.epoch;
        self.input.restore(r)?;
        if let Some(passed) = r.passed.filter(|&passed| part.emitted > passed) {
            return Err(invalid(
                "records emitted this epoch",
                part.emitted,
                format!("only {passed} records passed the record shard"),
            ));
        }
        self.epoch = part.epoch;
        self.emitted = part.emitted;
        Ok(())
    }

    /// The epochs (`None`: forever), unless one.
    pub fn identity(&self, id: &mut Identity) {
        self.input.identity(id);
        if self.epochs != Some(1) {
            id.step("repeat").opt(self.epochs);
        }
    }
}
