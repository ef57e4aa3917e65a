//! Shuffle: a buffer of `size` records; each record in replaces one drawn
//! at random, which goes out (tf.data's `shuffle`). With `repeat` after
//! `shuffle` the buffer drains at the end of each epoch; with `repeat`
//! before it, it mixes epochs and drains once at the end.
//!
//! The random draws come from a counter-based generator
//! ([`CounterRng`]), so the RNG's state is one counter. The buffer's state
//! is its records' positions, slot by slot; a restore reads them again.
//!
//! The buffer's storage is [`buffer`]'s: records copied into chains of
//! blocks, or held as they are when they are views of a mapped file.

mod buffer;

use std::sync::Arc;

use crate::pipeline::error::{PipelineError, StateError};
use crate::pipeline::rng::{CounterRng, stream};
use crate::pipeline::stats::StageStats;

use super::epochs::Epochs;
use super::{EpochInput, Item, StreamState};
use buffer::ShuffleBuffer;

/// The shuffle op, on top of the epochs it drains between (or not).
pub(crate) struct Shuffle<I> {
    input: Epochs<I>,
    /// Records in the buffer; 0: no shuffle.
    size: usize,
    across_epochs: bool,
    buffer: ShuffleBuffer,
    rng: CounterRng,
    /// This epoch's input is done; the buffer is draining.
    draining: bool,
    finished: bool,
    /// Records out of the buffer (for sampling its memory).
    out_count: u64,
    stats: Arc<StageStats>,
}

impl<I: EpochInput> Shuffle<I> {
    pub fn new(
        input: Epochs<I>,
        size: usize,
        across_epochs: bool,
        seed: u64,
        stats: Arc<StageStats>,
    ) -> Self {
        Shuffle {
            input,
            size,
            across_epochs,
            buffer: ShuffleBuffer::with_capacity(size),
            rng: CounterRng::new(seed, stream::SHUFFLE, 0),
            draining: false,
            finished: false,
            out_count: 0,
            stats,
        }
    }

    /// Checks the shuffle's fields of `state` (before its records are read
    /// again).
    pub fn check(&self, state: &StreamState) -> Result<(), StateError> {
        let invalid = |field: &'static str, value: u64, reason: String| {
            Err(StateError::Invalid {
                field,
                value,
                reason,
            })
        };
        if state.buffer.len() > self.size {
            return invalid(
                "records in the shuffle buffer",
                state.buffer.len() as u64,
                format!("the buffer holds {}", self.size),
            );
        }
        let input_done = self.input.input_done();
        if state.draining && (self.size == 0 || !input_done) {
            return invalid(
                "draining flag",
                1,
                "only a shuffle buffer whose epoch's input is done drains".into(),
            );
        }
        if state.finished
            && (!self.input.may_finish()
                || !input_done
                || state.draining
                || !state.buffer.is_empty())
        {
            return invalid(
                "finished flag",
                1,
                "only a finite run whose last epoch is read and drained is finished".into(),
            );
        }
        Ok(())
    }

    /// Continues from `state` (checked with [`check`](Self::check)): the
    /// buffered records (read again by the caller from the state's
    /// positions) go back into their slots.
    pub fn restore(&mut self, state: &StreamState, buffered: Vec<Item>) {
        self.rng.counter = state.rng_counter;
        self.draining = state.draining;
        self.finished = state.finished;
        for item in buffered {
            self.buffer.push(item);
        }
    }

    /// The next record of the pipeline's record stream, or `None` at its end.
    #[inline]
    pub fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        let size = self.size;
        loop {
            if self.finished {
                return Ok(None);
            }
            if self.draining {
                if !self.buffer.is_empty() {
                    let j = self.rng.below(self.buffer.len());
                    let item = self.buffer.swap_remove(j);
                    self.buffer_stats();
                    return Ok(item);
                }
                self.draining = false;
                if !self.input.advance()? {
                    self.finished = true;
                }
                continue;
            }
            match self.input.next()? {
                Some(item) if size == 0 => return Ok(Some(item)),
                Some(item) => {
                    // The buffer copies records into compact storage: a
                    // buffered record must not pin the read chunk it was
                    // sliced from.
                    if self.buffer.len() < size {
                        self.buffer.push(item);
                        continue;
                    }
                    let j = self.rng.below(size);
                    let out = self.buffer.replace(j, item);
                    // The next draw is known now (the generator is
                    // counter-based): start loading that record's blocks
                    // while the caller works on this one.
                    self.buffer.prefetch(self.rng.clone().below(size));
                    self.buffer_stats();
                    return Ok(out);
                }
                None => {
                    if size > 0 && (!self.across_epochs || self.input.is_last()) {
                        self.draining = true;
                    } else if !self.input.advance()? {
                        self.finished = true;
                    }
                }
            }
        }
    }

    /// Publishes the buffer's memory (allocated and payload bytes) every
    /// 256 records out.
    #[inline]
    fn buffer_stats(&mut self) {
        self.out_count = self.out_count.wrapping_add(1);
        if self.out_count % 256 == 0 {
            self.stats.note_buffer(
                self.buffer.allocated_bytes(),
                self.buffer.payload_bytes(),
                self.buffer.mapped_bytes(),
            );
        }
    }

    /// The state of the whole chain now.
    pub fn save(&self) -> StreamState {
        let mut state = StreamState {
            rng_counter: self.rng.counter,
            buffer: self.buffer.positions().to_vec(),
            draining: self.draining,
            finished: self.finished,
            ..StreamState::default()
        };
        self.input.save(&mut state);
        state
    }
}
