//! Logical streams (`Pipeline::streams`): a job of 12 streams gives the same
//! global batches — every host's rows of a step together, in host order —
//! on any host count that divides 12, and the states of all hosts, merged,
//! restore on any other such count with exactly the global batches an
//! uninterrupted run gives. Hosts are simulated in one process, each
//! `.shard(i, n)`.

use infeed::batch::{Batch, PackStrategy, SEGMENT_IDS};
use infeed::pipeline::{
    Batches, EqualBatches, ParsedPipeline, Pipeline, PipelineError, StateError, merge_states,
};
use proptest::prelude::*;

use super::grouping::{self, id_of, real_rows, rows};

const STREAMS: u64 = 12;
/// Rows of a global batch: 2 per stream.
const GLOBAL: usize = 24;

/// Host `index` of `hosts` of the lm chain padded to a multiple of 16 up to
/// 96 (so shapes follow the shared schedule), every host seeded alike.
fn host(files: &[String], index: u64, hosts: u64, epochs: Option<u64>) -> ParsedPipeline {
    host_with(files, index, hosts, epochs, None)
}

fn host_with(
    files: &[String],
    index: u64,
    hosts: u64,
    epochs: Option<u64>,
    equal: Option<EqualBatches>,
) -> ParsedPipeline {
    chain(files, index, hosts, epochs, equal)
        .pad_to_multiple_of(16)
        .max_length(96)
        .batch(GLOBAL / hosts as usize, true)
}

/// The same chain packing its records into rows of 96 (first fit): each
/// stream packs its own 2 rows of every step.
fn packing_host(
    files: &[String],
    index: u64,
    hosts: u64,
    epochs: Option<u64>,
    equal: Option<EqualBatches>,
) -> ParsedPipeline {
    packing_with(PackStrategy::FirstFit, files, index, hosts, epochs, equal)
}

/// The packing hosts, by name: first fit, best fit, and concat-split with
/// at most 3 pieces a row.
const PACKING: [(&str, Host); 3] = [
    ("first fit", packing_host),
    ("best fit", |f, i, n, e, q| {
        packing_with(PackStrategy::BestFit, f, i, n, e, q)
    }),
    ("concat-split", |f, i, n, e, q| {
        packing_with(PackStrategy::ConcatSplit, f, i, n, e, q).pack_max_segments(3)
    }),
];

fn packing_with(
    strategy: PackStrategy,
    files: &[String],
    index: u64,
    hosts: u64,
    epochs: Option<u64>,
    equal: Option<EqualBatches>,
) -> ParsedPipeline {
    chain(files, index, hosts, epochs, equal)
        .pack(96)
        .pack_strategy(strategy)
        .batch(GLOBAL / hosts as usize, false)
}

fn chain(
    files: &[String],
    index: u64,
    hosts: u64,
    epochs: Option<u64>,
    equal: Option<EqualBatches>,
) -> ParsedPipeline {
    let mut p = Pipeline::from_files(files.to_vec()).unwrap();
    if let Some(how) = equal {
        p = p.equal_batches(how);
    }
    p.shard(index, hosts)
        .streams(STREAMS)
        .seed(5)
        .shuffle_files()
        .interleave(2, 1)
        .shuffle(16)
        .repeat(epochs)
        .parse(grouping::spec())
}

/// A step seen from all hosts: the padded length every host gave (they
/// must agree on the whole shape) and every row, padding included, in host
/// order.
#[derive(Debug, PartialEq)]
struct Global {
    width: usize,
    rows: Vec<Vec<i64>>,
    real: Vec<Vec<i64>>,
}

/// Joins the hosts' batches of each step; hosts must agree on every shape
/// and on the number of steps.
fn global(per_host: Vec<Vec<Batch>>) -> Vec<Global> {
    let steps = per_host[0].len();
    for (i, h) in per_host.iter().enumerate() {
        assert_eq!(h.len(), steps, "host {i} ran another number of steps");
    }
    (0..steps)
        .map(|t| {
            let shape = per_host[0][t].shape();
            let mut g = Global {
                width: per_host[0][t]["ids"].shape()[1],
                rows: Vec::new(),
                real: Vec::new(),
            };
            for (i, h) in per_host.iter().enumerate() {
                assert_eq!(h[t].shape(), shape, "step {t}: host {i}'s shape");
                g.rows.extend(rows(&h[t], "ids"));
                g.real.extend(values_of(&h[t]));
            }
            g
        })
        .collect()
}

