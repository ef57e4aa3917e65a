//! Several hosts, simulated in one process (each pipeline `.shard(i, n)`):
//! every host's batch at step t has the same shapes, for
//! `pad_to_multiple_of` and for `bucket_by_length`, whatever each host's own
//! seed; the hosts together deliver every record exactly once; equal batch
//! counts hold; a host's state resumes exactly.

use std::collections::BTreeMap;
use std::path::Path;

use infeed::batch::{Batch, BatchShape, PackStrategy};
use infeed::pipeline::{EqualBatches, ParsedPipeline, Pipeline};
use proptest::prelude::*;

use super::grouping::{self, id_of, real_rows, values};
use crate::support::tfrecord::{offsets, write_file};

/// Lengths in 1..=96 (the bound) from a fixed generator: `files` files of `per_file`.
fn lengths(files: usize, per_file: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..files)
        .map(|_| {
            (0..per_file)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 96) as usize + 1
                })
                .collect()
        })
        .collect()
}

/// Host `index` of `hosts`: its own seed, the lm chain padded to a multiple
/// of 16 up to 96, batches of 4.
fn padded(files: &[String], index: u64, hosts: u64, epochs: Option<u64>) -> ParsedPipeline {
    padded_equal(files, index, hosts, epochs, None)
}

fn padded_equal(
    files: &[String],
    index: u64,
    hosts: u64,
    epochs: Option<u64>,
    equal: Option<EqualBatches>,
) -> ParsedPipeline {
    let mut p = Pipeline::from_files(files.to_vec()).unwrap();
    // Each host its own seed, but one for all with equal batch counts: those
    // of scheduled buckets come from running every host's grouping.
    let mut seed = 100 + index;
    if let Some(how) = equal {
        p = p.equal_batches(how);
        seed = 7;
    }
    p.shard(index, hosts)
        .seed(seed)
        .shuffle_files()
        .interleave(2, 1)
        .shuffle(16)
        .repeat(epochs)
        .parse(grouping::spec())
        .pad_to_multiple_of(16)
        .max_length(96)
        .batch(4, true)
}

fn run(p: &ParsedPipeline, limit: usize) -> Vec<Batch> {
    p.build().unwrap().take(limit).map(Result::unwrap).collect()
}

fn shapes(batches: &[Batch]) -> Vec<BatchShape> {
    batches.iter().map(Batch::shape).collect()
}

/// Record ids of the real rows, with how often each came.
fn ids(batches: &[Batch]) -> BTreeMap<i64, usize> {
    let mut seen = BTreeMap::new();
    for b in batches {
        for row in real_rows(b) {
            *seen.entry(id_of(row[0])).or_default() += 1;
        }
    }
    seen
}

/// Every id the files hold (with `write_files`' numbering), once each.
fn all_ids(lens: &[Vec<usize>]) -> BTreeMap<i64, usize> {
    lens.iter()
        .enumerate()
        .flat_map(|(f, l)| (0..l.len()).map(move |i| ((f * 100 + i) as i64, 1)))
        .collect()
}

#[test]
fn hosts_with_their_own_seeds_agree_on_every_steps_shapes_repeating_forever() {
    let dir = tempfile::tempdir().unwrap();
    let lens = lengths(6, 60, 1);
    let files = grouping::write_lm_files(dir.path(), &lens);
    for hosts in [2, 3, 4] {
        let runs: Vec<Vec<Batch>> = (0..hosts)
            .map(|i| run(&padded(&files, i, hosts, None), 150))
            .collect();
        let first = shapes(&runs[0]);
        assert_eq!(first.len(), 150);
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(shapes(r), first, "host {i} of {hosts}");
            // Full batches of real records, never cut: each row's values
            // fit its batch's length.
            for b in r {
                assert_eq!(b.real_rows, 4);
                let width = b["ids"].shape()[1];
                for row in real_rows(b) {
                    assert!(row.len() <= width);
                }
            }
        }
        // More than one shape: the schedule moves through the buckets.
        let mut distinct = first.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() > 3, "{} shapes", distinct.len());
        let allowed = padded(&files, 0, hosts, None).shapes().unwrap();
        assert!(distinct.iter().all(|s| allowed.contains(s)));
    }
}

