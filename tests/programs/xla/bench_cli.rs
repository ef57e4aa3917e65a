//! `infeed bench --program`: the step rate of a StableHLO program fed by the
//! pipeline, on the CPU plugin (`scripts/fetch-pjrt.sh` or PJRT_PLUGIN_PATH;
//! fails without it when the `xla` feature is on).
#![cfg(feature = "xla")]

use crate::support::run::infeed;

#[test]
fn bench_program_reports_step_rates() {
    let out = infeed(&[
        "bench",
        "testdata/lm-sample.tfrecord.gz",
        "--spec",
        "input_ids:var_len:int64,attention_mask:var_len:int64",
        "--shuffle",
        "100",
        "--pad-to-multiple-of",
        "64",
        "--max-length",
        "128",
        "--truncation",
        "keep-start",
        "--cast",
        "int32",
        "--batch",
        "32",
        "--drop-remainder",
        "--epochs",
        "0",
        "--batches",
        "12",
        "--program",
        "examples/token_band.mlir",
        "--program-inputs",
        "input_ids,input_ids_mask,attention_mask",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["steps"], 12);
    assert_eq!(line["shapes"], 2);
    assert_eq!(line["compiles_ahead"], 2);
    assert_eq!(line["compiles_in_loop"], 0);
    assert_eq!(line["platform"], "cpu");
    // The state starts at zeros: the first loss is ln 2.
    let first = line["first_loss"].as_f64().unwrap();
    assert!((first - std::f64::consts::LN_2).abs() < 1e-5, "{first}");
    for key in ["steps_per_sec", "steps_per_sec_one_batch_reused"] {
        assert!(line[key].as_f64().unwrap() > 0.0, "{key}");
    }
    let wait = line["input_wait_fraction"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&wait), "{wait}");
}

#[test]
fn bench_program_with_a_missing_input_is_an_error() {
    let out = infeed(&[
        "bench",
        "testdata/lm-sample.tfrecord.gz",
        "--spec",
        "input_ids:var_len:int64",
        "--fixed-length",
        "64",
        "--truncation",
        "keep-start",
        "--cast",
        "int32",
        "--batch",
        "32",
        "--batches",
        "2",
        "--program",
        "examples/token_band.mlir",
        "--program-inputs",
        "input_ids,labels",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--program-inputs: no batch tensor \"labels\""),
        "{stderr}"
    );
}