/// The values of a batch's rows: padded rows' masked values, packed rows'
/// values with a segment (a packed batch's rows of a stream that ran out
/// lie between other streams' rows, so every row is looked at).
fn values_of(batch: &Batch) -> Vec<Vec<i64>> {
    if batch.get(SEGMENT_IDS).is_none() {
        return real_rows(batch);
    }
    rows(batch, "ids")
        .iter()
        .zip(rows(batch, SEGMENT_IDS))
        .map(|(r, s)| {
            r.iter()
                .zip(s)
                .filter(|&(_, s)| s != 0)
                .map(|(&v, _)| v)
                .collect::<Vec<i64>>()
        })
        .filter(|r| !r.is_empty())
        .collect()
}

fn build(p: ParsedPipeline) -> Batches<Batch> {
    p.build().unwrap()
}

/// `steps` global batches of a job on `hosts` hosts (all when `None`), and
/// the hosts' states after them.
fn run(
    hosts: u64,
    steps: Option<usize>,
    pipeline: impl Fn(u64, u64) -> ParsedPipeline,
) -> (Vec<Global>, Vec<Vec<u8>>) {
    let mut per_host = Vec::new();
    let mut states = Vec::new();
    for i in 0..hosts {
        let mut batches = build(pipeline(i, hosts));
        let mut got = Vec::new();
        while steps.is_none_or(|n| got.len() < n) {
            match batches.next_batch().unwrap() {
                Some(b) => got.push(b),
                None => break,
            }
        }
        states.push(batches.state());
        per_host.push(got);
    }
    (global(per_host), states)
}

fn files(dir: &std::path::Path) -> Vec<String> {
    // 24 files: 2 per stream, of 30 records each.
    let lens: Vec<Vec<usize>> = (0..24)
        .map(|f| (0..30).map(|i| (f * 7 + i * 13) % 96 + 1).collect())
        .collect();
    grouping::write_lm_files(dir, &lens)
}

#[test]
fn the_global_batch_is_the_same_on_every_host_count_that_divides_the_streams() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let (one, _) = run(1, Some(40), |i, n| host(&files, i, n, None));
    assert_eq!(one.len(), 40);
    let mut widths: Vec<usize> = one.iter().map(|g| g.width).collect();
    widths.sort();
    widths.dedup();
    assert!(widths.len() > 2, "the schedule moves through the buckets");
    for hosts in [2, 3, 4, 6, 12] {
        let (many, _) = run(hosts, Some(40), |i, n| host(&files, i, n, None));
        let same = many.iter().zip(&one).position(|(a, b)| a != b);
        assert_eq!((many.len(), same), (one.len(), None), "{hosts} hosts");
    }
}

#[test]
fn a_finite_run_delivers_every_record_once_on_any_host_count() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let expected: Vec<i64> = (0..24)
        .flat_map(|f| (0..30).map(move |i| f * 100 + i))
        .collect();
    let (one, _) = run(1, None, |i, n| {
        host_with(&files, i, n, Some(1), Some(EqualBatches::Pad))
    });
    for hosts in [1, 3, 4] {
        let (many, _) = run(hosts, None, |i, n| {
            host_with(&files, i, n, Some(1), Some(EqualBatches::Pad))
        });
        let mut ids: Vec<i64> = many
            .iter()
            .flat_map(|g| g.real.iter().map(|r| id_of(r[0])))
            .collect();
        ids.sort();
        assert_eq!(ids, expected, "{hosts} hosts");
        assert_eq!(
            first_difference(&many, &one),
            None,
            "{hosts} hosts: the same rows at every step"
        );
    }
}

/// A finite run of buckets whose batch sizes differ, without equal
/// batches: a stream whose input ended sends its waiting records in the
/// step's rows (padded to a longer bucket when none fits the step's), so
/// its group joins the other streams' of the step on any host count, and
/// every record comes once. (They went out in the last bucket's rows,
/// which did not fit a step of the first bucket's.)
#[test]
fn a_finite_run_of_buckets_delivers_every_record_once_without_equal_batches() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let expected: Vec<i64> = (0..24)
        .flat_map(|f| (0..30).map(move |i| f * 100 + i))
        .collect();
    // 4, 2 and 1 rows a stream.
    let sizes = |hosts: u64| [48, 24, 12].map(|s| s / hosts as usize);
    for hosts in [1, 2, 3, 12] {
        let mut ids = Vec::new();
        for i in 0..hosts {
            let p = chain(&files, i, hosts, Some(1), None)
                .bucket_by_length("ids", &[32, 64], &sizes(hosts))
                .max_length(96)
                .drop_remainder(false);
            let shapes = p.shapes().unwrap();
            let mut batches = build(p);
            while let Some(b) = batches.next_batch().unwrap() {
                assert!(
                    shapes.contains(&b.shape()),
                    "{hosts} hosts: {:?}",
                    b.shape()
                );
                ids.extend(real_rows(&b).iter().map(|r| id_of(r[0])));
            }
        }
        ids.sort();
        assert_eq!(ids, expected, "{hosts} hosts");
    }
}

