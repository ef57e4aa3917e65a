//! A pipeline as one value: every builder word lands in its description,
//! the description reads back from JSON as the same value, and the
//! pipeline made from it gives the same batches; bad descriptions are
//! refused naming the place, the version or the user code.

use super::grouping::*;
use super::testdata;
use infeed::batch::{MaskType, Overflow, PackStrategy, TensorType, Truncation};
use infeed::pipeline::description::{BatchStep, Callable, RecordStep};
use infeed::pipeline::{
    Description, EqualBatches, MixChoice, OnExhausted, ParsedPipeline, Pipeline, PipelineError,
};
use infeed::record::ReadOptions;
use infeed::source::SourceOptions;
use infeed::spec::{DType, DefaultValue, FeatureSpec, ImageSpec, SequenceSpec};
use proptest::prelude::*;

/// The digests of a pipeline's first `n` batches.
fn digests(p: &ParsedPipeline, n: usize) -> Vec<u64> {
    p.build()
        .unwrap()
        .take(n)
        .map(|b| b.unwrap().digest())
        .collect()
}

/// `p` described, written as JSON, read back and made again: the same
/// value at every stage, and the same batches.
fn round_trip(p: &ParsedPipeline) -> Description {
    let d = p.describe();
    let read = Description::from_json(&d.to_json()).unwrap();
    assert_eq!(read, d);
    let again = ParsedPipeline::from_description(&read).unwrap();
    assert_eq!(again.describe(), d);
    assert_eq!(digests(&again, 12), digests(p, 12));
    d
}

fn lm() -> Pipeline {
    Pipeline::from_files([testdata("lm-sample.tfrecord")]).unwrap()
}

fn lm_spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64)
}

#[test]
fn every_record_word_and_option_is_described_and_made_again() {
    let p = lm()
        .seed(5)
        .shard(1, 3)
        .shuffle_files()
        .interleave(2, 3)
        .skip(3)
        .take(200)
        .repeat(Some(2))
        .shuffle(17)
        .threads(2)
        .prefetch(3)
        .equal_batches(EqualBatches::Pad)
        .skip_steps(&[(2, 4)])
        .read_options(ReadOptions::default().mmap(true).chunk_size(1 << 16))
        .source_options(SourceOptions::default().max_retries(2))
        .parse(lm_spec())
        .max_length(512)
        .batch(8, false);
    let d = round_trip(&p);
    assert_eq!(
        d.records,
        [
            RecordStep::ShuffleFiles {},
            RecordStep::Interleave {
                cycle_length: 2,
                block_length: 3
            },
            RecordStep::Skip { records: 3 },
            RecordStep::Take { records: 200 },
            RecordStep::Repeat { epochs: Some(2) },
            RecordStep::Shuffle { buffer: 17 },
        ]
    );
    let o = &d.options;
    assert_eq!(
        (o.seed, o.shard, o.threads, o.prefetch),
        (5, Some((1, 3)), Some(2), 3)
    );
    assert_eq!(o.equal_batches, Some(EqualBatches::Pad));
    assert_eq!(o.skip_steps, [(2, 4)]);
    assert!(o.read.mmap);
    assert_eq!(o.source.max_retries, 2);
}

#[test]
fn every_batch_word_is_described_and_made_again() {
    let padded = lm()
        .parse(lm_spec())
        .pad_to_multiple_of(64)
        .max_length(128)
        .truncation(Truncation::KeepEnd)
        .masks(MaskType::Type(TensorType::U8))
        .mask("attention_mask", MaskType::None)
        .cast(TensorType::I32)
        .inputs_targets("input_ids", 7)
        .batch(4, true);
    let d = round_trip(&padded);
    assert!(d.batches.contains(&BatchStep::Truncation {
        policy: Truncation::KeepEnd
    }));
    assert!(d.batches.contains(&BatchStep::InputsTargets {
        feature: "input_ids".into(),
        bos: 7
    }));
    let bucketed = lm()
        .parse(lm_spec())
        .bucket_by_length("input_ids", &[64, 128], &[8, 4, 2])
        .max_length(512)
        .drop_remainder(true);
    round_trip(&bucketed);
    let packed = lm()
        .parse(lm_spec())
        .pack(256)
        .pack_strategy(PackStrategy::BestFit)
        .pack_overflow(Overflow::KeepStart)
        .pack_max_segments(3)
        .batch(2, false);
    let d = round_trip(&packed);
    assert_eq!(
        &d.batches[1..],
        [
            BatchStep::PackStrategy {
                strategy: PackStrategy::BestFit
            },
            BatchStep::PackOverflow {
                overflow: Overflow::KeepStart
            },
            BatchStep::PackMaxSegments { segments: 3 },
            BatchStep::Batch {
                size: 2,
                drop_remainder: false
            },
        ]
    );
}

