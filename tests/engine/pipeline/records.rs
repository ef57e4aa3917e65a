//! The pipeline's record stream: order, shuffle, repeat, sharding and
//! checkpoints, observed through raw batches of known records.

use super::{sorted, within};
use crate::support::tfrecord::{write_file, write_files};
use std::collections::BTreeMap;

use infeed::pipeline::{Pipeline, PipelineError, StateError};
use infeed::record::{Compression, CorruptPolicy, ReadOptions};
use proptest::prelude::*;

/// Every record of every batch, as strings, with batch boundaries flattened.
fn run(p: &Pipeline, batch: usize, drop_remainder: bool) -> Vec<String> {
    let batches = p.build_raw(batch, drop_remainder).unwrap();
    batches.flat_map(|b| texts(b.unwrap().records())).collect()
}

/// A batch's records, as strings.
fn texts<R: AsRef<[u8]>>(records: impl IntoIterator<Item = R>) -> Vec<String> {
    records
        .into_iter()
        .map(|r| String::from_utf8(r.as_ref().to_vec()).unwrap())
        .collect()
}

fn names(spec: &[(usize, std::ops::Range<usize>)]) -> Vec<String> {
    spec.iter()
        .flat_map(|(f, r)| r.clone().map(move |i| format!("f{f}-r{i}")))
        .collect()
}

#[test]
fn without_shuffle_files_are_read_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[3, 2], Compression::None);
    let p = Pipeline::from_files(files).unwrap();
    assert_eq!(run(&p, 2, false), names(&[(0, 0..3), (1, 0..2)]));
    // drop_remainder drops the last, smaller batch.
    assert_eq!(run(&p, 2, true), names(&[(0, 0..3), (1, 0..1)]));
}

#[test]
fn interleave_takes_blocks_in_turn_and_refills_exhausted_slots() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[2, 4, 3], Compression::Gzip);
    let p = Pipeline::from_files(files.clone())
        .unwrap()
        .interleave(2, 1);
    let expected = [
        "f0-r0", "f1-r0", "f0-r1", "f1-r1", "f1-r2", "f2-r0", "f1-r3", "f2-r1", "f2-r2",
    ];
    assert_eq!(run(&p, 4, false), expected);
    let p = Pipeline::from_files(files).unwrap().interleave(2, 2);
    // As tf.data: an exhausted slot hands the turn on, and takes the next file when its turn comes.
    let expected = [
        "f0-r0", "f0-r1", "f1-r0", "f1-r1", "f1-r2", "f1-r3", "f2-r0", "f2-r1", "f2-r2",
    ];
    assert_eq!(run(&p, 3, false), expected);
}

#[test]
fn from_glob_lists_sorted_matches_and_an_empty_glob_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[1, 1, 1], Compression::None);
    let pattern = format!("{}/shard-*.tfrecord", dir.path().display());
    let p = Pipeline::from_glob(&pattern).unwrap();
    assert_eq!(p.files().len(), 3);
    assert!(p.files()[0].ends_with("shard-0.tfrecord"));
    let none = format!("{}/nothing-*.tfrecord", dir.path().display());
    assert!(matches!(
        Pipeline::from_glob(&none),
        Err(PipelineError::Source(
            infeed::source::SourceError::NoMatch { .. }
        ))
    ));
}

#[test]
fn shuffle_is_a_seeded_permutation_whatever_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[50, 70, 30], Compression::None);
    let base = Pipeline::from_files(files)
        .unwrap()
        .seed(11)
        .shuffle_files()
        .interleave(2, 3)
        .shuffle(40);
    let one = run(&base.clone().threads(1), 16, false);
    assert_eq!(
        sorted(one.clone()),
        sorted(names(&[(0, 0..50), (1, 0..70), (2, 0..30)]))
    );
    assert_eq!(run(&base.clone().threads(4).prefetch(5), 16, false), one);
    assert_eq!(run(&base.clone().threads(2), 16, false), one);
    assert_ne!(run(&base.clone().seed(12), 16, false), one);
}

