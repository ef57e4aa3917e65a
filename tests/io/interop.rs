//! Interoperability with TensorFlow itself, both ways: infeed reads what
//! TensorFlow writes, and TensorFlow reads what infeed writes.
//!
//! Always on: the files TensorFlow wrote into `testdata/` (by
//! `testdata/make_testdata.py`) are read by infeed's `RecordReader` and decoded with
//! prost; every record must equal its line in the file's `.json` (the `infeed cat`
//! format), with exact framing offsets, and the corrupt file must fail (or be skipped)
//! exactly at its corrupt record.
//!
//! Needs TensorFlow (ignored by default; `scripts/test.sh` runs them): infeed's
//! `RecordWriter` writes Examples and SequenceExamples (plain, GZIP, ZLIB) and TensorFlow
//! reads them back through `scripts/tf_read.py` (run by `$INFEED_PYTHON`); every value
//! must be equal.
//!
//! Floats are compared by their f32 bits (so `-0.0 != 0.0`), after parsing the JSON
//! number: the JSON holds the exact double of each float32, and a double that is off by
//! one ulp still rounds to the same float32, so the comparison is exact for float32
//! values whatever the JSON parser's rounding.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use infeed::example::proto::{
    BytesList, Example, Feature, FeatureList, FeatureLists, Features, FloatList, Int64List,
    SequenceExample, feature::Kind,
};
use infeed::record::{Compression, CorruptPolicy, ErrorKind, ReadOptions, Record, RecordReader};
use prost::Message as _;
use serde_json::{Map, Number, Value};

use crate::support::tfrecord::{read_file, write_file};
use crate::support::{repo, testdata};

// ---------------------------------------------------------------------------
// Files and expected values.

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .len()
}

/// The JSON Lines of a testdata `.json` file, one value per record.
fn expected_lines(name: &str) -> Vec<Value> {
    let path = testdata(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{} line {}: {e}", path.display(), i + 1))
        })
        .collect()
}

fn decode_example(r: &Record) -> Example {
    Example::decode(r.data.clone())
        .unwrap_or_else(|e| panic!("Example at offset {}: {e}", r.offset))
}

fn decode_sequence(r: &Record) -> SequenceExample {
    SequenceExample::decode(r.data.clone())
        .unwrap_or_else(|e| panic!("SequenceExample at offset {}: {e}", r.offset))
}

// ---------------------------------------------------------------------------
// prost values -> the `infeed cat` JSON format (the CLI has its own; this one is
// independent so the two check each other through the committed .json files).

fn float_json(v: f32) -> Value {
    Value::Number(Number::from_f64(f64::from(v)).unwrap_or_else(|| panic!("{v} has no JSON form")))
}

fn tagged(tag: &str, list: Vec<Value>) -> Value {
    let mut m = Map::new();
    m.insert(tag.to_owned(), Value::Array(list));
    Value::Object(m)
}

fn value_json(f: &Feature) -> Value {
    match &f.kind {
        None => Value::Object(Map::new()),
        Some(Kind::Int64List(l)) => tagged("int64", l.value.iter().map(|&v| v.into()).collect()),
        Some(Kind::FloatList(l)) => {
            tagged("float", l.value.iter().map(|&v| float_json(v)).collect())
        }
        Some(Kind::BytesList(l)) => tagged(
            "bytes",
            l.value.iter().map(|v| BASE64.encode(v).into()).collect(),
        ),
    }
}

fn features_json(f: Option<&Features>) -> Value {
    let map: Map<String, Value> = f
        .map(|f| {
            f.feature
                .iter()
                .map(|(k, v)| (k.clone(), value_json(v)))
                .collect()
        })
        .unwrap_or_default();
    Value::Object(map)
}

fn example_json(e: &Example) -> Value {
    features_json(e.features.as_ref())
}

