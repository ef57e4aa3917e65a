//! Batch assembly: exact tensors, masks, shapes and errors.

use infeed::batch::{
    BatchError, BatchErrorKind, BatchPlan, LengthPolicy, MAX_SHAPES, MaskType, PlanError, Scalar,
    Tensor, TensorType, Truncation,
};
use infeed::example::proto::{Example, Feature};
use infeed::example::{BytesValues, Column, ParsedBatch, Values, parse_examples};
use infeed::spec::{DType, FeatureSpec};
use prost::Message;

/// Rows written as slice literals of different lengths.
fn ragged(rows: &[&[i64]]) -> Column {
    super::columns::ragged(rows)
}

fn parsed(n: usize, cols: Vec<(&str, Column)>) -> ParsedBatch {
    ParsedBatch {
        num_records: n,
        columns: cols.into_iter().map(|(k, c)| (k.to_string(), c)).collect(),
    }
}

fn lm_spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64)
}

fn lm_batch(rows: &[&[i64]]) -> ParsedBatch {
    let masks: Vec<Vec<i64>> = rows.iter().map(|r| vec![1; r.len()]).collect();
    let mask_refs: Vec<&[i64]> = masks.iter().map(|m| m.as_slice()).collect();
    parsed(
        rows.len(),
        vec![
            ("input_ids", ragged(rows)),
            ("attention_mask", ragged(&mask_refs)),
        ],
    )
}

fn i32s(t: &Tensor) -> Vec<i32> {
    t.values::<i32>().expect("i32 tensor").to_vec()
}

fn i64s(t: &Tensor) -> Vec<i64> {
    t.values::<i64>().expect("i64 tensor").to_vec()
}

fn err(record: Option<usize>, feature: Option<&str>, kind: BatchErrorKind) -> BatchError {
    BatchError {
        record,
        feature: feature.map(str::to_string),
        kind,
    }
}

