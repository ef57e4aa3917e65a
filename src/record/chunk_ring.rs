//! Read buffers used again once every record sliced from them is dropped.
//!
//! Readers hand their chunks downstream as `Bytes` and records are slices
//! of them, so a chunk lives as long as its last record. Fresh memory for
//! each chunk costs a page fault per 4 KiB (and std zeroes a buffer that a
//! boxed reader fills): ~10% of a plain read + CRC. The ring keeps the last
//! few chunks a reader handed out and reads into one of them again as soon
//! as nothing else references it.
//!
//! A reader of a many-shard pipeline lives for one shard (ctr: 7 MB, seven
//! chunks), so its own ring rarely gets to reuse anything: four of its
//! seven chunks were fresh pages, 78 000 faults per 400 MB read. While a
//! pipeline holds a [`SpareHold`], a ring made with [`ChunkRing::shared`]
//! therefore leaves its chunks, when it is dropped, in a process-wide
//! [`SpareList`] that the next shard's reader takes from. The list holds at
//! most [`SPARE_MAX`] chunks (the in-flight chunks of 16 interleaved
//! shards), drops the oldest beyond that, and is emptied when the last hold
//! is dropped, so a process with no pipeline keeps nothing.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

/// Chunks kept per reader. A shard's records sit in the reader's channel,
/// the record thread's current block and the batches in flight, ~8 chunks
/// in the raw pipeline: fewer kept and none is ever free to reuse. Memory
/// stays at the chunks in use plus one, since a free chunk is reused first.
const KEPT: usize = 16;

/// Chunks a spare list holds at most.
const SPARE_MAX: usize = 64;

/// The process's spare list.
static SPARE: Spares = Mutex::new(SpareList::new());

type Spares = Mutex<SpareList>;

/// Chunks that dropped shared rings left for the next reader, while any
/// hold is alive.
pub(crate) struct SpareList {
    chunks: VecDeque<Bytes>,
    holds: usize,
}

impl SpareList {
    const fn new() -> Self {
        SpareList {
            chunks: VecDeque::new(),
            holds: 0,
        }
    }

    /// Takes `chunks` (none when nothing holds the list), dropping the
    /// oldest beyond [`SPARE_MAX`].
    fn offer(&mut self, chunks: impl Iterator<Item = Bytes>) {
        if self.holds == 0 {
            return;
        }
        self.chunks.extend(chunks);
        while self.chunks.len() > SPARE_MAX {
            self.chunks.pop_front();
        }
    }

    /// A chunk nothing references any more, of at least `size` bytes but
    /// not four times more (a small inflate piece must not take a read
    /// chunk).
    fn take(&mut self, size: usize) -> Option<Bytes> {
        let fits = |c: &Bytes| c.is_unique() && (size..=size.saturating_mul(4)).contains(&c.len());
        let i = self.chunks.iter().position(fits)?;
        self.chunks.remove(i)
    }
}

