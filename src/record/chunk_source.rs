//! Sources that hand out their bytes as chunks they own, so that a reader
//! slices records straight out of them instead of copying them into a
//! buffer of its own: a local file mapped into memory (the kernel's copy
//! from the page cache was 30% of img's CPU), a cloud object's range reads
//! (their copy into the reader's chunk was ~7%).

use std::io::Read;

use bytes::{Buf, Bytes};

/// Hands out a source's bytes in order, as chunks it owns.
pub(crate) trait ChunkSource: Send {
    /// The next chunk, of about `max` bytes (a source may give more or
    /// fewer), or `None` at the end.
    fn next_chunk(&mut self, max: usize) -> std::io::Result<Option<Bytes>>;
}

/// `head` (bytes already taken from `rest`, to detect the compression;
/// often none), then the rest of the source: read as chunks or through
/// `std::io::Read`.
pub(crate) struct Prefixed<S> {
    pub head: Bytes,
    pub rest: S,
}

impl<S> Prefixed<S> {
    /// `rest` from where it stands, nothing taken before it.
    pub fn whole(rest: S) -> Self {
        Prefixed {
            head: Bytes::new(),
            rest,
        }
    }
}

impl<S: ChunkSource> ChunkSource for Prefixed<S> {
    fn next_chunk(&mut self, max: usize) -> std::io::Result<Option<Bytes>> {
        if self.head.is_empty() {
            return self.rest.next_chunk(max);
        }
        Ok(Some(std::mem::take(&mut self.head)))
    }
}

impl<S: Read> Read for Prefixed<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.head.is_empty() {
            return self.rest.read(buf);
        }
        let n = buf.len().min(self.head.len());
        buf[..n].copy_from_slice(&self.head[..n]);
        self.head.advance(n);
        Ok(n)
    }
}