#[test]
fn specs_of_every_kind_are_described_and_made_again() {
    let spec = FeatureSpec::new()
        .fixed_len("label", DType::Int64, &[1])
        .fixed_len_with_default(
            "score",
            DType::Float32,
            &[2],
            DefaultValue::Float32(vec![0.5]),
        )
        .unwrap()
        .fixed_len_with_default(
            "name",
            DType::Bytes,
            &[],
            DefaultValue::Bytes(vec![b"x".to_vec()]),
        )
        .unwrap()
        .var_len("tokens", DType::Int32)
        .image("image", ImageSpec::new(8, 8, 3).resize_crop(10).flip());
    let d = lm().parse(spec.clone()).batch(2, true).describe();
    let read = Description::from_json(&d.to_json()).unwrap();
    let (made, sequence) = read.parse.as_ref().unwrap().specs().unwrap();
    assert_eq!(made, spec);
    assert!(sequence.is_none());
    let sequence = SequenceSpec::new(FeatureSpec::new().var_len("id", DType::Int64))
        .fixed_len_sequence("frames", DType::Float32, &[2])
        .var_len_sequence("ids", DType::Int64)
        .require("frames");
    let p = Pipeline::from_files([testdata("sequence.tfrecord")])
        .unwrap()
        .parse_sequence(sequence.clone())
        .batch(3, false);
    let read = Description::from_json(&p.describe().to_json()).unwrap();
    let (_, made) = read.parse.as_ref().unwrap().specs().unwrap();
    assert_eq!(made, Some(sequence));
    // The text form the command line takes reads as the same spec.
    let text = r#"{"version": 1, "source": {"files": ["x"]},
        "parse": {"features": "input_ids:var_len:int64,attention_mask:var_len:int64"}}"#;
    let d = Description::from_json(text).unwrap();
    assert_eq!(d.parse.unwrap().specs().unwrap().0, lm_spec());
}

#[test]
fn a_mixture_is_described_with_its_sources_and_made_again() {
    let source = |skip| lm().skip(skip).take(100).repeat(None).shuffle(8);
    let p = Pipeline::mix([("web", source(0)), ("code", source(100))], &[3.0, 1.0])
        .unwrap()
        .seed(4)
        .mix_by(MixChoice::Stratified)
        .on_exhausted(OnExhausted::Drop)
        .parse(lm_spec())
        .max_length(512)
        .batch(8, true);
    let d = round_trip(&p);
    let infeed::pipeline::description::Source::Mix(mix) = &d.source else {
        panic!("not a mixture: {:?}", d.source)
    };
    assert_eq!(mix.sources[1].name, "code");
    assert_eq!(
        mix.sources[1].pipeline.records[0],
        RecordStep::Skip { records: 100 }
    );
    assert_eq!(
        (mix.by, mix.on_exhausted),
        (MixChoice::Stratified, OnExhausted::Drop)
    );
}

