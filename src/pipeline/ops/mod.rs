//! Record-level ops, one file each, in the order they run on the record
//! thread: [`interleave`] (file order and interleaving; opens the shard
//! readers) or, in its place, [`global_shuffle`] (records by a permutation
//! of the whole dataset, through indexes), [`shard`] (records of this host), [`skip_take`],
//! [`record_map`] (filter and map on serialized records), [`epochs`]
//! (repeat) and [`shuffle`] (its RNG and block buffer); [`mix`] draws
//! from several chains. [`chain`] composes them statically — each op is
//! generic over the op before it, so the hot path has no dynamic dispatch —
//! and gives the record thread one object ([`stream_chain::StreamChain`]).
//!
//! Each op's file holds all of it, as tf.data's kernel files do: its
//! settings (what the builder collected for it), its `identity` (the
//! settings it writes into the checkpoint's fingerprint), its `next`, and
//! its part of the checkpoint, keyed and versioned (see
//! [`checkpoint`](crate::pipeline::checkpoint)): `save` pushes it, and
//! `restore` takes it back, checks it against the pipeline and asks its
//! input to restore its own — so an invalid state is an error, never a
//! panic or a different run, and no op knows another's part.

pub(crate) mod chain;
pub(crate) mod epochs;
pub(crate) mod global_shuffle;
pub(crate) mod interleave;
pub(crate) mod mix;
pub(crate) mod mix_schedule;
pub(crate) mod record_map;
pub(crate) mod shard;
pub(crate) mod shuffle;
pub(crate) mod skip_take;
pub(crate) mod stream_chain;

use super::checkpoint::{Identity, OpPart, RawParts, SavedParts};
use super::error::{PipelineError, StateError};
use super::item::Item;
use super::read::again::Reread;

/// The ops below [`epochs`]: one epoch's records, restartable per epoch.
pub(crate) trait EpochInput {
    /// The next record of this epoch, `None` when its input is done.
    fn next(&mut self) -> Result<Option<Item>, PipelineError>;
    /// Appends the next records of this epoch to `out`: at least one and at
    /// most `max` (`max` > 0), none when its input is done. The same
    /// records, order and state as as many calls of [`next`](Self::next);
    /// an op that is absent (no shard, nothing to skip, no map) passes a
    /// whole run through, so the record thread's hand-off costs per run,
    /// not per record. An error appends nothing: the ops count what a run
    /// appended only when it succeeds. This default takes one.
    fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        let _ = max;
        if let Some(item) = self.next()? {
            out.push(item);
        }
        Ok(())
    }
    /// Ends this epoch's input here (`take` reached): stop reading.
    fn stop(&mut self);
    /// Starts epoch `epoch` from its first record.
    fn start_epoch(&mut self, epoch: u64);
    /// True when this epoch's input is done (every file read).
    fn input_done(&self) -> bool;
    /// Pushes this op's part of the state (then its input's).
    fn save(&self, parts: &mut SavedParts);
    /// Takes this op's part back (then its input's): see [`Restore`].
    fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError>;
    /// Writes the settings that decide this op's output (then its
    /// input's) into the fingerprint.
    fn identity(&self, id: &mut Identity);
}

/// What a restore hands down, in one shape from a stream's node to each op
/// (`restore(&mut self, r: &mut Restore) -> Result<(), PipelineError>`):
/// the parts, for each to take its own — the grouping, a mixture, each
/// source's chain as a group of parts of its own, each op of a chain — and
/// what one op tells the ops below it or above it.
pub(crate) struct Restore<'a> {
    parts: RawParts,
    /// The epoch the state was taken in (set by `epochs` for the ops
    /// below it: the file order depends on it).
    pub epoch: u64,
    /// Set by each op below `epochs` once restored: at most how many
    /// records it has passed on this epoch (`None`: it does not count), so
    /// the op above can check its own count against it.
    pub passed: Option<u64>,
    /// Reads records again at their positions, as the chain being
    /// restored maps them (a restored shuffle buffer); set by the chain
    /// (see [`rereading`](Self::rereading)).
    reread: Option<&'a Reread>,
}

impl<'a> Restore<'a> {
    /// A stream's node, or a group of parts of its own.
    pub fn root(parts: RawParts) -> Restore<'static> {
        Restore {
            parts,
            epoch: 0,
            passed: None,
            reread: None,
        }
    }

    /// These parts, for a chain that reads its records again with
    /// `reread`: the chain restores its ops through the one it gets, then
    /// gives it back ([`give_back`](Self::give_back)).
    pub fn rereading<'b>(&mut self, reread: &'b Reread) -> Restore<'b> {
        let at = self.parts.at().to_owned();
        Restore {
            parts: std::mem::replace(&mut self.parts, RawParts::empty(at)),
            epoch: self.epoch,
            passed: self.passed,
            reread: Some(reread),
        }
    }

    /// The parts the chain's ops did not take, back to the restore they
    /// came from.
    pub fn give_back(&mut self, chain: Restore<'_>) {
        self.parts = chain.parts;
    }

    /// Takes op `P`'s part (see [`RawParts::take`]).
    pub fn take<P: OpPart>(&mut self) -> Result<P, StateError> {
        self.parts.take()
    }

    /// The group of parts saved under `key` (a mixture's source), if the
    /// state has it, as a restore of its own.
    pub fn take_child(&mut self, key: &str) -> Result<Option<Restore<'static>>, StateError> {
        Ok(self.parts.take_child(key)?.map(Restore::root))
    }

    /// Drops the part or group under `key` (a mixture's removed source).
    pub fn drop_key(&mut self, key: &str) {
        self.parts.drop_key(key);
    }

    /// The chain's reader of records again.
    pub fn reread(&self) -> Result<&'a Reread, PipelineError> {
        self.reread
            .ok_or_else(|| PipelineError::Worker("a chain's op restored outside its chain".into()))
    }

    /// Every part must have been taken.
    pub fn finish(self) -> Result<(), StateError> {
        self.parts.finish()
    }
}

/// An invalid value of a state's field.
pub(crate) fn invalid(field: &'static str, value: u64, reason: String) -> PipelineError {
    StateError::Invalid {
        field,
        value,
        reason,
    }
    .into()
}
