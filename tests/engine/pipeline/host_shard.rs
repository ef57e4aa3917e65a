//! Host sharding that cannot overlap: hosts seeded differently (the common
//! `seed(host_index)`) with file and record shuffles still read disjoint
//! parts whose union is every record exactly once per epoch, by file (at
//! least as many files as hosts) and by record (fewer).
//!
//! The property runs 256 cases, or `INFEED_PROPTEST_CASES` (see
//! `restore_props`).

use infeed::pipeline::Pipeline;
use proptest::prelude::*;

use infeed::record::Compression;

use super::restore_props::all_records;
use crate::support::tfrecord::write_files;

/// Every record host `index` of `hosts` emits over `repeat(Some(2))`.
fn host_records(
    files: &[String],
    index: u64,
    hosts: u64,
    seed: u64,
    (cycle, block, buffer): (usize, usize, usize),
    repeat_first: bool,
) -> Vec<String> {
    let p = Pipeline::from_files(files.to_vec())
        .unwrap()
        .shard(index, hosts)
        .seed(seed)
        .shuffle_files()
        .interleave(cycle, block)
        .threads(1);
    let p = if repeat_first {
        p.repeat(Some(2)).shuffle(buffer)
    } else {
        p.shuffle(buffer).repeat(Some(2))
    };
    p.build_raw(3, false)
        .unwrap()
        .flat_map(|b| b.unwrap().into_records())
        .map(|r| String::from_utf8(r.to_vec()).unwrap())
        .collect()
}

/// Checks that the hosts' outputs cover `counts`' records exactly once per
/// epoch: with the shuffle before `repeat`, each host's first half is its
/// first epoch; with `repeat` first (epochs mix), every record twice.
fn assert_disjoint_cover(
    outputs: &[Vec<String>],
    counts: &[usize],
    repeat_first: bool,
) -> Result<(), TestCaseError> {
    let all = all_records(counts);
    if repeat_first {
        let mut union: Vec<String> = outputs.iter().flatten().cloned().collect();
        union.sort();
        let twice: Vec<String> = all.iter().flat_map(|r| [r.clone(), r.clone()]).collect();
        prop_assert_eq!(union, twice);
    } else {
        for epoch in 0..2 {
            let mut union = Vec::new();
            for out in outputs {
                prop_assert_eq!(out.len() % 2, 0);
                let half = out.len() / 2;
                union.extend_from_slice(&out[epoch * half..(epoch + 1) * half]);
            }
            union.sort();
            prop_assert_eq!(&union, &all, "epoch {}", epoch);
        }
    }
    Ok(())
}

/// The case users write: each host seeded by its index.
#[test]
fn hosts_seeded_by_their_index_read_disjoint_parts_every_epoch() {
    let dir = tempfile::tempdir().unwrap();
    // By record (2 files, 3 hosts) and by file (5 files, 2 hosts).
    for (counts, hosts) in [(vec![13, 8], 3u64), (vec![5, 6, 7, 8, 9], 2)] {
        let sub = dir.path().join(format!("{hosts}"));
        std::fs::create_dir(&sub).unwrap();
        let files = write_files(&sub, &counts, Compression::None);
        for repeat_first in [false, true] {
            let outputs: Vec<_> = (0..hosts)
                .map(|h| host_records(&files, h, hosts, h, (2, 1, 6), repeat_first))
                .collect();
            assert_disjoint_cover(&outputs, &counts, repeat_first).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(super::restore_props::config())]

    /// Any per-host seeds, file counts (fewer or more than hosts),
    /// interleave and shuffle buffer: the hosts' parts are disjoint and
    /// cover every record once per epoch.
    #[test]
    fn hosts_with_any_seeds_cover_every_record_once_per_epoch(
        hosts in 2u64..5,
        counts in prop::collection::vec(1usize..12, 1..7),
        seeds in prop::collection::vec(any::<u64>(), 4),
        cycle in 1usize..3,
        block in 1usize..3,
        buffer in 0usize..8,
        repeat_first in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &counts, Compression::None);
        let outputs: Vec<_> = (0..hosts)
            .map(|h| host_records(&files, h, hosts, seeds[h as usize], (cycle, block, buffer), repeat_first))
            .collect();
        assert_disjoint_cover(&outputs, &counts, repeat_first)?;
    }
}

/// Records in file order: each file holds one record, so the output is the
/// file order of each of 3 epochs.
fn file_orders(files: &[String], host: Option<(u64, u64)>, seed: u64) -> Vec<String> {
    let mut p = Pipeline::from_files(files.to_vec())
        .unwrap()
        .seed(seed)
        .shuffle_files()
        .repeat(Some(3));
    if let Some((index, count)) = host {
        p = p.shard(index, count);
    }
    p.build_raw(4, false)
        .unwrap()
        .flat_map(|b| b.unwrap().into_records())
        .map(|r| String::from_utf8(r[..2].to_vec()).unwrap())
        .collect()
}

/// A single host, and hosts sharded by file, order files by their own
/// seed, as before (a run's output for a seed must not change); hosts
/// sharded by record order them alike, whatever their seeds.
#[test]
fn only_record_sharding_takes_the_file_order_from_the_shared_seed() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[1; 6], Compression::None);
    let single: Vec<Vec<String>> = (0..4).map(|s| file_orders(&files, None, s)).collect();
    assert_eq!(
        single[2].join(" "),
        "f5 f3 f2 f0 f1 f4 f2 f4 f1 f3 f5 f0 f2 f1 f3 f0 f4 f5"
    );
    assert!(single.iter().skip(1).any(|o| o != &single[0]));
    let by_file: Vec<Vec<String>> = (0..4)
        .map(|s| file_orders(&files[..4], Some((0, 2)), s))
        .collect();
    assert_eq!(by_file[2].join(" "), "f0 f2 f2 f0 f0 f2");
    assert!(by_file.iter().skip(1).any(|o| o != &by_file[0]));
    // By record (6 files, 8 hosts): host 0 keeps ordinal 0 of each epoch,
    // the first file of the shared order (that of seed 0).
    let by_record: Vec<Vec<String>> = (0..4)
        .map(|s| file_orders(&files, Some((0, 8)), s))
        .collect();
    assert!(
        by_record.iter().all(|o| o == &by_record[0]),
        "{by_record:?}"
    );
    assert_eq!(by_record[0].join(" "), "f2 f1 f4");
    assert_eq!(
        by_record[0],
        [single[0][0].as_str(), &single[0][6], &single[0][12]]
    );
}