fn lock(spares: &Spares) -> MutexGuard<'_, SpareList> {
    spares.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps a spare list in use while it lives (a pipeline's record stream
/// holds one); the last hold dropped empties it.
pub(crate) struct SpareHold(&'static Spares);

impl SpareHold {
    /// A hold on the process's spare list.
    pub fn new() -> Self {
        Self::on(&SPARE)
    }

    fn on(spares: &'static Spares) -> Self {
        lock(spares).holds += 1;
        SpareHold(spares)
    }
}

impl Drop for SpareHold {
    fn drop(&mut self) {
        let mut list = lock(self.0);
        list.holds -= 1;
        if list.holds == 0 {
            let chunks = std::mem::take(&mut list.chunks);
            drop(list);
            // Freed outside the lock.
            drop(chunks);
        }
    }
}

#[derive(Default)]
pub(crate) struct ChunkRing {
    kept: VecDeque<Bytes>,
    /// The spare list it takes from when none of its own chunks is free,
    /// and leaves its chunks to when dropped.
    spares: Option<&'static Spares>,
}

impl ChunkRing {
    /// A ring that shares through the process's spare list.
    pub fn shared() -> Self {
        Self::sharing(&SPARE)
    }

    fn sharing(spares: &'static Spares) -> Self {
        ChunkRing {
            kept: VecDeque::new(),
            spares: Some(spares),
        }
    }

    /// A buffer with room for `size` bytes, its contents initialized up to
    /// its length: a kept chunk nothing else references any more (oldest
    /// first), else a spare one, else new zeroed memory (which the
    /// allocator maps lazily, without writing it).
    pub fn take(&mut self, size: usize) -> Vec<u8> {
        self.reuse(size).unwrap_or_else(|| vec![0; size])
    }

    /// A kept (or spare) chunk nothing else references any more, with room
    /// for `size` bytes (its contents initialized up to its length), if
    /// there is one.
    pub fn reuse(&mut self, size: usize) -> Option<Vec<u8>> {
        let own = self.kept.iter().position(Bytes::is_unique);
        let chunk = match own {
            Some(i) => self.kept.remove(i),
            None => self.spares.and_then(|s| lock(s).take(size)),
        }?;
        let reusable = chunk.try_into_mut().ok()?;
        (reusable.capacity() >= size).then(|| reusable.into())
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

impl Drop for ChunkRing {
    fn drop(&mut self) {
        if let Some(spares) = self.spares
            && !self.kept.is_empty()
        {
            lock(spares).offer(self.kept.drain(..));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished reader's chunks serve the next reader while a hold is
    /// alive: released ones only, the right size only, and none once the
    /// last hold is gone.
    #[test]
    fn a_dropped_ring_leaves_its_chunks_to_the_next_while_held() {
        static LIST: Spares = Mutex::new(SpareList::new());
        let hold = SpareHold::on(&LIST);
        let mut first = ChunkRing::sharing(&LIST);
        let a = Bytes::from(first.take(1 << 20));
        let b = Bytes::from(first.take(1 << 20));
        let small = Bytes::from(first.take(1 << 16));
        for chunk in [&a, &b, &small] {
            first.keep(chunk);
        }
        let (a_at, b_at) = (a.as_ptr(), b.as_ptr());
        let record = b.slice(0..10);
        drop((a, b, small));
        drop(first);
        let mut next = ChunkRing::sharing(&LIST);
        // `a` is free; `b` is still referenced by a record.
        let (again, fresh) = (next.take(1 << 20), next.take(1 << 20));
        assert_eq!(again.as_ptr(), a_at);
        assert_ne!(fresh.as_ptr(), b_at);
        drop(record);
        // A 64 KiB piece does not take a 1 MiB chunk, but the 64 KiB one.
        assert_eq!(next.reuse(1 << 16).map(|v| v.len()), Some(1 << 16));
        let b_again = next.take(1 << 20);
        assert_eq!(b_again.as_ptr(), b_at);
        assert_eq!(next.reuse(1 << 20), None);
        // No hold: a dropped ring's chunks are freed, not kept.
        let c = Bytes::from(next.take(1 << 20));
        next.keep(&c);
        drop(c);
        drop(hold);
        drop(next);
        assert!(lock(&LIST).chunks.is_empty());
        assert_eq!(ChunkRing::sharing(&LIST).reuse(1 << 20), None);
    }

    /// The list keeps the newest chunks up to its bound.
    #[test]
    fn the_spare_list_keeps_the_newest_chunks() {
        let mut list = SpareList::new();
        list.holds = 1;
        let chunks: Vec<Bytes> = (0..SPARE_MAX + 3)
            .map(|i| Bytes::from(vec![i as u8; 8]))
            .collect();
        list.offer(chunks.iter().cloned());
        assert_eq!(list.chunks.len(), SPARE_MAX);
        assert_eq!(list.chunks[0][0], 3);
        list.holds = 0;
        list.offer(chunks.iter().cloned());
        assert_eq!(list.chunks.len(), SPARE_MAX);
    }

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
