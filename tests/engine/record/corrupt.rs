//! Bad input: every corruption gives its exact error kind and offset under
//! the fail policy, and an exact skip report under the skip policy.

use std::io::Cursor;

use bytes::Bytes;
use infeed::record::*;

use crate::support::tfrecord::write_all;

/// `plain` as a GZIP or ZLIB stream (unchanged for `None`).
fn compress(plain: &[u8], c: Compression) -> Vec<u8> {
    use std::io::Write;
    match c {
        Compression::None => plain.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).unwrap();
            e.finish().unwrap()
        }
        Compression::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).unwrap();
            e.finish().unwrap()
        }
    }
}

fn opts(policy: CorruptPolicy, chunk_size: usize) -> ReadOptions {
    ReadOptions::default()
        .on_corrupt(policy)
        .chunk_size(chunk_size)
}

/// Everything the reader yields (records and errors), and the skip report.
fn read(
    bytes: &[u8],
    c: Compression,
    o: &ReadOptions,
) -> (Vec<Result<Record, RecordError>>, SkipReport) {
    let mut r = RecordReader::new(Cursor::new(bytes.to_vec()), "bad.tfrecord", c, o);
    let items: Vec<_> = r.by_ref().collect();
    // Fused: nothing after the end.
    assert!(r.next().is_none());
    (items, r.skipped().clone())
}

/// Reads under the fail policy: the records before the error, and the error.
fn read_fail(bytes: &[u8], c: Compression, chunk_size: usize) -> (Vec<Record>, RecordError) {
    let (items, report) = read(bytes, c, &opts(CorruptPolicy::Fail, chunk_size));
    assert!(report.is_empty());
    let mut records = Vec::new();
    let mut error = None;
    for item in items {
        assert!(error.is_none(), "an item after the error");
        match item {
            Ok(r) => records.push(r),
            Err(e) => error = Some(e),
        }
    }
    (records, error.expect("an error"))
}

/// Reads under the skip policy: every item must be a record.
fn read_skip(bytes: &[u8], c: Compression, chunk_size: usize) -> (Vec<Record>, SkipReport) {
    let (items, report) = read(bytes, c, &opts(CorruptPolicy::Skip, chunk_size));
    (
        items
            .into_iter()
            .map(|r| r.expect("no error under skip"))
            .collect(),
        report,
    )
}

fn rec(data: &'static [u8], offset: u64) -> Record {
    Record {
        data: Bytes::from_static(data),
        offset,
    }
}

const CHUNKS: [usize; 5] = [1, 3, 12, 20, 1 << 20];

/// "hello" at 0 (21 bytes framed), "world!" at 21 (22 bytes): 43 bytes.
fn two() -> Vec<u8> {
    write_all(&[b"hello", b"world!"], Compression::None)
}

#[test]
fn truncated_mid_header_payload_and_footer() {
    let cases = [
        (21 + 5, RecordPart::Header, 5, 12),
        (21 + 12, RecordPart::Payload, 0, 6),
        (21 + 12 + 3, RecordPart::Payload, 3, 6),
        (21 + 12 + 6, RecordPart::Footer, 0, 4),
        (21 + 12 + 6 + 2, RecordPart::Footer, 2, 4),
    ];
    let full = two();
    for (cut, part, have, need) in cases {
        let kind = ErrorKind::Truncated { part, have, need };
        for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
            // Truncated framing inside a complete compressed stream.
            let bytes = compress(&full[..cut], c);
            for chunk in CHUNKS {
                let (records, err) = read_fail(&bytes, c, chunk);
                assert_eq!(
                    records,
                    vec![rec(b"hello", 0)],
                    "cut {cut} {c} chunk {chunk}"
                );
                assert_eq!(
                    (err.offset, &err.kind),
                    (21, &kind),
                    "cut {cut} {c} chunk {chunk}"
                );
                assert_eq!(err.path, "bad.tfrecord");

                let (records, report) = read_skip(&bytes, c, chunk);
                assert_eq!(records, vec![rec(b"hello", 0)]);
                assert_eq!(
                    report,
                    SkipReport {
                        records: 1,
                        bytes: cut as u64 - 21,
                        events: vec![SkipEvent {
                            offset: 21,
                            bytes: cut as u64 - 21,
                            kind: kind.clone()
                        }],
                    },
                    "cut {cut} {c} chunk {chunk}"
                );
            }
        }
    }
}

