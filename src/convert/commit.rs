//! Committing a task's output: the closed temporary shards get their final
//! names (their count is known only now), then the manifest is written
//! (and, for a TFDS target, `features.json` and `dataset_info.json`), then
//! shards of an earlier run of the same stem that this run did not write are
//! removed. `infeed convert` and the Beam transform's finalize step
//! (`infeed.beam`) both end here, so their outputs and manifests are the same.

use serde_json::{Value, json};

use crate::record::Compression;

use super::error::ConvertError;
use super::schema::{Schema, Shape};
use super::shard::{self, Closed, CommittedShard, Naming};
use super::sink::ShardSink;
use super::tfds_out::{self, TfdsTarget};

/// Where and how a task's shards are named.
#[derive(Clone, Debug)]
pub struct OutputLayout {
    /// The shard name stem (`train`, `train-task00003`, `{dataset}-{split}`).
    pub stem: String,
    /// How shards are named.
    pub naming: Naming,
    /// The shards' compression.
    pub compression: Compression,
    /// This task's index, from 0.
    pub task_index: usize,
    /// The number of tasks.
    pub num_tasks: usize,
    /// Write a TFDS directory's JSON files too.
    pub tfds: Option<TfdsTarget>,
    /// Write each shard's index, into the `.infeed-index` folder beside the
    /// shards (`crate::index`).
    pub index: bool,
}

/// What a commit did (`infeed convert`'s, or [`finalize`](super::bundle::finalize)): the
/// manifest and the shards it names.
#[derive(Clone, Debug)]
pub struct Committed {
    /// The shards under their final names, in order.
    pub shards: Vec<CommittedShard>,
    /// The manifest's name in the sink.
    pub manifest: String,
    /// Shards of an earlier run that were removed.
    pub removed: Vec<String>,
}

/// The manifest's name: `{stem}.manifest.json`; for one task of many,
/// `{prefix}.taskIIIII.manifest.json`, which the glob of its shards
/// (`{prefix}-*`) does not match, as `{prefix}-taskIIIII.manifest.json`
/// (the name before) did.
pub(super) fn manifest_name(layout: &OutputLayout) -> String {
    let task = format!("-task{:05}", layout.task_index);
    match layout.stem.strip_suffix(&task) {
        Some(prefix) if layout.num_tasks > 1 => {
            format!("{prefix}.task{:05}.manifest.json", layout.task_index)
        }
        _ => stem_manifest_name(&layout.stem),
    }
}

/// `{stem}.manifest.json`: the manifest's name ([`manifest_name`]), but for
/// one task of many, whose manifest versions before named so.
fn stem_manifest_name(stem: &str) -> String {
    format!("{stem}.manifest.json")
}

/// The indexes a shard named `name` may have in the sink: where it is
/// written ([`crate::index::index_name`]), and beside the shard, where
/// versions before wrote it.
fn index_names(name: &str) -> [String; 2] {
    [
        crate::index::index_name(name),
        format!("{name}{}", crate::index::SUFFIX),
    ]
}

