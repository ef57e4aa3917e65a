//! One check for every step, each step listed once (the idea of tf.data's
//! dataset-op test base): its pipeline is run uninterrupted, then resumed
//! from its state after every batch — each resumed run must give exactly
//! the rest of the uninterrupted one, nothing lost, nothing repeated — and
//! made again from its description (`describe` → JSON → `from_description`,
//! where the step holds no user code), giving the same batches.
//!
//! A step added to the engine gets this check by one entry in [`steps`].
//! The composed chain is property-tested in `restore_props.rs`.

use super::grouping::*;
use infeed::batch::{MaskType, Overflow, PackStrategy, TensorType, Truncation};
use infeed::example::{Column, ParsedBatch, Values};
use infeed::pipeline::{
    Description, EqualBatches, MixChoice, OnExhausted, ParsedPipeline, Pipeline,
};
use infeed::record::Compression;
use infeed::spec::DType;

/// 5 files of 12 records each, `f * 100 + i`: lm records of lengths 1 to
/// 12 in a fixed scramble, with a fixed-length `pair` as well.
fn files(dir: &std::path::Path) -> Vec<String> {
    (0..5)
        .map(|f| {
            let records = (0..12).map(|i| {
                let id = (f * 100 + i) as i64;
                let len = (i * 5 + f * 3) % 12 + 1;
                example(&[
                    ("ids", (0..len).map(|j| value(id, j)).collect()),
                    ("mask", vec![1; len]),
                    ("pair", vec![id, id + 1]),
                ])
            });
            let path = dir.join(format!("f{f}.tfrecord"));
            crate::support::tfrecord::write_file(&path, records, Compression::None)
        })
        .collect()
}

/// Keeps the parsed records of even id.
fn even_rows(batch: &ParsedBatch, row: usize) -> bool {
    match batch.get("ids") {
        Some(Column::Ragged {
            values: Values::Int64(v),
            row_splits,
            ..
        }) => id_of(v[row_splits[row]]) % 2 == 0,
        _ => true,
    }
}

/// Every step, each with the smallest pipeline around it that runs it
/// (seeded, several epochs where the step has a per-epoch state).
fn steps(files: &[String]) -> Vec<(&'static str, ParsedPipeline)> {
    let records = || {
        Pipeline::from_files(files.to_vec())
            .unwrap()
            .threads(2)
            .seed(3)
    };
    let padded = |p: Pipeline| p.parse(spec()).max_length(16).batch(4, false);
    let mixed = || {
        let part = |f: &[String], seed| {
            Pipeline::from_files(f.to_vec())
                .unwrap()
                .seed(seed)
                .shuffle(5)
                .repeat(Some(2))
        };
        Pipeline::mix(
            [("a", part(&files[..3], 1)), ("b", part(&files[3..], 2))],
            &[2.0, 1.0],
        )
        .unwrap()
        .seed(4)
    };
    vec![
        ("plain", padded(records())),
        (
            "shuffle_files",
            padded(records().shuffle_files().repeat(Some(2))),
        ),
        ("interleave", padded(records().interleave(3, 2))),
        ("skip", padded(records().skip(7))),
        ("take", padded(records().take(29).repeat(Some(2)))),
        ("shuffle", padded(records().shuffle(9))),
        (
            "repeat before shuffle",
            padded(records().repeat(Some(3)).shuffle(9)),
        ),
        (
            "repeat after shuffle",
            padded(records().shuffle(9).repeat(Some(3))),
        ),
        (
            "global_shuffle",
            padded(records().global_shuffle().repeat(Some(2))),
        ),
        (
            "global_shuffle_blocks",
            padded(records().global_shuffle_blocks(200)),
        ),
        ("filter", padded(records().filter(|r| r.len() % 3 != 0))),
        (
            "map",
            padded(records().map(|r| bytes::Bytes::from([&r[..], &r[..]].concat()))),
        ),
        ("shard by file", padded(records().shard(1, 2).shuffle(4))),
        ("shard by record", padded(records().shard(2, 7).shuffle(4))),
        (
            "streams",
            padded(records().shard(0, 2).streams(4).shuffle(4)),
        ),
        (
            "equal_batches",
            padded(records().shard(1, 3).equal_batches(EqualBatches::Pad)),
        ),
        ("skip_steps", padded(records().skip_steps(&[(2, 4)]))),
        ("mix", padded(mixed())),
        (
            "mix stratified, dropping",
            padded(
                mixed()
                    .mix_by(MixChoice::Stratified)
                    .on_exhausted(OnExhausted::Drop),
            ),
        ),
        (
            "mix_schedule",
            padded(mixed().mix_schedule(&[(3, vec![1.0, 3.0])], true)),
        ),
        (
            "pad_to_multiple_of, truncation, cast, masks",
            records()
                .shuffle(6)
                .parse(spec())
                .pad_to_multiple_of(4)
                .max_length(8)
                .truncation(Truncation::KeepEnd)
                .cast(TensorType::I32)
                .masks(MaskType::Type(TensorType::U8))
                .mask("mask", MaskType::None)
                .batch(4, true),
        ),
        (
            "fixed_length",
            records()
                .parse(spec())
                .fixed_length(6)
                .truncation(Truncation::KeepStart)
                .batch(5, false),
        ),
        (
            "bucket_by_length",
            records()
                .shuffle(6)
                .parse(spec())
                .bucket_by_length("ids", &[4, 8], &[4, 3, 2])
                .max_length(12),
        ),
        (
            "pack first fit",
            records().shuffle(6).parse(spec()).pack(16).batch(2, false),
        ),
        (
            "pack best fit, max segments",
            records()
                .parse(spec())
                .pack(16)
                .pack_strategy(PackStrategy::BestFit)
                .pack_max_segments(2)
                .batch(2, false),
        ),
        (
            "pack concat split",
            records()
                .parse(spec())
                .pack(8)
                .pack_strategy(PackStrategy::ConcatSplit)
                .pack_overflow(Overflow::Split)
                .batch(3, false),
        ),
        (
            "inputs_targets",
            records()
                .parse(spec())
                .pack(16)
                .inputs_targets("ids", 0)
                .batch(2, false),
        ),
        (
            "normalize",
            records()
                .parse(spec().fixed_len("pair", DType::Int64, &[2]))
                .fixed_length(4)
                .truncation(Truncation::KeepStart)
                .normalize("pair", &[2.0], &[3.0])
                .batch(4, false),
        ),
        (
            "map_batch",
            records()
                .parse(spec())
                .map_batch(Ok)
                .max_length(16)
                .batch(4, false),
        ),
        (
            "filter_length",
            records()
                .shuffle(5)
                .parse(spec())
                .filter_length("ids", 3, 9)
                .max_length(16)
                .batch(3, false),
        ),
        (
            "filter_rows",
            records()
                .shuffle(5)
                .parse(spec())
                .filter_rows(even_rows)
                .max_length(16)
                .batch(3, false),
        ),
    ]
}