#[test]
fn flipped_bit_in_length_is_a_length_crc_error_at_the_record() {
    let mut bytes = two();
    bytes[21] ^= 0x01; // length 6 -> 7
    let kind = ErrorKind::LengthCrc {
        stored: masked_crc32c(&6u64.to_le_bytes()),
        computed: masked_crc32c(&7u64.to_le_bytes()),
    };
    for chunk in CHUNKS {
        let (records, err) = read_fail(&bytes, Compression::None, chunk);
        assert_eq!(records, vec![rec(b"hello", 0)]);
        assert_eq!((err.offset, err.kind), (21, kind.clone()));
    }
    // A flipped bit in the stored CRC of the length: same kind.
    let mut bytes = two();
    bytes[21 + 8] ^= 0x80;
    let (_, err) = read_fail(&bytes, Compression::None, 1 << 20);
    assert_eq!(
        (err.offset, err.kind),
        (
            21,
            ErrorKind::LengthCrc {
                stored: masked_crc32c(&6u64.to_le_bytes()) ^ 0x80,
                computed: masked_crc32c(&6u64.to_le_bytes()),
            }
        )
    );
}

#[test]
fn flipped_bit_in_payload_or_footer_is_a_data_crc_error_at_the_record() {
    let mut bytes = two();
    bytes[21 + 12 + 2] ^= 0x04; // "world!" -> "wovld!"
    let kind = ErrorKind::DataCrc {
        stored: masked_crc32c(b"world!"),
        computed: masked_crc32c(b"wovld!"),
    };
    for chunk in CHUNKS {
        let (records, err) = read_fail(&bytes, Compression::None, chunk);
        assert_eq!(records, vec![rec(b"hello", 0)]);
        assert_eq!((err.offset, err.kind), (21, kind.clone()), "chunk {chunk}");
    }
    let mut bytes = two();
    bytes[42] ^= 0x10; // last byte of the footer
    let (_, err) = read_fail(&bytes, Compression::None, 7);
    assert_eq!(
        (err.offset, err.kind),
        (
            21,
            ErrorKind::DataCrc {
                stored: masked_crc32c(b"world!") ^ 0x1000_0000,
                computed: masked_crc32c(b"world!")
            }
        )
    );
}

#[test]
fn data_crc_is_not_checked_when_verification_is_off() {
    let mut bytes = two();
    bytes[21 + 12 + 2] ^= 0x04;
    let o = ReadOptions::default().verify_crc(false);
    let (items, _) = read(&bytes, Compression::None, &o);
    let got: Vec<Record> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(got, vec![rec(b"hello", 0), rec(b"wovld!", 21)]);
}

/// A header with a valid length CRC claiming `len` bytes.
fn header(len: u64) -> Vec<u8> {
    encode_header(len).to_vec()
}

#[test]
fn huge_length_is_too_large_and_never_allocated() {
    let mut bytes = write_all(&[b"hello"], Compression::None);
    bytes.extend_from_slice(&header(1 << 40));
    bytes.extend_from_slice(b"a few bytes");
    for chunk in CHUNKS {
        let (records, err) = read_fail(&bytes, Compression::None, chunk);
        assert_eq!(records, vec![rec(b"hello", 0)]);
        assert_eq!(
            (err.offset, err.kind),
            (
                21,
                ErrorKind::TooLarge {
                    length: 1 << 40,
                    max: 1 << 30
                }
            )
        );
    }
    // A length near u64::MAX with no maximum: no overflow, still too large.
    let o = ReadOptions::default().max_record_size(u64::MAX);
    let bad = header(u64::MAX - 3);
    let (items, _) = read(&bad, Compression::None, &o);
    assert_eq!(items.len(), 1);
    let err = items.into_iter().next().unwrap().unwrap_err();
    assert_eq!(
        (err.offset, err.kind),
        (
            0,
            ErrorKind::TooLarge {
                length: u64::MAX - 3,
                max: u64::MAX
            }
        )
    );
    // With no maximum, 2^62 bytes are waited for, not allocated: the file
    // simply ends inside the payload.
    let mut bytes = header(1 << 62);
    bytes.extend_from_slice(&[0u8; 100]);
    let (items, _) = read(&bytes, Compression::None, &o);
    let err = items.into_iter().next().unwrap().unwrap_err();
    assert_eq!(
        (err.offset, err.kind),
        (
            0,
            ErrorKind::Truncated {
                part: RecordPart::Payload,
                have: 100,
                need: 1 << 62
            }
        )
    );
}

