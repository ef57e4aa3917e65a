//! Records read again where a state names them, and other reads of a
//! shard's records outside the interleave: a file's first records (the
//! schedule's sample), a record's index in its file (for an error).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;

use crate::pipeline::checkpoint::Position;
use crate::pipeline::error::{PipelineError, StateError};
use crate::pipeline::item::Item;
use crate::pipeline::stats::StageStats;
use crate::record::{Compression, ErrorKind, ReadOptions, Record, RecordError};
use crate::source::SourceOptions;

use super::blocks::{ShardBlocks, open_at};

/// What a restore reads records again with: a stream's files, how they are
/// read, and what the stream does to a record after reading it (its record
/// map).
#[derive(Clone)]
pub(crate) struct Reread {
    pub files: Arc<Vec<String>>,
    pub read: ReadOptions,
    pub source: SourceOptions,
    pub stats: Arc<StageStats>,
    pub then: Option<Arc<dyn Fn(Item) -> Item + Send + Sync>>,
}

impl Reread {
    /// The records at `positions`, in that order (see [`read_again`]).
    pub fn read(&self, positions: &[Position]) -> Result<Vec<Item>, PipelineError> {
        let items = read_again(
            &self.files,
            &self.read,
            &self.source,
            &self.stats,
            positions,
        )?;
        Ok(match &self.then {
            None => items,
            Some(then) => items.into_iter().map(|item| then(item)).collect(),
        })
    }
}

/// The first `n` records of `url`: fewer if it has fewer, or up to a
/// corrupt record (bytes every reader finds alike; the pipeline reports it
/// with its file and offset when it gets there). A failure to open or read
/// the file is an error: it could strike one host and not another.
pub(crate) fn first_records(
    url: &str,
    n: usize,
    opts: &ReadOptions,
    source: &SourceOptions,
) -> Result<Vec<Record>, RecordError> {
    let mut records = Vec::with_capacity(n);
    for record in open_at(url, 0, opts, source)?.reader.take(n) {
        match record {
            Ok(record) => records.push(record),
            Err(e) if matches!(e.kind, ErrorKind::Io { .. }) => return Err(e),
            Err(_) => break,
        }
    }
    Ok(records)
}

/// The index in its file of the record at `offset`, and the file's
/// compression (for errors: found by reading the file's framing up to it),
/// or `None` if it cannot be read.
pub(crate) fn record_index(
    url: &str,
    offset: u64,
    opts: &ReadOptions,
    source: &SourceOptions,
) -> Option<(u64, Compression)> {
    let reader = open_at(url, 0, opts, source).ok()?.reader;
    let compression = reader.compression()?;
    for (index, record) in (0u64..).zip(reader) {
        let record = record.ok()?;
        if record.offset >= offset {
            return (record.offset == offset).then_some((index, compression));
        }
    }
    None
}

/// Reads the records at the given (file, offset) positions of `files`
/// again, in the given order (a restored shuffle buffer or grouping). Each
/// record is copied out of its read chunk; a position that holds no record
/// is an error.
///
/// The files are read at once, a few at a time ([`read_again_at_once`]),
/// each on its own shard thread: a compressed file is inflated from its
/// start up to its last wanted record, and a restore that waited for the
/// files one after another would take their sum. Results and errors come
/// in file order, as if they were read one by one.
pub(crate) fn read_again(
    files: &[String],
    read: &ReadOptions,
    source: &SourceOptions,
    stats: &Arc<StageStats>,
    positions: &[(u32, u64)],
) -> Result<Vec<Item>, PipelineError> {
    let mut by_file: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for &(file, offset) in positions {
        by_file.entry(file).or_default().push(offset);
    }
    let jobs = by_file.into_iter().map(|(file, mut offsets)| {
        offsets.sort_unstable();
        // With `repeat` before `shuffle` one record can be buffered twice.
        offsets.dedup();
        let path = files
            .get(file as usize)
            .ok_or_else(|| StateError::Invalid {
                field: "file index",
                value: u64::from(file),
                reason: format!("the pipeline has {} files", files.len()),
            })?;
        Ok::<_, PipelineError>((file, path, offsets))
    });
    let mut found: HashMap<(u32, u64), Bytes> = HashMap::with_capacity(positions.len());
    in_order_ahead(
        jobs,
        read_again_at_once(),
        |(file, path, offsets): (u32, &String, Vec<u64>)| {
            let reader = ShardBlocks::spawn(
                path.clone(),
                offsets[0],
                read.clone(),
                source.clone(),
                stats.clone(),
            );
            (file, path, offsets, reader)
        },
        |(file, path, offsets, mut reader)| -> Result<(), PipelineError> {
            let mut wanted = offsets.iter().peekable();
            'file: while let Some(block) = reader.next_block() {
                for record in block.map_err(PipelineError::from)? {
                    if wanted.peek().is_some_and(|&&o| o < record.offset) {
                        break 'file; // not a record boundary: reported below
                    }
                    if wanted.peek() == Some(&&record.offset) {
                        wanted.next();
                        let data = Bytes::copy_from_slice(&record.data);
                        found.insert((file, record.offset), data);
                        if wanted.peek().is_none() {
                            break 'file;
                        }
                    }
                }
            }
            match wanted.peek() {
                Some(&&offset) => Err(StateError::NoRecord {
                    path: path.clone(),
                    offset,
                }
                .into()),
                None => Ok(()),
            }
        },
    )?;
    positions
        .iter()
        .map(|&(file, offset)| {
            let data = found.get(&(file, offset)).cloned().unwrap_or_default();
            Ok(Item::new(data, file, offset))
        })
        .collect()
}

