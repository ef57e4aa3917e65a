//! The pipeline parsing TensorFlow-written records by a feature spec.

use infeed::example::{Column, ParseErrorKind, Values, parse_examples};
use infeed::pipeline::{Pipeline, PipelineError};
use infeed::record::{ReadOptions, RecordReader};
use infeed::spec::{DType, FeatureSpec};

fn testdata(name: &str) -> String {
    format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn lm_spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("input_ids", DType::Int32)
        .var_len("attention_mask", DType::Int64)
}

#[test]
fn parsed_batches_equal_parsing_the_file_directly() {
    let records: Vec<bytes::Bytes> =
        RecordReader::open(testdata("lm-sample.tfrecord"), &ReadOptions::default())
            .unwrap()
            .map(|r| r.unwrap().data)
            .collect();
    assert_eq!(records.len(), 256);
    let batches: Vec<_> = Pipeline::from_files([testdata("lm-sample.tfrecord.gz")])
        .unwrap()
        .parse(lm_spec())
        .batch(100, false)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        batches.iter().map(|b| b.num_records).collect::<Vec<_>>(),
        [100, 100, 56]
    );
    for (batch, chunk) in batches.iter().zip(records.chunks(100)) {
        assert_eq!(batch, &parse_examples(&lm_spec(), chunk).unwrap());
        assert!(matches!(
            batch.get("input_ids"),
            Some(Column::Ragged {
                values: Values::Int32(_),
                ..
            })
        ));
    }
}

#[test]
fn a_record_that_does_not_match_the_spec_names_file_offset_and_feature() {
    let spec = FeatureSpec::new().fixed_len("input_ids", DType::Int64, &[1]);
    let mut batches = Pipeline::from_files([testdata("lm-sample.tfrecord")])
        .unwrap()
        .parse(spec)
        .batch(8, false)
        .build()
        .unwrap();
    match batches.next_batch() {
        Err(PipelineError::Parse {
            path,
            offset,
            error,
        }) => {
            assert_eq!(path, testdata("lm-sample.tfrecord"));
            assert_eq!(offset, 0);
            assert_eq!(error.record, 0);
            assert_eq!(error.feature.as_deref(), Some("input_ids"));
            assert!(
                matches!(error.kind, ParseErrorKind::WrongCount { expected: 1, .. }),
                "{:?}",
                error.kind
            );
        }
        other => panic!("{other:?}"),
    }
}
