//! TensorFlow as the oracle of the pipeline: TensorFlow
//! writes the Example files, decodes them with `tf.io.parse_example` and
//! groups them with tf.data's `bucket_by_sequence_length`
//! (`tests/engine/pipeline/tf_oracle.py`, run by `$INFEED_PYTHON`); the pipeline's
//! batches over the same files must hold exactly TensorFlow's values (floats
//! by their bits), masks exactly TensorFlow's lengths.
//!
//! Needs TensorFlow: ignored by default, run by `scripts/test.sh` (or
//! `INFEED_PYTHON=... cargo test --test engine pipeline::tf_oracle -- --include-ignored`).

use std::process::Command;

use infeed::batch::{Batch, Tensor, TensorType};
use infeed::pipeline::Pipeline;
use infeed::spec::{DType, DefaultValue, FeatureSpec};
use serde_json::Value;

/// What `tf_oracle.py ARGS` prints: one JSON value per batch.
fn tf_oracle(args: &[&str]) -> Vec<Value> {
    let python = std::env::var("INFEED_PYTHON").unwrap_or_else(|_| {
        panic!(
            "INFEED_PYTHON is not set: these tests need a Python with tensorflow-cpu; \
             run scripts/test.sh, which creates .venv and sets it"
        )
    });
    let script = crate::support::repo("tests/engine/pipeline/tf_oracle.py");
    let out = Command::new(&python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (INFEED_PYTHON): {e}"));
    assert!(
        out.status.success(),
        "tf_oracle.py {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("tf_oracle.py prints UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// A JSON array (nested or not) of integers, flattened, as u64 (i64 values
/// by their two's complement, float32 values already given as bits).
fn flat(v: &Value) -> Vec<u64> {
    match v {
        Value::Array(items) => items.iter().flat_map(flat).collect(),
        Value::Number(n) => vec![
            n.as_i64()
                .map(|i| i as u64)
                .or_else(|| n.as_u64())
                .unwrap_or_else(|| panic!("not an integer: {n}")),
        ],
        other => panic!("not a number or array: {other}"),
    }
}

/// A tensor's values as u64: integers by two's complement, f32 by bits.
fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        TensorType::I64 => t
            .values::<i64>()
            .unwrap()
            .iter()
            .map(|&v| v as u64)
            .collect(),
        TensorType::I32 => t
            .values::<i32>()
            .unwrap()
            .iter()
            .map(|&v| i64::from(v) as u64)
            .collect(),
        TensorType::F32 => t
            .values::<f32>()
            .unwrap()
            .iter()
            .map(|v| u64::from(v.to_bits()))
            .collect(),
        TensorType::U8 => t
            .values::<u8>()
            .unwrap()
            .iter()
            .map(|&v| v.into())
            .collect(),
        TensorType::BF16 => t
            .values::<infeed::batch::Bf16>()
            .unwrap()
            .iter()
            .map(|v| v.0.into())
            .collect(),
    }
}

/// Tensor `name`'s first `rows` rows equal `want` (flattened) and every
/// later (padding) row is zeros.
fn assert_rows(batch: &Batch, name: &str, rows: usize, want: &[u64], at: usize) {
    let t = &batch[name];
    let values = bits(t);
    let per_row = values.len() / t.shape()[0];
    assert_eq!(&values[..rows * per_row], want, "batch {at}, {name}");
    assert!(
        values[rows * per_row..].iter().all(|&v| v == 0),
        "batch {at}, {name}: padding rows are not zeros"
    );
}

/// A padded variable-length tensor `name` `[B, width]` and its mask against
/// TensorFlow's dense rows `dense` (as wide as the longest) and `lengths`:
/// real values equal, then zeros; mask 1 on exactly `lengths[r]` values.
fn assert_padded(batch: &Batch, name: &str, dense: &[Vec<u64>], lengths: &[usize], at: usize) {
    let t = &batch[name];
    let (b, width) = (t.shape()[0], t.shape()[1]);
    let values = bits(t);
    let mask = bits(&batch[format!("{name}_mask").as_str()]);
    assert_eq!(batch[format!("{name}_mask").as_str()].shape(), [b, width]);
    for r in 0..b {
        let row = &values[r * width..(r + 1) * width];
        let real = lengths.get(r).copied().unwrap_or(0);
        let mut want = dense.get(r).cloned().unwrap_or_default();
        assert!(
            want.len() <= width,
            "batch {at}, {name}: TensorFlow's row is wider"
        );
        want.resize(width, 0);
        assert_eq!(row, want, "batch {at}, {name} row {r}");
        let want_mask: Vec<u64> = (0..width).map(|j| u64::from(j < real)).collect();
        assert_eq!(
            &mask[r * width..(r + 1) * width],
            want_mask,
            "batch {at}, {name}_mask row {r} (length {real})"
        );
    }
}

fn rows_of(v: &Value) -> Vec<Vec<u64>> {
    v.as_array()
        .unwrap_or_else(|| panic!("not rows: {v}"))
        .iter()
        .map(flat)
        .collect()
}

fn lengths_of(v: &Value) -> Vec<usize> {
    flat(v).into_iter().map(|n| n as usize).collect()
}

/// parse → pad → batch, no shuffle, over a plain and a GZIP file that
/// TensorFlow wrote: FixedLen features with defaults (some records lack
/// them), VarLen int64 and float features (some empty or missing), a raw
/// bytes feature decoded to u8, and a feature the spec leaves out.
#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn parsed_padded_batches_hold_exactly_tensorflows_parse_example_values() {
    let dir = tempfile::tempdir().unwrap();
    let tf = tf_oracle(&["parse", dir.path().to_str().unwrap()]);
    let files =
        ["part-0.tfrecord", "part-1.tfrecord.gz"].map(|f| dir.path().join(f).display().to_string());
    // The spec of tf_oracle.py's parse_example.
    let spec = FeatureSpec::new()
        .fixed_len_with_default("label", DType::Int64, &[], DefaultValue::Int64(vec![-1]))
        .unwrap()
        .fixed_len_with_default(
            "weights",
            DType::Float32,
            &[3],
            DefaultValue::Float32(vec![0.5, -0.25, 2.0]),
        )
        .unwrap()
        .var_len("ids", DType::Int64)
        .var_len("scores", DType::Float32)
        .fixed_len("pixels", DType::Bytes, &[]);
    let batches: Vec<Batch> = Pipeline::from_files(files)
        .unwrap()
        .threads(3)
        .parse(spec)
        .decode_raw("pixels", &[12])
        .pad_to_multiple_of(8)
        .max_length(24) // static shapes need a cap; no row is longer than 22
        .batch(16, false)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // 37 + 29 records: four full batches and one of 2 real rows.
    assert_eq!(batches.len(), tf.len());
    assert_eq!(
        batches.iter().map(|b| b.real_rows).collect::<Vec<_>>(),
        [16, 16, 16, 16, 2]
    );
    for (at, (batch, want)) in batches.iter().zip(&tf).enumerate() {
        let rows = want["label"].as_array().unwrap().len();
        assert_eq!(batch.real_rows, rows, "batch {at}");
        assert_eq!(batch["label"].shape(), [16]);
        assert_eq!(batch["weights"].shape(), [16, 3]);
        assert_eq!(batch["pixels"].shape(), [16, 12]);
        assert_rows(batch, "label", rows, &flat(&want["label"]), at);
        assert_rows(batch, "weights", rows, &flat(&want["weights"]), at);
        assert_rows(batch, "pixels", rows, &flat(&want["pixels"]), at);
        // Both variable-length features share one padded length: the
        // longest row of either (at least 1), rounded up to 8.
        let lengths: Vec<Vec<usize>> = ["ids", "scores"]
            .iter()
            .map(|n| lengths_of(&want[*n]["lengths"]))
            .collect();
        let longest = lengths.iter().flatten().copied().max().unwrap_or(0);
        assert_eq!(
            batch["ids"].shape()[1],
            longest.max(1).div_ceil(8) * 8,
            "batch {at}"
        );
        for (name, lengths) in ["ids", "scores"].iter().zip(&lengths) {
            let dense = rows_of(&want[*name]["dense"]);
            assert_padded(batch, name, &dense, lengths, at);
        }
    }
}

