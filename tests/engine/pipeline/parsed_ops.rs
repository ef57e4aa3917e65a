//! map_batch and filter_rows on parsed records: full static-shape batches,
//! exact values, bucketing by mapped lengths, thread independence, exact
//! restores, errors.

use super::grouping::*;
use super::within;
use infeed::example::{Column, ParsedBatch, Values};
use infeed::pipeline::{EqualBatches, ParsedPipeline, Pipeline, PipelineError};
use proptest::prelude::*;

fn len_of(batch: &ParsedBatch, row: usize) -> usize {
    match batch.get("ids") {
        Some(Column::Ragged { row_splits, .. }) => row_splits[row + 1] - row_splits[row],
        _ => panic!("ids is ragged"),
    }
}

/// Keeps records of even length.
fn even(batch: &ParsedBatch, row: usize) -> bool {
    len_of(batch, row).is_multiple_of(2)
}

/// Repeats every row of every ragged int64 column twice end to end.
fn doubled(mut batch: ParsedBatch) -> Result<ParsedBatch, infeed::pipeline::MapError> {
    for (_, column) in &mut batch.columns {
        if let Column::Ragged {
            values: Values::Int64(values),
            row_splits,
            ..
        } = column
        {
            let mut out = Vec::new();
            let mut splits = vec![0];
            for w in row_splits.windows(2) {
                let row = &values[w[0]..w[1]];
                out.extend_from_slice(row);
                out.extend_from_slice(row);
                splits.push(out.len());
            }
            *values = out;
            *row_splits = splits;
        }
    }
    Ok(batch)
}

const LENS: [usize; 12] = [3, 4, 6, 1, 8, 2, 5, 10, 7, 12, 9, 14];

fn base(dir: &std::path::Path) -> Pipeline {
    Pipeline::from_files(write_lm_files(dir, &[LENS.to_vec()]))
        .unwrap()
        .threads(3)
}

#[test]
fn filter_rows_gives_full_batches_of_the_kept_records_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = base(dir.path())
        .parse(spec())
        .filter_rows(even)
        .max_length(16)
        .batch(3, false);
    let batches: Vec<_> = p.build().unwrap().map(Result::unwrap).collect();
    // Even lengths: records 1 (4), 2 (6), 4 (8), 5 (2), 7 (10), 9 (12), 11 (14).
    let kept: Vec<Vec<i64>> = batches.iter().flat_map(real_rows).collect();
    let expected: Vec<Vec<i64>> = [1, 2, 4, 5, 7, 9, 11]
        .iter()
        .map(|&id| (0..LENS[id]).map(|j| value(id as i64, j)).collect())
        .collect();
    assert_eq!(kept, expected);
    assert_eq!(
        batches.iter().map(|b| b.real_rows).collect::<Vec<_>>(),
        [3, 3, 1]
    );
    let shapes = p.shapes().unwrap();
    assert!(batches.iter().all(|b| shapes.contains(&b.shape())));
    // The columns face gives the same records, in full batches.
    let columns: Vec<usize> = base(dir.path())
        .parse(spec())
        .filter_rows(even)
        .batch(3, true)
        .build_columns()
        .unwrap()
        .map(|b| b.unwrap().num_records)
        .collect();
    assert_eq!(columns, [3, 3]);
}

#[test]
fn map_batch_runs_before_assembly_and_bucketing_sees_mapped_lengths() {
    let dir = tempfile::tempdir().unwrap();
    // Plain batches: every row doubled.
    let batches: Vec<_> = base(dir.path())
        .parse(spec())
        .map_batch(doubled)
        .max_length(32)
        .batch(4, false)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let got: Vec<Vec<i64>> = batches.iter().flat_map(real_rows).collect();
    let twice = |id: usize| -> Vec<i64> {
        let once: Vec<i64> = (0..LENS[id]).map(|j| value(id as i64, j)).collect();
        [once.clone(), once].concat()
    };
    assert_eq!(got, (0..12).map(twice).collect::<Vec<_>>());
    // Buckets by the doubled length, after a filter: (0,8], (8,16], (16,28].
    let p = base(dir.path())
        .parse(spec())
        .filter_rows(|b, r| len_of(b, r) != 5)
        .map_batch(doubled)
        .max_length(28)
        .truncation(infeed::batch::Truncation::KeepStart)
        .bucket_by_length("ids", &[8, 16], &[2, 2, 2]);
    let shapes = p.shapes().unwrap();
    let mut seen = Vec::new();
    for batch in p.build().unwrap() {
        let batch = batch.unwrap();
        assert!(shapes.contains(&batch.shape()));
        let width = batch["ids"].shape()[1];
        for row in real_rows(&batch) {
            let id = id_of(row[0]) as usize;
            let len = 2 * LENS[id];
            let bucket = match len {
                0..=8 => 8,
                9..=16 => 16,
                _ => 28,
            };
            assert_eq!(width, bucket, "record {id}");
            assert_eq!(row, twice(id)[..len.min(28)]);
            seen.push(id);
        }
    }
    seen.sort();
    assert_eq!(seen, [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11]);
}

