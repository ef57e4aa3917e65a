//! tokenize on the workers: token ids equal to the Python `tokenizers` and
//! `sentencepiece` packages' (testdata/tokenizer/expected*.jsonl, written by
//! those packages), bos and eos as asked, packing of the ids, exact
//! restores, a fingerprint that follows the tokenizer's bytes, and errors
//! that name the file or the feature.

use super::grouping::{digests, digests_then_state};
use crate::support::testdata;
use infeed::example::proto::{Example, Feature};
use infeed::pipeline::{ParsedPipeline, Pipeline, PipelineError};
use infeed::record::Compression;
use infeed::spec::{DType, FeatureSpec};
use infeed::text::TokenizerError;
use prost::Message;
use serde_json::Value;

fn expected(name: &str) -> Vec<Value> {
    std::fs::read_to_string(testdata(&format!("tokenizer/{name}")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// corpus.txt's lines as records of one `text` feature, in one file.
fn corpus_file(dir: &std::path::Path) -> (String, Vec<String>) {
    texts_file(dir, "expected.jsonl")
}

/// The texts of `expected` (a file of testdata/tokenizer/) as records of one
/// `text` feature, in one file.
fn texts_file(dir: &std::path::Path, expected_file: &str) -> (String, Vec<String>) {
    let lines: Vec<String> = expected(expected_file)
        .iter()
        .map(|r| r["text"].as_str().unwrap().to_owned())
        .collect();
    let records = lines.iter().map(|l| {
        Example::from_features([("text", Feature::bytes([l.as_bytes().to_vec()]))]).encode_to_vec()
    });
    let path = dir.join("corpus.tfrecord");
    let path = crate::support::tfrecord::write_file(&path, records, Compression::None);
    (path, lines)
}

fn text_spec() -> FeatureSpec {
    FeatureSpec::new().fixed_len("text", DType::Bytes, &[])
}

fn tokenized(file: &str, tokenizer: &str, bos: bool, eos: bool) -> ParsedPipeline {
    Pipeline::from_files(vec![file.to_owned()])
        .unwrap()
        .threads(2)
        .parse(text_spec())
        .tokenize("text", tokenizer, bos, eos)
}

/// Every real row's ids (the mask's 1s), in order.
fn token_rows(p: ParsedPipeline) -> Vec<Vec<i64>> {
    token_rows_up_to(p, 128)
}

/// As [`token_rows`], rows of up to `max_length` ids.
fn token_rows_up_to(p: ParsedPipeline, max_length: usize) -> Vec<Vec<i64>> {
    let mut out = Vec::new();
    for batch in p.max_length(max_length).batch(7, false).build().unwrap() {
        let batch = batch.unwrap();
        let ids = batch["text"].values::<i32>().unwrap();
        let mask = batch["text_mask"].values::<i32>().unwrap();
        let len = batch["text"].shape()[1];
        for r in 0..batch.real_rows {
            let row = (r * len..(r + 1) * len).filter(|&i| mask[i] == 1);
            out.push(row.map(|i| i64::from(ids[i])).collect());
        }
    }
    out
}

#[test]
fn a_tokenizer_json_gives_the_tokenizers_packages_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = corpus_file(dir.path());
    let tokenizer = testdata("tokenizer/tokenizer.json").display().to_string();
    // expected.jsonl: the package's encode(line) with special tokens, <s> … </s>.
    let want: Vec<Vec<i64>> = expected("expected.jsonl")
        .iter()
        .map(|r| ids(&r["input_ids"]))
        .collect();
    assert_eq!(token_rows(tokenized(&file, &tokenizer, true, true)), want);
    // Without bos: the ids after <s>; without either: the plain ids.
    let no_bos: Vec<Vec<i64>> = want.iter().map(|w| w[1..].to_vec()).collect();
    assert_eq!(
        token_rows(tokenized(&file, &tokenizer, false, true)),
        no_bos
    );
    let plain: Vec<Vec<i64>> = want.iter().map(|w| w[1..w.len() - 1].to_vec()).collect();
    assert_eq!(
        token_rows(tokenized(&file, &tokenizer, false, false)),
        plain
    );
}

#[cfg(feature = "sentencepiece")]
#[test]
fn sentencepiece_models_give_the_sentencepiece_packages_ids() {
    // corpus.txt's lines, then texts with runs of one character (URLs,
    // digits, rules of `=`), alone and in documents of several lines, which
    // spm-runs splits into pieces of equal total score two ways.
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = texts_file(dir.path(), "expected-spm.jsonl");
    let rows = expected("expected-spm.jsonl");
    assert!(rows.len() > 40, "{} rows", rows.len());
    for model in ["spm-unigram", "spm-bpe", "spm-runs"] {
        let tokenizer = testdata(&format!("tokenizer/{model}.model"))
            .display()
            .to_string();
        // expected-spm.jsonl: encode(text, add_bos=True, add_eos=True).
        let want: Vec<Vec<i64>> = rows.iter().map(|r| ids(&r[model])).collect();
        assert_eq!(
            token_rows_up_to(tokenized(&file, &tokenizer, true, true), 512),
            want,
            "{model}"
        );
        let plain: Vec<Vec<i64>> = want.iter().map(|w| w[1..w.len() - 1].to_vec()).collect();
        assert_eq!(
            token_rows_up_to(tokenized(&file, &tokenizer, false, false), 512),
            plain,
            "{model}"
        );
    }
}

#[test]
fn tokenized_text_packs_and_every_state_restores_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = corpus_file(dir.path());
    let tokenizer = testdata("tokenizer/tokenizer.json").display().to_string();
    let packed = || {
        Pipeline::from_files(vec![file.clone()])
            .unwrap()
            .shuffle(8)
            .seed(3)
            .repeat(Some(2))
            .threads(3)
            .parse(text_spec())
            .tokenize("text", &tokenizer, true, true)
            .pack(64)
            .pack_overflow(infeed::batch::Overflow::Split)
            .batch(4, false)
    };
    let full = digests(packed().build().unwrap());
    assert!(full.len() > 4, "{} batches", full.len());
    // Every token of both epochs is in a row: 2 × the corpus's ids.
    let tokens: usize = packed()
        .build()
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            let seg = b["segment_ids"].values::<i32>().unwrap().to_vec();
            seg.iter().filter(|&&s| s > 0).count()
        })
        .sum();
    let corpus: usize = expected("expected.jsonl")
        .iter()
        .map(|r| ids(&r["input_ids"]).len())
        .sum();
    assert_eq!(tokens, 2 * corpus);
    for k in 0..full.len() {
        let (head, state) = digests_then_state(packed().build().unwrap(), k);
        assert_eq!(head, full[..k]);
        let rest = digests(packed().resume_from(&state).build().unwrap());
        assert_eq!(rest, full[k..], "restored after {k} batches");
    }
}