/// Files [`read_again`] reads at once: one per core (at least 2, at most
/// 16), each with its bounded read-ahead.
fn read_again_at_once() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 16))
}

/// Runs `jobs` in order, each started (`start`) up to `ahead` jobs before it
/// is finished (`finish`), so that up to `ahead` run at once. Stops at the
/// first error, in job order: no job after a failed one (or after one that
/// could not be made) is started.
fn in_order_ahead<J, H, E>(
    jobs: impl IntoIterator<Item = Result<J, E>>,
    ahead: usize,
    mut start: impl FnMut(J) -> H,
    mut finish: impl FnMut(H) -> Result<(), E>,
) -> Result<(), E> {
    let mut jobs = jobs.into_iter();
    let mut started = std::collections::VecDeque::new();
    let mut bad = None;
    loop {
        while bad.is_none() && started.len() < ahead.max(1) {
            match jobs.next() {
                Some(Ok(job)) => started.push_back(start(job)),
                Some(Err(e)) => bad = Some(e),
                None => break,
            }
        }
        match started.pop_front() {
            Some(handle) => finish(handle)?,
            None => return bad.map_or(Ok(()), Err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{gzip_shards, record};
    use super::*;

    /// Up to `ahead` jobs run at once, finished in order; the first error
    /// in job order stops it, and nothing after it is started.
    #[test]
    fn jobs_start_ahead_and_finish_in_order() {
        let log = std::cell::RefCell::new(Vec::new());
        let run = |jobs: Vec<Result<u32, String>>, ahead: usize| {
            log.borrow_mut().clear();
            let r = in_order_ahead(
                jobs,
                ahead,
                |j| {
                    log.borrow_mut().push(format!("start {j}"));
                    j
                },
                |j| {
                    log.borrow_mut().push(format!("finish {j}"));
                    if j == 9 {
                        Err("job 9 failed".to_string())
                    } else {
                        Ok(())
                    }
                },
            );
            (r, log.borrow().join(", "))
        };
        assert_eq!(
            run((0..5).map(Ok).collect(), 3),
            (
                Ok(()),
                "start 0, start 1, start 2, finish 0, start 3, finish 1, start 4, finish 2, \
                 finish 3, finish 4"
                    .to_string()
            )
        );
        // A job that cannot be made: the ones before it finish, none after.
        let jobs = vec![Ok(0), Ok(1), Err("no job 2".to_string()), Ok(3)];
        assert_eq!(
            run(jobs, 3),
            (
                Err("no job 2".to_string()),
                "start 0, start 1, finish 0, finish 1".to_string()
            )
        );
        // A job that fails: the started ones after it are dropped unfinished.
        let jobs = vec![Ok(0), Ok(9), Ok(2), Ok(3)];
        assert_eq!(
            run(jobs, 2),
            (
                Err("job 9 failed".to_string()),
                "start 0, start 9, finish 0, start 2, finish 9".to_string()
            )
        );
        assert_eq!(
            run(vec![Ok(0), Ok(1)], 0).1,
            "start 0, finish 0, start 1, finish 1"
        );
    }

    /// A restore's records read again from several GZIP shards at once:
    /// exactly the records at the positions, in the order asked (duplicates
    /// too); a position that is no record names its file and offset, the
    /// first such in file order.
    #[test]
    fn read_again_gives_the_records_at_the_positions_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let files = gzip_shards(dir.path(), 5, 400);
        let opts = ReadOptions {
            chunk_size: 2000,
            ..ReadOptions::default()
        };
        let stats = Arc::default();
        let positions: Vec<(u32, u64)> = (0..300u64)
            .map(|k| ((k * 7 % 5) as u32, (k * 131 % 400) * 116))
            .chain([(3, 0), (3, 0), (4, 399 * 116)])
            .collect();
        let items =
            read_again(&files, &opts, &SourceOptions::default(), &stats, &positions).unwrap();
        assert_eq!(items.len(), positions.len());
        for (item, &(file, offset)) in items.iter().zip(&positions) {
            assert_eq!((item.file, item.offset), (file, offset));
            let want = record(file as usize, (offset / 116) as usize);
            assert_eq!(&item.data[..], &want[..]);
        }
        // File 0 first: past its last record.
        let bad = [(4, 5), (2, 117), (0, 400 * 116)];
        match read_again(&files, &opts, &SourceOptions::default(), &stats, &bad) {
            Err(PipelineError::BadState(StateError::NoRecord { path, offset })) => {
                assert_eq!((path.as_str(), offset), (files[0].as_str(), 400 * 116));
            }
            other => panic!("{other:?}"),
        }
        // File 2 before file 4: no record boundary, so no valid header.
        match read_again(
            &files,
            &opts,
            &SourceOptions::default(),
            &stats,
            &[(4, 5), (2, 117)],
        ) {
            Err(PipelineError::Record(e)) => {
                assert_eq!((e.path.as_str(), e.offset), (files[2].as_str(), 117));
            }
            other => panic!("{other:?}"),
        }
        match read_again(
            &files,
            &opts,
            &SourceOptions::default(),
            &stats,
            &[(1, 0), (7, 0)],
        ) {
            Err(PipelineError::BadState(StateError::Invalid { field, value, .. })) => {
                assert_eq!((field, value), ("file index", 7));
            }
            other => panic!("{other:?}"),
        }
    }
}