#[test]
fn repeat_reads_every_epoch_fully_and_reshuffles_each() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[20, 20], Compression::None);
    let all = sorted(names(&[(0, 0..20), (1, 0..20)]));
    let p = Pipeline::from_files(files)
        .unwrap()
        .seed(3)
        .shuffle_files()
        .shuffle(16)
        .repeat(Some(3));
    let out = run(&p, 8, false);
    assert_eq!(out.len(), 120);
    let epochs: Vec<_> = out.chunks(40).map(|e| e.to_vec()).collect();
    for epoch in &epochs {
        // shuffle then repeat: the buffer drains at each epoch's end.
        assert_eq!(sorted(epoch.clone()), all);
    }
    assert_ne!(epochs[0], epochs[1]);
}

#[test]
fn repeat_before_shuffle_mixes_epochs_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[10], Compression::None);
    let p = Pipeline::from_files(files)
        .unwrap()
        .seed(5)
        .repeat(Some(4))
        .shuffle(25);
    let out = run(&p, 7, false);
    let mut counts = BTreeMap::new();
    for r in &out {
        *counts.entry(r.clone()).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 10);
    assert!(counts.values().all(|&c| c == 4));
    // With a buffer larger than an epoch, the first 10 outputs mix epochs.
    assert_ne!(sorted(out[..10].to_vec()), sorted(names(&[(0, 0..10)])));
}

#[test]
fn hosts_read_disjoint_parts_that_cover_the_data() {
    let dir = tempfile::tempdir().unwrap();
    for (counts, hosts) in [(vec![5, 6, 7, 8, 9], 2u64), (vec![13, 4], 3)] {
        let files = write_files(dir.path(), &counts, Compression::None);
        let mut union = Vec::new();
        for host in 0..hosts {
            let p = Pipeline::from_files(files.clone())
                .unwrap()
                .shard(host, hosts)
                .seed(1)
                .shuffle(8);
            union.extend(run(&p, 4, false));
        }
        let all: Vec<(usize, std::ops::Range<usize>)> =
            counts.iter().enumerate().map(|(f, &n)| (f, 0..n)).collect();
        assert_eq!(
            sorted(union),
            sorted(names(&all)),
            "{counts:?} on {hosts} hosts"
        );
    }
}

#[test]
fn skip_take_filter_and_map_apply_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[10], Compression::None);
    let p = Pipeline::from_files(files)
        .unwrap()
        .skip(2)
        .take(5)
        .filter(|r| !r.ends_with(b"3"))
        .map(|r| bytes::Bytes::from([&r[..], b"!"].concat()))
        .repeat(Some(2));
    let epoch = ["f0-r2!", "f0-r4!", "f0-r5!", "f0-r6!"];
    assert_eq!(run(&p, 3, false), [epoch, epoch].concat());
}

#[test]
fn an_empty_dataset_repeated_forever_is_an_error_not_a_hang() {
    within(60, || {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &[0, 0], Compression::None);
        let mut batches = Pipeline::from_files(files)
            .unwrap()
            .repeat(None)
            .build_raw(4, false)
            .unwrap();
        assert!(matches!(
            batches.next_batch(),
            Err(PipelineError::EmptyEpoch { epoch: 0 })
        ));
        assert!(batches.next_batch().unwrap().is_none());
    });
}

#[test]
fn a_corrupt_record_names_file_and_offset_or_is_skipped_and_counted() {
    let corrupt = super::testdata("corrupt.tfrecord");
    let p = Pipeline::from_files([corrupt.clone()]).unwrap();
    let mut batches = p.build_raw(1, false).unwrap();
    assert_eq!(batches.next_batch().unwrap().unwrap().len(), 1);
    assert_eq!(batches.next_batch().unwrap().unwrap().len(), 1);
    match batches.next_batch() {
        Err(PipelineError::Record(e)) => {
            assert_eq!((e.path.as_str(), e.offset), (corrupt.as_str(), 117));
        }
        other => panic!("{:?}", other.map(|b| b.map(|b| b.into_records()))),
    }
    let skip = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
    let mut batches = p.read_options(skip).build_raw(10, false).unwrap();
    assert_eq!(batches.next_batch().unwrap().unwrap().len(), 4);
    assert!(batches.next_batch().unwrap().is_none());
    let stats = batches.stats();
    assert_eq!(
        (stats.read.skipped_records, stats.read.skipped_bytes),
        (1, 94)
    );
}

#[test]
fn a_panicking_map_is_an_error_not_an_early_end() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[10], Compression::None);
    let p = Pipeline::from_files(files).unwrap().map(|r| {
        assert!(!r.ends_with(b"7"), "user map failed");
        r
    });
    let results: Vec<_> = p.build_raw(2, false).unwrap().collect();
    assert!(results[..3].iter().all(Result::is_ok));
    assert!(
        matches!(results.last(), Some(Err(PipelineError::Worker(m))) if m.contains("user map failed"))
    );
}

