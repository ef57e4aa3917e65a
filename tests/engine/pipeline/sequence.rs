//! `SequenceExample` records through the pipeline (`Pipeline::parse_sequence`):
//! context features as for Example, feature lists padded along time with
//! masks, the padding and grouping words, errors that name the file, record
//! and feature, and checkpoint/restore. (TensorFlow as the oracle:
//! tests/io/interop.rs, `pipeline_sequence_batches_equal_tf_parse_sequence_example`.)

use std::path::Path;

use infeed::batch::{Batch, PlanError, TensorType, Truncation};
use infeed::example::proto::{Feature, FeatureList, FeatureLists, Features, SequenceExample};
use infeed::example::{Column, ParseErrorKind, Values};
use infeed::pipeline::{Pipeline, PipelineError};
use infeed::record::Compression;
use infeed::spec::{DType, FeatureSpec, SequenceSpec};
use prost::Message as _;

use crate::support::tfrecord::write_file;

/// One record: context `label` and a 2-byte `tag`; lists `tokens` (one
/// int64 per step) and `frames` (two floats per step, step `s` of record
/// `label` is `[label + s / 10, -s]`).
fn record(label: i64, tokens: &[i64]) -> Vec<u8> {
    let frames: Vec<Feature> = (0..tokens.len())
        .map(|s| Feature::floats(vec![label as f32 + s as f32 / 10.0, -(s as f32)]))
        .collect();
    SequenceExample {
        context: Some(Features {
            feature: [
                ("label".to_owned(), Feature::int64s(vec![label])),
                (
                    "tag".to_owned(),
                    Feature::bytes([vec![b'a' + label as u8, b'z']]),
                ),
            ]
            .into(),
        }),
        feature_lists: Some(FeatureLists {
            feature_list: [
                (
                    "tokens".to_owned(),
                    FeatureList {
                        feature: tokens.iter().map(|&t| Feature::int64s(vec![t])).collect(),
                    },
                ),
                ("frames".to_owned(), FeatureList { feature: frames }),
            ]
            .into(),
        }),
    }
    .encode_to_vec()
}

/// Token lists of the five records: lengths 3, 1, 0, 5, 2.
const TOKENS: [&[i64]; 5] = [&[1, 2, 3], &[4], &[], &[5, 6, 7, 8, 9], &[10, 11]];

fn write(dir: &Path, records: &[Vec<u8>]) -> String {
    write_file(&dir.join("seq.tfrecord"), records, Compression::None)
}

fn five(dir: &Path) -> String {
    let records: Vec<Vec<u8>> = TOKENS
        .iter()
        .enumerate()
        .map(|(i, t)| record(i as i64, t))
        .collect();
    write(dir, &records)
}

fn spec() -> SequenceSpec {
    SequenceSpec::new(
        FeatureSpec::new()
            .fixed_len("label", DType::Int64, &[])
            .fixed_len("tag", DType::Bytes, &[]),
    )
    .fixed_len_sequence("tokens", DType::Int64, &[])
    .fixed_len_sequence("frames", DType::Float32, &[2])
}

fn pipeline(path: &str) -> infeed::pipeline::ParsedPipeline {
    Pipeline::from_files([path])
        .unwrap()
        .threads(2)
        .parse_sequence(spec())
        .decode_raw("tag", &[2])
}

fn all(p: &infeed::pipeline::ParsedPipeline) -> Vec<Batch> {
    p.build().unwrap().map(Result::unwrap).collect()
}

fn ints(b: &Batch, name: &str) -> Vec<i64> {
    let t = b.get(name).unwrap_or_else(|| panic!("no tensor {name}"));
    match t.dtype() {
        TensorType::I64 => t.values::<i64>().unwrap().to_vec(),
        TensorType::I32 => t
            .values::<i32>()
            .unwrap()
            .iter()
            .map(|&v| v as i64)
            .collect(),
        TensorType::U8 => t
            .values::<u8>()
            .unwrap()
            .iter()
            .map(|&v| v as i64)
            .collect(),
        other => panic!("{name} is {other:?}"),
    }
}

