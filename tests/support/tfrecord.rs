//! TFRecord streams and files written for tests.

use std::path::Path;

use infeed::record::{Compression, RecordWriter};

/// `records` framed as one TFRecord stream, compressed as `c`.
pub fn write_all(records: &[&[u8]], c: Compression) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), c);
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap()
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
            let mut w = RecordWriter::create(&path, c).unwrap();
            for i in 0..n {
                w.write_record(format!("f{f}-r{i}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
            path.display().to_string()
        })
        .collect()
}