#[test]
fn one_epoch_on_several_hosts_gives_every_record_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let lens = lengths(6, 50, 2);
    let files = grouping::write_lm_files(dir.path(), &lens);
    for hosts in [2, 3] {
        let mut seen = BTreeMap::new();
        for i in 0..hosts {
            let p = padded(&files, i, hosts, Some(1)).drop_remainder(false);
            for (id, n) in ids(&run(&p, usize::MAX)) {
                *seen.entry(id).or_insert(0) += n;
            }
        }
        assert_eq!(seen, all_ids(&lens), "{hosts} hosts");
    }
}

#[test]
fn equal_batches_give_every_host_the_same_count_and_shapes() {
    let dir = tempfile::tempdir().unwrap();
    // Uneven hosts: 5 files over 2 hosts (3 and 2 files).
    let lens = lengths(5, 90, 3);
    let files = grouping::write_lm_files(dir.path(), &lens);
    for how in [EqualBatches::Drop, EqualBatches::Pad] {
        let runs: Vec<Vec<Batch>> = (0..2)
            .map(|i| {
                let p = padded_equal(&files, i, 2, Some(2), Some(how)).drop_remainder(false);
                run(&p, usize::MAX)
            })
            .collect();
        assert_eq!(runs[0].len(), runs[1].len(), "{how:?}");
        assert_eq!(shapes(&runs[0]), shapes(&runs[1]), "{how:?}");
        let per_host = [3 * 90 * 2, 2 * 90 * 2];
        let expected = match how {
            EqualBatches::Drop => per_host[1] / 4,
            EqualBatches::Pad => per_host[0] / 4,
        };
        assert_eq!(runs[0].len(), expected, "{how:?}");
        if how == EqualBatches::Pad {
            // Nothing lost: two epochs of every record.
            let mut seen = ids(&runs[0]);
            for (id, n) in ids(&runs[1]) {
                *seen.entry(id).or_insert(0) += n;
            }
            let twice: BTreeMap<i64, usize> =
                all_ids(&lens).into_keys().map(|id| (id, 2)).collect();
            assert_eq!(seen, twice);
        }
    }
}

/// Keeps rows whose `ids` hold more than 20 values.
fn longer_than_20(b: &infeed::example::ParsedBatch, row: usize) -> bool {
    match b.get("ids") {
        Some(infeed::example::Column::Ragged { row_splits, .. }) => {
            row_splits[row + 1] - row_splits[row] > 20
        }
        _ => true,
    }
}

/// The groupings whose batch counts the records' counts do not give: buckets
/// with batch sizes of their own, packing, `filter_rows` and a record
/// filter, each on `hosts` hosts of a finite run, every host seeded alike
/// (each counts every host's batches by running its grouping).
fn uncounted(
    files: &[String],
    grouping: &str,
    i: u64,
    hosts: u64,
    how: Option<EqualBatches>,
) -> ParsedPipeline {
    let mut p = Pipeline::from_files(files.to_vec()).unwrap();
    if let Some(how) = how {
        p = p.equal_batches(how);
    }
    p = p
        .shard(i, hosts)
        .seed(7)
        .shuffle_files()
        .interleave(2, 1)
        .shuffle(8)
        .repeat(Some(2));
    if grouping == "record filter" {
        p = p.filter(|bytes| bytes.len() % 2 == 0);
    }
    let parsed = p.parse(grouping::spec());
    match grouping {
        "buckets" => parsed
            .bucket_by_length("ids", &[32, 64], &[8, 4, 2])
            .max_length(128)
            .drop_remainder(false),
        "pack" => parsed.pack(96).batch(3, false),
        "concat-split pack" => parsed
            .pack(96)
            .pack_strategy(PackStrategy::ConcatSplit)
            .batch(3, false),
        "filter_rows" => parsed
            .filter_rows(longer_than_20)
            .fixed_length(96)
            .batch(4, false),
        "filtered buckets" => parsed
            .filter_rows(longer_than_20)
            .pad_to_multiple_of(16)
            .max_length(96)
            .batch(4, false),
        _ => parsed.fixed_length(96).batch(4, false),
    }
}

