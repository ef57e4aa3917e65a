//! TFRecord format: exact bytes against TensorFlow, round trips, offsets,
//! compression detection.

use crate::support::tfrecord::{offsets, write_all, write_file};
use std::io::Cursor;

use bytes::Bytes;
use infeed::record::*;

/// `tf.io.TFRecordWriter` (TensorFlow 2.21) writing b"hello" then b"".
const TF_PLAIN: [u8; 37] = [
    0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xea, 0xb2, 0x04, 0x3e, 0x68, 0x65, 0x6c, 0x6c,
    0x6f, 0xbb, 0x1f, 0x1c, 0x19, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x29, 0x03, 0x98,
    0x07, 0xd8, 0xea, 0x82, 0xa2,
];
/// The same two records, `TFRecordWriter(path, "GZIP")`.
const TF_GZIP: [u8; 48] = [
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x63, 0x65, 0x80, 0x80, 0x57, 0x9b,
    0x58, 0xec, 0x32, 0x52, 0x73, 0x72, 0xf2, 0x77, 0xcb, 0xcb, 0x48, 0x42, 0xc5, 0x18, 0x34, 0x99,
    0x67, 0xb0, 0xdf, 0x78, 0xd5, 0xb4, 0x08, 0x00, 0xb3, 0xaf, 0xd7, 0xf8, 0x25, 0x00, 0x00, 0x00,
];
/// The same two records, `TFRecordWriter(path, "ZLIB")`.
const TF_ZLIB: [u8; 36] = [
    0x78, 0x9c, 0x63, 0x65, 0x80, 0x80, 0x57, 0x9b, 0x58, 0xec, 0x32, 0x52, 0x73, 0x72, 0xf2, 0x77,
    0xcb, 0xcb, 0x48, 0x42, 0xc5, 0x18, 0x34, 0x99, 0x67, 0xb0, 0xdf, 0x78, 0xd5, 0xb4, 0x08, 0x00,
    0x86, 0xa5, 0x08, 0xb8,
];

fn read_all(bytes: &[u8], c: Compression, opts: &ReadOptions) -> Vec<Record> {
    RecordReader::new(Cursor::new(bytes.to_vec()), "mem", c, opts)
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

#[test]
fn plain_writer_output_is_byte_identical_to_tensorflow() {
    assert_eq!(write_all(&[b"hello", b""], Compression::None), TF_PLAIN);
    assert_eq!(encode_header(5), TF_PLAIN[..12]);
    assert_eq!(encode_footer(b"hello"), TF_PLAIN[17..21]);
}

#[test]
fn compressed_writer_output_matches_tensorflow() {
    assert_eq!(write_all(&[b"hello", b""], Compression::Gzip), TF_GZIP);
    assert_eq!(write_all(&[b"hello", b""], Compression::Zlib), TF_ZLIB);
}

#[test]
fn reads_tensorflow_files_with_exact_offsets() {
    for (bytes, c) in [
        (&TF_PLAIN[..], Compression::None),
        (&TF_GZIP[..], Compression::Gzip),
        (&TF_ZLIB[..], Compression::Zlib),
    ] {
        let recs = read_all(bytes, c, &ReadOptions::default());
        assert_eq!(
            recs,
            vec![
                Record {
                    data: Bytes::from_static(b"hello"),
                    offset: 0
                },
                Record {
                    data: Bytes::new(),
                    offset: 21
                },
            ],
            "{c}"
        );
    }
}

fn sample_records() -> Vec<Vec<u8>> {
    // Sizes around the chunk sizes used below, plus empty records.
    let mut out = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for len in [
        0usize, 1, 5, 11, 12, 13, 100, 4095, 4096, 4097, 70_000, 0, 3,
    ] {
        let mut r = Vec::with_capacity(len);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            r.push(x as u8);
        }
        out.push(r);
    }
    out
}

