//! What `infeed bench` prints: the readable summary by default (also when
//! stdout is not a terminal, as here), one JSON line with `--json`.

use serde_json::Value;

use crate::support::run::{bench_json, infeed, infeed_ok};

const ARGS: [&str; 8] = [
    "bench",
    "testdata/lm-sample.tfrecord",
    "--spec",
    "input_ids:var_len:int64,attention_mask:var_len:int64",
    "--batch",
    "32",
    "--threads",
    "2",
];

#[test]
fn json_is_one_line_holding_the_keys_scripts_read() {
    let text = infeed_ok(&[&ARGS[..], &["--json"]].concat());
    assert_eq!(text.lines().count(), 1, "{text}");
    let report: Value = serde_json::from_str(&text).expect("one JSON line");
    // scripts/compare-*.sh and benches/compare/report*.py read these.
    for key in [
        "records",
        "batches",
        "seconds",
        "records_per_sec",
        "bytes_per_sec",
        "first_batch_ms",
        "peak_rss_bytes",
        "cpu_seconds",
        "digest",
        "records_per_epoch",
        "shapes",
    ] {
        assert!(report.get(key).is_some(), "{key} missing: {text}");
    }
    for stage in ["read", "records", "batch"] {
        for key in ["records", "bytes", "busy_ms", "wait_ms", "buffer_bytes"] {
            assert!(
                report["stages"][stage].get(key).is_some(),
                "stages.{stage}.{key} missing: {text}"
            );
        }
    }
    assert!(report["stages"]["consumer_wait_ms"].is_f64(), "{text}");
    assert_eq!(report["records"], 256);
    assert_eq!(report["batches"], 8);
    assert_eq!(report["records_per_epoch"], 256);
    assert_eq!(report["workers"], 2);
}

#[test]
fn the_default_is_the_readable_summary_of_the_same_run() {
    let json: Value = serde_json::from_str(&infeed_ok(&[&ARGS[..], &["--json"]].concat()))
        .expect("one JSON line");
    let text = infeed_ok(&ARGS);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("256 records in 8 batches, "), "{text}");
    let labels: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(
        labels,
        [
            "records/s",
            "MB/s",
            "first",
            "peak",
            "CPU",
            "digest",
            "records",
            "stage",
            "read",
            "records",
            "batch",
            "workers",
            "consumer",
            "limit:"
        ],
        "{text}"
    );
    // Same pipeline, same seed: the same batches.
    let digest = json["digest"].as_str().expect("digest");
    assert!(
        lines.contains(&format!("  digest       {digest}").as_str()),
        "{text}"
    );
    assert!(lines.contains(&"  workers      2"), "{text}");
    assert!(
        lines.contains(&"  records      read 256, delivered 256"),
        "{text}"
    );
}

/// The record account in `--json`, per host: on 1 to 4 hosts of the
/// padded recipe with equal batches, every host balances; under `pad` the
/// hosts read and deliver the input (both files: 512 records), under
/// `drop` they deliver the same number of full batches and count what they
/// held as dropped.
#[test]
fn the_hosts_record_accounts_add_up_to_the_input() {
    for hosts in 1..=4u64 {
        for how in ["pad", "drop"] {
            let (mut read, mut delivered, mut batches) = (0, 0, Vec::new());
            for i in 0..hosts {
                let shard = format!("{i}/{hosts}");
                let report = bench_json(&[
                    "bench",
                    "testdata/lm-sample.tfrecord",
                    "testdata/lm-sample.tfrecord.gz",
                    "--spec",
                    "input_ids:var_len:int64",
                    "--pad-to-multiple-of",
                    "64",
                    "--max-length",
                    "512",
                    "--batch",
                    "16",
                    "--shard",
                    &shard,
                    "--seed",
                    "3",
                    "--shuffle",
                    "32",
                    "--equal-batches",
                    how,
                ]);
                let account = &report["record_account"];
                assert_eq!(account["balanced"], true, "{how}, {shard}: {account}");
                let left_out = account["left_out"].as_object().unwrap();
                let others: u64 = left_out
                    .iter()
                    .filter(|(cause, _)| *cause != "dropped")
                    .map(|(_, n)| n.as_u64().unwrap())
                    .sum();
                assert_eq!(others, 0, "{how}, {shard}: {account}");
                read += account["read"].as_u64().unwrap();
                delivered += account["delivered"].as_u64().unwrap();
                assert_eq!(report["records"], account["delivered"], "{how}, {shard}");
                batches.push(report["batches"].as_u64().unwrap());
            }
            assert!(batches.iter().all(|&b| b == batches[0]), "{batches:?}");
            match how {
                "pad" => assert_eq!((read, delivered), (512, 512), "{hosts} hosts"),
                _ => {
                    // Full batches only, less than one a host short.
                    assert_eq!(delivered, hosts * batches[0] * 16, "{hosts} hosts");
                    assert!(512 - delivered < hosts * 16, "{hosts} hosts: {delivered}");
                }
            }
        }
    }
}

