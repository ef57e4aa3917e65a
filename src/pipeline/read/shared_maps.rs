//! Maps of local shards for the workers: [`map_shard`] maps one whole (a
//! worker's own map, or an unread shard's for its long records), and
//! [`SharedMaps`] holds one map per shard of a pipeline that every worker
//! reads through.
//!
//! A batch of records scattered over the shards (a global shuffle's, or a
//! shuffle buffer's of unread records) holds few neighbours: read by
//! `pread`, each record is a system call of its own (the global shuffle
//! read that way ran at 0.80-0.87 M lm records/s on 2 cores where its own
//! thread had read 0.93-1.03 M), and maps of each worker's own, kept for
//! the 16 most recent shards, would be made and dropped per record over a
//! dataset of thousands of shards, each worker with page tables of its
//! own. One map per shard for the pipeline, as random access keeps
//! (`index/access.rs`), costs neither: a record is a view of it. Every
//! map is made through `record::mapped`, so a shard cut short under it is
//! an error of the deframer that reads it, not a signal.
//!
//! A page read through a map counts in the process's RSS for as long as
//! the map lives, and these live as long as the pipeline: a shuffle over
//! a dataset of many shards would count every page it ever read (an lm
//! run over 4 × 100 MB peaked at 439 MiB where its buffer held 1 MiB). So
//! under a shuffle buffer, once the shards mapped pass [`MAPPED_BUDGET`]
//! (a dataset that fits stays mapped: letting its pages go cost a second
//! pass over lm's 400 MB 1-6% on 2 cores, faulting them in again), every
//! [`RELEASE_EVERY`] bytes read through them, the pages behind where each shard is read are let go
//! (`mapped::release_pages`): all but the last bytes before the end of the
//! furthest run its last batch read, twice as many as the buffer's
//! records take (at least [`KEPT_BEHIND`]), and the whole of a shard not
//! read since the time before. A record read from a page let go is
//! faulted in again from the page cache. Not the pages about where each
//! shard is read: letting go of those too cost lm 4-9% on 2 cores, and
//! keeping only 16 MiB behind cost img with a buffer of 100 000 records
//! (300 MB) 30% (they were faulted in again after each time).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use bytes::Bytes;

use crate::record::mapped;
use crate::record::{ErrorKind, RecordError};

/// Maps the local shard `url` whole: to cut views of its long records
/// from (an unread shard's), a worker's own map under `ReadOptions::mmap`,
/// or a shard's shared map ([`SharedMaps`]).
pub(crate) fn map_shard(url: &str) -> Result<Bytes, RecordError> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    let io = |e: std::io::Error| RecordError::new(url, 0, ErrorKind::from_io(e));
    let file = std::fs::File::open(path).map_err(io)?;
    // A map read through is read by a deframer, and a shard cut short
    // under it is that deframer's error (`record::mapped`).
    mapped::map_whole(&file).map_err(io)
}

/// Bytes read through the shared maps between two lets-go of their pages.
pub(crate) const RELEASE_EVERY: u64 = 64 << 20;

/// Bytes of a shard kept mapped behind where it is read, at least, when
/// its pages are let go.
pub(crate) const KEPT_BEHIND: u64 = 16 << 20;

/// Bytes of shards mapped in all below which no page is let go.
pub(crate) const MAPPED_BUDGET: u64 = 1 << 30;

/// When the pages of shared maps are let go.
#[derive(Clone, Copy)]
pub(crate) struct Release {
    /// Every this many bytes read through them.
    pub every: u64,
    /// Keeping as many behind where each shard is read as this many
    /// records take, twice over, and at least [`KEPT_BEHIND`].
    pub buffer: u64,
    /// Once the shards mapped pass this many bytes.
    pub budget: u64,
}

/// One map per shard of a pipeline's files, by file number, made on the
/// first read of the shard and kept for the pipeline's life; shared by
/// its workers.
pub(crate) struct SharedMaps {
    /// Per file: its URL once mapped, and the map (`None`: it could not be
    /// mapped; the reader reads it another way, which names why).
    maps: Vec<OnceLock<Option<(String, Bytes)>>>,
    /// Per file: read through since its pages were last let go; let go
    /// whole since it was last read.
    touched: Vec<AtomicBool>,
    idle: Vec<AtomicBool>,
    /// Per file: the end of the furthest run the last batch that read it
    /// read (where it is read, by the workers' last word).
    frontier: Vec<AtomicU64>,
    /// Bytes and records read through the maps, as the workers report
    /// them, and bytes of the shards mapped.
    read: AtomicU64,
    records: AtomicU64,
    mapped: AtomicU64,
    /// `None`: never let go.
    release: Option<Release>,
}

impl SharedMaps {
    /// Maps for files numbered `0..files`, none made yet, whose pages are
    /// never let go: the global shuffle's, whose reads are spread over the
    /// whole dataset, so the kernel's fault-around (64 KiB mapped about
    /// each fault) maps a small dataset whole again between two lets-go,
    /// which cost it a fifth of its speed on 2 cores (lm, 4 × 100 MB).
    pub fn new(files: usize) -> Self {
        Self::releasing(files, None)
    }