fn sequence_json(s: &SequenceExample) -> Value {
    let lists: Map<String, Value> = s
        .feature_lists
        .as_ref()
        .map(|fl| {
            fl.feature_list
                .iter()
                .map(|(k, l)| {
                    (
                        k.clone(),
                        Value::Array(l.feature.iter().map(value_json).collect()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut m = Map::new();
    m.insert("context".to_owned(), features_json(s.context.as_ref()));
    m.insert("feature_lists".to_owned(), Value::Object(lists));
    Value::Object(m)
}

/// Exact equality of two JSON values; floats compared by f32 bits, ints exactly, and a
/// float never equals an int. Panics naming the path of the first difference.
fn assert_same(path: &str, expected: &Value, actual: &Value) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let ek: BTreeSet<&String> = e.keys().collect();
            let ak: BTreeSet<&String> = a.keys().collect();
            assert_eq!(ek, ak, "{path}: keys differ");
            for (k, ev) in e {
                assert_same(&format!("{path}.{k}"), ev, &a[k]);
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{path}: lengths differ");
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                assert_same(&format!("{path}[{i}]"), ev, av);
            }
        }
        (Value::Number(e), Value::Number(a)) if e.is_f64() || a.is_f64() => {
            assert!(
                e.is_f64() && a.is_f64(),
                "{path}: float versus integer: expected {e}, got {a}"
            );
            let bits = |n: &Number| n.as_f64().map(|x| (x as f32).to_bits());
            assert_eq!(bits(e), bits(a), "{path}: expected {e}, got {a}");
        }
        _ => assert_eq!(expected, actual, "{path}"),
    }
}

fn assert_all_same(what: &str, expected: &[Value], actual: &[Value]) {
    assert_eq!(expected.len(), actual.len(), "{what}: record counts differ");
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        assert_same(&format!("{what} record {i}"), e, a);
    }
}

/// Records follow each other with no gap: offsets 0, 16 + len0, ..., ending at `end`.
fn assert_contiguous(what: &str, records: &[Record], end: u64) {
    let mut next = 0u64;
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, next, "{what} record {i}: offset");
        next += 16 + r.data.len() as u64;
    }
    assert_eq!(next, end, "{what}: records end before the stream does");
}

// ---------------------------------------------------------------------------
// Always on: files TensorFlow wrote, read by infeed.

/// Reads a plain TF-written file of Examples and checks every value and offset.
fn check_plain_examples(file: &str, json: &str, count: usize) -> Vec<Record> {
    let path = testdata(file);
    let records = read_file(&path);
    assert_eq!(records.len(), count, "{file}: record count");
    assert_contiguous(file, &records, file_len(&path));
    let actual: Vec<Value> = records
        .iter()
        .map(|r| example_json(&decode_example(r)))
        .collect();
    assert_all_same(file, &expected_lines(json), &actual);
    records
}

/// A compressed file yields exactly its plain twin's records: bytes and offsets.
fn check_compressed_twin(file: &str, plain: &str, json: &str, count: usize) {
    let twin = check_plain_examples(plain, json, count);
    let records = read_file(testdata(file));
    assert_eq!(records.len(), twin.len(), "{file}: record count");
    for (i, (r, t)) in records.iter().zip(&twin).enumerate() {
        assert_eq!(r.offset, t.offset, "{file} record {i}: offset");
        assert_eq!(r.data, t.data, "{file} record {i}: bytes");
    }
}

#[test]
fn tf_examples_plain_decode_exactly() {
    let records = check_plain_examples("examples.tfrecord", "examples.tfrecord.json", 6);
    // Record 3 was hand-encoded with unpacked lists, so it is not what prost would write.
    let reencoded = decode_example(&records[3]).encode_to_vec();
    assert_ne!(&records[3].data[..], &reencoded[..]);
}

#[test]
fn tf_examples_gzip_decode_exactly() {
    check_compressed_twin(
        "examples.tfrecord.gz",
        "examples.tfrecord",
        "examples.tfrecord.json",
        6,
    );
}

