//! Where a shard's index lives, and reading and writing it there: by
//! default in a hidden folder beside the shard
//! (`out/.infeed-index/train-00000.tfrecord.gz.index`), or, since buckets
//! are often read-only, in a folder of the user's
//! (`gs://my-indexes/train-00000.tfrecord.gz.index`), local or gs://, s3://,
//! az://. An index written beside its shard (`SHARD.index`, where versions
//! before the hidden folder put it) is still found.
//!
//! Why a folder of its own: other readers' shard globs
//! (`tf.io.gfile.glob("out/*.tfrecord*")`, Beam's `ReadFromTFRecord`, the
//! `tfrecord` package and crate) take every file the pattern matches, and
//! `train-00000.tfrecord.gz.index` matches `*.tfrecord*`, `*-of-*` and
//! `train-*` alike; no wildcard of theirs matches `/`, so a file one folder
//! down is out of their reach (docs/random-access.md).

use std::sync::Arc;

use super::build::{BuildOptions, build};
use super::error::IndexError;
use super::format::ShardIndex;
use super::identity::{current, file_name};
use crate::source::{ReadStats, SourceError, SourceOptions, Store, io_runtime};

/// What an index file's name adds to its shard's (a glob of shards never
/// matches one).
pub const SUFFIX: &str = crate::source::INDEX_SUFFIX;

/// The folder, beside the shards, their indexes go into by default: hidden,
/// and one level down, so no shard glob reaches it.
pub const INDEX_DIR: &str = ".infeed-index";

/// The default index of the shard named `name`, relative to the shard's
/// folder: `.infeed-index/NAME.index`.
pub fn index_name(name: &str) -> String {
    format!("{INDEX_DIR}/{name}{SUFFIX}")
}

/// Where the index of `shard` is written: in `dir` under the shard's file
/// name, or by default in the folder [`INDEX_DIR`] beside the shard.
pub fn index_url(shard: &str, dir: Option<&str>) -> String {
    match dir {
        None => {
            let name = file_name(shard);
            let folder = &shard[..shard.len() - name.len()];
            format!("{folder}{}", index_name(name))
        }
        Some(dir) => format!("{}/{}{SUFFIX}", dir.trim_end_matches('/'), file_name(shard)),
    }
}

/// Where an index beside its shard is: `SHARD.index`, the default place of
/// versions before [`INDEX_DIR`] (still read where the default place has none).
pub fn beside_url(shard: &str) -> String {
    format!("{shard}{SUFFIX}")
}

/// Where the index of `shard` is looked for, in order: in `dir`; or in the
/// default place ([`index_url`]), then beside the shard ([`beside_url`]).
pub fn index_urls(shard: &str, dir: Option<&str>) -> Vec<String> {
    match dir {
        Some(_) => vec![index_url(shard, dir)],
        None => vec![index_url(shard, None), beside_url(shard)],
    }
}

/// Runs `future` on the I/O runtime and waits for it (from a thread outside
/// the runtime).
fn run<T: Send + 'static>(
    future: impl std::future::Future<Output = Result<T, SourceError>> + Send + 'static,
) -> Result<T, SourceError> {
    let handle = io_runtime()?;
    futures::executor::block_on(async move {
        handle.spawn(future).await.unwrap_or_else(|e| {
            Err(SourceError::Unreachable {
                url: String::new(),
                message: format!("I/O task failed: {e}"),
                source: Some(Box::new(e)),
            })
        })
    })
}

