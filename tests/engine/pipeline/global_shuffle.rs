//! `Pipeline::global_shuffle`: every epoch a permutation of every record,
//! each host (or logical stream) taking every `n`-th position, so every
//! record is read once per epoch on any host count; its state a count that
//! restores exactly, on the same and on another host count; block mode; a
//! state of a few bytes; GZIP shards; equal batch counts from the indexes;
//! what it cannot be combined with.

use infeed::pipeline::{EqualBatches, Pipeline, PipelineError, merge_states};
use infeed::record::{Compression, CorruptPolicy, ReadOptions};
use proptest::prelude::*;

use super::restore_props::all_records;
use super::worker_reads::{drain, record_offset, save_index};
use crate::support::tfrecord::{corrupt_keeping_time, write_files};

/// Records "f{f}-r{i}" of files of `counts` records.
fn dataset(dir: &std::path::Path, counts: &[usize], c: Compression) -> Vec<String> {
    write_files(dir, counts, c)
}

fn pipeline(files: &[String], blocks: Option<u64>) -> Pipeline {
    let p = Pipeline::from_files(files.to_vec())
        .unwrap()
        .seed(11)
        .threads(1);
    match blocks {
        None => p.global_shuffle(),
        Some(bytes) => p.global_shuffle_blocks(bytes),
    }
}

/// Every record a pipeline emits, in order, as strings.
fn records(p: &Pipeline, batch: usize) -> Vec<String> {
    p.build_raw(batch, false)
        .unwrap()
        .flat_map(|b| b.unwrap().into_records())
        .map(|r| String::from_utf8(r.to_vec()).unwrap())
        .collect()
}

#[test]
fn every_epoch_is_a_permutation_of_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let counts = [40, 0, 77, 13];
    for c in [Compression::None, Compression::Gzip] {
        let sub = dir.path().join(format!("{c}"));
        std::fs::create_dir(&sub).unwrap();
        let files = dataset(&sub, &counts, c);
        let all = all_records(&counts);
        for blocks in [None, Some(300)] {
            let out = records(&pipeline(&files, blocks).repeat(Some(3)), 7);
            assert_eq!(out.len(), 3 * all.len());
            let epochs: Vec<&[String]> = out.chunks(all.len()).collect();
            for epoch in &epochs {
                let mut sorted = epoch.to_vec();
                sorted.sort();
                assert_eq!(sorted, all, "{c} {blocks:?}");
            }
            assert_ne!(epochs[0], epochs[1]);
            // Not the files' order.
            let mut in_order = all.clone();
            in_order.sort_by_key(|r| {
                let (f, i) = r[1..].split_once("-r").unwrap();
                (f.parse::<u32>().unwrap(), i.parse::<u32>().unwrap())
            });
            assert_ne!(epochs[0], &in_order[..]);
            // The same seed, the same order.
            assert_eq!(records(&pipeline(&files, blocks).repeat(Some(3)), 5), out);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// On any host count the hosts' records of an epoch are every record
    /// once, in record and block mode.
    #[test]
    fn hosts_read_every_record_once_an_epoch(
        counts in proptest::collection::vec(0usize..60, 1..5),
        hosts in 1u64..5,
        blocks in prop_oneof![Just(None), Just(Some(200u64)), Just(Some(1500))],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = dataset(dir.path(), &counts, Compression::None);
        let all = all_records(&counts);
        for epoch in 0..2u64 {
            let mut union = Vec::new();
            for h in 0..hosts {
                let p = pipeline(&files, blocks).shard(h, hosts).repeat(Some(2));
                let out = records(&p, 4);
                // This host's records of epoch `epoch`: run epoch 0 alone,
                // then the two, and take the difference.
                let first = records(&pipeline(&files, blocks).shard(h, hosts), 4);
                let mine = if epoch == 0 { &out[..first.len()] } else { &out[first.len()..] };
                union.extend_from_slice(mine);
            }
            union.sort();
            prop_assert_eq!(&union, &all, "epoch {}", epoch);
        }
    }

    /// A state taken after any batch restores the exact rest, on the same
    /// host count and, through logical streams, on another.
    #[test]
    fn a_restore_at_any_cut_continues_exactly(
        counts in proptest::collection::vec(1usize..50, 1..4),
        cut in 0usize..40,
        blocks in prop_oneof![Just(None), Just(Some(400u64))],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = dataset(dir.path(), &counts, Compression::None);
        let job = |h: u64, n: u64| pipeline(&files, blocks).streams(4).shard(h, n).repeat(Some(3)).shuffle(5);
        // Uninterrupted on 2 hosts: each host's batches.
        let full: Vec<Vec<Vec<String>>> = (0..2)
            .map(|h| {
                job(h, 2)
                    .build_raw(4, true)
                    .unwrap()
                    .map(|b| b.unwrap().into_records().iter().map(|r| String::from_utf8(r.to_vec()).unwrap()).collect())
                    .collect()
            })
            .collect();
        let steps = full[0].len().min(full[1].len());
        let cut = cut.min(steps);
        // Cut after `cut` steps on 2 hosts, states merged.
        let states: Vec<Vec<u8>> = (0..2)
            .map(|h| {
                let mut b = job(h, 2).build_raw(4, true).unwrap();
                for _ in 0..cut {
                    b.next_batch().unwrap().unwrap();
                }
                b.state()
            })
            .collect();
        // Logical streams: a few bytes each, whatever the dataset's size.
        prop_assert!(states[0].len() < 400, "{} bytes", states[0].len());
        let merged = merge_states(&[&states[0], &states[1]]).unwrap();
        // The same host count: the rest of each host's batches.
        for h in 0..2u64 {
            let rest: Vec<Vec<String>> = job(h, 2)
                .resume_from(&merged)
                .build_raw(4, true)
                .unwrap()
                .map(|b| b.unwrap().into_records().iter().map(|r| String::from_utf8(r.to_vec()).unwrap()).collect())
                .collect();
            prop_assert_eq!(&rest[..], &full[h as usize][cut..]);
        }
        // One host: its step is the two hosts' rows, in stream order.
        let one: Vec<Vec<String>> = job(0, 1)
            .resume_from(&merged)
            .build_raw(8, true)
            .unwrap()
            .map(|b| b.unwrap().into_records().iter().map(|r| String::from_utf8(r.to_vec()).unwrap()).collect())
            .collect();
        for (k, step) in one.iter().enumerate().take(steps - cut) {
            let mut want = full[0][cut + k].clone();
            want.extend(full[1][cut + k].clone());
            prop_assert_eq!(step, &want, "step {}", cut + k);
        }
    }
}

#[test]
fn equal_batches_count_from_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let counts = [10, 33, 4];
    let files = dataset(dir.path(), &counts, Compression::None);
    // 47 records on 3 hosts: 16, 16, 15 a host and epoch; 2 epochs.
    for (how, want) in [(EqualBatches::Drop, 6u64), (EqualBatches::Pad, 7)] {
        for h in 0..3 {
            let p = pipeline(&files, None)
                .shard(h, 3)
                .repeat(Some(2))
                .equal_batches(how);
            let batches = p.build_raw(5, how == EqualBatches::Drop).unwrap().count() as u64;
            assert_eq!(batches, want, "{how:?} host {h}");
        }
    }
}

