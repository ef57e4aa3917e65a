//! The figures of `infeed bench` that scripts/compare-tfdata.sh relies on to
//! check that infeed and tf.data did the same work: records per epoch, the
//! set of batch shapes, CPU seconds. Expectations come from the lengths that
//! TensorFlow itself read back (testdata/lm-sample.tfrecord.json).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::run::bench_json;
use crate::support::testdata;

fn bench(args: &[&str]) -> Value {
    bench_json(&[&["bench"], args].concat())
}

/// Token counts of the 256 records of lm-sample, in file order.
fn lengths() -> Vec<usize> {
    std::fs::read_to_string(testdata("lm-sample.tfrecord.json"))
        .expect("read lm-sample json")
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("json line");
            v["input_ids"]["int64"].as_array().expect("ids").len()
        })
        .collect()
}

fn shape_set(report: &Value) -> BTreeSet<String> {
    report["shapes"]
        .as_array()
        .expect("shapes")
        .iter()
        .map(Value::to_string)
        .collect()
}

const LM_SPEC: &str = "input_ids:var_len:int64,attention_mask:var_len:int64";

#[test]
fn padded_batches_report_each_shape_they_emitted_and_the_records_per_epoch() {
    let report = bench(&[
        "testdata/lm-sample.tfrecord",
        "--spec",
        LM_SPEC,
        "--batch",
        "100",
        "--epochs",
        "2",
        "--pad-to-multiple-of",
        "64",
        "--max-length",
        "512",
        "--cast",
        "int32",
        "--no-digest",
    ]);
    assert_eq!(report["records_per_epoch"], 256);
    assert_eq!(report["records"], 512);
    // No shuffle: two epochs in file order, batches crossing the boundary;
    // the last, partial batch (12 records) keeps the static 100 rows.
    let two_epochs: Vec<usize> = [lengths(), lengths()].concat();
    let expected: BTreeSet<String> = two_epochs
        .chunks(100)
        .map(|rows| {
            let longest = rows.iter().max().copied().unwrap_or(0);
            let width = longest.div_ceil(64).clamp(1, 8) * 64;
            let dims = json!([100, width]);
            json!({
                "input_ids": dims, "input_ids_mask": dims,
                "attention_mask": dims, "attention_mask_mask": dims,
            })
            .to_string()
        })
        .collect();
    assert_eq!(shape_set(&report), expected);
    assert!(report["cpu_seconds"].as_f64().is_some_and(|s| s >= 0.0));
}

#[test]
fn raw_and_parsed_batches_report_rows_and_ragged_dimensions() {
    let raw = bench(&["testdata/lm-sample.tfrecord", "--batch", "100"]);
    let expected: BTreeSet<String> = [json!({"records": [100]}), json!({"records": [56]})]
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(shape_set(&raw), expected);
    assert_eq!(raw["records_per_epoch"], 256);

    // Stopped by --batches: a part of an epoch, so no records_per_epoch.
    let parsed = bench(&[
        "testdata/lm-sample.tfrecord",
        "--spec",
        LM_SPEC,
        "--batch",
        "100",
        "--batches",
        "1",
    ]);
    let ragged = json!([100, null]);
    let expected: BTreeSet<String> = [json!({"input_ids": ragged, "attention_mask": ragged})]
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(shape_set(&parsed), expected);
    assert_eq!(parsed["records_per_epoch"], Value::Null);
}

#[test]
fn output_bytes_count_every_value_and_split_emitted_and_raw_batches_have_none() {
    // Parsed, not padded: per batch each feature writes its int64 values and
    // rows + 1 row splits (usize); 256 records in batches of 100, 100, 56.
    let parsed = bench(&[
        "testdata/lm-sample.tfrecord",
        "--spec",
        LM_SPEC,
        "--batch",
        "100",
        "--no-digest",
    ]);
    let tokens: usize = lengths().iter().sum();
    let splits = (101 + 101 + 57) * std::mem::size_of::<usize>();
    assert_eq!(parsed["batches"], 3);
    assert_eq!(parsed["output_bytes"], json!(2 * (tokens * 8 + splits)));

    let raw = bench(&["testdata/lm-sample.tfrecord", "--batch", "100"]);
    assert_eq!(raw["output_bytes"], Value::Null);
}

/// `--filter-length` keeps exactly the records of those token counts, and
/// the rest are counted as filtered.
#[test]
fn filter_length_keeps_the_records_of_those_lengths() {
    let lm = testdata("lm-sample.tfrecord").display().to_string();
    let kept = lengths()
        .iter()
        .filter(|&&n| (100..=200).contains(&n))
        .count() as u64;
    assert!(kept > 0 && kept < 256, "{kept}");
    let r = bench(&[
        &lm,
        "--spec",
        LM_SPEC,
        "--filter-length",
        "input_ids:100:200",
        "--max-length",
        "512",
        "--batch",
        "8",
    ]);
    assert_eq!(r["records"], kept);
    assert_eq!(r["record_account"]["left_out"]["filtered"], 256 - kept);
    // A bound left out is no bound.
    let r = bench(&[
        &lm,
        "--spec",
        LM_SPEC,
        "--filter-length",
        "input_ids::",
        "--max-length",
        "512",
    ]);
    assert_eq!(r["records"], 256);
}
