//! `dataset_info.json`: the dataset's name, its file format and, per split,
//! the records of each shard and the file name template.
//!
//! The file is a `DatasetInfo` proto written as proto-JSON: camelCase keys,
//! int64 values as JSON strings (plain numbers are accepted too, as proto-JSON
//! readers do).

use serde_json::Value;

use super::error::TfdsError;

/// TFDS's template for shard file names when a split names none (older
/// datasets): `mnist-train.tfrecord-00000-of-00001`.
pub const DEFAULT_TEMPLATE: &str = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}";

/// The file format infeed reads, as TFDS names it (and as file names end).
const TFRECORD: &str = "tfrecord";

/// Shard numbers have at least this many digits in file names.
const MIN_SHARD_DIGITS: usize = 5;

/// What infeed needs of `dataset_info.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatasetInfo {
    /// The dataset's name (`DATASET` in file names).
    pub name: String,
    /// Its version, when given.
    pub version: Option<String>,
    /// The splits, in the file's order.
    pub splits: Vec<SplitInfo>,
}

/// One split: its shards' record counts and how its files are named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitInfo {
    pub name: String,
    /// Records per shard, in shard order.
    pub shard_lengths: Vec<u64>,
    /// Bytes of all its files (0 when not given).
    pub num_bytes: u64,
    /// The file name template, relative to the dataset directory.
    pub template: String,
}

impl SplitInfo {
    /// Its records in all.
    pub fn num_examples(&self) -> u64 {
        self.shard_lengths.iter().sum()
    }