#[test]
fn round_trip_all_compressions_and_chunk_sizes() {
    let records = sample_records();
    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    let offsets = offsets(&records);
    for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
        let bytes = write_all(&refs, c);
        for chunk_size in [1, 7, 12, 4096, 1 << 20] {
            let opts = ReadOptions::default().chunk_size(chunk_size);
            let recs = read_all(&bytes, c, &opts);
            let got: Vec<&[u8]> = recs.iter().map(|r| &r.data[..]).collect();
            assert_eq!(got, refs, "{c} chunk {chunk_size}");
            let got_off: Vec<u64> = recs.iter().map(|r| r.offset).collect();
            assert_eq!(got_off, offsets, "{c} chunk {chunk_size}");
        }
    }
}

#[test]
fn records_inside_one_chunk_are_zero_copy_slices() {
    let bytes = Bytes::from(write_all(&[b"abc", b"defgh"], Compression::None));
    let mut d = Deframer::new("mem", &ReadOptions::default());
    d.push(bytes.clone());
    let a = d.next_record().unwrap().unwrap();
    let b = d.next_record().unwrap().unwrap();
    assert_eq!(d.next_record().unwrap(), None);
    d.finish().unwrap();
    assert_eq!(d.next_record().unwrap(), None);
    // The payloads point into the pushed buffer.
    assert_eq!(a.data.as_ptr(), bytes[12..].as_ptr());
    assert_eq!(b.data.as_ptr(), bytes[12 + 3 + 4 + 12..].as_ptr());
    assert_eq!(d.offset(), bytes.len() as u64);
}

#[test]
fn deframer_offset_counts_consumed_records_only() {
    let bytes = write_all(&[b"abc", b"defgh"], Compression::None);
    let mut d = Deframer::new("mem", &ReadOptions::default());
    d.push(Bytes::copy_from_slice(&bytes[..25]));
    assert_eq!(d.next_record().unwrap().map(|r| r.offset), Some(0));
    assert_eq!(d.next_record().unwrap(), None);
    assert_eq!(d.offset(), 19);
    d.push(Bytes::copy_from_slice(&bytes[25..]));
    let r = d.next_record().unwrap().unwrap();
    assert_eq!((r.offset, &r.data[..]), (19, &b"defgh"[..]));
    assert_eq!(d.offset(), 40);
}

#[test]
fn empty_input_is_a_valid_file_for_every_compression() {
    for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
        assert!(read_all(b"", c, &ReadOptions::default()).is_empty(), "{c}");
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["empty.tfrecord", "empty.gz", "empty.zz"] {
        let p = dir.path().join(name);
        std::fs::write(&p, b"").unwrap();
        let mut r = RecordReader::open(&p, &ReadOptions::default()).unwrap();
        assert!(r.next().is_none(), "{name}");
        assert!(r.skipped().is_empty());
    }
}

#[test]
fn open_detects_compression_by_extension_and_by_magic() {
    let records: Vec<&[u8]> = vec![b"one", b"two", b""];
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("a.tfrecord", Compression::None, Compression::None),
        ("b.tfrecord.gz", Compression::Gzip, Compression::Gzip),
        ("c.tfrecord.zlib", Compression::Zlib, Compression::Zlib),
        // No telling extension: the content decides.
        ("d.tfrecord", Compression::Gzip, Compression::Gzip),
        ("e.tfrecord", Compression::Zlib, Compression::Zlib),
        ("f", Compression::None, Compression::None),
    ];
    for (name, written, detected) in cases {
        let p = dir.path().join(name);
        write_file(&p, &records, written);
        let reader = RecordReader::open(&p, &ReadOptions::default()).unwrap();
        assert_eq!(reader.compression(), Some(detected), "{name}");
        let got: Vec<Bytes> = reader.map(|r| r.unwrap().data).collect();
        assert_eq!(got, records, "{name}");
    }
}

