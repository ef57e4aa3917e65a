//! Bucketing by length in the pipeline: exact batches, shapes listed ahead,
//! every record once, thread-count independence, exact restores, errors.

use super::grouping::*;
use crate::support::tfrecord::write_file;
use infeed::batch::{BucketError, PlanError, Truncation};
use infeed::pipeline::{Pipeline, PipelineError};
use infeed::spec::{DType, FeatureSpec};
use proptest::prelude::*;

/// Lengths of the hand-computed case: buckets (0,4], (4,8], (8,16].
const LENS: [usize; 10] = [3, 9, 1, 5, 12, 4, 2, 7, 20, 6];

fn hand_case(dir: &std::path::Path) -> infeed::pipeline::ParsedPipeline {
    let files = write_lm_files(dir, &[LENS.to_vec()]);
    Pipeline::from_files(files)
        .unwrap()
        .threads(3)
        .parse(spec())
        .max_length(16)
        .truncation(Truncation::KeepStart)
        .bucket_by_length("ids", &[4, 8], &[2, 2, 1])
}

fn expect_row(id: i64, len: usize, width: usize) -> Vec<i64> {
    let mut row: Vec<i64> = (0..len.min(width)).map(|j| value(id, j)).collect();
    row.resize(width, 0);
    row
}

#[test]
fn buckets_emit_when_full_then_the_partial_ones_in_bucket_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = hand_case(dir.path());
    let shapes = p.shapes().unwrap();
    assert_eq!(
        shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        [
            "ids: i64[1, 16], ids_mask: i64[1, 16], mask: i64[1, 16], mask_mask: i64[1, 16]",
            "ids: i64[2, 4], ids_mask: i64[2, 4], mask: i64[2, 4], mask_mask: i64[2, 4]",
            "ids: i64[2, 8], ids_mask: i64[2, 8], mask: i64[2, 8], mask_mask: i64[2, 8]",
        ]
    );
    let batches: Vec<_> = p.build().unwrap().map(Result::unwrap).collect();
    // (records, bucket width) in emission order, worked out by hand.
    let expected: [(&[i64], usize); 7] = [
        (&[1], 16),
        (&[0, 2], 4),
        (&[4], 16),
        (&[5, 6], 4),
        (&[3, 7], 8),
        (&[8], 16),
        (&[9], 8),
    ];
    assert_eq!(batches.len(), expected.len());
    for (batch, (ids, width)) in batches.iter().zip(expected) {
        assert!(shapes.contains(&batch.shape()), "{}", batch.shape());
        assert_eq!(batch.real_rows, ids.len());
        let got = rows(batch, "ids");
        for (row, &id) in got.iter().zip(ids) {
            assert_eq!(row, &expect_row(id, LENS[id as usize], width));
        }
        // Padding rows of the last, partial batch are all zero.
        for row in got.iter().skip(ids.len()) {
            assert_eq!(row, &vec![0; width]);
        }
        let mask = rows(batch, "ids_mask");
        for (m, &id) in mask.iter().zip(ids) {
            let n = LENS[id as usize].min(width);
            assert_eq!(m.iter().filter(|&&x| x == 1).count(), n);
        }
    }
    // drop_remainder: the partial bucket (record 9) is dropped.
    let dropped: Vec<_> = p
        .clone()
        .drop_remainder(true)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(dropped.len(), 6);
}

#[test]
fn pad_to_multiple_of_rounds_each_bucket_up_and_the_last_pads_to_max_length() {
    let dir = tempfile::tempdir().unwrap();
    let p = hand_case(dir.path())
        .pad_to_multiple_of(8)
        .max_length(20)
        .bucket_by_length("ids", &[5, 10], &[3, 2, 1]);
    let widths: Vec<Vec<usize>> = p
        .shapes()
        .unwrap()
        .iter()
        .map(|s| s.tensors[0].shape.clone())
        .collect();
    assert_eq!(widths, [vec![1, 20], vec![2, 16], vec![3, 8]]);
    for batch in p.build().unwrap() {
        let batch = batch.unwrap();
        assert!(widths.contains(&batch["ids"].shape().to_vec()));
    }
}

