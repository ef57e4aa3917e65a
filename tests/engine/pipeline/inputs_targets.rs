//! `inputs_targets`: next-token inputs and targets from packed rows (each
//! strategy) and from padded rows, checked against the rows the same
//! pipeline gives without it.

use super::grouping::*;
use infeed::batch::{MaskType, POSITIONS, PackStrategy, SEGMENT_IDS, TensorType};
use infeed::pipeline::{INPUTS, ParsedPipeline, Pipeline, PipelineError, TARGETS, TARGETS_MASK};

/// `rows` shifted right within each segment of `segments`, `bos` first.
fn shifted(rows: &[Vec<i64>], segments: &[Vec<i64>], bos: i64) -> Vec<Vec<i64>> {
    rows.iter()
        .zip(segments)
        .map(|(r, s)| {
            (0..r.len())
                .map(|i| match s[i] {
                    0 => r[i],
                    _ if i == 0 || s[i - 1] != s[i] => bos,
                    _ => r[i - 1],
                })
                .collect()
        })
        .collect()
}

fn base(files: &[String]) -> ParsedPipeline {
    Pipeline::from_files(files.to_vec())
        .unwrap()
        .seed(3)
        .shuffle(10)
        .parse(spec())
        .cast(TensorType::I32)
}

#[test]
fn packed_rows_shift_within_each_segment_under_each_strategy() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[(0..40).map(|i| (i * 7) % 15 + 1).collect()]);
    for strategy in [
        PackStrategy::FirstFit,
        PackStrategy::BestFit,
        PackStrategy::ConcatSplit,
    ] {
        let packed = base(&files)
            .pack(16)
            .pack_strategy(strategy)
            .batch(4, false);
        let shifted_p = packed.clone().inputs_targets("ids", -1);
        let shapes = shifted_p.shapes().unwrap();
        assert_eq!(
            shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            [
                "mask: i32[4, 16], mask_mask: i32[4, 16], segment_ids: i32[4, 16], \
                 positions: i32[4, 16], inputs: i32[4, 16], targets: i32[4, 16], \
                 targets_mask: i32[4, 16]"
            ]
        );
        let plain: Vec<_> = packed.build().unwrap().map(Result::unwrap).collect();
        let made: Vec<_> = shifted_p.build().unwrap().map(Result::unwrap).collect();
        assert_eq!(plain.len(), made.len());
        for (p, m) in plain.iter().zip(&made) {
            assert_eq!(m.shape(), shapes[0]);
            let segments = rows(p, SEGMENT_IDS);
            assert_eq!(rows(m, TARGETS), rows(p, "ids"));
            assert_eq!(rows(m, TARGETS_MASK), rows(p, "ids_mask"));
            assert_eq!(rows(m, INPUTS), shifted(&rows(p, "ids"), &segments, -1));
            assert_eq!(rows(m, SEGMENT_IDS), segments);
            assert_eq!(rows(m, POSITIONS), rows(p, POSITIONS));
            assert_eq!(m.real_rows, p.real_rows);
        }
    }
}

#[test]
fn padded_rows_get_segment_ids_and_positions() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 8, 1, 5, 7]]);
    let padded = base(&files).fixed_length(8).batch(2, false);
    let plain: Vec<_> = padded.build().unwrap().map(Result::unwrap).collect();
    let made: Vec<_> = padded
        .inputs_targets("ids", 0)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (p, m) in plain.iter().zip(&made) {
        let mask = rows(p, "ids_mask");
        let positions: Vec<Vec<i64>> = mask
            .iter()
            .map(|r| {
                (0..8)
                    .map(|i| if r[i] == 1 { i as i64 } else { 0 })
                    .collect()
            })
            .collect();
        assert_eq!(rows(m, SEGMENT_IDS), mask);
        assert_eq!(rows(m, POSITIONS), positions);
        assert_eq!(rows(m, TARGETS), rows(p, "ids"));
        assert_eq!(rows(m, INPUTS), shifted(&rows(p, "ids"), &mask, 0));
        assert!(m.get("ids").is_none() && m.get("ids_mask").is_none());
    }
    // Record 0 (3 values): inputs 0, v0, v1, then padding.
    let inputs_of_0: Vec<Vec<i64>> = made
        .iter()
        .flat_map(|m| rows(m, TARGETS).into_iter().zip(rows(m, INPUTS)))
        .filter(|(t, _)| t[0] == value(0, 0))
        .map(|(_, i)| i)
        .collect();
    assert_eq!(inputs_of_0, [[0, value(0, 0), value(0, 1), 0, 0, 0, 0, 0]]);
}

#[test]
fn what_cannot_be_shifted_is_refused_when_built() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 4]]);
    let config = |p: ParsedPipeline| match p.shapes() {
        Err(PipelineError::Config(m)) => m,
        other => panic!("{other:?}"),
    };
    let padded = || base(&files).fixed_length(8).batch(2, false);
    let m = config(
        padded()
            .mask("ids", MaskType::None)
            .inputs_targets("ids", 0),
    );
    assert!(m.contains("needs packing or the feature's mask"), "{m}");
    let m = config(padded().inputs_targets("nope", 0));
    assert!(m.contains("\"nope\""), "{m}");
    assert!(matches!(
        padded().inputs_targets("ids", 0).build_columns(),
        Err(PipelineError::Config(_))
    ));
}
