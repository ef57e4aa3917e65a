//! Resolving a pattern to shards: one directory level at a time, each level
//! listed with the longest literal prefix and a `/` delimiter, so only the
//! directories the pattern can match are ever listed.

// Without the `cloud` feature the retry options go unused.
#![cfg_attr(not(feature = "cloud"), allow(unused_variables))]

use std::path::Path as FsPath;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::error::SourceError;
use super::glob::{self, Pattern};
use super::runtime::io_runtime;
use super::stats::ReadStats;
use super::store::{Backend, Store};
use super::url::Parsed;
use super::{INDEX_SUFFIX, ShardInfo, ShardVersion, SourceOptions};

impl Store {
    /// Lists the shards matching `pattern` (one pattern, in this store); see
    /// [`list_shards`](super::list_shards). Counts requests and listed entries in `stats`.
    pub async fn list(
        &self,
        pattern: &str,
        opts: &SourceOptions,
        stats: &Arc<ReadStats>,
    ) -> Result<Vec<ShardInfo>, SourceError> {
        let store = self.clone();
        let pattern = pattern.to_owned();
        let opts = opts.clone();
        let stats = stats.clone();
        let handle = io_runtime()?;
        let url = pattern.clone();
        handle
            .spawn(async move { list_one(&store, &pattern, &opts, &stats).await })
            .await
            .unwrap_or_else(|e| {
                Err(SourceError::Unreachable {
                    url,
                    message: format!("listing task failed: {e}"),
                    source: Some(Box::new(e)),
                })
            })
    }

    /// The shard at `url` (no wildcards) with its size, from a HEAD request
    /// (or `stat` for local files).
    pub async fn head(
        &self,
        url: &str,
        opts: &SourceOptions,
        stats: &Arc<ReadStats>,
    ) -> Result<ShardInfo, SourceError> {
        let store = self.clone();
        let url = url.to_owned();
        let opts = opts.clone();
        let stats = stats.clone();
        let handle = io_runtime()?;
        let u = url.clone();
        handle
            .spawn(async move { head_one(&store, &url, &opts, &stats).await })
            .await
            .unwrap_or_else(|e| {
                Err(SourceError::Unreachable {
                    url: u,
                    message: format!("HEAD task failed: {e}"),
                    source: Some(Box::new(e)),
                })
            })
    }
}

impl Store {
    /// The shard at `url` (no wildcards) with its size and its version
    /// where the store has one (see [`ShardVersion`]).
    pub async fn stat(
        &self,
        url: &str,
        opts: &SourceOptions,
        stats: &Arc<ReadStats>,
    ) -> Result<(ShardInfo, Option<ShardVersion>), SourceError> {
        let parsed = self.parse_own(url)?;
        if glob::has_wildcard(&parsed.key) {
            return Err(SourceError::bad_url(
                url,
                "wildcards name many shards: list them with list_shards",
            ));
        }
        stat_parsed(self, url, &parsed, opts, stats).await
    }
}

/// One level of a listing: sub-"directories" (full keys, no trailing `/`)
/// and objects (full key, size).
#[derive(Default)]
struct Level {
    dirs: Vec<String>,
    objects: Vec<(String, u64)>,
}

