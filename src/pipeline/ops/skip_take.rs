//! Skip and take, per epoch: drops the first `skip` records of each epoch
//! and ends the epoch after `take` more (its files are not read further).
//! Its state: the records that reached it this epoch.

use crate::pipeline::error::{PipelineError, StateError};

use crate::pipeline::checkpoint::{SavedParts, prost_part};

use super::{EpochInput, Item};

/// Skip/take's part of a state.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SkipTakePart {
    /// Records that passed the record shard this epoch.
    #[prost(uint64, tag = "1")]
    pub passed: u64,
}
prost_part!(SkipTakePart, "skip_take", 1);

/// Skips `skip` records, then keeps at most `take`.
pub(crate) struct SkipTake<I> {
    input: I,
    skip: u64,
    take: Option<u64>,
    /// Records that passed the record shard this epoch.
    passed: u64,
}

impl<I: EpochInput> SkipTake<I> {
    pub fn new(input: I, skip: u64, take: Option<u64>) -> Self {
        SkipTake {
            input,
            skip,
            take,
            passed: 0,
        }
    }

    /// Continues from `part`; its counter cannot exceed the `read` records
    /// the interleave produced this epoch.
    pub fn restore(
        input: I,
        skip: u64,
        take: Option<u64>,
        part: &SkipTakePart,
        read: u64,
    ) -> Result<Self, StateError> {
        if part.passed > read {
            return Err(StateError::Invalid {
                field: "records past the record shard",
                value: part.passed,
                reason: format!("only {read} records were read this epoch"),
            });
        }
        Ok(SkipTake {
            input,
            skip,
            take,
            passed: part.passed,
        })
    }
}

impl<I: EpochInput> EpochInput for SkipTake<I> {
    #[inline]
    fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        loop {
            let Some(item) = self.input.next()? else {
                return Ok(None);
            };
            let passed = self.passed;
            self.passed += 1;
            if passed < self.skip {
                continue;
            }
            if self.take.is_some_and(|take| passed - self.skip >= take) {
                // The epoch ends here: stop reading its files.
                self.input.stop();
                return Ok(None);
            }
            return Ok(Some(item));
        }
    }

    fn stop(&mut self) {
        self.input.stop();
    }

    fn start_epoch(&mut self, epoch: u64) {
        self.passed = 0;
        self.input.start_epoch(epoch);
    }

    fn input_done(&self) -> bool {
        self.input.input_done()
    }

    fn save(&self, parts: &mut SavedParts) {
        parts.push(SkipTakePart {
            passed: self.passed,
        });
        self.input.save(parts);
    }
}
