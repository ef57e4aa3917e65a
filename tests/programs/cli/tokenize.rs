//! `infeed bench --tokenize FEATURE:TOKENIZER`: text tokenized on the
//! workers into the shapes a padded plan promises, and a tokenizer that
//! cannot load named in the error.

use crate::support::run::{bench_json, infeed};
use infeed::example::proto::{Example, Feature};
use infeed::record::Compression;
use prost::Message;

/// corpus.txt's 30 lines as records of a `text` feature.
fn corpus(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(crate::support::testdata("tokenizer/corpus.txt")).unwrap();
    let records = text.lines().map(|l| {
        Example::from_features([("text", Feature::bytes([l.as_bytes().to_vec()]))]).encode_to_vec()
    });
    crate::support::tfrecord::write_file(&dir.join("corpus.tfrecord"), records, Compression::None)
}

#[test]
fn tokenize_pads_the_ids_to_the_promised_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let file = corpus(dir.path());
    let run = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            &file,
            "--spec",
            "text:fixed_len[]:string",
            "--tokenize",
            "text:testdata/tokenizer/tokenizer.json",
            "--pad-to-multiple-of",
            "16",
            "--max-length",
            "64",
            "--batch",
            "8",
            "--digests",
        ];
        args.extend_from_slice(extra);
        bench_json(&args)
    };
    let json = run(&[]);
    assert_eq!(json["records"], 30);
    assert_eq!(json["batches"], 4);
    // The ids, padded by the plan: each batch [8, 16], [8, 32], [8, 48] or [8, 64].
    let shapes = json["shapes"].as_array().unwrap();
    assert!(!shapes.is_empty());
    for shape in shapes {
        let len = shape["text"][1].as_u64().unwrap();
        assert!([16, 32, 48, 64].contains(&len), "{shape}");
        assert_eq!(shape["text"], serde_json::json!([8, len]));
        assert_eq!(shape["text_mask"], serde_json::json!([8, len]));
    }
    // bos changes the ids, so the digests.
    assert_ne!(run(&["--add-bos"])["digests"], json["digests"]);
    assert_eq!(run(&[])["digests"], json["digests"]);
}

#[test]
fn a_tokenizer_that_does_not_load_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = corpus(dir.path());
    let out = infeed(&[
        "bench",
        &file,
        "--spec",
        "text:fixed_len[]:string",
        "--tokenize",
        "text:testdata/tokenizer/corpus.txt",
        "--max-length",
        "64",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // Not JSON, so taken for a SentencePiece model: refused by the library,
    // or by a build without it.
    let why = if cfg!(feature = "sentencepiece") {
        "tokenizer testdata/tokenizer/corpus.txt: cannot load it as a SentencePiece model"
    } else {
        "tokenizer testdata/tokenizer/corpus.txt is a SentencePiece model: this build of \
         infeed cannot load one (cargo feature `sentencepiece`)"
    };
    assert!(err.contains(why), "{err}");
}
