//! Maps of local shards for the workers: [`map_shard`] maps one whole (a
//! worker's own map, or an unread shard's for its long records), and
//! [`SharedMaps`] holds one map per shard of a pipeline that every worker
//! reads through.
//!
//! A batch of records scattered over the shards (a global shuffle's, or a
//! shuffle buffer's under `worker_reads`) holds few neighbours: read by
//! `pread`, each record is a system call of its own (the global shuffle
//! read that way ran at 0.80-0.87 M lm records/s on 2 cores where its own
//! thread had read 0.93-1.03 M), and maps of each worker's own, kept for
//! the 16 most recent shards, would be made and dropped per record over a
//! dataset of thousands of shards, each worker with page tables of its
//! own. One map per shard for the pipeline, as random access keeps
//! (`index/access.rs`), costs neither: a record is a view of it. Every
//! map is made through `record::mapped`, so a shard cut short under it is
//! an error of the deframer that reads it, not a signal.

use std::sync::OnceLock;

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

/// One map per shard of a pipeline's files, by file number, made on the
/// first read of the shard and kept for the pipeline's life; shared by
/// its workers.
pub(crate) struct SharedMaps {
    /// Per file: its URL once mapped, and the map (`None`: it could not be
    /// mapped; the reader reads it another way, which names why).
    maps: Vec<OnceLock<Option<(String, Bytes)>>>,
}

impl SharedMaps {
    /// Maps for files numbered `0..files`, none made yet.
    pub fn new(files: usize) -> Self {
        SharedMaps {
            maps: (0..files).map(|_| OnceLock::new()).collect(),
        }
    }

    /// `len` bytes at `offset` of file `file` at `url`, a view of its map;
    /// `None` when it has no map here (a number past the files, a file
    /// that cannot be mapped, another URL under that number) or is shorter
    /// than that (cut, or grown since it was mapped): the caller then reads
    /// the run another way, and names what is wrong.
    pub fn range(&self, file: u32, url: &str, offset: u64, len: u64) -> Option<Bytes> {
        let slot = self.maps.get(file as usize)?;
        let (mapped_url, map) = slot
            .get_or_init(|| map_shard(url).ok().map(|map| (url.to_owned(), map)))
            .as_ref()?;
        let end = offset.checked_add(len)?;
        (mapped_url == url && end <= map.len() as u64)
            .then(|| map.slice(offset as usize..end as usize))
    }
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
}