#[test]
fn tf_examples_zlib_decode_exactly() {
    check_compressed_twin(
        "examples.tfrecord.zz",
        "examples.tfrecord",
        "examples.tfrecord.json",
        6,
    );
}

#[test]
fn tf_sequence_examples_decode_exactly() {
    let path = testdata("sequence.tfrecord");
    let records = read_file(&path);
    assert_eq!(records.len(), 3);
    assert_contiguous("sequence.tfrecord", &records, file_len(&path));
    let actual: Vec<Value> = records
        .iter()
        .map(|r| sequence_json(&decode_sequence(r)))
        .collect();
    assert_all_same(
        "sequence.tfrecord",
        &expected_lines("sequence.tfrecord.json"),
        &actual,
    );
}

#[test]
fn unusual_protobuf_encodings_decode_by_protobuf_rules() {
    // Mixed packed/unpacked chunks, repeated map keys, merged messages, a oneof set
    // twice: see testdata/README.md (TF's fast parse_example differs on several).
    check_plain_examples("packing.tfrecord", "packing.tfrecord.json", 8);
}

#[test]
fn lm_sample_plain_decodes_exactly() {
    check_plain_examples("lm-sample.tfrecord", "lm-sample.tfrecord.json", 256);
}

#[test]
fn lm_sample_gzip_decodes_exactly() {
    check_compressed_twin(
        "lm-sample.tfrecord.gz",
        "lm-sample.tfrecord",
        "lm-sample.tfrecord.json",
        256,
    );
}

/// `corrupt.tfrecord.offsets.json`, as written by make_testdata.py.
struct CorruptLayout {
    offsets: Vec<u64>,
    lengths: Vec<u64>,
    corrupt: usize,
    stored: u32,
    computed: u32,
    file_length: u64,
}

fn corrupt_layout() -> CorruptLayout {
    let path = testdata("corrupt.tfrecord.offsets.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("offsets.json is JSON");
    let u64_at = |v: &Value, key: &str| {
        v[key]
            .as_u64()
            .unwrap_or_else(|| panic!("offsets.json: {key} is not an unsigned integer"))
    };
    let records = v["records"].as_array().expect("offsets.json: records");
    let layout = CorruptLayout {
        offsets: records.iter().map(|r| u64_at(r, "offset")).collect(),
        lengths: records.iter().map(|r| u64_at(r, "length")).collect(),
        corrupt: u64_at(&v, "corrupt_index") as usize,
        stored: u64_at(&v, "stored_masked_crc") as u32,
        computed: u64_at(&v, "computed_masked_crc") as u32,
        file_length: u64_at(&v, "file_length"),
    };
    // The file these tests were written for: 5 records, record 2 corrupt, record 3 empty.
    assert_eq!(layout.offsets, [0, 59, 117, 211, 227]);
    assert_eq!(layout.lengths, [43, 42, 78, 0, 43]);
    assert_eq!(layout.corrupt, 2);
    assert_eq!(layout.file_length, 286);
    assert_eq!(layout.file_length, file_len(&testdata("corrupt.tfrecord")));
    layout
}

/// The payload of record `i` as it lies in the file.
fn payload<'a>(raw: &'a [u8], layout: &CorruptLayout, i: usize) -> &'a [u8] {
    let start = (layout.offsets[i] + 12) as usize;
    &raw[start..start + layout.lengths[i] as usize]
}