#[test]
fn every_record_appears_once_per_epoch_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<Vec<usize>> = (0..3)
        .map(|f| (0..37).map(|i| 1 + (i * 7 + f * 13) % 40).collect())
        .collect();
    let files = write_lm_files(dir.path(), &lens);
    let make = |threads| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .seed(11)
            .shuffle_files()
            .interleave(2, 3)
            .shuffle(20)
            .repeat(Some(2))
            .threads(threads)
            .parse(spec())
            .pad_to_multiple_of(4)
            .max_length(40)
            .bucket_by_length("ids", &[8, 16, 24], &[5, 4, 3, 2])
    };
    let shapes = make(1).shapes().unwrap();
    let mut seen: Vec<Vec<i64>> = Vec::new();
    let mut sequence = Vec::new();
    for batch in make(1).build().unwrap() {
        let batch = batch.unwrap();
        assert!(shapes.contains(&batch.shape()));
        sequence.push(batch.digest());
        for row in real_rows(&batch) {
            // A row of the bucket for its length, values exactly its record's.
            let id = id_of(row[0]);
            let len = lens[(id / 100) as usize][(id % 100) as usize];
            let expected: Vec<i64> = (0..len).map(|j| value(id, j)).collect();
            assert_eq!(row, expected);
            let width = batch["ids"].shape()[1];
            let bucket_width = match len {
                0..=8 => 8,
                9..=16 => 16,
                17..=24 => 24,
                _ => 40,
            };
            assert_eq!(width, bucket_width, "record {id} of length {len}");
            seen.push(row);
        }
    }
    let mut all: Vec<Vec<i64>> = Vec::new();
    for (f, lens) in lens.iter().enumerate() {
        for (i, &len) in lens.iter().enumerate() {
            let id = (f * 100 + i) as i64;
            let row: Vec<i64> = (0..len).map(|j| value(id, j)).collect();
            all.push(row.clone());
            all.push(row);
        }
    }
    seen.sort();
    all.sort();
    assert_eq!(seen, all);
    for threads in [2, 4] {
        assert_eq!(digests(make(threads).build().unwrap()), sequence);
    }
}

#[test]
fn configuration_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let base = || {
        let files = write_lm_files(dir.path(), &[vec![3, 4]]);
        Pipeline::from_files(files)
            .unwrap()
            .parse(spec().fixed_len("label", DType::Int64, &[1]))
            .max_length(16)
    };
    let err = |p: infeed::pipeline::ParsedPipeline| p.shapes().unwrap_err();
    assert!(matches!(
        err(base().bucket_by_length("nope", &[4], &[2, 1])),
        PipelineError::Plan(PlanError::UnknownFeature { feature }) if feature == "nope"
    ));
    assert!(matches!(
        err(base().bucket_by_length("label", &[4], &[2, 1])),
        PipelineError::Plan(PlanError::NotVarLen { feature }) if feature == "label"
    ));
    assert!(matches!(
        err(base().bucket_by_length("ids", &[8, 4], &[2, 2, 1])),
        PipelineError::Bucket(BucketError::Boundaries { boundaries }) if boundaries == [8, 4]
    ));
    assert!(matches!(
        err(base().bucket_by_length("ids", &[4, 8], &[2, 1])),
        PipelineError::Bucket(BucketError::BatchSizes {
            expected: 3,
            actual: 2,
            ..
        })
    ));
    assert!(matches!(
        err(base().bucket_by_length("ids", &[4, 32], &[2, 2, 1])),
        PipelineError::Plan(PlanError::BoundaryAboveBound {
            boundary: 32,
            bound: 16,
            ..
        })
    ));
    assert!(matches!(
        err(base().batch(4, false).bucket_by_length("ids", &[4], &[2, 1])),
        PipelineError::Config(m) if m.contains("leave out batch()")
    ));
    // No length bound: the last bucket would have no shape.
    let files = write_lm_files(dir.path(), &[vec![3]]);
    let unbounded = Pipeline::from_files(files)
        .unwrap()
        .parse(spec())
        .bucket_by_length("ids", &[4], &[2, 1]);
    assert!(matches!(
        unbounded.shapes().unwrap_err(),
        PipelineError::Plan(PlanError::Unbounded { .. })
    ));
    // build() reports the same errors.
    assert!(
        base()
            .bucket_by_length("nope", &[4], &[2, 1])
            .build()
            .is_err()
    );
}

#[test]
fn a_record_over_max_length_in_the_last_bucket_follows_the_truncation_policy() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![2, 30]]);
    let mut batches = Pipeline::from_files(files.clone())
        .unwrap()
        .parse(spec())
        .max_length(16)
        .bucket_by_length("ids", &[4], &[2, 1])
        .build()
        .unwrap();
    match batches.next_batch() {
        Err(PipelineError::Batch {
            path,
            offset,
            error,
            ..
        }) => {
            assert_eq!(path, files[0]);
            // The second record's header: the first is 16 bytes of framing
            // plus its payload.
            assert_eq!(offset, 16 + lm_record(0, 2).len() as u64);
            assert_eq!(
                error.kind,
                infeed::batch::BatchErrorKind::TooLong {
                    length: 30,
                    limit: 16
                }
            );
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.shape()))),
    }
}