/// `bucket_by_length` beside tf.data's `bucket_by_sequence_length` with
/// `pad_to_bucket_boundary=True` on the same records: tf.data's
/// boundaries [9, 17, 33] are lengths [0, 8], [9, 16], [17, 32], i.e.
/// infeed's boundaries [8, 16] and max_length 32 (tf.data's fourth bucket,
/// 33 and longer, gets no record), batch sizes 8, 6, 4, every row padded to
/// its bucket's longest length.
///
/// Both are deterministic in the same way, so the batches are compared in
/// order, not as a multiset: records go to their bucket in file order and a
/// bucket's batch is emitted the moment it fills (infeed decides grouping on
/// one thread and reorders the workers' batches; tf.data's `group_by_window`
/// emits a window as soon as it holds its batch size); at the end of the
/// data the partial buckets come out in bucket order (infeed by design;
/// `group_by_window` flushes its groups, kept in a `std::map` by key, in key
/// order).
fn bucketed_batches_equal_tf_datas(drop_remainder: bool) {
    let dir = tempfile::tempdir().unwrap();
    let drop = if drop_remainder { "1" } else { "0" };
    let tf = tf_oracle(&["bucket", dir.path().to_str().unwrap(), drop]);
    let files =
        ["lm-0.tfrecord", "lm-1.tfrecord.gz"].map(|f| dir.path().join(f).display().to_string());
    let p = Pipeline::from_files(files)
        .unwrap()
        .threads(3)
        .parse(FeatureSpec::new().var_len("ids", DType::Int64))
        .max_length(32)
        .bucket_by_length("ids", &[8, 16], &[8, 6, 4])
        .drop_remainder(drop_remainder);
    let batches: Vec<Batch> = p.build().unwrap().map(Result::unwrap).collect();
    assert_eq!(batches.len(), tf.len());
    let mut records = 0;
    for (at, (batch, want)) in batches.iter().zip(&tf).enumerate() {
        let dense = rows_of(&want["ids"]);
        let width = want["ids"][0].as_array().unwrap().len();
        let (size, ours) = (batch["ids"].shape()[0], batch["ids"].shape()[1]);
        // Same bucket: same padded length and batch size.
        assert_eq!(ours, width, "batch {at}: padded length");
        assert_eq!(
            size,
            match width {
                8 => 8,
                16 => 6,
                32 => 4,
                w => panic!("tf.data padded to {w}"),
            },
            "batch {at}: batch size"
        );
        assert_eq!(batch.real_rows, dense.len(), "batch {at}: rows");
        // tf.data's mask: ones_like(ids), padded with zeros.
        let lengths: Vec<usize> = rows_of(&want["mask"])
            .iter()
            .map(|row| row.iter().filter(|&&m| m == 1).count())
            .collect();
        assert_padded(batch, "ids", &dense, &lengths, at);
        records += dense.len();
    }
    if !drop_remainder {
        assert_eq!(records, 120 + 90);
    }
}

#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn bucketed_batches_equal_tf_datas_bucket_by_sequence_length() {
    bucketed_batches_equal_tf_datas(false);
}

#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn bucketed_batches_equal_tf_datas_bucket_by_sequence_length_dropping_remainders() {
    bucketed_batches_equal_tf_datas(true);
}