#[test]
fn equal_batches_hold_for_every_grouping() {
    let dir = tempfile::tempdir().unwrap();
    // Uneven hosts: 5 files over 2 or 3 hosts.
    let lens = lengths(5, 70, 6);
    let files = grouping::write_lm_files(dir.path(), &lens);
    for grouping in [
        "buckets",
        "pack",
        "concat-split pack",
        "filter_rows",
        "record filter",
        "filtered buckets",
    ] {
        for hosts in [2, 3] {
            // Without equal_batches: what each host has.
            let own: Vec<Vec<Batch>> = (0..hosts)
                .map(|i| run(&uncounted(&files, grouping, i, hosts, None), usize::MAX))
                .collect();
            let mut all = BTreeMap::new();
            for r in &own {
                for (v, n) in values(r) {
                    *all.entry(v).or_insert(0) += n;
                }
            }
            let own_counts: Vec<usize> = own.iter().map(Vec::len).collect();
            assert!(
                own_counts.iter().any(|&n| n != own_counts[0]),
                "{grouping}: {own_counts:?}"
            );
            for how in [EqualBatches::Drop, EqualBatches::Pad] {
                let runs: Vec<Vec<Batch>> = (0..hosts)
                    .map(|i| {
                        run(
                            &uncounted(&files, grouping, i, hosts, Some(how)),
                            usize::MAX,
                        )
                    })
                    .collect();
                let n = runs[0].len();
                let at = format!("{grouping}, {how:?}, {hosts} hosts");
                for (i, r) in runs.iter().enumerate() {
                    assert_eq!(r.len(), n, "{at}: host {i}");
                    assert_eq!(shapes(r), shapes(&runs[0]), "{at}: host {i}");
                }
                if !grouping.contains("buckets") {
                    // The batches follow the records alone: each host's
                    // count is its own run's, stopped or padded. (Scheduled
                    // buckets with a batch count follow the schedule to the
                    // end, so their counts differ from a run without one.)
                    let expected = match how {
                        EqualBatches::Drop => own_counts.iter().min(),
                        EqualBatches::Pad => own_counts.iter().max(),
                    };
                    assert_eq!(Some(&n), expected, "{at}");
                }
                if how == EqualBatches::Pad {
                    // Nothing lost: every kept value, as often as without.
                    let mut seen = BTreeMap::new();
                    for r in &runs {
                        for (v, c) in values(r) {
                            *seen.entry(v).or_insert(0) += c;
                        }
                    }
                    assert!(seen == all, "{at}: values lost or repeated");
                }
            }
        }
    }
}

#[test]
fn equal_batch_runs_of_every_grouping_restore_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let lens = lengths(5, 70, 6);
    let files = grouping::write_lm_files(dir.path(), &lens);
    for grouping in [
        "buckets",
        "pack",
        "concat-split pack",
        "filter_rows",
        "record filter",
        "filtered buckets",
    ] {
        let p = uncounted(&files, grouping, 1, 2, Some(EqualBatches::Pad));
        let whole = run(&p, usize::MAX);
        for k in [1, whole.len() / 2, whole.len() - 1] {
            let mut batches = p.build().unwrap();
            for _ in 0..k {
                batches.next_batch().unwrap().unwrap();
            }
            let state = batches.state();
            drop(batches);
            let rest = run(&p.clone().resume_from(&state), usize::MAX);
            assert_eq!(rest.len(), whole.len() - k, "{grouping} at {k}");
            for (a, b) in rest.iter().zip(&whole[k..]) {
                assert_eq!(a.digest(), b.digest(), "{grouping} at {k}");
            }
        }
    }
}

#[test]
fn buckets_agree_on_every_host() {
    let dir = tempfile::tempdir().unwrap();
    let lens = lengths(4, 80, 4);
    let files = grouping::write_lm_files(dir.path(), &lens);
    let bucketed = |i: u64| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .shard(i, 2)
            .seed(i)
            .shuffle(8)
            .repeat(None)
            .parse(grouping::spec())
            .bucket_by_length("ids", &[32, 64], &[8, 4, 2])
            .max_length(128)
    };
    let a = run(&bucketed(0), 100);
    let b = run(&bucketed(1), 100);
    assert_eq!(shapes(&a), shapes(&b));
    let rows: Vec<usize> = a.iter().map(|b| b["ids"].shape()[0]).collect();
    assert!(rows.contains(&8) && rows.contains(&2), "{rows:?}");
}

#[test]
fn one_host_groups_as_it_always_did() {
    // A single host pads each batch to its own longest record: no schedule.
    let dir = tempfile::tempdir().unwrap();
    let lens = lengths(2, 40, 5);
    let files = grouping::write_lm_files(dir.path(), &lens);
    let p = padded(&files, 0, 1, Some(1));
    for b in run(&p, usize::MAX) {
        let longest = real_rows(&b).iter().map(Vec::len).max().unwrap();
        assert_eq!(b["ids"].shape()[1], longest.div_ceil(16) * 16);
    }
}