/// The digests of the batches `p` gives, and its state after each.
fn run(p: &ParsedPipeline) -> (Vec<u64>, Vec<Vec<u8>>) {
    let mut batches = p.build().unwrap();
    let (mut digests, mut states) = (Vec::new(), Vec::new());
    while let Some(batch) = batches.next_batch().unwrap() {
        digests.push(batch.digest());
        states.push(batches.state());
    }
    (digests, states)
}

#[test]
fn every_step_restores_after_every_batch_and_is_made_again_from_its_description() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let steps = steps(&files);
    for (name, p) in &steps {
        let (whole, states) = run(p);
        assert!(whole.len() >= 3, "{name}: {} batches", whole.len());
        for (k, state) in states.iter().enumerate() {
            let (rest, _) = run(&p.clone().resume_from(state));
            assert_eq!(rest, whole[k + 1..], "{name}: resumed after batch {k}");
        }
        let d = p.describe();
        if !d.callables().is_empty() {
            continue;
        }
        let again = Description::from_json(&d.to_json()).unwrap();
        let made = ParsedPipeline::from_description(&again).unwrap();
        assert_eq!(run(&made).0, whole, "{name}: made from its description");
    }
    // Every step word of the description is among them.
    let described: String = steps.iter().map(|(_, p)| p.describe().to_json()).collect();
    for word in [
        "shuffle_files",
        "interleave",
        "skip",
        "take",
        "global_shuffle",
        "\"filter\"",
        "\"map\"",
        "shuffle",
        "repeat",
        "batch",
        "drop_remainder",
        "pad_to_multiple_of",
        "max_length",
        "fixed_length",
        "truncation",
        "masks",
        "\"mask\"",
        "cast",
        "normalize",
        "inputs_targets",
        "bucket_by_length",
        "\"pack\"",
        "pack_overflow",
        "pack_strategy",
        "pack_max_segments",
        "map_batch",
        "filter_rows",
        "filter_length",
        "mix",
        "streams",
        "equal_batches",
        "skip_steps",
    ] {
        assert!(described.contains(word), "no step says {word}");
    }
}
