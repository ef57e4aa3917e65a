//! Packing in the pipeline: hand-computed rows with segment ids and
//! positions, every token once, overflow policies, exact restores (also in
//! the middle of a record split across batches), errors.

use super::grouping::*;
use crate::support::tfrecord::write_file;
use infeed::batch::{BatchErrorKind, Overflow, POSITIONS, SEGMENT_IDS, TensorType};
use infeed::pipeline::{ParsedPipeline, Pipeline, PipelineError};
use infeed::spec::DType;
use proptest::prelude::*;

fn packed(files: Vec<String>, row_length: usize, rows: usize) -> ParsedPipeline {
    Pipeline::from_files(files)
        .unwrap()
        .threads(2)
        .parse(spec())
        .cast(TensorType::I32)
        .pack(row_length)
        .batch(rows, false)
}

/// `v(id, j)` for `j` in `range`.
fn vals(id: i64, range: std::ops::Range<usize>) -> Vec<i64> {
    range.map(|j| value(id, j)).collect()
}

fn row(parts: &[Vec<i64>], width: usize) -> Vec<i64> {
    let mut r: Vec<i64> = parts.concat();
    r.resize(width, 0);
    r
}

#[test]
fn first_fit_rows_with_exact_segment_ids_positions_and_masks() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 6, 2, 5, 4, 1]]);
    let p = packed(files, 8, 2);
    let shapes = p.shapes().unwrap();
    assert_eq!(
        shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        [
            "ids: i32[2, 8], ids_mask: i32[2, 8], mask: i32[2, 8], mask_mask: i32[2, 8], \
          segment_ids: i32[2, 8], positions: i32[2, 8]"
        ]
    );
    let batches: Vec<_> = p.build().unwrap().map(Result::unwrap).collect();
    assert_eq!(batches.len(), 2);
    for b in &batches {
        assert_eq!(b.shape(), shapes[0]);
        assert_eq!(b.real_rows, 2);
    }
    // Batch 0: row 0 = records 0 (3) and 2 (2); row 1 = record 1 (6).
    // Record 3 (5) fits no row: batch 1 = row 0 records 3 and 5, row 1 record 4.
    assert_eq!(
        rows(&batches[0], "ids"),
        [
            row(&[vals(0, 0..3), vals(2, 0..2)], 8),
            row(&[vals(1, 0..6)], 8)
        ]
    );
    assert_eq!(
        rows(&batches[0], SEGMENT_IDS),
        [[1, 1, 1, 2, 2, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0, 0]]
    );
    assert_eq!(
        rows(&batches[0], POSITIONS),
        [[0, 1, 2, 0, 1, 0, 0, 0], [0, 1, 2, 3, 4, 5, 0, 0]]
    );
    assert_eq!(
        rows(&batches[0], "ids_mask"),
        [[1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0, 0]]
    );
    assert_eq!(rows(&batches[0], "mask"), rows(&batches[0], "ids_mask"));
    assert_eq!(
        rows(&batches[1], "ids"),
        [
            row(&[vals(3, 0..5), vals(5, 0..1)], 8),
            row(&[vals(4, 0..4)], 8)
        ]
    );
    assert_eq!(
        rows(&batches[1], SEGMENT_IDS),
        [[1, 1, 1, 1, 1, 2, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]]
    );
    assert_eq!(
        rows(&batches[1], POSITIONS),
        [[0, 1, 2, 3, 4, 0, 0, 0], [0, 1, 2, 3, 0, 0, 0, 0]]
    );
}