/// The shards matching one pattern (no commas) in `store`, sorted by URL.
async fn list_one(
    store: &Store,
    pattern: &str,
    opts: &SourceOptions,
    stats: &Arc<ReadStats>,
) -> Result<Vec<ShardInfo>, SourceError> {
    let parsed = store.parse_own(pattern)?;
    if !glob::has_wildcard(&parsed.key) {
        return Ok(vec![
            head_parsed(store, pattern, &parsed, opts, stats).await?,
        ]);
    }
    let segments: Vec<&str> = parsed.key.split('/').collect();
    let Some(first_wild) = segments.iter().position(|s| glob::has_wildcard(s)) else {
        return Err(SourceError::bad_url(pattern, "no wildcard")); // unreachable: checked above
    };
    let compiled = segments[first_wild..]
        .iter()
        .map(|s| Pattern::new(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|reason| SourceError::bad_url(pattern, reason))?;

    // Directories (as keys/paths without a trailing '/') still to descend.
    let mut literal_dir = segments[..first_wild].join("/");
    if literal_dir.is_empty() && parsed.key.starts_with('/') {
        literal_dir.push('/'); // a pattern like /train-*: the filesystem root
    }
    let mut dirs = vec![literal_dir];
    let mut found: Vec<ShardInfo> = Vec::new();
    for (i, (segment, pat)) in segments[first_wild..].iter().zip(&compiled).enumerate() {
        let last = first_wild + i + 1 == segments.len();
        let mut next_dirs = Vec::new();
        for dir in &dirs {
            if !glob::has_wildcard(segment) && !last {
                // A literal level below a wildcard: no need to list it.
                next_dirs.push(join(dir, segment));
                continue;
            }
            let level = list_level(
                store,
                pattern,
                &parsed,
                dir,
                glob::literal_prefix(segment),
                last,
                opts,
                stats,
            )
            .await?;
            if last {
                for (key, size) in level.objects {
                    // A shard's index beside it (where versions before
                    // `.infeed-index` wrote it) is no shard, whatever the
                    // glob (`train-*` matches `train-00000.tfrecord.index`).
                    let name = last_segment(&key);
                    if pat.matches(name) && !name.ends_with(INDEX_SUFFIX) {
                        found.push(ShardInfo {
                            url: parsed.url_of(&key),
                            size,
                        });
                    }
                }
            } else {
                next_dirs.extend(
                    level
                        .dirs
                        .into_iter()
                        .filter(|d| pat.matches(last_segment(d))),
                );
            }
        }
        dirs = next_dirs;
        if dirs.is_empty() && !last {
            break;
        }
    }
    if found.is_empty() {
        return Err(SourceError::NoMatch {
            pattern: pattern.to_owned(),
        });
    }
    found.sort_by(|a, b| a.url.cmp(&b.url));
    found.dedup_by(|a, b| a.url == b.url);
    Ok(found)
}

fn last_segment(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

/// `dir/name`; just `name` at the top of a relative path or a bucket (`dir`
/// empty); `/name` at the filesystem root.
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Lists one level under `dir` restricted to names starting with `prefix`.
#[allow(clippy::too_many_arguments)]
async fn list_level(
    store: &Store,
    pattern: &str,
    parsed: &Parsed,
    dir: &str,
    prefix: &str,
    want_objects: bool,
    opts: &SourceOptions,
    stats: &Arc<ReadStats>,
) -> Result<Level, SourceError> {
    match &store.inner.backend {
        Backend::Local => {
            let dir = dir.to_owned();
            let prefix = prefix.to_owned();
            let pattern_owned = pattern.to_owned();
            let stats = stats.clone();
            let _ = parsed;
            tokio::task::spawn_blocking(move || {
                list_local_level(&pattern_owned, &dir, &prefix, want_objects, &stats)
            })
            .await
            .unwrap_or_else(|e| {
                Err(SourceError::Unreachable {
                    url: pattern.to_owned(),
                    message: format!("listing task failed: {e}"),
                    source: Some(Box::new(e)),
                })
            })
        }
        #[cfg(feature = "cloud")]
        Backend::Cloud { lister, .. } => {
            let Some(lister) = lister else {
                return Err(SourceError::bad_url(
                    pattern,
                    "this store cannot list: wildcards need gs://, s3://, az:// or a local path",
                ));
            };
            let full_prefix = join(dir, prefix);
            list_cloud_level(lister.as_ref(), pattern, &full_prefix, opts, stats).await
        }
    }
}

fn list_local_level(
    pattern: &str,
    dir: &str,
    prefix: &str,
    want_objects: bool,
    stats: &ReadStats,
) -> Result<Level, SourceError> {
    let fs_dir = if dir.is_empty() { "." } else { dir };
    stats.requests.fetch_add(1, Relaxed);
    let entries = match std::fs::read_dir(fs_dir) {
        Ok(entries) => entries,
        // A missing directory simply matches nothing.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Level::default());
        }
        Err(e) => {
            return Err(SourceError::Unreachable {
                url: pattern.to_owned(),
                message: format!("cannot list {fs_dir}: {e}"),
                source: Some(Box::new(e)),
            });
        }
    };
    let mut level = Level::default();
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::Unreachable {
            url: pattern.to_owned(),
            message: format!("cannot list {fs_dir}: {e}"),
            source: Some(Box::new(e)),
        })?;
        stats.listed.fetch_add(1, Relaxed);
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue; // not UTF-8: cannot match a UTF-8 pattern
        };
        if !name.starts_with(prefix) {
            continue;
        }
        let key = join(dir, &name);
        // Follow symlinks, like a shell glob does.
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue; // a dangling link
        };
        if want_objects && meta.is_file() {
            level.objects.push((key, meta.len()));
        } else if !want_objects && meta.is_dir() {
            level.dirs.push(key);
        }
    }
    Ok(level)
}

