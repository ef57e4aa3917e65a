//! What reading a TFDS directory can fail with: every error names the
//! directory or file and the thing at fault.

use crate::source::SourceError;

/// A prepared TensorFlow Datasets directory could not be read as asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TfdsError {
    /// `dataset_info.json` or `features.json` could not be read.
    #[error("{path}: cannot read it: {source}")]
    Read {
        path: String,
        #[source]
        source: SourceError,
    },
    /// Reading a JSON file failed part way.
    #[error("{path}: reading it failed: {message}")]
    Io { path: String, message: String },
    /// A JSON file is not valid JSON.
    #[error("{path}: malformed JSON: {message}")]
    Json { path: String, message: String },
    /// A JSON file lacks a field or holds one of the wrong type.
    #[error("{path}: {field}: {message}")]
    Field {
        path: String,
        field: String,
        message: String,
    },
    /// The split asked for is not in the dataset.
    #[error("{dir}: no split {split:?}; the dataset has {}", names(available))]
    UnknownSplit {
        dir: String,
        split: String,
        available: Vec<String>,
    },
    /// A split string does not follow TFDS's grammar, or asks for records
    /// the split does not have.
    #[error("split {spec:?}: {reason}")]
    BadSplit { spec: String, reason: String },
    /// The split string selects no record at all.
    #[error("{dir}: split {spec:?} selects no records")]
    EmptySlice { dir: String, spec: String },
    /// The dataset's records are not in TFRecord files.
    #[error(
        "{dir}: the dataset is stored as {format:?}; infeed reads only \"tfrecord\" \
         (prepare it with file_format=\"tfrecord\")"
    )]
    UnsupportedFormat { dir: String, format: String },
    /// A split's file name template cannot be filled in.
    #[error("{dir}: split {split:?}: file name template {template:?}: {reason}")]
    BadTemplate {
        dir: String,
        split: String,
        template: String,
        reason: String,
    },
    /// A feature of `features.json` is of a type infeed does not map.
    #[error("{path}: feature {feature:?}: unknown feature type {type_name:?}")]
    UnknownFeature {
        path: String,
        feature: String,
        type_name: String,
    },
    /// A feature of a known type in a form infeed cannot parse.
    #[error("{path}: feature {feature:?}: {reason}")]
    UnsupportedFeature {
        path: String,
        feature: String,
        reason: String,
    },
}

/// The available names, quoted, for a message.
fn names(available: &[String]) -> String {
    if available.is_empty() {
        return "no splits".into();
    }
    let quoted: Vec<String> = available.iter().map(|n| format!("{n:?}")).collect();
    format!("splits {}", quoted.join(", "))
}
