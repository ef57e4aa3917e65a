//! Reading a shard's records for the engine: [`blocks`] (the shard reader
//! thread, which reads, inflates, frames and checks one shard and hands its
//! records over in blocks) and [`again`] (records read again at their
//! positions, for a restore; a file's first records, for a sample; a
//! record's index, for an error), [`unread`] (which shards' records a shard
//! thread leaves unread, and how it frames them) and [`in_workers`] (those
//! records read by the worker that assembles them), with
//! [`shared_maps`] (maps of the shards, one per shard, that workers read
//! scattered records through). The record ops and the start of a pipeline
//! read through here; it knows no op.

pub(crate) mod again;
pub(crate) mod blocks;
pub(crate) mod in_workers;
pub(crate) mod shared_maps;
pub(crate) mod unread;

#[cfg(test)]
pub(crate) mod testing {
    use crate::record::{Compression, RecordWriter};

    /// Records of 100 bytes, "f{f}-r{i}" padded with the file's letter.
    pub fn record(f: usize, i: usize) -> Vec<u8> {
        let mut r = format!("f{f}-r{i}-").into_bytes();
        r.resize(100, b'a' + f as u8);
        r
    }

    /// Writes `n` records to each of `files` GZIP shards.
    pub fn gzip_shards(dir: &std::path::Path, files: usize, n: usize) -> Vec<String> {
        (0..files)
            .map(|f| {
                let path = dir.join(format!("s{f}.tfrecord.gz"));
                let mut w = RecordWriter::create(&path, Compression::Gzip).unwrap();
                for i in 0..n {
                    w.write_record(&record(f, i)).unwrap();
                }
                w.finish().unwrap();
                path.display().to_string()
            })
            .collect()
    }
}