#[test]
fn explicit_compression_overrides_detection() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.gz");
    // Plain data under a .gz name, read with an explicit `none`.
    std::fs::write(&p, write_all(&[b"plain"], Compression::None)).unwrap();
    let opts = ReadOptions::default().compression(Compression::None);
    let got: Vec<Bytes> = RecordReader::open(&p, &opts)
        .unwrap()
        .map(|r| r.unwrap().data)
        .collect();
    assert_eq!(got, vec![Bytes::from_static(b"plain")]);
    // Auto-detection trusts the extension and fails to inflate it.
    let err = RecordReader::open(&p, &ReadOptions::default())
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(
            err.kind,
            ErrorKind::Decompress {
                compression: Compression::Gzip,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_plain_file_starting_like_a_zlib_header_is_read_as_plain() {
    // A record of 0x9c78 bytes: the file starts with 78 9c.
    let payload = vec![7u8; 0x9c78];
    let bytes = write_all(&[&payload], Compression::None);
    assert_eq!(&bytes[..2], &[0x78, 0x9c]);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("lookalike");
    std::fs::write(&p, &bytes).unwrap();
    let reader = RecordReader::open(&p, &ReadOptions::default()).unwrap();
    assert_eq!(reader.compression(), Some(Compression::None));
    let got: Vec<Record> = reader.map(Result::unwrap).collect();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].data.len(), 0x9c78);
}

#[test]
fn open_missing_file_is_an_io_error() {
    let err =
        RecordReader::open("/nonexistent/dir/x.tfrecord", &ReadOptions::default()).unwrap_err();
    assert_eq!(err.path, "/nonexistent/dir/x.tfrecord");
    assert_eq!(err.offset, 0);
    assert!(
        matches!(
            err.kind,
            ErrorKind::Io {
                kind: std::io::ErrorKind::NotFound,
                ..
            }
        ),
        "{err}"
    );
}

/// A reader that fails after `ok` bytes.
struct FailingReader {
    data: Cursor<Vec<u8>>,
    ok: u64,
}

impl std::io::Read for FailingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.data.position() >= self.ok {
            return Err(std::io::Error::other("disk on fire"));
        }
        let room = (self.ok - self.data.position()) as usize;
        let n = buf.len().min(room);
        self.data.read(&mut buf[..n])
    }
}

#[test]
fn io_errors_end_the_reader_with_the_offset_read() {
    let bytes = write_all(&[b"first", b"second"], Compression::None);
    let reader = FailingReader {
        data: Cursor::new(bytes),
        ok: 30,
    };
    let opts = ReadOptions::default().chunk_size(8);
    let mut r = RecordReader::new(reader, "flaky", Compression::None, &opts);
    assert_eq!(
        r.next().unwrap().unwrap().data,
        Bytes::from_static(b"first")
    );
    let err = r.next().unwrap().unwrap_err();
    assert_eq!(err.offset, 30);
    match &err.kind {
        ErrorKind::Io { kind, source } => {
            assert_eq!(*kind, std::io::ErrorKind::Other);
            assert_eq!(source.to_string(), "disk on fire");
        }
        k => panic!("{k:?}"),
    }
    assert!(r.next().is_none());
}

#[test]
fn a_reader_with_tiny_chunks_detects_the_compression_and_reads_the_same_records() {
    // Detection gathers its first bytes across several small reads.
    let records = sample_records();
    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
        let bytes = write_all(&refs, c);
        let sync = read_all(&bytes, c, &ReadOptions::default());
        assert_eq!(sync.len(), records.len());
        let opts = ReadOptions::default().chunk_size(5);
        let mut r = RecordReader::with_options(Cursor::new(bytes), "noext", &opts);
        assert_eq!(r.compression(), None);
        let detected: Vec<Record> = r.by_ref().map(Result::unwrap).collect();
        assert_eq!(r.compression(), Some(c));
        assert_eq!(detected, sync, "{c}");
    }
}
