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
mod slots;

use std::sync::Arc;

use crate::pipeline::checkpoint::{
    Coded, Identity, OpPart, SavedParts, code_positions, decode_positions,
};
use crate::pipeline::error::{PipelineError, StateError};
use crate::pipeline::item::Item;
use crate::pipeline::rng::{CounterRng, domain};
use crate::pipeline::stats::StageStats;

use super::epochs::Epochs;
use super::{EpochInput, Restore, invalid};
pub(crate) use slots::SlotPositions;

/// Slots reserved when the buffer is made; a larger buffer grows as it
/// fills.
const RESERVED_SLOTS: usize = 1 << 16;
/// Records ahead of its draw that a slot's lines are asked for in a run:
/// one record's work (~30 ns) hid too little of a miss.
const SLOTS_AHEAD: usize = 8;

/// The word `shuffle`, as the builder collected it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShuffleSettings {
    /// Records in the buffer; 0: no shuffle.
    pub buffer: usize,
    /// Keep the buffer across epoch boundaries (`repeat` before `shuffle`)
    /// instead of draining it at the end of each epoch.
    pub across_epochs: bool,
}

/// The shuffle's part of a state: the RNG's counter, per buffer slot the
/// (file, offset) of its record, whether the buffer drains and the run
/// finished.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ShufflePart {
    pub rng_counter: u64,
    pub buffer: SlotPositions,
    pub draining: bool,
    pub finished: bool,
}

/// The shuffle's part on the wire: the buffer's positions coded compactly
/// (about 4 bytes per record, whatever its size).
#[derive(Clone, PartialEq, prost::Message)]
struct ShuffleProto {
    #[prost(uint64, tag = "1")]
    rng_counter: u64,
    #[prost(uint32, repeated, tag = "2")]
    buffer_files: Vec<u32>,
    #[prost(uint32, repeated, tag = "3")]
    buffer_counts: Vec<u32>,
    #[prost(uint64, repeated, tag = "4")]
    buffer_deltas: Vec<u64>,
    #[prost(uint32, repeated, tag = "5")]
    buffer_order: Vec<u32>,
    #[prost(bool, tag = "6")]
    draining: bool,
    #[prost(bool, tag = "7")]
    finished: bool,
}

impl OpPart for ShufflePart {
    const KEY: &'static str = "shuffle";
    const VERSION: u32 = 1;

    fn encode_body(&self) -> Vec<u8> {
        let c = code_positions(&self.buffer.to_vec());
        prost::Message::encode_to_vec(&ShuffleProto {
            rng_counter: self.rng_counter,
            buffer_files: c.files,
            buffer_counts: c.counts,
            buffer_deltas: c.deltas,
            buffer_order: c.order,
            draining: self.draining,
            finished: self.finished,
        })
    }

    fn decode_body(body: &[u8]) -> Result<Self, StateError> {
        let p = <ShuffleProto as prost::Message>::decode(body).map_err(|e| StateError::Part {
            part: Self::KEY.into(),
            reason: format!("it does not decode: {e}"),
        })?;
        let buffer = decode_positions(
            &Coded {
                files: p.buffer_files,
                counts: p.buffer_counts,
                deltas: p.buffer_deltas,
                order: p.buffer_order,
            },
            "shuffle buffer",
        )?;
        Ok(ShufflePart {
            rng_counter: p.rng_counter,
            buffer: buffer.into(),
            draining: p.draining,
            finished: p.finished,
        })
    }
}
use buffer::ShuffleBuffer;

/// The shuffle op, on top of the epochs it drains between (or not).
pub(crate) struct Shuffle<I> {
    input: Epochs<I>,
    /// Records in the buffer; 0: no shuffle.
    size: usize,
    across_epochs: bool,
    buffer: ShuffleBuffer,
    seed: u64,
    rng: CounterRng,
    /// This epoch's input is done; the buffer is draining.
    draining: bool,
    finished: bool,
    /// Records out of the buffer (for sampling its memory).
    out_count: u64,
    stats: Arc<StageStats>,
    /// A run's records in, before each takes a slot ([`Shuffle::next_run`]).
    incoming: Vec<Item>,
    /// The slots a run's records take, drawn ahead.
    draws: Vec<usize>,
}

impl<I: EpochInput> Shuffle<I> {
    /// The stream's seed draws the buffer's picks.
    pub fn new(
        input: Epochs<I>,
        settings: ShuffleSettings,
        seed: u64,
        stats: Arc<StageStats>,
    ) -> Self {
        Shuffle {
            input,
            size: settings.buffer,
            across_epochs: settings.across_epochs,
            // Grows with what it holds past a first reserve: a buffer
            // larger than the data holds only the data (as tf.data's does).
            buffer: ShuffleBuffer::with_capacity(settings.buffer.min(RESERVED_SLOTS)),
            seed,
            rng: CounterRng::new(seed, domain::SHUFFLE, 0),
            draining: false,
            finished: false,
            out_count: 0,
            stats,
            incoming: Vec::new(),
            draws: Vec::new(),
        }
    }

