//! `infeed bench`'s settings: every numeric one given absurd values (a
//! typo'd size) gives a clean error naming it, or a correct run — never an
//! abort, a panic or runaway memory (the process runs under a 4 GB address
//! space limit, so an allocation a setting asks for and cannot get would
//! abort it); and the words (`--truncation keep-start`) are the Python
//! package's, with either spelling.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::run::bench_json;

const LM: &str = "testdata/lm-sample.tfrecord";
const SPEC: &str = "input_ids:var_len:int64,attention_mask:var_len:int64";

/// `infeed ARGS…` under a 4 GB address-space limit: its exit code (`None`
/// when a signal ended it) and standard error. Fails the test after 120 s.
fn limited(args: &[String]) -> (Option<i32>, String) {
    let mut command = String::from("ulimit -v 4000000; exec \"$0\"");
    for i in 0..args.len() {
        command.push_str(&format!(" \"${{{}}}\"", i + 1));
    }
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&command)
        .arg(env!("CARGO_BIN_EXE_infeed"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run infeed");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for infeed") {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return (status.code(), stderr);
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{args:?} still runs after 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sizes a typo gives: 0, 2^32, 10^12, 2^40, 2^63 − 1 and 2^64 − 1.
const ABSURD: [&str; 6] = [
    "0",
    "4294967296",
    "1000000000000",
    "1099511627776",
    "9223372036854775807",
    "18446744073709551615",
];

/// Runs `infeed ARGS…` under the memory limit: it must end by itself,
/// never by a signal, a panic or a failed allocation; its standard error
/// when it refused (a non-zero exit), `None` when it ran.
fn refused(args: &[String], case: &str) -> Option<String> {
    let (code, stderr) = limited(args);
    assert!(code.is_some(), "{case}: killed by a signal: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("memory allocation"),
        "{case}: {stderr}"
    );
    (code != Some(0)).then_some(stderr)
}

#[test]
fn absurd_sizes_are_clean_errors_or_correct_runs() {
    // Each flag with what it needs beside it.
    let flags: &[(&str, &[&str])] = &[
        ("batch", &[]),
        ("shuffle", &[]),
        ("prefetch", &[]),
        ("interleave", &[]),
        ("block", &[]),
        ("threads", &[]),
        ("epochs", &[]),
        ("max-length", &["--spec", SPEC]),
        ("fixed-length", &["--spec", SPEC]),
        (
            "pad-to-multiple-of",
            &["--spec", SPEC, "--max-length", "512"],
        ),
        ("pack", &["--spec", SPEC, "--batch", "4"]),
        (
            "boundaries",
            &[
                "--spec",
                SPEC,
                "--bucket-by",
                "input_ids",
                "--bucket-batch-sizes",
                "8,8",
            ],
        ),
        (
            "bucket-batch-sizes",
            &[
                "--spec",
                SPEC,
                "--bucket-by",
                "input_ids",
                "--boundaries",
                "64",
            ],
        ),
    ];
    let mut errors = 0;
    for &(flag, extra) in flags {
        for value in ABSURD {
            let value = match flag {
                "bucket-batch-sizes" => format!("{value},8"),
                _ => value.to_owned(),
            };
            let mut args: Vec<String> = ["bench", LM, "--no-digest", "--json", "--batches", "20"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            if flag == "boundaries" || flag == "bucket-batch-sizes" {
                args.extend(["--max-length".into(), "512".into()]);
            }
            args.extend([format!("--{flag}"), value.clone()]);
            let case = format!("--{flag} {value}");
            if let Some(stderr) = refused(&args, &case) {
                errors += 1;
                let line = stderr.lines().last().unwrap_or_default();
                // One line, from infeed, naming the value (or, for 0, what
                // the setting must be).
                assert!(line.starts_with("infeed: invalid"), "{case}: {stderr}");
                let named = line.contains(value.split(',').next().unwrap())
                    || (value.starts_with('0') && line.contains("at least 1"));
                assert!(named, "{case}: {line}");
            }
        }
    }
    // Most absurd sizes are refused (shuffle, block and epochs run: a buffer
    // grows with its data, and counters hold no memory).
    assert!(errors >= 40, "{errors} errors");
}

/// `infeed convert`'s sizes likewise: every numeric flag given each absurd
/// value converts the sample correctly or ends in one line from infeed —
/// never an abort on an allocation or a panic on a capacity.
#[test]
fn convert_absurd_sizes_are_clean_errors_or_correct_runs() {
    let tokenizer = ["--tokenizer", "testdata/tokenizer/tokenizer.json"];
    let flags: &[(&str, &[&str])] = &[
        ("threads", &[]),
        ("infer-records", &[]),
        ("shard-size", &[]),
        ("records-per-shard", &[]),
        ("task-index", &[]),
        ("num-tasks", &[]),
        ("max-length", &tokenizer),
        ("group-to", &tokenizer),
        (
            "group-block",
            &[tokenizer[0], tokenizer[1], "--group-to", "16"],
        ),
    ];
    let mut errors = 0;
    for &(flag, extra) in flags {
        for value in ABSURD {
            let out = tempfile::tempdir().unwrap();
            let mut args: Vec<String> = ["convert", "testdata/convert/sample.jsonl", "-o"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.push(out.path().join("out").display().to_string());
            args.extend(extra.iter().map(|s| s.to_string()));
            args.extend([format!("--{flag}"), value.to_owned()]);
            let case = format!("convert --{flag} {value}");
            if let Some(stderr) = refused(&args, &case) {
                errors += 1;
                let line = stderr.lines().last().unwrap_or_default();
                assert!(
                    line.starts_with("infeed: ") || line.contains("--help"),
                    "{case}: {stderr}"
                );
            }
        }
    }
    assert!(errors >= 15, "{errors} errors");
    // The thread count is bounded as a pipeline's workers are, by name.
    let out = tempfile::tempdir().unwrap();
    let (code, stderr) = limited(&[
        "convert".into(),
        "testdata/convert/sample.jsonl".into(),
        "-o".into(),
        out.path().join("out").display().to_string(),
        "--threads".into(),
        "4294967296".into(),
    ]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.trim_end(),
        "infeed: --threads is 4294967296: at most 1024"
    );
}

#[test]
fn a_limit_names_the_setting_the_value_and_the_limit() {
    let (code, stderr) = limited(&[
        "bench".into(),
        LM.into(),
        "--batch".into(),
        "4294967296".into(),
    ]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.trim_end(),
        "infeed: invalid setting: batch = 4294967296: at most 16777216"
    );
    let (code, stderr) = limited(&[
        "bench".into(),
        LM.into(),
        "--spec".into(),
        SPEC.into(),
        "--max-length".into(),
        "4294967296".into(),
    ]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.trim_end(),
        "infeed: invalid batch plan: the plan can produce 4294967296 batch shapes, more than 4096"
    );
}

#[test]
fn words_take_either_spelling_and_an_unknown_word_lists_them() {
    let run = |truncation: &str, cast: &str| {
        bench_json(&[
            "bench",
            LM,
            "--spec",
            SPEC,
            "--max-length",
            "64",
            "--truncation",
            truncation,
            "--cast",
            cast,
            "--batch",
            "32",
        ])["digest"]
            .clone()
    };
    let a = run("keep-start", "int32");
    assert_eq!(run("keep_start", "i32"), a);
    assert_ne!(run("keep_end", "int32"), a);
    let (code, stderr) = limited(&[
        "bench".into(),
        LM.into(),
        "--truncation".into(),
        "keep".into(),
    ]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains(
            "invalid value 'keep' for '--truncation <TRUNCATION>': truncation \"keep\": \
             expected error, keep_start or keep_end"
        ),
        "{stderr}"
    );
    let (_, stderr) = limited(&[
        "bench".into(),
        LM.into(),
        "--equal-batches".into(),
        "all".into(),
    ]);
    assert!(
        stderr.contains("equal_batches \"all\": expected drop or pad"),
        "{stderr}"
    );
}