#[cfg(feature = "cloud")]
async fn list_cloud_level(
    lister: &dyn object_store::list::PaginatedListStore,
    pattern: &str,
    prefix: &str,
    opts: &SourceOptions,
    stats: &ReadStats,
) -> Result<Level, SourceError> {
    use object_store::list::PaginatedListOptions;

    use super::retry::{Class, retry_meta};

    let mut level = Level::default();
    let mut page_token: Option<String> = None;
    loop {
        let page = retry_meta(opts, stats, pattern, || {
            let options = PaginatedListOptions {
                delimiter: Some("/".into()),
                page_token: page_token.clone(),
                ..Default::default()
            };
            lister.list_paginated(Some(prefix), options)
        })
        .await
        .map_err(|failure| SourceError::Unreachable {
            url: pattern.to_owned(),
            message: match failure.class {
                Class::NotFound => format!("no such bucket: {}", failure.message),
                Class::Denied => super::credentials::denied(pattern, &failure.message),
                _ => failure.message,
            },
            source: failure.source,
        })?;
        let result = page.result;
        stats.listed.fetch_add(
            (result.objects.len() + result.common_prefixes.len()) as u64,
            Relaxed,
        );
        level
            .dirs
            .extend(result.common_prefixes.iter().map(|p| p.as_ref().to_owned()));
        level.objects.extend(
            result
                .objects
                .iter()
                .map(|o| (o.location.as_ref().to_owned(), o.size)),
        );
        match page.page_token {
            Some(token) if !token.is_empty() => page_token = Some(token),
            _ => break,
        }
    }
    Ok(level)
}

/// The single shard at `url` (no wildcards), with its size.
async fn head_one(
    store: &Store,
    url: &str,
    opts: &SourceOptions,
    stats: &Arc<ReadStats>,
) -> Result<ShardInfo, SourceError> {
    let parsed = store.parse_own(url)?;
    if glob::has_wildcard(&parsed.key) {
        return Err(SourceError::bad_url(
            url,
            "wildcards name many shards: list them with list_shards",
        ));
    }
    head_parsed(store, url, &parsed, opts, stats).await
}

async fn head_parsed(
    store: &Store,
    url: &str,
    parsed: &Parsed,
    opts: &SourceOptions,
    stats: &Arc<ReadStats>,
) -> Result<ShardInfo, SourceError> {
    stat_parsed(store, url, parsed, opts, stats)
        .await
        .map(|(info, _)| info)
}

/// The shard at `url` with its size and its version (an object's ETag, a
/// local file's modification time), where the store gives one.
async fn stat_parsed(
    store: &Store,
    url: &str,
    parsed: &Parsed,
    opts: &SourceOptions,
    stats: &Arc<ReadStats>,
) -> Result<(ShardInfo, Option<ShardVersion>), SourceError> {
    match &store.inner.backend {
        Backend::Local => {
            stats.requests.fetch_add(1, Relaxed);
            let (named, path) = (url.to_owned(), parsed.key.clone());
            tokio::task::spawn_blocking(move || stat_local(&named, &path))
                .await
                .map_err(|e| SourceError::Unreachable {
                    url: url.to_owned(),
                    message: format!("stat task failed: {e}"),
                    source: Some(Box::new(e)),
                })?
        }
        #[cfg(feature = "cloud")]
        Backend::Cloud { objects, .. } => {
            use object_store::ObjectStoreExt;

            use super::retry::{Class, retry_meta};
            if parsed.key.is_empty() || parsed.key.ends_with('/') {
                return Err(SourceError::bad_url(
                    url,
                    "names a bucket or folder, not an object",
                ));
            }
            let path = object_store::path::Path::from(parsed.key.as_str());
            match retry_meta(opts, stats, url, || objects.head(&path)).await {
                Ok(meta) => Ok((
                    ShardInfo {
                        url: url.to_owned(),
                        size: meta.size,
                    },
                    meta.e_tag.map(ShardVersion::Etag),
                )),
                Err(failure) if failure.class == Class::NotFound => Err(SourceError::NotFound {
                    url: url.to_owned(),
                }),
                Err(failure) => Err(SourceError::Unreachable {
                    url: url.to_owned(),
                    message: match failure.class {
                        Class::Denied => super::credentials::denied(url, &failure.message),
                        _ => failure.message,
                    },
                    source: failure.source,
                }),
            }
        }
    }
}

/// The local file at `path` (`url` in errors): its size, and its time of
/// change as its version. Blocking: [`Store::stat`] runs it on the blocking
/// pool; a reader of local files only calls it directly, so that local
/// files never start the I/O runtime.
pub(crate) fn stat_local(
    url: &str,
    path: &str,
) -> Result<(ShardInfo, Option<ShardVersion>), SourceError> {
    let meta = std::fs::metadata(FsPath::new(path));
    match meta {
        Ok(m) if m.is_file() => Ok((
            ShardInfo {
                url: url.to_owned(),
                size: m.len(),
            },
            m.modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| ShardVersion::Modified(d.as_nanos() as u64)),
        )),
        Ok(_) => Err(SourceError::bad_url(
            url,
            "not a file (for the files in a directory use DIR/*)",
        )),
        Err(e) => Err(SourceError::local_io(url, e)),
    }
}