#[test]
fn max_record_size_is_configurable() {
    let bytes = two();
    let o = ReadOptions::default().max_record_size(5);
    let (items, _) = read(&bytes, Compression::None, &o);
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].as_ref().unwrap(), &rec(b"hello", 0));
    let err = items[1].as_ref().unwrap_err();
    assert_eq!(
        (err.offset, &err.kind),
        (21, &ErrorKind::TooLarge { length: 6, max: 5 })
    );
    // Under skip the oversized record is skipped.
    let o = ReadOptions::default()
        .max_record_size(5)
        .on_corrupt(CorruptPolicy::Skip);
    let (items, report) = read(&bytes, Compression::None, &o);
    assert_eq!(
        items.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        vec![rec(b"hello", 0)]
    );
    assert_eq!(
        report.events,
        vec![SkipEvent {
            offset: 21,
            bytes: 22,
            kind: ErrorKind::TooLarge { length: 6, max: 5 }
        }]
    );
}

#[test]
fn garbage_is_not_a_tfrecord_file() {
    let garbage = b"This is a plain text file, certainly not a TFRecord file.\n".to_vec();
    for chunk in CHUNKS {
        let (records, err) = read_fail(&garbage, Compression::None, chunk);
        assert!(records.is_empty());
        assert_eq!((err.offset, &err.kind), (0, &ErrorKind::NotTfRecord));
        assert!(err.to_string().starts_with(
            "bad.tfrecord: byte 0: not a TFRecord file, or wrong ReadOptions::compression"
        ));
        let (records, report) = read_skip(&garbage, Compression::None, chunk);
        assert!(records.is_empty());
        assert_eq!(
            report,
            SkipReport {
                records: 1,
                bytes: garbage.len() as u64,
                events: vec![SkipEvent {
                    offset: 0,
                    bytes: garbage.len() as u64,
                    kind: ErrorKind::NotTfRecord
                }],
            }
        );
    }
    // Shorter than a header: truncated.
    let (_, err) = read_fail(b"abcde", Compression::None, 1 << 20);
    assert_eq!(
        (err.offset, err.kind),
        (
            0,
            ErrorKind::Truncated {
                part: RecordPart::Header,
                have: 5,
                need: 12
            }
        )
    );
    // A GZIP file read as plain.
    let gz = write_all(&[b"hello"], Compression::Gzip);
    let (_, err) = read_fail(&gz, Compression::None, 1 << 20);
    assert_eq!((err.offset, err.kind), (0, ErrorKind::NotTfRecord));
}

/// Many records, so a compressed stream spans several reads.
fn many() -> (Vec<Vec<u8>>, Vec<u8>) {
    let records: Vec<Vec<u8>> = (0..200u32)
        .map(|i| (0..(100 + i * 13)).map(|j| (i ^ j) as u8).collect())
        .collect();
    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    let gz = write_all(&refs, Compression::Gzip);
    (records, gz)
}

#[test]
fn truncated_gzip_is_a_decompress_error_at_its_end() {
    let (records, gz) = many();
    let cut = &gz[..gz.len() / 2];
    for chunk in [1000, 1 << 20] {
        let (got, err) = read_fail(cut, Compression::Gzip, chunk);
        // The records decoded before the cut come first, in order.
        assert!(!got.is_empty() && got.len() < records.len());
        assert!(got.iter().zip(&records).all(|(r, w)| r.data == w[..]));
        assert_eq!(err.offset, cut.len() as u64);
        match &err.kind {
            ErrorKind::Decompress {
                compression: Compression::Gzip,
                cause,
                ..
            } => {
                assert!(cause.to_string().contains("unexpected end"), "{cause}")
            }
            k => panic!("{k:?}"),
        }
        // Skip: the partial record is a truncation, the stream's end a
        // decompress event with no bytes left after it.
        let (skipped_got, report) = read_skip(cut, Compression::Gzip, chunk);
        assert_eq!(skipped_got, got);
        assert_eq!(report.records, 2);
        assert!(matches!(report.events[0].kind, ErrorKind::Truncated { .. }));
        assert_eq!(
            report.events[0].offset,
            got.last()
                .map(|r| r.offset + r.data.len() as u64 + 16)
                .unwrap()
        );
        assert_eq!(report.events[1].offset, cut.len() as u64);
        assert_eq!(report.events[1].bytes, 0);
        assert!(matches!(
            report.events[1].kind,
            ErrorKind::Decompress {
                compression: Compression::Gzip,
                ..
            }
        ));
    }
}