#[test]
fn the_fingerprint_follows_the_tokenizers_bytes_not_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = corpus_file(dir.path());
    let original = testdata("tokenizer/tokenizer.json");
    let copy = dir.path().join("copy.json");
    std::fs::copy(&original, &copy).unwrap();
    let run = |tokenizer: &std::path::Path| {
        tokenized(&file, &tokenizer.display().to_string(), false, true)
            .max_length(128)
            .batch(4, false)
    };
    let full = digests(run(&original).build().unwrap());
    let (_, state) = digests_then_state(run(&original).build().unwrap(), 2);
    // The same bytes elsewhere: the state continues.
    assert_eq!(
        digests(run(&copy).resume_from(&state).build().unwrap()),
        full[2..]
    );
    // Other bytes (a changed vocabulary): refused.
    let text = std::fs::read_to_string(&original).unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, text.replacen("\"<pad>\"", "\"<PAD>\"", 1)).unwrap();
    match run(&other).resume_from(&state).build() {
        Err(PipelineError::BadState(_)) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a state of another tokenizer was taken"),
    }
    // Without eos: another pipeline too.
    let no_eos = tokenized(&file, &original.display().to_string(), false, false)
        .max_length(128)
        .batch(4, false);
    assert!(matches!(
        no_eos.resume_from(&state).build(),
        Err(PipelineError::BadState(_))
    ));
}

#[test]
fn errors_name_the_tokenizer_or_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = corpus_file(dir.path());
    let build = |p: ParsedPipeline| p.max_length(8).batch(2, false).build().err().unwrap();

    let missing = dir.path().join("nope.json").display().to_string();
    match build(tokenized(&file, &missing, false, true)) {
        PipelineError::Tokenizer(TokenizerError::Read { path, .. }) => assert_eq!(path, missing),
        e => panic!("{e}"),
    }

    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{\"model\": 7}").unwrap();
    let garbage = garbage.display().to_string();
    let e = build(tokenized(&file, &garbage, false, true));
    assert!(
        matches!(&e, PipelineError::Tokenizer(TokenizerError::Load { path, kind, .. })
            if *path == garbage && *kind == "Hugging Face tokenizer.json"),
        "{e}"
    );
    assert!(e.to_string().starts_with(&format!(
        "tokenizer {garbage}: cannot load it as a Hugging Face tokenizer.json: "
    )));

    // A tokenizer.json whose post-processor adds nothing has no bos or eos.
    let mut json: Value =
        serde_json::from_slice(&std::fs::read(testdata("tokenizer/tokenizer.json")).unwrap())
            .unwrap();
    json["post_processor"] = Value::Null;
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, json.to_string()).unwrap();
    let bare = bare.display().to_string();
    let e = build(tokenized(&file, &bare, false, true));
    assert_eq!(
        e.to_string(),
        format!(
            "tokenizer {bare} has no end-of-sequence token (its post-processor adds none): \
             tokenize without add_eos"
        )
    );
    assert_eq!(token_rows(tokenized(&file, &bare, false, false)).len(), 30);

    let tokenizer = testdata("tokenizer/tokenizer.json").display().to_string();
    let numbers = Pipeline::from_files(vec![file.clone()])
        .unwrap()
        .parse(FeatureSpec::new().var_len("text", DType::Int64))
        .tokenize("text", &tokenizer, false, true);
    assert_eq!(
        build(numbers).to_string(),
        "invalid pipeline: tokenize: feature \"text\" is int64: it takes a text (bytes) feature"
    );
    let unknown = Pipeline::from_files(vec![file.clone()])
        .unwrap()
        .parse(text_spec())
        .tokenize("body", &tokenizer, false, true);
    assert!(matches!(
        build(unknown),
        PipelineError::Plan(infeed::batch::PlanError::UnknownFeature { feature }) if feature == "body"
    ));
}