fn floats(b: &Batch, name: &str) -> Vec<f32> {
    b.get(name).unwrap().values::<f32>().unwrap().to_vec()
}

fn shape(b: &Batch, name: &str) -> Vec<usize> {
    b.get(name).unwrap().shape().to_vec()
}

/// Record `label`'s `frames` padded to `len` steps (keeping `[a, b)`).
fn frames_row(label: i64, steps: std::ops::Range<usize>, len: usize) -> Vec<f32> {
    let mut out: Vec<f32> = steps
        .clone()
        .flat_map(|s| [label as f32 + s as f32 / 10.0, -(s as f32)])
        .collect();
    out.resize(len * 2, 0.0);
    out
}

#[test]
fn context_and_lists_padded_along_time_with_masks_exact() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(&five(dir.path()))
        .batch(2, false)
        .pad_to_multiple_of(4)
        .max_length(8);
    // Shapes before the first batch: time 4 or 8, names predictable.
    let shapes = p.shapes().unwrap();
    let described: Vec<Vec<(String, Vec<usize>)>> = shapes
        .iter()
        .map(|s| {
            s.tensors
                .iter()
                .map(|t| (t.name.clone(), t.shape.clone()))
                .collect()
        })
        .collect();
    let expect = |t: usize| {
        vec![
            ("label".to_owned(), vec![2]),
            ("tag".to_owned(), vec![2, 2]),
            ("tokens".to_owned(), vec![2, t]),
            ("tokens_mask".to_owned(), vec![2, t]),
            ("frames".to_owned(), vec![2, t, 2]),
            ("frames_mask".to_owned(), vec![2, t]),
        ]
    };
    assert_eq!(described, [expect(4), expect(8)]);

    let batches = all(&p);
    assert_eq!(batches.len(), 3);
    for b in &batches {
        assert!(shapes.contains(&b.shape()), "{:?}", b.shape());
    }
    let b = &batches[0];
    assert_eq!(ints(b, "label"), [0, 1]);
    assert_eq!(
        ints(b, "tag"),
        [b'a' as i64, b'z' as i64, b'b' as i64, b'z' as i64]
    );
    assert_eq!(shape(b, "tokens"), [2, 4]);
    assert_eq!(ints(b, "tokens"), [1, 2, 3, 0, 4, 0, 0, 0]);
    assert_eq!(ints(b, "tokens_mask"), [1, 1, 1, 0, 1, 0, 0, 0]);
    assert_eq!(shape(b, "frames"), [2, 4, 2]);
    assert_eq!(
        floats(b, "frames"),
        [frames_row(0, 0..3, 4), frames_row(1, 0..1, 4)].concat()
    );
    assert_eq!(ints(b, "frames_mask"), [1, 1, 1, 0, 1, 0, 0, 0]);
    assert_eq!(b.get("frames_mask").unwrap().dtype(), TensorType::U8);

    let b = &batches[1];
    assert_eq!(ints(b, "label"), [2, 3]);
    assert_eq!(shape(b, "tokens"), [2, 8]);
    assert_eq!(
        ints(b, "tokens"),
        [0, 0, 0, 0, 0, 0, 0, 0, 5, 6, 7, 8, 9, 0, 0, 0]
    );
    assert_eq!(
        ints(b, "tokens_mask"),
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0]
    );
    assert_eq!(
        floats(b, "frames"),
        [frames_row(2, 0..0, 8), frames_row(3, 0..5, 8)].concat()
    );

    // The last, partial batch keeps the static shape with a masked row.
    let b = &batches[2];
    assert_eq!(b.real_rows, 1);
    assert_eq!(ints(b, "label"), [4, 0]);
    assert_eq!(ints(b, "tokens"), [10, 11, 0, 0, 0, 0, 0, 0]);
    assert_eq!(ints(b, "tokens_mask"), [1, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        floats(b, "frames"),
        [frames_row(4, 0..2, 4), frames_row(0, 0..0, 4)].concat()
    );
}

