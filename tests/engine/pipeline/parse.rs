//! The pipeline parsing TensorFlow-written records by a feature spec.

use infeed::example::{Column, ParseErrorKind, Values, parse_examples};
use infeed::pipeline::{Pipeline, PipelineError};
use infeed::spec::{DType, FeatureSpec};

use super::testdata;
use crate::support::tfrecord::read_file;

pub(crate) fn lm_spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("input_ids", DType::Int32)
        .var_len("attention_mask", DType::Int64)
}

#[test]
fn parsed_batches_equal_parsing_the_file_directly() {
    let records: Vec<bytes::Bytes> = read_file(testdata("lm-sample.tfrecord"))
        .into_iter()
        .map(|r| r.data)
        .collect();
    assert_eq!(records.len(), 256);
    let batches: Vec<_> = Pipeline::from_files([testdata("lm-sample.tfrecord.gz")])
        .unwrap()
        .parse(lm_spec())
        .batch(100, false)
        .build_columns()
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
            ..
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

#[test]
fn static_shape_batches_are_padded_masked_and_listed_ahead() {
    use infeed::batch::TensorType;
    let records: Vec<bytes::Bytes> = read_file(testdata("lm-sample.tfrecord"))
        .into_iter()
        .map(|r| r.data)
        .collect();
    let columns = parse_examples(&lm_spec(), &records).unwrap();
    let (
        Some(Column::Ragged {
            values: Values::Int32(ids),
            row_splits,
            ..
        }),
        _,
    ) = (columns.get("input_ids"), ())
    else {
        panic!("input_ids is ragged int32");
    };
    let pipeline = Pipeline::from_files([testdata("lm-sample.tfrecord")])
        .unwrap()
        .parse(lm_spec())
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast(TensorType::I32)
        .batch(100, false);
    let shapes = pipeline.shapes().unwrap();
    assert_eq!(shapes.len(), 8); // L in 64, 128, ..., 512
    let batches: Vec<_> = pipeline.build().unwrap().map(Result::unwrap).collect();
    assert_eq!(
        batches.iter().map(|b| b.real_rows).collect::<Vec<_>>(),
        [100, 100, 56]
    );
    for (b, batch) in batches.iter().enumerate() {
        assert!(shapes.contains(&batch.shape()), "{:?}", batch.shape());
        let t = &batch["input_ids"];
        let (rows, width) = (t.shape()[0], t.shape()[1]);
        assert_eq!(rows, 100);
        assert_eq!(width % 64, 0);
        assert_eq!(t.data().as_ptr() as usize % 64, 0);
        let values = t.values::<i32>().unwrap();
        let mask = batch["input_ids_mask"].values::<i32>().unwrap();
        for r in 0..rows {
            let row = &values[r * width..(r + 1) * width];
            let row_mask = &mask[r * width..(r + 1) * width];
            let i = b * 100 + r;
            let real: &[i32] = if i < records.len() {
                &ids[row_splits[i]..row_splits[i + 1]]
            } else {
                &[]
            };
            assert_eq!(&row[..real.len()], real, "batch {b} row {r}");
            assert!(row[real.len()..].iter().all(|&x| x == 0));
            assert_eq!(row_mask.iter().filter(|&&m| m == 1).count(), real.len());
        }
    }
}

#[test]
fn padding_batches_of_a_host_that_ran_dry_are_fully_masked_with_the_static_shape() {
    use infeed::batch::TensorType;
    use infeed::pipeline::EqualBatches;
    // 3 files: host 0 reads lm-sample twice (512 records), host 1 once (256).
    let files = [
        testdata("lm-sample.tfrecord"),
        testdata("lm-sample.tfrecord.gz"),
        testdata("lm-sample.tfrecord"),
    ];
    let host1 = Pipeline::from_files(files)
        .unwrap()
        .shard(1, 2)
        .equal_batches(EqualBatches::Pad)
        .parse(lm_spec())
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast(TensorType::I32)
        .batch(128, true);
    let shapes = host1.shapes().unwrap();
    let batches: Vec<_> = host1.build().unwrap().map(Result::unwrap).collect();
    assert_eq!(
        batches.iter().map(|b| b.real_rows).collect::<Vec<_>>(),
        [128, 128, 0, 0]
    );
    for b in &batches[2..] {
        assert!(shapes.contains(&b.shape()));
        assert!(
            b["input_ids_mask"]
                .values::<i32>()
                .unwrap()
                .iter()
                .all(|&m| m == 0)
        );
    }
}

/// Permits the test hands out one at a time: each parsed batch takes one
/// before it can go on, so a batch is ready only after the test allowed it.
#[derive(Default)]
struct Permits {
    left: std::sync::Mutex<u64>,
    given: std::sync::Condvar,
}

impl Permits {
    fn open() -> Self {
        Permits {
            left: std::sync::Mutex::new(u64::MAX),
            given: std::sync::Condvar::new(),
        }
    }

    fn take(&self) {
        let mut left = self.left.lock().unwrap();
        while *left == 0 {
            left = self.given.wait(left).unwrap();
        }
        *left -= 1;
    }

    fn give(&self) {
        *self.left.lock().unwrap() += 1;
        self.given.notify_all();
    }
}

#[test]
fn next_batch_within_gives_the_same_batches_and_states_however_often_it_times_out() {
    // Every batch waits for a permit, and the test gives one only after a
    // poll came back empty: the polled pipeline times out at least once
    // for its first batch (no permit exists yet), whatever the speed of
    // its threads, and the timeouts after it fall wherever they fall.
    let gated = |permits: std::sync::Arc<Permits>| {
        Pipeline::from_files([testdata("lm-sample.tfrecord.gz")])
            .unwrap()
            .seed(3)
            .shuffle(64)
            .repeat(Some(2))
            .parse(lm_spec())
            .map_batch(move |batch| {
                permits.take();
                Ok(batch)
            })
            .max_length(512)
            .batch(16, true)
    };
    let permits = std::sync::Arc::new(Permits::default());
    let mut plain = gated(std::sync::Arc::new(Permits::open())).build().unwrap();
    let mut polled = gated(permits.clone()).build().unwrap();
    let (mut batches, mut timeouts) = (0, 0);
    loop {
        let got = loop {
            match polled.next_batch_within(std::time::Duration::ZERO) {
                Some(result) => break result.unwrap(),
                None => {
                    timeouts += 1;
                    permits.give();
                }
            }
        };
        let want = plain.next_batch().unwrap();
        assert_eq!(
            want.as_ref().map(|b| b.digest()),
            got.as_ref().map(|b| b.digest())
        );
        assert_eq!(plain.state(), polled.state());
        if want.is_none() {
            break;
        }
        batches += 1;
    }
    assert_eq!(batches, 2 * 256 / 16);
    assert!(timeouts > 0);
    assert_eq!(
        polled
            .next_batch_within(std::time::Duration::ZERO)
            .map(|r| r.unwrap().is_none()),
        Some(true)
    );
}