#[test]
fn corrupt_record_is_a_data_crc_error_at_its_offset() {
    let layout = corrupt_layout();
    let path = testdata("corrupt.tfrecord");
    let raw = std::fs::read(&path).expect("read corrupt.tfrecord");
    let mut reader = RecordReader::open(&path, &ReadOptions::default()).expect("open");
    for i in 0..layout.corrupt {
        let r = match reader.next() {
            Some(Ok(r)) => r,
            Some(Err(e)) => panic!("record {i} is intact but gave {e}"),
            None => panic!("the reader ended before record {i}"),
        };
        assert_eq!(r.offset, layout.offsets[i], "record {i}: offset");
        assert_eq!(&r.data[..], payload(&raw, &layout, i), "record {i}: bytes");
    }
    let err = match reader.next() {
        Some(Err(e)) => e,
        Some(Ok(r)) => panic!("the corrupt record came out as data (offset {})", r.offset),
        None => panic!("the reader ended instead of reporting the corrupt record"),
    };
    assert_eq!(err.offset, layout.offsets[layout.corrupt], "error offset");
    assert!(
        err.path.ends_with("corrupt.tfrecord"),
        "error path {:?} does not name the file",
        err.path
    );
    match &err.kind {
        ErrorKind::DataCrc {
            stored, computed, ..
        } => {
            assert_eq!(*stored, layout.stored, "stored (masked) CRC");
            assert_eq!(*computed, layout.computed, "computed (masked) CRC");
        }
        other => panic!("expected a DataCrc error, got {other:?}"),
    }
}

#[test]
fn corrupt_record_is_skipped_and_counted_with_skip_policy() {
    let layout = corrupt_layout();
    let path = testdata("corrupt.tfrecord");
    let raw = std::fs::read(&path).expect("read corrupt.tfrecord");
    let opts = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
    let mut reader = RecordReader::open(&path, &opts).expect("open");
    let records: Vec<Record> = reader
        .by_ref()
        .map(|r| r.unwrap_or_else(|e| panic!("skip policy still gave an error: {e}")))
        .collect();
    let good: Vec<usize> = (0..layout.offsets.len())
        .filter(|&i| i != layout.corrupt)
        .collect();
    let offsets: Vec<u64> = records.iter().map(|r| r.offset).collect();
    let want: Vec<u64> = good.iter().map(|&i| layout.offsets[i]).collect();
    assert_eq!(offsets, want, "offsets of the records that survive");
    for (r, &i) in records.iter().zip(&good) {
        assert_eq!(&r.data[..], payload(&raw, &layout, i), "record {i}: bytes");
    }
    assert!(
        records[2].data.is_empty(),
        "record 3 is a zero-length record"
    );
    let actual: Vec<Value> = records
        .iter()
        .map(|r| example_json(&decode_example(r)))
        .collect();
    assert_all_same(
        "corrupt.tfrecord",
        &expected_lines("corrupt.tfrecord.json"),
        &actual,
    );
    let skipped = reader.skipped();
    assert_eq!(skipped.records, 1, "records skipped");
    assert_eq!(
        skipped.bytes,
        layout.offsets[layout.corrupt + 1] - layout.offsets[layout.corrupt],
        "bytes skipped: the whole corrupt record, header to footer"
    );
}

// ---------------------------------------------------------------------------
// Needs TensorFlow: files infeed wrote, read by TensorFlow.

fn python() -> String {
    std::env::var("INFEED_PYTHON").unwrap_or_else(|_| {
        panic!(
            "INFEED_PYTHON is not set: these tests need a Python with tensorflow-cpu; \
             run scripts/test.sh, which creates .venv and sets it"
        )
    })
}

