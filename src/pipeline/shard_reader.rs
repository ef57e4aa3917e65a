//! Reads one shard on its own thread and hands over its records in blocks.
//!
//! A block holds about one read chunk's worth of records (a MiB or more), so
//! the thread hand-off costs once per block, not once per record
//! (DESIGN.md: a cross-core wake-up costs ~40 µs here). Decompression,
//! framing and CRC checks run on this thread, in parallel with the other
//! open shards.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::record::{Compression, ErrorKind, ReadOptions, Record, RecordError, RecordReader};

use super::stats::StageStats;

/// Blocks in flight per shard: one being filled, one waiting.
const BLOCKS_IN_FLIGHT: usize = 2;

/// The reading side of a shard thread.
pub(crate) struct ShardBlocks {
    rx: Receiver<Result<Vec<Record>, RecordError>>,
    handle: Option<JoinHandle<()>>,
}

impl ShardBlocks {
    /// Starts reading `path` at the record boundary `start` (0 for the whole
    /// file).
    pub fn spawn(path: String, start: u64, opts: ReadOptions, stats: Arc<StageStats>) -> Self {
        let (tx, rx) = sync_channel(BLOCKS_IN_FLIGHT);
        let handle = std::thread::Builder::new()
            .name("infeed-shard".into())
            .spawn(move || {
                if let Err(e) = read_shard(&path, start, &opts, &tx, &stats) {
                    let _ = tx.send(Err(e));
                }
            })
            .expect("spawn a shard reader thread");
        ShardBlocks {
            rx,
            handle: Some(handle),
        }
    }

    /// The next block, or `None` at the end of the shard.
    pub fn next_block(&mut self) -> Option<Result<Vec<Record>, RecordError>> {
        self.rx.recv().ok()
    }
}

impl Drop for ShardBlocks {
    fn drop(&mut self) {
        // Dropping the receiver makes the thread's next send fail, so it ends.
        let (_, dead) = sync_channel(0);
        drop(std::mem::replace(&mut self.rx, dead));
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

fn io_error(path: &str, offset: u64, e: &std::io::Error) -> RecordError {
    RecordError {
        path: path.to_owned(),
        offset,
        kind: ErrorKind::from_io(e),
    }
}

/// Opens `path` positioned to read records from `start`.
fn open_at(path: &str, start: u64, opts: &ReadOptions) -> Result<RecordReader<File>, RecordError> {
    let mut file = File::open(path).map_err(|e| io_error(path, 0, &e))?;
    let compression = match opts.compression {
        Some(c) => c,
        None => {
            let mut head = Vec::with_capacity(64);
            (&mut file)
                .take(64)
                .read_to_end(&mut head)
                .map_err(|e| io_error(path, 0, &e))?;
            file.seek(SeekFrom::Start(0))
                .map_err(|e| io_error(path, 0, &e))?;
            Compression::detect(path, &head)
        }
    };
    if compression == Compression::None {
        file.seek(SeekFrom::Start(start))
            .map_err(|e| io_error(path, start, &e))?;
    }
    Ok(RecordReader::resume(file, path, compression, opts, start))
}

/// Reads `path` from `start`, sending a block per chunk's worth of records;
/// returns early (Ok) when the receiver has gone.
fn read_shard(
    path: &str,
    start: u64,
    opts: &ReadOptions,
    tx: &SyncSender<Result<Vec<Record>, RecordError>>,
    stats: &StageStats,
) -> Result<(), RecordError> {
    let mut reader = open_at(path, start, opts)?;
    let block_bytes = opts.chunk_size.max(1);
    loop {
        let timer = stats.busy_timer();
        let mut block = Vec::new();
        let mut bytes = 0;
        let mut failure = None;
        let mut ended = true;
        for record in reader.by_ref() {
            match record {
                Ok(record) => {
                    bytes += record.data.len() + 16;
                    block.push(record);
                    if bytes >= block_bytes {
                        ended = false;
                        break;
                    }
                }
                // The records before an error are delivered first: nothing
                // good is dropped because something bad follows it.
                Err(e) => failure = Some(e),
            }
        }
        stats.add_records(block.len() as u64);
        stats.add_bytes(bytes as u64);
        drop(timer);
        if !block.is_empty() {
            let _wait = stats.wait_timer();
            if tx.send(Ok(block)).is_err() {
                return Ok(());
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if ended {
            let skipped = reader.skipped();
            stats.add_skipped(skipped.records, skipped.bytes);
            return Ok(());
        }
    }
}
