//! Packing: exact rows, segment ids, positions, overflow policies, and a
//! property test that every token lands exactly once.

use infeed::batch::{
    Batch, BatchError, BatchErrorKind, Overflow, POSITIONS, PackPlan, Packer, PlanError, Remainder,
    SEGMENT_IDS, TensorType,
};
use infeed::example::{Column, ParsedBatch, Values};
use infeed::spec::{DType, FeatureSpec};
use proptest::prelude::*;

fn spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("ids", DType::Int64)
        .var_len("mask", DType::Int64)
        .fixed_len("label", DType::Int64, &[])
}

fn parsed(rows: &[Vec<i64>]) -> ParsedBatch {
    let mut splits = vec![0];
    let mut values = Vec::new();
    for r in rows {
        values.extend_from_slice(r);
        splits.push(values.len());
    }
    let ones = vec![1; values.len()];
    ParsedBatch {
        num_records: rows.len(),
        columns: vec![
            (
                "ids".to_string(),
                Column::Ragged {
                    values: Values::Int64(values),
                    row_splits: splits.clone(),
                    inner_shape: vec![],
                },
            ),
            (
                "mask".to_string(),
                Column::Ragged {
                    values: Values::Int64(ones),
                    row_splits: splits,
                    inner_shape: vec![],
                },
            ),
        ],
    }
}

fn packer(l: usize, b: usize, overflow: Overflow) -> Packer {
    PackPlan::new(&spec(), &["ids", "mask"], l, b)
        .cast_ints(TensorType::I32)
        .overflow(overflow)
        .build()
        .expect("packer")
}

fn col(b: &Batch, name: &str) -> Vec<i32> {
    b[name].values::<i32>().expect("i32").to_vec()
}

#[test]
fn first_fit_exact() {
    let mut p = packer(8, 2, Overflow::Error);
    let rows = vec![
        vec![11, 12, 13],
        vec![21, 22, 23, 24],
        vec![31, 32],
        vec![41, 42, 43, 44, 45, 46],
        vec![],
        vec![51],
    ];
    let mut out = Vec::new();
    p.push_all(&parsed(&rows), &mut out).expect("push");
    // row 0: 3 + 4 (+1 for "51"); row 1: 2 + 6; nothing emitted yet.
    assert!(out.is_empty());
    let b = p.finish(Remainder::Pad).expect("batch");
    assert_eq!(b.real_rows, 2);
    #[rustfmt::skip]
    assert_eq!(col(&b, "ids"), [
        11, 12, 13, 21, 22, 23, 24, 51,
        31, 32, 41, 42, 43, 44, 45, 46,
    ]);
    assert_eq!(col(&b, "mask"), [1; 16]);
    #[rustfmt::skip]
    assert_eq!(col(&b, SEGMENT_IDS), [
        1, 1, 1, 2, 2, 2, 2, 3,
        1, 1, 2, 2, 2, 2, 2, 2,
    ]);
    #[rustfmt::skip]
    assert_eq!(col(&b, POSITIONS), [
        0, 1, 2, 0, 1, 2, 3, 0,
        0, 1, 0, 1, 2, 3, 4, 5,
    ]);
    assert_eq!(vec![b.shape()], p.shapes());
    assert_eq!(
        b.shape().to_string(),
        "ids: i32[2, 8], mask: i32[2, 8], segment_ids: i32[2, 8], positions: i32[2, 8]"
    );
    assert!(p.finish(Remainder::Pad).is_none());
}

#[test]
fn emits_when_full_and_pads_the_rest() {
    let mut p = packer(4, 2, Overflow::Error);
    let mut out = Vec::new();
    p.push_all(
        &parsed(&[vec![1, 1, 1], vec![2, 2, 2], vec![3, 3]]),
        &mut out,
    )
    .expect("push");
    assert_eq!(out.len(), 1);
    assert_eq!(col(&out[0], "ids"), [1, 1, 1, 0, 2, 2, 2, 0]);
    assert_eq!(col(&out[0], "mask"), [1, 1, 1, 0, 1, 1, 1, 0]);
    assert_eq!(col(&out[0], SEGMENT_IDS), [1, 1, 1, 0, 1, 1, 1, 0]);
    assert_eq!(col(&out[0], POSITIONS), [0, 1, 2, 0, 0, 1, 2, 0]);
    let last = p.finish(Remainder::Pad).expect("last");
    assert_eq!(last.real_rows, 1);
    assert_eq!(col(&last, "ids"), [3, 3, 0, 0, 0, 0, 0, 0]);
    assert_eq!(col(&last, SEGMENT_IDS), [1, 1, 0, 0, 0, 0, 0, 0]);
    // Dropping the remainder.
    p.push_all(&parsed(&[vec![9]]), &mut out).expect("push");
    assert!(p.finish(Remainder::Drop).is_none());
    assert!(p.finish(Remainder::Pad).is_none());
}

