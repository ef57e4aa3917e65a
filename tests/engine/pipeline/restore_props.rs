//! Restore exactness, property-tested: for each op whose state a
//! checkpoint holds, a pipeline over small generated shards is run
//! uninterrupted, then again to a random cut, where its state is saved; a
//! fresh pipeline built with `resume_from(state)` must give exactly the
//! rest of the uninterrupted run — nothing lost, nothing repeated.
//!
//! Covered: skip/take; by-record host sharding (fewer files than hosts);
//! record filter and map; resuming with other `threads`/`prefetch` than
//! the saving run; the main chain parse → pad → cast → batch, identical
//! for 1, 2 and 4 threads and across a restore; shuffle, repeat (before
//! and after the shuffle) and interleave throughout; `unordered()`, whose
//! documented behaviour is weaker (a restore may repeat the batches
//! delivered ahead of a slower one, and loses none).
//!
//! Each property runs 256 cases; set `INFEED_PROPTEST_CASES` to run more
//! (a long run) or fewer, e.g.
//! `INFEED_PROPTEST_CASES=5000 cargo test --all-features --test engine pipeline::restore_props`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use infeed::batch::{Batch, TensorType};
use infeed::pipeline::{Batches, Pipeline};
use infeed::record::{Compression, CorruptPolicy, ReadOptions, RecordWriter};
use proptest::prelude::*;

use super::{grouping, sorted};
use crate::support::tfrecord::write_files;

/// Cases per property: `INFEED_PROPTEST_CASES`, else 256.
fn cases() -> u32 {
    std::env::var("INFEED_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    }
}

/// How a record of a file is damaged.
#[derive(Clone, Copy, Debug)]
pub enum Damage {
    /// A payload byte flipped: the record fails its data CRC.
    Payload,
    /// A length byte flipped: the header fails its CRC, and the reader
    /// scans for the next valid header.
    Length,
    /// Bytes that are no record written after it: the record itself is
    /// good, the garbage before the next one is skipped.
    GarbageAfter,
}

/// Like [`write_files`], with the records named in `damage` — (file,
/// record index, how) — damaged in the uncompressed stream before it is
/// compressed. Returns the paths and the records a reader that skips
/// corrupt regions gives, sorted.
pub fn write_damaged_files(
    dir: &std::path::Path,
    counts: &[usize],
    damage: &[(usize, usize, Damage)],
    gzip: bool,
) -> (Vec<String>, Vec<String>) {
    use std::io::Write;
    let mut good = Vec::new();
    let paths = counts
        .iter()
        .enumerate()
        .map(|(f, &n)| {
            let mut stream = Vec::new();
            for i in 0..n {
                let name = format!("f{f}-r{i}");
                let mut frame = Vec::new();
                let mut w = RecordWriter::new(&mut frame, Compression::None);
                w.write_record(name.as_bytes()).unwrap();
                w.finish().unwrap();
                let how = damage.iter().find(|d| (d.0, d.1) == (f, i)).map(|d| d.2);
                match how {
                    // Header: 8 length bytes, 4 CRC bytes; then the payload.
                    Some(Damage::Payload) => frame[12] ^= 0x40,
                    Some(Damage::Length) => frame[0] ^= 0x01,
                    Some(Damage::GarbageAfter) | None => good.push(name),
                }
                stream.extend_from_slice(&frame);
                if let Some(Damage::GarbageAfter) = how {
                    stream.extend_from_slice(b"\x07not a record, 31 bytes long..");
                }
            }
            let ext = if gzip { ".gz" } else { "" };
            let path = dir.join(format!("shard-{f}.tfrecord{ext}"));
            let bytes = if gzip {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(&stream).unwrap();
                gz.finish().unwrap()
            } else {
                stream
            };
            std::fs::write(&path, bytes).unwrap();
            path.display().to_string()
        })
        .collect();
    good.sort();
    (paths, good)
}

/// Every record named by `write_files`, sorted.
pub fn all_records(counts: &[usize]) -> Vec<String> {
    let mut all: Vec<String> = counts
        .iter()
        .enumerate()
        .flat_map(|(f, &n)| (0..n).map(move |i| format!("f{f}-r{i}")))
        .collect();
    all.sort();
    all
}

/// A batch of serialized records.
type Raw = Vec<Bytes>;

fn collect<T: Send + 'static>(batches: Batches<T>) -> Vec<T> {
    batches.map(Result::unwrap).collect()
}