/// What TensorFlow reads from each `(path, compression)` of `reads` (or,
/// with `glob`, from the files each pattern takes): one JSON value per
/// record, file by file, from one run of scripts/tf_read.py (TensorFlow
/// takes seconds to import, so a test reads all its files in one).
pub(crate) fn tf_read(reads: &[(&Path, &str)], sequence: bool, glob: bool) -> Vec<Vec<Value>> {
    let python = python();
    let mut cmd = Command::new(&python);
    cmd.arg(repo("scripts/tf_read.py"));
    for (path, compression) in reads {
        cmd.arg(path).arg(compression);
    }
    if sequence {
        cmd.arg("--sequence");
    }
    if glob {
        cmd.arg("--glob");
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (INFEED_PYTHON): {e}"));
    assert!(
        out.status.success(),
        "TensorFlow could not read {reads:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("tf_read.py prints UTF-8");
    // Each file's records end with an empty line.
    let mut files = vec![Vec::new()];
    for (i, line) in stdout.lines().enumerate() {
        if line.is_empty() {
            files.push(Vec::new());
            continue;
        }
        let value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("tf_read.py line {}: {e}: {line}", i + 1));
        files.last_mut().expect("one").push(value);
    }
    assert_eq!(files.pop(), Some(Vec::new()), "tf_read.py ends each file");
    assert_eq!(files.len(), reads.len(), "tf_read.py read every file");
    files
}

/// `payloads` written by infeed into a file of each compression, and what
/// TensorFlow reads from each: (tf_read.py's name of the compression,
/// values).
fn written_and_read_by_tf(
    stem: &str,
    payloads: &[Vec<u8>],
    sequence: bool,
) -> Vec<(&'static str, Vec<Value>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<_> = compressions()
        .into_iter()
        .map(|(compression, name, ext)| {
            let path = dir.path().join(format!("{stem}.{ext}"));
            write_file(&path, payloads, compression);
            (path, name)
        })
        .collect();
    let reads: Vec<_> = files.iter().map(|(p, n)| (p.as_path(), *n)).collect();
    let read = tf_read(&reads, sequence, false);
    files.iter().map(|(_, name)| *name).zip(read).collect()
}

/// (compression, tf_read.py's name for it, file extension).
fn compressions() -> [(Compression, &'static str, &'static str); 3] {
    [
        (Compression::None, "none", "tfrecord"),
        (Compression::Gzip, "gzip", "tfrecord.gz"),
        (Compression::Zlib, "zlib", "tfrecord.zz"),
    ]
}

/// splitmix64: a fixed, seeded stream for generated test values.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn len(&mut self, max: u64) -> usize {
        self.below(max + 1) as usize
    }
}

const EDGE_I64: [i64; 10] = [
    i64::MIN,
    i64::MAX,
    0,
    -1,
    1,
    i32::MAX as i64,
    i32::MAX as i64 + 1,
    i32::MIN as i64,
    i32::MIN as i64 - 1,
    1 << 53,
];

const EDGE_F32: [f32; 9] = [
    0.0,
    -0.0,
    f32::MIN_POSITIVE,
    f32::from_bits(1),           // the smallest subnormal
    f32::from_bits(0x8000_0001), // and its negative
    f32::MAX,
    f32::MIN,
    0.1,
    f32::EPSILON,
];

fn random_i64(rng: &mut SplitMix64) -> i64 {
    match rng.below(4) {
        0 => EDGE_I64[rng.below(EDGE_I64.len() as u64) as usize],
        1 => rng.below(50_001) as i64,
        _ => rng.next_u64() as i64,
    }
}

fn random_f32(rng: &mut SplitMix64) -> f32 {
    if rng.below(4) == 0 {
        return EDGE_F32[rng.below(EDGE_F32.len() as u64) as usize];
    }
    loop {
        let v = f32::from_bits(rng.next_u64() as u32);
        if v.is_finite() {
            return v;
        }
    }
}

