//! Read buffers used again once every record sliced from them is dropped.
//!
//! Readers hand their chunks downstream as `Bytes` and records are slices
//! of them, so a chunk lives as long as its last record. Fresh memory for
//! each chunk costs a page fault per 4 KiB (and std zeroes a buffer that a
//! boxed reader fills): ~10% of a plain read + CRC. The ring keeps the last
//! few chunks a reader handed out and reads into one of them again as soon
//! as nothing else references it.

use std::collections::VecDeque;

use bytes::Bytes;

/// Chunks kept per reader. A shard's records sit in the reader's channel,
/// the record thread's current block and the batches in flight, ~8 chunks
/// in the raw pipeline: fewer kept and none is ever free to reuse. Memory
/// stays at the chunks in use plus one, since a free chunk is reused first.
const KEPT: usize = 16;

#[derive(Default)]
pub(crate) struct ChunkRing {
    kept: VecDeque<Bytes>,
}

impl ChunkRing {
    /// A buffer with room for `size` bytes, its contents initialized up to
    /// its length: a kept chunk nothing else references any more (oldest
    /// first), else new zeroed memory (which the allocator maps lazily,
    /// without writing it).
    pub fn take(&mut self, size: usize) -> Vec<u8> {
        self.reuse(size).unwrap_or_else(|| vec![0; size])
    }

    /// A kept chunk nothing else references any more, with room for `size`
    /// bytes (its contents initialized up to its length), if there is one.
    pub fn reuse(&mut self, size: usize) -> Option<Vec<u8>> {
        if let Some(i) = self.kept.iter().position(Bytes::is_unique)
            && let Some(chunk) = self.kept.remove(i)
            && let Ok(reusable) = chunk.try_into_mut()
            && reusable.capacity() >= size
        {
            return Some(reusable.into());
        }
        None
    }

    /// Remembers `chunk`, handed downstream, to read into again once it is
    /// released.
    pub fn keep(&mut self, chunk: &Bytes) {
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back(chunk.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_chunk_is_reused_in_place_and_a_held_one_is_not() {
        let mut ring = ChunkRing::default();
        let first = Bytes::from(ring.take(1 << 20));
        let address = first.as_ptr();
        ring.keep(&first);
        let record = first.slice(10..20);
        drop(first);
        // A record still holds the chunk: new memory.
        let second = ring.take(1 << 20);
        assert_ne!(second.as_ptr(), address);
        assert_eq!(second.len(), 1 << 20);
        drop(record);
        // Released: the same memory, its bytes still initialized.
        let third = ring.take(1 << 20);
        assert_eq!(third.as_ptr(), address);
        assert_eq!(third.len(), 1 << 20);
        // It left the ring: taking again gives new memory.
        let fourth = ring.take(1 << 20);
        assert_ne!(fourth.as_ptr(), third.as_ptr());
    }

    #[test]
    fn keeps_only_the_last_few_chunks() {
        let mut ring = ChunkRing::default();
        let chunks: Vec<Bytes> = (0..KEPT + 2).map(|_| Bytes::from(vec![1u8; 64])).collect();
        for c in &chunks {
            ring.keep(c);
        }
        let newest: Vec<_> = chunks[2..].iter().map(|c| c.as_ptr()).collect();
        drop(chunks);
        let taken: Vec<Vec<u8>> = (0..KEPT).map(|_| ring.take(64)).collect();
        assert!(taken.iter().all(|t| newest.contains(&t.as_ptr())));
    }
}
