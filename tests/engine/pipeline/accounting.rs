//! The record account (`PipelineStats::records`): each cause of leaving a
//! record out counted exactly where it happens, and every run read to its
//! end balanced (read = delivered + left out), on one host, on several
//! (their reads add up to the input), and after a restore.

use infeed::batch::{Batch, PackStrategy};
use infeed::pipeline::{Batches, EqualBatches, LeftOut, OnExhausted, Pipeline, RecordAccount};
use infeed::record::{CorruptPolicy, ReadOptions};

use super::grouping::{self, lm_record};
use super::testdata;
use crate::support::tfrecord::write_file;

/// Runs `batches` to the end: the batches' real rows and the account.
fn drain<T: Send + 'static>(
    mut batches: Batches<T>,
    real_rows: impl Fn(&T) -> usize,
) -> (usize, RecordAccount) {
    let mut rows = 0;
    while let Some(b) = batches.next_batch().unwrap() {
        rows += real_rows(&b);
    }
    let account = batches.stats().records;
    assert!(account.balanced(), "{account:?}");
    (rows, account)
}

fn real(b: &Batch) -> usize {
    b.real_rows
}

/// `n` lm records of lengths 1..=20 in one file (record `i` has `i % 20 + 1`
/// values, so lengths are known).
fn lm_file(dir: &std::path::Path, n: usize) -> Vec<String> {
    let records = (0..n).map(|i| lm_record(i as i64, i % 20 + 1));
    vec![write_file(
        &dir.join("lm.tfrecord"),
        records,
        infeed::record::Compression::None,
    )]
}

fn account(read: u64, delivered: u64, left_out: LeftOut) -> RecordAccount {
    RecordAccount {
        read,
        delivered,
        left_out,
    }
}

#[test]
fn a_plain_run_delivers_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let files = lm_file(dir.path(), 50);
    let p = Pipeline::from_files(files)
        .unwrap()
        .shuffle(8)
        .repeat(Some(3))
        .parse(grouping::spec())
        .fixed_length(20)
        .batch(7, false);
    let (rows, acc) = drain(p.build().unwrap(), real);
    assert_eq!(rows, 150);
    assert_eq!(acc, account(150, 150, LeftOut::default()));
}

#[test]
fn skip_and_take_count_what_they_drop_each_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let files = lm_file(dir.path(), 20);
    let p = Pipeline::from_files(files)
        .unwrap()
        .skip(3)
        .take(5)
        .repeat(Some(2))
        .parse(grouping::spec())
        .fixed_length(20)
        .batch(4, false);
    let (rows, acc) = drain(p.build().unwrap(), real);
    assert_eq!(rows, 10);
    // Each epoch: 3 skipped, 5 taken, and the 6th read ends it.
    let left_out = LeftOut {
        sliced: 2 * 4,
        ..LeftOut::default()
    };
    assert_eq!(acc, account(18, 10, left_out));
}

#[test]
fn a_record_filter_and_filter_rows_count_what_they_drop() {
    let dir = tempfile::tempdir().unwrap();
    let files = lm_file(dir.path(), 40);
    // Serialized records of an odd length out, then rows of fewer than 10
    // values.
    let kept_by_filter: Vec<usize> = (0..40)
        .filter(|&i| lm_record(i as i64, i % 20 + 1).len().is_multiple_of(2))
        .collect();
    let kept = kept_by_filter.iter().filter(|&&i| i % 20 + 1 >= 10).count();
    let p = Pipeline::from_files(files)
        .unwrap()
        .filter(|b| b.len().is_multiple_of(2))
        .parse(grouping::spec())
        .filter_rows(|b, row| match b.get("ids") {
            Some(infeed::example::Column::Ragged { row_splits, .. }) => {
                row_splits[row + 1] - row_splits[row] >= 10
            }
            _ => true,
        })
        .fixed_length(20)
        .batch(4, false);
    let (rows, acc) = drain(p.build().unwrap(), real);
    assert_eq!(rows, kept);
    let left_out = LeftOut {
        filtered: 40 - kept as u64,
        ..LeftOut::default()
    };
    assert_eq!(acc, account(40, kept as u64, left_out));
}

#[test]
fn drop_remainder_and_skip_steps_count_their_records() {
    let dir = tempfile::tempdir().unwrap();
    let files = lm_file(dir.path(), 30);
    let p = Pipeline::from_files(files)
        .unwrap()
        .skip_steps(&[(2, 4)])
        .parse(grouping::spec())
        .fixed_length(20)
        .batch(4, true);
    let (rows, acc) = drain(p.build().unwrap(), real);
    // 7 batches of 4 and 2 records over; steps 2 and 3 left out.
    assert_eq!(rows, 5 * 4);
    let left_out = LeftOut {
        dropped: 2,
        skipped_steps: 8,
        ..LeftOut::default()
    };
    assert_eq!(acc, account(30, 20, left_out));
}

#[test]
fn corrupt_records_skipped_are_read_and_left_out() {
    let p = Pipeline::from_files(vec![testdata("corrupt.tfrecord")])
        .unwrap()
        .read_options(ReadOptions::default().on_corrupt(CorruptPolicy::Skip))
        .repeat(Some(2));
    let (rows, acc) = drain(p.build_raw(2, false).unwrap(), |b| b.len());
    // Record 2 of 5 fails its CRC, each epoch.
    assert_eq!(rows, 8);
    let left_out = LeftOut {
        corrupt: 2,
        ..LeftOut::default()
    };
    assert_eq!(acc, account(10, 8, left_out));
}