fn random_bytes(rng: &mut SplitMix64) -> Vec<u8> {
    let n = if rng.below(10) == 0 { 300 } else { rng.len(40) };
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

fn random_feature(rng: &mut SplitMix64) -> Feature {
    let kind = match rng.below(10) {
        0 => None,
        1..=3 => Some(Kind::Int64List(Int64List {
            value: (0..rng.len(20)).map(|_| random_i64(rng)).collect(),
        })),
        4..=6 => Some(Kind::FloatList(FloatList {
            value: (0..rng.len(20)).map(|_| random_f32(rng)).collect(),
        })),
        _ => Some(Kind::BytesList(BytesList {
            value: (0..rng.len(5)).map(|_| random_bytes(rng)).collect(),
        })),
    };
    Feature { kind }
}

const NAMES: [&str; 8] = [
    "label",
    "input_ids",
    "text",
    "a",
    "with space",
    "ünïcødé",
    "名前",
    "a_rather_long_feature_name_that_needs_more_than_one_varint_byte_of_length_0123456789_0123456789_0123456789",
];

fn random_name(rng: &mut SplitMix64) -> String {
    if rng.below(2) == 0 {
        NAMES[rng.below(NAMES.len() as u64) as usize].to_owned()
    } else {
        format!("f{}", rng.below(100))
    }
}

fn random_features(rng: &mut SplitMix64) -> Features {
    let feature = (0..rng.len(6))
        .map(|_| (random_name(rng), random_feature(rng)))
        .collect();
    Features { feature }
}

fn random_example(rng: &mut SplitMix64) -> Example {
    if rng.below(20) == 0 {
        return Example::default(); // no Features at all: a zero-length record
    }
    Example {
        features: Some(random_features(rng)),
    }
}

fn random_sequence(rng: &mut SplitMix64) -> SequenceExample {
    let context = (rng.below(5) != 0).then(|| random_features(rng));
    let feature_list = (0..rng.len(4))
        .map(|_| {
            let steps = (0..rng.len(5)).map(|_| random_feature(rng)).collect();
            (random_name(rng), FeatureList { feature: steps })
        })
        .collect();
    SequenceExample {
        context,
        feature_lists: (rng.below(5) != 0).then_some(FeatureLists { feature_list }),
    }
}

/// infeed writes the committed Examples (as prost re-encodes them), the lm sample and
/// 200 generated Examples, plain, GZIP and ZLIB; TensorFlow must read back exactly the
/// same values from each.
#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn tensorflow_reads_examples_infeed_wrote_plain_gzip_and_zlib() {
    let mut examples: Vec<Example> = Vec::new();
    let mut expected: Vec<Value> = Vec::new();
    for (file, json) in [
        ("examples.tfrecord", "examples.tfrecord.json"),
        ("packing.tfrecord", "packing.tfrecord.json"),
        ("lm-sample.tfrecord", "lm-sample.tfrecord.json"),
    ] {
        examples.extend(read_file(testdata(file)).iter().map(decode_example));
        expected.extend(expected_lines(json));
    }
    let mut rng = SplitMix64(0x1AFE_ED00);
    for _ in 0..200 {
        let e = random_example(&mut rng);
        expected.push(example_json(&e));
        examples.push(e);
    }
    let payloads: Vec<Vec<u8>> = examples.iter().map(|e| e.encode_to_vec()).collect();

    for (name, actual) in written_and_read_by_tf("examples", &payloads, false) {
        assert_all_same(&format!("{name} file infeed wrote"), &expected, &actual);
    }
}

#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn tensorflow_reads_sequence_examples_infeed_wrote() {
    let mut seqs: Vec<SequenceExample> = read_file(testdata("sequence.tfrecord"))
        .iter()
        .map(decode_sequence)
        .collect();
    let mut expected = expected_lines("sequence.tfrecord.json");
    let mut rng = SplitMix64(0x5E0_0E4CE);
    for _ in 0..100 {
        let s = random_sequence(&mut rng);
        expected.push(sequence_json(&s));
        seqs.push(s);
    }
    let payloads: Vec<Vec<u8>> = seqs.iter().map(|s| s.encode_to_vec()).collect();
    for (name, actual) in written_and_read_by_tf("sequence", &payloads, true) {
        assert_all_same(
            &format!("{name} sequence file infeed wrote"),
            &expected,
            &actual,
        );
    }
}

// ---------------------------------------------------------------------------
// Needs TensorFlow: SequenceExamples TensorFlow wrote, through infeed's
// pipeline, against `tf.io.parse_sequence_example` on the same batches.