/// A job of logical streams on one host: a stream whose record thread
/// panics ends the run with the panic, at the step it could not fill, not
/// with steps short of that stream's rows followed by an error.
#[test]
fn a_panicking_map_in_one_of_several_streams_is_an_error_not_short_batches() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[20, 20], Compression::None);
    let p = Pipeline::from_files(files).unwrap().streams(2).map(|r| {
        assert_ne!(&r[..], b"f1-r9", "user map failed");
        r
    });
    let results: Vec<_> = p.build_raw(4, false).unwrap().collect();
    let (last, batches) = results.split_last().unwrap();
    assert!(
        matches!(last, Err(PipelineError::Worker(m)) if m.contains("user map failed")),
        "{:?}",
        last.as_ref().map(|b| texts(b.records()))
    );
    // Steps 0..4 hold f0-r0..7 and f1-r0..7, two rows of each stream a step.
    let texts: Vec<Vec<String>> = batches
        .iter()
        .map(|b| texts(b.as_ref().unwrap().records()))
        .collect();
    assert_eq!(texts.len(), 4, "{texts:?}");
    for (t, rows) in texts.iter().enumerate() {
        let want: Vec<String> = (0..2)
            .flat_map(|f| (2 * t..2 * t + 2).map(move |r| format!("f{f}-r{r}")))
            .collect();
        assert_eq!(rows, &want, "step {t}");
    }
}

#[test]
fn a_state_from_another_pipeline_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[10], Compression::None);
    let p = Pipeline::from_files(files.clone())
        .unwrap()
        .seed(1)
        .shuffle(4);
    let mut batches = p.build_raw(2, false).unwrap();
    batches.next_batch().unwrap();
    let state = batches.state();
    drop(batches);
    let err = p
        .clone()
        .seed(2)
        .resume_from(&state)
        .build_raw(2, false)
        .err();
    assert!(
        matches!(
            err,
            Some(PipelineError::BadState(StateError::OtherPipeline { .. }))
        ),
        "{err:?}"
    );
    // A seed nothing draws from moves no record: the state restores.
    let p = Pipeline::from_files(files).unwrap().seed(1);
    let mut batches = p.build_raw(2, false).unwrap();
    batches.next_batch().unwrap();
    let state = batches.state();
    let rest: Vec<_> = batches.map(|b| b.unwrap().into_records()).collect();
    let restored = p.seed(2).resume_from(&state).build_raw(2, false).unwrap();
    assert_eq!(
        restored
            .map(|b| b.unwrap().into_records())
            .collect::<Vec<_>>(),
        rest
    );
}

#[test]
fn state_with_a_full_10k_shuffle_buffer_is_under_64_kib() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[8_000, 8_000], Compression::None);
    let p = Pipeline::from_files(files)
        .unwrap()
        .interleave(2, 1)
        .shuffle(10_000)
        .seed(9);
    let mut batches = p.build_raw(256, true).unwrap();
    for _ in 0..4 {
        batches.next_batch().unwrap().unwrap();
    }
    let state = batches.state();
    assert!(state.len() < 64 * 1024, "{} bytes", state.len());
    let rest: Vec<String> = batches
        .flat_map(|b| b.unwrap().into_records())
        .map(|r| String::from_utf8(r.to_vec()).unwrap())
        .collect();
    let resumed = run(&p.clone().resume_from(&state), 256, true);
    assert_eq!(resumed, rest);
}

