//! TFRecord streams and files written for tests.

use std::path::Path;

use infeed::record::{Compression, ReadOptions, Record, RecordReader, RecordWriter};

/// `records` framed as one TFRecord stream, compressed as `c`.
pub fn write_all(records: &[&[u8]], c: Compression) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), c);
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap()
}

/// Every record of the TFRecord file `path`, read with default options;
/// any error fails the test.
pub fn read_file(path: impl AsRef<Path>) -> Vec<Record> {
    let path = path.as_ref();
    let reader = RecordReader::open(path, &ReadOptions::default())
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    reader
        .map(|r| r.unwrap_or_else(|e| panic!("read {}: {e}", path.display())))
        .collect()
}

/// `records` written as the TFRecord file `path`, compressed as `c`; the
/// path as a string (what `Pipeline::from_files` takes).
pub fn write_file<R: AsRef<[u8]>>(
    path: &Path,
    records: impl IntoIterator<Item = R>,
    c: Compression,
) -> String {
    let mut w =
        RecordWriter::create(path, c).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    for (i, r) in records.into_iter().enumerate() {
        w.write_record(r.as_ref())
            .unwrap_or_else(|e| panic!("write record {i} to {}: {e}", path.display()));
    }
    w.finish()
        .unwrap_or_else(|e| panic!("finish {}: {e}", path.display()));
    path.display().to_string()
}

/// Files `shard-{f}.tfrecord` in `dir` (`.tfrecord.gz` when `c` is GZIP),
/// file `f` holding `counts[f]` records named "f{f}-r{i}"; their paths.
pub fn write_files(dir: &Path, counts: &[usize], c: Compression) -> Vec<String> {
    let ext = if c == Compression::Gzip { ".gz" } else { "" };
    counts
        .iter()
        .enumerate()
        .map(|(f, &n)| {
            let path = dir.join(format!("shard-{f}.tfrecord{ext}"));
            write_file(&path, (0..n).map(|i| format!("f{f}-r{i}")), c)
        })
        .collect()
}

/// The byte offset of each record in a file holding `records` in order
/// (12 bytes of header and 4 of footer CRC around each payload).
pub fn offsets<R: AsRef<[u8]>>(records: &[R]) -> Vec<u64> {
    let mut off = 0;
    records
        .iter()
        .map(|r| {
            let o = off;
            off += r.as_ref().len() as u64 + 16;
            o
        })
        .collect()
}

/// Flips a bit of the byte at `at` of the file at `path` in place, keeping
/// its modified time: an index written before still matches the file (its
/// identity is the size, the time and hashes of the first and last 4 KiB),
/// so only the record's own CRC tells.
pub fn corrupt_keeping_time(path: &str, at: u64) {
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x20;
    std::fs::write(path, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
}
