//! Small shards kept whole after a pass, for the passes after it: a shard
//! that its reader had to read (compressed, from an object store, or needed
//! before the workers) and that fits the room left is kept as its checked
//! records, so a dataset read many times is inflated, fetched and checked
//! once, not once an epoch (a fine-tuning set; the quick start's GZIP
//! sample read 1 000 times). Shards left unread for the workers need no
//! keeping: what their walks learned frames them again (`unread.rs`).
//!
//! A kept shard is what its first whole pass read. A local one is checked
//! against its file's size and modification time each time it is opened,
//! and read again when either changed (a rewrite to the same size within
//! the file system's time resolution, or one that keeps the time, as
//! `cp -p` does, is not seen); an object in a store is taken to stay as it
//! was read for the run, as every reader of a run takes it.
//!
//! What a first pass copies of a shard it then finds too large is bounded:
//! a local file, an object or a compressed file over [`SHARD_BYTES`] is
//! never copied (its size is known once it is open), and a compressed one
//! that inflates past it is copied up to it once, then never tried again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;

use super::unread::{HandOn, is_local};
use crate::pipeline::stats::StageStats;
use crate::record::{ReadOptions, Record};

/// Bytes of records a pipeline keeps in all (each record counted with
/// [`RECORD_COST`]): enough for a fine-tuning set of tens of thousands of
/// records; a larger dataset is read each pass, as before.
pub(crate) const KEPT_BYTES: u64 = 64 << 20;

/// Bytes of records one shard may take (counted likewise): a shard larger
/// is read each pass; what a first pass copies before it finds one too
/// large is bounded by this, once.
const SHARD_BYTES: u64 = 16 << 20;

/// What keeping a record costs beside its bytes: its own allocation and
/// reference count, its offset and measured length.
const RECORD_COST: u64 = 64;

/// The shards a pipeline keeps, by URL and the read options that make
/// their records (a mixture's sources share one room, and may read one
/// file with other options), up to a number of bytes in all.
pub(crate) struct Kept {
    shards: Mutex<HashMap<String, Arc<KeptShard>>>,
    /// Shards found too large for the room: not copied again on each pass
    /// only to be dropped at the room's end.
    too_large: Mutex<HashSet<String>>,
    /// Bytes it may still keep.
    room: AtomicU64,
}

/// A shard's records as its whole pass read and checked them, each with
/// its measured length where the pass measured them.
pub(crate) struct KeptShard {
    records: Vec<Record>,
    /// Empty where nothing was measured.
    lengths: Vec<u32>,
    /// A local file's size and modification time when it was read.
    version: Option<(u64, SystemTime)>,
    /// What it takes of the room.
    bytes: u64,
}

impl Kept {
    pub fn new(bytes: u64) -> Self {
        Kept {
            shards: Mutex::default(),
            too_large: Mutex::default(),
            room: AtomicU64::new(bytes),
        }
    }

    /// The kept records of `url` read with `read`, if they were kept and
    /// (for a local file) it has not changed since; `measured`: only if
    /// their lengths were measured.
    pub fn get(&self, url: &str, read: &ReadOptions, measured: bool) -> Option<Arc<KeptShard>> {
        let shard = self.shards.lock().ok()?.get(&key(url, read)).cloned()?;
        if measured && shard.lengths.is_empty() && !shard.records.is_empty() {
            return None;
        }
        if shard.version.is_some() && version(url) != shard.version {
            return None;
        }
        Some(shard)
    }

    /// Starts keeping a pass of `url` read whole, unless it is known not
    /// to fit: found too large on an earlier pass, or a local file larger
    /// than the room left or [`SHARD_BYTES`] (its records are at least its
    /// bytes less their frames, compressed or not: counted with their
    /// cost, more).
    pub fn keeping(self: &Arc<Self>, url: &str, read: &ReadOptions) -> Option<Keeping> {
        let key = key(url, read);
        let room = self.room.load(Relaxed);
        if room == 0 || self.too_large.lock().ok()?.contains(&key) {
            return None;
        }
        // Taken before the read: a file changed during it is read again. A
        // local file whose time cannot be had is never kept.
        let version = version(url);
        if is_local(url) && version.is_none() {
            return None;
        }
        if version.is_some_and(|(len, _)| len > room.min(SHARD_BYTES)) {
            return None;
        }
        Some(Keeping {
            kept: self.clone(),
            url: key,
            version,
            records: Vec::new(),
            lengths: Vec::new(),
            bytes: 0,
        })
    }
}