proptest! {
    #![proptest_config(super::restore_props::config())]

    /// A host's state, taken at any batch, resumes with exactly the rest of
    /// its uninterrupted run (the records waiting in the scheduled buckets
    /// are read again and the same batches cut).
    #[test]
    fn a_hosts_state_resumes_exactly(
        seed in any::<u64>(),
        hosts in 2u64..4,
        index in 0u64..4,
        epochs in 1u64..3,
        equal in prop::option::of(prop::sample::select(vec![EqualBatches::Drop, EqualBatches::Pad])),
        mapped in any::<bool>(),
        cut in 0usize..60,
    ) {
        let index = index % hosts;
        let dir = tempfile::tempdir().unwrap();
        let lens = lengths(4, 30, seed);
        let files = grouping::write_lm_files(dir.path(), &lens);
        let mut p = padded_equal(&files, index, hosts, Some(epochs), equal);
        if mapped {
            // A parsed map before the grouping: lengths come from the
            // prefilter threads, and a restore measures its waiting records so.
            p = p.map_batch(Ok);
        }
        let full: Vec<u64> = grouping::digests(p.build().unwrap());
        let (first, state) = grouping::digests_then_state(p.build().unwrap(), cut);
        prop_assert_eq!(&first[..], &full[..first.len()]);
        let rest = grouping::digests(p.clone().resume_from(&state).build().unwrap());
        prop_assert_eq!(&rest[..], &full[first.len()..]);
    }
}

/// The lm chain of `padded`, with `map` on the serialized records.
fn padded_mapped(files: &[String], index: u64, hosts: u64, map: bool) -> ParsedPipeline {
    let mut p = Pipeline::from_files(files.to_vec()).unwrap();
    if map {
        p = p.map(|b| b);
    }
    p.shard(index, hosts)
        .seed(100 + index)
        .shuffle_files()
        .interleave(2, 1)
        .shuffle(16)
        .repeat(Some(2))
        .parse(grouping::spec())
        .pad_to_multiple_of(16)
        .max_length(96)
        .batch(4, true)
}

/// The shard readers measure each record as they frame it and the length
/// travels with the record through the interleave and the shuffle buffer;
/// a record map changes the bytes measured, so with one the record thread
/// measures instead. An identity map must then cut the very same batches.
#[test]
fn lengths_measured_by_the_readers_cut_the_batches_the_record_thread_would() {
    let dir = tempfile::tempdir().unwrap();
    let lens = lengths(4, 40, 7);
    let files = grouping::write_lm_files(dir.path(), &lens);
    for hosts in [1, 2] {
        for index in 0..hosts {
            let carried =
                grouping::digests(padded_mapped(&files, index, hosts, false).build().unwrap());
            let measured =
                grouping::digests(padded_mapped(&files, index, hosts, true).build().unwrap());
            assert!(!carried.is_empty());
            assert_eq!(carried, measured, "host {index} of {hosts}");
        }
    }
}

/// A record the shard reader cannot measure is measured again in its turn
/// on the record thread (after the interleave and the shuffle buffer), and
/// the error names its file and offset.
#[test]
fn a_record_that_cannot_be_measured_is_named_in_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let lens = lengths(2, 12, 3);
    let files = grouping::write_lm_files(dir.path(), &lens);
    // Host 0 of 2 reads part-0 (file sharding): rewrite it with record 5
    // holding "ids" as a float list.
    let records: Vec<Vec<u8>> = lens[0]
        .iter()
        .enumerate()
        .map(|(i, &len)| match i {
            5 => grouping::float_ids(),
            _ => grouping::lm_record(i as i64, len),
        })
        .collect();
    let bad_at = offsets(&records)[5];
    write_file(
        Path::new(&files[0]),
        &records,
        infeed::record::Compression::None,
    );
    let mut batches = padded(&files, 0, 2, Some(1)).build().unwrap();
    let error = loop {
        match batches.next_batch() {
            Ok(Some(_)) => continue,
            Err(e) => break e,
            Ok(None) => panic!("the bad record was not reported"),
        }
    };
    match error {
        infeed::pipeline::PipelineError::Parse { path, offset, .. }
        | infeed::pipeline::PipelineError::Length { path, offset, .. } => {
            assert_eq!(path, files[0]);
            assert_eq!(offset, bad_at);
        }
        other => panic!("{other}"),
    }
}