#[test]
fn global_shuffle_with_a_file_order_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), &[5, 5], Compression::None);
    for p in [
        pipeline(&files, None).interleave(2, 1),
        pipeline(&files, None).shuffle_files(),
    ] {
        let err = p.build_raw(2, false).err().unwrap();
        assert!(
            err.to_string()
                .contains("global_shuffle reads the records in a permutation"),
            "{err}"
        );
    }
}

#[test]
fn a_stale_index_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), &[5, 5], Compression::None);
    let idx = infeed::index::build(&files[0], &Default::default()).unwrap();
    infeed::index::save(
        &idx,
        &infeed::index::index_url(&files[0], None),
        &Default::default(),
    )
    .unwrap();
    // The shard grows after it was indexed.
    dataset(dir.path(), &[6, 5], Compression::None);
    let err = pipeline(&files, None).build_raw(2, false).err().unwrap();
    assert!(err.to_string().contains("stale index of"), "{err}");
    assert!(err.to_string().contains(".index"), "{err}");
}

/// The records of plain local shards are left to the workers (the global
/// shuffle's thread hands on stand-ins of their lengths), those of GZIP
/// shards read by its thread; a step before the workers that needs the
/// bytes (a filter) has its thread read them all. Either way the same
/// records in the same batches, in record and block mode, on 2 workers.
#[test]
fn the_workers_read_what_its_reader_would_and_the_same_batches_come() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    let gzip = dir.path().join("gzip");
    std::fs::create_dir(&plain).unwrap();
    std::fs::create_dir(&gzip).unwrap();
    let mut files = dataset(&plain, &[40, 0, 77], Compression::None);
    files.extend(dataset(&gzip, &[13, 21], Compression::Gzip));
    for blocks in [None, Some(300)] {
        let batches = |p: Pipeline| -> Vec<Vec<String>> {
            p.threads(2)
                .repeat(Some(2))
                .build_raw(9, false)
                .unwrap()
                .map(|b| {
                    let b = b.unwrap();
                    b.records()
                        .map(|r| String::from_utf8(r.to_vec()).unwrap())
                        .collect()
                })
                .collect()
        };
        let by_workers = batches(pipeline(&files, blocks));
        let by_its_reader = batches(pipeline(&files, blocks).filter(|_: &[u8]| true));
        assert_eq!(by_workers.concat().len(), 2 * 151, "{blocks:?}");
        assert_eq!(by_workers, by_its_reader, "{blocks:?}");
    }
}