#[test]
fn overflow_policies() {
    let long = parsed(&[vec![1, 2, 3, 4, 5, 6, 7]]);
    let mut out = Vec::new();
    let e = packer(3, 2, Overflow::Error)
        .push(&long, 0, &mut out)
        .unwrap_err();
    assert_eq!(
        e,
        BatchError {
            record: Some(0),
            feature: Some("ids".into()),
            kind: BatchErrorKind::TooLong {
                length: 7,
                limit: 3
            }
        }
    );
    let run = |o| {
        let mut p = packer(3, 2, o);
        let mut out = Vec::new();
        p.push(&long, 0, &mut out).expect("push");
        out.extend(p.finish(Remainder::Pad));
        out
    };
    let b = run(Overflow::KeepStart);
    assert_eq!(col(&b[0], "ids"), [1, 2, 3, 0, 0, 0]);
    let b = run(Overflow::KeepEnd);
    assert_eq!(col(&b[0], "ids"), [5, 6, 7, 0, 0, 0]);
    assert_eq!(col(&b[0], POSITIONS), [0, 1, 2, 0, 0, 0]);
    let b = run(Overflow::Split);
    assert_eq!(b.len(), 2);
    assert_eq!(col(&b[0], "ids"), [1, 2, 3, 4, 5, 6]);
    assert_eq!(col(&b[0], SEGMENT_IDS), [1, 1, 1, 1, 1, 1]);
    assert_eq!(col(&b[0], POSITIONS), [0, 1, 2, 0, 1, 2]);
    assert_eq!(col(&b[1], "ids"), [7, 0, 0, 0, 0, 0]);
    assert_eq!(b[1].real_rows, 1);
}

#[test]
fn errors_leave_the_packer_unchanged() {
    let mut p = packer(4, 1, Overflow::Error);
    let mut out = Vec::new();
    let mut bad = parsed(&[vec![1, 2], vec![3, 1 << 33]]);
    p.push(&bad, 0, &mut out).expect("push");
    assert_eq!(
        p.push(&bad, 1, &mut out).unwrap_err(),
        BatchError {
            record: Some(1),
            feature: Some("ids".into()),
            kind: BatchErrorKind::Overflow {
                value: 1 << 33,
                dtype: TensorType::I32
            }
        }
    );
    // Mask lengths that differ from the ids'.
    if let Column::Ragged {
        row_splits, values, ..
    } = &mut bad.columns[1].1
    {
        *row_splits = vec![0, 2, 3];
        *values = Values::Int64(vec![1, 1, 1]);
    }
    assert_eq!(
        p.push(&bad, 1, &mut out).unwrap_err(),
        BatchError {
            record: Some(1),
            feature: Some("mask".into()),
            kind: BatchErrorKind::LengthMismatch {
                expected: 2,
                actual: 1
            }
        }
    );
    let b = p.finish(Remainder::Pad).expect("batch");
    assert!(out.is_empty());
    assert_eq!(col(&b, "ids"), [1, 2, 0, 0]);
    assert_eq!(col(&b, SEGMENT_IDS), [1, 1, 0, 0]);
}

#[test]
fn plan_errors() {
    let e = |p: PackPlan| p.build().err().expect("error");
    assert_eq!(
        e(PackPlan::new(&spec(), &["label"], 4, 2)),
        PlanError::NotVarLen {
            feature: "label".into()
        }
    );
    assert_eq!(
        e(PackPlan::new(&spec(), &["ids", "ids"], 4, 2)),
        PlanError::DuplicateFeature {
            feature: "ids".into()
        }
    );
    assert_eq!(
        e(PackPlan::new(&spec(), &["nope"], 4, 2)),
        PlanError::UnknownFeature {
            feature: "nope".into()
        }
    );
    assert_eq!(e(PackPlan::new(&spec(), &[], 4, 2)), PlanError::NoFeatures);
    assert_eq!(
        e(PackPlan::new(&spec(), &["ids"], 4, 0)),
        PlanError::ZeroBatchSize
    );
    assert_eq!(
        e(PackPlan::new(&spec(), &["ids"], 0, 2)),
        PlanError::ZeroLength {
            feature: "ids".into(),
            what: "row_length"
        }
    );
    assert_eq!(
        e(PackPlan::new(&spec(), &["ids"], 4, 2).cast_ints(TensorType::U8)),
        PlanError::BadCast {
            feature: "ids".into(),
            from: DType::Int64,
            to: TensorType::U8
        }
    );
    let clash = FeatureSpec::new().var_len("positions", DType::Int64);
    assert_eq!(
        e(PackPlan::new(&clash, &["positions"], 4, 2)),
        PlanError::DuplicateName {
            name: "positions".into()
        }
    );
}

