//! Writing a TensorFlow Datasets directory: the shards under TFDS's file
//! names (`{name}-{split}.tfrecord-00000-of-00004`), `features.json` from the
//! schema and `dataset_info.json` with every shard's record count, so that
//! `tfds.builder_from_directory(dir)` and `Pipeline::from_tfds` open it.
//!
//! Features map as a TensorFlow user expects (proto-JSON, as TFDS writes
//! `features.json`):
//! - a scalar `int64` / `float` → `Tensor` of shape `[]`, dtype `int64` /
//!   `float32`;
//! - a scalar `bytes` → `Text` (TFDS hands out `tf.string`);
//! - a list → `Tensor` of shape `[-1]` (a fixed-length list of N: `[N]`),
//!   which TFDS decodes as a dense vector of the record's length. A `Tensor`
//!   rather than a `Sequence`: the same bytes on the wire, one key, and no
//!   per-item feature to describe.
//!
//! Every feature must be in every record (TFDS parses a missing scalar as an
//! error), so a conversion with nulls omitted cannot target TFDS.
//!
//! Each run writes one split; the splits already listed in an existing
//! `dataset_info.json` are kept (a rerun of the same split replaces its
//! entry), so `train` and `test` can come from two runs into one directory.

use serde_json::{Value, json};

use super::error::ConvertError;
use super::schema::{Schema, Shape, ValueType};
use super::shard::CommittedShard;
use super::sink::ShardSink;

/// TFDS's template for the file names of a split.
pub(super) const TFDS_TEMPLATE: &str = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}";

const FEATURES: &str = "features.json";
const INFO: &str = "dataset_info.json";
const CLASS: &str = "tensorflow_datasets.core.features";

/// The dataset a conversion writes: `--tfds NAME:VERSION` and the split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfdsTarget {
    /// The dataset's name (snake_case, as TFDS names datasets).
    pub name: String,
    /// Its version, `MAJOR.MINOR.PATCH`.
    pub version: String,
    /// The split this conversion writes (`train`, `test`, …).
    pub split: String,
}

impl TfdsTarget {
    /// `NAME:VERSION` (e.g. `my_corpus:1.0.0`) and a split name.
    pub fn parse(name_version: &str, split: &str) -> Result<Self, ConvertError> {
        let bad = |m: String| Err(ConvertError::Options(m));
        let Some((name, version)) = name_version.split_once(':') else {
            return bad(format!(
                "ConvertOptions::tfds {name_version:?}: expected NAME:VERSION, e.g. my_corpus:1.0.0"
            ));
        };
        let snake = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !snake {
            return bad(format!(
                "ConvertOptions::tfds {name_version:?}: the dataset name {name:?} must be snake_case \
                 (a-z, 0-9, _; starting with a letter), as TFDS names datasets"
            ));
        }
        let parts: Vec<&str> = version.split('.').collect();
        if parts.len() != 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            return bad(format!(
                "ConvertOptions::tfds {name_version:?}: the version {version:?} must be MAJOR.MINOR.PATCH, e.g. 1.0.0"
            ));
        }
        if split.is_empty() || !split.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return bad(format!(
                "split {split:?}: a TFDS split name is letters, digits and _"
            ));
        }
        Ok(TfdsTarget {
            name: name.to_owned(),
            version: version.to_owned(),
            split: split.to_owned(),
        })
    }

    /// The stem of the split's shard names: `{name}-{split}`.
    pub fn stem(&self) -> String {
        format!("{}-{}", self.name, self.split)
    }
}

/// `features.json` for the schema (see the module documentation).
pub(super) fn features_json(schema: &Schema) -> Value {
    let mut features = serde_json::Map::new();
    for c in &schema.columns {
        let feature = match (c.vtype, c.shape) {
            (ValueType::Bytes, Shape::Scalar) => {
                json!({"pythonClassName": format!("{CLASS}.text_feature.Text"), "text": {}})
            }
            (vtype, shape) => {
                let dtype = match vtype {
                    ValueType::Int64 => "int64",
                    ValueType::Float => "float32",
                    ValueType::Bytes => "string",
                };
                let dims: Vec<String> = match shape {
                    Shape::Scalar => Vec::new(),
                    Shape::List => vec!["-1".into()],
                    Shape::Fixed(n) => vec![n.to_string()],
                };
                let shape = if dims.is_empty() {
                    json!({})
                } else {
                    json!({ "dimensions": dims })
                };
                json!({
                    "pythonClassName": format!("{CLASS}.tensor_feature.Tensor"),
                    "tensor": {"shape": shape, "dtype": dtype, "encoding": "none"},
                })
            }
        };
        features.insert(c.name.clone(), feature);
    }
    json!({
        "pythonClassName": format!("{CLASS}.features_dict.FeaturesDict"),
        "featuresDict": {"features": features},
    })
}

