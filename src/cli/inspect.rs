//! `infeed inspect`: the schema of existing TFRecord files of
//! `tf.train.Example`, inferred by reading every record.
//!
//! For each feature: its type, how many records have it, and how many values
//! it holds per record (min / mean / max over the records that have it).
//! The spec line gives `name:fixed_len[N]:dtype` for a feature present in
//! every record with always N values, else `name:var_len:dtype`.
//!
//! With `--tfds-split SPLIT` the one input is a prepared TFDS dataset
//! directory: the split's records are read as `Pipeline::from_tfds` reads
//! them (slices included), and the dataset's own features (features.json)
//! are listed with the spec infeed parses them by.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use infeed::example::proto::{SequenceExample, feature::Kind};
use prost::Message;
use serde_json::json;

use infeed::pipeline::Pipeline;
use infeed::record::{FOOTER_LEN, HEADER_LEN};
use infeed::tfds::TfdsDataset;

use super::{CliError, InputArgs, open_records};

#[derive(Args)]
pub struct InspectArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The input is a prepared TFDS dataset directory
    /// (`{data_dir}/{name}[/{config}]/{version}`); read this split of it,
    /// a TFDS split string such as `train`, `train[:10%]` or `train[:50%]+test`.
    #[arg(long, value_name = "SPLIT")]
    tfds_split: Option<String>,
}

#[derive(Default)]
struct Stats {
    /// Records holding the feature, by list kind.
    int64: u64,
    float: u64,
    bytes: u64,
    /// Records where the Feature has no list set.
    empty_kind: u64,
    min: u64,
    max: u64,
    sum: u64,
}

impl Stats {
    fn records(&self) -> u64 {
        self.int64 + self.float + self.bytes + self.empty_kind
    }

    /// The TensorFlow dtype name, `mixed`, or `none` (no list ever set).
    fn dtype(&self) -> &'static str {
        match (self.int64 > 0, self.float > 0, self.bytes > 0) {
            (true, false, false) => "int64",
            (false, true, false) => "float",
            (false, false, true) => "string",
            (false, false, false) => "none",
            _ => "mixed",
        }
    }

    fn see(&mut self, count: u64) {
        if self.records() == 1 {
            self.min = count;
            self.max = count;
        } else {
            self.min = self.min.min(count);
            self.max = self.max.max(count);
        }
        self.sum += count;
    }
}

/// The features of every record seen, and how many were SequenceExamples.
#[derive(Default)]
struct Schema {
    features: BTreeMap<String, Stats>,
    sequences: u64,
}

impl Schema {
    /// Counts one record's features; `place` names it in an error.
    fn see(&mut self, data: &[u8], place: impl FnOnce() -> String) -> Result<(), CliError> {
        let message = SequenceExample::decode(data)
            .map_err(|e| CliError::Message(format!("{}: not a tf.train.Example: {e}", place())))?;
        if message.feature_lists.is_some() {
            self.sequences += 1;
        }
        for (key, feature) in message.context.unwrap_or_default().feature {
            let stats = self.features.entry(key).or_default();
            let count = match feature.kind {
                None => {
                    stats.empty_kind += 1;
                    0
                }
                Some(Kind::Int64List(l)) => {
                    stats.int64 += 1;
                    l.value.len()
                }
                Some(Kind::FloatList(l)) => {
                    stats.float += 1;
                    l.value.len()
                }
                Some(Kind::BytesList(l)) => {
                    stats.bytes += 1;
                    l.value.len()
                }
            };
            stats.see(count as u64);
        }
        Ok(())
    }
}

/// Per file: (path, records, bytes).
type FileRows = Vec<(String, u64, u64)>;

/// Every record of the input files.
fn read_files(args: &InspectArgs, schema: &mut Schema) -> Result<FileRows, CliError> {
    let options = args.input.read_options();
    let mut files = Vec::new();
    for name in &args.input.shards()? {
        let name = name.clone();
        let mut records = 0u64;
        let mut reader = open_records(&name, &options)?;
        while let Some(record) = reader.next() {
            let record = record?;
            schema.see(record.data.as_ref(), || {
                super::cat::place(&name, records, record.offset, reader.compression())
            })?;
            records += 1;
        }
        let bytes = reader.bytes_read();
        files.push((name, records, bytes));
    }
    Ok(files)
}

