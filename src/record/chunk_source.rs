//! Sources that hand out their bytes as chunks they own, so that a reader
//! slices records straight out of them instead of copying them into a
//! buffer of its own: a local file mapped into memory (the kernel's copy
//! from the page cache was 30% of img's CPU), a cloud object's range reads
//! (their copy into the reader's chunk was ~7%).

use bytes::Bytes;

/// Hands out a source's bytes in order, as chunks it owns.
pub(crate) trait ChunkSource: Send {
    /// The next chunk, of about `max` bytes (a source may give more or
    /// fewer), or `None` at the end.
    fn next_chunk(&mut self, max: usize) -> std::io::Result<Option<Bytes>>;
}

/// `head` (bytes already taken from `rest`, to detect the compression),
/// then the rest of the source.
pub(crate) struct Prefixed<S> {
    pub head: Option<Bytes>,
    pub rest: S,
}

impl<S: ChunkSource> ChunkSource for Prefixed<S> {
    fn next_chunk(&mut self, max: usize) -> std::io::Result<Option<Bytes>> {
        match self.head.take() {
            Some(head) if !head.is_empty() => Ok(Some(head)),
            _ => self.rest.next_chunk(max),
        }
    }
}
