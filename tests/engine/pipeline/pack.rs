//! Packing in the pipeline: hand-computed rows with segment ids and
//! positions under each strategy (first fit, best fit, concat-split) and a
//! segment cap, every token once, overflow policies, exact restores (also
//! in the middle of a record split across batches), errors.

use super::grouping::*;
use crate::support::tfrecord::write_file;
use infeed::batch::{BatchErrorKind, Overflow, POSITIONS, PackStrategy, SEGMENT_IDS, TensorType};
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

/// Record `id`'s values `range`, `n` times: the rows of a hand-computed
/// packing, one per row.
fn rows_of(parts: &[&[(i64, std::ops::Range<usize>)]], width: usize) -> Vec<Vec<i64>> {
    parts
        .iter()
        .map(|row_parts| {
            let values: Vec<Vec<i64>> = row_parts
                .iter()
                .map(|(id, r)| vals(*id, r.clone()))
                .collect();
            row(&values, width)
        })
        .collect()
}

#[test]
fn best_fit_takes_the_row_a_record_fills_most() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 6, 2, 5, 4, 1]]);
    let batches: Vec<_> = packed(files, 8, 2)
        .pack_strategy(PackStrategy::BestFit)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // Record 2 (2) goes beside record 1 (room 2), not record 0 (room 5),
    // which then takes record 3 (5): batch 0 is full, no padding.
    assert_eq!(
        batches.iter().map(|b| rows(b, "ids")).collect::<Vec<_>>(),
        [
            rows_of(&[&[(0, 0..3), (3, 0..5)], &[(1, 0..6), (2, 0..2)]], 8),
            rows_of(&[&[(4, 0..4), (5, 0..1)], &[]], 8),
        ]
    );
    assert_eq!(
        rows(&batches[0], SEGMENT_IDS),
        [[1, 1, 1, 2, 2, 2, 2, 2], [1, 1, 1, 1, 1, 1, 2, 2]]
    );
    assert_eq!(batches[1].real_rows, 1);
}

#[test]
fn concat_split_cuts_at_row_ends_and_pads_only_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 6, 2, 5, 4, 1]]);
    let p = packed(files.clone(), 8, 2).pack_strategy(PackStrategy::ConcatSplit);
    let batches: Vec<_> = p.build().unwrap().map(Result::unwrap).collect();
    // Record 1 is cut after 5 values; its last value opens row 1.
    assert_eq!(
        batches.iter().map(|b| rows(b, "ids")).collect::<Vec<_>>(),
        [
            rows_of(
                &[&[(0, 0..3), (1, 0..5)], &[(1, 5..6), (2, 0..2), (3, 0..5)]],
                8
            ),
            rows_of(&[&[(4, 0..4), (5, 0..1)], &[]], 8),
        ]
    );
    // Segment ids and positions restart at each record and each cut.
    assert_eq!(
        rows(&batches[0], SEGMENT_IDS),
        [[1, 1, 1, 2, 2, 2, 2, 2], [1, 2, 2, 3, 3, 3, 3, 3]]
    );
    assert_eq!(
        rows(&batches[0], POSITIONS),
        [[0, 1, 2, 0, 1, 2, 3, 4], [0, 0, 1, 0, 1, 2, 3, 4]]
    );
    assert_eq!(rows(&batches[0], "ids_mask"), [[1; 8], [1; 8]]);
    assert_eq!(
        rows(&batches[1], "ids_mask"),
        [[1, 1, 1, 1, 1, 0, 0, 0], [0; 8]]
    );

    // One row a batch: a record cut across batches, and a restore after
    // every batch (the open batch holds the rest of a cut record).
    let files = write_lm_files(dir.path(), &[vec![5, 11, 2]]);
    let p = packed(files, 8, 1).pack_strategy(PackStrategy::ConcatSplit);
    let whole: Vec<_> = p.build().unwrap().map(Result::unwrap).collect();
    assert_eq!(
        whole.iter().map(|b| rows(b, "ids")).collect::<Vec<_>>(),
        [
            rows_of(&[&[(0, 0..5), (1, 0..3)]], 8),
            rows_of(&[&[(1, 3..11)]], 8),
            rows_of(&[&[(2, 0..2)]], 8),
        ]
    );
    let all: Vec<u64> = whole.iter().map(|b| b.digest()).collect();
    for k in 0..=3 {
        let (head, state) = digests_then_state(p.build().unwrap(), k);
        assert_eq!(head, all[..k]);
        assert_eq!(
            digests(p.clone().resume_from(&state).build().unwrap()),
            all[k..]
        );
    }
}

#[test]
fn max_segments_caps_the_records_of_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 6, 2, 5, 4, 1]]);
    let run = |strategy, cap| -> Vec<Vec<Vec<i64>>> {
        packed(files.clone(), 8, 2)
            .pack_strategy(strategy)
            .pack_max_segments(cap)
            .build()
            .unwrap()
            .map(|b| rows(&b.unwrap(), "ids"))
            .collect()
    };
    assert_eq!(
        run(PackStrategy::FirstFit, 1),
        [
            rows_of(&[&[(0, 0..3)], &[(1, 0..6)]], 8),
            rows_of(&[&[(2, 0..2)], &[(3, 0..5)]], 8),
            rows_of(&[&[(4, 0..4)], &[(5, 0..1)]], 8),
        ]
    );
    // Row 1 holds two pieces after 3 values: the rest of it stays padding.
    assert_eq!(
        run(PackStrategy::ConcatSplit, 2),
        [
            rows_of(&[&[(0, 0..3), (1, 0..5)], &[(1, 5..6), (2, 0..2)]], 8),
            rows_of(&[&[(3, 0..5), (4, 0..3)], &[(4, 3..4), (5, 0..1)]], 8),
        ]
    );
    assert!(matches!(
        packed(files.clone(), 8, 2).pack_max_segments(0).shapes(),
        Err(PipelineError::Plan(infeed::batch::PlanError::ZeroLength {
            what: "max_segments",
            ..
        }))
    ));
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