/// The records of a TFDS split, read as the pipeline reads them; a file's
/// bytes are those of its records read (with their framing).
fn read_tfds(
    dir: &str,
    split: &str,
    schema: &mut Schema,
) -> Result<(FileRows, serde_json::Value), CliError> {
    let pipeline = Pipeline::from_tfds(dir, split)?;
    // A file twice in a split string (`train[:5]+train[-5:]`) is one row.
    let mut files: FileRows = Vec::new();
    for file in pipeline.files() {
        if !files.iter().any(|f| &f.0 == file) {
            files.push((file.clone(), 0, 0));
        }
    }
    for batch in pipeline.build_raw(1024, false)? {
        let batch = batch?;
        for (i, data) in batch.records().enumerate() {
            let (path, offset) = batch.origin(i);
            let row = files
                .iter_mut()
                .find(|f| f.0 == path)
                .ok_or_else(|| CliError::Message(format!("{path}: not a file of the split")))?;
            schema.see(data, || format!("{path} at byte {offset}"))?;
            row.1 += 1;
            row.2 += (HEADER_LEN + FOOTER_LEN + data.len()) as u64;
        }
    }
    let dataset = pipeline.tfds().map(|d| d.info().clone());
    let features = pipeline
        .tfds()
        .map(TfdsDataset::features)
        .transpose()
        .map_err(|e| CliError::Message(e.to_string()));
    let tfds = json!({
        "name": dataset.as_ref().map(|d| d.name.clone()),
        "version": dataset.as_ref().and_then(|d| d.version.clone()),
        "split": split,
        "features": match &features {
            Ok(Some(fs)) => json!(fs.iter().map(|f| json!({
                "name": f.name,
                "tfds_type": f.tfds_type,
                "spec": f.spec_text(),
            })).collect::<Vec<_>>()),
            _ => json!(null),
        },
        "spec": match &features {
            Ok(Some(fs)) => json!(fs.iter().map(|f| f.spec_text()).collect::<Vec<_>>().join(",")),
            _ => json!(null),
        },
        "spec_error": match &features {
            Err(e) => json!(e.to_string()),
            Ok(_) => json!(null),
        },
    });
    Ok((files, tfds))
}

/// Reads every record and prints the inferred schema.
pub fn run(args: &InspectArgs, out: &mut impl Write) -> Result<i32, CliError> {
    let mut schema = Schema::default();
    let (files, tfds) = match &args.tfds_split {
        None => (read_files(args, &mut schema)?, None),
        Some(split) => {
            let [dir] = &args.input.files[..] else {
                return Err(CliError::Message(
                    "--tfds-split reads one TFDS dataset directory: give exactly one".into(),
                ));
            };
            let (files, tfds) = read_tfds(dir, split, &mut schema)?;
            (files, Some(tfds))
        }
    };
    let Schema {
        features,
        sequences,
    } = schema;
    let total: u64 = files.iter().map(|f| f.1).sum();
    let total_bytes: u64 = files.iter().map(|f| f.2).sum();
    let spec_of = |name: &str, s: &Stats| -> Option<String> {
        let dtype = s.dtype();
        if dtype == "mixed" || dtype == "none" {
            return None;
        }
        if s.records() == total && s.min == s.max {
            Some(format!("{name}:fixed_len[{}]:{dtype}", s.min))
        } else {
            Some(format!("{name}:var_len:{dtype}"))
        }
    };
    let spec: Vec<String> = features.iter().filter_map(|(n, s)| spec_of(n, s)).collect();
    let spec = spec.join(",");
    let mean = |s: &Stats| {
        if s.records() == 0 {
            0.0
        } else {
            s.sum as f64 / s.records() as f64
        }
    };
    if args.json {
        let doc = json!({
            "files": files.iter().map(|(p, r, b)| json!({"path": p, "records": r, "bytes": b})).collect::<Vec<_>>(),
            "records": total,
            "bytes": total_bytes,
            "sequence_examples": sequences,
            "features": features.iter().map(|(n, s)| json!({
                "name": n,
                "dtype": s.dtype(),
                "records": s.records(),
                "missing": total - s.records(),
                "values_min": s.min,
                "values_mean": mean(s),
                "values_max": s.max,
            })).collect::<Vec<_>>(),
            "spec": spec,
            "tfds": tfds,
        });
        serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(0);
    }
    for (p, r, b) in &files {
        writeln!(out, "{p}: {r} records, {b} bytes")?;
    }
    writeln!(
        out,
        "total: {total} records, {total_bytes} bytes, {} files",
        files.len()
    )?;
    if sequences > 0 {
        writeln!(
            out,
            "{sequences} records are SequenceExamples: only their context features are listed"
        )?;
    }
    let width = features
        .keys()
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    writeln!(
        out,
        "{:width$}  {:6}  {:>9}  {:>9}  {:>8}  {:>10}  {:>8}",
        "feature", "dtype", "records", "missing", "min", "mean", "max"
    )?;
    for (name, s) in &features {
        writeln!(
            out,
            "{name:width$}  {:6}  {:>9}  {:>9}  {:>8}  {:>10.2}  {:>8}",
            s.dtype(),
            s.records(),
            total - s.records(),
            s.min,
            mean(s),
            s.max
        )?;
    }
    writeln!(out, "spec: {spec}")?;
    if let Some(tfds) = tfds {
        let name = tfds["name"].as_str().unwrap_or_default();
        let version = tfds["version"].as_str().unwrap_or("(no version)");
        writeln!(
            out,
            "tfds: {name} {version}, split {}",
            tfds["split"].as_str().unwrap_or("")
        )?;
        match tfds["spec"].as_str() {
            Some(spec) => writeln!(out, "tfds spec (features.json): {spec}")?,
            None => writeln!(
                out,
                "tfds spec: {}",
                tfds["spec_error"].as_str().unwrap_or("")
            )?,
        }
    }
    Ok(0)
}