    /// Maps whose pages are let go every [`RELEASE_EVERY`] bytes read: a
    /// shuffle buffer's, of `buffer` records, whose reads stay about the
    /// parts of the shards it holds.
    pub fn for_shuffle_buffer(files: usize, buffer: usize) -> Self {
        let release = Release {
            every: RELEASE_EVERY,
            buffer: buffer as u64,
            budget: MAPPED_BUDGET,
        };
        Self::releasing(files, Some(release))
    }

    /// [`new`](Self::new), letting pages go as `release` says.
    pub fn releasing(files: usize, release: Option<Release>) -> Self {
        SharedMaps {
            maps: (0..files).map(|_| OnceLock::new()).collect(),
            touched: (0..files).map(|_| AtomicBool::new(false)).collect(),
            idle: (0..files).map(|_| AtomicBool::new(false)).collect(),
            frontier: (0..files).map(|_| AtomicU64::new(0)).collect(),
            read: AtomicU64::new(0),
            records: AtomicU64::new(0),
            mapped: AtomicU64::new(0),
            release: release.map(|r| Release {
                every: r.every.max(1),
                ..r
            }),
        }
    }

    /// Counts a batch's reads through the maps, once per batch: `bytes`
    /// of `records` in all, and for each shard it read, where its furthest
    /// run ended (`ends`: `(file, end)`). The call that passes a multiple
    /// of the release size lets go of the pages behind where each shard is
    /// read.
    pub fn note_read(&self, bytes: u64, records: u64, ends: impl Iterator<Item = (u32, u64)>) {
        let Some(Release {
            every,
            buffer,
            budget,
        }) = self.release
        else {
            return;
        };
        for (file, end) in ends {
            // Loaded first: most batches leave it where it was.
            if let Some(frontier) = self.frontier.get(file as usize)
                && frontier.load(Relaxed) != end
            {
                frontier.store(end, Relaxed);
            }
        }
        let read = self.records.fetch_add(records, Relaxed) + records;
        let before = self.read.fetch_add(bytes, Relaxed);
        if before / every == (before + bytes) / every || self.mapped.load(Relaxed) <= budget {
            return;
        }
        let per_record = (before + bytes) / read.max(1);
        let kept_behind = buffer
            .saturating_mul(2)
            .saturating_mul(per_record)
            .max(KEPT_BEHIND);
        for (k, slot) in self.maps.iter().enumerate() {
            let Some(Some((_, map))) = slot.get() else {
                continue;
            };
            let behind = if self.touched[k].swap(false, Relaxed) {
                self.frontier[k].load(Relaxed).saturating_sub(kept_behind)
            } else if !self.idle[k].swap(true, Relaxed) {
                map.len() as u64
            } else {
                continue;
            };
            let behind = (behind as usize).min(map.len());
            mapped::release_pages(&map[..behind]);
        }
    }

    /// `len` bytes at `offset` of file `file` at `url`, a view of its map
    /// ([`map`](Self::map)); `None` where it has none or is shorter.
    #[cfg(test)]
    pub fn range(&self, file: u32, url: &str, offset: u64, len: u64) -> Option<Bytes> {
        let map = self.map(file, url)?;
        let end = offset.checked_add(len)?;
        (end <= map.len() as u64).then(|| map.slice(offset as usize..end as usize))
    }

    /// The map of file `file` at `url`, counted as read through; `None`
    /// when it has no map here (a number past the files, a file that
    /// cannot be mapped, another URL under that number): the caller then
    /// reads the run another way, and names what is wrong (as it does for
    /// a run past the map's end: a file cut, or grown since it was
    /// mapped). A reader that slices it for every record should slice a
    /// handle of its own ([`own_handle`]), not this one, whose count every
    /// reader shares.
    pub fn map(&self, file: u32, url: &str) -> Option<&Bytes> {
        let slot = self.maps.get(file as usize)?;
        let (mapped_url, map) = slot
            .get_or_init(|| {
                let map = map_shard(url).ok()?;
                self.mapped.fetch_add(map.len() as u64, Relaxed);
                Some((url.to_owned(), map))
            })
            .as_ref()?;
        if mapped_url != url {
            return None;
        }
        // Loaded before it is stored: the line stays shared among the
        // workers that read the shard, not written by each for each run.
        let touched = &self.touched[file as usize];
        if !touched.load(Relaxed) {
            touched.store(true, Relaxed);
            self.idle[file as usize].store(false, Relaxed);
        }
        Some(map)
    }
}