/// Writes `sys.argv[1]` (SequenceExamples, TensorFlow's writer), then prints
/// one JSON line per batch of 4 that `tf.io.parse_sequence_example` gives:
/// context, padded feature lists (floats as their f32 bits) and lengths.
const TF_SEQUENCE_PY: &str = r#"
import json, random, sys
import numpy as np
import tensorflow as tf

path = sys.argv[1]
rng = random.Random(1234)
with tf.io.TFRecordWriter(path) as w:
    for i in range(30):
        n = rng.randrange(0, 41)
        m = rng.randrange(0, 9)
        ctx = tf.train.Features(feature={
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randrange(-2**40, 2**40)])),
            "tag": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(rng.randrange(256) for _ in range(3))])),
        })
        lists = {
            "tokens": tf.train.FeatureList(feature=[
                tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randrange(-2**62, 2**62)]))
                for _ in range(n)]),
        }
        # Every fifth record has no frames list at all (allow_missing).
        if i % 5 != 3:
            lists["frames"] = tf.train.FeatureList(feature=[
                tf.train.Feature(float_list=tf.train.FloatList(value=[rng.uniform(-1e6, 1e6) for _ in range(3)]))
                for _ in range(m)])
        ex = tf.train.SequenceExample(context=ctx, feature_lists=tf.train.FeatureLists(feature_list=lists))
        w.write(ex.SerializeToString())

context = {
    "label": tf.io.FixedLenFeature([], tf.int64),
    "tag": tf.io.FixedLenFeature([], tf.string),
}
sequence = {
    "tokens": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
    "frames": tf.io.FixedLenSequenceFeature([3], tf.float32, allow_missing=True),
}
for batch in tf.data.TFRecordDataset(path).batch(4):
    c, s, lengths = tf.io.parse_sequence_example(batch, context_features=context, sequence_features=sequence)
    print(json.dumps({
        "label": c["label"].numpy().tolist(),
        "tag": [list(t) for t in c["tag"].numpy().tolist()],
        "tokens": s["tokens"].numpy().tolist(),
        "frames": s["frames"].numpy().astype(np.float32).view(np.uint32).tolist(),
        "tokens_len": lengths["tokens"].numpy().tolist(),
        "frames_len": lengths["frames"].numpy().tolist(),
    }))
"#;

fn json_ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("a JSON array")
        .iter()
        .map(|x| x.as_i64().expect("an integer"))
        .collect()
}

fn json_rows(v: &Value) -> Vec<&Value> {
    v.as_array().expect("a JSON array").iter().collect()
}

