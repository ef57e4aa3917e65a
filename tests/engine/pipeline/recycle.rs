//! Parsed columns given back with `Batches::recycle` are parsed into again
//! (no fresh memory per batch), and the output does not change.

use infeed::example::{Column, ParsedBatch, Values};
use infeed::pipeline::Pipeline;

use super::parse::lm_spec;
use super::testdata;

fn pipeline() -> infeed::pipeline::ParsedPipeline {
    Pipeline::from_files([testdata("lm-sample.tfrecord.gz")])
        .unwrap()
        .shuffle(64)
        .seed(7)
        .threads(1)
        .prefetch(1)
        .parse(lm_spec())
        .batch(10, false)
}

fn ids_capacity(batch: &ParsedBatch) -> usize {
    match batch.get("input_ids") {
        Some(Column::Ragged {
            values: Values::Int32(v),
            ..
        }) => v.capacity(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn batches_given_back_leave_the_output_unchanged() {
    let want: Vec<ParsedBatch> = pipeline()
        .build_columns()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(want.len(), 26);
    let mut batches = pipeline().build_columns().unwrap();
    let mut got = Vec::new();
    while let Some(batch) = batches.next_batch().unwrap() {
        got.push(batch.clone());
        let mut back = batch;
        match got.len() % 3 {
            // Given back as it came.
            0 => {}
            // Given back changed: columns in another order, one of them
            // of another type.
            1 => {
                back.columns.reverse();
                back.columns[0].1 = Column::Dense {
                    shape: vec![1],
                    values: Values::Float32(vec![9.0]),
                };
            }
            // Given back empty.
            _ => back.columns.clear(),
        }
        batches.recycle(back);
    }
    assert_eq!(got, want);
}

#[test]
fn the_next_batch_is_parsed_into_the_one_given_back() {
    let mut batches = pipeline().build_columns().unwrap();
    let mut first = batches.next_batch().unwrap().unwrap();
    // Mark the batch given back: a buffer far larger than any batch needs.
    if let Some((_, Column::Ragged { values, .. })) = first.columns.first_mut() {
        *values = Values::Int32(Vec::with_capacity(1 << 20));
    }
    batches.recycle(first);
    let rest: Vec<ParsedBatch> = batches.map(Result::unwrap).collect();
    assert_eq!(rest.len(), 25);
    // Exactly one later batch lives in the buffer given back (the first
    // parsed after it came back); the others are new.
    let reused: Vec<usize> = (0..rest.len())
        .filter(|&i| ids_capacity(&rest[i]) >= 1 << 20)
        .collect();
    assert_eq!(reused.len(), 1, "{reused:?}");
    let want: Vec<ParsedBatch> = pipeline()
        .build_columns()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rest, want[1..]);
}
