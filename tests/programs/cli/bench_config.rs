//! `infeed bench` with bucketing and packing flags, and `--config FILE.toml`
//! describing the same pipeline, overridden by flags.

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
fn a_toml_config_runs_the_pipeline_its_flags_describe_and_flags_override_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lm.toml");
    std::fs::write(
        &config,
        format!(
            r#"# The lm pipeline, bucketed.
inputs = ["testdata/lm-sample.tfrecord"]
spec = "{SPEC}"
pad-to-multiple-of = 64
max_length = 512          # underscores work too
bucket-by = "input_ids"
boundaries = [64, 128, 256]
bucket-batch-sizes = [64, 32, 16, 8]
shuffle = 100
seed = 3
digests = true
drop-remainder = false
"#
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let as_flags = |sizes: &str, seed: &str| {
        let flags = bucket_flags(sizes, seed);
        bench_json(&flags.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let from_file = bench_json(&["bench", "--config", &config]);
    let flags = as_flags("64,32,16,8", "3");
    assert_eq!(from_file["digests"], flags["digests"]);
    assert_eq!(from_file["records"], 256);
    // Every record once: 256 records in batches of the buckets' sizes.
    assert!(from_file["batches"].as_u64().unwrap() >= 4);
    // Flags override the file: a list, a number, and the inputs.
    let overridden = bench_json(&[
        "bench",
        "--config",
        &config,
        "--bucket-batch-sizes=4,4,4,4",
        "--seed",
        "4",
        "testdata/lm-sample.tfrecord.gz",
    ]);
    let expected = as_flags("4,4,4,4", "4");
    assert_eq!(overridden["digests"], expected["digests"]);
    assert_ne!(overridden["digests"], from_file["digests"]);
    assert_eq!(overridden["records"], 256);
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
fn bad_configs_and_flag_combinations_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "inputs = [\"testdata/lm-sample.tfrecord\"]\nbatchsize = 4\n",
    )
    .unwrap();
    let output = infeed(&["bench", "--config", &bad.display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("key \"batchsize\": not a bench flag"), "{err}");
    std::fs::write(&bad, "shuffle-files = 3\n").unwrap();
    let output = infeed(&["bench", "--config", &bad.display().to_string()]);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("expected true or false"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = infeed(&["bench", "--config", "/nonexistent/x.toml"]);
    assert_eq!(output.status.code(), Some(2));
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