#[test]
fn corrupt_gzip_header_is_a_decompress_error() {
    let (_, mut gz) = many();
    gz[2] = 7; // compression method 7 does not exist
    let (got, err) = read_fail(&gz, Compression::Gzip, 1 << 20);
    assert!(got.is_empty());
    // Detected once the method and flag bytes (offsets 2 and 3) are consumed.
    assert_eq!(err.offset, 4);
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
    // Skip: the whole file from the error on is skipped, exactly.
    let (got, report) = read_skip(&gz, Compression::Gzip, 100);
    assert!(got.is_empty());
    assert_eq!(report.records, 1);
    assert_eq!(report.bytes, gz.len() as u64 - 4);
    assert_eq!(report.events[0].offset, 4);
}

#[test]
fn corrupt_gzip_data_is_a_decompress_error_after_the_good_records() {
    let (records, mut gz) = many();
    let n = gz.len();
    gz[n - 8] ^= 0xff; // the CRC32 in the gzip trailer
    let (got, err) = read_fail(&gz, Compression::Gzip, 4096);
    // Every record was decoded before the trailer check failed.
    assert_eq!(got.len(), records.len());
    assert_eq!(err.offset, n as u64 - 4);
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

/// "alpha".."echo!" at offsets 0, 21, 42, 63, 84.
fn five() -> Vec<u8> {
    write_all(
        &[b"alpha", b"bravo", b"charl", b"delta", b"echo!"],
        Compression::None,
    )
}

#[test]
fn skip_policy_skips_a_corrupt_record_and_resynchronises() {
    let mut bytes = five();
    bytes[21 + 12] ^= 0x20; // "bravo" -> "Bravo"
    let want = vec![
        rec(b"alpha", 0),
        rec(b"charl", 42),
        rec(b"delta", 63),
        rec(b"echo!", 84),
    ];
    let kind = ErrorKind::DataCrc {
        stored: masked_crc32c(b"bravo"),
        computed: masked_crc32c(b"Bravo"),
    };
    for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
        // The corrupted plain bytes, compressed.
        let file = compress(&bytes, c);
        for chunk in CHUNKS {
            let (got, report) = read_skip(&file, c, chunk);
            assert_eq!(got, want, "{c} chunk {chunk}");
            assert_eq!(
                report,
                SkipReport {
                    records: 1,
                    bytes: 21,
                    events: vec![SkipEvent {
                        offset: 21,
                        bytes: 21,
                        kind: kind.clone()
                    }]
                },
                "{c} chunk {chunk}"
            );
            let (got, err) = read_fail(&file, c, chunk);
            assert_eq!(got, want[..1]);
            assert_eq!((err.offset, err.kind), (21, kind.clone()));
        }
    }
}

#[test]
fn skip_policy_handles_a_corrupt_length_and_garbage_between_records() {
    // Corrupt length of record 2: the scan restarts one byte after its header.
    let mut bytes = five();
    bytes[21 + 3] ^= 0xff;
    for chunk in CHUNKS {
        let (got, report) = read_skip(&bytes, Compression::None, chunk);
        assert_eq!(
            got,
            vec![
                rec(b"alpha", 0),
                rec(b"charl", 42),
                rec(b"delta", 63),
                rec(b"echo!", 84)
            ]
        );
        assert_eq!(report.records, 1);
        assert_eq!(report.bytes, 21);
        assert_eq!(report.events[0].offset, 21);
        assert!(matches!(report.events[0].kind, ErrorKind::LengthCrc { .. }));
    }
    // Garbage before the first record and between records 3 and 4.
    let five = five();
    let mut bytes = b"junk!".to_vec();
    bytes.extend_from_slice(&five[..63]);
    bytes.extend_from_slice(&[0xffu8; 40]);
    bytes.extend_from_slice(&five[63..]);
    for chunk in CHUNKS {
        let (got, report) = read_skip(&bytes, Compression::None, chunk);
        assert_eq!(
            got,
            vec![
                rec(b"alpha", 5),
                rec(b"bravo", 26),
                rec(b"charl", 47),
                rec(b"delta", 108),
                rec(b"echo!", 129)
            ]
        );
        assert_eq!(report.records, 2);
        assert_eq!(report.bytes, 45);
        assert_eq!(
            report.events[0],
            SkipEvent {
                offset: 0,
                bytes: 5,
                kind: ErrorKind::NotTfRecord
            }
        );
        assert_eq!(report.events[1].offset, 68);
        assert_eq!(report.events[1].bytes, 40);
    }
}