/// Three files of 40 records of 0 to 22 values.
fn mixed_lengths() -> Vec<Vec<usize>> {
    (0..3)
        .map(|f| (0..40).map(|i| (i * 7 + f * 3) % 23).collect())
        .collect()
}

/// `files` shuffled, interleaved and repeated twice on `threads` workers,
/// parsed and packed into rows of 16.
fn shuffled_packing(files: &[String], threads: usize) -> ParsedPipeline {
    Pipeline::from_files(files.to_vec())
        .unwrap()
        .seed(5)
        .shuffle_files()
        .interleave(3, 2)
        .shuffle(25)
        .repeat(Some(2))
        .threads(threads)
        .parse(spec())
        .pack(16)
}

#[test]
fn every_token_lands_once_in_order_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let lens = mixed_lengths();
    let files = write_lm_files(dir.path(), &lens);
    let make = |threads| {
        shuffled_packing(&files, threads)
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

/// Concat-split over a shuffled, interleaved, repeated run: no padding
/// before the last batch, every record's values once per epoch in order
/// (cut anywhere), each piece starting at position 0 and only a row's first
/// piece starting inside a record.
#[test]
fn concat_split_wastes_nothing_and_keeps_every_token_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let lens = mixed_lengths();
    let files = write_lm_files(dir.path(), &lens);
    let make = |threads| {
        shuffled_packing(&files, threads)
            .pack_strategy(PackStrategy::ConcatSplit)
            .batch(4, false)
    };
    let batches: Vec<_> = make(2).build().unwrap().map(Result::unwrap).collect();
    let mut stream = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        let (ids, seg, pos) = (
            rows(batch, "ids"),
            rows(batch, SEGMENT_IDS),
            rows(batch, POSITIONS),
        );
        for ((ids, seg), pos) in ids.iter().zip(&seg).zip(&pos) {
            for i in 0..16 {
                if seg[i] == 0 {
                    assert_eq!(b, batches.len() - 1, "padding before the last batch");
                    continue;
                }
                let starts = i == 0 || seg[i] != seg[i - 1];
                assert_eq!(pos[i] == 0, starts, "batch {b}");
                if starts && i > 0 {
                    assert_eq!(ids[i] % 1000, 1, "a piece inside a row starts a record");
                }
                stream.push(ids[i]);
            }
        }
    }
    // The values in row order are the records one after another.
    let mut seen: std::collections::BTreeMap<i64, usize> = Default::default();
    let mut i = 0;
    while i < stream.len() {
        let id = id_of(stream[i]);
        let len = lens[(id / 100) as usize][(id % 100) as usize];
        assert_eq!(stream[i..i + len], vals(id, 0..len)[..], "record {id}");
        *seen.entry(id).or_default() += 1;
        i += len;
    }
    let nonempty = lens.iter().flatten().filter(|&&l| l > 0).count();
    assert_eq!(seen.len(), nonempty);
    assert!(seen.values().all(|&n| n == 2), "{seen:?}");
    let digests_2: Vec<u64> = batches.iter().map(|b| b.digest()).collect();
    for threads in [1, 3] {
        assert_eq!(digests(make(threads).build().unwrap()), digests_2);
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
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn restore_at_any_cut_continues_exactly(
        seed in 0u64..1000,
        cut in 0usize..30,
        threads in 1usize..4,
        shuffle in prop_oneof![Just(0usize), Just(9), Just(40)],
        split in any::<bool>(),
        drop in any::<bool>(),
        strategy in prop_oneof![
            Just(PackStrategy::FirstFit),
            Just(PackStrategy::BestFit),
            Just(PackStrategy::ConcatSplit),
        ],
        cap in prop_oneof![Just(None), Just(Some(2usize))],
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
            .pack_strategy(strategy);
        let p = match cap {
            Some(cap) => p.pack_max_segments(cap),
            None => p,
        }
        .batch(3, drop);
        let all = digests(p.clone().build().unwrap());
        let (head, state) = digests_then_state(p.clone().build().unwrap(), cut);
        prop_assert_eq!(&head[..], &all[..head.len()]);
        let tail = digests(p.resume_from(&state).build().unwrap());
        prop_assert_eq!(&tail[..], &all[head.len()..]);
    }
}

/// The strategy and the cap are in the state's fingerprint: a state saved
/// under one is refused under another (the rows would differ).
#[test]
fn a_state_restores_only_under_its_own_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 6, 2, 5, 4, 1, 7, 3]]);
    let with = |strategy, cap: Option<usize>| {
        let p = packed(files.clone(), 8, 2).pack_strategy(strategy);
        match cap {
            Some(cap) => p.pack_max_segments(cap),
            None => p,
        }
    };
    let (_, state) = digests_then_state(with(PackStrategy::BestFit, None).build().unwrap(), 1);
    for (strategy, cap) in [
        (PackStrategy::FirstFit, None),
        (PackStrategy::ConcatSplit, None),
        (PackStrategy::BestFit, Some(2)),
    ] {
        let refused = with(strategy, cap).resume_from(&state).build();
        assert!(
            matches!(
                refused,
                Err(PipelineError::BadState(
                    infeed::pipeline::StateError::OtherPipeline { .. }
                ))
            ),
            "{strategy:?}, {cap:?}"
        );
    }
    assert!(
        with(PackStrategy::BestFit, None)
            .resume_from(&state)
            .build()
            .is_ok()
    );
}