    /// Opens the first epoch.
    pub fn start(&mut self) {
        self.input.start();
    }

    /// Takes its part, restores the ops below, checks the part against
    /// them, and reads the buffered records again into their slots.
    pub fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let state: ShufflePart = r.take()?;
        self.input.restore(r)?;
        if state.buffer.len() > self.size {
            return Err(invalid(
                "records in the shuffle buffer",
                state.buffer.len() as u64,
                format!("the buffer holds {}", self.size),
            ));
        }
        let input_done = self.input.input_done();
        if state.draining && (self.size == 0 || !input_done) {
            return Err(invalid(
                "draining flag",
                1,
                "only a shuffle buffer whose epoch's input is done drains".into(),
            ));
        }
        if state.finished
            && (!self.input.may_finish()
                || !input_done
                || state.draining
                || !state.buffer.is_empty())
        {
            return Err(invalid(
                "finished flag",
                1,
                "only a finite run whose last epoch is read and drained is finished".into(),
            ));
        }
        let buffered = r.reread()?.read(&state.buffer.to_vec())?;
        self.rng.counter = state.rng_counter;
        self.draining = state.draining;
        self.finished = state.finished;
        for item in buffered {
            self.buffer.push(item);
        }
        Ok(())
    }

    /// Records in the buffer (taken in, not yet out).
    pub fn held(&self) -> u64 {
        self.buffer.len() as u64
    }

    /// Its seed, its buffer and whether the buffer spans epochs; nothing
    /// without a buffer (the records pass as they come).
    pub fn identity(&self, id: &mut Identity) {
        self.input.identity(id);
        if self.size > 0 {
            id.step("shuffle")
                .u64(self.seed)
                .u64(self.size as u64)
                .bool(self.across_epochs);
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
                    // counter-based): start loading that record's slot
                    // and blocks while the caller works on this one.
                    let next = self.rng.clone().below(size);
                    self.buffer.prefetch_slot(next);
                    self.buffer.prefetch_record(next);
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

    /// Appends the next records of the stream to `out`: at least one and at
    /// most `max`, none at its end. Without a buffer a run passes through
    /// from the epochs' input. With a full buffer a run comes in from it,
    /// and each record in takes the slot its draw picks, sending that
    /// slot's record out, in the order and with the draws [`next`](Self::next)
    /// makes for each. Filling, draining and each epoch's end go one record
    /// at a time through `next`.
    pub fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        if !self.finished && !self.draining && self.buffer.len() == self.size {
            let before = out.len();
            if self.size == 0 {
                self.input.next_run(out, max)?;
                if out.len() > before {
                    return Ok(());
                }
            } else {
                let mut incoming = std::mem::take(&mut self.incoming);
                // An error appends nothing (`EpochInput::next_run`); were a
                // record pulled before one, it would take its slot first, as
                // a single record would have.
                let pulled = self.input.next_run(&mut incoming, max);
                // The run's draws, known ahead (the generator is
                // counter-based): each slot's lines are asked for
                // `SLOTS_AHEAD` records before its draw, its blocks
                // (which the slot says where they are) one before.
                let mut draws = std::mem::take(&mut self.draws);
                draws.clear();
                draws.extend((0..incoming.len()).map(|_| self.rng.below(self.size)));
                // The next run's first, not taken yet.
                draws.push(self.rng.clone().below(self.size));
                for &j in draws.iter().take(SLOTS_AHEAD) {
                    self.buffer.prefetch_slot(j);
                }
                for (k, item) in incoming.drain(..).enumerate() {
                    if let Some(&ahead) = draws.get(k + SLOTS_AHEAD) {
                        self.buffer.prefetch_slot(ahead);
                    }
                    out.extend(self.buffer.replace(draws[k], item));
                    self.buffer.prefetch_record(draws[k + 1]);
                    self.buffer_stats();
                }
                self.draws = draws;
                self.incoming = incoming;
                pulled?;
                if out.len() > before {
                    return Ok(());
                }
            }
        }
        out.extend(self.next()?);
        Ok(())
    }

    /// Publishes the buffer's memory (allocated and payload bytes) every
    /// 256 records out.
    #[inline]
    fn buffer_stats(&mut self) {
        self.out_count = self.out_count.wrapping_add(1);
        if self.out_count.is_multiple_of(256) {
            self.stats.note_buffer(
                self.buffer.allocated_bytes(),
                self.buffer.payload_bytes(),
                self.buffer.mapped_bytes(),
            );
        }
    }

    /// Pushes the parts of the whole chain now, this op's first.
    pub fn save(&mut self, parts: &mut SavedParts) {
        parts.push(ShufflePart {
            rng_counter: self.rng.counter,
            buffer: self.buffer.share_positions(),
            draining: self.draining,
            finished: self.finished,
        });
        self.input.save(parts);
    }
}
