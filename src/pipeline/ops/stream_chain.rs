//! What a logical stream's record thread runs: one record chain
//! ([`chain`](super::chain)), or a mixture of several ([`mix`](super::mix)),
//! behind one face.

use crate::pipeline::checkpoint::{Identity, Position, SavedParts};
use crate::pipeline::error::PipelineError;
use crate::pipeline::item::Item;

use super::Restore;
use super::chain::RecordChain;
use super::mix::MixChain;

/// What a logical stream's record thread runs: one chain, or a mixture of
/// several, behind one face.
// One per record thread: boxing the larger variant would add a pointer
// chase to every record for no memory worth saving.
#[allow(clippy::large_enum_variant)]
pub(crate) enum StreamChain {
    One(RecordChain),
    Mix(MixChain),
}

impl StreamChain {
    /// Starts from the beginning.
    pub fn start(&mut self) {
        match self {
            StreamChain::One(c) => c.start(),
            StreamChain::Mix(m) => m.start(),
        }
    }

    /// Continues where its parts were saved.
    pub fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        match self {
            StreamChain::One(c) => c.restore(r),
            StreamChain::Mix(m) => m.restore(r),
        }
    }

    /// The settings that decide its records and their order.
    pub fn identity(&self, id: &mut Identity) {
        match self {
            StreamChain::One(c) => c.identity(id),
            StreamChain::Mix(m) => m.identity(id),
        }
    }

    /// The next record of the stream, or `None` at its end.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item>, PipelineError> {
        match self {
            StreamChain::One(c) => c.next_item(),
            StreamChain::Mix(m) => m.next_item(),
        }
    }

    /// Appends the stream's next records to `out`: at least one and at most
    /// `max`, none at its end. A mixture picks a source per record.
    #[inline]
    pub fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        match self {
            StreamChain::One(c) => c.next_run(out, max),
            StreamChain::Mix(m) => {
                out.extend(m.next_item()?);
                Ok(())
            }
        }
    }

    /// Pushes its parts now (what [`restore`](Self::restore) takes back).
    pub fn save(&mut self, parts: &mut SavedParts) {
        match self {
            StreamChain::One(c) => c.save(parts),
            StreamChain::Mix(m) => m.save(parts),
        }
    }

    /// Its parts now, on their own.
    pub fn state(&mut self) -> SavedParts {
        let mut parts = SavedParts::default();
        self.save(&mut parts);
        parts
    }

    /// The records at these (file, offset) positions, read again.
    pub fn read_again(&self, positions: &[Position]) -> Result<Vec<Item>, PipelineError> {
        match self {
            StreamChain::One(c) => c.read_again(positions),
            StreamChain::Mix(m) => m.read_again(positions),
        }
    }

    /// Records taken in and held, not yet passed on (shuffle buffers).
    pub fn held(&self) -> u64 {
        match self {
            StreamChain::One(c) => c.held(),
            StreamChain::Mix(m) => m.held(),
        }
    }
}
