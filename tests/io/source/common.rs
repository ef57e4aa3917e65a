//! Helpers shared by the source tests: expected records from local files,
//! records from a chunk stream, whole-shard reads.

use std::io::Cursor;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use infeed::record::{ReadOptions, RecordReader};
use infeed::source::{
    ReadStats, ShardInfo, SourceError, SourceOptions, Store, list_shards_with_stats,
};

pub use crate::support::testdata;
use crate::support::tfrecord::read_file;

pub fn file_bytes(name: &str) -> Vec<u8> {
    std::fs::read(testdata(name)).expect("read testdata file")
}

/// (offset, payload) of every record of a testdata file, read locally.
pub fn local_records(name: &str) -> Vec<(u64, Bytes)> {
    read_file(testdata(name))
        .into_iter()
        .map(|r| (r.offset, r.data))
        .collect()
}

/// (offset, payload) of every record of a chunk stream, with the compression
/// detected from `url` and the first bytes.
pub async fn stream_records(
    chunks: impl Stream<Item = Result<Bytes, SourceError>> + Unpin,
    url: &str,
) -> Vec<(u64, Bytes)> {
    let (bytes, _) = collect_chunks(chunks).await.expect("chunks");
    RecordReader::with_options(Cursor::new(bytes), url, &ReadOptions::default())
        .map(|r| r.map(|r| (r.offset, r.data)).expect("record"))
        .collect()
}

/// All bytes of a chunk stream, and the chunk lengths.
pub async fn collect_chunks(
    mut chunks: impl Stream<Item = Result<Bytes, SourceError>> + Unpin,
) -> Result<(Vec<u8>, Vec<usize>), SourceError> {
    let mut all = Vec::new();
    let mut lens = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        lens.push(chunk.len());
        all.extend_from_slice(&chunk);
    }
    Ok((all, lens))
}

/// Reads a whole shard through `store` (or the cached store for its URL).
pub async fn read_all(
    store: Option<&Store>,
    shard: &ShardInfo,
    start: u64,
    opts: &SourceOptions,
    stats: Arc<ReadStats>,
) -> Result<(Vec<u8>, Vec<usize>), SourceError> {
    match store {
        Some(store) => collect_chunks(store.read_chunks(shard, start, opts, stats)).await,
        None => collect_chunks(infeed::source::read_chunks(shard, start, opts, stats)).await,
    }
}

/// The URLs a glob lists (default options), in listing order.
pub async fn listed_urls(glob: &str) -> Vec<String> {
    listed_urls_with_stats(glob).await.0
}

/// The URLs a glob lists (default options), and the listing's request counts.
pub async fn listed_urls_with_stats(glob: &str) -> (Vec<String>, Arc<ReadStats>) {
    let stats = ReadStats::new();
    let shards = list_shards_with_stats(glob, &SourceOptions::default(), &stats)
        .await
        .expect("list");
    (shards.into_iter().map(|s| s.url).collect(), stats)
}
