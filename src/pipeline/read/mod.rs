//! Reading a shard's records for the engine: [`blocks`] (the shard reader
//! thread, which reads, inflates, frames and checks one shard and hands its
//! records over in blocks) and [`again`] (records read again at their
//! positions, for a restore; a file's first records, for a sample; a
//! record's index, for an error), [`unread`] (which shards' records a shard
//! thread leaves unread, and how it frames them) and [`in_workers`] (those
//! records read by the worker that assembles them), with
//! [`shared_maps`] (maps of the shards, one per shard, that workers read
//! scattered records through), and [`kept`] (small shards kept whole after
//! a pass, for the passes after it). The record ops and the start of a pipeline
//! read through here; it knows no op.

pub(crate) mod again;
pub(crate) mod blocks;
pub(crate) mod in_workers;
pub(crate) mod kept;
pub(crate) mod points;
pub(crate) mod shared_maps;
pub(crate) mod spans;
pub(crate) mod unread;

#[cfg(test)]
pub(crate) mod testing {
    use std::cell::RefCell;

    use crate::pipeline::item::LengthScan;
    use crate::record::{Compression, Record, RecordWriter};

    /// Takes the blocks a shard thread hands on, of `block_bytes` each,
    /// and their lengths.
    pub struct Taker {
        pub block_bytes: u64,
        pub blocks: RefCell<Vec<Vec<Record>>>,
        pub lengths: RefCell<Vec<u32>>,
        /// Records handed on read
        /// ([`hand_on_read`](super::unread::HandOn::hand_on_read)), each
        /// with the number of blocks handed on before it.
        pub read: RefCell<Vec<(usize, Record)>>,
        /// The scan it measures its records with.
        pub scan: Option<LengthScan>,
    }

    impl Taker {
        pub fn new(block_bytes: u64) -> Self {
            Taker {
                block_bytes,
                blocks: RefCell::default(),
                lengths: RefCell::default(),
                read: RefCell::default(),
                scan: None,
            }
        }

        /// One that measures its records with `scan`.
        pub fn scanning(self, scan: LengthScan) -> Self {
            Taker {
                scan: Some(scan),
                ..self
            }
        }

        /// Where the records handed on in blocks start.
        pub fn offsets(&self) -> Vec<u64> {
            let blocks = self.blocks.borrow();
            blocks.iter().flatten().map(|r| r.offset).collect()
        }

        /// The records handed on, in blocks and read.
        pub fn handed(&self) -> usize {
            let blocks: usize = self.blocks.borrow().iter().map(Vec::len).sum();
            blocks + self.read.borrow().len()
        }
    }

    impl super::unread::HandOn for Taker {
        fn block_bytes(&self) -> u64 {
            self.block_bytes
        }
        fn hand_on(&self, block: Vec<Record>, lengths: Vec<u32>) -> bool {
            self.blocks.borrow_mut().push(block);
            self.lengths.borrow_mut().extend(lengths);
            true
        }
        fn scan(&self) -> Option<&LengthScan> {
            self.scan.as_ref()
        }
        fn hand_on_read(&self, record: Record) -> bool {
            let before = self.blocks.borrow().len();
            self.read.borrow_mut().push((before, record));
            true
        }
    }

    /// Records of 100 bytes, "f{f}-r{i}" padded with the file's letter.
    pub fn record(f: usize, i: usize) -> Vec<u8> {
        let mut r = format!("f{f}-r{i}-").into_bytes();
        r.resize(100, b'a' + f as u8);
        r
    }

    /// Record `i` of a shard that deflate cannot shrink much: 50 to 199
    /// bytes of a counter's noise (a deflate block every ~16 KiB of
    /// output, so a small shard has many access points).
    pub fn noisy(i: usize) -> Vec<u8> {
        let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (0..50 + i * 37 % 150)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Writes `records` as a GZIP shard at `path`, the data CRC of record
    /// `bad` wrong; returns the path.
    pub fn gzip_shard_of(
        path: &std::path::Path,
        records: &[Vec<u8>],
        bad: Option<usize>,
    ) -> String {
        use crate::record::{encode_footer, encode_header};
        use std::io::Write;
        let mut framed = Vec::new();
        for (i, r) in records.iter().enumerate() {
            framed.extend_from_slice(&encode_header(r.len() as u64));
            framed.extend_from_slice(r);
            let mut footer = encode_footer(r);
            if bad == Some(i) {
                footer[0] ^= 1;
            }
            framed.extend_from_slice(&footer);
        }
        let file = std::fs::File::create(path).unwrap();
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        gz.write_all(&framed).unwrap();
        gz.finish().unwrap();
        path.display().to_string()
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
