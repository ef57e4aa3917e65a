//! Rust errors as the exceptions of `infeed.errors`, with their fields.

use infeed::batch::PlanError;
use infeed::pipeline::PipelineError;
use infeed::record::ErrorKind;
use infeed::tfds::TfdsError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The fields an exception carries (`None` where the error has none).
#[derive(Default)]
struct Fields {
    path: Option<String>,
    offset: Option<u64>,
    feature: Option<String>,
    /// The record's index in its file, where known.
    record: Option<u64>,
}

/// An exception of class `class` (in `infeed.errors`) with `message` and
/// `fields` as attributes.
fn raise(py: Python<'_>, class: &str, message: String, fields: Fields) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let cls = py.import("infeed.errors")?.getattr(class)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("path", fields.path)?;
        kwargs.set_item("offset", fields.offset)?;
        kwargs.set_item("feature", fields.feature)?;
        kwargs.set_item("record", fields.record)?;
        let exc = cls.call((message.clone(),), Some(&kwargs))?;
        Ok(PyErr::from_value(exc))
    })();
    // Without the Python half (the module used alone) the message still arrives.
    made.unwrap_or_else(|_| PyRuntimeError::new_err(message))
}

/// A pipeline described wrongly (a bad spec, step or value).
pub fn spec(py: Python<'_>, message: String) -> PyErr {
    raise(py, "SpecError", message, Fields::default())
}

/// A state that cannot be used.
pub fn state(py: Python<'_>, message: String) -> PyErr {
    raise(py, "StateError", message, Fields::default())
}

/// The exception for a pipeline error: its class by kind, its fields as
/// attributes, its message as Rust prints it.
pub fn to_py(py: Python<'_>, error: PipelineError) -> PyErr {
    let message = error.to_string();
    let (class, fields) = match &error {
        PipelineError::Record(e) => (
            match e.kind {
                ErrorKind::Io { .. } => "SourceError",
                _ => "CorruptRecordError",
            },
            Fields {
                path: Some(e.path.clone()),
                offset: Some(e.offset),
                record: e.index,
                ..Fields::default()
            },
        ),
        PipelineError::Parse {
            path,
            offset,
            at,
            error,
            ..
        } => (
            "ParseError",
            Fields {
                path: Some(path.clone()),
                offset: Some(*offset),
                feature: error.feature.clone(),
                record: at.map(|a| a.index),
            },
        ),
        PipelineError::Length {
            path,
            offset,
            at,
            feature,
            ..
        } => (
            "ParseError",
            Fields {
                path: Some(path.clone()),
                offset: Some(*offset),
                feature: Some(feature.clone()),
                record: at.map(|a| a.index),
            },
        ),
        PipelineError::Batch {
            path,
            offset,
            at,
            error,
            ..
        } => (
            "BatchError",
            Fields {
                path: Some(path.clone()),
                offset: Some(*offset),
                feature: error.feature.clone(),
                record: at.map(|a| a.index),
            },
        ),
        PipelineError::Image {
            path,
            offset,
            at,
            feature,
            ..
        } => (
            "ImageError",
            Fields {
                path: Some(path.clone()),
                offset: Some(*offset),
                feature: Some(feature.clone()),
                record: at.map(|a| a.index),
            },
        ),
        PipelineError::Map {
            path, offset, at, ..
        } => (
            "MapError",
            Fields {
                path: Some(path.clone()),
                offset: Some(*offset),
                record: at.map(|a| a.index),
                ..Fields::default()
            },
        ),
        PipelineError::Source(e) => (
            "SourceError",
            Fields {
                path: Some(e.url().to_owned()),
                offset: e.offset(),
                ..Fields::default()
            },
        ),
        PipelineError::NoFiles(pattern) => (
            "SourceError",
            Fields {
                path: Some(pattern.clone()),
                ..Fields::default()
            },
        ),
        PipelineError::Open { path, .. } => (
            "SourceError",
            Fields {
                path: Some(path.clone()),
                ..Fields::default()
            },
        ),
        PipelineError::EmptyEpoch { .. } => ("EmptyEpochError", Fields::default()),
        PipelineError::Plan(e) => (
            "SpecError",
            Fields {
                feature: plan_feature(e),
                ..Fields::default()
            },
        ),
        PipelineError::Spec { feature, .. } => (
            "SpecError",
            Fields {
                feature: feature.clone(),
                ..Fields::default()
            },
        ),
        PipelineError::Bucket(_)
        | PipelineError::Config(_)
        | PipelineError::Description(_)
        | PipelineError::Setting(_) => ("SpecError", Fields::default()),
        PipelineError::BadState(_) => ("StateError", Fields::default()),
        PipelineError::Index(e) => (
            "ShardIndexError",
            Fields {
                path: index_shard(e),
                ..Fields::default()
            },
        ),
        PipelineError::Tokenizer(e) => (
            "TokenizerError",
            Fields {
                path: tokenizer_path(e),
                ..Fields::default()
            },
        ),
        PipelineError::Tfds(e) => (
            "TfdsError",
            Fields {
                path: tfds_path(e),
                feature: match e {
                    TfdsError::UnknownFeature { feature, .. }
                    | TfdsError::UnsupportedFeature { feature, .. } => Some(feature.clone()),
                    _ => None,
                },
                ..Fields::default()
            },
        ),
        // A thread that died, or that the system would not start.
        PipelineError::Worker(_) | PipelineError::Spawn { .. } => {
            ("WorkerError", Fields::default())
        }
        // A variant added later still arrives as an infeed.Error.
        #[allow(unreachable_patterns)]
        _ => ("Error", Fields::default()),
    };
    raise(py, class, message, fields)
}