/// What a shard is kept by: its URL and the options that make its records
/// (compression, CRC checks, the largest record, the corrupt-record policy).
fn key(url: &str, read: &ReadOptions) -> String {
    format!(
        "{url}\0{:?}\0{}\0{}\0{:?}",
        read.compression, read.verify_crc, read.max_record_size, read.on_corrupt
    )
}

/// A local file's size and modification time (`None` for an object in a
/// store, or a file whose time cannot be had).
pub(super) fn version(url: &str) -> Option<(u64, SystemTime)> {
    if !is_local(url) {
        return None;
    }
    let path = url.strip_prefix("file://").unwrap_or(url);
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// A pass being kept: copies of its records as they are handed on, their
/// cost taken from the room as they are copied (so passes kept at once
/// never hold more than the room), and given back unless kept.
pub(crate) struct Keeping {
    kept: Arc<Kept>,
    /// What it is kept by ([`key`]).
    url: String,
    version: Option<(u64, SystemTime)>,
    records: Vec<Record>,
    lengths: Vec<u32>,
    bytes: u64,
}

impl Keeping {
    /// Goes on only for a shard of `size` bytes (an object's, or a
    /// compressed file's, known once it is open) that may fit: a shard's
    /// records are about its bytes or more. One that cannot is not tried
    /// again (a large object learns its access points instead).
    pub fn sized(mut self, size: u64) -> Option<Self> {
        if size <= SHARD_BYTES {
            return Some(self);
        }
        if let Ok(mut too_large) = self.kept.too_large.lock() {
            too_large.insert(std::mem::take(&mut self.url));
        }
        None
    }

    /// Copies a block of records (and their measured lengths); false once
    /// the pass has outgrown [`SHARD_BYTES`] (when the shard is not tried
    /// again) or the room left (which passes given up may give back: tried
    /// again on the next pass), when nothing more is kept.
    pub fn add(&mut self, block: &[Record], lengths: &[u32]) -> bool {
        let cost: u64 = block.iter().map(|r| r.data.len() as u64).sum::<u64>()
            + RECORD_COST * block.len() as u64;
        if self.bytes + cost > SHARD_BYTES {
            if let Ok(mut too_large) = self.kept.too_large.lock() {
                too_large.insert(std::mem::take(&mut self.url));
            }
            return false;
        }
        let room = &self.kept.room;
        if room
            .fetch_update(Relaxed, Relaxed, |room| room.checked_sub(cost))
            .is_err()
        {
            return false;
        }
        self.bytes += cost;
        // Each its own allocation: its reference count is its own, not one
        // that every record of the shard would pass between the cores.
        self.records.extend(block.iter().map(|r| Record {
            data: Bytes::copy_from_slice(&r.data),
            offset: r.offset,
        }));
        self.lengths.extend_from_slice(lengths);
        true
    }

    /// The whole pass was read cleanly (nothing skipped): kept, unless the
    /// same version is kept already (a pass read ahead of the first one's
    /// end, of a file read once an epoch); it replaces a version that
    /// changed, and gives back that one's room.
    pub fn finish(mut self) {
        let kept = self.kept.clone();
        let Ok(mut shards) = kept.shards.lock() else {
            return;
        };
        let old = shards.get(&self.url);
        if old.is_some_and(|old| old.version == self.version) {
            return;
        }
        if let Some(old) = old {
            kept.room.fetch_add(old.bytes, Relaxed);
        }
        let shard = KeptShard {
            records: std::mem::take(&mut self.records),
            lengths: std::mem::take(&mut self.lengths),
            version: self.version,
            // Its room is the shard's now.
            bytes: std::mem::take(&mut self.bytes),
        };
        shards.insert(std::mem::take(&mut self.url), Arc::new(shard));
    }
}

impl Drop for Keeping {
    /// A pass not kept gives its room back.
    fn drop(&mut self) {
        self.kept.room.fetch_add(self.bytes, Relaxed);
    }
}

impl KeptShard {
    /// Records from the record boundary `start` on.
    pub(super) fn left_from(&self, start: u64) -> usize {
        let first = self.records.partition_point(|r| r.offset < start);
        self.records.len() - first
    }

    /// Hands its records from the record boundary `start` on to `out`, in
    /// blocks of the size `out` asks for, counting them into `stats` as
    /// read; returns early when nothing takes them any more.
    pub(crate) fn hand_on(&self, start: u64, stats: &StageStats, out: &impl HandOn) {
        let mut i = self.records.partition_point(|r| r.offset < start);
        while i < self.records.len() {
            let block_bytes = out.block_bytes();
            let (from, mut bytes) = (i, 0);
            while i < self.records.len() && bytes < block_bytes {
                bytes += self.records[i].data.len() as u64 + 16;
                i += 1;
            }
            let block = self.records[from..i].to_vec();
            let lengths = self.lengths.get(from..i).unwrap_or_default().to_vec();
            stats.add_records(block.len() as u64);
            stats.add_bytes(bytes);
            if !out.hand_on(block, lengths) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Taker;
    use super::*;

    fn records(lens: &[usize]) -> Vec<Record> {
        let mut offset = 0;
        lens.iter()
            .enumerate()
            .map(|(i, &n)| {
                let r = Record {
                    data: Bytes::from(vec![i as u8; n]),
                    offset,
                };
                offset += n as u64 + 16;
                r
            })
            .collect()
    }

    fn keep(kept: &Arc<Kept>, url: &str, block: &[Record], lengths: &[u32]) -> bool {
        let mut keeping = kept.keeping(url, &ReadOptions::default()).unwrap();
        let fits = keeping.add(block, lengths);
        if fits {
            keeping.finish();
        }
        fits
    }

    /// A kept shard hands on its records (copies, at their offsets, with
    /// their lengths) from any record boundary, in blocks of the size
    /// asked for, and counts them as read.
    #[test]
    fn a_kept_shard_hands_on_its_records_from_a_boundary() {
        let kept = Arc::new(Kept::new(1 << 20));
        let block = records(&[10, 0, 300, 7]);
        assert!(keep(&kept, "gs://b/s.tfrecord.gz", &block, &[1, 2, 3, 4]));
        let shard = kept
            .get("gs://b/s.tfrecord.gz", &ReadOptions::default(), true)
            .unwrap();
        assert!(!std::ptr::eq(
            shard.records[0].data.as_ptr(),
            block[0].data.as_ptr()
        ));
        for (start, first) in [(0, 0), (26, 1), (27, 2), (42, 2), (1000, 4)] {
            let taker = Taker::new(1);
            let stats = StageStats::default();
            shard.hand_on(start, &stats, &taker);
            let blocks = taker.blocks.into_inner();
            assert!(blocks.iter().all(|b| b.len() == 1));
            assert_eq!(blocks.concat(), block[first..], "from {start}");
            assert_eq!(taker.lengths.into_inner(), [1, 2, 3, 4][first..]);
            assert_eq!(shard.left_from(start), 4 - first);
            assert_eq!(stats.figures().records, (4 - first) as u64);
        }
        let taker = Taker::new(1 << 20);
        shard.hand_on(0, &StageStats::default(), &taker);
        assert_eq!(taker.blocks.into_inner().len(), 1);
    }

    /// Shards are kept while they fit the room left, counted with their
    /// records' cost; one that does not fit is not kept, nor is one whose
    /// lengths are asked for but were not measured; the room a shard did
    /// not take is left to the next.
    #[test]
    fn shards_are_kept_within_the_room_left() {
        let one = records(&[100, 100]);
        let cost = 200 + 2 * RECORD_COST;
        let kept = Arc::new(Kept::new(2 * cost + 10));
        assert!(keep(&kept, "gs://b/a", &one, &[]));
        assert!(
            kept.get("gs://b/a", &ReadOptions::default(), false)
                .is_some()
        );
        assert!(
            kept.get("gs://b/a", &ReadOptions::default(), true)
                .is_none()
        );
        // The same version again (a pass read ahead) takes no more room.
        let room = kept.room.load(Relaxed);
        assert!(keep(&kept, "gs://b/a", &one, &[]));
        assert_eq!(kept.room.load(Relaxed), room);
        assert!(!keep(
            &kept,
            "gs://b/big",
            &records(&[2 * cost as usize]),
            &[]
        ));
        assert!(
            kept.get("gs://b/big", &ReadOptions::default(), false)
                .is_none()
        );
        // Short of room, not too large: tried again.
        assert!(
            kept.keeping("gs://b/big", &ReadOptions::default())
                .is_some()
        );
        assert!(keep(&kept, "gs://b/c", &one, &[]));
        assert!(!keep(&kept, "gs://b/d", &one, &[]));
        assert!(
            kept.get("gs://b/d", &ReadOptions::default(), false)
                .is_none()
        );
    }

    /// A pass takes its room as it copies, so passes kept at once never
    /// hold more than the room; one not kept gives it back; a shard over
    /// [`SHARD_BYTES`] is not kept, whatever the room.
    #[test]
    fn passes_take_their_room_as_they_copy_and_give_it_back_unless_kept() {
        let one = records(&[100, 100]);
        let cost = 200 + 2 * RECORD_COST;
        let kept = Arc::new(Kept::new(cost + 1));
        let room = || kept.room.load(Relaxed);
        let mut first = kept.keeping("gs://b/a", &ReadOptions::default()).unwrap();
        let mut second = kept.keeping("gs://b/b", &ReadOptions::default()).unwrap();
        assert!(first.add(&one, &[]));
        assert_eq!(room(), 1);
        assert!(!second.add(&one, &[]));
        drop(second);
        drop(first);
        assert_eq!(room(), cost + 1);
        assert!(keep(&kept, "gs://b/a", &one, &[]));
        assert_eq!(room(), 1);
        let roomy = Arc::new(Kept::new(4 * SHARD_BYTES));
        let mut large = roomy
            .keeping("gs://b/large", &ReadOptions::default())
            .unwrap();
        assert!(!large.add(&records(&[SHARD_BYTES as usize]), &[]));
        drop(large);
        assert_eq!(roomy.room.load(Relaxed), 4 * SHARD_BYTES);
        // Found too large once, not copied again.
        assert!(
            roomy
                .keeping("gs://b/large", &ReadOptions::default())
                .is_none()
        );
        // Nor is one whose size, once open, says it is too large, nor is
        // it tried again (a large object learns its access points instead).
        let sized = |size| {
            roomy
                .keeping("gs://b/c", &ReadOptions::default())?
                .sized(size)
        };
        assert!(sized(SHARD_BYTES).is_some());
        assert!(sized(SHARD_BYTES + 1).is_none());
        assert!(roomy.keeping("gs://b/c", &ReadOptions::default()).is_none());
    }

    /// A shard kept as read with some options is not another reader's
    /// with others (a mixture's sources may read one file unchecked and
    /// checked).
    #[test]
    fn a_shard_is_kept_for_the_options_it_was_read_with() {
        let kept = Arc::new(Kept::new(1 << 20));
        let unchecked = ReadOptions {
            verify_crc: false,
            ..ReadOptions::default()
        };
        let mut keeping = kept.keeping("gs://b/a", &unchecked).unwrap();
        assert!(keeping.add(&records(&[10]), &[]));
        keeping.finish();
        assert!(kept.get("gs://b/a", &unchecked, false).is_some());
        assert!(
            kept.get("gs://b/a", &ReadOptions::default(), false)
                .is_none()
        );
    }

    /// A local file larger than the room is not kept (nor copied).
    #[test]
    fn a_local_file_larger_than_the_room_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tfrecord.gz");
        std::fs::write(&path, [0; 100]).unwrap();
        let url = path.display().to_string();
        assert!(
            Arc::new(Kept::new(99))
                .keeping(&url, &ReadOptions::default())
                .is_none()
        );
        assert!(
            Arc::new(Kept::new(100))
                .keeping(&url, &ReadOptions::default())
                .is_some()
        );
    }

    /// A local shard changed since it was kept is not handed on from what
    /// was kept (its size here; its time likewise).
    #[test]
    fn a_local_shard_changed_since_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tfrecord.gz");
        std::fs::write(&path, b"first").unwrap();
        let url = path.display().to_string();
        let kept = Arc::new(Kept::new(1 << 20));
        assert!(keep(&kept, &url, &records(&[3]), &[]));
        assert!(kept.get(&url, &ReadOptions::default(), false).is_some());
        let room = kept.room.load(Relaxed);
        std::fs::write(&path, b"rewritten").unwrap();
        assert!(kept.get(&url, &ReadOptions::default(), false).is_none());
        // Kept again, in the old one's room.
        assert!(keep(&kept, &url, &records(&[5]), &[]));
        assert_eq!(
            kept.get(&url, &ReadOptions::default(), false)
                .unwrap()
                .records[0]
                .data
                .len(),
            5
        );
        assert_eq!(kept.room.load(Relaxed), room - 2);
    }
}