#[test]
fn overflow_policies_and_a_split_record_across_batches() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![5, 11, 2]]);
    let run = |overflow| -> Vec<Vec<Vec<i64>>> {
        packed(files.clone(), 8, 1)
            .pack_overflow(overflow)
            .build()
            .unwrap()
            .map(|b| rows(&b.unwrap(), "ids"))
            .collect()
    };
    // One row per batch: record 1 (8 kept values) closes record 0's batch,
    // and record 2 finds no room beside it.
    assert_eq!(
        run(Overflow::KeepStart),
        [
            vec![row(&[vals(0, 0..5)], 8)],
            vec![vals(1, 0..8)],
            vec![row(&[vals(2, 0..2)], 8)],
        ]
    );
    assert_eq!(
        run(Overflow::KeepEnd),
        [
            vec![row(&[vals(0, 0..5)], 8)],
            vec![vals(1, 3..11)],
            vec![row(&[vals(2, 0..2)], 8)],
        ]
    );
    // Split: 8 then 3 values, each its own segment, over two batches; the
    // 2-value record fits after the 3.
    let split: Vec<_> = packed(files.clone(), 8, 1)
        .pack_overflow(Overflow::Split)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        split.iter().map(|b| rows(b, "ids")).collect::<Vec<_>>(),
        [
            vec![row(&[vals(0, 0..5)], 8)],
            vec![vals(1, 0..8)],
            vec![row(&[vals(1, 8..11), vals(2, 0..2)], 8)],
        ]
    );
    assert_eq!(rows(&split[2], SEGMENT_IDS), [[1, 1, 1, 2, 2, 0, 0, 0]]);
    assert_eq!(rows(&split[2], POSITIONS), [[0, 1, 2, 0, 1, 0, 0, 0]]);
    // A restore after batch 1 holds record 1 with 8 values already packed.
    let p = packed(files.clone(), 8, 1).pack_overflow(Overflow::Split);
    let (head, state) = digests_then_state(p.build().unwrap(), 2);
    assert_eq!(head, [split[0].digest(), split[1].digest()]);
    let tail = digests(p.resume_from(&state).build().unwrap());
    assert_eq!(tail, [split[2].digest()]);
    // Error: names the file, the record's offset, the feature and lengths.
    match packed(files.clone(), 8, 1).build().unwrap().nth(1) {
        Some(Err(PipelineError::Batch {
            path,
            offset,
            error,
            ..
        })) => {
            assert_eq!(path, files[0]);
            assert_eq!(offset, 16 + lm_record(0, 5).len() as u64);
            assert_eq!(error.feature.as_deref(), Some("ids"));
            assert_eq!(
                error.kind,
                BatchErrorKind::TooLong {
                    length: 11,
                    limit: 8
                }
            );
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.shape()))),
    }
}

#[test]
fn every_token_lands_once_in_order_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<Vec<usize>> = (0..3)
        .map(|f| (0..40).map(|i| (i * 7 + f * 3) % 23).collect())
        .collect();
    let files = write_lm_files(dir.path(), &lens);
    let make = |threads| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .seed(5)
            .shuffle_files()
            .interleave(3, 2)
            .shuffle(25)
            .repeat(Some(2))
            .threads(threads)
            .parse(spec())
            .pack(16)
            .pack_overflow(Overflow::Split)
            .batch(4, false)
    };
    let shape = make(1).shapes().unwrap().remove(0);
    let mut sequence = Vec::new();
    // Per record: its pieces (segments), as seen.
    let mut seen: std::collections::BTreeMap<i64, Vec<Vec<i64>>> = Default::default();
    for batch in make(1).build().unwrap() {
        let batch = batch.unwrap();
        assert_eq!(batch.shape(), shape);
        sequence.push(batch.digest());
        let (ids, seg, pos) = (
            rows(&batch, "ids"),
            rows(&batch, SEGMENT_IDS),
            rows(&batch, POSITIONS),
        );
        for ((ids, seg), pos) in ids.iter().zip(&seg).zip(&pos) {
            let mut s = 0;
            for i in 0..16 {
                if seg[i] == 0 {
                    assert_eq!((ids[i], pos[i]), (0, 0));
                    continue;
                }
                let pieces = seen.entry(id_of(ids[i])).or_default();
                if seg[i] != s {
                    assert_eq!(seg[i], s + 1, "segments number 1, 2, …");
                    assert_eq!(pos[i], 0);
                    s = seg[i];
                    pieces.push(Vec::new());
                } else {
                    assert_eq!(pos[i], pos[i - 1] + 1);
                }
                pieces.last_mut().expect("a piece").push(ids[i]);
            }
        }
    }
    for (f, lens) in lens.iter().enumerate() {
        for (i, &len) in lens.iter().enumerate() {
            let id = (f * 100 + i) as i64;
            // Two epochs: the record's pieces of 16 (the last shorter),
            // twice; empty records are left out.
            let once: Vec<Vec<i64>> = vals(id, 0..len).chunks(16).map(<[i64]>::to_vec).collect();
            let mut expected = [once.clone(), once].concat();
            expected.sort();
            let mut pieces = seen.remove(&id).unwrap_or_default();
            pieces.sort();
            assert_eq!(pieces, expected, "record {id}");
        }
    }
    assert!(seen.is_empty(), "{seen:?}");
    for threads in [2, 3] {
        assert_eq!(digests(make(threads).build().unwrap()), sequence);
    }
}