/// The first step where two runs differ (a count of its own when they
/// differ in length), without printing thousands of rows.
fn first_difference(a: &[Global], b: &[Global]) -> Option<String> {
    if let Some(t) = a.iter().zip(b).position(|(x, y)| x != y) {
        return Some(format!(
            "step {t}: widths {} and {}",
            a[t].width, b[t].width
        ));
    }
    (a.len() != b.len()).then(|| format!("{} and {} steps", a.len(), b.len()))
}

/// Saves a job of `from` hosts after `k` steps and continues it on `to`
/// hosts: the global batches after step k are the uninterrupted run's.
fn moves(files: &[String], from: u64, to: u64, k: usize) {
    moves_with(files, from, to, k, host_with);
}

type Host = fn(&[String], u64, u64, Option<u64>, Option<EqualBatches>) -> ParsedPipeline;

fn moves_with(files: &[String], from: u64, to: u64, k: usize, host_with: Host) {
    let host = |files: &[String], i, n, epochs| host_with(files, i, n, epochs, None);
    let total = k + 25;
    let (whole, _) = run(1, Some(total), |i, n| host(files, i, n, None));
    let (before, states) = run(from, Some(k), |i, n| host(files, i, n, None));
    assert_eq!(first_difference(&before, &whole[..k]), None, "{from} hosts");
    let parts: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
    let merged = merge_states(&parts).unwrap();
    let (after, _) = run(to, Some(25), |i, n| {
        host(files, i, n, None).resume_from(&merged)
    });
    assert_eq!(
        first_difference(&after, &whole[k..]),
        None,
        "{from} -> {to} hosts at step {k}"
    );
}

/// Packing: each stream packs its own rows, which sit at the same place of
/// the global batch on any host count; a state moves like any other.
#[test]
fn packed_rows_are_the_same_on_every_host_count_and_a_state_moves() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let mut firsts = Vec::new();
    for (name, host) in PACKING {
        let (mut one, _) = run(1, Some(30), |i, n| host(&files, i, n, None, None));
        assert_eq!(one.len(), 30);
        assert!(one.iter().all(|g| g.width == 96 && g.rows.len() == GLOBAL));
        for hosts in [2, 3, 4, 6, 12] {
            let (many, _) = run(hosts, Some(30), |i, n| host(&files, i, n, None, None));
            assert_eq!(first_difference(&many, &one), None, "{name}, {hosts} hosts");
        }
        for (from, to, k) in [(2, 4, 7), (4, 2, 13), (2, 1, 0), (1, 3, 21), (6, 4, 9)] {
            moves_with(&files, from, to, k, host);
        }
        firsts.push(one.remove(0).rows);
    }
    // The strategies lay the same records out differently.
    assert_ne!(firsts[0], firsts[1]);
    assert_ne!(firsts[0], firsts[2]);
}

/// A finite packed run with equal batches: every record's values once, the
/// same rows at every step on any host count (a stream that runs out
/// leaves its rows padding, between other streams' rows).
#[test]
fn a_finite_packed_run_delivers_every_record_once_on_any_host_count() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    // Every value of every record once (a concat-split record's pieces
    // may lie in rows apart).
    let expected: Vec<i64> = (0..24)
        .flat_map(|f| (0..30).map(move |i| (f, i)))
        .flat_map(|(f, i)| {
            let len = ((f * 7 + i * 13) % 96 + 1) as usize;
            (0..len).map(move |j| grouping::value(f * 100 + i, j))
        })
        .collect();
    for (name, host) in PACKING {
        let packed = |i, n| host(&files, i, n, Some(1), Some(EqualBatches::Pad));
        let (one, _) = run(1, None, packed);
        for hosts in [1, 2, 4, 12] {
            let (many, _) = run(hosts, None, packed);
            let mut values: Vec<i64> = many
                .iter()
                .flat_map(|g| g.real.iter().flatten().copied())
                .collect();
            values.sort();
            assert_eq!(values, expected, "{name}, {hosts} hosts");
            assert_eq!(first_difference(&many, &one), None, "{name}, {hosts} hosts");
        }
    }
}

#[test]
fn a_state_moves_between_host_counts_that_divide_the_streams() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    for (from, to, k) in [(2, 4, 7), (4, 2, 13), (2, 1, 0), (1, 3, 21), (3, 2, 30)] {
        moves(&files, from, to, k);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn any_divisor_restores_on_any_divisor(
        from in prop::sample::select(vec![1u64, 2, 3, 4, 6, 12]),
        to in prop::sample::select(vec![1u64, 2, 3, 4, 6, 12]),
        k in 0usize..60,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        moves(&files, from, to, k);
    }
}

