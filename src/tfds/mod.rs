//! Prepared TensorFlow Datasets directories, read without TensorFlow.
//!
//! A TFDS directory `{data_dir}/{name}[/{config}]/{version}/` holds
//! `dataset_info.json` (the splits, each shard's record count, the file
//! names), `features.json` (the features) and the TFRecord shards.
//! [`TfdsDataset::open`] reads the first; [`TfdsDataset::select`] turns a
//! split string (`train[:80%]+test`, TFDS's grammar and rounding) into the
//! shards and record ranges to read; [`TfdsDataset::spec`] maps the features
//! to a [`FeatureSpec`]. `Pipeline::from_tfds` puts them together.
//!
//! One concept a file: `info` (dataset_info.json), `split` (split strings),
//! `features` (features.json), `error`.

mod error;
mod features;
mod info;
mod split;

use std::io::Read;

pub use error::TfdsError;
pub use features::{TfdsFeature, image_feature, parse_features, spec_of};
pub use info::{DEFAULT_TEMPLATE, DatasetInfo, SplitInfo, parse_info};
pub use split::ShardSlice;

use crate::source::{SourceOptions, open_blocking};
use crate::spec::FeatureSpec;

/// The JSON files of a dataset are small; anything larger is not one.
const MAX_JSON_BYTES: u64 = 256 << 20;

/// A prepared TFDS dataset directory: its `dataset_info.json`, read once.
#[derive(Clone, Debug)]
pub struct TfdsDataset {
    dir: String,
    info: DatasetInfo,
    source: SourceOptions,
}

/// One shard file a split string selects, with the records to read of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectedShard {
    /// The file, as the dataset directory was spelled, plus its name.
    pub url: String,
    /// `(first, count)`: the records to read, by their index in the file;
    /// `None` for the whole file.
    pub range: Option<(u64, u64)>,
    /// The records read from it (from `dataset_info.json`, not counted).
    pub records: u64,
}

impl TfdsDataset {
    /// Reads `dir/dataset_info.json` (a local path or a gs://, s3://, az://
    /// URL) with the default [`SourceOptions`].
    pub fn open(dir: &str) -> Result<Self, TfdsError> {
        Self::open_with(dir, &SourceOptions::default())
    }

    /// [`open`](Self::open), reading with `source` (retries, timeouts).
    pub fn open_with(dir: &str, source: &SourceOptions) -> Result<Self, TfdsError> {
        let dir = dir.trim_end_matches('/');
        let dir = if dir.is_empty() { "/" } else { dir };
        let path = join(dir, "dataset_info.json");
        let text = read_json(&path, source)?;
        let info = parse_info(&text, &path, dir)?;
        Ok(TfdsDataset {
            dir: dir.to_owned(),
            info,
            source: source.clone(),
        })
    }

    /// The dataset directory, without a trailing `/`.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// What `dataset_info.json` says.
    pub fn info(&self) -> &DatasetInfo {
        &self.info
    }

    /// The names of the splits, in the file's order.
    pub fn split_names(&self) -> Vec<&str> {
        self.info.splits.iter().map(|s| s.name.as_str()).collect()
    }

    /// The shards a split string selects, in reading order, each with the
    /// records to read of it; shards outside the slice are left out.
    pub fn select(&self, split: &str) -> Result<Vec<SelectedShard>, TfdsError> {
        let slices = split::resolve(split, &self.info.splits, &self.dir)?;
        slices
            .into_iter()
            .map(|s| {
                let info = &self.info.splits[s.split];
                let name = info.shard_path(&self.dir, &self.info.name, s.shard)?;
                Ok(SelectedShard {
                    url: join(&self.dir, &name),
                    range: (!s.is_whole()).then_some((s.first, s.count)),
                    records: s.count,
                })
            })
            .collect()
    }

    /// The Example features of the dataset (`features.json`, read now).
    pub fn features(&self) -> Result<Vec<TfdsFeature>, TfdsError> {
        let path = join(&self.dir, "features.json");
        let text = read_json(&path, &self.source)?;
        parse_features(&text, &path)
    }

    /// The spec that parses the dataset's records by its own features
    /// (see [`spec_of`] for the mapping).
    pub fn spec(&self) -> Result<FeatureSpec, TfdsError> {
        Ok(spec_of(&self.features()?))
    }
}

/// `dir/name`.
fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// A JSON file's bytes, local or in the cloud.
fn read_json(path: &str, source: &SourceOptions) -> Result<Vec<u8>, TfdsError> {
    let read = |source| TfdsError::Read {
        path: path.to_owned(),
        source,
    };
    let reader = open_blocking(path, source).map_err(read)?;
    let mut text = Vec::new();
    reader
        .take(MAX_JSON_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| TfdsError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    Ok(text)
}