#[test]
fn a_map_that_fails_or_drops_records_is_an_error_naming_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[LENS.to_vec()]);
    let run = |p: ParsedPipeline| p.max_length(16).batch(4, false).build().unwrap().next();
    match run(Pipeline::from_files(files.clone())
        .unwrap()
        .parse(spec())
        .map_batch(|_| Err("no tokenizer".into())))
    {
        Some(Err(PipelineError::Map {
            path,
            offset,
            message,
            ..
        })) => {
            assert_eq!((path.as_str(), offset), (files[0].as_str(), 0));
            assert_eq!(message, "no tokenizer");
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.shape()))),
    }
    match run(Pipeline::from_files(files.clone())
        .unwrap()
        .parse(spec())
        .map_batch(|b| Ok(infeed::pipeline::select_rows(&b, &[0]))))
    {
        Some(Err(PipelineError::Map { message, .. })) => {
            assert!(message.contains("returned 1 records for 4"), "{message}")
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.shape()))),
    }
    // With a filter the batch count comes from running the filter once
    // first: the same batches as without equal_batches.
    let filtered = |p: Pipeline| {
        p.parse(spec())
            .filter_rows(even)
            .max_length(16)
            .batch(2, true)
            .build()
            .unwrap()
            .map(|b| b.unwrap().digest())
            .collect::<Vec<_>>()
    };
    let plain = filtered(Pipeline::from_files(files.clone()).unwrap());
    let equal = filtered(
        Pipeline::from_files(files)
            .unwrap()
            .equal_batches(EqualBatches::Drop),
    );
    assert!(!plain.is_empty());
    assert_eq!(equal, plain);
}

#[test]
fn filtered_output_is_the_same_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<Vec<usize>> = (0..3)
        .map(|f| (0..50).map(|i| 1 + (i * 5 + f * 7) % 30).collect())
        .collect();
    let files = write_lm_files(dir.path(), &lens);
    let make = |threads| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .seed(9)
            .interleave(3, 1)
            .shuffle(40)
            .repeat(Some(2))
            .threads(threads)
            .parse(spec())
            .filter_rows(even)
            .pack(16)
            .pack_overflow(infeed::batch::Overflow::Split)
            .batch(2, false)
    };
    let one = digests(make(1).build().unwrap());
    assert!(one.len() > 20);
    for threads in [2, 4] {
        assert_eq!(digests(make(threads).build().unwrap()), one);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn restore_at_any_cut_continues_exactly_with_parsed_ops(
        seed in 0u64..1000,
        cut in 0usize..30,
        threads in 1usize..4,
        bucket in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let lens: Vec<Vec<usize>> = (0..3)
            .map(|f| (0..(30 + f * 7)).map(|i| 1 + (i * 17 + f * 3 + seed as usize) % 13).collect())
            .collect();
        let files = write_lm_files(dir.path(), &lens);
        let p = Pipeline::from_files(files)
            .unwrap()
            .seed(seed)
            .shuffle_files()
            .interleave(2, 1)
            .shuffle(25)
            .repeat(Some(2))
            .threads(threads)
            .parse(spec())
            .filter_rows(|b, r| !len_of(b, r).is_multiple_of(3))
            .map_batch(doubled)
            .max_length(26);
        let p = if bucket {
            p.bucket_by_length("ids", &[8, 16], &[3, 2, 2])
        } else {
            p.batch(3, false)
        };
        let all = digests(p.clone().build().unwrap());
        let (head, state) = digests_then_state(p.clone().build().unwrap(), cut);
        prop_assert_eq!(&head[..], &all[..head.len()]);
        let tail = digests(p.resume_from(&state).build().unwrap());
        prop_assert_eq!(&tail[..], &all[head.len()..]);
    }
}

#[test]
fn a_panic_in_a_parsed_op_is_an_error_not_a_hang() {
    within(60, || {
        let dir = tempfile::tempdir().unwrap();
        let files = write_lm_files(dir.path(), &[LENS.to_vec()]);
        let panicking_filter = Pipeline::from_files(files.clone())
            .unwrap()
            .parse(spec())
            .filter_rows(|b, r| {
                if len_of(b, r) == 9 {
                    panic!("bad row")
                } else {
                    true
                }
            })
            .max_length(16)
            .batch(2, false);
        let panicking_map = Pipeline::from_files(files)
            .unwrap()
            .threads(2)
            .parse(spec())
            .map_batch(|b| {
                if b.num_records == 2 {
                    panic!("bad batch")
                } else {
                    Ok(b)
                }
            })
            .max_length(16)
            .batch(5, false);
        for (p, message) in [(panicking_filter, "bad row"), (panicking_map, "bad batch")] {
            let results: Vec<_> = p.build().unwrap().collect();
            match results.last() {
                Some(Err(PipelineError::Worker(m))) => assert_eq!(m, message),
                other => panic!("{:?}", other.map(|r| r.as_ref().map(|b| b.shape()))),
            }
        }
    });
}