#[test]
#[ignore = "needs TensorFlow: run scripts/test.sh"]
fn pipeline_sequence_batches_equal_tf_parse_sequence_example() {
    use infeed::batch::TensorType;
    use infeed::pipeline::Pipeline;
    use infeed::spec::{DType, FeatureSpec, SequenceSpec};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("tf-sequence.tfrecord");
    let python = python();
    let out = Command::new(&python)
        .arg("-c")
        .arg(TF_SEQUENCE_PY)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (INFEED_PYTHON): {e}"));
    assert!(
        out.status.success(),
        "TensorFlow failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tf_batches: Vec<Value> = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(tf_batches.len(), 8);

    let spec = SequenceSpec::new(
        FeatureSpec::new()
            .fixed_len("label", DType::Int64, &[])
            .fixed_len("tag", DType::Bytes, &[]),
    )
    .fixed_len_sequence("tokens", DType::Int64, &[])
    .fixed_len_sequence("frames", DType::Float32, &[3]);
    let p = Pipeline::from_files([path.to_str().expect("UTF-8 path")])
        .expect("pipeline")
        .threads(2)
        .parse_sequence(spec)
        .decode_raw("tag", &[3])
        .batch(4, false)
        .pad_to_multiple_of(8)
        .max_length(48);
    let shapes = p.shapes().expect("shapes");
    assert_eq!(shapes.len(), 6);
    let ours: Vec<infeed::batch::Batch> = p
        .build()
        .expect("build")
        .map(|b| b.expect("batch"))
        .collect();
    assert_eq!(ours.len(), tf_batches.len());

    let (mut steps_seen, mut missing_frames) = (0usize, 0usize);
    for (bi, (b, tf)) in ours.iter().zip(&tf_batches).enumerate() {
        assert!(shapes.contains(&b.shape()), "batch {bi}: {:?}", b.shape());
        let rows = json_ints(&tf["label"]).len();
        assert_eq!(b.real_rows, rows, "batch {bi}");
        let t = b.get("tokens").expect("tokens").shape()[1];
        assert_eq!(t % 8, 0);
        let label = b.get("label").unwrap().values::<i64>().unwrap();
        assert_eq!(
            label[..rows],
            json_ints(&tf["label"])[..],
            "batch {bi} label"
        );
        let tag = b.get("tag").unwrap().values::<u8>().unwrap();
        let tf_tag: Vec<i64> = json_rows(&tf["tag"])
            .into_iter()
            .flat_map(json_ints)
            .collect();
        let tag: Vec<i64> = tag[..rows * 3].iter().map(|&v| v as i64).collect();
        assert_eq!(tag, tf_tag, "batch {bi} tag");

        for (name, step) in [("tokens", 1usize), ("frames", 3)] {
            let ours_t = b.get(name).unwrap();
            let mask = b.get(&format!("{name}_mask")).unwrap();
            assert_eq!(ours_t.shape()[..2], [4, t]);
            assert_eq!(mask.shape(), [4, t]);
            let lengths = json_ints(&tf[format!("{name}_len").as_str()]);
            let tf_rows = json_rows(&tf[name]);
            // TensorFlow pads each list to the batch's longest; infeed pads
            // every list to one time length, a multiple of 8 at least that.
            let tf_t = lengths.iter().copied().max().unwrap_or(0) as usize;
            assert!(tf_t <= t, "batch {bi} {name}: {tf_t} > {t}");
            for r in 0..4 {
                let ours_row: Vec<i64> = match ours_t.dtype() {
                    TensorType::I64 => ours_t.values::<i64>().unwrap()[r * t..(r + 1) * t].to_vec(),
                    TensorType::F32 => ours_t.values::<f32>().unwrap()
                        [r * t * step..(r + 1) * t * step]
                        .iter()
                        .map(|f| f.to_bits() as i64)
                        .collect(),
                    other => panic!("{name}: {other:?}"),
                };
                let mask_row: Vec<i64> = match mask.dtype() {
                    TensorType::I64 => mask.values::<i64>().unwrap()[r * t..(r + 1) * t].to_vec(),
                    TensorType::U8 => mask.values::<u8>().unwrap()[r * t..(r + 1) * t]
                        .iter()
                        .map(|&v| v as i64)
                        .collect(),
                    other => panic!("{name} mask: {other:?}"),
                };
                let len = lengths.get(r).copied().unwrap_or(0) as usize;
                let expected_mask: Vec<i64> = (0..t).map(|s| i64::from(s < len)).collect();
                assert_eq!(mask_row, expected_mask, "batch {bi} row {r} {name}_mask");
                let mut expected: Vec<i64> = match tf_rows.get(r) {
                    Some(row) if step == 1 => json_ints(row),
                    Some(row) => json_rows(row).into_iter().flat_map(json_ints).collect(),
                    None => Vec::new(),
                };
                // TensorFlow's padding (0, 0.0) out to infeed's length.
                expected.resize(t * step, 0);
                assert_eq!(ours_row, expected, "batch {bi} row {r} {name}");
                if r < rows {
                    steps_seen += len;
                    if name == "frames" && len == 0 {
                        missing_frames += 1;
                    }
                }
            }
        }
    }
    // The data exercised what it should: many steps, lists missing or empty.
    assert!(steps_seen > 400, "{steps_seen}");
    assert!(missing_frames >= 6, "{missing_frames}");
}
