//! GZIP shards read by spans: where a GZIP local shard has an index and
//! the host's workers give each open shard two or more threads, its spans
//! are inflated by helper threads from the index's access points. The
//! pipeline gives the same batches and states as when each shard is read
//! by its reader alone (no index found), across a restore either way; a
//! shard corrupted in place is the reader's error, or, skipping, the
//! reader's skip.

use std::time::{Duration, Instant};

use infeed::index::{BuildOptions, build, index_url, save};
use infeed::pipeline::Pipeline;
use infeed::record::{Compression, CorruptPolicy, ReadOptions};
use infeed::source::SourceOptions;

use super::worker_reads::run;
use crate::support::tfrecord::{corrupt_keeping_time, write_file};

/// GZIP shards of `counts` records that deflate cannot shrink much
/// (`f{f}-r{i}-` and 64 hex digits of noise: a deflate block every ~32
/// KiB of output), each indexed in its default place with an access point
/// at every block.
fn indexed_shards(dir: &std::path::Path, counts: &[usize]) -> Vec<String> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        format!("{x:016x}")
    };
    counts
        .iter()
        .enumerate()
        .map(|(f, &n)| {
            let path = dir.join(format!("shard-{f}.tfrecord.gz"));
            let records: Vec<String> = (0..n)
                .map(|i| format!("f{f}-r{i}-{}", (0..4).map(|_| noise()).collect::<String>()))
                .collect();
            let shard = write_file(&path, records, Compression::Gzip);
            let opts = BuildOptions {
                span: 16 << 10,
                ..BuildOptions::default()
            };
            let index = build(&shard, &opts).unwrap();
            assert!(index.points.len() >= 4, "{} points", index.points.len());
            save(&index, &index_url(&shard, None), &SourceOptions::default()).unwrap();
            shard
        })
        .collect()
}

/// Four workers, one shard open at a time: two or more threads a shard.
fn pipeline(files: &[String]) -> Pipeline {
    Pipeline::from_files(files.to_vec())
        .unwrap()
        .seed(5)
        .threads(4)
        .repeat(Some(2))
}

/// `p` with its shards read by their readers alone: no index where it
/// looks.
fn alone(p: Pipeline, empty: &str) -> Pipeline {
    p.index_dir(empty)
}

#[test]
fn the_same_batches_and_states_as_their_readers_alone_give() {
    let dir = tempfile::tempdir().unwrap();
    let files = indexed_shards(dir.path(), &[3000, 1700]);
    let empty = dir.path().join("no-indexes");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.display().to_string();
    for p in [pipeline(&files), pipeline(&files).shuffle(300)] {
        let (want, end) = run(&alone(p.clone(), &empty), 64);
        assert!(end.is_none());
        assert_eq!(want.iter().map(|(b, _)| b.len()).sum::<usize>(), 2 * 4700);
        let (got, end) = run(&p, 64);
        assert!(end.is_none());
        assert_eq!(got, want);
        // A state of either resumes the other, exactly.
        for cut in [0, 40, 100] {
            let (rest, _) = run(&p.clone().resume_from(&want[cut].1), 64);
            assert_eq!(rest, want[cut + 1..], "cut after batch {cut}");
            let (rest, _) = run(&alone(p.clone(), &empty).resume_from(&got[cut].1), 64);
            assert_eq!(rest, want[cut + 1..], "cut after batch {cut}");
        }
    }
}

/// A shard changed in place after it was indexed (the index still matches
/// it: the byte lies outside the bytes its identity hashes) reads as its
/// reader alone reads it: the same error after the same batches, and
/// skipping, the same records.
#[test]
fn a_shard_corrupted_in_place_reads_as_its_reader_alone_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = indexed_shards(dir.path(), &[3000]);
    let empty = dir.path().join("no-indexes");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.display().to_string();
    let len = std::fs::metadata(&files[0]).unwrap().len();
    corrupt_keeping_time(&files[0], len * 2 / 3);
    let fail = pipeline(&files);
    let skip =
        pipeline(&files).read_options(ReadOptions::default().on_corrupt(CorruptPolicy::Skip));
    for p in [fail, skip] {
        let (want, want_end) = run(&alone(p.clone(), &empty), 64);
        let (got, got_end) = run(&p, 64);
        assert_eq!(got, want);
        let (got_end, want_end) = (
            got_end.map(|e| e.to_string()),
            want_end.map(|e| e.to_string()),
        );
        assert_eq!(got_end, want_end);
        assert!(!want.is_empty());
    }
}

/// The pipeline inflates an indexed GZIP shard on `infeed-inflate`
/// threads (ahead of a consumer that takes nothing yet).
#[test]
fn an_indexed_gzip_shard_is_inflated_on_helper_threads() {
    let dir = tempfile::tempdir().unwrap();
    let files = indexed_shards(dir.path(), &[3000]);
    let batches = pipeline(&files).build_raw(64, false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let inflating = || {
        std::fs::read_dir("/proc/self/task").unwrap().any(|t| {
            std::fs::read_to_string(t.unwrap().path().join("comm"))
                .is_ok_and(|name| name.trim() == "infeed-inflate")
        })
    };
    while !inflating() {
        assert!(Instant::now() < deadline, "no infeed-inflate thread");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(batches);
}
