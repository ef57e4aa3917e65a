//! `infeed bench` with bucketing and packing flags, and `--pipeline FILE`
//! (JSON or TOML) describing the same pipeline.

use crate::support::run::{bench_json, infeed};

const SPEC: &str = "input_ids:var_len:int32,attention_mask:var_len:int32";

fn bucket_flags(sizes: &str, seed: &str) -> Vec<String> {
    [
        "bench",
        "testdata/lm-sample.tfrecord",
        "--spec",
        SPEC,
        "--pad-to-multiple-of",
        "64",
        "--max-length",
        "512",
        "--bucket-by",
        "input_ids",
        "--boundaries",
        "64,128,256",
        "--bucket-batch-sizes",
        sizes,
        "--shuffle",
        "100",
        "--seed",
        seed,
        "--digests",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn a_pipeline_file_runs_the_pipeline_its_flags_describe() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("lm.toml");
    // The bucketed lm pipeline, written by hand.
    std::fs::write(
        &toml,
        format!(
            r#"version = 1
source.files = ["testdata/lm-sample.tfrecord"]
records = [
    {{ interleave = {{ cycle_length = 1, block_length = 1 }} }},
    {{ shuffle = {{ buffer = 100 }} }},
    {{ repeat = {{ epochs = 1 }} }},
]
options.seed = 3
parse.features = "{SPEC}"
batches = [
    {{ bucket_by_length = {{ feature = "input_ids", boundaries = [64, 128, 256], batch_sizes = [64, 32, 16, 8] }} }},
    {{ drop_remainder = {{ drop = false }} }},
    {{ pad_to_multiple_of = {{ multiple = 64 }} }},
    {{ max_length = {{ length = 512 }} }},
]
"#
        ),
    )
    .unwrap();
    let toml = toml.display().to_string();
    let flags = bucket_flags("64,32,16,8", "3");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let from_flags = bench_json(&flags);
    let from_toml = bench_json(&["bench", "--pipeline", &toml, "--digests"]);
    assert_eq!(from_toml["digests"], from_flags["digests"]);
    assert_eq!(from_toml["records"], 256);
    assert!(from_toml["batches"].as_u64().unwrap() >= 4);
    // What --print-pipeline writes runs as the flags did.
    let printed = crate::support::run::infeed_ok(&[&flags[..], &["--print-pipeline"]].concat());
    let json = dir.path().join("lm.json");
    std::fs::write(&json, &printed).unwrap();
    let json = json.display().to_string();
    let from_json = bench_json(&["bench", "--pipeline", &json, "--digests"]);
    assert_eq!(from_json["digests"], from_flags["digests"]);
    // And prints itself back unchanged.
    let again = crate::support::run::infeed_ok(&["bench", "--pipeline", &json, "--print-pipeline"]);
    assert_eq!(again, printed);
}

#[test]
fn pack_flags_count_sequences_and_restore_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.bin").display().to_string();
    let base = [
        "bench",
        "testdata/lm-sample.tfrecord",
        "--spec",
        SPEC,
        "--pack",
        "256",
        "--pack-overflow",
        "split",
        "--batch",
        "4",
        "--shuffle",
        "50",
        "--digests",
    ];
    let mut runs = Vec::new();
    for strategy in [
        &[][..],
        &["--pack-strategy", "best-fit"],
        &[
            "--pack-strategy",
            "concat-split",
            "--pack-max-segments",
            "3",
        ],
    ] {
        let flags = [&base[..], strategy].concat();
        let full = bench_json(&flags);
        let n = full["batches"].as_u64().unwrap() as usize;
        // Lengths are uniform in 8..512: the records over 256 are split.
        assert!(full["records"].as_u64().unwrap() > 256);
        let head = bench_json(&[&flags[..], &["--batches", "5", "--state-out", &state]].concat());
        let tail = bench_json(&[&flags[..], &["--state-in", &state]].concat());
        assert_eq!(
            [digests(&head), digests(&tail)].concat(),
            digests(&full),
            "{strategy:?}: {n} batches"
        );
        runs.push(digests(&full));
    }
    assert_ne!(runs[0], runs[1]);
    assert_ne!(runs[0], runs[2]);
    // A strategy that is not one is named with those there are.
    let output = infeed(&[&base[..], &["--pack-strategy", "best"]].concat());
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("expected first_fit, best_fit or concat_split"),
        "{err}"
    );
}