#[test]
fn truncation_keeps_the_start_or_the_end_and_fixed_length_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = five(dir.path());
    let start = all(&pipeline(&path)
        .batch(5, false)
        .max_length(2)
        .truncation(Truncation::KeepStart));
    assert_eq!(start.len(), 1);
    assert_eq!(ints(&start[0], "tokens"), [1, 2, 4, 0, 0, 0, 5, 6, 10, 11]);
    assert_eq!(
        ints(&start[0], "tokens_mask"),
        [1, 1, 1, 0, 0, 0, 1, 1, 1, 1]
    );
    assert_eq!(
        floats(&start[0], "frames")[12..16],
        frames_row(3, 0..2, 2)[..]
    );
    let end = all(&pipeline(&path)
        .batch(5, false)
        .max_length(2)
        .truncation(Truncation::KeepEnd));
    assert_eq!(ints(&end[0], "tokens"), [2, 3, 4, 0, 0, 0, 8, 9, 10, 11]);
    assert_eq!(
        floats(&end[0], "frames")[12..16],
        frames_row(3, 3..5, 2)[..]
    );

    // fixed_length: every batch exactly 3 steps, cast to i32.
    let p = pipeline(&path)
        .batch(2, true)
        .fixed_length(3)
        .truncation(Truncation::KeepStart)
        .cast(TensorType::I32);
    assert_eq!(p.shapes().unwrap().len(), 1);
    let fixed = all(&p);
    assert_eq!(fixed.len(), 2);
    assert_eq!(fixed[0].get("tokens").unwrap().dtype(), TensorType::I32);
    assert_eq!(fixed[0].get("label").unwrap().dtype(), TensorType::I32);
    assert_eq!(shape(&fixed[1], "frames"), [2, 3, 2]);
    assert_eq!(ints(&fixed[0], "tokens"), [1, 2, 3, 4, 0, 0]);
    assert_eq!(ints(&fixed[1], "tokens"), [0, 0, 0, 5, 6, 7]);
    assert_eq!(ints(&fixed[1], "tokens_mask"), [0, 0, 0, 1, 1, 1]);
}