#[test]
fn what_cannot_move_is_refused_with_a_state_error() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let (_, states) = run(2, Some(5), |i, n| host(&files, i, n, None));
    // A host count that does not divide the streams.
    let err = host(&files, 0, 5, None).build().err().unwrap();
    assert!(
        err.to_string()
            .contains("5 hosts cannot share 12 logical streams"),
        "{err}"
    );
    // One host's state alone lacks the other host's streams.
    let err = host(&files, 0, 1, None)
        .resume_from(&states[0])
        .build()
        .err()
        .unwrap();
    match &err {
        PipelineError::BadState(StateError::Streams(m)) => assert!(
            m.contains("does not hold logical stream 6") && m.contains("merge_states"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    // Another stream count.
    let err = Pipeline::from_files(files.clone())
        .unwrap()
        .shard(0, 2)
        .streams(6)
        .seed(5)
        .parse(grouping::spec())
        .pad_to_multiple_of(16)
        .max_length(96)
        .batch(12, true)
        .resume_from(&states[0])
        .build()
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("it was taken from a job of 12 logical streams; this pipeline has 6"),
        "{err}"
    );
    // Other batch sizes move other records into a step: another pipeline.
    let err = Pipeline::from_files(files.clone())
        .unwrap()
        .shard(0, 2)
        .streams(STREAMS)
        .seed(5)
        .shuffle_files()
        .interleave(2, 1)
        .shuffle(16)
        .parse(grouping::spec())
        .pad_to_multiple_of(16)
        .max_length(96)
        .batch(24, true)
        .resume_from(&merge_states(&[&states[0], &states[1]]).unwrap())
        .build()
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            PipelineError::BadState(StateError::OtherPipeline { .. })
        ),
        "{err:?}"
    );
    // A batch size that does not split evenly over a host's streams.
    let err = Pipeline::from_files(files.clone())
        .unwrap()
        .shard(0, 2)
        .streams(STREAMS)
        .parse(grouping::spec())
        .pad_to_multiple_of(16)
        .max_length(96)
        .batch(9, true)
        .build()
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("its batch sizes must be multiples of 6, and 9 is not"),
        "{err}"
    );
}

/// `skip_steps`: a run leaves out the global batches of the given steps on
/// every host and continues with the uninterrupted run's next ones; the
/// ranges travel in the state, so a restore on another host count keeps
/// leaving them out.
#[test]
fn skipped_steps_are_left_out_on_any_host_count_and_stay_in_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let (whole, _) = run(1, Some(20), |i, n| host(&files, i, n, None));
    // The first step where `got` is not the uninterrupted run's `steps`.
    let differs = |got: &[Global], steps: &[usize]| -> Option<usize> {
        assert_eq!(got.len(), steps.len(), "steps delivered");
        (0..got.len()).find(|&k| got[k] != whole[steps[k]])
    };
    let skipping = |i, n| host(&files, i, n, None).skip_steps(&[(3, 5), (9, 10)]);
    let kept: Vec<usize> = (0..20).filter(|t| ![3, 4, 9].contains(t)).collect();
    for hosts in [1, 2, 3] {
        let (got, _) = run(hosts, Some(16), skipping);
        assert_eq!(differs(&got, &kept[..16]), None, "{hosts} hosts");
    }
    // Saved on 2 hosts after steps 0 and 1, before the ranges; restored on
    // 4 without saying them again: still left out.
    let (_, states) = run(2, Some(2), skipping);
    let parts: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
    let merged = merge_states(&parts).unwrap();
    let (after, after_states) = run(4, Some(10), |i, n| {
        host(&files, i, n, None).resume_from(&merged)
    });
    // Steps 2, 5, 6, 7, 8, 10, 11, 12, 13, 14.
    assert_eq!(differs(&after, &kept[2..12]), None);
    // A restore that adds a range: the state's and the new one together.
    let parts: Vec<&[u8]> = after_states.iter().map(Vec::as_slice).collect();
    let merged = merge_states(&parts).unwrap();
    let (more, _) = run(2, Some(3), |i, n| {
        host(&files, i, n, None)
            .resume_from(&merged)
            .skip_steps(&[(15, 17)])
    });
    assert_eq!(differs(&more, &[17, 18, 19]), None);
    // An empty range is refused by name.
    match host(&files, 0, 1, None).skip_steps(&[(4, 4)]).build() {
        Err(PipelineError::Config(m)) => assert!(m.contains("(4, 4) is empty"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}