#[test]
fn bad_pipeline_files_and_flag_combinations_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    // A bad value is named by its place.
    let mut described = r#"{"version": 1, "source": {"files": ["testdata/lm-sample.tfrecord"]},
        "records": [{"shuffle": {"buffer": -3}}]}"#;
    std::fs::write(&bad, described).unwrap();
    let output = infeed(&["bench", "--pipeline", &bad.display().to_string()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("records[0].shuffle.buffer: invalid value: integer `-3`"),
        "{}",
        stderr(&output)
    );
    // A later version is refused by its number.
    described = r#"{"version": 7, "source": {"files": ["testdata/lm-sample.tfrecord"]}}"#;
    std::fs::write(&bad, described).unwrap();
    let output = infeed(&["bench", "--pipeline", &bad.display().to_string()]);
    assert!(
        stderr(&output).contains("version 7: this infeed reads descriptions of versions 1 to 1"),
        "{}",
        stderr(&output)
    );
    let output = infeed(&["bench", "--pipeline", "/nonexistent/x.toml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("/nonexistent/x.toml"),
        "{}",
        stderr(&output)
    );
    // A file describes the whole pipeline: flags that describe one are refused.
    let path = bad.display().to_string();
    let output = infeed(&["bench", "--pipeline", &path, "--shuffle", "10"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("cannot be used with"),
        "{}",
        stderr(&output)
    );
    // --config is gone, and says what took its place.
    let output = infeed(&["bench", "--config", &path]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("--config was removed"),
        "{}",
        stderr(&output)
    );
    // Bucketing needs a spec; boundaries must increase.
    let output = infeed(&["bench", "testdata/lm-sample.tfrecord", "--pack", "64"]);
    assert!(String::from_utf8_lossy(&output.stderr).contains("need --spec"));
    let mut flags = bucket_flags("4,4,4,4", "1");
    flags[11] = "128,64,256".into();
    let output = infeed(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("strictly increasing"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `--mmap` maps the local files: the same batches, plain and GZIP, as
/// reading them into buffers.
#[test]
fn mmap_gives_the_same_batches() {
    for file in [
        "testdata/lm-sample.tfrecord",
        "testdata/lm-sample.tfrecord.gz",
    ] {
        let flags = [
            "bench",
            file,
            "--spec",
            SPEC,
            "--shuffle",
            "100",
            "--seed",
            "3",
            "--batch",
            "16",
            "--pad-to-multiple-of",
            "64",
            "--max-length",
            "512",
            "--digests",
        ];
        let read = bench_json(&flags);
        let mapped = bench_json(&[&flags[..], &["--mmap"]].concat());
        assert_eq!(mapped["digests"], read["digests"], "{file}");
        assert_eq!(mapped["records"], read["records"], "{file}");
        assert!(read["records"].as_u64().unwrap() > 0);
    }
}

/// Every feature fixed-length with the remainder dropped: the batches are
/// static as they are, and come as tensors (the digest of the assembled
/// batches, as a no-op `--cast` forces them), not as parsed columns;
/// without `--drop-remainder` they stay columns.
#[test]
fn fixed_length_batches_without_remainder_come_as_tensors() {
    let flags = [
        "bench",
        "testdata/examples.tfrecord",
        "--spec",
        "embedding:fixed_len[4]:float,label:fixed_len[]:int64",
        "--batch",
        "2",
    ];
    let dropped = [&flags[..], &["--drop-remainder"]].concat();
    let tensors = bench_json(&[&dropped[..], &["--cast", "int64"]].concat());
    assert_eq!(bench_json(&dropped)["digest"], tensors["digest"]);
    assert_eq!(tensors["batches"], 3);
    let columns = bench_json(&flags);
    let tensors = bench_json(&[&flags[..], &["--cast", "int64"]].concat());
    assert_ne!(columns["digest"], tensors["digest"]);
}

#[test]
fn inputs_targets_flag_shifts_or_names_what_it_cannot() {
    let base = [
        "bench",
        "testdata/lm-sample.tfrecord",
        "--spec",
        SPEC,
        "--pack",
        "256",
        "--pack-strategy",
        "concat-split",
        "--batch",
        "4",
        "--digests",
    ];
    let plain = bench_json(&base);
    let shifted =
        bench_json(&[&base[..], &["--inputs-targets", "input_ids", "--bos", "-1"]].concat());
    assert_eq!(plain["batches"], shifted["batches"]);
    assert_ne!(plain["digests"], shifted["digests"]);
    let output = infeed(&[&base[..], &["--inputs-targets", "nope"]].concat());
    assert_eq!(output.status.code(), Some(1));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("inputs_targets(\"nope\")"), "{err}");
}

#[test]
fn skip_steps_leaves_out_those_batches_and_the_state_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.bin").display().to_string();
    let base = [
        "bench",
        "testdata/lm-sample.tfrecord",
        "--spec",
        SPEC,
        "--fixed-length",
        "512",
        "--batch",
        "8",
        "--shuffle",
        "50",
        "--digests",
    ];
    let full = digests(&bench_json(&base));
    let skipping = [&base[..], &["--skip-steps", "2:4,10:11"]].concat();
    let kept: Vec<String> = full
        .iter()
        .enumerate()
        .filter(|(t, _)| ![2, 3, 10].contains(t))
        .map(|(_, d)| d.clone())
        .collect();
    assert_eq!(digests(&bench_json(&skipping)), kept);
    // Saved after 4 delivered batches (steps 0, 1, 4, 5), resumed without
    // the flag: step 10 is still left out.
    let head = bench_json(&[&skipping[..], &["--batches", "4", "--state-out", &state]].concat());
    let tail = bench_json(&[&base[..], &["--state-in", &state]].concat());
    assert_eq!([digests(&head), digests(&tail)].concat(), kept);
    let bad = infeed(&[&base[..], &["--skip-steps", "5"]].concat());
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected A:B"));
}

#[test]
fn provenance_lists_a_steps_records_from_the_start_or_a_state() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.bin").display().to_string();
    let pipeline = [
        "testdata/lm-sample.tfrecord",
        "--spec",
        SPEC,
        "--pack",
        "512",
        "--pack-strategy",
        "concat-split",
        "--batch",
        "4",
        "--shuffle",
        "50",
    ];
    let lines = |args: &[&str]| -> Vec<serde_json::Value> {
        let output = infeed(args);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let from_start = lines(&[&["provenance"], &pipeline[..], &["--steps", "6,9"]].concat());
    assert_eq!(from_start.len(), 2);
    assert_eq!(from_start[0]["step"], 6);
    let rows = from_start[0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    // Every row names records of the file, a concat-split row at least one.
    for row in rows {
        let records = row.as_array().unwrap();
        assert!(!records.is_empty());
        assert_eq!(records[0][0], "testdata/lm-sample.tfrecord");
    }
    // From the state after 5 batches: the same rows.
    bench_json(
        &[
            &["bench"],
            &pipeline[..],
            &["--batches", "5", "--state-out", &state],
        ]
        .concat(),
    );
    let from_state = lines(
        &[
            &["provenance"],
            &pipeline[..],
            &["--steps", "6,9", "--state-in", &state],
        ]
        .concat(),
    );
    assert_eq!(from_state, from_start);
}

/// The per-batch digests of a `--digests` report.
fn digests(v: &serde_json::Value) -> Vec<String> {
    v["digests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect()
}

/// testdata/pipelines/lm.json run by `infeed bench --pipeline` and made in
/// Rust from the same file: the same batches (the Python package's test
/// runs it a third way, python/tests/test_description.py).
#[test]
fn one_pipeline_file_gives_the_same_digests_on_the_command_line_and_in_rust() {
    let file = "testdata/pipelines/lm.json";
    let report = bench_json(&["bench", "--pipeline", file, "--digests"]);
    let text = std::fs::read_to_string(crate::support::repo(file)).unwrap();
    let d = infeed::pipeline::Description::from_json(&text).unwrap();
    let p = infeed::pipeline::ParsedPipeline::from_description(&d).unwrap();
    let in_rust: Vec<String> = p
        .build()
        .unwrap()
        .map(|b| {
            let digest = b.unwrap().digest().to_le_bytes();
            format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&digest))
        })
        .collect();
    assert_eq!(in_rust.len(), 24);
    assert_eq!(report["digests"], serde_json::json!(in_rust));
}