proptest! {
    /// Every token of every sequence appears exactly once, in order, with
    /// consecutive 1-based segment ids per row and positions 0.. within each
    /// segment; padding is 0 everywhere; every batch has the one shape.
    #[test]
    fn packing_preserves_every_token(
        lens in proptest::collection::vec(0usize..20, 0..60),
        l in 1usize..16,
        b in 1usize..5,
        split in any::<bool>(),
    ) {
        let overflow = if split { Overflow::Split } else { Overflow::KeepStart };
        // Token value = record * 1000 + index + 1 (never 0, the pad value).
        let rows: Vec<Vec<i64>> = lens
            .iter()
            .enumerate()
            .map(|(r, &n)| (0..n).map(|i| (r * 1000 + i + 1) as i64).collect())
            .collect();
        let mut p = packer(l, b, overflow);
        let mut out = Vec::new();
        p.push_all(&parsed(&rows), &mut out).expect("push");
        out.extend(p.finish(Remainder::Pad));
        let shape = p.shapes().remove(0);

        let mut seen: Vec<(i64, usize)> = Vec::new(); // (token, its position)
        for batch in &out {
            prop_assert_eq!(batch.shape(), shape.clone());
            let ids = col(batch, "ids");
            let mask = col(batch, "mask");
            let seg = col(batch, SEGMENT_IDS);
            let pos = col(batch, POSITIONS);
            let mut used_rows = 0;
            for row in 0..b {
                let r = row * l..(row + 1) * l;
                let (ids, mask, seg, pos) = (&ids[r.clone()], &mask[r.clone()], &seg[r.clone()], &pos[r]);
                let used = seg.iter().take_while(|&&s| s != 0).count();
                if used > 0 { used_rows += 1; }
                // Padding after the used prefix, all zeros.
                for i in used..l {
                    prop_assert_eq!((ids[i], mask[i], seg[i], pos[i]), (0, 0, 0, 0));
                }
                let mut expect_seg = 0;
                for i in 0..used {
                    prop_assert_eq!(mask[i], 1);
                    if i == 0 || seg[i] != seg[i - 1] {
                        expect_seg += 1;
                        prop_assert_eq!(seg[i], expect_seg);
                        prop_assert_eq!(pos[i], 0);
                    } else {
                        prop_assert_eq!(seg[i], expect_seg);
                        prop_assert_eq!(pos[i], pos[i - 1] + 1);
                        // Within a segment, tokens are consecutive of one record.
                        prop_assert_eq!(ids[i], ids[i - 1] + 1);
                    }
                    seen.push((i64::from(ids[i]), pos[i] as usize));
                }
            }
            prop_assert_eq!(batch.real_rows, used_rows);
        }
        // The multiset of tokens is exactly the input (truncated to l per
        // record unless split); with split a position is the index mod l.
        let mut expect: Vec<(i64, usize)> = rows
            .iter()
            .flat_map(|r| {
                let keep = if split { r.len() } else { r.len().min(l) };
                r[..keep].iter().enumerate().map(|(i, &v)| (v, i % l)).collect::<Vec<_>>()
            })
            .collect();
        seen.sort_unstable();
        expect.sort_unstable();
        prop_assert_eq!(seen, expect);
    }
}

/// Tails are padded at emit, not pre-filled: buffers a full batch dirtied
/// come back from the pool and the next, shorter rows still read pad, mask
/// 0, segment id 0 and position 0 after their values (and in unopened rows).
#[test]
fn recycled_buffers_are_padded_after_each_rows_values() {
    let pool = infeed::batch::BufferPool::default();
    let mut p = PackPlan::new(&spec(), &["ids", "mask"], 4, 2)
        .cast_ints(TensorType::I32)
        .masks(true)
        .pad_value(-1)
        .pool(pool.clone())
        .build()
        .expect("packer");
    let mut out = Vec::new();
    p.push_all(&parsed(&[vec![7, 7, 7, 7], vec![8, 8, 8, 8]]), &mut out)
        .expect("push");
    drop(p.finish(Remainder::Pad).expect("full batch"));
    p.push_all(&parsed(&[vec![11, 12], vec![13]]), &mut out)
        .expect("push");
    let b = p.finish(Remainder::Pad).expect("batch");
    assert_eq!(b.real_rows, 1);
    assert_eq!(col(&b, "ids"), [11, 12, 13, -1, -1, -1, -1, -1]);
    assert_eq!(col(&b, "ids_mask"), [1, 1, 1, 0, 0, 0, 0, 0]);
    assert_eq!(col(&b, SEGMENT_IDS), [1, 1, 2, 0, 0, 0, 0, 0]);
    assert_eq!(col(&b, POSITIONS), [0, 1, 0, 0, 0, 0, 0, 0]);
}