/// A record corrupted after its shard was indexed is found by the worker
/// that reads it: a typed error naming the shard, the record's offset and
/// its number in the shard; the batches before it are delivered.
#[test]
fn a_record_corrupted_since_it_was_indexed_is_named_by_the_worker_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), &[1000], Compression::None);
    let shard = &files[0];
    // Long enough that the byte changed lies outside the first and last
    // 4 KiB, which the index's identity hashes.
    let indexes = dir.path().join("indexes").display().to_string();
    std::fs::create_dir(&indexes).unwrap();
    save_index(shard, &indexes);
    // Record 550's payload "f0-r550", changed in place, the file's time
    // kept: the index still matches the file.
    let offset: u64 = (0..550).map(|i| format!("f0-r{i}").len() as u64 + 16).sum();
    corrupt_keeping_time(shard, offset + 12);
    let mut batches = pipeline(&files, None)
        .index_dir(&indexes)
        .build_raw(10, false)
        .unwrap();
    let mut delivered = 0;
    let err = loop {
        match batches.next_batch() {
            Ok(Some(b)) => delivered += b.len(),
            Ok(None) => panic!("the run ended without an error"),
            Err(e) => break e,
        }
    };
    let PipelineError::Record(e) = err else {
        panic!("{err:?}");
    };
    assert_eq!((e.path.as_str(), e.offset), (shard.as_str(), offset));
    assert_eq!(e.index, Some(550));
    assert!(
        matches!(e.kind, infeed::record::ErrorKind::DataCrc { .. }),
        "{e}"
    );
    assert!(delivered < 1000);
}

/// Under `on_corrupt(Skip)` the indexes frame the good records only; each
/// region they leave out (a bad payload, a bad length, a cut tail) is
/// skipped and counted once an epoch, as a shard reader counts it, on
/// any host count; the workers read the rest, with the batches its reader
/// gives.
#[test]
fn skipped_regions_are_counted_once_an_epoch_as_a_shard_reader_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let files = dataset(dir.path(), &[400, 770, 130], Compression::None);
    let at = record_offset;
    // Record 30's payload in shard 0, record 50's length in shard 1, and
    // shard 2's last record cut short.
    corrupt_keeping_time(&files[0], at(0, 30) + 14);
    corrupt_keeping_time(&files[1], at(1, 50) + 1);
    let cut = std::fs::OpenOptions::new()
        .write(true)
        .open(&files[2])
        .unwrap();
    cut.set_len(at(2, 130) - 5).unwrap();
    let skipping = |p: Pipeline| {
        p.read_options(ReadOptions::default().on_corrupt(CorruptPolicy::Skip))
            .repeat(Some(2))
    };
    let drained = |p: Pipeline| {
        let (batches, stats) = drain(p, 7);
        let skipped = (stats.read.skipped_records, stats.read.skipped_bytes);
        (batches, skipped, stats.records)
    };
    let in_order = Pipeline::from_files(files.clone()).unwrap().threads(1);
    let (read, expected, _) = drained(skipping(in_order));
    assert_eq!(read.concat().len(), 2 * (400 + 770 + 130 - 3));
    assert_eq!(expected.0, 2 * 3);
    let (by_workers, skipped, account) = drained(skipping(pipeline(&files, None)));
    assert_eq!(skipped, expected);
    assert_eq!(account.left_out.corrupt, 2 * 3);
    assert!(account.balanced());
    let mut sorted = by_workers.concat();
    sorted.sort();
    let mut expected_records = read.concat();
    expected_records.sort();
    assert_eq!(sorted, expected_records);
    let by_its_reader = drained(skipping(pipeline(&files, None).filter(|_: &[u8]| true)));
    assert_eq!((&by_its_reader.0, by_its_reader.1), (&by_workers, skipped));
    // Two hosts: each region counted by one of them.
    let hosts: Vec<_> = (0..2)
        .map(|h| drained(skipping(pipeline(&files, None).shard(h, 2))).1)
        .collect();
    assert_eq!((hosts[0].0 + hosts[1].0, hosts[0].1 + hosts[1].1), expected);
}