#[test]
fn filter_length_keeps_exactly_the_records_of_those_lengths_and_its_bounds_are_in_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let kept = |min, max| {
        base(dir.path())
            .parse(spec())
            .filter_length("ids", min, max)
            .max_length(16)
            .batch(2, false)
    };
    let p = kept(4, 9);
    let mut batches = p.build().unwrap();
    let mut rows = Vec::new();
    while let Some(batch) = batches.next_batch().unwrap() {
        rows.extend(real_rows(&batch));
    }
    // LENS = [3, 4, 6, 1, 8, 2, 5, 10, 7, 12, 9, 14]: records 1, 2, 4, 6, 8, 10.
    let expected: Vec<Vec<i64>> = [1, 2, 4, 6, 8, 10]
        .iter()
        .map(|&id| (0..LENS[id]).map(|j| value(id as i64, j)).collect())
        .collect();
    assert_eq!(rows, expected);
    let account = batches.stats().records;
    assert_eq!((account.delivered, account.left_out.filtered), (6, 6));
    // A state of other bounds is of another pipeline.
    let mut first = kept(4, 9).build().unwrap();
    first.next_batch().unwrap();
    let state = first.state();
    assert!(kept(4, 9).resume_from(&state).build().is_ok());
    match kept(4, 10).resume_from(&state).build() {
        Err(PipelineError::BadState(_)) => {}
        other => panic!("restored under other bounds: {:?}", other.map(|_| ())),
    }
    // Only a variable-length feature has lengths to filter by.
    let fixed = base(dir.path())
        .parse(infeed::spec::FeatureSpec::new().fixed_len("ids", infeed::spec::DType::Int64, &[1]))
        .filter_length("ids", 1, 2)
        .batch(2, false);
    assert!(matches!(fixed.build(), Err(PipelineError::Config(m)) if m.contains("fixed-length")));
}

/// `filter_length` alone before the grouping is decided by the wire scan,
/// without a parse: it keeps exactly what a parse keeps (a record without
/// the feature holds 0 values; both bounds inclusive), and a record the
/// scan cannot read is the parse's error, after the same batches.
#[test]
fn filter_length_by_the_wire_scan_keeps_what_a_parse_keeps() {
    use crate::support::tfrecord::write_file;
    use infeed::record::Compression;
    let dir = tempfile::tempdir().unwrap();
    let records = |bad: bool| {
        let mut records: Vec<Vec<u8>> = (0..40)
            .map(|i| lm_record(i, (i as usize * 5) % 9))
            .collect();
        // Records without `ids` at all, and with an empty list.
        records[3] = example(&[("mask", vec![1, 1])]);
        records[11] = example(&[("ids", vec![]), ("mask", vec![])]);
        if bad {
            records[29] = float_ids();
        }
        records
    };
    let good = write_file(
        &dir.path().join("good.tfrecord"),
        records(false),
        Compression::None,
    );
    let bad = write_file(
        &dir.path().join("bad.tfrecord"),
        records(true),
        Compression::None,
    );
    let run = |file: &str, min: u64, parsed: bool| {
        let p = Pipeline::from_files([file])
            .unwrap()
            .threads(2)
            .parse(spec());
        // A map before it: the records are parsed to be filtered.
        let p = if parsed { p.map_batch(Ok) } else { p };
        let mut batches = p
            .filter_length("ids", min, 4)
            .pack(8)
            .batch(2, false)
            .build()
            .unwrap();
        let mut digests = Vec::new();
        loop {
            match batches.next_batch() {
                Ok(Some(b)) => digests.push(b.digest()),
                Ok(None) => return (digests, None, batches.stats().records.left_out.filtered),
                Err(e) => return (digests, Some(e.to_string()), 0),
            }
        }
    };
    for min in [0, 2] {
        let scanned = run(&good, min, false);
        assert_eq!(scanned, run(&good, min, true), "min {min}");
        assert!(scanned.0.len() > 2 && scanned.1.is_none(), "{scanned:?}");
        // Lengths (5i mod 9): 17 are over 4 (record 3 no longer is), and
        // under 2 the 5 of length 0, the 5 of length 1 and record 3.
        let under = if min == 0 { 0 } else { 11 };
        assert_eq!(scanned.2, 17 + under, "min {min}");
    }
    // The scan's run ends with the parse's error, naming `feature`, after
    // the same batches.
    let same_error = |file: &str, feature: &str| {
        let (digests, error, _) = run(file, 0, false);
        assert!(
            error.as_ref().is_some_and(|e| e.contains(feature)),
            "{error:?}"
        );
        let (parsed, parse_error, _) = run(file, 0, true);
        assert_eq!((digests, error), (parsed, parse_error));
    };
    same_error(&bad, "ids");
    // A record the filter leaves out (7 ids) whose other feature the spec
    // refuses (`mask` as floats) is parsed, and is its error: not dropped.
    use infeed::example::proto::{Example, Feature};
    let mut with_bad_mask = records(false);
    with_bad_mask[20] = prost::Message::encode_to_vec(&Example::from_features([
        ("ids", Feature::int64s((0..7).collect::<Vec<i64>>())),
        ("mask", Feature::floats(vec![1.0; 7])),
    ]));
    let bad = write_file(
        &dir.path().join("mask.tfrecord"),
        with_bad_mask,
        Compression::None,
    );
    same_error(&bad, "mask");
}
