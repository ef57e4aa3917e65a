//! `infeed bench --masks` / `--mask FEATURE:TYPE`: which mask tensors a
//! batch holds.

use crate::support::run::infeed;

fn shape_names(extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "bench",
        "testdata/lm-sample.tfrecord",
        "--json",
        "--spec",
        "input_ids:var_len:int64,attention_mask:var_len:int64",
        "--batch",
        "64",
        "--pad-to-multiple-of",
        "64",
        "--max-length",
        "512",
        "--truncation",
        "keep-start",
    ];
    args.extend_from_slice(extra);
    let output = infeed(&args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    let mut names: Vec<String> = json["shapes"][0]
        .as_object()
        .expect("a shape")
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

#[test]
fn mask_flags_choose_which_masks_a_batch_holds() {
    assert_eq!(
        shape_names(&[]),
        [
            "attention_mask",
            "attention_mask_mask",
            "input_ids",
            "input_ids_mask"
        ]
    );
    assert_eq!(
        shape_names(&["--masks", "none"]),
        ["attention_mask", "input_ids"]
    );
    assert_eq!(
        shape_names(&["--mask", "input_ids:none"]),
        ["attention_mask", "attention_mask_mask", "input_ids"]
    );
    assert_eq!(
        shape_names(&["--masks", "u8"]),
        [
            "attention_mask",
            "attention_mask_mask",
            "input_ids",
            "input_ids_mask"
        ]
    );
}

#[test]
fn a_bad_mask_word_is_named() {
    let output = infeed(&["bench", "testdata/lm-sample.tfrecord", "--masks", "int8"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("\"int8\""), "{stderr}");
}