/// The shuffle buffer's target (docs/architecture.md, Decisions): a full
/// 10 000-record buffer of lm-sized records (40..2 056 bytes) read before
/// the workers (a GZIP shard's: a plain local shard's records are left
/// unread, and the buffer holds their stand-ins) takes at most 1.25x their
/// payload, slot tables included, as the pipeline's own figures report it.
#[test]
fn a_full_shuffle_buffer_costs_at_most_a_quarter_over_its_payload() {
    let dir = tempfile::tempdir().unwrap();
    let mut x = 7u64;
    let records = (0..30_000u64).map(|i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (0..40 + 4 * (x % 505))
            .map(|k| (i + k) as u8)
            .collect::<Vec<u8>>()
    });
    let path = write_file(
        &dir.path().join("lm.tfrecord.gz"),
        records,
        Compression::Gzip,
    );
    let p = Pipeline::from_files(vec![path])
        .unwrap()
        .shuffle(10_000)
        .seed(3);
    let mut batches = p.build_raw(256, false).unwrap();
    let mut records = 0;
    while let Some(batch) = batches.next_batch().unwrap() {
        records += batch.len();
    }
    assert_eq!(records, 30_000);
    let shuffle = batches.stats().record_thread;
    let (storage, payload) = (shuffle.buffer_bytes, shuffle.buffer_payload_bytes);
    // 10 000 records of ~1 048 bytes on average.
    assert!((9_500_000..11_500_000).contains(&payload), "{payload}");
    let ratio = storage as f64 / payload as f64;
    assert!(
        ratio <= 1.25,
        "storage {storage} / payload {payload} = {ratio:.3}"
    );
}

/// With `mmap`, the shuffle buffer holds records of 1 KiB and more that
/// were read before the workers (here for a filter on serialized records,
/// which keeps each as it came) as the views
/// of the mapped files they came as (no copy: its own storage holds only
/// the shorter ones), and the run is the one read into buffers gives,
/// restored from a checkpoint too.
#[test]
fn a_mapped_shuffle_holds_long_records_and_gives_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for f in 0..2u64 {
        let path = dir.path().join(format!("mixed-{f}.tfrecord"));
        let records = (0..3_000u64).map(|i| {
            // Every other record is 1-3 KiB, the rest 10-1010 bytes.
            let len = if i % 2 == 0 {
                1024 + i % 2048
            } else {
                10 + i % 1000
            };
            let mut record = format!("f{f}-r{i}:").into_bytes();
            record.resize(len as usize, b'a' + (i % 26) as u8);
            record
        });
        files.push(write_file(&path, records, Compression::None));
    }
    let p = |mmap| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .interleave(2, 1)
            .shuffle(1_000)
            .seed(11)
            .read_options(ReadOptions::default().mmap(mmap))
            .filter(|_: &[u8]| true)
    };
    let read = run(&p(false), 64, false);
    assert_eq!(read.len(), 6_000);
    let mut batches = p(true).build_raw(64, false).unwrap();
    let mut mapped = Vec::new();
    for _ in 0..40 {
        mapped.extend(texts(batches.next_batch().unwrap().unwrap().records()));
    }
    let state = batches.state();
    for batch in batches.by_ref() {
        mapped.extend(texts(batch.unwrap().records()));
    }
    assert_eq!(mapped, read);
    let shuffle = batches.stats().record_thread;
    // About half of the 1 000 buffered records are held: ~1 MB of them,
    // and ~0.5 MB stored.
    assert!(
        (700_000..1_400_000).contains(&shuffle.buffer_mapped_bytes),
        "{shuffle:?}"
    );
    assert!(
        (300_000..700_000).contains(&shuffle.buffer_payload_bytes),
        "{shuffle:?}"
    );
    let resumed = run(&p(true).resume_from(&state), 64, false);
    assert_eq!(resumed[..], read[40 * 64..]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Restoring at any cut continues with exactly the batches an
    /// uninterrupted run produces: mid-shard, mid-epoch, across repeat,
    /// with shuffle and interleave, plain and GZIP.
    #[test]
    fn restore_at_any_cut_continues_exactly(
        counts in prop::collection::vec(0usize..40, 1..5),
        cycle in 1usize..4,
        block in 1usize..3,
        buffer in 0usize..30,
        epochs in 1u64..4,
        repeat_first in any::<bool>(),
        gzip in any::<bool>(),
        batch in 1usize..6,
        cut_fraction in 0.0f64..1.0,
        seed in any::<u64>(),
    ) {
        prop_assume!(counts.iter().sum::<usize>() > 0);
        let dir = tempfile::tempdir().unwrap();
        let compression = if gzip { Compression::Gzip } else { Compression::None };
        let files = write_files(dir.path(), &counts, compression);
        let mut p = Pipeline::from_files(files).unwrap().seed(seed).shuffle_files().interleave(cycle, block);
        p = if repeat_first { p.repeat(Some(epochs)).shuffle(buffer) } else { p.shuffle(buffer).repeat(Some(epochs)) };
        let full: Vec<Vec<bytes::Bytes>> = p.build_raw(batch, false).unwrap().map(|b| b.unwrap().into_records()).collect();
        let cut = ((full.len() as f64) * cut_fraction) as usize;
        let mut first = p.build_raw(batch, false).unwrap();
        for _ in 0..cut {
            first.next_batch().unwrap();
        }
        let state = first.state();
        drop(first);
        let rest: Vec<Vec<bytes::Bytes>> =
            p.clone().resume_from(&state).build_raw(batch, false).unwrap().map(|b| b.unwrap().into_records()).collect();
        prop_assert_eq!(&rest[..], &full[cut..]);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_async_stream_yields_the_same_batches_and_state() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[30, 20], Compression::None);
    let p = Pipeline::from_files(files)
        .unwrap()
        .seed(2)
        .interleave(2, 1)
        .shuffle(10);
    let blocking = run(&p, 4, false);
    let mut stream = p.build_raw(4, false).unwrap().into_stream();
    let mut got = Vec::new();
    for _ in 0..5 {
        got.extend(texts(stream.next().await.unwrap().unwrap().records()));
    }
    let state = stream.state();
    while let Some(batch) = stream.next().await {
        got.extend(texts(batch.unwrap().records()));
    }
    assert_eq!(got, blocking);
    let resumed = run(&p.clone().resume_from(&state), 4, false);
    assert_eq!(resumed, blocking[20..]);
}

