//! The shuffle buffer's storage: records cut into 128-byte blocks chained
//! like a file system's clusters, so buffered records cost about their
//! payload (tf.data's buffer is reported to take ~2.5× its payload) and no
//! record costs an allocation.
//!
//! A record is copied in when it enters (so it never pins the read chunk it
//! was sliced from) and copied out when it leaves, into a shared output
//! chunk that the batch's records are slices of. The blocks of a leaving
//! record go to the front of the free list in chain order, so the record
//! that replaces it is written into the same (still cached) blocks. Any
//! free block serves any record: there is no fragmentation to clean up and
//! a record is never copied twice while buffered. The waste is the unused
//! tail of each record's last block (64 bytes on average) and a 4-byte link
//! per block.
//!
//! Two kinds of record are held outside the blocks, as they are:
//! - a record of a mapped file ([`Item::mapped`]) of [`HOLD_MIN`] bytes or
//!   more is kept as its view, not copied at all: it pins page-cache
//!   pages, which the kernel can reclaim (and read again), not heap memory.
//!   Copying it in and out was half the record thread's time, the
//!   pipeline's limiting stage, on img. A shorter one is copied: read
//!   later from a random place in the page cache it cost more than the
//!   copy (ctr's 260-byte records ran 5% slower held);
//! - a record above [`LARGE`] gets an allocation of its own, handed on when
//!   it leaves, so a rare huge record does not grow the block pool for
//!   good.
//!
//! The slots' order and the positions they name are exactly those of a
//! `Vec` of records, which the checkpoint records.

use bytes::{Bytes, BytesMut};

use crate::pipeline::item::Item;
use crate::pipeline::read::unread::{is_short_stand_in, short_stand_in};
use crate::prefetch::{prefetch, prefetch_value};

use super::slots::{SlotLog, SlotPositions};

/// Bytes per block.
const BLOCK: usize = 128;
/// Blocks per page of the block pool (64 KiB pages).
const PAGE_BLOCKS: usize = 512;
/// Bytes of a leaving record fetched ahead into the cache.
const PREFETCH_BYTES: usize = 16 * BLOCK;
/// Mapped records of at least this many bytes are held as they are.
const HOLD_MIN: usize = 1024;
/// Records longer than this get an allocation of their own.
const LARGE: usize = 64 << 10;
/// Bytes per output chunk that leaving records are copied into.
const OUT_CHUNK: usize = 256 << 10;
/// Output chunks kept for reuse.
const OUT_RING: usize = 8;
/// The end of a chain.
const END: u32 = u32::MAX;

/// Where a buffered record lies: its first block, or, for a record held
/// outside the blocks, its index in `outside`; its length, and how it is
/// kept.
#[derive(Clone, Copy, Debug)]
struct Loc {
    first: u32,
    len: u32,
    /// The record's [`Item::measured`], carried through the buffer.
    measured: u32,
    kept: Kept,
}

/// How a buffered record is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// Copied into a chain of blocks.
    Blocks,
    /// Copied into an allocation of its own (longer than [`LARGE`]).
    Large,
    /// Held as it came: a view of a mapped file.
    Mapped,
    /// Held as it came: an unread record (read by the workers), a stand-in of
    /// its length that nothing here may read, holding no memory: the
    /// worker of its batch reads it.
    Unread,
    /// An unread record whose stand-in is its length alone
    /// (`unread::short_stand_in`): only the length is kept, and the
    /// stand-in made again as it leaves, so its slot is the only line a
    /// draw touches (the table of records held outside was a cache miss
    /// per record: lm's record thread under a 10 000-record buffer).
    StandIn,
}

/// The shuffle buffer: slots of (record bytes, file, offset).
#[derive(Default)]
pub(crate) struct ShuffleBuffer {
    locs: Vec<Loc>,
    /// Per slot: (file, offset), the checkpoint's view, with the log that
    /// lets a state share it (`slots.rs`).
    slots: SlotLog,
    /// The block pool, `PAGE_BLOCKS` blocks a page.
    pages: Vec<Box<[u8]>>,
    /// Per block: the next block of its record's chain, or of the free list.
    next: Vec<u32>,
    /// The first free block.
    free: u32,
    /// Records held outside the blocks (mapped views, and copies of
    /// records longer than `LARGE`), by index; `None` where a record left.
    outside: Vec<Option<Bytes>>,
    outside_free: Vec<u32>,
    /// Sum of the large records' lengths.
    large_bytes: usize,
    /// Sum of the lengths of the records the buffer stores (in blocks or
    /// large copies).
    payload: usize,
    /// Sum of the lengths of the mapped records it holds.
    mapped: usize,
    out: BytesMut,
    /// Output chunks used before `out`, oldest first.
    outs: std::collections::VecDeque<BytesMut>,
}