#[test]
fn user_code_is_named_and_refused_where_the_description_runs_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 4, 5]]);
    let p = Pipeline::from_files(files)
        .unwrap()
        .filter(|r| !r.is_empty())
        .parse(spec())
        .filter_rows(|_, _| true)
        .max_length(8)
        .batch(2, false);
    let d = p.describe();
    let closure = Callable {
        callable: "rust closure".into(),
    };
    assert_eq!(d.records, [RecordStep::Filter(closure.clone())]);
    assert_eq!(d.batches[0], BatchStep::FilterRows(closure));
    assert_eq!(
        d.callables(),
        [("filter", "rust closure"), ("filter_rows", "rust closure")]
    );
    let Err(PipelineError::Description(message)) = ParsedPipeline::from_description(&d) else {
        panic!("made a pipeline whose user code it does not hold")
    };
    assert!(
        message.contains("user code (\"rust closure\")"),
        "{message}"
    );
}

#[test]
fn bad_descriptions_are_refused_by_place_version_or_shape() {
    let refused = |text: &str| match Description::from_json(text) {
        Err(PipelineError::Description(message)) => message,
        other => panic!("{text}: {other:?}"),
    };
    let source = r#""source": {"files": ["x"]}"#;
    assert_eq!(
        refused(&format!(
            r#"{{"version": 1, {source}, "records": [{{"shuffle": {{"buffer": -1}}}}]}}"#
        )),
        "records[0].shuffle.buffer: invalid value: integer `-1`, expected usize"
    );
    assert_eq!(
        refused(&format!(
            r#"{{"version": 1, {source}, "batches": [{{"cast": {{"dtype": "int8"}}}}]}}"#
        )),
        "batches[0].cast.dtype: dtype \"int8\": expected int64, int32, float32, uint8 or bfloat16"
    );
    assert!(
        refused(&format!(r#"{{"version": 1, {source}, "shuffle": 3}}"#))
            .starts_with("shuffle: unknown field `shuffle`"),
    );
    assert_eq!(
        refused(&format!(r#"{{"version": 2, {source}}}"#)),
        "version 2: this infeed reads descriptions of versions 1 to 1"
    );
    // A record-level pipeline takes no parse; a parsed one needs it.
    let parsed = lm().parse(lm_spec()).batch(2, true).describe();
    assert!(matches!(
        Pipeline::from_description(&parsed),
        Err(PipelineError::Description(_))
    ));
    assert!(matches!(
        ParsedPipeline::from_description(&lm().describe()),
        Err(PipelineError::Description(_))
    ));
    // A bad spec names its feature.
    let text = format!(
        r#"{{"version": 1, {source}, "parse": {{"features": [{{"name": "x", "kind": "var_len", "dtype": "int8"}}]}}}}"#
    );
    let Err(PipelineError::Spec { feature, .. }) =
        ParsedPipeline::from_description(&Description::from_json(&text).unwrap())
    else {
        panic!("a bad dtype made a spec")
    };
    assert_eq!(feature.as_deref(), Some("x"));
}

/// A record step of any kind, with any values.
fn record_step() -> impl Strategy<Value = RecordStep> {
    prop_oneof![
        Just(RecordStep::ShuffleFiles {}),
        (1usize..9, 1usize..9).prop_map(|(cycle_length, block_length)| RecordStep::Interleave {
            cycle_length,
            block_length
        }),
        any::<u64>().prop_map(|records| RecordStep::Skip { records }),
        any::<u64>().prop_map(|records| RecordStep::Take { records }),
        proptest::option::of(any::<u64>())
            .prop_map(|block_bytes| RecordStep::GlobalShuffle { block_bytes }),
        any::<usize>().prop_map(|buffer| RecordStep::Shuffle { buffer }),
        proptest::option::of(any::<u64>()).prop_map(|epochs| RecordStep::Repeat { epochs }),
        "[a-z]{1,8}".prop_map(|callable| RecordStep::Map(Callable { callable })),
    ]
}

/// A batch step of any kind, with any values.
fn batch_step() -> impl Strategy<Value = BatchStep> {
    let word = |words: &'static [&'static str]| proptest::sample::select(words);
    prop_oneof![
        (any::<usize>(), any::<bool>()).prop_map(|(size, drop_remainder)| BatchStep::Batch {
            size,
            drop_remainder
        }),
        any::<usize>().prop_map(|multiple| BatchStep::PadToMultipleOf { multiple }),
        word(&["error", "keep_start", "keep_end"]).prop_map(|w| BatchStep::Truncation {
            policy: w.parse().unwrap()
        }),
        (
            "[a-z]{1,6}",
            word(&["auto", "u8", "i32", "i64", "f32", "none"])
        )
            .prop_map(|(feature, w)| BatchStep::Mask {
                feature,
                mask: w.parse().unwrap()
            }),
        word(&["int64", "int32", "float32", "uint8", "bfloat16"]).prop_map(|w| BatchStep::Cast {
            dtype: w.parse().unwrap()
        }),
        (
            "[a-z]{1,6}",
            proptest::collection::vec(-1e6f32..1e6, 1..4),
            proptest::collection::vec(1e-3f32..1e3, 1..4)
        )
            .prop_map(|(feature, mean, std)| BatchStep::Normalize {
                feature,
                mean,
                std,
                dtype: TensorType::BF16
            }),
        (any::<i64>()).prop_map(|bos| BatchStep::InputsTargets {
            feature: "ids".into(),
            bos
        }),
        (
            proptest::collection::vec(any::<usize>(), 0..4),
            proptest::collection::vec(any::<usize>(), 0..5)
        )
            .prop_map(|(boundaries, batch_sizes)| BatchStep::BucketByLength {
                feature: "ids".into(),
                boundaries,
                batch_sizes
            }),
        word(&["error", "keep_start", "keep_end", "split"]).prop_map(|w| BatchStep::PackOverflow {
            overflow: w.parse().unwrap()
        }),
        word(&["first_fit", "best_fit", "concat_split"]).prop_map(|w| BatchStep::PackStrategy {
            strategy: w.parse().unwrap()
        }),
        ("[a-z ./]{1,12}", any::<bool>(), any::<bool>()).prop_map(
            |(tokenizer, add_bos, add_eos)| BatchStep::Tokenize {
                feature: "text".into(),
                tokenizer,
                add_bos,
                add_eos
            }
        ),
    ]
}

proptest! {
    /// Any description reads back from its JSON as itself.
    #[test]
    fn any_description_reads_back_as_itself(
        records in proptest::collection::vec(record_step(), 0..8),
        batches in proptest::collection::vec(batch_step(), 0..8),
        seed in any::<u64>(),
        shard in proptest::option::of((any::<u64>(), any::<u64>())),
        skip_steps in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..3),
    ) {
        let mut d = lm().parse(lm_spec()).describe();
        d.records = records;
        d.batches = batches;
        d.options.seed = seed;
        d.options.shard = shard;
        d.options.skip_steps = skip_steps;
        prop_assert_eq!(Description::from_json(&d.to_json()).unwrap(), d);
    }
}

/// The error a pipeline's start gives, which must be one.
fn start_error(p: &ParsedPipeline) -> PipelineError {
    match p.build() {
        Err(e) => e,
        Ok(_) => panic!("{:?} started", p.describe()),
    }
}

#[test]
fn a_word_without_what_it_modifies_is_refused_when_the_pipeline_starts() {
    let e = start_error(
        &lm()
            .mix_by(MixChoice::Stratified)
            .parse(lm_spec())
            .batch(2, true),
    );
    assert_eq!(
        e.to_string(),
        "invalid pipeline: mix_by on a pipeline that is not a mixture (Pipeline::mix makes one)"
    );
    let e = start_error(
        &lm()
            .parse(lm_spec())
            .pack_overflow(Overflow::Split)
            .batch(2, true),
    );
    assert_eq!(
        e.to_string(),
        "invalid pipeline: pack_overflow without pack: it says how pack(row_length) packs"
    );
    // Given before pack, a modifier is not refused.
    let p = lm()
        .parse(lm_spec())
        .pack_overflow(Overflow::Split)
        .pack(128)
        .batch(2, true);
    assert!(p.build().is_ok());
}

#[test]
fn a_zero_is_refused_unless_it_means_something() {
    let parsed = parsed_lm;
    let refused = [
        (lm().threads(0), "threads = 0: at least 1"),
        (lm().prefetch(0), "prefetch = 0: at least 1"),
        (
            lm().interleave(0, 1),
            "interleave cycle_length = 0: at least 1",
        ),
        (
            lm().interleave(2, 0),
            "interleave block_length = 0: at least 1",
        ),
        (
            lm().global_shuffle_blocks(0),
            "global_shuffle block_bytes = 0: at least 1",
        ),
        (
            lm().repeat(Some(0)),
            "repeat = 0: at least 1 epoch (none: forever)",
        ),
    ];
    for (p, message) in refused {
        let e = start_error(&parsed(p));
        assert_eq!(e.to_string(), format!("invalid setting: {message}"));
    }
    // No shuffle: the records in file order.
    let plain = parsed(lm());
    assert_eq!(digests(&parsed(lm().shuffle(0)), 64), digests(&plain, 64));
}

#[test]
fn every_size_past_its_limit_is_refused_by_its_step_naming_the_limit() {
    let parsed = parsed_lm;
    let read = |r: ReadOptions| lm().read_options(r);
    let source = |s: SourceOptions| lm().source_options(s);
    let refused = [
        (parsed(lm().threads(1025)), "threads = 1025: at most 1024"),
        (parsed(lm().prefetch(4097)), "prefetch = 4097: at most 4096"),
        (
            parsed(lm().interleave(4097, 1)),
            "interleave = 4097: at most 4096",
        ),
        (
            parsed(read(ReadOptions::default().chunk_size((1 << 30) + 1))),
            "read chunk_size = 1073741825: at most 1073741824",
        ),
        (
            parsed(source(SourceOptions::default().readahead(257))),
            "readahead = 257: at most 256",
        ),
        (
            parsed(source(SourceOptions::default().chunk_size(0))),
            "source chunk_size = 0: at least 1",
        ),
        (
            lm().parse(lm_spec())
                .max_length(512)
                .batch((1 << 24) + 1, true),
            "batch = 16777217: at most 16777216",
        ),
        (
            lm().parse(lm_spec())
                .bucket_by_length("input_ids", &[64], &[8, (1 << 24) + 1])
                .max_length(512),
            "bucket batch size = 16777217: at most 16777216",
        ),
        (
            lm().parse(lm_spec())
                .filter_length("input_ids", 9, 3)
                .max_length(512)
                .batch(8, true),
            "filter_length = 9..=3: min at most max",
        ),
    ];
    for (p, message) in refused {
        let e = start_error(&p);
        assert_eq!(e.to_string(), format!("invalid setting: {message}"));
        // The same value refused by the same check when the description
        // is read back and run.
        let again = ParsedPipeline::from_description(&p.describe()).unwrap();
        assert_eq!(start_error(&again).to_string(), e.to_string());
    }
}

/// `p` parsed into the lm's padded batches.
fn parsed_lm(p: Pipeline) -> ParsedPipeline {
    p.parse(lm_spec()).max_length(512).batch(64, true)
}

#[test]
fn limits_that_multiply_are_checked_together() {
    // 64 streams on one host, each reading 64 files at once and opening
    // the next: 4 160 shard threads.
    let e = start_error(&parsed_lm(lm().streams(64).interleave(64, 1)));
    assert_eq!(
        e.to_string(),
        "invalid setting: shard threads (streams per host × (interleave + 1)) = 4160: at most 4096"
    );
    // Each alone is within its limit.
    assert!(parsed_lm(lm().streams(64)).build().is_ok());
    assert!(parsed_lm(lm().interleave(64, 1)).build().is_ok());
}

#[test]
fn values_json_has_no_number_for_round_trip_too() {
    // Defaults of NaN and infinities, bytes that are no UTF-8; a bf16 mask;
    // a SequenceExample with no context features; an empty mix schedule
    // (refused when it starts, before and after the round trip alike).
    let spec = FeatureSpec::new()
        .fixed_len_with_default(
            "score",
            DType::Float32,
            &[3],
            DefaultValue::Float32(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY]),
        )
        .unwrap()
        .fixed_len_with_default(
            "raw",
            DType::Bytes,
            &[],
            DefaultValue::Bytes(vec![vec![0xff, 0]]),
        )
        .unwrap();
    let p = lm()
        .parse(spec.clone())
        .masks(MaskType::Type(TensorType::BF16))
        .batch(2, true);
    let read = Description::from_json(&p.describe().to_json()).unwrap();
    let (made, _) = read.parse.as_ref().unwrap().specs().unwrap();
    // NaN is not equal to itself: compare the values' bits.
    let bits = |s: &FeatureSpec| format!("{:?}", s).replace("NaN", "nan");
    assert_eq!(bits(&made), bits(&spec));
    assert_eq!(
        read.batches[0],
        BatchStep::Masks {
            mask: MaskType::Type(TensorType::BF16)
        }
    );
    let lists =
        SequenceSpec::new(FeatureSpec::new()).fixed_len_sequence("frames", DType::Float32, &[2]);
    let p = Pipeline::from_files([testdata("sequence.tfrecord")])
        .unwrap()
        .parse_sequence(lists)
        .max_length(8)
        .batch(3, false);
    let again = ParsedPipeline::from_description(&p.describe()).unwrap();
    assert_eq!(digests(&again, 4), digests(&p, 4));
    let mixed = Pipeline::mix([("a", lm()), ("b", lm())], &[1.0, 1.0])
        .unwrap()
        .mix_schedule(&[], false)
        .parse(lm_spec())
        .max_length(512)
        .batch(2, true);
    let again = ParsedPipeline::from_description(&mixed.describe()).unwrap();
    let (a, b) = (start_error(&mixed), start_error(&again));
    assert_eq!(a.to_string(), b.to_string());
}

#[test]
fn a_description_runs_again_on_the_files_its_globs_listed() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        std::fs::copy(
            testdata("lm-sample.tfrecord"),
            dir.path().join(format!("{name}.tfrecord")),
        )
        .unwrap();
    }
    let pattern = format!("{}/*.tfrecord", dir.path().display());
    let glob = Pipeline::from_glob(&pattern).unwrap();
    let listed = glob.listed();
    let files: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{}/{n}.tfrecord", dir.path().display()))
        .collect();
    assert_eq!(listed.get(&pattern), Some(&files));
    // A shard that appears after the listing is not read: the description
    // runs on what was listed, and keeps its glob.
    std::fs::copy(
        testdata("lm-sample.tfrecord"),
        dir.path().join("d.tfrecord"),
    )
    .unwrap();
    let again = Pipeline::from_description_listed(&glob.describe(), &listed).unwrap();
    assert_eq!(again.describe(), glob.describe());
    assert_eq!(again.files(), files.as_slice());
    assert_eq!(
        Pipeline::from_description(&glob.describe())
            .unwrap()
            .files()
            .len(),
        4
    );
    // So does a pipeline that parses: as many batches as three files give.
    let parsed = glob
        .clone()
        .parse(lm_spec())
        .pad_to_multiple_of(64)
        .max_length(512)
        .batch(8, false);
    let d = parsed.describe();
    let count = |p: ParsedPipeline| p.build().unwrap().count();
    let listed_count = count(ParsedPipeline::from_description_listed(&d, &listed).unwrap());
    assert_eq!(listed_count, count(parsed));
    let relisted = count(ParsedPipeline::from_description(&d).unwrap());
    assert!(relisted > listed_count, "{relisted} {listed_count}");
    // A mixture's globbed sources are listed by their patterns.
    let mix = Pipeline::mix([("g", glob.clone()), ("plain", lm())], &[1.0, 1.0]).unwrap();
    assert_eq!(mix.listed(), listed);
    let d = mix.describe();
    let again = Pipeline::from_description_listed(&d, &listed).unwrap();
    assert_eq!(again.files().len(), files.len() + 1);
}