/// The first `cut` batches (fewer at the end of the data), then the state.
fn take_then_state<T: Send + 'static>(mut batches: Batches<T>, cut: usize) -> (Vec<T>, Vec<u8>) {
    let mut out = Vec::new();
    for _ in 0..cut {
        match batches.next_batch().unwrap() {
            Some(b) => out.push(b),
            None => break,
        }
    }
    (out, batches.state())
}

fn raw(p: &Pipeline, batch: usize, drop: bool) -> Vec<Raw> {
    collect(p.build_raw(batch, drop).unwrap())
        .into_iter()
        .map(|b| b.into_records())
        .collect()
}

/// Runs `p` uninterrupted, then to `cut_fraction` of its batches, saves
/// the state and resumes it in `resumed(p)` (e.g. with other threads);
/// checks the first part and the resumed rest against the uninterrupted
/// run.
fn check_raw_restore(
    p: &Pipeline,
    resumed: impl FnOnce(Pipeline) -> Pipeline,
    batch: usize,
    drop: bool,
    cut_fraction: f64,
) -> Result<(), TestCaseError> {
    let full = raw(p, batch, drop);
    let cut = ((full.len() as f64) * cut_fraction) as usize;
    let (first, state) = take_then_state(p.build_raw(batch, drop).unwrap(), cut);
    let first: Vec<Raw> = first.into_iter().map(|b| b.into_records()).collect();
    prop_assert_eq!(&first[..], &full[..cut]);
    let rest = raw(&resumed(p.clone()).resume_from(&state), batch, drop);
    prop_assert_eq!(&rest[..], &full[cut..], "cut at batch {}", cut);
    Ok(())
}

/// The record stage's usual companions, as the generated case says:
/// shuffled file order, interleave, a shuffle buffer and `repeat` before or
/// after it.
fn with_order(
    p: Pipeline,
    seed: u64,
    cycle: usize,
    buffer: usize,
    epochs: u64,
    repeat_first: bool,
) -> Pipeline {
    let p = p
        .seed(seed)
        .shuffle_files()
        .interleave(cycle, 1 + cycle % 2);
    if repeat_first {
        p.repeat(Some(epochs)).shuffle(buffer)
    } else {
        p.shuffle(buffer).repeat(Some(epochs))
    }
}