/// `dataset_info.json` with this split's shards, keeping the other splits
/// of `existing` (the file's current text, if any). `dir` names the
/// directory in errors.
pub(super) fn dataset_info_json(
    existing: Option<&[u8]>,
    target: &TfdsTarget,
    shards: &[CommittedShard],
    dir: &str,
) -> Result<Value, ConvertError> {
    let split = json!({
        "name": target.split,
        "shardLengths": shards.iter().map(|s| s.records.to_string()).collect::<Vec<_>>(),
        "numBytes": shards.iter().map(|s| s.bytes).sum::<u64>().to_string(),
        "filepathTemplate": TFDS_TEMPLATE,
    });
    let mut splits = Vec::new();
    if let Some(text) = existing {
        let old: Value = serde_json::from_slice(text)
            .map_err(|e| ConvertError::input(format!("{dir}/{INFO}"), format!("not JSON: {e}")))?;
        let (name, version) = (old["name"].as_str(), old["version"].as_str());
        if name != Some(target.name.as_str()) || version != Some(target.version.as_str()) {
            return Err(ConvertError::Options(format!(
                "{dir} holds dataset {} version {}, not {}:{}: write each dataset (and version) to its own directory",
                name.unwrap_or("?"),
                version.unwrap_or("?"),
                target.name,
                target.version
            )));
        }
        splits.extend(
            old["splits"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| s["name"].as_str() != Some(target.split.as_str()))
                .cloned(),
        );
    }
    splits.push(split);
    splits.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({
        "name": target.name,
        "version": target.version,
        "fileFormat": "tfrecord",
        "description": format!("Written by infeed {}.", env!("CARGO_PKG_VERSION")),
        "moduleName": "infeed",
        "splits": splits,
    }))
}

/// Checks, before anything is committed, that the directory holds no other
/// dataset (or version) and no other features than this split's.
pub(super) fn check_existing(
    sink: &dyn ShardSink,
    target: &TfdsTarget,
    schema: &Schema,
) -> Result<(), ConvertError> {
    let dir = sink.location("");
    let dir = dir.trim_end_matches('/');
    if let Some(old) = read(sink, FEATURES)? {
        let old: Value = serde_json::from_slice(&old).unwrap_or(Value::Null);
        if old != features_json(schema) {
            return Err(ConvertError::Schema(format!(
                "{dir}/{FEATURES} describes other features than this split's ({}): every split of a TFDS dataset has the same features",
                schema.spec()
            )));
        }
    }
    dataset_info_json(read(sink, INFO)?.as_deref(), target, &[], dir).map(|_| ())
}

fn read(sink: &dyn ShardSink, name: &str) -> Result<Option<Vec<u8>>, ConvertError> {
    sink.read(name)
        .map_err(|e| ConvertError::output(sink.location(name), e))
}