/// The directory or file a TFDS error names.
fn tfds_path(e: &TfdsError) -> Option<String> {
    Some(match e {
        TfdsError::Read { path, .. }
        | TfdsError::Io { path, .. }
        | TfdsError::Json { path, .. }
        | TfdsError::Field { path, .. }
        | TfdsError::UnknownFeature { path, .. }
        | TfdsError::UnsupportedFeature { path, .. } => path.clone(),
        TfdsError::UnknownSplit { dir, .. }
        | TfdsError::EmptySlice { dir, .. }
        | TfdsError::UnsupportedFormat { dir, .. }
        | TfdsError::BadTemplate { dir, .. } => dir.clone(),
        _ => return None,
    })
}

/// The shard an index error names, if any.
fn index_shard(e: &infeed::index::IndexError) -> Option<String> {
    use infeed::index::IndexError as E;
    match e {
        E::Missing { shard, .. }
        | E::Stale { shard, .. }
        | E::OtherShard { shard, .. }
        | E::BadPoint { shard, .. }
        | E::Shard { shard, .. } => Some(shard.clone()),
        E::NoRecord { error, .. } => Some(error.path.clone()),
        E::Corrupt { index, .. } | E::Write { index, .. } => Some(index.clone()),
        _ => None,
    }
}

/// The tokenizer file a tokenizer error names.
fn tokenizer_path(e: &infeed::text::TokenizerError) -> Option<String> {
    use infeed::text::TokenizerError as E;
    match e {
        E::Read { path, .. }
        | E::Io { path, .. }
        | E::TooLarge { path, .. }
        | E::Load { path, .. }
        | E::Unsupported { path, .. }
        | E::NoSpecialToken { path, .. }
        | E::IdTooLarge { path, .. } => Some(path.clone()),
        _ => None,
    }
}

/// The feature a plan error names, if any.
fn plan_feature(e: &PlanError) -> Option<String> {
    match e {
        PlanError::UnknownFeature { feature }
        | PlanError::Unbounded { feature }
        | PlanError::NotVarLen { feature }
        | PlanError::DuplicateGroup { feature }
        | PlanError::ConflictingLengths { feature }
        | PlanError::ZeroLength { feature, .. }
        | PlanError::BadCast { feature, .. }
        | PlanError::NotNumeric { feature }
        | PlanError::NotDecodable { feature, .. }
        | PlanError::PadValue { feature, .. }
        | PlanError::TooLarge { feature, .. }
        | PlanError::BoundaryAboveBound { feature, .. }
        | PlanError::DuplicateFeature { feature }
        | PlanError::BadImage { feature, .. } => Some(feature.clone()),
        PlanError::DuplicateName { name } => Some(name.clone()),
        _ => None,
    }
}

#[cfg(feature = "beam")]
/// A conversion error (`infeed.ConvertError`): a bad output, option or schema.
pub fn convert(py: Python<'_>, error: infeed::convert::ConvertError) -> PyErr {
    use infeed::convert::ConvertError as E;
    let path = match &error {
        E::Io { path, .. } | E::Input { path, .. } | E::Tokenizer { path, .. } => {
            Some(path.clone())
        }
        E::Output { name, .. } => Some(name.clone()),
        _ => None,
    };
    raise(
        py,
        "ConvertError",
        error.to_string(),
        Fields {
            path,
            ..Fields::default()
        },
    )
}

#[cfg(feature = "beam")]
/// A conversion error with only a message (and the feature at fault).
pub fn convert_message(py: Python<'_>, message: String, feature: Option<String>) -> PyErr {
    raise(
        py,
        "ConvertError",
        message,
        Fields {
            feature,
            ..Fields::default()
        },
    )
}

#[cfg(feature = "beam")]
/// A row that cannot be written: `record` is its index in the rows handed
/// to the writer, `feature` the column at fault.
pub fn bad_row(
    py: Python<'_>,
    label: &str,
    index: usize,
    feature: Option<String>,
    kind: &infeed::convert::BadKind,
) -> PyErr {
    let column = feature
        .as_ref()
        .map(|c| format!("column {c:?}: "))
        .unwrap_or_default();
    raise(
        py,
        "ConvertError",
        format!("{label}: row {index}: {column}{kind}"),
        Fields {
            path: Some(label.to_owned()),
            feature,
            record: Some(index as u64),
            ..Fields::default()
        },
    )
}
