//! Property tests: write → read round trips over random records, random
//! chunkings and all compressions, and the skip policy over random corruption.

use crate::support::tfrecord::{offsets, write_all};
use std::io::Cursor;

use bytes::Bytes;
use infeed::record::*;
use proptest::prelude::*;

/// `records` as the slices `write_all` takes.
fn slices(records: &[Vec<u8>]) -> Vec<&[u8]> {
    records.iter().map(Vec::as_slice).collect()
}

/// Pushes `bytes` into a deframer in pieces of the given sizes (cycled),
/// taking every record as it goes; then finishes and drains.
fn deframe(
    bytes: &[u8],
    sizes: &[usize],
    opts: &ReadOptions,
) -> (Vec<Record>, Result<(), RecordError>, SkipReport) {
    let mut d = Deframer::new("prop", opts);
    let mut out = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < bytes.len() {
        let n = sizes[i % sizes.len()].max(1).min(bytes.len() - pos);
        i += 1;
        d.push(Bytes::copy_from_slice(&bytes[pos..pos + n]));
        pos += n;
        loop {
            match d.next_record() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(e) => return (out, Err(e), d.skipped().clone()),
            }
        }
    }
    let fin = d.finish();
    while let Ok(Some(r)) = d.next_record() {
        out.push(r);
    }
    (out, fin, d.skipped().clone())
}

fn records_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..25)
}

fn compression_strategy() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Zlib)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn deframer_round_trip_any_chunking(
        records in records_strategy(),
        sizes in prop::collection::vec(prop_oneof![Just(1usize), 1usize..40, 1usize..5000], 1..8),
    ) {
        let bytes = write_all(&slices(&records), Compression::None);
        let (got, fin, report) = deframe(&bytes, &sizes, &ReadOptions::default());
        prop_assert!(fin.is_ok());
        prop_assert!(report.is_empty());
        let data: Vec<&[u8]> = got.iter().map(|r| &r.data[..]).collect();
        let want: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(data, want);
        prop_assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), offsets(&records));
    }

    #[test]
    fn reader_round_trip_all_compressions(
        records in records_strategy(),
        c in compression_strategy(),
        chunk_size in prop_oneof![Just(1usize), 1usize..64, 64usize..100_000],
    ) {
        let bytes = write_all(&slices(&records), c);
        let opts = ReadOptions::default().chunk_size(chunk_size);
        let got: Vec<Record> = RecordReader::new(Cursor::new(bytes.clone()), "prop", c, &opts)
            .collect::<Result<_, _>>()
            .unwrap();
        let data: Vec<&[u8]> = got.iter().map(|r| &r.data[..]).collect();
        let want: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(data, want);
        prop_assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), offsets(&records));
        // Detection from the first bytes alone finds the same compression
        // (except for an empty file, which reads the same either way).
        if !bytes.is_empty() {
            prop_assert_eq!(Compression::detect("noext", &bytes), c);
        }
    }

    #[test]
    fn skip_policy_loses_exactly_the_corrupt_record(
        records in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..10),
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
        sizes in prop::collection::vec(prop_oneof![Just(1usize), 1usize..40, 1usize..3000], 1..6),
    ) {
        let k = pick.index(records.len());
        let offs = offsets(&records);
        let frame = records[k].len() + 16;
        let pos = at.index(frame);
        let mut bytes = write_all(&slices(&records), Compression::None);
        bytes[offs[k] as usize + pos] ^= 1 << bit;

        let kind_is = |kind: &ErrorKind| match pos {
            0..=11 if k == 0 => *kind == ErrorKind::NotTfRecord,
            0..=11 => matches!(kind, ErrorKind::LengthCrc { .. }),
            _ => matches!(kind, ErrorKind::DataCrc { .. }),
        };

        let skip = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
        let (got, fin, report) = deframe(&bytes, &sizes, &skip);
        prop_assert!(fin.is_ok());
        let mut want: Vec<(u64, &[u8])> = offs.iter().copied().zip(records.iter().map(Vec::as_slice)).collect();
        want.remove(k);
        prop_assert_eq!(got.iter().map(|r| (r.offset, &r.data[..])).collect::<Vec<_>>(), want);
        prop_assert_eq!(report.records, 1);
        prop_assert_eq!(report.bytes, frame as u64);
        prop_assert_eq!(report.events.len(), 1);
        prop_assert_eq!(report.events[0].offset, offs[k]);
        prop_assert_eq!(report.events[0].bytes, frame as u64);
        prop_assert!(kind_is(&report.events[0].kind), "{:?}", report.events[0].kind);

        // The fail policy stops at the same record with the same kind.
        let (got, fin, _) = deframe(&bytes, &sizes, &ReadOptions::default());
        prop_assert_eq!(got.len(), k);
        let err = fin.unwrap_err();
        prop_assert_eq!(err.offset, offs[k]);
        prop_assert!(kind_is(&err.kind), "{:?}", err.kind);
    }
}