/// Writes `features.json` and `dataset_info.json` of the split's committed
/// shards ([`check_existing`] ran before they were committed).
pub(super) fn write_tfds_files(
    sink: &dyn ShardSink,
    target: &TfdsTarget,
    schema: &Schema,
    shards: &[CommittedShard],
) -> Result<(), ConvertError> {
    let dir = sink.location("");
    let dir = dir.trim_end_matches('/');
    let info = dataset_info_json(read(sink, INFO)?.as_deref(), target, shards, dir)?;
    for (name, doc) in [(FEATURES, &features_json(schema)), (INFO, &info)] {
        let mut text =
            serde_json::to_vec_pretty(doc).map_err(|e| ConvertError::output(name, e.into()))?;
        text.push(b'\n');
        sink.put(name, &text)
            .map_err(|e| ConvertError::output(sink.location(name), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::schema::SchemaColumn;

    fn column(name: &str, vtype: ValueType, shape: Shape) -> SchemaColumn {
        SchemaColumn {
            source: name.into(),
            name: name.into(),
            vtype,
            shape,
        }
    }

    #[test]
    fn targets_parse_and_bad_ones_name_the_fault() {
        let t = TfdsTarget::parse("my_lm:1.2.0", "train").unwrap();
        assert_eq!(t.stem(), "my_lm-train");
        for (arg, want) in [
            ("my_lm", "NAME:VERSION"),
            ("My-lm:1.0.0", "snake_case"),
            ("lm:1.0", "MAJOR.MINOR.PATCH"),
        ] {
            let e = TfdsTarget::parse(arg, "train").unwrap_err().to_string();
            assert!(e.contains(want), "{arg}: {e}");
        }
        assert!(TfdsTarget::parse("lm:1.0.0", "tr-ain").is_err());
    }

    #[test]
    fn features_follow_the_documented_mapping() {
        let schema = Schema {
            columns: vec![
                column("label", ValueType::Int64, Shape::Scalar),
                column("score", ValueType::Float, Shape::Scalar),
                column("text", ValueType::Bytes, Shape::Scalar),
                column("ids", ValueType::Int64, Shape::List),
                column("xyz", ValueType::Float, Shape::Fixed(3)),
            ],
        };
        let f = features_json(&schema);
        let feats = &f["featuresDict"]["features"];
        assert_eq!(feats["label"]["tensor"]["dtype"], "int64");
        assert_eq!(feats["label"]["tensor"]["shape"], json!({}));
        assert_eq!(feats["score"]["tensor"]["dtype"], "float32");
        assert_eq!(
            feats["text"]["pythonClassName"],
            "tensorflow_datasets.core.features.text_feature.Text"
        );
        assert_eq!(
            feats["ids"]["tensor"]["shape"],
            json!({"dimensions": ["-1"]})
        );
        assert_eq!(
            feats["xyz"]["tensor"]["shape"],
            json!({"dimensions": ["3"]})
        );
        // infeed's own reader takes it back as the same spec.
        let text = serde_json::to_vec(&f).unwrap();
        let parsed = crate::tfds::parse_features(&text, "features.json").unwrap();
        let specs: Vec<String> = parsed.iter().map(|f| f.spec_text()).collect();
        assert_eq!(
            specs,
            [
                "ids:var_len:int64",
                "label:fixed_len[]:int64",
                "score:fixed_len[]:float",
                "text:fixed_len[]:string",
                "xyz:fixed_len[3]:float"
            ]
        );
    }

    #[test]
    fn info_keeps_other_splits_and_replaces_its_own() {
        let shard = |records, bytes| CommittedShard {
            name: String::new(),
            records,
            bytes,
            crc32c: 0,
        };
        let train = TfdsTarget::parse("lm:1.0.0", "train").unwrap();
        let test = TfdsTarget::parse("lm:1.0.0", "test").unwrap();
        let first = dataset_info_json(None, &train, &[shard(3, 30), shard(2, 20)], "d").unwrap();
        assert_eq!(first["splits"][0]["shardLengths"], json!(["3", "2"]));
        assert_eq!(first["splits"][0]["numBytes"], "50");
        let text = serde_json::to_vec(&first).unwrap();
        let both = dataset_info_json(Some(&text), &test, &[shard(1, 10)], "d").unwrap();
        let names: Vec<&str> = both["splits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["test", "train"]);
        let text = serde_json::to_vec(&both).unwrap();
        let again = dataset_info_json(Some(&text), &train, &[shard(4, 40)], "d").unwrap();
        assert_eq!(again["splits"][1]["shardLengths"], json!(["4"]));
        assert_eq!(again["splits"].as_array().unwrap().len(), 2);
        let parsed = crate::tfds::parse_info(&serde_json::to_vec(&again).unwrap(), "i", "d");
        assert_eq!(parsed.unwrap().splits[1].num_examples(), 4);
        let other = TfdsTarget::parse("lm:2.0.0", "train").unwrap();
        let e = dataset_info_json(Some(&text), &other, &[], "d").unwrap_err();
        assert!(
            e.to_string().contains("holds dataset lm version 1.0.0"),
            "{e}"
        );
    }
}