#[test]
fn a_list_over_the_limit_names_file_record_and_feature() {
    let dir = tempfile::tempdir().unwrap();
    let path = five(dir.path());
    let mut batches = pipeline(&path)
        .batch(2, false)
        .max_length(4)
        .build()
        .unwrap();
    batches.next_batch().unwrap().unwrap();
    match batches.next_batch() {
        Err(PipelineError::Batch {
            path: p,
            offset,
            error,
            ..
        }) => {
            assert_eq!(p, path);
            // Record 3 follows records 0..3, each framed with 16 bytes.
            let before: u64 = (0..3)
                .map(|i| record(i, TOKENS[i as usize]).len() as u64 + 16)
                .sum();
            assert_eq!(offset, before);
            assert_eq!(error.record, Some(1));
            assert_eq!(error.feature.as_deref(), Some("tokens"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn buckets_by_the_step_count_of_a_list() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(&five(dir.path()))
        .bucket_by_length("tokens", &[2, 4], &[2, 2, 2])
        .max_length(8)
        .truncation(Truncation::KeepStart);
    let shapes = p.shapes().unwrap();
    let times: Vec<usize> = shapes
        .iter()
        .map(|s| s.get("frames").unwrap().shape[1])
        .collect();
    assert_eq!(times, [2, 4, 8]);
    let batches = all(&p);
    // Lengths 3,1,0,5,2: bucket ≤2 gets 1,0 (full) then 2; ≤4 gets 3; the
    // last bucket 5. Full buckets first, then partial ones in bucket order.
    let labels: Vec<Vec<i64>> = batches.iter().map(|b| ints(b, "label")).collect();
    assert_eq!(labels, [vec![1, 2], vec![4, 0], vec![0, 0], vec![3, 0]]);
    let times: Vec<usize> = batches.iter().map(|b| shape(b, "tokens")[1]).collect();
    assert_eq!(times, [2, 2, 4, 8]);
    assert_eq!(ints(&batches[2], "tokens"), [1, 2, 3, 0, 0, 0, 0, 0]);
    assert_eq!(
        ints(&batches[3], "tokens_mask"),
        [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn a_missing_required_list_names_file_record_and_feature() {
    let dir = tempfile::tempdir().unwrap();
    let mut no_frames = SequenceExample::decode(&record(7, &[1])[..]).unwrap();
    no_frames
        .feature_lists
        .as_mut()
        .unwrap()
        .feature_list
        .remove("frames");
    let records = [record(0, &[1, 2]), no_frames.encode_to_vec()];
    let path = write(dir.path(), &records);
    // Not required: a missing list has zero steps.
    let b = &all(&pipeline(&path).batch(2, false).max_length(4))[0];
    assert_eq!(ints(b, "frames_mask"), [1, 1, 0, 0]);
    // Required: an error naming the file, the record and the list.
    let mut batches = Pipeline::from_files([&path])
        .unwrap()
        .parse_sequence(spec().require("frames"))
        .decode_raw("tag", &[2])
        .batch(2, false)
        .max_length(4)
        .build()
        .unwrap();
    match batches.next_batch() {
        Err(PipelineError::Parse {
            path: p,
            offset,
            error,
            ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(offset, records[0].len() as u64 + 16);
            assert_eq!(error.record, 1);
            assert_eq!(error.feature.as_deref(), Some("frames"));
            assert_eq!(error.kind, ParseErrorKind::MissingList);
        }
        other => panic!("{other:?}"),
    }
    // Requiring a list the spec does not hold is a build-time error.
    let err = Pipeline::from_files([&path])
        .unwrap()
        .parse_sequence(spec().require("nope"))
        .decode_raw("tag", &[2])
        .batch(2, false)
        .max_length(4)
        .shapes()
        .unwrap_err();
    assert!(
        matches!(&err, PipelineError::Plan(PlanError::UnknownFeature { feature }) if feature == "nope"),
        "{err:?}"
    );
}

#[test]
fn a_list_of_the_wrong_dtype_names_file_record_and_feature() {
    let dir = tempfile::tempdir().unwrap();
    let path = five(dir.path());
    let wrong = SequenceSpec::new(FeatureSpec::new().fixed_len("label", DType::Int64, &[]))
        .fixed_len_sequence("frames", DType::Int64, &[2]);
    let mut batches = Pipeline::from_files([&path])
        .unwrap()
        .skip(1)
        .parse_sequence(wrong)
        .batch(2, false)
        .max_length(8)
        .build()
        .unwrap();
    match batches.next_batch() {
        Err(PipelineError::Parse {
            path: p,
            offset,
            error,
            ..
        }) => {
            assert_eq!(p, path);
            assert_eq!(offset, record(0, TOKENS[0]).len() as u64 + 16);
            assert_eq!(error.record, 0);
            assert_eq!(error.feature.as_deref(), Some("frames"));
            assert!(
                matches!(error.kind, ParseErrorKind::TypeMismatch { .. }),
                "{:?}",
                error.kind
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ragged_steps_and_packing_are_refused_at_build_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = five(dir.path());
    let ragged = SequenceSpec::new(FeatureSpec::new()).var_len_sequence("tokens", DType::Int64);
    let p = Pipeline::from_files([&path])
        .unwrap()
        .parse_sequence(ragged)
        .batch(2, false)
        .max_length(8);
    assert!(
        matches!(p.shapes(), Err(PipelineError::Plan(PlanError::RaggedSteps { feature })) if feature == "tokens")
    );
    assert!(matches!(
        p.build().map(|_| ()),
        Err(PipelineError::Plan(PlanError::RaggedSteps { .. }))
    ));
    let packed = Pipeline::from_files([&path])
        .unwrap()
        .parse_sequence(SequenceSpec::new(FeatureSpec::new()).fixed_len_sequence(
            "tokens",
            DType::Int64,
            &[],
        ))
        .batch(2, false)
        .pack(8);
    match packed.build().map(|_| ()) {
        Err(PipelineError::Config(m)) => assert!(m.contains("SequenceExample"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A list without a length bound is unbounded: refused too.
    let unbounded = pipeline(&path).batch(2, false);
    assert!(matches!(
        unbounded.shapes(),
        Err(PipelineError::Plan(PlanError::Unbounded { .. }))
    ));
}

#[test]
fn columns_hold_the_context_then_the_lists() {
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<_> = pipeline(&five(dir.path()))
        .batch(5, false)
        .build_columns()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(batches.len(), 1);
    let names: Vec<&str> = batches[0].columns.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["label", "tag", "tokens", "frames"]);
    assert_eq!(
        batches[0].get("tokens"),
        Some(&Column::Ragged {
            values: Values::Int64((1..=11).collect()),
            row_splits: vec![0, 3, 4, 4, 9, 11],
            inner_shape: vec![],
        })
    );
}

#[test]
fn a_restored_run_continues_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            let tokens: Vec<i64> = (0..(i * 7) % 11).map(|t| t * 100 + i).collect();
            record(i, &tokens)
        })
        .collect();
    let path = write(dir.path(), &records);
    let p = Pipeline::from_files([&path])
        .unwrap()
        .seed(9)
        .shuffle(16)
        .repeat(Some(2))
        .threads(3)
        .parse_sequence(spec())
        .decode_raw("tag", &[2])
        .batch(3, false)
        .pad_to_multiple_of(4)
        .max_length(12);
    let whole: Vec<u64> = all(&p).iter().map(Batch::digest).collect();
    assert_eq!(whole.len(), 27);
    let mut first = p.build().unwrap();
    for _ in 0..10 {
        first.next_batch().unwrap().unwrap();
    }
    let state = first.state();
    drop(first);
    let rest: Vec<u64> = p
        .clone()
        .resume_from(&state)
        .build()
        .unwrap()
        .map(|b| b.unwrap().digest())
        .collect();
    assert_eq!(rest, whole[10..]);
    // The state holds positions, not records.
    assert!(state.len() < 1024, "{} bytes", state.len());
}

/// docs/pipeline.md's SequenceExample sample, as written there (plus the
/// checks).
#[test]
fn guide_sequence_sample() -> Result<(), PipelineError> {
    let dir = tempfile::tempdir().unwrap();
    let path = five(dir.path());
    let mut seen = 0;

    let spec = SequenceSpec::new(FeatureSpec::new().fixed_len("label", DType::Int64, &[]))
        .fixed_len_sequence("tokens", DType::Int64, &[]) // one id per step
        .fixed_len_sequence("frames", DType::Float32, &[2]) // two floats per step
        .require("tokens"); // missing: an error
    let pipeline = Pipeline::from_files([path])?
        .parse_sequence(spec)
        .pad_to_multiple_of(4)
        .max_length(8)
        .batch(2, false);
    let shapes = pipeline.shapes()?; // T in {4, 8}: label [2], tokens [2, T],
    // tokens_mask [2, T], frames [2, T, 2], frames_mask [2, T]
    let mut batches = pipeline.build()?;
    while let Some(batch) = batches.next_batch()? {
        let frames = &batch["frames"]; // [2, T, 2] f32, 0.0 after each list's end
        let mask = &batch["frames_mask"]; // [2, T] u8

        let t = mask.shape()[1];
        assert_eq!(frames.shape(), [2, t, 2]);
        assert_eq!(frames.dtype(), TensorType::F32);
        assert_eq!(mask.dtype(), TensorType::U8);
        assert!(shapes.contains(&batch.shape()));
        seen += 1;
    }
    assert_eq!(seen, 3);
    assert_eq!(shapes.len(), 2);
    Ok(())
}