#[test]
fn packing_counts_a_cut_record_once_and_empty_records_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    // Lengths 0..=15 twice: two empty records; rows of 16, so records cut
    // over rows and batches under concat-split.
    let records = (0..32).map(|i| lm_record(i as i64, i % 16));
    let files = vec![write_file(
        &dir.path().join("p.tfrecord"),
        records,
        infeed::record::Compression::None,
    )];
    for strategy in [PackStrategy::FirstFit, PackStrategy::ConcatSplit] {
        let p = Pipeline::from_files(files.clone())
            .unwrap()
            .parse(grouping::spec())
            .pack(16)
            .pack_strategy(strategy)
            .batch(3, false);
        let mut batches = p.build().unwrap();
        let mut values = 0;
        while let Some(b) = batches.next_batch().unwrap() {
            values += grouping::rows(&b, "ids_mask")
                .iter()
                .flatten()
                .filter(|&&m| m == 1)
                .count();
        }
        // Every value of every record, each record counted once however
        // it was cut.
        assert_eq!(values, 2 * (0..16).sum::<usize>(), "{strategy:?}");
        let acc = batches.stats().records;
        assert!(acc.balanced(), "{strategy:?}: {acc:?}");
        let left_out = LeftOut {
            empty: 2,
            ..LeftOut::default()
        };
        assert_eq!(acc, account(32, 30, left_out), "{strategy:?}");
    }
}

#[test]
fn a_mixture_that_stops_counts_what_its_sources_held() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let lens = |files: usize, n: usize| vec![vec![5; n]; files];
    let a = grouping::write_lm_files(&a, &lens(1, 20));
    let b = grouping::write_lm_files(&b, &lens(1, 200));
    let src = |files: &[String], seed| {
        Pipeline::from_files(files.to_vec())
            .unwrap()
            .seed(seed)
            .shuffle(16)
            .repeat(Some(1))
    };
    let p = Pipeline::mix([("a", src(&a, 1)), ("b", src(&b, 2))], &[1.0, 1.0])
        .unwrap()
        .seed(3)
        .on_exhausted(OnExhausted::Stop)
        .parse(grouping::spec())
        .fixed_length(8)
        .batch(4, false);
    let (rows, acc) = drain(p.build().unwrap(), real);
    assert_eq!(acc.delivered, rows as u64);
    // The large source's buffer was full when the small one ran out.
    assert!(acc.left_out.mixture_end >= 16, "{acc:?}");
    assert_eq!(
        acc.left_out,
        LeftOut {
            mixture_end: acc.left_out.mixture_end,
            ..LeftOut::default()
        }
    );
}

/// Hosts' reads add up to the input, each host balanced; under `Drop` a
/// host's `dropped` is what it held at the count.
#[test]
fn the_hosts_reads_add_up_to_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<Vec<usize>> = (0..5)
        .map(|f| vec![(f * 7) % 40 + 1; 30 + 11 * f])
        .collect();
    let files = grouping::write_lm_files(dir.path(), &lens);
    let total: usize = lens.iter().map(Vec::len).sum();
    for hosts in [1, 2, 3, 7] {
        for how in [EqualBatches::Pad, EqualBatches::Drop] {
            let mut sum = RecordAccount::default();
            for i in 0..hosts {
                let p = Pipeline::from_files(files.clone())
                    .unwrap()
                    .equal_batches(how)
                    .shard(i, hosts)
                    .seed(5)
                    .shuffle(8)
                    .repeat(Some(2))
                    .parse(grouping::spec())
                    .pad_to_multiple_of(16)
                    .max_length(48)
                    .batch(4, false);
                let (rows, acc) = drain(p.build().unwrap(), real);
                assert_eq!(acc.delivered, rows as u64, "{how:?}, host {i} of {hosts}");
                sum.read += acc.read;
                sum.delivered += acc.delivered;
                sum.left_out.dropped += acc.left_out.dropped;
            }
            match how {
                EqualBatches::Pad => {
                    assert_eq!(sum.read, 2 * total as u64, "{hosts} hosts");
                    assert_eq!(sum.delivered, 2 * total as u64, "{hosts} hosts");
                }
                EqualBatches::Drop => {
                    // A host stops reading at its count: what it read and
                    // did not deliver, it dropped.
                    assert!(sum.read <= 2 * total as u64);
                    assert_eq!(sum.read, sum.delivered + sum.left_out.dropped);
                }
            }
        }
    }
}

#[test]
fn a_restored_run_counts_the_records_its_state_holds() {
    let dir = tempfile::tempdir().unwrap();
    let files = lm_file(dir.path(), 60);
    let p = Pipeline::from_files(files)
        .unwrap()
        .shard(1, 2)
        .shuffle(10)
        .parse(grouping::spec())
        .pad_to_multiple_of(8)
        .max_length(24)
        .batch(3, false);
    let mut first = p.build().unwrap();
    for _ in 0..4 {
        first.next_batch().unwrap().unwrap();
    }
    let state = first.state();
    drop(first);
    let (rows, acc) = drain(p.resume_from(&state).build().unwrap(), real);
    // The rest of host 1's 30 records: those delivered after the state,
    // counted as read whether read again from its buffers or anew.
    assert_eq!(rows, 30 - 12);
    assert_eq!(acc, account(18, 18, LeftOut::default()));
}
