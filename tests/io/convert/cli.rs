//! `infeed convert` end to end: every input format and compression, schema
//! inference and overrides, naming, sharding, the manifest, tokenization,
//! the task split, reruns, and bad input.

use crate::support::run::infeed;
use crate::support::tfrecord::read_file;
use crate::support::{listing, repo};
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `infeed convert ARGS… --output OUT -q`, asserting success; gives stdout.
fn convert(out: &Path, args: &[&str]) -> String {
    let mut all: Vec<String> = vec!["convert".into()];
    all.extend(args.iter().map(|s| s.to_string()));
    all.extend(["--output".into(), out.display().to_string(), "-q".into()]);
    let o = infeed(&all);
    assert!(
        o.status.success(),
        "convert {args:?} failed: {}",
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// Runs `infeed convert` expecting failure; gives stderr.
fn convert_err(out: &Path, args: &[&str]) -> String {
    let mut all: Vec<String> = vec!["convert".into()];
    all.extend(args.iter().map(|s| s.to_string()));
    all.extend(["--output".into(), out.display().to_string(), "-q".into()]);
    let o = infeed(&all);
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected failure for {args:?}: {}",
        text(&o.stdout)
    );
    text(&o.stderr)
}

/// The indexes of a conversion into three shards named `train`.
const THREE_INDEXES: [&str; 3] = [
    "train-00000-of-00003.tfrecord.index",
    "train-00001-of-00003.tfrecord.index",
    "train-00002-of-00003.tfrecord.index",
];

/// The files in `dir`'s index folder (`.infeed-index`), sorted by name.
pub fn indexes(dir: &Path) -> Vec<String> {
    listing(&dir.join(".infeed-index"))
}

/// Shard files in `dir`, sorted by name.
pub fn shards(dir: &Path) -> Vec<PathBuf> {
    listing(dir)
        .into_iter()
        .filter(|n| n.contains(".tfrecord") && !n.starts_with('.') && !n.ends_with(".index"))
        .map(|n| dir.join(n))
        .collect()
}

/// `infeed cat` of the files, as JSON values.
fn cat(files: &[PathBuf]) -> Vec<Value> {
    if files.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["cat".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let o = infeed(&args);
    assert!(o.status.success(), "cat: {}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn manifest(dir: &Path, name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join(name)).expect("manifest"))
        .expect("manifest json")
}

fn b64(s: &str) -> Value {
    Value::String(BASE64.encode(s.as_bytes()))
}

fn f(x: f32) -> Value {
    json!(f64::from(x))
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The records of testdata/convert/sample.jsonl as `infeed cat` prints them.
fn sample_expected() -> Vec<Value> {
    vec![
        json!({"id": {"int64": [1]}, "label": {"int64": [0]}, "score": {"float": [f(0.5)]},
               "text": {"bytes": [b64("The quick brown fox.")]}, "tokens": {"int64": [5, 7, 11]},
               "tags": {"bytes": [b64("animal"), b64("fast")]}}),
        json!({"id": {"int64": [2]}, "label": {"int64": [1]}, "score": {"float": [f(-1.25)]},
               "text": {"bytes": [b64("Grüße aus Köln")]}, "tokens": {"int64": []}, "tags": {"bytes": []}}),
        json!({"id": {"int64": [3]}, "label": {"int64": [1]}, "score": {"float": [f(3.0)]},
               "text": {"bytes": [b64("")]}, "tokens": {"int64": [i64::MAX, i64::MIN]},
               "tags": {"bytes": [b64("edge")]}}),
        json!({"id": {"int64": [4]}, "label": {"int64": [0]}, "score": {"float": [f(0.1)]},
               "text": {"bytes": [b64("line with \"quotes\" and a\nnewline")]}, "tokens": {"int64": [0]},
               "tags": {"bytes": [b64("a"), b64("b"), b64("c")]}}),
        json!({"id": {"int64": [5]}, "label": {"int64": [1]}, "score": {"float": [f(0.001)]},
               "text": {"bytes": [b64("東京")]}, "tokens": {"int64": [42, 42]}, "tags": {"bytes": [b64("x")]}}),
    ]
}

#[test]
fn jsonl_round_trips_through_cat_exactly() {
    let out = tmp();
    let stdout = convert(out.path(), &["testdata/convert/sample.jsonl"]);
    assert!(
        stdout.starts_with("converted 5 records into 5 records in 1 shards"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "spec: id:fixed_len[]:int64,label:fixed_len[]:int64,score:fixed_len[]:float,tags:var_len:string,text:fixed_len[]:string,tokens:var_len:int64"
        ),
        "{stdout}"
    );
    // The shard, the manifest, and the shard's index (what random access
    // reads) in a folder of its own, where no glob of shards reaches it.
    assert_eq!(
        listing(out.path()),
        vec![
            ".infeed-index",
            "train-00000-of-00001.tfrecord",
            "train.manifest.json"
        ]
    );
    assert_eq!(
        indexes(out.path()),
        vec!["train-00000-of-00001.tfrecord.index"]
    );
    assert_eq!(cat(&shards(out.path())), sample_expected());
}

#[test]
fn same_input_gives_the_same_bytes_whatever_the_thread_count() {
    let (a, b) = (tmp(), tmp());
    convert(
        a.path(),
        &["testdata/convert/sample.jsonl", "--threads", "1"],
    );
    convert(
        b.path(),
        &["testdata/convert/sample.jsonl", "--threads", "7"],
    );
    let read = |d: &Path| std::fs::read(d.join("train-00000-of-00001.tfrecord")).expect("shard");
    assert_eq!(read(a.path()), read(b.path()));
}

#[test]
fn csv_and_tsv_with_quotes_line_breaks_and_blank_lines() {
    let expected: Vec<Value> = sample_expected()
        .into_iter()
        .enumerate()
        .map(|(i, mut v)| {
            let obj = v.as_object_mut().expect("object");
            obj.remove("tokens");
            obj.remove("tags");
            if i == 1 {
                obj.insert("text".into(), json!({"bytes": [b64("Grüße, aus Köln")]}));
            }
            v
        })
        .collect();
    let out = tmp();
    convert(out.path(), &["testdata/convert/sample.csv"]);
    assert_eq!(cat(&shards(out.path())), expected);
    let m = manifest(out.path(), "train.manifest.json");
    assert_eq!(
        m["spec"],
        "id:fixed_len[]:int64,label:fixed_len[]:int64,score:fixed_len[]:float,text:fixed_len[]:string"
    );

    // The same as TSV.
    let dir = tmp();
    let tsv = dir.path().join("sample.tsv");
    std::fs::write(&tsv, "id\tlabel\ttext\n1\t0\ta,b\n2\t1\t\"c\td\"\n").expect("write");
    let out = tmp();
    convert(out.path(), &[tsv.to_str().expect("path")]);
    assert_eq!(
        cat(&shards(out.path())),
        vec![
            json!({"id": {"int64": [1]}, "label": {"int64": [0]}, "text": {"bytes": [b64("a,b")]}}),
            json!({"id": {"int64": [2]}, "label": {"int64": [1]}, "text": {"bytes": [b64("c\td")]}}),
        ]
    );
}

#[test]
fn columns_keep_rename_and_features_override() {
    let out = tmp();
    let stdout = convert(
        out.path(),
        &[
            "testdata/convert/sample.jsonl",
            "--columns",
            "tokens=input_ids,label",
            "--feature",
            "label:float",
        ],
    );
    assert!(
        stdout.contains("spec: input_ids:var_len:int64,label:fixed_len[]:float\n"),
        "{stdout}"
    );
    let got = cat(&shards(out.path()));
    assert_eq!(
        got[0],
        json!({"input_ids": {"int64": [5, 7, 11]}, "label": {"float": [f(0.0)]}})
    );
    assert_eq!(
        got[2],
        json!({"input_ids": {"int64": [i64::MAX, i64::MIN]}, "label": {"float": [f(1.0)]}})
    );
    // A fixed-length list is checked record by record.
    let err = convert_err(
        out.path(),
        &[
            "testdata/convert/sample.jsonl",
            "--columns",
            "tags",
            "--feature",
            "tags:bytes[2]",
        ],
    );
    assert_eq!(
        err.trim_end(),
        "infeed: testdata/convert/sample.jsonl: line 2: column \"tags\": expected a list of 2 values, found 0"
    );
}

#[test]
fn plain_text_lines_and_files() {
    let dir = tmp();
    std::fs::write(dir.path().join("a.txt"), "first line\r\n\nthird\n").expect("write");
    std::fs::write(dir.path().join("b.txt"), "no newline at end").expect("write");
    let glob = format!("{}/*.txt", dir.path().display());
    let out = tmp();
    convert(out.path(), &[&glob]);
    let lines = ["first line", "", "third", "no newline at end"];
    assert_eq!(
        cat(&shards(out.path())),
        lines
            .iter()
            .map(|l| json!({"text": {"bytes": [b64(l)]}}))
            .collect::<Vec<_>>()
    );
    let out = tmp();
    convert(
        out.path(),
        &[&glob, "--text-mode", "file", "--text-column", "doc"],
    );
    assert_eq!(
        cat(&shards(out.path())),
        vec![
            json!({"doc": {"bytes": [b64("first line\r\n\nthird\n")]}}),
            json!({"doc": {"bytes": [b64("no newline at end")]}}),
        ]
    );
}

#[test]
fn compressed_inputs_gzip_and_zstd() {
    let src = std::fs::read(repo("testdata/convert/sample.jsonl")).expect("read");
    let dir = tmp();
    let gz = dir.path().join("s.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&src).expect("gz");
    std::fs::write(&gz, enc.finish().expect("gz")).expect("write");
    let zst = dir.path().join("s.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(src.as_slice(), 3).expect("zstd")).expect("write");
    for file in [&gz, &zst] {
        let out = tmp();
        convert(out.path(), &[file.to_str().expect("path")]);
        assert_eq!(
            cat(&shards(out.path())),
            sample_expected(),
            "{}",
            file.display()
        );
    }
}

#[test]
fn output_compression_gzip_and_zlib() {
    for (c, ext) in [("gzip", "tfrecord.gz"), ("zlib", "tfrecord.zz")] {
        let out = tmp();
        convert(
            out.path(),
            &["testdata/convert/sample.jsonl", "--compression", c],
        );
        let files = shards(out.path());
        assert_eq!(files.len(), 1);
        assert!(
            files[0]
                .to_string_lossy()
                .ends_with(&format!("train-00000-of-00001.{ext}")),
            "{files:?}"
        );
        assert_eq!(cat(&files), sample_expected());
        assert_eq!(
            manifest(out.path(), "train.manifest.json")["compression"],
            c
        );
    }
}

/// Every shard's records, bytes and CRC32C in the manifest are those of the file.
fn check_manifest(dir: &Path, name: &str) -> Value {
    let m = manifest(dir, name);
    let mut total = 0;
    for s in m["shards"].as_array().expect("shards") {
        let path = dir.join(s["name"].as_str().expect("name"));
        let data = std::fs::read(&path).expect("shard");
        assert_eq!(s["bytes"], json!(data.len()));
        assert_eq!(s["crc32c"], json!(format!("{:08x}", crc32c::crc32c(&data))));
        let n = read_file(&path).len() as u64;
        assert_eq!(s["records"], json!(n));
        total += n;
    }
    assert_eq!(m["records"], json!(total));
    m
}

#[test]
fn naming_tf_and_hf_with_records_per_shard_and_shard_size() {
    let out = tmp();
    convert(
        out.path(),
        &["testdata/convert/sample.jsonl", "--records-per-shard", "2"],
    );
    assert_eq!(
        listing(out.path()),
        vec![
            ".infeed-index",
            "train-00000-of-00003.tfrecord",
            "train-00001-of-00003.tfrecord",
            "train-00002-of-00003.tfrecord",
            "train.manifest.json"
        ]
    );
    assert_eq!(indexes(out.path()), THREE_INDEXES);
    check_manifest(out.path(), "train.manifest.json");
    assert_eq!(cat(&shards(out.path())), sample_expected());

    let out = tmp();
    convert(
        out.path(),
        &[
            "testdata/convert/sample.jsonl",
            "--records-per-shard",
            "2",
            "--naming",
            "hf",
            "--prefix",
            "wiki",
        ],
    );
    assert_eq!(
        listing(out.path()),
        vec![
            ".infeed-index",
            "wiki-0-2.tfrecord",
            "wiki-1-2.tfrecord",
            "wiki-2-1.tfrecord",
            "wiki.manifest.json"
        ]
    );
    assert_eq!(
        indexes(out.path()),
        vec![
            "wiki-0-2.tfrecord.index",
            "wiki-1-2.tfrecord.index",
            "wiki-2-1.tfrecord.index",
        ]
    );
    let m = check_manifest(out.path(), "wiki.manifest.json");
    assert_eq!(m["naming"], "hf");

    // Framed sizes of the 5 records: a shard holds records while their sum stays <= the limit.
    let sizes: Vec<u64> = [
        "wiki-0-2.tfrecord",
        "wiki-1-2.tfrecord",
        "wiki-2-1.tfrecord",
    ]
    .iter()
    .flat_map(|name| read_file(repo_shard(&out, name)))
    .map(|r| r.data.len() as u64 + 16)
    .collect();
    let limit = sizes[0] + sizes[1];
    let out2 = tmp();
    convert(
        out2.path(),
        &[
            "testdata/convert/sample.jsonl",
            "--shard-size",
            &limit.to_string(),
        ],
    );
    let m = check_manifest(out2.path(), "train.manifest.json");
    let first = m["shards"][0]["records"].as_u64().expect("records");
    assert_eq!(first, 2, "two records fit {limit} bytes exactly");
    assert_eq!(cat(&shards(out2.path())), sample_expected());
}

fn repo_shard(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// Lines of testdata/tokenizer/expected.jsonl (written by the Python `tokenizers`).
fn python_tokens() -> Vec<(Vec<i64>, Vec<i64>)> {
    std::fs::read_to_string(repo("testdata/tokenizer/expected.jsonl"))
        .expect("expected.jsonl")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json");
            let ids = v["input_ids"]
                .as_array()
                .expect("ids")
                .iter()
                .map(|x| x.as_i64().expect("id"))
                .collect();
            let mask = v["attention_mask"]
                .as_array()
                .expect("mask")
                .iter()
                .map(|x| x.as_i64().expect("m"))
                .collect();
            (ids, mask)
        })
        .collect()
}

fn int_list(v: &Value, name: &str) -> Vec<i64> {
    v[name]["int64"]
        .as_array()
        .expect(name)
        .iter()
        .map(|x| x.as_i64().expect("int"))
        .collect()
}

#[test]
fn tokenization_matches_python_tokenizers() {
    let expected = python_tokens();
    assert_eq!(expected.len(), 30);
    let out = tmp();
    convert(
        out.path(),
        &[
            "testdata/tokenizer/corpus.txt",
            "--tokenizer",
            "testdata/tokenizer/tokenizer.json",
        ],
    );
    let got = cat(&shards(out.path()));
    assert_eq!(got.len(), expected.len());
    for (g, (ids, mask)) in got.iter().zip(&expected) {
        assert_eq!(&int_list(g, "input_ids"), ids);
        assert_eq!(&int_list(g, "attention_mask"), mask);
    }
}

#[test]
fn tokenization_truncates_with_max_length_keeping_special_tokens() {
    let out = tmp();
    let stdout = convert(
        out.path(),
        &[
            "testdata/tokenizer/corpus.txt",
            "--tokenizer",
            "testdata/tokenizer/tokenizer.json",
            "--max-length",
            "8",
        ],
    );
    assert!(
        stdout.contains("spec: input_ids:var_len:int64,attention_mask:var_len:int64"),
        "{stdout}"
    );
    let got = cat(&shards(out.path()));
    for (g, (ids, _)) in got.iter().zip(python_tokens()) {
        // Hugging Face truncation (checked with the Python package): BOS, the
        // first LEN-2 content tokens, EOS.
        let want: Vec<i64> = if ids.len() <= 8 {
            ids.clone()
        } else {
            let mut w = ids[..7].to_vec();
            w.push(*ids.last().expect("eos"));
            w
        };
        assert_eq!(int_list(g, "input_ids"), want);
        assert_eq!(int_list(g, "attention_mask"), vec![1; want.len()]);
    }
}

#[test]
fn tokenization_groups_blocks_into_fixed_chunks_dropping_remainders() {
    let out = tmp();
    let stdout = convert(
        out.path(),
        &[
            "testdata/tokenizer/corpus.txt",
            "--tokenizer",
            "testdata/tokenizer/tokenizer.json",
            "--group-to",
            "16",
            "--group-block",
            "7",
            "--naming",
            "hf",
        ],
    );
    assert!(
        stdout.contains("spec: input_ids:fixed_len[16]:int64,attention_mask:fixed_len[16]:int64"),
        "{stdout}"
    );
    let mut want = Vec::new();
    for block in python_tokens().chunks(7) {
        let all: Vec<i64> = block.iter().flat_map(|(ids, _)| ids.clone()).collect();
        for c in all.chunks_exact(16) {
            want.push(c.to_vec());
        }
    }
    let got = cat(&shards(out.path()));
    assert_eq!(
        got.iter()
            .map(|g| int_list(g, "input_ids"))
            .collect::<Vec<_>>(),
        want
    );
    assert!(
        got.iter()
            .all(|g| int_list(g, "attention_mask") == vec![1; 16])
    );
    assert_eq!(
        shards(out.path())[0],
        out.path()
            .join(format!("dataset-0-{}.tfrecord", want.len()))
    );
}

#[test]
fn tokenizing_a_jsonl_column_keeps_the_other_columns() {
    let out = tmp();
    convert(
        out.path(),
        &[
            "testdata/convert/sample.jsonl",
            "--columns",
            "label,text",
            "--tokenizer",
            "testdata/tokenizer/tokenizer.json",
        ],
    );
    let got = cat(&shards(out.path()));
    assert_eq!(got.len(), 5);
    assert_eq!(got[2]["label"], json!({"int64": [1]}));
    // The empty text gives just the special tokens.
    assert_eq!(int_list(&got[2], "input_ids"), vec![1, 2]);
    assert!(got[0].get("text").is_none());
}

/// All records of the shards of the given task manifests, in task order.
fn union_of_tasks(dir: &Path, stem: &str, tasks: usize) -> Vec<Value> {
    let mut all = Vec::new();
    for t in 0..tasks {
        let m = check_manifest(dir, &format!("{stem}.task{t:05}.manifest.json"));
        let files: Vec<PathBuf> = m["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .map(|s| dir.join(s["name"].as_str().expect("name")))
            .collect();
        all.extend(cat(&files));
    }
    all
}

#[test]
fn task_split_union_equals_single_task_by_records_and_by_files() {
    // One file, more tasks than files: split by record blocks.
    let single = tmp();
    convert(single.path(), &["testdata/tokenizer/corpus.txt"]);
    let whole = cat(&shards(single.path()));
    assert_eq!(whole.len(), 30);
    let split = tmp();
    for t in 0..4 {
        convert(
            split.path(),
            &[
                "testdata/tokenizer/corpus.txt",
                "--task-index",
                &t.to_string(),
                "--num-tasks",
                "4",
            ],
        );
    }
    assert_eq!(union_of_tasks(split.path(), "train", 4), whole);
    assert!(listing(split.path()).contains(&"train-task00003-00000-of-00001.tfrecord".to_string()));
    // The shards' glob `train-*` (other readers take all it matches) finds
    // the shards and nothing else: the manifests are `train.taskIIIII...`.
    let globbed: Vec<String> = listing(split.path())
        .into_iter()
        .filter(|n| n.starts_with("train-"))
        .collect();
    assert_eq!(globbed.len(), 4, "{globbed:?}");
    assert!(
        globbed.iter().all(|n| n.ends_with(".tfrecord")),
        "{globbed:?}"
    );

    // A rerun of a task where a version before named its manifest
    // `train-task00001.manifest.json`: that one goes (it vouched for the
    // shards this run replaces).
    let old = split.path().join("train-task00001.manifest.json");
    std::fs::copy(split.path().join("train.task00001.manifest.json"), &old).expect("copy");
    convert(
        split.path(),
        &[
            "testdata/tokenizer/corpus.txt",
            "--task-index",
            "1",
            "--num-tasks",
            "4",
        ],
    );
    assert!(!old.exists());
    assert_eq!(union_of_tasks(split.path(), "train", 4), whole);

    // Grouping: tasks take whole blocks, so the grouped output is the same too.
    let tok = [
        "--tokenizer",
        "testdata/tokenizer/tokenizer.json",
        "--group-to",
        "8",
        "--group-block",
        "4",
    ];
    let single = tmp();
    let mut args = vec!["testdata/tokenizer/corpus.txt"];
    args.extend(tok);
    convert(single.path(), &args);
    let whole = cat(&shards(single.path()));
    let split = tmp();
    for t in 0..3 {
        let ts = t.to_string();
        let mut a = args.clone();
        a.extend(["--task-index", &ts, "--num-tasks", "3"]);
        convert(split.path(), &a);
    }
    assert_eq!(union_of_tasks(split.path(), "train", 3), whole);

    // Several files, no more tasks than files: split by files.
    let dir = tmp();
    for i in 0..5 {
        std::fs::write(
            dir.path().join(format!("p{i}.jsonl")),
            format!("{{\"x\": {i}}}\n{{\"x\": {}}}\n", i + 100),
        )
        .expect("write");
    }
    let glob = format!("{}/p*.jsonl", dir.path().display());
    let single = tmp();
    convert(single.path(), &[&glob]);
    let whole = cat(&shards(single.path()));
    assert_eq!(whole.len(), 10);
    let split = tmp();
    for t in 0..2 {
        convert(
            split.path(),
            &[&glob, "--task-index", &t.to_string(), "--num-tasks", "2"],
        );
    }
    assert_eq!(union_of_tasks(split.path(), "train", 2), whole);
    let m = manifest(split.path(), "train.task00000.manifest.json");
    assert_eq!(m["input"]["files"].as_array().expect("files").len(), 2);
}

#[test]
fn rerun_replaces_shards_and_never_duplicates() {
    let out = tmp();
    convert(
        out.path(),
        &["testdata/convert/sample.jsonl", "--records-per-shard", "1"],
    );
    assert_eq!(shards(out.path()).len(), 5);
    let first: Vec<Vec<u8>> = shards(out.path())
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect();
    // Leftovers of a crashed run: a temporary shard and a shard of another layout.
    std::fs::write(out.path().join(".train-00009.tmp"), b"partial").expect("write");
    std::fs::write(out.path().join("train-00007-of-00009.tfrecord"), b"stale").expect("write");
    std::fs::write(
        out.path()
            .join(".infeed-index/train-00007-of-00009.tfrecord.index"),
        b"stale",
    )
    .expect("write");
    // An index a version before `.infeed-index` wrote beside a shard this run
    // writes again: stale, and in the way of other readers' globs.
    std::fs::write(
        out.path().join("train-00000-of-00005.tfrecord.index"),
        b"old",
    )
    .expect("write");
    std::fs::write(out.path().join("unrelated.txt"), b"keep me").expect("write");
    let stdout = convert(
        out.path(),
        &["testdata/convert/sample.jsonl", "--records-per-shard", "1"],
    );
    assert!(
        stdout.contains("removed 1 shards of an earlier run: train-00007-of-00009.tfrecord"),
        "{stdout}"
    );
    let again: Vec<Vec<u8>> = shards(out.path())
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect();
    assert_eq!(first, again);
    assert!(listing(out.path()).contains(&"unrelated.txt".to_string()));
    assert!(!listing(out.path()).iter().any(|n| n.ends_with(".tmp")));
    assert!(!listing(out.path()).iter().any(|n| n.ends_with(".index")));
    assert_eq!(indexes(out.path()).len(), 5, "{:?}", indexes(out.path()));
    // A rerun with another layout replaces the old shards.
    convert(
        out.path(),
        &["testdata/convert/sample.jsonl", "--records-per-shard", "2"],
    );
    assert_eq!(
        listing(out.path()),
        vec![
            ".infeed-index",
            "train-00000-of-00003.tfrecord",
            "train-00001-of-00003.tfrecord",
            "train-00002-of-00003.tfrecord",
            "train.manifest.json",
            "unrelated.txt"
        ]
    );
    // The old layout's indexes went with its shards.
    assert_eq!(indexes(out.path()), THREE_INDEXES);
    assert_eq!(cat(&shards(out.path())), sample_expected());
}

#[test]
fn a_failed_run_commits_nothing() {
    let dir = tmp();
    let bad = dir.path().join("bad.jsonl");
    let mut lines = String::new();
    for i in 0..50_000 {
        lines.push_str(&format!("{{\"x\": {i}}}\n"));
    }
    lines.push_str("{\"x\": \"oops\"}\n");
    std::fs::write(&bad, lines).expect("write");
    let out = tmp();
    let err = convert_err(
        out.path(),
        &[bad.to_str().expect("path"), "--records-per-shard", "1000"],
    );
    assert!(
        err.ends_with(
            "bad.jsonl: line 50001: column \"x\": expected int64, found string \"oops\"\n"
        ),
        "{err}"
    );
    assert_eq!(listing(out.path()), Vec::<String>::new());
}

/// Writes `content` to NAME in a new folder and converts it, expecting failure.
fn bad_input(name: &str, content: &[u8], extra: &[&str]) -> String {
    let dir = tmp();
    let path = dir.path().join(name);
    std::fs::write(&path, content).expect("write");
    let out = tmp();
    let mut args = vec![path.to_str().expect("path")];
    args.extend(extra);
    let err = convert_err(out.path(), &args);
    let shown = format!("infeed: {}", path.display());
    err.trim_end().replace(&shown, "infeed: FILE")
}

#[test]
fn each_bad_input_names_file_line_and_column() {
    assert_eq!(
        bad_input("a.jsonl", b"{\"a\": 1}\n{\"a\": 2\n", &[]),
        "infeed: FILE: line 2: invalid JSON: EOF while parsing an object at line 1 column 7"
    );
    assert_eq!(
        bad_input("a.jsonl", b"{\"a\": 1}\n[1]\n", &[]),
        "infeed: FILE: line 2: a JSONL line must be a JSON object, found a list"
    );
    assert_eq!(
        bad_input("a.jsonl", b"{\"a\": 1}\n\n{\"a\": null}\n", &[]),
        "infeed: FILE: line 3: column \"a\": null value"
    );
    assert_eq!(
        bad_input(
            "a.jsonl",
            b"{\"a\": 1}\n{\"b\": 1}\n",
            &["--infer-records", "1"]
        )
        .lines()
        .next()
        .unwrap_or(""),
        "infeed: FILE: line 2: column \"b\": not in the schema (inferred from the first records): add --feature NAME:TYPE, or choose columns with --columns"
    );
    assert_eq!(
        bad_input("a.jsonl", b"{\"a\": 1, \"b\": 2}\n{\"b\": 1}\n", &[]),
        "infeed: FILE: line 2: column \"a\": missing value"
    );
    assert_eq!(
        bad_input(
            "a.jsonl",
            b"{\"a\": 1}\n{\"a\": 2.5}\n",
            &["--infer-records", "1"]
        ),
        "infeed: FILE: line 2: column \"a\": expected int64, found number 2.5"
    );
    assert_eq!(
        bad_input(
            "a.jsonl",
            b"{\"a\": 1}\n{\"a\": 9223372036854775808}\n",
            &[]
        ),
        "infeed: FILE: line 2: column \"a\": 9223372036854775808 does not fit int64"
    );
    assert_eq!(
        bad_input("a.jsonl", b"{\"a\": 1.5}\n{\"a\": 1e39}\n", &[]),
        "infeed: FILE: line 2: column \"a\": 1e+39 does not fit float32"
    );
    assert_eq!(
        bad_input(
            "a.jsonl",
            b"{\"a\": [1]}\n{\"a\": [[2]]}\n",
            &["--feature", "a:int64[]"]
        ),
        "infeed: FILE: line 2: column \"a\": expected list of int64, found a list holding a list"
    );
    // Inference errors name the two lines that disagree.
    let err = bad_input("a.jsonl", b"{\"a\": 1}\n{\"a\": \"x\"}\n", &[]);
    assert!(
        err.starts_with("infeed: schema: column \"a\" holds numbers ("),
        "{err}"
    );
    assert!(
        err.ends_with("a.jsonl line 2): give --feature a:TYPE or leave it out with --columns"),
        "{err}"
    );
    let err = bad_input("a.jsonl", b"{\"a\": 1}\n{\"a\": [1]}\n", &[]);
    assert!(err.contains("holds single values ("), "{err}");
    let err = bad_input("a.jsonl", b"{\"a\": {\"b\": 1}}\n", &[]);
    assert!(
        err.contains("holds an object, which is not supported"),
        "{err}"
    );

    // CSV.
    assert_eq!(
        bad_input("a.csv", b"x,y\n1,2\n3\n", &[]),
        "infeed: FILE: line 3: 1 fields, but the header has 2"
    );
    assert_eq!(
        bad_input("a.csv", b"x,y\n1,2\n\"3,4\n", &[]),
        "infeed: FILE: line 3: malformed CSV: a quoted field is not closed"
    );
    assert_eq!(
        bad_input("a.csv", b"x,y\n1,2\n\"3\"z,4\n", &[]),
        "infeed: FILE: line 3: malformed CSV: text after the closing quote of a field"
    );
    assert_eq!(
        bad_input("a.csv", b"x,y\n1,2\n\n\n,4\n", &[]),
        "infeed: FILE: line 5: column \"x\": null value"
    );
    assert_eq!(
        bad_input("a.csv", b"x,y\n1,2\n1,two\n", &["--infer-records", "1"]),
        "infeed: FILE: line 3: column \"y\": expected int64, found text \"two\""
    );

    // Unknown formats and missing files.
    assert!(bad_input("a.bin", b"x", &[]).ends_with("cannot tell the format from the name (.jsonl .csv .tsv .parquet .txt, optionally .gz/.zst): give --format"));
    let out = tmp();
    let err = convert_err(out.path(), &["testdata/convert/*.nothing"]);
    assert_eq!(
        err.trim_end(),
        "infeed: testdata/convert/*.nothing: the pattern matches no file"
    );
}

#[test]
fn skip_bad_counts_and_lists_every_bad_record() {
    let dir = tmp();
    let path = dir.path().join("a.jsonl");
    std::fs::write(
        &path,
        "{\"a\": 1}\n{\"a\": \"x\"}\nnot json\n{\"a\": 2}\n{\"a\": null}\n",
    )
    .expect("write");
    let out = tmp();
    let stdout = convert(
        out.path(),
        &[
            path.to_str().expect("path"),
            "--skip-bad",
            "--feature",
            "a:int64",
        ],
    );
    let p = path.display();
    assert!(
        stdout.starts_with("converted 5 records into 2 records"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!(
            "skipped 3 bad records:\n  {p}: line 2: column \"a\": expected int64, found string \"x\"\n  {p}: line 3: invalid JSON: expected ident at line 1 column 2\n  {p}: line 5: column \"a\": null value\n"
        )),
        "{stdout}"
    );
    assert_eq!(
        cat(&shards(out.path())),
        vec![json!({"a": {"int64": [1]}}), json!({"a": {"int64": [2]}})]
    );
    assert_eq!(
        manifest(out.path(), "train.manifest.json")["input"]["records_skipped"],
        3
    );

    // --nulls omit leaves the feature out instead.
    let out = tmp();
    convert(
        out.path(),
        &[
            path.to_str().expect("path"),
            "--skip-bad",
            "--nulls",
            "omit",
            "--feature",
            "a:int64",
        ],
    );
    assert_eq!(
        cat(&shards(out.path())),
        vec![
            json!({"a": {"int64": [1]}}),
            json!({"a": {"int64": [2]}}),
            json!({})
        ]
    );
}

mod parquet_input {
    use super::*;
    use std::sync::Arc;

    use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, Int64Builder, ListBuilder};
    use arrow_array::{
        ArrayRef, BinaryArray, BooleanArray, Float64Array, Int32Array, RecordBatch, StringArray,
        UInt64Array,
    };
    use parquet::arrow::ArrowWriter;

    fn write(path: &Path, columns: Vec<(&str, ArrayRef)>) {
        let batch = RecordBatch::try_from_iter(columns).expect("batch");
        let file = std::fs::File::create(path).expect("create");
        let mut w = ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
    }

    #[test]
    fn parquet_types_map_directly() {
        let dir = tmp();
        let path = dir.path().join("t.parquet");
        let mut lists = ListBuilder::new(Int64Builder::new());
        lists.values().append_slice(&[1, -2]);
        lists.append(true);
        lists.append(true);
        let mut fixed = FixedSizeListBuilder::new(Float32Builder::new(), 2);
        fixed.values().append_slice(&[0.5, 1.5]);
        fixed.append(true);
        fixed.values().append_slice(&[-0.25, 3.0]);
        fixed.append(true);
        write(
            &path,
            vec![
                ("i32", Arc::new(Int32Array::from(vec![7, -8])) as ArrayRef),
                ("u64", Arc::new(UInt64Array::from(vec![1u64, 2]))),
                ("f64", Arc::new(Float64Array::from(vec![0.1, 2.5]))),
                ("s", Arc::new(StringArray::from(vec!["a", "été"]))),
                (
                    "b",
                    Arc::new(BinaryArray::from(vec![&b"\x00\xff"[..], b""])),
                ),
                ("flag", Arc::new(BooleanArray::from(vec![true, false]))),
                ("ids", Arc::new(lists.finish())),
                ("xy", Arc::new(fixed.finish())),
            ],
        );
        let out = tmp();
        let stdout = convert(out.path(), &[path.to_str().expect("path")]);
        assert!(
            stdout.contains("spec: i32:fixed_len[]:int64,u64:fixed_len[]:int64,f64:fixed_len[]:float,s:fixed_len[]:string,b:fixed_len[]:string,flag:fixed_len[]:int64,ids:var_len:int64,xy:fixed_len[2]:float"),
            "{stdout}"
        );
        assert_eq!(
            cat(&shards(out.path())),
            vec![
                json!({"i32": {"int64": [7]}, "u64": {"int64": [1]}, "f64": {"float": [f(0.1)]}, "s": {"bytes": [b64("a")]},
                       "b": {"bytes": [BASE64.encode(b"\x00\xff")]}, "flag": {"int64": [1]}, "ids": {"int64": [1, -2]},
                       "xy": {"float": [0.5, 1.5]}}),
                json!({"i32": {"int64": [-8]}, "u64": {"int64": [2]}, "f64": {"float": [2.5]}, "s": {"bytes": [b64("été")]},
                       "b": {"bytes": [""]}, "flag": {"int64": [0]}, "ids": {"int64": []}, "xy": {"float": [-0.25, 3.0]}}),
            ]
        );
        // Tokenizing a Parquet text column.
        let tok = tmp();
        convert(
            tok.path(),
            &[
                path.to_str().expect("path"),
                "--text-column",
                "s",
                "--tokenizer",
                "testdata/tokenizer/tokenizer.json",
                "--group-to",
                "2",
            ],
        );
        // "a" and "été" with BOS/EOS around each (ids from the Python package),
        // concatenated and cut in twos.
        let got: Vec<Vec<i64>> = cat(&shards(tok.path()))
            .iter()
            .map(|g| int_list(g, "input_ids"))
            .collect();
        assert_eq!(
            got,
            vec![vec![1, 67], vec![2, 1], vec![348, 86], vec![348, 2]]
        );
        // Task split by rows (one file, three tasks).
        let whole = cat(&shards(out.path()));
        let split = tmp();
        for t in 0..3 {
            convert(
                split.path(),
                &[
                    path.to_str().expect("path"),
                    "--task-index",
                    &t.to_string(),
                    "--num-tasks",
                    "3",
                ],
            );
        }
        assert_eq!(union_of_tasks(split.path(), "train", 3), whole);
    }

    #[test]
    fn parquet_nulls_and_overflow_name_the_row() {
        let dir = tmp();
        let path = dir.path().join("n.parquet");
        write(
            &path,
            vec![
                (
                    "a",
                    Arc::new(Int32Array::from(vec![Some(1), Some(2), None])) as ArrayRef,
                ),
                ("u", Arc::new(UInt64Array::from(vec![1u64, u64::MAX, 3]))),
            ],
        );
        let out = tmp();
        let err = convert_err(
            out.path(),
            &[path.to_str().expect("path"), "--columns", "a"],
        );
        assert_eq!(
            err.trim_end(),
            format!(
                "infeed: {}: row 3: column \"a\": null value",
                path.display()
            )
        );
        let err = convert_err(
            out.path(),
            &[path.to_str().expect("path"), "--columns", "u"],
        );
        assert_eq!(
            err.trim_end(),
            format!(
                "infeed: {}: row 2: column \"u\": 18446744073709551615 does not fit int64",
                path.display()
            )
        );
        let err = convert_err(
            out.path(),
            &[path.to_str().expect("path"), "--feature", "a:bytes"],
        );
        assert_eq!(
            err.trim_end(),
            format!(
                "infeed: {}: column \"a\" is Int32 in Parquet and cannot be written as bytes",
                path.display()
            )
        );
        convert(
            out.path(),
            &[
                path.to_str().expect("path"),
                "--nulls",
                "omit",
                "--skip-bad",
            ],
        );
        assert_eq!(
            cat(&shards(out.path())),
            vec![
                json!({"a": {"int64": [1]}, "u": {"int64": [1]}}),
                json!({"u": {"int64": [3]}})
            ]
        );
    }
}

/// Writes `bytes` as `name` in a fresh directory.
fn input_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tmp();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write");
    (dir, path)
}

#[test]
fn an_integer_beyond_int64_is_a_bad_row_never_a_float_column() {
    // One integer beyond int64 used to turn the column into
    // float32 and round the others (123456789 became 123456792).
    for (name, body, line, value) in [
        (
            "big.jsonl",
            "{\"id\": 123456789}\n{\"id\": 18446744073709551616}\n{\"id\": 5}\n",
            2,
            "18446744073709551616",
        ),
        (
            "big.csv",
            "id\n123456789\n123456789012345678901234\n5\n",
            3,
            "123456789012345678901234",
        ),
        (
            "list.jsonl",
            "{\"id\": [123456789]}\n{\"id\": [1, -99999999999999999999]}\n{\"id\": [5]}\n",
            2,
            "-99999999999999999999",
        ),
    ] {
        let (_dir, path) = input_file(name, body.as_bytes());
        let p = path.display();
        let out = tmp();
        let err = convert_err(out.path(), &[path.to_str().expect("path")]);
        assert_eq!(
            err.trim_end(),
            format!("infeed: {p}: line {line}: column \"id\": {value} does not fit int64"),
            "{name}"
        );
        let out = tmp();
        let stdout = convert(out.path(), &[path.to_str().expect("path"), "--skip-bad"]);
        assert!(
            stdout.contains(&format!(
                "skipped 1 bad records:\n  {p}: line {line}: column \"id\": {value} does not fit int64\n"
            )),
            "{stdout}"
        );
        let ids: Vec<Value> = cat(&shards(out.path()))
            .into_iter()
            .map(|r| r["id"].clone())
            .collect();
        assert_eq!(
            ids,
            vec![json!({"int64": [123456789]}), json!({"int64": [5]})],
            "{name}"
        );
    }
}

#[test]
fn integers_float32_cannot_hold_never_become_float32_by_inference() {
    let (_dir, path) = input_file("mixed.jsonl", b"{\"id\": 123456789}\n{\"id\": 2.5}\n");
    let p = path.display();
    let out = tmp();
    let err = convert_err(out.path(), &[path.to_str().expect("path")]);
    assert_eq!(
        err.trim_end(),
        format!(
            "infeed: schema: column \"id\" holds an integer that float32 cannot hold exactly \
             ({p} line 1) and fractional numbers ({p} line 2): as float32 it would be rounded; \
             give --feature id:TYPE or leave it out with --columns"
        )
    );
    // Small integers beside fractions still make a float column (exact).
    let (_dir, path) = input_file("small.jsonl", b"{\"x\": 3}\n{\"x\": 2.5}\n");
    let out = tmp();
    convert(out.path(), &[path.to_str().expect("path")]);
    assert_eq!(
        cat(&shards(out.path())),
        vec![
            json!({"x": {"float": [3.0]}}),
            json!({"x": {"float": [2.5]}})
        ]
    );
    // Asked for float32, the user gets float32.
    let (_dir, path) = input_file("asked.jsonl", b"{\"id\": 123456789}\n{\"id\": 2.5}\n");
    let out = tmp();
    convert(
        out.path(),
        &[path.to_str().expect("path"), "--feature", "id:float"],
    );
    assert_eq!(cat(&shards(out.path())).len(), 2);
}

#[test]
fn a_csv_byte_order_mark_is_not_part_of_the_first_name() {
    // The UTF-8 byte order mark before the header is dropped.
    let (_dir, path) = input_file("bom.csv", b"\xef\xbb\xbfname,x\nbob,1\n");
    let out = tmp();
    let stdout = convert(out.path(), &[path.to_str().expect("path")]);
    assert!(
        stdout.contains("spec: name:fixed_len[]:string,x:fixed_len[]:int64"),
        "{stdout}"
    );
    assert_eq!(
        cat(&shards(out.path())),
        vec![json!({"name": {"bytes": [b64("bob")]}, "x": {"int64": [1]}})]
    );
}

#[test]
fn an_empty_input_converts_to_zero_records_in_every_format() {
    // One rule for text, JSONL and CSV (even a CSV with
    // only its header): 0 records, no shard, a manifest.
    for (name, body) in [
        ("empty.txt", ""),
        ("empty.jsonl", ""),
        ("blank.jsonl", "\n\n"),
        ("empty.csv", ""),
        ("header.csv", "a,b\n"),
    ] {
        let (_dir, path) = input_file(name, body.as_bytes());
        let out = tmp();
        let stdout = convert(out.path(), &[path.to_str().expect("path")]);
        assert!(
            stdout.starts_with("converted 0 records into 0 records in 0 shards"),
            "{name}: {stdout}"
        );
        assert_eq!(listing(out.path()), vec!["train.manifest.json"], "{name}");
        let m = manifest(out.path(), "train.manifest.json");
        assert_eq!(
            (&m["records"], &m["shards"]),
            (&json!(0), &json!([])),
            "{name}"
        );
    }
}
