//! The shuffle buffer's storage: records packed end to end in big chunks,
//! so buffered records cost about their payload (DESIGN.md: tf.data's
//! buffer takes ~2.5× its payload) and no record costs an allocation.
//!
//! A record is copied in when it enters (so it never pins the read chunk it
//! was sliced from) and copied out when it leaves, into a shared output
//! chunk that the batch's records are slices of. Leaving records punch holes
//! in the storage chunks; a chunk whose records have all left is reused, and
//! when the chunks hold more than [`SLACK_NUM`]/[`SLACK_DEN`] of the payload
//! (plus two chunks), the live records of the emptiest chunk move to the
//! head chunk and it is freed (greedy cleaning, as in a log-structured
//! store). The slots' order and the positions they name are exactly those of
//! a `Vec` of records, which the checkpoint records.

use bytes::{Bytes, BytesMut};

use super::records::Item;

/// Bytes per storage chunk. Records above a quarter of it get a chunk of
/// their own (freed when they leave).
const CHUNK: usize = 64 << 10;
/// Bytes per output chunk that leaving records are copied into.
const OUT_CHUNK: usize = 256 << 10;
/// Output chunks kept for reuse.
const OUT_RING: usize = 8;
/// Storage may exceed the payload by this ratio (plus two chunks) before
/// the emptiest chunk is cleaned.
const SLACK_NUM: usize = 5;
const SLACK_DEN: usize = 4;
/// Empty chunks kept for reuse.
const SPARE_CHUNKS: usize = 1;

/// Where a buffered record lies.
#[derive(Clone, Copy, Debug)]
struct Loc {
    chunk: u32,
    start: u32,
    len: u32,
}

#[derive(Default)]
struct Chunk {
    data: Vec<u8>,
    /// Payload bytes of the records still buffered here.
    live: usize,
    /// Slots that were given a record here (some may have left since).
    slots: Vec<u32>,
    in_use: bool,
}

/// The shuffle buffer: slots of (record bytes, file, offset).
#[derive(Default)]
pub(crate) struct ShuffleBuffer {
    locs: Vec<Loc>,
    /// Per slot: (file, offset): the checkpoint's view, kept contiguous so
    /// that taking it is one copy.
    positions: Vec<(u32, u64)>,
    chunks: Vec<Chunk>,
    /// Chunks not in use (their storage kept when spare).
    free: Vec<u32>,
    head: Option<u32>,
    /// Sum of the buffered records' lengths.
    payload: usize,
    /// Capacity of the chunks in use or kept spare.
    storage: usize,
    out: BytesMut,
    /// Output chunks used before `out`, oldest first.
    outs: std::collections::VecDeque<BytesMut>,
}

impl ShuffleBuffer {
    /// An empty buffer for up to `slots` records.
    pub fn with_capacity(slots: usize) -> Self {
        Self {
            locs: Vec::with_capacity(slots),
            positions: Vec::with_capacity(slots),
            ..Self::default()
        }
    }

    /// Records buffered.
    pub fn len(&self) -> usize {
        self.locs.len()
    }

    /// True when no record is buffered.
    pub fn is_empty(&self) -> bool {
        self.locs.is_empty()
    }

    /// (file, offset) of each slot's record, in slot order.
    pub fn positions(&self) -> &[(u32, u64)] {
        &self.positions
    }

    /// Bytes the buffered records hold (their payload).
    pub fn payload_bytes(&self) -> usize {
        self.payload
    }

    /// Bytes the buffer has allocated: storage chunks (in use or spare)
    /// plus the slot tables.
    pub fn allocated_bytes(&self) -> usize {
        self.storage
            + self.locs.capacity() * size_of::<Loc>()
            + self.positions.capacity() * size_of::<(u32, u64)>()
            + self
                .chunks
                .iter()
                .map(|c| c.slots.capacity() * size_of::<u32>())
                .sum::<usize>()
            + self.chunks.capacity() * size_of::<Chunk>()
    }

    /// Appends a record in a new last slot.
    pub fn push(&mut self, item: Item) {
        let slot = self.locs.len() as u32;
        let loc = self.store(slot, &item.data);
        self.locs.push(loc);
        self.positions.push((item.file, item.offset));
        self.clean();
    }

    /// Puts `item` in slot `j`, returning the record that was there.
    pub fn replace(&mut self, j: usize, item: Item) -> Option<Item> {
        let old = *self.locs.get(j)?;
        let (file, offset) = self.positions[j];
        let data = self.take_out(old);
        let loc = self.store(j as u32, &item.data);
        self.locs[j] = loc;
        self.positions[j] = (item.file, item.offset);
        self.clean();
        Some(Item { data, file, offset })
    }