#[test]
fn configuration_and_data_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 4]]);
    let base = || Pipeline::from_files(files.clone()).unwrap();
    match base()
        .parse(spec().fixed_len("label", DType::Int64, &[1]))
        .pack(8)
        .shapes()
    {
        Err(PipelineError::Config(m)) => assert!(m.contains("\"label\""), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        base().parse(spec()).pack(8).max_length(8).shapes(),
        Err(PipelineError::Config(m)) if m.contains("padding")
    ));
    assert!(matches!(
        base().parse(spec()).pack(0).shapes(),
        Err(PipelineError::Plan(
            infeed::batch::PlanError::ZeroLength { .. }
        ))
    ));
    assert!(matches!(
        base().parse(spec()).pack(8).build_columns(),
        Err(PipelineError::Config(_))
    ));
    // Packed features of unequal length in one record.
    let path = dir.path().join("unequal.tfrecord");
    write_file(
        &path,
        [example(&[("ids", vec![1, 2, 3]), ("mask", vec![1, 1])])],
        infeed::record::Compression::None,
    );
    let mut batches = Pipeline::from_files([path.display().to_string()])
        .unwrap()
        .parse(spec())
        .pack(8)
        .batch(2, false)
        .build()
        .unwrap();
    match batches.next_batch() {
        Err(PipelineError::Batch { path: p, error, .. }) => {
            assert_eq!(p, path.display().to_string());
            assert_eq!(error.feature.as_deref(), Some("mask"));
            assert_eq!(
                error.kind,
                BatchErrorKind::LengthMismatch {
                    expected: 3,
                    actual: 2
                }
            );
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.shape()))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn restore_at_any_cut_continues_exactly(
        seed in 0u64..1000,
        cut in 0usize..30,
        threads in 1usize..4,
        shuffle in prop_oneof![Just(0usize), Just(9), Just(40)],
        split in any::<bool>(),
        drop in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let lens: Vec<Vec<usize>> = (0..3)
            .map(|f| (0..(15 + f * 4)).map(|i| (i * 13 + f * 7 + seed as usize) % 27).collect())
            .collect();
        let files = write_lm_files(dir.path(), &lens);
        let overflow = if split { Overflow::Split } else { Overflow::KeepEnd };
        let p = Pipeline::from_files(files)
            .unwrap()
            .seed(seed)
            .shuffle_files()
            .interleave(2, 3)
            .shuffle(shuffle)
            .repeat(Some(2))
            .threads(threads)
            .parse(spec())
            .pack(12)
            .pack_overflow(overflow)
            .batch(3, drop);
        let all = digests(p.clone().build().unwrap());
        let (head, state) = digests_then_state(p.clone().build().unwrap(), cut);
        prop_assert_eq!(&head[..], &all[..head.len()]);
        let tail = digests(p.resume_from(&state).build().unwrap());
        prop_assert_eq!(&tail[..], &all[head.len()..]);
    }
}
