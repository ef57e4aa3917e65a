//! States saved by an earlier build restore in this one: for each pipeline
//! below, `testdata/states/NAME.state` is the state a build of format 4
//! saved after three batches, and `NAME.json` the digests of the batches
//! that followed. This build must restore each and give those batches.
//! Nothing else in the tests compares against a state written before the
//! test ran, so a change of the state's layout (or of a fingerprint) shows
//! here first; a deliberate one changes the format, refuses the states
//! before it by their format (as `states/format-3/` are), and writes these
//! anew. The digests are the batches themselves: they stay when the format
//! changes (format 3's states were followed by the same ones).
//! `states/15d90ee/` keeps states that an earlier build of format 4 saved
//! for the same pipelines where what a state holds changed within the
//! format (one record fewer pulled ahead): they restore to the same
//! batches.
//!
//! Written by `INFEED_WRITE_STATE_FIXTURES=1 cargo test --all-features
//! --test engine pipeline::state_fixtures` (run from the repository's root:
//! the pipelines name their files relative to it, as the states do).

use infeed::batch::{PackStrategy, TensorType};
use infeed::pipeline::{ParsedPipeline, Pipeline};
use infeed::spec::{DType, FeatureSpec};

/// Batches saved before the state, and digests kept after it.
const BEFORE: usize = 3;
const AFTER: usize = 8;

fn lm_spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64)
}

fn lm() -> Pipeline {
    Pipeline::from_files(["testdata/lm-sample.tfrecord"]).unwrap()
}

/// The pipelines whose states are kept: the ops with a part of their own.
fn cases() -> Vec<(&'static str, ParsedPipeline)> {
    let padded = |p: Pipeline| {
        p.parse(lm_spec())
            .pad_to_multiple_of(64)
            .max_length(512)
            .cast(TensorType::I32)
            .batch(16, false)
    };
    let mixed = Pipeline::mix(
        [
            ("plain", lm().seed(1).shuffle(20).repeat(None)),
            (
                "gzip",
                Pipeline::from_files(["testdata/lm-sample.tfrecord.gz"])
                    .unwrap()
                    .seed(2)
                    .skip(10)
                    .repeat(None),
            ),
        ],
        &[3.0, 1.0],
    )
    .unwrap()
    .seed(3);
    vec![
        ("plain", padded(lm())),
        (
            "shuffled",
            padded(lm().seed(7).shuffle_files().shuffle(50).repeat(Some(3))),
        ),
        ("mixture", padded(mixed)),
        (
            "streams",
            padded(lm().seed(4).shard(1, 2).streams(4).shuffle(8)),
        ),
        (
            "global_shuffle",
            padded(lm().seed(5).global_shuffle().repeat(Some(2))),
        ),
        (
            "buckets",
            lm().seed(6)
                .shuffle(30)
                .parse(lm_spec())
                .bucket_by_length("input_ids", &[64, 128, 256], &[8, 4, 4, 2])
                .max_length(512),
        ),
        (
            "packed",
            lm().seed(8)
                .parse(lm_spec())
                .pack(512)
                .pack_strategy(PackStrategy::ConcatSplit)
                .batch(4, false),
        ),
    ]
}

fn path(name: &str, ext: &str) -> std::path::PathBuf {
    crate::support::testdata(&format!("states/{name}.{ext}"))
}

/// The state after `BEFORE` batches, and the digests of the next `AFTER`.
fn saved(p: &ParsedPipeline) -> (Vec<u8>, Vec<String>) {
    let mut batches = p.build().unwrap();
    for _ in 0..BEFORE {
        batches.next_batch().unwrap().expect("a batch");
    }
    let state = batches.state();
    let after = digests(batches.take(AFTER).map(Result::unwrap));
    (state, after)
}

/// The state of pipeline `name` that the build of commit 118d725 (state
/// format 3, whose fingerprint was a table of numbered fields) saved.
fn format_3(name: &str) -> Vec<u8> {
    std::fs::read(crate::support::testdata(&format!(
        "states/format-3/{name}.state"
    )))
    .unwrap()
}

fn digests(batches: impl Iterator<Item = infeed::batch::Batch>) -> Vec<String> {
    batches.map(|b| format!("{:016x}", b.digest())).collect()
}

#[test]
fn states_saved_by_an_earlier_build_restore_to_the_same_batches() {
    // The pipelines name their files relative to the repository's root,
    // where cargo runs the tests.
    let write = std::env::var_os("INFEED_WRITE_STATE_FIXTURES").is_some();
    for (name, p) in cases() {
        if write {
            let (state, after) = saved(&p);
            std::fs::create_dir_all(path(name, "state").parent().unwrap()).unwrap();
            std::fs::write(path(name, "state"), &state).unwrap();
            let json = serde_json::to_string_pretty(&after).unwrap();
            std::fs::write(path(name, "json"), json + "\n").unwrap();
            continue;
        }
        let state = std::fs::read(path(name, "state")).unwrap();
        let text = std::fs::read_to_string(path(name, "json")).unwrap();
        let expected: Vec<String> = serde_json::from_str(&text).unwrap();
        let restored = p
            .clone()
            .resume_from(&state)
            .build()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let after = digests(restored.take(AFTER).map(Result::unwrap));
        assert_eq!(after, expected, "{name}: the batches after the saved state");
        // And a run from the start saves the same state now.
        assert_eq!(saved(&p).0, state, "{name}: the state a run saves");
    }
}

/// States of format 4 that the build of commit 15d90ee saved, where the
/// record thread pulled one record ahead of the one it measured (so they
/// name one more record to read again, and a chain one record further
/// on): this build, which takes measured records in runs, restores them to
/// the same batches. (The pipelines that measure no record save what they
/// saved.)
#[test]
fn states_saved_pulling_a_record_ahead_restore_to_the_same_batches() {
    let mut restored = 0;
    for (name, p) in cases() {
        let saved = crate::support::testdata(&format!("states/15d90ee/{name}.state"));
        let Ok(state) = std::fs::read(saved) else {
            continue;
        };
        let text = std::fs::read_to_string(path(name, "json")).unwrap();
        let expected: Vec<String> = serde_json::from_str(&text).unwrap();
        let batches = p.resume_from(&state).build().unwrap();
        let after = digests(batches.take(AFTER).map(Result::unwrap));
        assert_eq!(after, expected, "{name}");
        restored += 1;
    }
    assert_eq!(restored, 3);
}

#[test]
fn states_of_format_3_are_refused_by_their_format() {
    for (name, p) in cases() {
        let state = format_3(name);
        assert_eq!(&state[..8], b"INFS\x03\0\0\0", "{name}");
        let err = p.resume_from(&state).build().err().expect("refused");
        assert_eq!(
            err.to_string(),
            "cannot restore the pipeline state: it is in state format 3, which this build no \
             longer reads (it reads format 4, a tree of per-op parts with a fingerprint of steps \
             in order): restore it with the infeed that wrote it, or start the run again",
            "{name}"
        );
    }
}