impl ShuffleBuffer {
    /// An empty buffer for up to `slots` records.
    pub fn with_capacity(slots: usize) -> Self {
        Self {
            locs: Vec::with_capacity(slots),
            slots: SlotLog::with_capacity(slots),
            free: END,
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

    /// (file, offset) of each slot's record, in slot order, for a state
    /// (shared, not copied: `slots.rs`).
    pub fn share_positions(&mut self) -> SlotPositions {
        self.slots.share()
    }

    /// Bytes of the records the buffer stores (their payload).
    pub fn payload_bytes(&self) -> usize {
        self.payload
    }

    /// Bytes of the mapped records it holds (page cache, not its own).
    pub fn mapped_bytes(&self) -> usize {
        self.mapped
    }

    /// Bytes the buffer has allocated: the block pool and its links, large
    /// records, and the slot tables.
    pub fn allocated_bytes(&self) -> usize {
        self.pages.len() * PAGE_BLOCKS * BLOCK
            + self.next.capacity() * size_of::<u32>()
            + self.large_bytes
            + self.outside.capacity() * size_of::<Option<Bytes>>()
            + self.outside_free.capacity() * size_of::<u32>()
            + self.locs.capacity() * size_of::<Loc>()
            + self.slots.allocated_bytes()
    }

    /// Appends a record in a new last slot.
    #[inline]
    pub fn push(&mut self, item: Item) {
        self.slots.push((item.file, item.offset));
        let loc = self.store(item);
        self.locs.push(loc);
    }

    /// Puts `item` in slot `j`, returning the record that was there.
    #[inline]
    pub fn replace(&mut self, j: usize, item: Item) -> Option<Item> {
        let old = *self.locs.get(j)?;
        let (file, offset) = self.slots.set(j, (item.file, item.offset));
        let data = self.take_out(old);
        self.locs[j] = self.store(item);
        Some(leaving(data, file, offset, old))
    }

    /// Removes slot `j`, moving the last slot into its place (as
    /// `Vec::swap_remove`).
    #[inline]
    pub fn swap_remove(&mut self, j: usize) -> Option<Item> {
        let old = *self.locs.get(j)?;
        let (file, offset) = self.slots.swap_remove(j);
        let data = self.take_out(old);
        self.locs.swap_remove(j);
        Some(leaving(data, file, offset, old))
    }

    /// Asks the CPU to load slot `j`'s lines in the slot tables (a hint:
    /// by address only, so it waits for nothing). A draw lands on a random
    /// slot: without it each table is a cache miss per record.
    #[inline]
    pub fn prefetch_slot(&self, j: usize) {
        if let Some(loc) = self.locs.get(j) {
            prefetch_value(loc);
            self.slots.prefetch(j);
        }
    }

    /// Asks the CPU to load slot `j`'s blocks into cache (a hint: it
    /// changes no data). A leaving record sits at a random slot, so its
    /// blocks are cache misses unless fetched ahead. Reads the slot (asked
    /// for by [`prefetch_slot`](Self::prefetch_slot) earlier), only where a
    /// record may be in blocks: none is when every record held is unread
    /// or mapped.
    #[inline]
    pub fn prefetch_record(&self, j: usize) {
        let Some(loc) = self.locs.get(j) else { return };
        if self.payload == 0 || loc.kept != Kept::Blocks {
            return;
        }
        // The first blocks only: a small record whole, the start of a large
        // one (more prefetches in flight than the CPU's fill buffers stall
        // it, and the copy's own sequential reads are fetched ahead anyway).
        let (mut b, mut left) = (loc.first, (loc.len as usize).min(PREFETCH_BYTES));
        while left > 0 && b != END {
            let (page, at) = block_at(b);
            prefetch(&self.pages[page][at..at + BLOCK]);
            left = left.saturating_sub(BLOCK);
            b = self.next[b as usize];
        }
    }

    /// Stores `item`'s record: holds it as it came if it is unread, or a
    /// view of a mapped file; else copies it.
    fn store(&mut self, item: Item) -> Loc {
        let (data, measured) = (item.data, item.measured);
        let len = data.len();
        let kept = if item.unread && is_short_stand_in(&data) {
            Kept::StandIn
        } else if item.unread {
            Kept::Unread
        } else if item.mapped && len >= HOLD_MIN {
            Kept::Mapped
        } else if len > LARGE {
            Kept::Large
        } else {
            Kept::Blocks
        };
        if kept == Kept::StandIn {
            return Loc {
                first: END,
                len: len as u32,
                measured,
                kept,
            };
        }
        if kept != Kept::Blocks {
            let record = match kept {
                Kept::Unread => data,
                Kept::Mapped => {
                    self.mapped += len;
                    data
                }
                _ => {
                    self.payload += len;
                    self.large_bytes += len;
                    Bytes::copy_from_slice(&data)
                }
            };
            let index = match self.outside_free.pop() {
                Some(i) => {
                    self.outside[i as usize] = Some(record);
                    i
                }
                None => {
                    self.outside.push(Some(record));
                    (self.outside.len() - 1) as u32
                }
            };
            return Loc {
                first: index,
                len: len as u32,
                measured,
                kept,
            };
        }
        self.payload += len;
        let mut first = END;
        let mut last = END;
        // Blocks that follow each other in a page are copied as one run
        // (one `memcpy` for a whole record while chains stay in order).
        let (mut run, mut run_from) = (END, 0);
        for i in 0..len.div_ceil(BLOCK) {
            let b = self.alloc_block();
            match last {
                END => first = b,
                l => self.next[l as usize] = b,
            }
            if run == END || !follows(last, b) {
                if run != END {
                    self.copy_in(run, &data[run_from..i * BLOCK]);
                }
                (run, run_from) = (b, i * BLOCK);
            }
            last = b;
        }
        if last != END {
            self.copy_in(run, &data[run_from..]);
            self.next[last as usize] = END;
        }
        Loc {
            first,
            len: len as u32,
            measured,
            kept: Kept::Blocks,
        }
    }

    /// A free block, taken from the front of the free list (a new page's
    /// blocks are added when it is empty).
    fn alloc_block(&mut self) -> u32 {
        if self.free == END {
            let base = self.next.len();
            self.pages
                .push(vec![0u8; PAGE_BLOCKS * BLOCK].into_boxed_slice());
            self.next
                .extend((base + 1..base + PAGE_BLOCKS).map(|b| b as u32));
            self.next.push(END);
            self.free = base as u32;
        }
        let b = self.free;
        self.free = self.next[b as usize];
        b
    }

    /// Copies `bytes` into the run of blocks that starts at block `b`.
    fn copy_in(&mut self, b: u32, bytes: &[u8]) {
        let (page, at) = block_at(b);
        self.pages[page][at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// Takes the record at `loc` out: one held outside the blocks as it
    /// is, one in blocks copied into the shared output chunk (its blocks
    /// freed).
    fn take_out(&mut self, loc: Loc) -> Bytes {
        let len = loc.len as usize;
        if loc.kept == Kept::StandIn {
            return short_stand_in(len).unwrap_or_default();
        }
        if loc.kept != Kept::Blocks {
            match loc.kept {
                Kept::Large => {
                    self.large_bytes -= len;
                    self.payload -= len;
                }
                Kept::Mapped => self.mapped -= len,
                _ => {}
            }
            self.outside_free.push(loc.first);
            return self.outside[loc.first as usize].take().unwrap_or_default();
        }
        if self.out.capacity() - self.out.len() < len {
            self.next_out(len);
        }
        self.payload -= len;
        let (mut b, mut left) = (loc.first, len);
        let mut last = END;
        while left > 0 && b != END {
            // The run of blocks that follow each other from `b`: one copy.
            let (page, at) = block_at(b);
            let mut n = BLOCK;
            let mut end = b;
            while n < left && follows(end, self.next[end as usize]) {
                end = self.next[end as usize];
                n += BLOCK;
            }
            let n = n.min(left);
            self.out.extend_from_slice(&self.pages[page][at..at + n]);
            left -= n;
            last = end;
            b = self.next[end as usize];
        }
        if last != END {
            // The whole chain goes to the front of the free list, in order.
            self.next[last as usize] = self.free;
            self.free = loc.first;
        }
        self.out.split().freeze()
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
}

/// A record leaving the buffer, with the length it came with: a held view
/// of a mapped file stays marked as one, so that a grouper that keeps it
/// waiting holds it as it is instead of copying it again (see
/// `group::compact`).
#[inline]
fn leaving(data: Bytes, file: u32, offset: u64, loc: Loc) -> Item {
    Item {
        mapped: loc.kept == Kept::Mapped,
        unread: matches!(loc.kept, Kept::Unread | Kept::StandIn),
        measured: loc.measured,
        ..Item::new(data, file, offset)
    }
}

/// True when block `b` directly follows block `a` in the same page.
#[inline]
fn follows(a: u32, b: u32) -> bool {
    b != END && b == a.wrapping_add(1) && !(b as usize).is_multiple_of(PAGE_BLOCKS)
}

/// Page and byte offset in it of block `b`.
fn block_at(b: u32) -> (usize, usize) {
    (b as usize / PAGE_BLOCKS, b as usize % PAGE_BLOCKS * BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::item::UNMEASURED;

    /// Record `i`: every fifth one unmeasured, the others measured `i`.
    fn item(i: u64, len: usize) -> Item {
        let data = (0..len).map(|k| (i as usize * 7 + k) as u8);
        Item {
            measured: if i.is_multiple_of(5) {
                UNMEASURED
            } else {
                i as u32
            },
            ..Item::new(Bytes::from(data.collect::<Vec<_>>()), (i % 3) as u32, i)
        }
    }

    /// A seeded generator: `rnd(n)` is in `0..n`.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    /// `item`, marked as a view of a mapped file.
    fn mapped(i: u64, len: usize) -> Item {
        Item {
            mapped: true,
            ..item(i, len)
        }
    }

    /// The memory bound on a fixed input shaped like the lm workload
    /// (10 000 slots of 40..2 056 bytes, 100 000 records through): the
    /// allocation, slot tables included, stays within 1.25x the payload
    /// once the buffer is full. On average ~1.12x: half a block of tail per
    /// record (6%), 4 bytes of link per block (3%), 24 bytes of slot tables
    /// per record (2%); the pool keeps its peak size while the payload
    /// wanders, so the worst ratio seen is higher (measured 1.158x).
    #[test]
    fn memory_stays_near_the_payload() {
        let mut rnd = xorshift(99);
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
        assert!(worst <= 1.2, "allocated/payload reached {worst:.3}");
        // ~10 MB of payload.
        assert!((9_500_000..11_000_000).contains(&buf.payload_bytes()));
    }

    /// A large record gets its own allocation and gives it back.
    #[test]
    fn large_records_are_freed_when_they_leave() {
        let mut buf = ShuffleBuffer::with_capacity(4);
        buf.push(item(1, 100));
        let before = buf.allocated_bytes();
        buf.push(item(2, 3 * LARGE));
        assert!(buf.allocated_bytes() >= before + 3 * LARGE);
        let out = buf.swap_remove(1).unwrap();
        assert_eq!(out.data, item(2, 3 * LARGE).data);
        // Only the large-record table remains (a few bytes of slots).
        assert!(buf.allocated_bytes() < before + 256);
        buf.push(item(3, LARGE + 1));
        assert_eq!(buf.outside.len(), 1, "the large slot is reused");
    }

    /// A plain `Vec` model: the buffer must give the same records (with
    /// the lengths they came with) in the same slots under any sequence of
    /// operations.
    #[test]
    fn matches_a_vec_of_records() {
        let mut rnd = xorshift(12345);
        let mut model: Vec<Item> = Vec::new();
        let mut buf = ShuffleBuffer::with_capacity(500);
        for i in 0..40_000u64 {
            let len = match rnd(10) {
                0 => rnd(200_000) as usize,   // some records are large
                1 => rnd(3) as usize * BLOCK, // whole blocks, and empty records
                _ => rnd(3000) as usize,
            };
            // Some are views of mapped files (held if long enough).
            let item = |i: u64, len| match i % 4 {
                0 => mapped(i, len),
                _ => item(i, len),
            };
            if model.len() < 500 && rnd(4) != 0 {
                model.push(item(i, len));
                buf.push(item(i, len));
            } else if !model.is_empty() && rnd(3) == 0 {
                let j = rnd(model.len() as u64) as usize;
                let want = model.swap_remove(j);
                let got = buf.swap_remove(j).unwrap();
                assert_eq!(
                    (got.data, got.file, got.offset, got.measured),
                    (want.data, want.file, want.offset, want.measured)
                );
            } else if !model.is_empty() {
                let j = rnd(model.len() as u64) as usize;
                let want = std::mem::replace(&mut model[j], item(i, len));
                let got = buf.replace(j, item(i, len)).unwrap();
                assert_eq!(
                    (got.data, got.file, got.offset, got.measured),
                    (want.data, want.file, want.offset, want.measured)
                );
            }
            assert_eq!(buf.len(), model.len());
            let total: usize = model.iter().map(|m| m.data.len()).sum();
            assert_eq!(buf.payload_bytes() + buf.mapped_bytes(), total);
        }
        let positions: Vec<(u32, u64)> = model.iter().map(|m| (m.file, m.offset)).collect();
        assert_eq!(buf.slots.now(), positions.as_slice());
        assert_eq!(buf.share_positions().to_vec(), positions);
        while !model.is_empty() {
            let want = model.swap_remove(0);
            let got = buf.swap_remove(0).unwrap();
            assert_eq!(got.data, want.data);
        }
        assert_eq!((buf.payload_bytes(), buf.mapped_bytes()), (0, 0));
        assert!(buf.outside.iter().all(Option::is_none));
        // Every block is free again: the free list holds the whole pool.
        let (mut free, mut b) = (0, buf.free);
        while b != END {
            free += 1;
            b = buf.next[b as usize];
        }
        assert_eq!(free, buf.pages.len() * PAGE_BLOCKS);
    }

    /// A mapped record of `HOLD_MIN` bytes or more is held as it came and
    /// handed on as it is (the same bytes in memory, no copy); a shorter
    /// one is copied into blocks like any other.
    #[test]
    fn mapped_records_are_held_not_copied() {
        let mut buf = ShuffleBuffer::with_capacity(4);
        let long = mapped(1, HOLD_MIN);
        let at = long.data.as_ptr();
        buf.push(long);
        buf.push(mapped(2, HOLD_MIN - 1));
        assert_eq!(buf.mapped_bytes(), HOLD_MIN);
        assert_eq!(buf.payload_bytes(), HOLD_MIN - 1);
        assert_eq!(
            buf.allocated_bytes(),
            buf.pages.len() * PAGE_BLOCKS * BLOCK + slot_tables(&buf)
        );
        let out = buf.replace(0, item(3, 10)).unwrap();
        assert_eq!(out.data, item(1, HOLD_MIN).data);
        assert!(
            std::ptr::eq(out.data.as_ptr(), at),
            "handed on without a copy"
        );
        assert!(out.mapped, "still marked as a view of a mapped file");
        let short = mapped(4, HOLD_MIN - 1);
        let at = short.data.as_ptr();
        buf.push(short);
        let out = buf.swap_remove(2).unwrap();
        assert_eq!(out.data, item(4, HOLD_MIN - 1).data);
        assert!(!std::ptr::eq(out.data.as_ptr(), at), "copied");
        assert!(!out.mapped, "a copy in the buffer's own memory");
        assert_eq!(buf.mapped_bytes(), 0);
    }

    /// An unread record (read by the workers) of any length is held as it came,
    /// counted as neither the buffer's bytes nor mapped ones, and handed on
    /// still unread: a copy would read it here, unchecked.
    #[test]
    fn unread_records_are_held_and_leave_unread() {
        let mut buf = ShuffleBuffer::with_capacity(4);
        let unread = |i, len| Item {
            unread: true,
            ..item(i, len)
        };
        let short = unread(1, 10);
        let at = short.data.as_ptr();
        buf.push(short);
        buf.push(unread(2, LARGE + 1));
        assert_eq!((buf.payload_bytes(), buf.mapped_bytes()), (0, 0));
        let out = buf.replace(0, item(3, 10)).unwrap();
        assert!(out.unread && !out.mapped);
        assert!(std::ptr::eq(out.data.as_ptr(), at), "handed on as it came");
        let out = buf.swap_remove(1).unwrap();
        assert!(out.unread);
        assert_eq!(out.data, item(2, LARGE + 1).data);
        assert_eq!(buf.payload_bytes(), 10);
        // A short stand-in is kept as its length, nothing held outside,
        // and leaves as a stand-in of that length, measured as it came.
        let stand_in = Item {
            unread: true,
            measured: 7,
            ..Item::new(short_stand_in(300).unwrap(), 2, 40)
        };
        let outside = buf.outside.iter().flatten().count();
        buf.push(stand_in);
        assert_eq!(buf.outside.iter().flatten().count(), outside);
        let out = buf.swap_remove(1).unwrap();
        assert!(out.unread && !out.mapped && is_short_stand_in(&out.data));
        assert_eq!(
            (out.data.len(), out.file, out.offset, out.measured),
            (300, 2, 40, 7)
        );
    }

    /// The slot tables' share of `allocated_bytes`.
    fn slot_tables(buf: &ShuffleBuffer) -> usize {
        buf.next.capacity() * size_of::<u32>()
            + buf.outside.capacity() * size_of::<Option<Bytes>>()
            + buf.outside_free.capacity() * size_of::<u32>()
            + buf.locs.capacity() * size_of::<Loc>()
            + buf.slots.allocated_bytes()
    }
}