    /// The path of shard `index`, relative to the dataset directory, as
    /// TFDS's `ShardedFileTemplate` fills the template in.
    pub fn shard_path(&self, dir: &str, dataset: &str, index: usize) -> Result<String, TfdsError> {
        let shards = self.shard_lengths.len();
        let width = shards.to_string().len().max(MIN_SHARD_DIGITS);
        let index_s = format!("{index:0width$}");
        let shards_s = format!("{shards:0width$}");
        let bad = |reason: String| TfdsError::BadTemplate {
            dir: dir.to_owned(),
            split: self.name.clone(),
            template: self.template.clone(),
            reason,
        };
        let mut out = String::new();
        let mut rest = self.template.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| bad("a '{' without its '}'".into()))?;
            let var = &rest[open + 1..open + close];
            match var {
                "DATASET" => out.push_str(dataset),
                "SPLIT" => out.push_str(&self.name),
                "FILEFORMAT" => out.push_str(TFRECORD),
                "SHARD_INDEX" => out.push_str(&index_s),
                "NUM_SHARDS" => out.push_str(&shards_s),
                "SHARD_X_OF_Y" => out.push_str(&format!("{index_s}-of-{shards_s}")),
                other => return Err(bad(format!("unknown variable {{{other}}}"))),
            }
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// Reads `dataset_info.json` (its text, read from `path`, named in errors);
/// `dir` is the dataset directory, for errors about the format.
pub fn parse_info(text: &[u8], path: &str, dir: &str) -> Result<DatasetInfo, TfdsError> {
    let doc: Value = serde_json::from_slice(text).map_err(|e| TfdsError::Json {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let field = |field: &str, message: &str| TfdsError::Field {
        path: path.to_owned(),
        field: field.to_owned(),
        message: message.to_owned(),
    };
    if !doc.is_object() {
        return Err(field("(top level)", "not a JSON object"));
    }
    let name = doc["name"]
        .as_str()
        .ok_or_else(|| field("name", "missing, or not a string"))?
        .to_owned();
    check_format(&doc, dir, &field)?;
    let version = doc["version"].as_str().map(str::to_owned);
    let splits = doc["splits"]
        .as_array()
        .ok_or_else(|| field("splits", "missing, or not a list"))?;
    let splits = splits
        .iter()
        .enumerate()
        .map(|(i, split)| {
            let at = |what: &str| format!("splits[{i}].{what}");
            let name = split["name"]
                .as_str()
                .ok_or_else(|| field(&at("name"), "missing, or not a string"))?
                .to_owned();
            let lengths = split["shardLengths"].as_array().ok_or_else(|| {
                field(
                    &at("shardLengths"),
                    "missing (a dataset prepared by a TFDS older than 3.0?), or not a list",
                )
            })?;
            let shard_lengths = lengths
                .iter()
                .map(|v| int64(v).ok_or_else(|| field(&at("shardLengths"), "not a count")))
                .collect::<Result<Vec<u64>, _>>()?;
            let num_bytes = match &split["numBytes"] {
                Value::Null => 0,
                v => int64(v).ok_or_else(|| field(&at("numBytes"), "not a count"))?,
            };
            let template = match &split["filepathTemplate"] {
                Value::Null => DEFAULT_TEMPLATE.to_owned(),
                Value::String(t) if t.is_empty() => DEFAULT_TEMPLATE.to_owned(),
                Value::String(t) => t.clone(),
                _ => return Err(field(&at("filepathTemplate"), "not a string")),
            };
            Ok(SplitInfo {
                name,
                shard_lengths,
                num_bytes,
                template,
            })
        })
        .collect::<Result<Vec<_>, TfdsError>>()?;
    Ok(DatasetInfo {
        name,
        version,
        splits,
    })
}

/// Accepts TFRecord files: the dataset's own format, or one of its
/// alternative formats (a dataset prepared in two formats).
fn check_format(
    doc: &Value,
    dir: &str,
    field: &dyn Fn(&str, &str) -> TfdsError,
) -> Result<(), TfdsError> {
    let format = match &doc["fileFormat"] {
        Value::Null => TFRECORD,
        Value::String(f) if f.is_empty() => TFRECORD,
        Value::String(f) => f.as_str(),
        _ => return Err(field("fileFormat", "not a string")),
    };
    if format == TFRECORD {
        return Ok(());
    }
    let alternative = doc["alternativeFileFormats"]
        .as_array()
        .is_some_and(|formats| formats.iter().any(|f| f.as_str() == Some(TFRECORD)));
    if alternative {
        return Ok(());
    }
    Err(TfdsError::UnsupportedFormat {
        dir: dir.to_owned(),
        format: format.to_owned(),
    })
}

/// A proto-JSON int64 ≥ 0: a decimal string or a number.
pub(super) fn int64(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MNIST_LIKE: &str = r#"{
      "fileFormat": "tfrecord", "name": "tiny", "version": "1.0.0",
      "splits": [
        {"filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
         "name": "train", "numBytes": "3149", "shardLengths": ["4", "3", "3"]},
        {"name": "test", "shardLengths": [2]}
      ]
    }"#;

    #[test]
    fn reads_splits_counts_and_templates() {
        let info = parse_info(MNIST_LIKE.as_bytes(), "d/dataset_info.json", "d").unwrap();
        assert_eq!(info.name, "tiny");
        assert_eq!(info.version.as_deref(), Some("1.0.0"));
        let train = &info.splits[0];
        assert_eq!(train.shard_lengths, [4, 3, 3]);
        assert_eq!((train.num_examples(), train.num_bytes), (10, 3149));
        assert_eq!(
            train.shard_path("d", "tiny", 1).unwrap(),
            "tiny-train.tfrecord-00001-of-00003"
        );
        // No template: TFDS's default, as older datasets are named.
        let test = &info.splits[1];
        assert_eq!(test.template, DEFAULT_TEMPLATE);
        assert_eq!(
            test.shard_path("d", "tiny", 0).unwrap(),
            "tiny-test.tfrecord-00000-of-00001"
        );
    }

    #[test]
    fn shard_numbers_widen_past_five_digits_and_other_variables_fill_in() {
        let split = SplitInfo {
            name: "train".into(),
            shard_lengths: vec![1; 123_456],
            num_bytes: 0,
            template: "{SPLIT}/data.{FILEFORMAT}-{SHARD_INDEX}-{NUM_SHARDS}".into(),
        };
        assert_eq!(
            split.shard_path("d", "x", 7).unwrap(),
            "train/data.tfrecord-000007-123456"
        );
        let bad = SplitInfo {
            template: "{SPLIT}-{SHARD}".into(),
            ..split.clone()
        };
        let err = bad.shard_path("d", "x", 0).unwrap_err();
        assert!(
            err.to_string().contains("unknown variable {SHARD}"),
            "{err}"
        );
        let open = SplitInfo {
            template: "{SPLIT".into(),
            ..split
        };
        assert!(matches!(
            open.shard_path("d", "x", 0),
            Err(TfdsError::BadTemplate { .. })
        ));
    }

    #[test]
    fn other_formats_are_refused_by_name_unless_tfrecord_is_an_alternative() {
        let doc = |format: &str, alt: &str| {
            format!(
                r#"{{"name": "x", "fileFormat": "{format}", "alternativeFileFormats": [{alt}],
                   "splits": []}}"#
            )
        };
        for format in ["array_record", "parquet", "riegeli"] {
            let err =
                parse_info(doc(format, "").as_bytes(), "d/dataset_info.json", "d/x").unwrap_err();
            assert!(
                matches!(&err, TfdsError::UnsupportedFormat { dir, format: f }
                    if dir == "d/x" && f == format),
                "{err:?}"
            );
            assert!(err.to_string().contains(format), "{err}");
        }
        assert!(parse_info(doc("array_record", r#""tfrecord""#).as_bytes(), "p", "d").is_ok());
    }

    #[test]
    fn malformed_files_name_the_file_and_the_field() {
        let err = parse_info(b"{\"name\": ", "d/dataset_info.json", "d").unwrap_err();
        assert!(
            matches!(&err, TfdsError::Json { path, .. } if path == "d/dataset_info.json"),
            "{err:?}"
        );
        let err = parse_info(
            br#"{"name": "x", "splits": [{"name": "train", "shardLengths": ["a"]}]}"#,
            "d/dataset_info.json",
            "d",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "d/dataset_info.json: splits[0].shardLengths: not a count"
        );
        let err = parse_info(br#"{"splits": []}"#, "p", "d").unwrap_err();
        assert!(
            matches!(&err, TfdsError::Field { field, .. } if field == "name"),
            "{err:?}"
        );
        let err = parse_info(br#"{"name": "x", "splits": [{"name": "t"}]}"#, "p", "d").unwrap_err();
        assert!(err.to_string().contains("shardLengths"), "{err}");
    }
}