#[test]
fn skip_policy_reports_a_corrupt_tail_to_the_end() {
    // Record 5's payload is corrupt and nothing valid follows.
    let mut bytes = five();
    bytes[84 + 12] ^= 1;
    for chunk in CHUNKS {
        let (got, report) = read_skip(&bytes, Compression::None, chunk);
        assert_eq!(got.len(), 4);
        assert_eq!(report.records, 1);
        assert_eq!(report.bytes, 21);
        assert_eq!(report.events[0].offset, 84);
        assert!(matches!(report.events[0].kind, ErrorKind::DataCrc { .. }));
    }
}

#[test]
fn deframer_is_fused_after_an_error() {
    let mut bytes = five();
    bytes[21 + 12] ^= 0x20;
    let mut d = Deframer::new("f", &ReadOptions::default());
    d.push(Bytes::from(bytes));
    assert_eq!(d.next_record().unwrap(), Some(rec(b"alpha", 0)));
    assert_eq!(d.next_record().unwrap_err().offset, 21);
    assert_eq!(d.next_record().unwrap(), None);
    d.push(Bytes::from(five()));
    assert_eq!(d.next_record().unwrap(), None);
    d.finish().unwrap();
    assert_eq!(d.offset(), 21);
}

#[test]
fn deframer_finish_reports_truncation() {
    let bytes = two();
    let mut d = Deframer::new("f", &ReadOptions::default());
    d.push(Bytes::copy_from_slice(&bytes[..33]));
    assert_eq!(d.next_record().unwrap(), Some(rec(b"hello", 0)));
    assert_eq!(d.next_record().unwrap(), None);
    let err = d.finish().unwrap_err();
    assert_eq!(
        (err.offset, err.kind),
        (
            21,
            ErrorKind::Truncated {
                part: RecordPart::Payload,
                have: 0,
                need: 6
            }
        )
    );
}

/// A record of exactly `len` bytes of `fill`.
fn payload(len: usize, fill: u8) -> Vec<u8> {
    vec![fill; len]
}

/// Writes `bytes` to `name` in a fresh directory; returns the directory and path.
fn file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    (dir, p)
}

#[test]
fn a_plain_file_that_begins_like_gzip_is_read_as_plain() {
    // A first record of 0x8B1F bytes makes the file begin
    // 1f 8b, the GZIP magic; its valid header says it is plain.
    let first = payload(0x8b1f, b'a');
    let bytes = write_all(&[&first, b"hello"], Compression::None);
    assert_eq!(&bytes[..2], &[0x1f, 0x8b]);
    let (_dir, p) = file("o8b.tfrecord", &bytes);
    for policy in [CorruptPolicy::Fail, CorruptPolicy::Skip] {
        let mut r = RecordReader::open(&p, &opts(policy, 1 << 20)).unwrap();
        assert_eq!(
            r.detection(),
            Some(Detection {
                compression: Compression::None,
                by: DetectedBy::Header
            })
        );
        let got: Vec<Record> = r.by_ref().map(Result::unwrap).collect();
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].offset, got[0].data.len()), (0, 0x8b1f));
        assert_eq!(got[1], rec(b"hello", 0x8b1f + 16));
        assert!(r.skipped().is_empty());
    }
}

#[test]
fn a_damaged_first_header_that_looks_like_zlib_is_skipped_and_the_rest_recovered() {
    // A first record of 376 = 0x0178 bytes starts 78 01, a
    // ZLIB header; with its length CRC damaged the file must stay plain so
    // the skip policy recovers the records after it.
    let first = payload(376, b'x');
    let mut bytes = write_all(&[&first, b"alpha", b"bravo"], Compression::None);
    assert_eq!(&bytes[..2], &[0x78, 0x01]);
    bytes[9] ^= 0x10; // the first length CRC
    let (_dir, p) = file("damaged", &bytes);
    let first_len = 376 + 16;
    let mut r = RecordReader::open(&p, &opts(CorruptPolicy::Skip, 1 << 20)).unwrap();
    assert_eq!(r.compression(), Some(Compression::None));
    let got: Vec<Record> = r.by_ref().map(Result::unwrap).collect();
    assert_eq!(
        got,
        vec![rec(b"alpha", first_len), rec(b"bravo", first_len + 21)]
    );
    assert_eq!(
        r.skipped().events,
        vec![SkipEvent {
            offset: 0,
            bytes: first_len,
            kind: ErrorKind::NotTfRecord
        }]
    );
    // Under the fail policy: not a TFRecord file, with what was guessed.
    let err = RecordReader::open(&p, &opts(CorruptPolicy::Fail, 1 << 20))
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err();
    assert_eq!((err.offset, &err.kind), (0, &ErrorKind::NotTfRecord));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: byte 0: not a TFRecord file, or wrong ReadOptions::compression (the length CRC \
             of the first record does not match) (read as plain TFRecord: neither the name nor \
             the first bytes show a compression; if the file is compressed, use \
             ReadOptions::compression gzip or zlib)",
            p.display()
        )
    );
}