/// The bytes of the object at `url`, or `None` when there is none. A local
/// file is read by std on this thread: local files never start the I/O
/// runtime.
fn read_all(url: &str, source: &SourceOptions) -> Result<Option<Vec<u8>>, IndexError> {
    let store = Store::for_url(url)?;
    if let Some(path) = store.local_path(url)? {
        return match std::fs::read(&path).map_err(|e| SourceError::local_io(url, e)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(SourceError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        };
    }
    let (url, source) = (url.to_owned(), source.clone());
    let found = run(async move {
        let stats = ReadStats::new();
        let (info, _) = match store.stat(&url, &source, &stats).await {
            Ok(found) => found,
            Err(SourceError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let bytes = store
            .read_range(&info, 0..info.size, &source, stats)
            .await?;
        Ok(Some(bytes.to_vec()))
    })?;
    Ok(found)
}

/// Reads the index at `index` of `shard` and checks it against the shard as
/// it is now (a stale index, or one of another file, is refused by name).
pub fn load(shard: &str, index: &str, source: &SourceOptions) -> Result<ShardIndex, IndexError> {
    let bytes = read_all(index, source)?.ok_or_else(|| IndexError::Missing {
        shard: shard.to_owned(),
        index: index.to_owned(),
    })?;
    let idx = ShardIndex::decode(&bytes, index)?;
    idx.shard.check(&current(shard, source)?, index, shard)?;
    Ok(idx)
}

/// Writes `idx` at `index`: a temporary file renamed into place on a local
/// disk, one upload to a bucket (which replaces an object whole); the
/// folder is made if missing.
pub fn save(idx: &ShardIndex, index: &str, source: &SourceOptions) -> Result<(), IndexError> {
    let bytes = idx.encode();
    let store = Store::for_url(index)?;
    let fail = |message: String| IndexError::Write {
        index: index.to_owned(),
        message,
    };
    #[cfg(feature = "cloud")]
    if let Some(objects) = store.object_store() {
        let key = store.parse_own(index)?.key;
        let path = object_store::path::Path::from(key);
        let _ = source;
        return run(async move {
            use object_store::ObjectStoreExt;
            objects
                .put(&path, bytes.into())
                .await
                .map(|_| ())
                .map_err(|e| SourceError::Unreachable {
                    url: path.to_string(),
                    message: e.to_string(),
                    source: Some(Box::new(e)),
                })
        })
        .map_err(|e| fail(e.to_string()));
    }
    let _ = (store, source);
    let path = std::path::Path::new(index.strip_prefix("file://").unwrap_or(index));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
    }
    let tmp = path.with_file_name(format!(".{}.tmp", file_name(index)));
    std::fs::write(&tmp, &bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| fail(e.to_string()))
}

/// Where a pipeline or reader finds its shards' indexes.
#[derive(Clone, Debug, Default)]
pub struct IndexOptions {
    /// The folder of the index files; `None`: each shard's own
    /// `.infeed-index` folder (or, where that has none, beside the shard).
    pub dir: Option<String>,
    /// How a missing index is built (in memory, by scanning the shard).
    pub build: BuildOptions,
}

/// How a shard's index was had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Read from its file, at `index`.
    Loaded { index: String },
    /// None there: built by reading the shard.
    Built,
}

/// The index of every shard, in order: each read from where `opts` says
/// ([`index_urls`]: the first place that has one; checked against its
/// shard), or, where there is none, built in memory by
/// reading the shard (a log line says so: it reads the whole shard). A few
/// are read at once, each on a thread of its own, or on the calling thread
/// where the system refuses one.
pub fn load_or_build(
    shards: &[String],
    opts: &IndexOptions,
) -> Result<Vec<(Arc<ShardIndex>, Found)>, IndexError> {
    let at_once = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 16));
    let mut out = Vec::with_capacity(shards.len());
    for group in shards.chunks(at_once) {
        let found: Vec<Result<(Arc<ShardIndex>, Found), IndexError>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = group
                    .iter()
                    .map(|shard| {
                        std::thread::Builder::new()
                            .name("infeed-index".into())
                            .spawn_scoped(scope, move || one(shard, opts))
                            .map_err(|_| shard)
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| match h {
                        Ok(h) => h.join().unwrap_or_else(|_| {
                            Err(IndexError::Write {
                                index: String::new(),
                                message: "an index thread panicked".into(),
                            })
                        }),
                        // A thread the system refused (its limit on
                        // threads): this shard's index is read here.
                        Err(shard) => one(shard, opts),
                    })
                    .collect()
            });
        for f in found {
            out.push(f?);
        }
    }
    Ok(out)
}

fn one(shard: &str, opts: &IndexOptions) -> Result<(Arc<ShardIndex>, Found), IndexError> {
    if let Some((idx, index)) = find(shard, opts.dir.as_deref(), &opts.build.source)? {
        return Ok((Arc::new(idx), Found::Loaded { index }));
    }
    let places = index_urls(shard, opts.dir.as_deref());
    log_build(shard, &places[0]);
    Ok((Arc::new(build(shard, &opts.build)?), Found::Built))
}

/// The index of `shard` from the first of [`index_urls`] that has one,
/// checked against the shard, with where it was; `None` where none has.
pub fn find(
    shard: &str,
    dir: Option<&str>,
    source: &SourceOptions,
) -> Result<Option<(ShardIndex, String)>, IndexError> {
    for index in index_urls(shard, dir) {
        match load(shard, &index, source) {
            Ok(idx) => return Ok(Some((idx, index))),
            Err(IndexError::Missing { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Says, on standard error, that a missing index is built by reading its
/// shard (a pass over all of it, which an index file saves).
fn log_build(shard: &str, index: &str) {
    eprintln!("infeed: no index at {index}: building it in memory by reading {shard}");
}
