//! Records per shard, for plans that must know them before reading
//! (equal batch counts across hosts).
//!
//! Reading every shard to count it costs a full pass over the data before
//! the first batch, which on a bucket of large shards means minutes. Shards
//! written by `infeed convert` come with a manifest that lists each shard's
//! records and size; a shard whose size still matches its manifest entry is
//! counted from there, any other is counted by reading it.

use std::collections::HashMap;
use std::io::Read;

use serde_json::Value;

use super::error::PipelineError;
use super::threads::spawn_scoped;
use crate::record::{ReadOptions, RecordReader};
use crate::source::{SourceOptions, list_shards_blocking, open_blocking};

/// Manifests larger than this are not manifests of ours; never read them whole.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// A shard as a convert manifest lists it.
struct ManifestShard {
    name: String,
    records: u64,
    bytes: u64,
}

/// Counts the records of every file: from convert manifests beside them
/// where a manifest vouches for the file's current size, else by reading;
/// listings and reads with the pipeline's `source` options.
pub(crate) fn count_records(
    files: &[String],
    read: &ReadOptions,
    source: &SourceOptions,
) -> Result<Vec<u64>, PipelineError> {
    let known = manifest_counts(files, source);
    let unknown: Vec<usize> = (0..files.len()).filter(|&i| known[i].is_none()).collect();
    let unknown_files: Vec<String> = unknown.iter().map(|&i| files[i].clone()).collect();
    let read_counts = count_by_reading(&unknown_files, read, source)?;
    let mut records: Vec<u64> = known.into_iter().map(|k| k.unwrap_or(0)).collect();
    for (i, n) in unknown.into_iter().zip(read_counts) {
        records[i] = n;
    }
    Ok(records)
}

/// Splits a URL or path into its folder and its last segment.
fn split_name(url: &str) -> (&str, &str) {
    match url.rsplit_once('/') {
        Some((dir, name)) => (dir, name),
        None => (".", url),
    }
}

/// The record count of each file that a manifest in its folder vouches for.
/// Anything unreadable here only means "count by reading": a real problem
/// with the data surfaces there, with its file and offset.
fn manifest_counts(files: &[String], opts: &SourceOptions) -> Vec<Option<u64>> {
    let mut by_dir: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, file) in files.iter().enumerate() {
        by_dir.entry(split_name(file).0).or_default().push(i);
    }
    let mut known = vec![None; files.len()];
    for (dir, members) in by_dir {
        // One listing gives both the manifests and the shards' current sizes.
        let Ok(listing) = list_shards_blocking(&format!("{dir}/*"), opts) else {
            continue;
        };
        let sizes: HashMap<&str, u64> = listing
            .iter()
            .map(|s| (split_name(&s.url).1, s.size))
            .collect();
        let mut vouched: HashMap<String, ManifestShard> = HashMap::new();
        for entry in listing.iter().filter(|s| s.url.ends_with(".manifest.json")) {
            if entry.size > MAX_MANIFEST_BYTES {
                continue;
            }
            for shard in read_manifest(&entry.url, opts) {
                vouched.insert(shard.name.clone(), shard);
            }
        }
        for i in members {
            let name = split_name(&files[i]).1;
            if let (Some(shard), Some(&size)) = (vouched.get(name), sizes.get(name))
                && shard.bytes == size
            {
                known[i] = Some(shard.records);
            }
        }
    }
    known
}

/// The shards a manifest lists; none if it is not a manifest of ours.
fn read_manifest(url: &str, opts: &SourceOptions) -> Vec<ManifestShard> {
    let mut text = Vec::new();
    let read = open_blocking(url, opts).map(|r| r.take(MAX_MANIFEST_BYTES).read_to_end(&mut text));
    if !matches!(read, Ok(Ok(_))) {
        return Vec::new();
    }
    let Ok(doc) = serde_json::from_slice::<Value>(&text) else {
        return Vec::new();
    };
    if doc["infeed_manifest"] != 1 {
        return Vec::new();
    }
    let Some(shards) = doc["shards"].as_array() else {
        return Vec::new();
    };
    shards
        .iter()
        .filter_map(|s| {
            Some(ManifestShard {
                name: s["name"].as_str()?.to_owned(),
                records: s["records"].as_u64()?,
                bytes: s["bytes"].as_u64()?,
            })
        })
        .collect()
}

/// Counts the records of every file by reading it, several files at a time.
fn count_by_reading(
    files: &[String],
    read: &ReadOptions,
    source: &SourceOptions,
) -> Result<Vec<u64>, PipelineError> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    let mut counts = vec![0u64; files.len()];
    for (chunk_files, chunk_counts) in files.chunks(workers).zip(counts.chunks_mut(workers)) {
        std::thread::scope(|scope| {
            let mut handles = Vec::with_capacity(chunk_files.len());
            for file in chunk_files {
                // Refused: the error, once the threads started end.
                handles.push(spawn_scoped(
                    scope,
                    "infeed-count",
                    move || -> Result<u64, PipelineError> {
                        let reader = open_blocking(file, source)?;
                        let mut n = 0;
                        for record in RecordReader::with_options(reader, file.as_str(), read) {
                            record?;
                            n += 1;
                        }
                        Ok(n)
                    },
                )?);
            }
            for (slot, handle) in chunk_counts.iter_mut().zip(handles) {
                *slot = handle
                    .join()
                    .map_err(|_| PipelineError::Worker("record counting".into()))??;
            }
            Ok::<(), PipelineError>(())
        })?;
    }
    Ok(counts)
}
