//! Provenance: every row of a delivered batch names the (file, byte
//! offset) of its records — one per row, the sequences of a packed row —
//! checked against the record ids the rows' values carry, shuffled, on a
//! host of several logical streams, and packed by concat-split.

use std::collections::BTreeMap;

use super::grouping::*;
use infeed::batch::{Batch, PackStrategy, SEGMENT_IDS};
use infeed::pipeline::{ParsedPipeline, Pipeline, RowRecords};

/// Lengths of file `f`'s records.
fn lens() -> Vec<Vec<usize>> {
    (0..4)
        .map(|f| (0..30).map(|i| (f * 5 + i * 7) % 20 + 1).collect())
        .collect()
}

/// Record id → (file, offset), as `write_lm_files` lays them out.
fn places(files: &[String]) -> BTreeMap<i64, (String, u64)> {
    let mut out = BTreeMap::new();
    for (f, lens) in lens().iter().enumerate() {
        let mut offset = 0u64;
        for (i, &len) in lens.iter().enumerate() {
            let id = (f * 100 + i) as i64;
            out.insert(id, (files[f].clone(), offset));
            offset += lm_record(id, len).len() as u64 + 16;
        }
    }
    out
}

/// The records each row's values come from, in order (each once per row).
fn ids_of_rows(batch: &Batch, packed: bool) -> Vec<Vec<i64>> {
    let ids = rows(batch, "ids");
    let marks = if packed {
        rows(batch, SEGMENT_IDS)
    } else {
        rows(batch, "ids_mask")
    };
    ids.iter()
        .zip(&marks)
        .map(|(values, marks)| {
            let mut out: Vec<i64> = Vec::new();
            for (&v, &m) in values.iter().zip(marks) {
                if m != 0 && out.last() != Some(&id_of(v)) {
                    out.push(id_of(v));
                }
            }
            out
        })
        .collect()
}

fn check(p: ParsedPipeline, files: &[String], packed: bool) -> usize {
    let places = places(files);
    let mut rows_seen = 0;
    let mut batches = p.build().unwrap();
    while let Some(batch) = batches.next_batch().unwrap() {
        let positions = batch.positions();
        // The iterator names the last batch's rows alike.
        assert_eq!(batches.positions(), positions);
        assert_eq!(positions.len(), batch.rows());
        for (row, ids) in ids_of_rows(&batch, packed).iter().enumerate() {
            let want: Vec<(&str, u64)> = ids
                .iter()
                .map(|id| (places[id].0.as_str(), places[id].1))
                .collect();
            assert_eq!(positions[row], want, "row {row}");
            rows_seen += usize::from(!ids.is_empty());
        }
    }
    rows_seen
}

#[test]
fn every_row_names_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &lens());
    let base = || {
        Pipeline::from_files(files.clone())
            .unwrap()
            .seed(3)
            .shuffle_files()
            .interleave(2, 1)
            .shuffle(16)
            .repeat(Some(2))
    };
    // Padded rows: one record each; the last batch's padding rows none.
    let rows = check(
        base().parse(spec()).fixed_length(20).batch(7, false),
        &files,
        false,
    );
    assert_eq!(rows, 240);
    // Two of four logical streams on this host, joined row by row.
    let two_streams = Pipeline::from_files(files.clone())
        .unwrap()
        .shard(0, 2)
        .streams(4)
        .seed(3)
        .shuffle(8)
        .parse(spec())
        .fixed_length(20)
        .batch(8, true);
    assert!(check(two_streams, &files, false) > 0);
    // Packed rows: their sequences, a sequence cut over rows in each.
    for strategy in [PackStrategy::FirstFit, PackStrategy::ConcatSplit] {
        let packed = base()
            .parse(spec())
            .pack(16)
            .pack_strategy(strategy)
            .pack_overflow(infeed::batch::Overflow::Split)
            .batch(4, false);
        assert!(check(packed, &files, true) > 0);
    }
}

/// Every host's rows of each step, host 0's first, as `positions` gives
/// them, and the hosts' merged state after `k` steps.
fn global_positions(
    host: impl Fn(u64, u64) -> ParsedPipeline,
    hosts: u64,
    k: usize,
) -> (Vec<Vec<RowRecords>>, Vec<u8>) {
    let mut per_host = Vec::new();
    let mut states = Vec::new();
    for i in 0..hosts {
        let mut batches = host(i, hosts).build().unwrap();
        let mut steps = Vec::new();
        while let Some(b) = batches.next_batch().unwrap() {
            let rows: Vec<RowRecords> = b
                .positions()
                .into_iter()
                .map(|row| row.into_iter().map(|(f, o)| (f.to_owned(), o)).collect())
                .collect();
            steps.push(rows);
            if steps.len() == k {
                states.push(batches.state());
            }
        }
        per_host.push(steps);
    }
    let steps = per_host[0].len();
    let global = (0..steps)
        .map(|t| per_host.iter().flat_map(|h| h[t].clone()).collect())
        .collect();
    let parts: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
    (global, infeed::pipeline::merge_states(&parts).unwrap())
}

/// `records_of` names every host's rows of any step, from one host's
/// pipeline, from the start or from a merged state: the rows `positions`
/// gave on each host at that step.
#[test]
fn records_of_any_step_are_the_rows_every_host_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &lens());
    let padded = |i, n| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .shard(i, n)
            .streams(4)
            .seed(3)
            .shuffle_files()
            .shuffle(16)
            .repeat(Some(2))
            .parse(spec())
            .fixed_length(20)
            .batch(8 / n as usize, false)
    };
    let packed = |i, n| {
        Pipeline::from_files(files.clone())
            .unwrap()
            .shard(i, n)
            .streams(4)
            .seed(3)
            .shuffle(16)
            .parse(spec())
            .pack(16)
            .pack_strategy(PackStrategy::ConcatSplit)
            .batch(8 / n as usize, false)
    };
    for (name, host) in [
        ("padded", &padded as &dyn Fn(u64, u64) -> ParsedPipeline),
        ("packed", &packed),
    ] {
        let (global, state) = global_positions(host, 2, 3);
        let last = global.len() as u64 - 1;
        let asked = [0, 2, 5, last];
        let found = host(1, 2).records_of(&asked).unwrap();
        for step in asked {
            assert_eq!(found[&step], global[step as usize], "{name}: step {step}");
        }
        // From the state after step 2, on one host's pipeline of another
        // host count.
        let found = host(0, 4)
            .resume_from(&state)
            .records_of(&[3, last])
            .unwrap();
        assert_eq!(found[&3], global[3], "{name}: step 3 from the state");
        assert_eq!(found[&last], global[last as usize], "{name}: last step");
        // A step before the state is refused.
        let err = host(0, 1).resume_from(&state).records_of(&[1]).unwrap_err();
        assert!(err.to_string().contains("came before the state"), "{err}");
    }
}

/// A step the run never reaches is named, not answered with empty rows.
#[test]
fn records_of_a_step_past_the_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &lens());
    // 120 records, 8 a batch: steps 0 to 14.
    let p = Pipeline::from_files(files)
        .unwrap()
        .parse(spec())
        .fixed_length(20)
        .batch(8, false);
    assert_eq!(p.records_of(&[14]).unwrap()[&14].len(), 8);
    let err = p.records_of(&[3, 15]).unwrap_err();
    assert!(
        err.to_string()
            .contains("step 15 is past the end of the run: its last step is 14"),
        "{err}"
    );
}