    /// Removes slot `j`, moving the last slot into its place (as
    /// `Vec::swap_remove`).
    pub fn swap_remove(&mut self, j: usize) -> Option<Item> {
        let old = *self.locs.get(j)?;
        let (file, offset) = self.positions[j];
        let data = self.take_out(old);
        self.locs.swap_remove(j);
        self.positions.swap_remove(j);
        if let Some(moved) = self.locs.get(j) {
            // The last slot is now slot `j`: its chunk must know.
            let chunk = moved.chunk as usize;
            self.chunks[chunk].slots.push(j as u32);
        }
        self.clean();
        Some(Item { data, file, offset })
    }

    /// Copies `data` into storage for slot `slot`.
    fn store(&mut self, slot: u32, data: &[u8]) -> Loc {
        let len = data.len();
        let chunk = if len > CHUNK / 4 {
            self.new_chunk(len)
        } else {
            match self.head {
                Some(h) if self.chunks[h as usize].data.len() + len <= CHUNK => h,
                _ => {
                    let h = self.new_chunk(CHUNK);
                    self.head = Some(h);
                    h
                }
            }
        };
        let c = &mut self.chunks[chunk as usize];
        let start = c.data.len();
        c.data.extend_from_slice(data);
        c.live += len;
        c.slots.push(slot);
        self.payload += len;
        Loc {
            chunk,
            start: start as u32,
            len: len as u32,
        }
    }