/// Renames `closed` (in this order) to their final names, writes the
/// manifest (`input`: what was read, as the manifest's `input` object) and
/// the TFDS files, and removes shards of `layout.stem` this run did not write.
pub(super) fn commit(
    sink: &dyn ShardSink,
    layout: &OutputLayout,
    schema: &Schema,
    closed: &[Closed],
    input: Value,
) -> Result<Committed, ConvertError> {
    if let Some(target) = &layout.tfds {
        tfds_out::check_existing(sink, target, schema)?;
    }
    let count = closed.len();
    let mut shards = Vec::with_capacity(count);
    for (i, c) in closed.iter().enumerate() {
        let name = shard::shard_name(
            layout.naming,
            &layout.stem,
            i,
            count,
            c.records,
            layout.compression,
        );
        // A commit run again (a runner retrying its finalize) finds the
        // shards it moved already in place: the same bytes, so done.
        let mut moved = false;
        if let Err(e) = sink.commit(&c.temp, &name) {
            moved = e.kind() == std::io::ErrorKind::NotFound && is_in_place(sink, &name, c);
            if !moved {
                return Err(ConvertError::output(sink.location(&name), e));
            }
        }
        let [index, beside] = index_names(&name);
        if layout.index {
            if let Err(e) = sink.commit(&shard::index_temp(&c.temp), &index)
                && !(moved && e.kind() == std::io::ErrorKind::NotFound)
            {
                return Err(ConvertError::output(sink.location(&index), e));
            }
        } else {
            // An index of an earlier run's shard of this name is stale now.
            sink.remove(&index)
                .map_err(|e| ConvertError::output(sink.location(&index), e))?;
        }
        // So is one an earlier version wrote beside the shard, where other
        // readers' shard globs take it for a shard.
        sink.remove(&beside)
            .map_err(|e| ConvertError::output(sink.location(&beside), e))?;
        shards.push(CommittedShard {
            name,
            records: c.records,
            bytes: c.bytes,
            crc32c: c.crc32c,
        });
    }
    let manifest = manifest_name(layout);
    let doc = manifest_json(layout, schema, &shards, input);
    let mut text =
        serde_json::to_vec_pretty(&doc).map_err(|e| ConvertError::output(&manifest, e.into()))?;
    text.push(b'\n');
    sink.put(&manifest, &text)
        .map_err(|e| ConvertError::output(sink.location(&manifest), e))?;
    // A manifest of this task under the name before would vouch for shards
    // beside this one's.
    let before = stem_manifest_name(&layout.stem);
    if before != manifest {
        sink.remove(&before)
            .map_err(|e| ConvertError::output(sink.location(&before), e))?;
    }
    if let Some(target) = &layout.tfds {
        tfds_out::write_tfds_files(sink, target, schema, &shards)?;
    }
    let mut removed = Vec::new();
    let existing = sink
        .list(&layout.stem)
        .map_err(|e| ConvertError::output(sink.location(""), e))?;
    for name in existing {
        // A rerun may have switched between tf and hf names; TFDS names stand apart.
        let namings: &[Naming] = match layout.naming {
            Naming::Tfds => &[Naming::Tfds],
            _ => &[Naming::Tf, Naming::Hf],
        };
        let ours = namings
            .iter()
            .any(|&n| shard::is_shard_of(n, &layout.stem, &name));
        if ours && !shards.iter().any(|s| s.name == name) {
            sink.remove(&name)
                .map_err(|e| ConvertError::output(sink.location(&name), e))?;
            // Its index, if it had one, describes a shard that is gone.
            for index in index_names(&name) {
                sink.remove(&index)
                    .map_err(|e| ConvertError::output(sink.location(&index), e))?;
            }
            removed.push(name);
        }
    }
    sink.sync()
        .map_err(|e| ConvertError::output(sink.location(""), e))?;
    Ok(Committed {
        shards,
        manifest,
        removed,
    })
}

/// Whether `name` holds exactly the closed shard `c` (its size and CRC32C):
/// read back only when its temporary file is gone.
fn is_in_place(sink: &dyn ShardSink, name: &str, c: &Closed) -> bool {
    matches!(sink.read(name), Ok(Some(data))
        if data.len() as u64 == c.bytes && crc32c::crc32c(&data) == c.crc32c)
}

/// The manifest: the features, and per shard its records, bytes and CRC32C.
fn manifest_json(
    layout: &OutputLayout,
    schema: &Schema,
    shards: &[CommittedShard],
    input: Value,
) -> Value {
    let features: Vec<Value> = schema
        .columns
        .iter()
        .map(|c| {
            let (shape, len) = match c.shape {
                Shape::Scalar => ("scalar", None),
                Shape::List => ("list", None),
                Shape::Fixed(n) => ("fixed", Some(n)),
            };
            let mut v = json!({"name": c.name, "dtype": c.vtype.spec_name(), "shape": shape, "source": c.source});
            if let (Some(n), Some(obj)) = (len, v.as_object_mut()) {
                obj.insert("length".into(), json!(n));
            }
            v
        })
        .collect();
    let mut doc = json!({
        "infeed_manifest": 1,
        "created_by": format!("infeed {}", env!("CARGO_PKG_VERSION")),
        "task_index": layout.task_index,
        "num_tasks": layout.num_tasks,
        "naming": layout.naming.name(),
        "compression": layout.compression.to_string(),
        "spec": schema.spec(),
        "features": features,
        "records": shards.iter().map(|s| s.records).sum::<u64>(),
        "bytes": shards.iter().map(|s| s.bytes).sum::<u64>(),
        "shards": shards.iter().map(|s| json!({
            "name": s.name,
            "records": s.records,
            "bytes": s.bytes,
            "crc32c": format!("{:08x}", s.crc32c),
        })).collect::<Vec<_>>(),
        "input": input,
    });
    if let (Some(t), Some(obj)) = (&layout.tfds, doc.as_object_mut()) {
        obj.insert(
            "tfds".into(),
            json!({"name": t.name, "version": t.version, "split": t.split}),
        );
    }
    doc
}
