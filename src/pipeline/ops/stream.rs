//! What a record thread runs: one record chain, or a mixture of several
//! ([`mix`](super::mix)), behind one face.

use crate::pipeline::checkpoint::SavedParts;
use crate::pipeline::error::PipelineError;

use super::Item;
use super::chain::RecordChain;
use super::mix::MixChain;

/// A logical stream's records.
// One per record thread: boxing the larger variant would add a pointer
// chase to every record for no memory worth saving.
#[allow(clippy::large_enum_variant)]
pub(crate) enum StreamChain {
    One(RecordChain),
    Mix(MixChain),
}

impl StreamChain {
    /// The next record of the stream, or `None` at its end.
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item>, PipelineError> {
        match self {
            StreamChain::One(c) => c.next_item(),
            StreamChain::Mix(m) => m.next_item(),
        }
    }

    /// Its parts now.
    pub fn state(&mut self) -> SavedParts {
        match self {
            StreamChain::One(c) => c.state(),
            StreamChain::Mix(m) => m.state(),
        }
    }

    /// The records at these (file, offset) positions, read again.
    pub fn read_again(&self, positions: &[(u32, u64)]) -> Result<Vec<Item>, PipelineError> {
        match self {
            StreamChain::One(c) => c.read_again(positions),
            StreamChain::Mix(m) => m.read_again(positions),
        }
    }
}