/// A handle of `map` with a reference count of its own: the views sliced
/// from it (a record's, each raised and lowered a few times on its way
/// through a worker) count on a line that one worker writes, where views of
/// the shared map had every worker's core take that line from the others'
/// for every record. The shared map's own count is raised once.
pub(crate) fn own_handle(map: &Bytes) -> Bytes {
    Bytes::from_owner(map.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view is the file's bytes at its place; a range past the end, a
    /// number past the files, another URL under a mapped number and a
    /// file that is not there have none.
    #[test]
    fn a_range_is_a_view_of_the_files_bytes_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"0123456789").unwrap();
        std::fs::write(&b, b"abcdefghij").unwrap();
        let (a, b) = (a.display().to_string(), b.display().to_string());
        let maps = SharedMaps::new(3);
        assert_eq!(maps.range(0, &a, 2, 5).as_deref(), Some(&b"23456"[..]));
        // A worker's own handle is the same bytes.
        let own = own_handle(maps.map(0, &a).unwrap());
        assert_eq!(&own.slice(2..7)[..], b"23456");
        assert_eq!(own.as_ptr(), maps.map(0, &a).unwrap().as_ptr());
        assert_eq!(
            maps.range(0, &a, 0, 10).as_deref(),
            Some(&b"0123456789"[..])
        );
        assert_eq!(maps.range(0, &a, 6, 5), None);
        assert_eq!(maps.range(0, &b, 0, 1), None);
        assert_eq!(maps.range(1, &b, 9, 1).as_deref(), Some(&b"j"[..]));
        assert_eq!(maps.range(3, &a, 0, 1), None);
        let gone = dir.path().join("gone").display().to_string();
        assert_eq!(maps.range(2, &gone, 0, 1), None);
    }

    /// The kilobytes of the process's RSS in the map that holds `addr`
    /// (`/proc/self/smaps`).
    #[cfg(target_os = "linux")]
    fn rss_kb_at(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((from, to)) = range.split_once('-')
                && let (Ok(from), Ok(to)) = (
                    usize::from_str_radix(from, 16),
                    usize::from_str_radix(to, 16),
                )
            {
                inside = (from..to).contains(&addr);
            } else if inside && let Some(kb) = line.strip_prefix("Rss:") {
                return kb.trim().trim_end_matches(" kB").trim().parse().unwrap();
            }
        }
        panic!("no map holds {addr:#x}");
    }

    /// Pages read through the maps leave the RSS once the bytes read pass
    /// the release size: those behind where the shard is read, or the
    /// whole shard once it is not read for a while; read again they are
    /// the same bytes.
    #[cfg(target_os = "linux")]
    #[test]
    fn pages_read_through_are_let_go_every_so_many_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        let mib = 1u64 << 20;
        let bytes: Vec<u8> = (0..20 * mib).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let url = path.display().to_string();
        // Let go every MiB read, keeping the least behind: a buffer of 4
        // records of 1 MiB would keep 8 MiB; none keeps 16.
        let release = |buffer| Release {
            every: mib,
            buffer,
            budget: 0,
        };
        let maps = SharedMaps::releasing(1, Some(release(4)));
        let whole = maps.range(0, &url, 0, 20 * mib).unwrap();
        assert_eq!(whole[..], bytes[..]);
        let addr = whole.as_ptr() as usize;
        let kb = |m: u64| m * 1024;
        assert!(rss_kb_at(addr) >= kb(20), "{}", rss_kb_at(addr));
        // 20 records of 1 MiB read, the last run ending at 19 MiB: what
        // lies before 3 MiB is let go once a MiB is read in all.
        let at = |end: u64| std::iter::once((0, end));
        maps.note_read(mib - 1, 19, at(19 * mib));
        assert!(rss_kb_at(addr) >= kb(20));
        maps.note_read(1, 1, at(19 * mib));
        // (A page-cache folio of 2 MiB mapped whole may go whole.)
        let left = rss_kb_at(addr);
        assert!((kb(16)..=kb(17)).contains(&left), "{left}");
        // Not read since the last time: let go whole, once.
        maps.note_read(mib, 0, at(19 * mib));
        assert_eq!(rss_kb_at(addr), 0);
        assert_eq!(whole[..], bytes[..]);
        assert!(rss_kb_at(addr) >= kb(20));
        maps.note_read(mib, 0, at(19 * mib));
        assert!(rss_kb_at(addr) >= kb(20));
        // A larger buffer keeps more behind: 10 records of ~1 MiB, twice.
        let wide = SharedMaps::releasing(1, Some(release(10)));
        let whole = wide.range(0, &url, 0, 20 * mib).unwrap();
        assert_eq!(whole[..], bytes[..]);
        let addr = whole.as_ptr() as usize;
        wide.note_read(20 * mib, 20, at(20 * mib));
        assert_eq!(rss_kb_at(addr), kb(20), "{}", rss_kb_at(addr));
        // Under the budget of bytes mapped, nothing is let go.
        let budget = Release {
            budget: 20 * mib,
            ..release(0)
        };
        let within = SharedMaps::releasing(1, Some(budget));
        let whole = within.range(0, &url, 0, 20 * mib).unwrap();
        assert_eq!(whole[..], bytes[..]);
        let addr = whole.as_ptr() as usize;
        within.note_read(20 * mib, 20, at(20 * mib));
        within.note_read(20 * mib, 20, at(20 * mib));
        assert_eq!(rss_kb_at(addr), kb(20), "{}", rss_kb_at(addr));
    }
}