#[test]
fn a_record_whose_bucketing_feature_has_another_type_is_a_parse_error_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.tfrecord");
    // The second record holds "ids" as a float list.
    write_file(
        &path,
        [lm_record(0, 3), float_ids()],
        infeed::record::Compression::None,
    );
    let spec = FeatureSpec::new().var_len("ids", DType::Int64);
    let mut batches = Pipeline::from_files([path.display().to_string()])
        .unwrap()
        .parse(spec)
        .max_length(8)
        .bucket_by_length("ids", &[4], &[4, 4])
        .build()
        .unwrap();
    // The first record's partial bucket comes first (records before an
    // error are delivered), then the error.
    let first = batches.next_batch().unwrap().unwrap();
    assert_eq!(first.real_rows, 1);
    match batches.next_batch() {
        Err(PipelineError::Parse {
            path: p,
            offset,
            error,
            ..
        }) => {
            assert_eq!(p, path.display().to_string());
            assert_eq!(offset, 16 + lm_record(0, 3).len() as u64);
            assert_eq!(error.feature.as_deref(), Some("ids"));
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.shape()))),
    }
}

#[test]
fn the_state_holds_waiting_records_as_positions_and_stays_small() {
    // 10 000-record shuffle buffer plus buckets of 512 + 256 + 128 + 64.
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<Vec<usize>> = (0..4)
        .map(|f| (0..100).map(|i| 1 + (i * 31 + f * 17) % 300).collect())
        .collect();
    let files = write_lm_files(dir.path(), &lens);
    let p = Pipeline::from_files(files)
        .unwrap()
        .seed(3)
        .interleave(4, 1)
        .repeat(None)
        .shuffle(10_000) // after repeat: the buffer spans epochs and fills
        .parse(spec())
        .max_length(512)
        .bucket_by_length("ids", &[64, 128, 256], &[512, 256, 128, 64])
        .drop_remainder(true);
    // 400 distinct records repeated: after 30 batches the buffer is full.
    let (first, state) = digests_then_state(p.build().unwrap(), 30);
    assert_eq!(first.len(), 30);
    eprintln!("state with buckets: {} bytes", state.len());
    assert!(state.len() < 64 * 1024, "{} bytes", state.len());
    let (next, _) = digests_then_state(p.clone().build().unwrap(), 35);
    let (resumed, _) = digests_then_state(p.resume_from(&state).build().unwrap(), 5);
    assert_eq!(resumed, next[30..]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn restore_at_any_cut_continues_exactly(
        seed in 0u64..1000,
        cut in 0usize..40,
        threads in 1usize..4,
        shuffle in prop_oneof![Just(0usize), Just(7), Just(30)],
        drop in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let lens: Vec<Vec<usize>> = (0..3)
            .map(|f| (0..(20 + f * 5)).map(|i| 1 + ((i * 11 + f * 5 + seed as usize) % 30)).collect())
            .collect();
        let files = write_lm_files(dir.path(), &lens);
        let p = Pipeline::from_files(files)
            .unwrap()
            .seed(seed)
            .shuffle_files()
            .interleave(2, 2)
            .shuffle(shuffle)
            .repeat(Some(3))
            .threads(threads)
            .parse(spec())
            .pad_to_multiple_of(4)
            .max_length(32)
            .bucket_by_length("ids", &[6, 12, 20], &[4, 3, 3, 2])
            .drop_remainder(drop);
        let all = digests(p.clone().build().unwrap());
        let (head, state) = digests_then_state(p.clone().build().unwrap(), cut);
        prop_assert_eq!(&head[..], &all[..head.len()]);
        let tail = digests(p.resume_from(&state).build().unwrap());
        prop_assert_eq!(&tail[..], &all[head.len()..]);
    }
}

/// A bucket's batch is assembled straight from the records when the plan
/// allows (no parsed ops, Example records): exactly the batch the two-step
/// path (parse, then assemble) gives, which an identity `map_batch` forces;
/// on one host and on each of two (scheduled buckets), with i32 and i64,
/// truncation and the last bucket padded to the bound.
#[test]
fn direct_bucket_batches_equal_the_two_step_path_exactly() {
    use infeed::batch::TensorType;
    let lm = super::testdata("lm-sample.tfrecord");
    let spec = FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64);
    for (host, cast, truncate) in [
        (None, None, false),
        (Some((0, 2)), Some(TensorType::I32), true),
        (Some((1, 2)), None, true),
    ] {
        let mut p = Pipeline::from_files([lm.clone()])
            .unwrap()
            .seed(4)
            .shuffle(32);
        if let Some((i, n)) = host {
            p = p.shard(i, n).repeat(Some(2));
        }
        let mut p = p
            .parse(spec.clone())
            .bucket_by_length("input_ids", &[64, 128, 256], &[8, 4, 4, 2])
            .max_length(if truncate { 300 } else { 512 });
        if truncate {
            p = p.truncation(Truncation::KeepStart);
        }
        if let Some(t) = cast {
            p = p.cast(t);
        }
        let direct = digests(p.build().unwrap());
        let two_step = digests(p.map_batch(Ok).build().unwrap());
        assert!(direct.len() > 10);
        assert_eq!(direct, two_step, "{host:?} {cast:?} {truncate}");
    }
}