#[test]
fn a_length_running_past_the_end_does_not_swallow_the_rest_under_skip() {
    // A CRC-valid header claiming exactly the maximum
    // record size (1 GiB), with intact records after it.
    let mut bytes = write_all(&[b"hello"], Compression::None);
    bytes.extend_from_slice(&encode_header(1 << 30));
    let after = bytes.len() as u64;
    bytes.extend_from_slice(&write_all(&[b"alpha", b"bravo"], Compression::None));
    let left = bytes.len() as u64 - 21 - 12;
    for c in [Compression::None, Compression::Gzip] {
        let stored = compress(&bytes, c);
        for chunk in CHUNKS {
            let (got, report) = read_skip(&stored, c, chunk);
            assert_eq!(
                got,
                vec![
                    rec(b"hello", 0),
                    rec(b"alpha", after),
                    rec(b"bravo", after + 21)
                ],
                "{c} chunk {chunk}"
            );
            assert_eq!(
                report.events,
                vec![SkipEvent {
                    offset: 21,
                    bytes: 12,
                    kind: ErrorKind::PastEnd {
                        length: 1 << 30,
                        left
                    }
                }],
                "{c} chunk {chunk}"
            );
            // Under the fail policy it is still a truncation at its offset.
            let (got, err) = read_fail(&stored, c, chunk);
            assert_eq!(got, vec![rec(b"hello", 0)]);
            assert_eq!(
                (err.offset, err.index, &err.kind),
                (
                    21,
                    Some(1),
                    &ErrorKind::Truncated {
                        part: RecordPart::Payload,
                        have: left,
                        need: 1 << 30
                    }
                )
            );
        }
    }
}

#[test]
fn errors_name_the_record_index_and_which_stream_the_offset_counts() {
    let mut bytes = five();
    bytes[42 + 12] ^= 1; // record 2's payload
    let (_, err) = read_fail(&bytes, Compression::None, 1 << 20);
    assert_eq!((err.offset, err.index), (42, Some(2)));
    assert!(
        err.to_string()
            .starts_with("bad.tfrecord: record 2 at byte 42: data CRC mismatch"),
        "{err}"
    );
    let gz = compress(&bytes, Compression::Gzip);
    let (_, err) = read_fail(&gz, Compression::Gzip, 1 << 20);
    assert!(
        err.to_string().starts_with(
            "bad.tfrecord: record 2 at byte 42 of the uncompressed stream: data CRC mismatch"
        ),
        "{err}"
    );
    // A resumed reader does not know how many records came before.
    let mut r = RecordReader::resume(
        Cursor::new(bytes[21..].to_vec()),
        "bad.tfrecord",
        Compression::None,
        &ReadOptions::default(),
        21,
    );
    assert_eq!(r.next().unwrap().unwrap(), rec(b"bravo", 21));
    let err = r.next().unwrap().unwrap_err();
    assert_eq!((err.offset, err.index), (42, None));
    assert!(
        err.to_string()
            .starts_with("bad.tfrecord: byte 42: data CRC mismatch"),
        "{err}"
    );
}

#[test]
fn a_plain_file_named_gz_names_the_guess_and_the_override() {
    let bytes = write_all(&[b"hello"], Compression::None);
    let (_dir, p) = file("plain.tfrecord.gz", &bytes);
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
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{}: compressed byte {}: corrupt gzip stream: ",
            p.display(),
            err.offset
        )),
        "{text}"
    );
    assert!(
        text.ends_with(
            "(read as gzip because of the file name's extension; if the file is not \
             compressed, use ReadOptions::compression none)"
        ),
        "{text}"
    );
    // Told to read it as GZIP, nothing was guessed: no hint.
    let told = ReadOptions::default().compression(Compression::Gzip);
    let err = RecordReader::open(&p, &told)
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err();
    assert!(
        !err.to_string().contains("ReadOptions::compression none"),
        "{err}"
    );
    // The cause is kept as the error's source.
    let source = std::error::Error::source(&err).unwrap();
    assert!(std::error::Error::source(source).is_some(), "{source:?}");
}
