//! Property tests: every assembled batch's shape is in the plan's shape set,
//! and its values match a naive model of padding, truncation and masking.

use std::sync::Arc;

use super::columns::ragged;
use infeed::batch::{BatchPlan, Bucketer, LengthPolicy, Remainder, TensorType, Truncation};
use infeed::example::{Column, ParsedBatch, Values};
use infeed::spec::{DType, FeatureSpec};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    multiple: usize,
    max: Option<usize>,
    fixed: Option<usize>,
    keep_end: bool,
    pad: i64,
    batch: usize,
    cast: bool,
    /// Per record: values of "a", values of "b", label.
    records: Vec<(Vec<i64>, Vec<i64>, i64)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..9,
        1usize..40,
        any::<bool>(),
        any::<bool>(),
        -3i64..3,
        1usize..7,
        any::<bool>(),
    )
        .prop_flat_map(|(multiple, bound, fixed, keep_end, pad, batch, cast)| {
            let rec = (
                proptest::collection::vec(-5i64..100, 0..50),
                proptest::collection::vec(-5i64..100, 0..50),
                any::<i32>().prop_map(i64::from),
            );
            proptest::collection::vec(rec, 0..=batch).prop_map(move |records| Case {
                multiple: if fixed { 1 } else { multiple },
                max: (!fixed).then_some(bound),
                fixed: fixed.then_some(bound),
                keep_end,
                pad,
                batch,
                cast,
                records,
            })
        })
}

fn spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("a", DType::Int64)
        .fixed_len("label", DType::Int64, &[])
        .var_len("b", DType::Int64)
}

fn parsed(records: &[(Vec<i64>, Vec<i64>, i64)]) -> ParsedBatch {
    ParsedBatch {
        num_records: records.len(),
        columns: vec![
            ("a".into(), ragged(records.iter().map(|r| r.0.clone()))),
            (
                "label".into(),
                Column::Dense {
                    shape: vec![records.len()],
                    values: Values::Int64(records.iter().map(|r| r.2).collect()),
                },
            ),
            ("b".into(), ragged(records.iter().map(|r| r.1.clone()))),
        ],
    }
}

fn policy(c: &Case) -> LengthPolicy {
    let mut p = LengthPolicy::new()
        .pad_to_multiple_of(c.multiple)
        .pad_value(c.pad)
        .truncation(if c.keep_end {
            Truncation::KeepEnd
        } else {
            Truncation::KeepStart
        });
    if let Some(m) = c.max {
        p = p.max_length(m);
    }
    if let Some(f) = c.fixed {
        p = p.fixed_length(f);
    }
    p
}

/// The padded row of `values` at length `l` and its mask, naively.
fn model_row(values: &[i64], l: usize, keep_end: bool, pad: i64) -> (Vec<i64>, Vec<i64>) {
    let kept: Vec<i64> = if values.len() <= l {
        values.to_vec()
    } else if keep_end {
        values[values.len() - l..].to_vec()
    } else {
        values[..l].to_vec()
    };
    let mut row = kept.clone();
    row.resize(l, pad);
    let mut mask = vec![1; kept.len()];
    mask.resize(l, 0);
    (row, mask)
}

fn as_i64(t: &infeed::batch::Tensor) -> Vec<i64> {
    match t.dtype() {
        TensorType::I64 => t.values::<i64>().expect("i64").to_vec(),
        TensorType::I32 => t
            .values::<i32>()
            .expect("i32")
            .iter()
            .map(|&v| i64::from(v))
            .collect(),
        other => panic!("unexpected {other}"),
    }
}

proptest! {
    #[test]
    fn batches_match_shapes_and_model(c in case()) {
        let mut plan = BatchPlan::new(&spec(), c.batch).pad_all(policy(&c));
        if c.cast {
            plan = plan.cast_ints(TensorType::I32);
        }
        let asm = plan.build().expect("plan");
        let shapes = asm.shapes();
        let batch = asm.assemble(&parsed(&c.records)).expect("batch");
        prop_assert!(shapes.contains(&batch.shape()), "{} not in {:?}", batch.shape(), shapes);
        prop_assert_eq!(batch.real_rows, c.records.len());

        // Model: one common length for a and b.
        let longest = c.records.iter().map(|r| r.0.len().max(r.1.len())).max().unwrap_or(0);
        let l = match c.fixed {
            Some(f) => f,
            None => {
                let r = longest.max(1).div_ceil(c.multiple) * c.multiple;
                r.min(c.max.expect("max"))
            }
        };
        for (name, pick) in [("a", 0usize), ("b", 1)] {
            let mut values = Vec::new();
            let mut mask = Vec::new();
            for r in 0..c.batch {
                let src: &[i64] = match c.records.get(r) {
                    Some(rec) if pick == 0 => &rec.0,
                    Some(rec) => &rec.1,
                    None => &[],
                };
                let (v, m) = model_row(src, l, c.keep_end, c.pad);
                values.extend(v);
                mask.extend(m);
            }
            prop_assert_eq!(as_i64(&batch[name]), values);
            prop_assert_eq!(as_i64(&batch[format!("{name}_mask").as_str()]), mask);
        }
        let mut labels: Vec<i64> = c.records.iter().map(|r| r.2).collect();
        labels.resize(c.batch, 0);
        prop_assert_eq!(as_i64(&batch["label"]), labels);
        for (_, t) in &batch.tensors {
            prop_assert_eq!(t.data().as_ptr() as usize % 64, 0);
        }
    }

    #[test]
    fn bucketed_batches_match_bucket_shapes(
        lens in proptest::collection::vec(0usize..70, 0..80),
        raw_bounds in proptest::collection::btree_set(1usize..64, 0..4),
        sizes in proptest::collection::vec(1usize..5, 5),
        drop in any::<bool>(),
    ) {
        let spec = FeatureSpec::new().var_len("ids", DType::Int64);
        let asm = BatchPlan::new(&spec, 8)
            .pad_all(LengthPolicy::new().pad_to_multiple_of(16).max_length(64)
                .truncation(Truncation::KeepStart))
            .build()
            .expect("plan");
        let bounds: Vec<usize> = raw_bounds.into_iter().collect();
        let batch_sizes = sizes[..bounds.len() + 1].to_vec();
        let mut bucketer = Bucketer::new(bounds, batch_sizes).expect("bucketer");
        let shapes = asm.bucket_shapes(&bucketer).expect("shapes");
        let rows: Vec<Vec<i64>> = lens.iter().map(|&n| vec![7; n]).collect();
        let parsed = Arc::new(ParsedBatch {
            num_records: rows.len(),
            columns: vec![("ids".into(), ragged(rows.into_iter()))],
        });
        let mut groups = Vec::new();
        for r in 0..parsed.num_records {
            let len = asm.row_length(&parsed, r).expect("len");
            groups.extend(bucketer.push((Arc::clone(&parsed), r), len));
        }
        groups.extend(bucketer.finish(if drop { Remainder::Drop } else { Remainder::Pad }));
        let mut rows_out = 0;
        let mut tokens = 0;
        for g in &groups {
            let b = asm.assemble_bucket(g).expect("batch");
            prop_assert!(shapes.contains(&b.shape()), "{} not in {:?}", b.shape(), shapes);
            rows_out += b.real_rows;
            tokens += as_i64(&b["ids_mask"]).iter().sum::<i64>() as usize;
        }
        if !drop {
            prop_assert_eq!(rows_out, lens.len());
            prop_assert_eq!(tokens, lens.iter().map(|&n| n.min(64)).sum::<usize>());
        }
    }
}
