//! Skip and take, per epoch: drops the first `skip` records of each epoch
//! and ends the epoch after `take` more (its files are not read further).
//! Its state: the records that reached it this epoch. It is where a
//! host's records are taken in (`accounting.rs`): it counts each one that
//! reaches it, and those it drops.

use std::sync::Arc;

use crate::pipeline::accounting::Accounts;
use crate::pipeline::checkpoint::{Identity, SavedParts, prost_part};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;

use super::{EpochInput, Restore, invalid};

/// The words of `skip` and `take`, as the builder collected them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SkipTakeSettings {
    /// Records dropped at the start of each epoch.
    pub skip: u64,
    /// Records kept of each epoch after them; `None`: all.
    pub take: Option<u64>,
}

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
    accounts: Arc<Accounts>,
}

impl<I: EpochInput> SkipTake<I> {
    pub fn new(input: I, settings: &SkipTakeSettings, accounts: Arc<Accounts>) -> Self {
        SkipTake {
            input,
            skip: settings.skip,
            take: settings.take,
            passed: 0,
            accounts,
        }
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
            self.accounts.read(1);
            if passed < self.skip {
                self.accounts.sliced(1);
                continue;
            }
            if self.take.is_some_and(|take| passed - self.skip >= take) {
                // The epoch ends here: stop reading its files.
                self.accounts.sliced(1);
                self.input.stop();
                return Ok(None);
            }
            return Ok(Some(item));
        }
    }

    fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        if self.passed < self.skip {
            // Skipping: one record the usual way.
            return self.next().map(|item| out.extend(item));
        }
        // Records left to take before this epoch ends (`None`: no end).
        let taken = self.passed - self.skip;
        let left = self.take.map(|take| take.saturating_sub(taken));
        if left == Some(0) {
            // At the end: the usual way, which stops the input.
            return self.next().map(|item| out.extend(item));
        }
        let max = left.map_or(max, |left| {
            max.min(usize::try_from(left).unwrap_or(usize::MAX))
        });
        let before = out.len();
        self.input.next_run(out, max)?;
        let n = (out.len() - before) as u64;
        self.passed += n;
        self.accounts.read(n);
        Ok(())
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

    /// Its counter, which cannot exceed the records its input passed on
    /// this epoch.
    fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let part: SkipTakePart = r.take()?;
        self.input.restore(r)?;
        if let Some(read) = r.passed.filter(|&read| part.passed > read) {
            return Err(invalid(
                "records past the record shard",
                part.passed,
                format!("only {read} records were read this epoch"),
            ));
        }
        self.passed = part.passed;
        r.passed = Some(part.passed);
        Ok(())
    }

    fn identity(&self, id: &mut Identity) {
        self.input.identity(id);
        if self.skip > 0 || self.take.is_some() {
            id.step("skip_take").u64(self.skip).opt(self.take);
        }
    }
}