#[test]
fn a_mixture_reports_the_records_of_each_source() {
    let mix = [
        "bench",
        "--mix",
        "web:3:testdata/lm-sample.tfrecord",
        "--mix",
        "code:1:testdata/lm-sample.tfrecord.gz",
        "--mix-by",
        "stratified",
        "--epochs",
        "0",
        "--batches",
        "20",
        "--batch",
        "16",
        "--spec",
        "input_ids:var_len:int64",
        "--fixed-length",
        "512",
        "--shuffle",
        "64",
    ];
    let report: Value =
        serde_json::from_str(&infeed_ok(&[&mix[..], &["--json"]].concat())).unwrap();
    // 20 batches of 16, 12 + 4 in each: the counts of the last delivered
    // batch's state, however far the record thread ran ahead.
    let sources = report["sources"].as_array().unwrap();
    let (web, code) = (
        sources[0]["records"].as_u64().unwrap(),
        sources[1]["records"].as_u64().unwrap(),
    );
    assert_eq!(
        (sources[0]["name"].as_str(), sources[1]["name"].as_str()),
        (Some("web"), Some("code"))
    );
    assert_eq!((web, code), (240, 80));
    let text = infeed_ok(&mix);
    assert!(text.contains("  source       web: "), "{text}");
    assert!(
        text.contains("(75.0%)") && text.contains("(25.0%)"),
        "{text}"
    );
    // Inputs beside --mix are refused.
    let both = infeed(&[&mix[..], &["testdata/lm-sample.tfrecord"]].concat());
    assert!(!both.status.success());
    assert!(String::from_utf8_lossy(&both.stderr).contains("leave the inputs out"));
    // On a schedule: 12 + 4 for 10 steps, then 8 + 8 for 10: 200 and 120.
    let scheduled = [&mix[..], &["--mix-schedule", "10:1,1", "--json"]].concat();
    let report: Value = serde_json::from_str(&infeed_ok(&scheduled)).unwrap();
    let records = |i: usize| report["sources"][i]["records"].as_u64().unwrap();
    assert_eq!((records(0), records(1)), (200, 120));
    let bad = infeed(&[&mix[..], &["--mix-schedule", "10:1"]].concat());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("step 10: 1 weights for 2 sources"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn trace_prints_the_engines_spans_as_they_close() {
    let output = infeed(&[
        "bench",
        "testdata/lm-sample.tfrecord",
        "--spec",
        "input_ids:var_len:int64",
        "--fixed-length",
        "512",
        "--batch",
        "64",
        "--trace",
        "--json",
    ]);
    assert!(output.status.success());
    let err = String::from_utf8_lossy(&output.stderr);
    for span in [
        "infeed.read{file=\"testdata/lm-sample.tfrecord\"}",
        "infeed.group{stream=0}",
        "infeed.batch{step=0 records=64}",
    ] {
        assert!(err.contains(span), "{span} in {err}");
    }
    assert!(err.contains("close time.busy="), "{err}");
    // Without --trace, nothing.
    let quiet = infeed(&["bench", "testdata/lm-sample.tfrecord", "--json"]);
    assert!(!String::from_utf8_lossy(&quiet.stderr).contains("infeed.read"));
}