proptest! {
    #![proptest_config(config())]

    /// Skip and take (per epoch) continue exactly: the cut may fall in the
    /// skipped part's shadow, mid-take or after the take ended an epoch.
    #[test]
    fn skip_take_restores_exactly(
        counts in prop::collection::vec(0usize..20, 1..4),
        skip in 0u64..25,
        take in prop::option::of(0u64..30),
        cycle in 1usize..3,
        buffer in 0usize..10,
        epochs in 1u64..3,
        repeat_first in any::<bool>(),
        gzip in any::<bool>(),
        seed in any::<u64>(),
        batch in 1usize..5,
        drop in any::<bool>(),
        cut in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(
            dir.path(),
            &counts,
            if gzip { Compression::Gzip } else { Compression::None },
        );
        let mut p = Pipeline::from_files(files).unwrap().skip(skip);
        if let Some(take) = take {
            p = p.take(take);
        }
        let p = with_order(p, seed, cycle, buffer, epochs, repeat_first).threads(2);
        check_raw_restore(&p, |p| p, batch, drop, cut)?;
    }

    /// Corrupt regions skipped under `CorruptPolicy::Skip` (a damaged
    /// payload, a damaged length, garbage between records; plain and GZIP)
    /// lose exactly the damaged records, and a state taken anywhere —
    /// right before a corrupt region too — continues exactly.
    #[test]
    fn skipped_corrupt_regions_restore_exactly(
        counts in prop::collection::vec(1usize..20, 1..4),
        damage in prop::collection::vec((0usize..4, 0usize..20, 0u8..3), 1..5),
        cycle in 1usize..3,
        buffer in 0usize..10,
        epochs in 1u64..3,
        repeat_first in any::<bool>(),
        gzip in any::<bool>(),
        seed in any::<u64>(),
        batch in 1usize..5,
        cut in 0.0f64..1.0,
    ) {
        let damage: Vec<(usize, usize, Damage)> = damage
            .into_iter()
            .map(|(f, i, how)| {
                let how = [Damage::Payload, Damage::Length, Damage::GarbageAfter][how as usize];
                (f % counts.len(), i % counts[f % counts.len()], how)
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let (files, good) = write_damaged_files(dir.path(), &counts, &damage, gzip);
        let skip = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
        let p = Pipeline::from_files(files).unwrap().read_options(skip);
        // The files read once give every good record once, and only those.
        let mut one: Vec<String> = raw(&p, 1, false)
            .iter()
            .flatten()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        one.sort();
        prop_assert_eq!(one, good);
        let p = with_order(p, seed, cycle, buffer, epochs, repeat_first).threads(2);
        check_raw_restore(&p, |p| p, batch, false, cut)?;
    }

    /// By-record host sharding (fewer files than hosts: every host reads
    /// every file and keeps every `hosts`-th record) continues exactly.
    #[test]
    fn record_sharded_hosts_restore_exactly(
        hosts in 2u64..6,
        index in 0u64..6,
        counts in prop::collection::vec(0usize..25, 1..3),
        cycle in 1usize..3,
        buffer in 0usize..10,
        epochs in 1u64..3,
        repeat_first in any::<bool>(),
        seed in any::<u64>(),
        batch in 1usize..5,
        cut in 0.0f64..1.0,
    ) {
        prop_assume!((counts.len() as u64) < hosts);
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &counts, Compression::None);
        let p = Pipeline::from_files(files).unwrap().shard(index % hosts, hosts);
        let p = with_order(p, seed, cycle, buffer, epochs, repeat_first).threads(2);
        check_raw_restore(&p, |p| p, batch, false, cut)?;
    }

    /// A record filter and map continue exactly; records read again for a
    /// restored shuffle buffer are mapped again.
    #[test]
    fn record_filter_and_map_restore_exactly(
        counts in prop::collection::vec(0usize..25, 1..4),
        modulus in 2u32..5,
        cycle in 1usize..3,
        buffer in 0usize..12,
        epochs in 1u64..3,
        repeat_first in any::<bool>(),
        seed in any::<u64>(),
        batch in 1usize..5,
        cut in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &counts, Compression::None);
        let p = Pipeline::from_files(files)
            .unwrap()
            .filter(move |r| r.iter().map(|&b| u32::from(b)).sum::<u32>() % modulus != 0)
            .map(|r| Bytes::from([&r[..], b"+mapped"].concat()));
        let p = with_order(p, seed, cycle, buffer, epochs, repeat_first).threads(2);
        // Every output record went through the map.
        prop_assert!(raw(&p, batch, false).iter().flatten().all(|r| r.ends_with(b"+mapped")));
        check_raw_restore(&p, |p| p, batch, false, cut)?;
    }

    /// `threads` and `prefetch` decide nothing about the sequence: a state
    /// saved with one setting resumes exactly under another.
    #[test]
    fn resuming_with_other_threads_and_prefetch_is_exact(
        counts in prop::collection::vec(0usize..25, 1..4),
        saved in (1usize..5, 1usize..4),
        resumed in (1usize..5, 1usize..4),
        cycle in 1usize..3,
        buffer in 0usize..12,
        epochs in 1u64..3,
        repeat_first in any::<bool>(),
        seed in any::<u64>(),
        batch in 1usize..5,
        cut in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &counts, Compression::None);
        let p = with_order(Pipeline::from_files(files).unwrap(), seed, cycle, buffer, epochs, repeat_first)
            .threads(saved.0)
            .prefetch(saved.1);
        check_raw_restore(&p, |p| p.threads(resumed.0).prefetch(resumed.1), batch, false, cut)?;
    }

    /// The main chain — parse → pad to a multiple → cast to i32 → batch,
    /// no filter — gives identical batches with 1, 2 and 4 threads, and a
    /// restore at any cut (with any of those thread counts) continues
    /// exactly.
    #[test]
    fn the_main_chain_is_identical_across_threads_and_a_restore(
        lens in prop::collection::vec(prop::collection::vec(0usize..20, 0..10), 1..4),
        multiple in 1usize..9,
        batch in 1usize..6,
        drop in any::<bool>(),
        cycle in 1usize..3,
        buffer in 0usize..10,
        epochs in 1u64..3,
        repeat_first in any::<bool>(),
        seed in any::<u64>(),
        resume_threads in prop::sample::select(vec![1usize, 2, 4]),
        cut in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = grouping::write_lm_files(dir.path(), &lens);
        let base = with_order(Pipeline::from_files(files).unwrap(), seed, cycle, buffer, epochs, repeat_first);
        let p = |threads: usize| {
            base.clone()
                .threads(threads)
                .parse(grouping::spec())
                .pad_to_multiple_of(multiple)
                .max_length(24 * multiple)
                .cast(TensorType::I32)
                .batch(batch, drop)
        };
        let run = |threads: usize| -> Vec<BatchValue> {
            collect(p(threads).build().unwrap()).iter().map(value).collect()
        };
        let full = run(1);
        prop_assert_eq!(&run(2), &full);
        prop_assert_eq!(&run(4), &full);
        // Every real record is in the output: nothing dropped by padding.
        let records: usize = lens.iter().map(Vec::len).sum::<usize>() * epochs as usize;
        let real: usize = full.iter().map(|b| b.0).sum();
        prop_assert!(real <= records && (drop || real == records), "{} of {}", real, records);
        let cut = ((full.len() as f64) * cut).floor() as usize;
        let (first, state) = take_then_state(p(2).build().unwrap(), cut);
        prop_assert_eq!(&first.iter().map(value).collect::<Vec<_>>()[..], &full[..cut]);
        let rest: Vec<BatchValue> =
            collect(p(resume_threads).resume_from(&state).build().unwrap())
                .iter()
                .map(value)
                .collect();
        prop_assert_eq!(&rest[..], &full[cut..], "cut at batch {}", cut);
    }

    /// `unordered()`, as documented on it: a state is that of the longest
    /// prefix of the sequence delivered so far, so a restore gives the
    /// batches after that prefix — repeating those delivered ahead of a
    /// slower one, never losing one. Workers are slowed on some batches so
    /// that batches overtake each other.
    #[test]
    fn unordered_restores_repeat_only_batches_delivered_ahead(
        counts in prop::collection::vec(0usize..30, 1..4),
        threads in 2usize..5,
        buffer in 0usize..10,
        seed in any::<u64>(),
        batch in 1usize..4,
        cut in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = write_files(dir.path(), &counts, Compression::None);
        let p = Pipeline::from_files(files).unwrap().seed(seed).interleave(2, 1).shuffle(buffer);
        let full = raw(&p, batch, false);
        let cut = ((full.len() as f64) * cut) as usize;
        let unordered = p.clone().threads(threads).unordered();
        let mut batches = slowed(&unordered, batch);
        let first: Vec<Raw> = (0..cut).map_while(|_| batches.next_batch().unwrap()).collect();
        // The state's batch count is the delivered prefix.
        let prefix = batches.batches_delivered() as usize;
        let state = batches.state();
        drop(batches);
        prop_assert!(prefix <= first.len(), "prefix {} of {} delivered", prefix, first.len());
        // Delivered: the prefix, plus some batches from after it.
        let mut ahead = sorted(first);
        for b in &full[..prefix] {
            let at = ahead.binary_search(b);
            prop_assert!(at.is_ok(), "batch of the prefix not delivered");
            ahead.remove(at.unwrap_or_default());
        }
        let after = sorted(full[prefix..].to_vec());
        prop_assert!(ahead.iter().all(|b| after.binary_search(b).is_ok()));
        // The restore gives exactly the batches after the prefix (in some order).
        let rest = sorted(collect(slowed(&unordered.clone().threads(threads % 3 + 1).resume_from(&state), batch)));
        prop_assert_eq!(rest, after);
    }
}