#[test]
fn lm_pad_to_multiple_cast_and_mask() {
    let asm = BatchPlan::new(&lm_spec(), 4)
        .pad_all(LengthPolicy::new().pad_to_multiple_of(4).max_length(8))
        .cast_ints(TensorType::I32)
        .build()
        .expect("plan");
    let batch = asm
        .assemble(&lm_batch(&[&[5, 6, 7], &[1, 2, 3, 4, 5], &[]]))
        .expect("batch");
    let names: Vec<&str> = batch.tensors.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "input_ids",
            "input_ids_mask",
            "attention_mask",
            "attention_mask_mask"
        ]
    );
    assert_eq!(asm.tensor_names(), names);
    assert_eq!(batch.real_rows, 3);
    assert_eq!(batch.rows(), 4);
    let ids = &batch["input_ids"];
    assert_eq!(ids.dtype(), TensorType::I32);
    assert_eq!(ids.shape(), &[4, 8]);
    #[rustfmt::skip]
    assert_eq!(i32s(ids), [
        5, 6, 7, 0, 0, 0, 0, 0,
        1, 2, 3, 4, 5, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    #[rustfmt::skip]
    let mask = [
        1, 1, 1, 0, 0, 0, 0, 0,
        1, 1, 1, 1, 1, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(i32s(&batch["input_ids_mask"]), mask);
    assert_eq!(i32s(&batch["attention_mask"]), mask);
    assert_eq!(batch["attention_mask_mask"].dtype(), TensorType::I32);
    assert!(asm.shapes().contains(&batch.shape()));
    for (_, t) in &batch.tensors {
        assert_eq!(t.data().as_ptr() as usize % 64, 0);
    }
}

#[test]
fn shapes_of_multiple_and_max() {
    let asm = BatchPlan::new(&lm_spec(), 256)
        .pad_all(LengthPolicy::new().pad_to_multiple_of(64).max_length(512))
        .cast_ints(TensorType::I32)
        .build()
        .expect("plan");
    let shapes = asm.shapes();
    let lens: Vec<usize> = shapes
        .iter()
        .map(|s| s.get("input_ids").expect("ids").shape[1])
        .collect();
    assert_eq!(lens, [64, 128, 192, 256, 320, 384, 448, 512]);
    for s in &shapes {
        let l = s.tensors[0].shape[1];
        assert_eq!(
            s.to_string(),
            format!(
                "input_ids: i32[256, {l}], input_ids_mask: i32[256, {l}], \
             attention_mask: i32[256, {l}], attention_mask_mask: i32[256, {l}]"
            )
        );
    }
    // A max that is not a multiple is a length of its own.
    let p = LengthPolicy::new().pad_to_multiple_of(64).max_length(200);
    assert_eq!(p.lengths(), Some(vec![64, 128, 192, 200]));
    assert_eq!(
        (p.target(0), p.target(1), p.target(193), p.target(900)),
        (64, 64, 200, 200)
    );
    let p = LengthPolicy::new().pad_to_multiple_of(64).max_length(10);
    assert_eq!(p.lengths(), Some(vec![10]));
    assert_eq!(
        LengthPolicy::new().max_length(3).lengths(),
        Some(vec![1, 2, 3])
    );
    assert_eq!(LengthPolicy::new().fixed_length(7).lengths(), Some(vec![7]));
    assert_eq!(LengthPolicy::new().pad_to_multiple_of(8).lengths(), None);
}

#[test]
fn separate_groups_multiply_shapes() {
    let spec = FeatureSpec::new()
        .var_len("a", DType::Int64)
        .var_len("b", DType::Float32)
        .fixed_len("y", DType::Int64, &[]);
    let asm = BatchPlan::new(&spec, 2)
        .pad(&["a"], LengthPolicy::new().max_length(2))
        .pad(
            &["b"],
            LengthPolicy::new()
                .pad_to_multiple_of(2)
                .max_length(4)
                .pad_value(-1.5f32),
        )
        .build()
        .expect("plan");
    let got: Vec<String> = asm.shapes().iter().map(|s| s.to_string()).collect();
    assert_eq!(
        got,
        [
            "a: i64[2, 1], a_mask: i64[2, 1], b: f32[2, 2], b_mask: u8[2, 2], y: i64[2]",
            "a: i64[2, 1], a_mask: i64[2, 1], b: f32[2, 4], b_mask: u8[2, 4], y: i64[2]",
            "a: i64[2, 2], a_mask: i64[2, 2], b: f32[2, 2], b_mask: u8[2, 2], y: i64[2]",
            "a: i64[2, 2], a_mask: i64[2, 2], b: f32[2, 4], b_mask: u8[2, 4], y: i64[2]",
        ]
    );
    let p = parsed(
        1,
        vec![
            ("a", ragged(&[&[9]])),
            (
                "b",
                Column::Ragged {
                    values: Values::Float32(vec![0.5, 1.5, 2.5]),
                    row_splits: vec![0, 3],
                    inner_shape: vec![],
                },
            ),
            (
                "y",
                Column::Dense {
                    shape: vec![1],
                    values: Values::Int64(vec![42]),
                },
            ),
        ],
    );
    let batch = asm.assemble(&p).expect("batch");
    assert_eq!(i64s(&batch["a"]), [9, 0]);
    assert_eq!(i64s(&batch["a_mask"]), [1, 0]);
    assert_eq!(
        batch["b"].values::<f32>().expect("f32"),
        &[0.5, 1.5, 2.5, -1.5, -1.5, -1.5, -1.5, -1.5]
    );
    assert_eq!(
        batch["b_mask"].values::<u8>().expect("u8"),
        &[1, 1, 1, 0, 0, 0, 0, 0]
    );
    assert_eq!(i64s(&batch["y"]), [42, 0]);
    assert!(asm.shapes().contains(&batch.shape()));
}

#[test]
fn truncation_policies() {
    let spec = FeatureSpec::new().var_len("x", DType::Int64);
    let rows: &[&[i64]] = &[&[1, 2, 3, 4, 5, 6], &[7, 8]];
    let p = parsed(2, vec![("x", ragged(rows))]);
    let plan = |t| {
        BatchPlan::new(&spec, 2)
            .pad_all(
                LengthPolicy::new()
                    .pad_to_multiple_of(4)
                    .max_length(4)
                    .truncation(t),
            )
            .build()
            .expect("plan")
    };
    let e = plan(Truncation::Error).assemble(&p).unwrap_err();
    assert_eq!(
        e,
        err(
            Some(0),
            Some("x"),
            BatchErrorKind::TooLong {
                length: 6,
                limit: 4
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "record 0, feature \"x\": length 6 is over the limit 4 (truncation policy: error)"
    );
    let b = plan(Truncation::KeepStart).assemble(&p).expect("batch");
    assert_eq!(i64s(&b["x"]), [1, 2, 3, 4, 7, 8, 0, 0]);
    assert_eq!(i64s(&b["x_mask"]), [1, 1, 1, 1, 1, 1, 0, 0]);
    let b = plan(Truncation::KeepEnd).assemble(&p).expect("batch");
    assert_eq!(i64s(&b["x"]), [3, 4, 5, 6, 7, 8, 0, 0]);

    // fixed_length pads short rows and applies the policy to long ones.
    let fixed = BatchPlan::new(&spec, 3)
        .pad_all(
            LengthPolicy::new()
                .fixed_length(3)
                .truncation(Truncation::KeepEnd)
                .pad_value(-1i64)
                .mask(MaskType::Type(TensorType::F32)),
        )
        .build()
        .expect("plan");
    let b = fixed.assemble(&p).expect("batch");
    assert_eq!(i64s(&b["x"]), [4, 5, 6, 7, 8, -1, -1, -1, -1]);
    assert_eq!(
        b["x_mask"].values::<f32>().expect("f32"),
        &[1., 1., 1., 1., 1., 0., 0., 0., 0.]
    );
    // The error names the first offending record in row order.
    let spec2 = FeatureSpec::new()
        .var_len("x", DType::Int64)
        .var_len("z", DType::Int64);
    let p2 = parsed(
        3,
        vec![
            ("x", ragged(&[&[1], &[1], &[1, 2, 3]])),
            ("z", ragged(&[&[1], &[1, 2, 3, 4], &[1]])),
        ],
    );
    let e = BatchPlan::new(&spec2, 3)
        .pad_all(LengthPolicy::new().max_length(2))
        .build()
        .expect("plan")
        .assemble(&p2)
        .unwrap_err();
    assert_eq!(
        e,
        err(
            Some(1),
            Some("z"),
            BatchErrorKind::TooLong {
                length: 4,
                limit: 2
            }
        )
    );
}

#[test]
fn no_mask_and_int32_widening() {
    let spec = FeatureSpec::new().var_len("x", DType::Int32);
    let p = parsed(
        2,
        vec![(
            "x",
            Column::Ragged {
                values: Values::Int32(vec![-3, 4, 5]),
                row_splits: vec![0, 1, 3],
                inner_shape: vec![],
            },
        )],
    );
    let b = BatchPlan::new(&spec, 2)
        .pad(
            &["x"],
            LengthPolicy::new().max_length(8).mask(MaskType::None),
        )
        .cast("x", TensorType::I64)
        .build()
        .expect("plan")
        .assemble(&p)
        .expect("batch");
    assert_eq!(b.tensors.len(), 1);
    assert_eq!(i64s(&b["x"]), [-3, 0, 4, 5]);
    // Without a cast an int32 feature stays i32.
    let b = BatchPlan::new(&spec, 2)
        .pad_all(LengthPolicy::new().max_length(8))
        .build()
        .expect("plan")
        .assemble(&p)
        .expect("batch");
    assert_eq!(i32s(&b["x"]), [-3, 0, 4, 5]);
    assert_eq!(i32s(&b["x_mask"]), [1, 0, 1, 1]);
}

#[test]
fn cast_overflow_names_record_and_value() {
    let spec =
        FeatureSpec::new()
            .var_len("ids", DType::Int64)
            .fixed_len("label", DType::Int64, &[]);
    let p = parsed(
        2,
        vec![
            ("ids", ragged(&[&[1], &[2, 1 << 31]])),
            (
                "label",
                Column::Dense {
                    shape: vec![2],
                    values: Values::Int64(vec![0, -(1 << 40)]),
                },
            ),
        ],
    );
    let plan = BatchPlan::new(&spec, 2)
        .pad_all(LengthPolicy::new().max_length(4))
        .cast_ints(TensorType::I32);
    let e = plan
        .clone()
        .build()
        .expect("plan")
        .assemble(&p)
        .unwrap_err();
    assert_eq!(
        e,
        err(
            Some(1),
            Some("ids"),
            BatchErrorKind::Overflow {
                value: 1 << 31,
                dtype: TensorType::I32
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "record 1, feature \"ids\": value 2147483648 does not fit in i32"
    );
    // A cast of one feature only: the dense label overflows.
    let e = BatchPlan::new(&spec, 2)
        .pad_all(LengthPolicy::new().max_length(4))
        .cast("label", TensorType::I32)
        .build()
        .expect("plan")
        .assemble(&p)
        .unwrap_err();
    assert_eq!(
        e,
        err(
            Some(1),
            Some("label"),
            BatchErrorKind::Overflow {
                value: -(1 << 40),
                dtype: TensorType::I32
            }
        )
    );
}

fn img_spec() -> FeatureSpec {
    FeatureSpec::new()
        .fixed_len("image", DType::Bytes, &[])
        .fixed_len("label", DType::Int64, &[])
}

fn img_batch(images: &[&[u8]], labels: &[i64]) -> ParsedBatch {
    parsed(
        images.len(),
        vec![
            (
                "image",
                Column::Dense {
                    shape: vec![images.len()],
                    values: Values::Bytes(images.iter().collect::<BytesValues>()),
                },
            ),
            (
                "label",
                Column::Dense {
                    shape: vec![labels.len()],
                    values: Values::Int64(labels.to_vec()),
                },
            ),
        ],
    )
}

#[test]
fn raw_decode_of_images_with_padding_rows() {
    let asm = BatchPlan::new(&img_spec(), 3)
        .decode_raw("image", &[2, 1, 3])
        .cast("label", TensorType::I32)
        .build()
        .expect("plan");
    let shapes: Vec<String> = asm.shapes().iter().map(|s| s.to_string()).collect();
    assert_eq!(shapes, ["image: u8[3, 2, 1, 3], label: i32[3]"]);
    let a: Vec<u8> = (0..6).collect();
    let b: Vec<u8> = (10..16).collect();
    let batch = asm.assemble(&img_batch(&[&a, &b], &[7, 9])).expect("batch");
    assert_eq!(batch.real_rows, 2);
    let img = &batch["image"];
    assert_eq!(img.shape(), &[3, 2, 1, 3]);
    assert_eq!(
        img.values::<u8>().expect("u8"),
        &[0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(i32s(&batch["label"]), [7, 9, 0]);
    assert_eq!(vec![batch.shape()], asm.shapes());

    let short = [1u8; 5];
    let e = asm
        .assemble(&img_batch(&[&a, &short], &[0, 0]))
        .unwrap_err();
    assert_eq!(
        e,
        err(
            Some(1),
            Some("image"),
            BatchErrorKind::ByteCount {
                expected: 6,
                actual: 5
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "record 1, feature \"image\": expected 6 bytes, found 5"
    );
}

#[test]
fn from_real_examples_through_the_parser() {
    let records: Vec<Vec<u8>> = [(vec![1i64, 2, 3], 4u8), (vec![9; 70], 5)]
        .iter()
        .map(|(ids, px)| {
            Example::from_features([
                ("input_ids", Feature::int64s(ids.clone())),
                ("image", Feature::bytes([vec![*px; 12]])),
            ])
            .encode_to_vec()
        })
        .collect();
    let spec = FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .fixed_len("image", DType::Bytes, &[]);
    let parsed = parse_examples(&spec, &records).expect("parse");
    let asm = BatchPlan::new(&spec, 4)
        .pad_all(LengthPolicy::new().pad_to_multiple_of(64).max_length(128))
        .cast_ints(TensorType::I32)
        .decode_raw("image", &[2, 2, 3])
        .build()
        .expect("plan");
    let b = asm.assemble(&parsed).expect("batch");
    let ids = i32s(&b["input_ids"]);
    assert_eq!(b["input_ids"].shape(), &[4, 128]);
    assert_eq!(&ids[..4], &[1, 2, 3, 0]);
    assert_eq!(
        &ids[128..128 + 71],
        [vec![9; 70], vec![0]].concat().as_slice()
    );
    assert!(ids[256..].iter().all(|&v| v == 0));
    let mask = i32s(&b["input_ids_mask"]);
    assert_eq!(mask.iter().sum::<i32>(), 73);
    let img = b["image"].values::<u8>().expect("u8");
    assert_eq!(&img[..24], [vec![4; 12], vec![5; 12]].concat().as_slice());
    assert!(img[24..].iter().all(|&v| v == 0));
}

#[test]
fn padding_batch_and_row_errors() {
    let asm = BatchPlan::new(&lm_spec(), 2)
        .pad_all(LengthPolicy::new().pad_to_multiple_of(4).max_length(8))
        .build()
        .expect("plan");
    let pad = asm.padding_batch().expect("padding");
    assert_eq!(pad.real_rows, 0);
    assert_eq!(pad.shape(), asm.shapes()[0]);
    assert!(
        pad.tensors
            .iter()
            .all(|(_, t)| t.bytes().iter().all(|&b| b == 0))
    );

    let three = lm_batch(&[&[1], &[2], &[3]]);
    assert_eq!(
        asm.assemble(&three).unwrap_err(),
        err(
            None,
            None,
            BatchErrorKind::TooManyRows {
                rows: 3,
                batch_size: 2
            }
        )
    );
    let rows = [(&three, 2), (&three, 0)];
    let b = asm.assemble_rows(&rows).expect("rows");
    assert_eq!(i64s(&b["input_ids"])[..5], [3, 0, 0, 0, 1]);
    assert_eq!(
        asm.assemble_rows(&[(&three, 3)]).unwrap_err(),
        err(
            Some(3),
            None,
            BatchErrorKind::RecordOutOfRange { num_records: 3 }
        )
    );
    let missing = parsed(1, vec![("input_ids", ragged(&[&[1]]))]);
    let e = asm.assemble(&missing).unwrap_err();
    assert_eq!(
        e,
        err(None, Some("attention_mask"), BatchErrorKind::MissingColumn)
    );
    assert_eq!(
        e.to_string(),
        "feature \"attention_mask\": the parsed batch has no such column"
    );
    let dense = parsed(
        1,
        vec![
            ("input_ids", ragged(&[&[1]])),
            (
                "attention_mask",
                Column::Dense {
                    shape: vec![1],
                    values: Values::Int64(vec![1]),
                },
            ),
        ],
    );
    assert_eq!(
        asm.assemble(&dense).unwrap_err(),
        err(
            None,
            Some("attention_mask"),
            BatchErrorKind::ColumnMismatch {
                reason: "expected a ragged column"
            }
        )
    );
    let floats = parsed(
        1,
        vec![
            ("input_ids", ragged(&[&[1]])),
            (
                "attention_mask",
                Column::Ragged {
                    values: Values::Float32(vec![1.0]),
                    row_splits: vec![0, 1],
                    inner_shape: vec![],
                },
            ),
        ],
    );
    assert_eq!(
        asm.assemble(&floats).unwrap_err().kind,
        BatchErrorKind::ColumnMismatch {
            reason: "values have another type than the plan"
        }
    );
    let bad_splits = parsed(
        2,
        vec![
            ("input_ids", ragged(&[&[1], &[2]])),
            (
                "attention_mask",
                Column::Ragged {
                    values: Values::Int64(vec![1, 1]),
                    row_splits: vec![0, 2, 1],
                    inner_shape: vec![],
                },
            ),
        ],
    );
    assert_eq!(
        asm.assemble(&bad_splits).unwrap_err(),
        err(
            Some(1),
            Some("attention_mask"),
            BatchErrorKind::ColumnMismatch {
                reason: "row splits do not cover the record"
            }
        )
    );
    assert_eq!(asm.row_length(&three, 1), Ok(1));
}

#[test]
fn plan_errors() {
    let spec = FeatureSpec::new()
        .var_len("ids", DType::Int64)
        .var_len("w", DType::Float32)
        .var_len("s", DType::Bytes)
        .fixed_len("label", DType::Int64, &[])
        .fixed_len("img", DType::Bytes, &[]);
    let ok = || {
        BatchPlan::new(&spec, 8)
            .pad_all(LengthPolicy::new().max_length(16))
            .skip("s")
            .decode_raw("img", &[4])
    };
    assert!(ok().build().is_ok());
    let e = |p: BatchPlan| p.build().unwrap_err();

    let unbounded = e(BatchPlan::new(&spec, 8).skip("s").decode_raw("img", &[4]));
    assert_eq!(
        unbounded,
        PlanError::Unbounded {
            feature: "ids".into()
        }
    );
    assert_eq!(
        unbounded.to_string(),
        "feature \"ids\" has variable length but no length bound \
         (give it fixed_length or max_length): unbounded shape"
    );
    assert_eq!(
        e(BatchPlan::new(&spec, 8)
            .pad_all(LengthPolicy::new().pad_to_multiple_of(64))
            .skip("s")
            .decode_raw("img", &[4])),
        PlanError::Unbounded {
            feature: "ids".into()
        }
    );
    assert_eq!(
        e(ok().skip("nope")),
        PlanError::UnknownFeature {
            feature: "nope".into()
        }
    );
    assert_eq!(
        e(ok().pad(&["label"], LengthPolicy::new().max_length(2))),
        PlanError::NotVarLen {
            feature: "label".into()
        }
    );
    assert_eq!(
        e(ok().cast("w", TensorType::I32)),
        PlanError::BadCast {
            feature: "w".into(),
            from: DType::Float32,
            to: TensorType::I32
        }
    );
    assert_eq!(
        e(ok().cast_ints(TensorType::F32)),
        PlanError::BadCast {
            feature: "ids".into(),
            from: DType::Int64,
            to: TensorType::F32
        }
    );
    // Bytes without a raw decode are bytes columns (tests/engine/batch/bytes.rs).
    let columns = BatchPlan::new(&spec, 8)
        .pad_all(LengthPolicy::new().max_length(16))
        .build()
        .unwrap();
    assert_eq!(columns.bytes_names(), ["s", "img"]);
    assert_eq!(
        e(ok().skip("s").decode_raw("label", &[1])),
        PlanError::NotDecodable {
            feature: "label".into(),
            dtype: DType::Int64
        }
    );
    assert_eq!(
        e(BatchPlan::new(&spec, 8)
            .pad(&["ids", "w"], LengthPolicy::new().max_length(16))
            .decode_raw("img", &[4])),
        PlanError::Unbounded {
            feature: "s".into()
        }
    );
    assert_eq!(
        e(ok()
            .pad(&["ids"], LengthPolicy::new().max_length(4))
            .pad(&["ids", "w"], LengthPolicy::new().max_length(4))),
        PlanError::DuplicateGroup {
            feature: "ids".into()
        }
    );
    assert_eq!(e(ok().pad(&[], LengthPolicy::new())), PlanError::EmptyGroup);
    assert_eq!(
        e(ok().pad(&["ids"], LengthPolicy::new().fixed_length(4).max_length(4))),
        PlanError::ConflictingLengths {
            feature: "ids".into()
        }
    );
    assert_eq!(
        e(ok().pad(
            &["ids"],
            LengthPolicy::new().pad_to_multiple_of(0).max_length(4)
        )),
        PlanError::ZeroLength {
            feature: "ids".into(),
            what: "pad_to_multiple_of"
        }
    );
    assert_eq!(
        e(ok().pad(&["ids"], LengthPolicy::new().fixed_length(0))),
        PlanError::ZeroLength {
            feature: "ids".into(),
            what: "fixed_length"
        }
    );
    assert_eq!(
        e(ok()
            .pad(
                &["w"],
                LengthPolicy::new().max_length(4).pad_value(3i64 << 30)
            )
            .cast_ints(TensorType::I32)),
        PlanError::PadValue {
            feature: "w".into(),
            value: Scalar::Int(3 << 30),
            dtype: TensorType::F32
        }
    );
    assert_eq!(
        e(ok().pad(
            &["ids"],
            LengthPolicy::new().max_length(4).pad_value(0.5f32)
        )),
        PlanError::PadValue {
            feature: "ids".into(),
            value: Scalar::Float(0.5),
            dtype: TensorType::I64
        }
    );
    assert_eq!(e(BatchPlan::new(&spec, 0)), PlanError::ZeroBatchSize);
    // 4096 lengths for one group and 2 for another: 8192 shapes.
    assert_eq!(
        e(ok()
            .pad(&["ids"], LengthPolicy::new().max_length(MAX_SHAPES))
            .pad(&["w"], LengthPolicy::new().max_length(2))),
        PlanError::TooManyShapes { count: 8192 }
    );
    let clash =
        FeatureSpec::new()
            .var_len("x", DType::Int64)
            .fixed_len("x_mask", DType::Int64, &[]);
    assert_eq!(
        e(BatchPlan::new(&clash, 2).pad_all(LengthPolicy::new().max_length(3))),
        PlanError::DuplicateName {
            name: "x_mask".into()
        }
    );
}