#[test]
fn unordered_output_holds_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[60, 45], Compression::Gzip);
    let p = Pipeline::from_files(files)
        .unwrap()
        .seed(8)
        .interleave(2, 2)
        .shuffle(20)
        .threads(3);
    let ordered = run(&p, 5, false);
    let unordered = run(&p.clone().unordered(), 5, false);
    assert_eq!(sorted(unordered), sorted(ordered));
}

#[test]
fn equal_batches_give_every_host_the_same_count() {
    use infeed::pipeline::EqualBatches;
    let dir = tempfile::tempdir().unwrap();
    // By file: host 0 reads 5+7+9 = 21 records, host 1 reads 6+8 = 14.
    let files = write_files(dir.path(), &[5, 6, 7, 8, 9], Compression::None);
    let host = |i: u64, how| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .shard(i, 2)
            .seed(1)
            .shuffle(8)
            .equal_batches(how)
    };
    let sizes = |p: Pipeline| -> Vec<usize> {
        p.build_raw(4, false)
            .unwrap()
            .map(|b| b.unwrap().len())
            .collect()
    };
    assert_eq!(sizes(host(0, EqualBatches::Drop)), [4, 4, 4]);
    assert_eq!(sizes(host(1, EqualBatches::Drop)), [4, 4, 4]);
    assert_eq!(sizes(host(0, EqualBatches::Pad)), [4, 4, 4, 4, 4, 1]);
    assert_eq!(sizes(host(1, EqualBatches::Pad)), [4, 4, 4, 2, 0, 0]);
    // By record (fewer files than hosts), over 2 epochs: 17 records → 6, 6, 5 per epoch.
    let dir2 = tempfile::tempdir().unwrap();
    let few = write_files(dir2.path(), &[13, 4], Compression::None);
    for i in 0..3 {
        let p = Pipeline::from_files(few.clone())
            .unwrap()
            .shard(i, 3)
            .repeat(Some(2))
            .equal_batches(EqualBatches::Drop);
        assert_eq!(sizes(p), [4, 4], "host {i}");
    }
    // A restore inside the padding tail keeps the count.
    let p = host(1, EqualBatches::Pad);
    let mut first = p.build_raw(4, false).unwrap();
    for _ in 0..5 {
        first.next_batch().unwrap();
    }
    let state = first.state();
    drop(first);
    assert_eq!(sizes(p.clone().resume_from(&state)), [0]);
    // With a record filter the count comes from running every host's
    // chain: records with an even index (last digit) are kept, 3+4+5 = 12 on
    // host 0 and 3+4 = 7 on host 1; both emit host 0's three batches.
    let filtered = |i: u64| {
        host(i, EqualBatches::Pad).filter(|bytes| bytes.last().is_some_and(|d| d % 2 == 0))
    };
    assert_eq!(sizes(filtered(0)), [4, 4, 4]);
    assert_eq!(sizes(filtered(1)), [4, 3, 0]);
}