/// A batch's value: its real rows, then per tensor name, type, shape and
/// bytes.
type BatchValue = (usize, Vec<(String, TensorType, Vec<usize>, Vec<u8>)>);

fn value(b: &Batch) -> BatchValue {
    (
        b.real_rows,
        b.tensors
            .iter()
            .map(|(n, t)| (n.clone(), t.dtype(), t.shape().to_vec(), t.bytes().to_vec()))
            .collect(),
    )
}

/// Raw batches whose worker sleeps a millisecond on every third batch (by
/// its first record), so that in unordered mode later batches overtake it.
fn slowed(p: &Pipeline, batch: usize) -> Batches<Raw> {
    p.build_with(
        batch,
        false,
        Arc::new(|b| {
            let slow = b
                .records()
                .next()
                .is_some_and(|r| r.last().is_some_and(|&c| c % 3 == 0));
            if slow {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(b.into_records())
        }),
    )
    .unwrap()
}

/// The repeat `unordered()` documents, forced: the first batch is held
/// back until two later ones were delivered ahead of it; a state taken then
/// is that of no batch at all, and the restore gives every batch again,
/// losing none.
#[test]
fn an_unordered_state_taken_ahead_of_a_slow_batch_repeats_what_was_ahead() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[12], Compression::None);
    let p = Pipeline::from_files(files).unwrap().threads(3).unordered();
    let gate = Arc::new(AtomicBool::new(false));
    let first_slow = |p: &Pipeline| {
        let gate = gate.clone();
        p.build_with(
            2,
            false,
            Arc::new(move |b| {
                // Held until the gate opens (as the test goes on, or as it
                // fails: `Open` below), however long the others take.
                while b.records().next().is_some_and(|r| r.as_ref() == b"f0-r0")
                    && !gate.load(Ordering::Acquire)
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(b.into_records())
            }),
        )
        .unwrap()
    };
    /// Opens the gate when dropped, before the batches it holds back are
    /// joined (a failed assertion must not leave a worker waiting).
    struct Open(Arc<AtomicBool>);
    impl Drop for Open {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let mut batches = first_slow(&p);
    let open = Open(gate.clone());
    let ahead: Vec<Raw> = (0..2)
        .map(|_| batches.next_batch().unwrap().unwrap())
        .collect();
    assert!(ahead.iter().all(|b| b[0].as_ref() != b"f0-r0"), "{ahead:?}");
    assert_eq!(batches.batches_delivered(), 0);
    let state = batches.state();
    drop(open);
    drop(batches);
    let rest = sorted(collect(first_slow(&p.clone().resume_from(&state))));
    let all: Vec<Raw> = sorted(
        (0..6)
            .map(|i| {
                vec![
                    Bytes::from(format!("f0-r{}", 2 * i)),
                    Bytes::from(format!("f0-r{}", 2 * i + 1)),
                ]
            })
            .collect(),
    );
    assert_eq!(rest, all);
}