    /// A chunk in use with room for `capacity` bytes.
    fn new_chunk(&mut self, capacity: usize) -> u32 {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.chunks.push(Chunk::default());
                (self.chunks.len() - 1) as u32
            }
        };
        let c = &mut self.chunks[id as usize];
        if c.data.capacity() != capacity {
            self.storage -= c.data.capacity();
            c.data = Vec::with_capacity(capacity);
            self.storage += c.data.capacity();
        }
        c.in_use = true;
        id
    }

    /// Copies the record at `loc` out (into the shared output chunk) and
    /// releases its storage.
    fn take_out(&mut self, loc: Loc) -> Bytes {
        let (start, len) = (loc.start as usize, loc.len as usize);
        if self.out.capacity() - self.out.len() < len {
            self.next_out(len);
        }
        let c = &mut self.chunks[loc.chunk as usize];
        let data = c.data.get(start..start + len).unwrap_or(&[]);
        self.out.extend_from_slice(data);
        let bytes = self.out.split().freeze();
        c.live -= len;
        self.payload -= len;
        if c.live == 0 && self.head != Some(loc.chunk) {
            self.release(loc.chunk);
        }
        bytes
    }

    /// Moves on to an output chunk with room for `len`: the oldest of a
    /// small ring, whose memory is reused in place once every record taken
    /// from it is dropped (fresh memory costs page faults), else new.
    fn next_out(&mut self, len: usize) {
        let full = std::mem::take(&mut self.out);
        self.outs.push_back(full);
        let mut next = if self.outs.len() > OUT_RING {
            self.outs.pop_front().unwrap_or_default()
        } else {
            BytesMut::new()
        };
        next.clear();
        next.reserve(OUT_CHUNK.max(len));
        self.out = next;
    }

    /// Returns an emptied chunk to the free list (keeping its storage only
    /// as a spare of the standard size).
    fn release(&mut self, id: u32) {
        let spares = self
            .free
            .iter()
            .filter(|&&f| self.chunks[f as usize].data.capacity() > 0)
            .count();
        let c = &mut self.chunks[id as usize];
        c.in_use = false;
        c.live = 0;
        c.slots.clear();
        if spares < SPARE_CHUNKS && c.data.capacity() == CHUNK {
            c.data.clear();
        } else {
            self.storage -= c.data.capacity();
            c.data = Vec::new();
        }
        self.free.push(id);
    }

    /// While storage exceeds the allowed slack over the payload, moves the
    /// live records of the emptiest chunk to the head and frees it.
    fn clean(&mut self) {
        let allowed = |payload: usize| payload / SLACK_DEN * SLACK_NUM + 2 * CHUNK;
        // Each round frees a chunk at most 4/5 full (see `allowed`); the
        // bound on rounds is a guard only.
        let mut rounds = self.chunks.len();
        while self.storage > allowed(self.payload) && rounds > 0 {
            rounds -= 1;
            let victim = self
                .chunks
                .iter()
                .enumerate()
                .filter(|&(i, c)| c.in_use && self.head != Some(i as u32))
                .min_by_key(|(_, c)| c.live * CHUNK / c.data.capacity().max(1))
                .map(|(i, _)| i as u32);
            let Some(victim) = victim else { return };
            let v = victim as usize;
            let data = std::mem::take(&mut self.chunks[v].data);
            let slots = std::mem::take(&mut self.chunks[v].slots);
            for &slot in &slots {
                let Some(&loc) = self.locs.get(slot as usize) else {
                    continue;
                };
                if loc.chunk != victim {
                    continue; // left since, or moved already
                }
                let (start, len) = (loc.start as usize, loc.len as usize);
                // Keep the payload count: `store` adds it back.
                self.payload -= len;
                self.chunks[v].live -= len;
                let bytes = data.get(start..start + len).unwrap_or(&[]);
                let new = self.store(slot, bytes);
                self.locs[slot as usize] = new;
            }
            let c = &mut self.chunks[v];
            c.data = data;
            c.slots = slots;
            self.release(victim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: u64, len: usize) -> Item {
        Item {
            data: Bytes::from(vec![(i % 251) as u8; len]),
            file: (i % 3) as u32,
            offset: i,
        }
    }

    /// The memory bound on a fixed input shaped like the lm workload
    /// (10 000 slots of 40..2 056 bytes, 100 000 records through): the
    /// allocation, slot tables included, stays within 1.31x the payload
    /// once the buffer is full (measured peak 1.301x: 1.25x storage, two
    /// spare chunks, 28 bytes of slot tables per record).
    #[test]
    fn memory_stays_near_the_payload() {
        let mut x = 99u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut buf = ShuffleBuffer::with_capacity(10_000);
        let mut worst = 0f64;
        for i in 0..110_000u64 {
            let len = 40 + 4 * rnd(505) as usize;
            if buf.len() < 10_000 {
                buf.push(item(i, len));
                continue;
            }
            let j = rnd(10_000) as usize;
            buf.replace(j, item(i, len));
            let ratio = buf.allocated_bytes() as f64 / buf.payload_bytes() as f64;
            worst = worst.max(ratio);
        }
        assert!(worst <= 1.31, "allocated/payload reached {worst:.3}");
        // Storage alone: 5/4 of the payload plus two chunks.
        assert!(buf.storage <= buf.payload_bytes() / 4 * 5 + 2 * CHUNK);
        // ~10 MB of payload.
        assert!((9_500_000..11_000_000).contains(&buf.payload_bytes()));
    }

    /// A plain `Vec` model: the buffer must give the same records in the
    /// same slots under any sequence of operations.
    #[test]
    fn matches_a_vec_of_records() {
        let mut x = 12345u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut model: Vec<Item> = Vec::new();
        let mut buf = ShuffleBuffer::with_capacity(500);
        for i in 0..40_000u64 {
            let len = match rnd(10) {
                0 => rnd(40_000) as usize, // some records get their own chunk
                _ => rnd(3000) as usize,
            };
            if model.len() < 500 && rnd(4) != 0 {
                model.push(item(i, len));
                buf.push(item(i, len));
            } else if !model.is_empty() && rnd(3) == 0 {
                let j = rnd(model.len() as u64) as usize;
                let want = model.swap_remove(j);
                let got = buf.swap_remove(j).unwrap();
                assert_eq!(
                    (got.data, got.file, got.offset),
                    (want.data, want.file, want.offset)
                );
            } else if !model.is_empty() {
                let j = rnd(model.len() as u64) as usize;
                let want = std::mem::replace(&mut model[j], item(i, len));
                let got = buf.replace(j, item(i, len)).unwrap();
                assert_eq!(
                    (got.data, got.file, got.offset),
                    (want.data, want.file, want.offset)
                );
            }
            assert_eq!(buf.len(), model.len());
            let payload: usize = model.iter().map(|m| m.data.len()).sum();
            assert_eq!(buf.payload_bytes(), payload);
            assert!(buf.storage <= payload / SLACK_DEN * SLACK_NUM + 2 * CHUNK);
        }
        let positions: Vec<(u32, u64)> = model.iter().map(|m| (m.file, m.offset)).collect();
        assert_eq!(buf.positions(), positions.as_slice());
        while !model.is_empty() {
            let want = model.swap_remove(0);
            let got = buf.swap_remove(0).unwrap();
            assert_eq!(got.data, want.data);
        }
        assert_eq!(buf.payload_bytes(), 0);
        assert!(buf.storage <= 2 * CHUNK);
    }
}
