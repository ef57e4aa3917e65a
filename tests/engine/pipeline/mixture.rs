//! Mixtures (`Pipeline::mix`): proportions (random within a stated
//! tolerance, stratified exact per batch), every source's records in its
//! own order with none lost or repeated, the exhaustion policies, exact
//! restores, restores with new weights or sources, and several hosts.

use std::collections::BTreeMap;
use std::path::Path;

use infeed::pipeline::{MixChoice, OnExhausted, Pipeline, PipelineError, merge_states};
use infeed::record::Compression;

use crate::support::tfrecord::write_file;

/// Writes `files` files of `per_file` records named "{tag}{f}-{i}".
fn corpus(dir: &Path, tag: &str, files: usize, per_file: usize) -> Vec<String> {
    (0..files)
        .map(|f| {
            let path = dir.join(format!("{tag}-{f}.tfrecord"));
            let records = (0..per_file).map(|i| format!("{tag}{f}-{i}"));
            write_file(&path, records, Compression::None)
        })
        .collect()
}

fn source(files: &[String], seed: u64, epochs: Option<u64>) -> Pipeline {
    Pipeline::from_files(files.to_vec())
        .unwrap()
        .seed(seed)
        .shuffle_files()
        .interleave(2, 1)
        .shuffle(32)
        .repeat(epochs)
}

struct Corpora {
    _dir: tempfile::TempDir,
    web: Vec<String>,
    code: Vec<String>,
    books: Vec<String>,
}

fn corpora() -> Corpora {
    let dir = tempfile::tempdir().unwrap();
    Corpora {
        web: corpus(dir.path(), "w", 4, 300),
        code: corpus(dir.path(), "c", 2, 200),
        books: corpus(dir.path(), "b", 2, 100),
        _dir: dir,
    }
}

fn mixture(c: &Corpora, weights: &[f64], choice: MixChoice, epochs: Option<u64>) -> Pipeline {
    Pipeline::mix(
        [
            ("web", source(&c.web, 1, epochs)),
            ("code", source(&c.code, 2, epochs)),
        ],
        weights,
    )
    .unwrap()
    .seed(9)
    .mix_by(choice)
}

fn batches(p: &Pipeline, batch: usize, limit: usize) -> Vec<Vec<String>> {
    p.build_raw(batch, true)
        .unwrap()
        .take(limit)
        .map(|b| {
            b.unwrap()
                .records()
                .map(|r| String::from_utf8(r.to_vec()).unwrap())
                .collect()
        })
        .collect()
}

fn count(batch: &[String], tag: char) -> usize {
    batch.iter().filter(|r| r.starts_with(tag)).count()
}

#[test]
fn stratified_batches_hold_the_exact_share() {
    let c = corpora();
    let got = batches(
        &mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None),
        16,
        200,
    );
    assert_eq!(got.len(), 200);
    for (t, b) in got.iter().enumerate() {
        assert_eq!((count(b, 'w'), count(b, 'c')), (12, 4), "batch {t}");
    }
    // Three sources, 5:3:2 in batches of 7: each the floor or the ceiling
    // of its share in every batch, exact over the run.
    let three = Pipeline::mix(
        [
            ("web", source(&c.web, 1, None)),
            ("code", source(&c.code, 2, None)),
            ("books", source(&c.books, 3, None)),
        ],
        &[5.0, 3.0, 2.0],
    )
    .unwrap()
    .mix_by(MixChoice::Stratified);
    let got = batches(&three, 7, 100);
    let mut run = [0usize; 3];
    for b in &got {
        for (j, tag) in ['w', 'c', 'b'].into_iter().enumerate() {
            let share = 7.0 * [0.5, 0.3, 0.2][j];
            assert!((count(b, tag) as f64 - share).abs() < 1.0, "{b:?}");
            run[j] += count(b, tag);
        }
    }
    assert_eq!(run, [350, 210, 140]);
}

#[test]
fn random_draws_hold_the_share_within_tolerance() {
    let c = corpora();
    let got = batches(&mixture(&c, &[3.0, 1.0], MixChoice::Random, None), 100, 100);
    let web: usize = got.iter().map(|b| count(b, 'w')).sum();
    // 10 000 draws of p = 3/4: standard deviation 43; within 5 of them.
    assert!((7_500usize.abs_diff(web)) < 217, "{web} of 10000");
    // Not stratified: batches vary.
    let per_batch: Vec<usize> = got.iter().map(|b| count(b, 'w')).collect();
    assert!(per_batch.iter().any(|&n| n != 75), "{per_batch:?}");
    // The same seed, the same draws; another seed, other draws.
    let again = batches(&mixture(&c, &[3.0, 1.0], MixChoice::Random, None), 100, 100);
    assert_eq!(again, got);
    let other = batches(
        &mixture(&c, &[3.0, 1.0], MixChoice::Random, None).seed(10),
        100,
        100,
    );
    assert_ne!(other, got);
}

/// The records of source `tag` in the mixture's order.
fn of(all: &[Vec<String>], tag: char) -> Vec<String> {
    all.iter()
        .flatten()
        .filter(|r| r.starts_with(tag))
        .cloned()
        .collect()
}

#[test]
fn each_source_gives_its_own_records_in_its_own_order() {
    let c = corpora();
    let mixed = batches(
        &mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None),
        16,
        100,
    );
    let web_alone = batches(&source(&c.web, 1, None), 12, 100);
    let code_alone = batches(&source(&c.code, 2, None), 4, 100);
    assert_eq!(of(&mixed, 'w'), web_alone.concat());
    assert_eq!(of(&mixed, 'c'), code_alone.concat());
}

#[test]
fn the_policies_when_a_source_runs_out() {
    let c = corpora();
    // One epoch: web 1200 records, code 400; 1:1 runs code out first.
    let p = |policy| mixture(&c, &[1.0, 1.0], MixChoice::Random, Some(1)).on_exhausted(policy);
    let stop: Vec<String> = p(OnExhausted::Stop)
        .build_raw(10, false)
        .unwrap()
        .flat_map(|b| b.unwrap().into_records())
        .map(|r| String::from_utf8(r.to_vec()).unwrap())
        .collect();
    let code = stop.iter().filter(|r| r.starts_with('c')).count();
    let web = stop.iter().filter(|r| r.starts_with('w')).count();
    assert_eq!(code, 400);
    assert!(web.abs_diff(400) < 100, "{web}");
    // Drop: every record of both, the rest from web alone.
    let drop = p(OnExhausted::Drop)
        .build_raw(10, false)
        .unwrap()
        .map(|b| b.unwrap().len())
        .sum::<usize>();
    assert_eq!(drop, 1600);
    // Fail: an error naming the source, after every record before it.
    let err = p(OnExhausted::Fail)
        .build_raw(10, false)
        .unwrap()
        .find_map(Result::err)
        .unwrap();
    match err {
        PipelineError::SourceExhausted { name, records } => {
            assert_eq!((name.as_str(), records), ("code", 400));
        }
        other => panic!("{other:?}"),
    }
}

fn state_after(p: &Pipeline, batch: usize, k: usize) -> Vec<u8> {
    let mut b = p.build_raw(batch, true).unwrap();
    for _ in 0..k {
        b.next_batch().unwrap().unwrap();
    }
    b.state()
}

#[test]
fn a_state_restores_exactly_and_stays_small() {
    let c = corpora();
    for choice in [MixChoice::Random, MixChoice::Stratified] {
        let p = mixture(&c, &[3.0, 1.0], choice, Some(3));
        let all = batches(&p, 16, usize::MAX);
        for k in [0, 1, 17, all.len() - 1] {
            let state = state_after(&p, 16, k);
            let rest = batches(&p.clone().resume_from(&state), 16, usize::MAX);
            assert_eq!(rest, all[k..], "{choice:?} at {k}");
        }
    }
    // Two sources of 10 000-record buffers: under 64 KiB.
    let dir = tempfile::tempdir().unwrap();
    let big = |tag: &str, seed| {
        Pipeline::from_files(corpus(dir.path(), tag, 4, 6_000))
            .unwrap()
            .seed(seed)
            .shuffle(10_000)
            .repeat(None)
    };
    let p = Pipeline::mix([("a", big("a", 1)), ("b", big("b", 2))], &[1.0, 1.0]).unwrap();
    let state = state_after(&p, 64, 50);
    assert!(state.len() < 64 * 1024, "{} bytes", state.len());
}

#[test]
fn new_weights_and_sources_take_effect_from_the_restore() {
    let c = corpora();
    let p = mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None);
    let before = batches(&p, 16, 10);
    let state = state_after(&p, 16, 10);
    // 1:1 from here; each source continues where it was.
    let even = mixture(&c, &[1.0, 1.0], MixChoice::Stratified, None).resume_from(&state);
    let after = batches(&even, 16, 20);
    for b in &after {
        assert_eq!((count(b, 'w'), count(b, 'c')), (8, 8));
    }
    let whole: Vec<Vec<String>> = before.iter().chain(&after).cloned().collect();
    let web_alone = batches(&source(&c.web, 1, None), 1, 120 + 160);
    let code_alone = batches(&source(&c.code, 2, None), 1, 40 + 160);
    assert_eq!(of(&whole, 'w'), web_alone.concat());
    assert_eq!(of(&whole, 'c'), code_alone.concat());
    // A new source starts at its beginning; a removed one is dropped.
    let swapped = Pipeline::mix(
        [
            ("web", source(&c.web, 1, None)),
            ("books", source(&c.books, 3, None)),
        ],
        &[1.0, 1.0],
    )
    .unwrap()
    .seed(9)
    .mix_by(MixChoice::Stratified)
    .resume_from(&state);
    let after = batches(&swapped, 16, 5);
    let whole: Vec<Vec<String>> = before.iter().chain(&after).cloned().collect();
    assert_eq!(
        of(&whole, 'w'),
        batches(&source(&c.web, 1, None), 1, 160).concat()
    );
    assert_eq!(
        of(&after, 'b'),
        batches(&source(&c.books, 3, None), 1, 40).concat()
    );
    assert!(of(&after, 'c').is_empty());
    // Another seed is another mixture.
    let err = mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None)
        .seed(8)
        .resume_from(&state)
        .build_raw(16, true)
        .err();
    assert!(matches!(err, Some(PipelineError::BadState(_))), "{err:?}");
}

/// Host `i` of 2 mixing web and code 3:1, stratified, its sources sharded.
fn sharded_host(c: &Corpora, i: u64) -> Pipeline {
    Pipeline::mix(
        [
            ("web", source(&c.web, 1, None).shard(i, 2)),
            ("code", source(&c.code, 2, None).shard(i, 2)),
        ],
        &[3.0, 1.0],
    )
    .unwrap()
    .mix_by(MixChoice::Stratified)
}

#[test]
fn hosts_mix_their_shards_and_every_global_batch_holds_the_share() {
    let c = corpora();
    let host = |i: u64| sharded_host(&c, i);
    // Global batches of 2 × 6: 9 web and 3 code in each.
    let a = batches(&host(0), 6, 100);
    let b = batches(&host(1), 6, 100);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(count(x, 'w') + count(y, 'w'), 9);
        assert_eq!(count(x, 'c') + count(y, 'c'), 3);
        for r in x.iter().chain(y) {
            *seen.entry(r.clone()).or_default() += 1;
        }
    }
    // No record on both hosts within an epoch (900 web, 300 code < one epoch).
    assert!(seen.values().all(|&n| n == 1));
    // Their states merge and restore each host.
    let (sa, sb) = (state_after(&host(0), 6, 7), state_after(&host(1), 6, 7));
    let merged = merge_states(&[&sa, &sb]).unwrap();
    assert_eq!(batches(&host(0).resume_from(&merged), 6, 5), a[7..12]);
    assert_eq!(batches(&host(1).resume_from(&sb), 6, 5), b[7..12]);
}

#[test]
fn what_a_mixture_cannot_do_is_refused() {
    let c = corpora();
    let err = |p: Result<Pipeline, PipelineError>| -> String {
        match p.and_then(|p| p.build_raw(4, true).map(|_| ())) {
            Err(e) => e.to_string(),
            Ok(()) => panic!("accepted"),
        }
    };
    let two = || {
        [
            ("web", source(&c.web, 1, None)),
            ("code", source(&c.code, 2, None)),
        ]
    };
    assert!(err(Pipeline::mix(two(), &[1.0])).contains("1 weights for 2 sources"));
    assert!(err(Pipeline::mix(two(), &[1.0, 0.0])).contains("every weight must be positive"));
    assert!(
        err(Pipeline::mix(two(), &[1.0, 1.0]).map(|p| p.shuffle(8)))
            .contains("on each source, not on the mixture")
    );
    let uneven = [
        ("web", source(&c.web, 1, None).shard(0, 2)),
        ("code", source(&c.code, 2, None)),
    ];
    assert!(err(Pipeline::mix(uneven, &[1.0, 1.0])).contains("sharded alike"));
}

#[test]
fn hosts_of_a_finite_mixture_run_the_same_steps_with_the_same_shapes() {
    use infeed::pipeline::EqualBatches;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let lens = |n: usize, k: usize| -> Vec<Vec<usize>> {
        (0..n)
            .map(|f| (0..k).map(|i| (f * 13 + i * 7) % 90 + 1).collect())
            .collect()
    };
    let a = super::grouping::write_lm_files(&a, &lens(3, 50));
    let b = super::grouping::write_lm_files(&b, &lens(2, 40));
    let host = |i: u64, how| {
        let src = |files: &[String], seed| {
            Pipeline::from_files(files.to_vec())
                .unwrap()
                .shard(i, 2)
                .seed(seed)
                .shuffle(8)
                .repeat(Some(1))
        };
        Pipeline::mix([("a", src(&a, 1)), ("b", src(&b, 2))], &[2.0, 1.0])
            .unwrap()
            .seed(3)
            .on_exhausted(OnExhausted::Drop)
            .equal_batches(how)
            .parse(super::grouping::spec())
            .pad_to_multiple_of(16)
            .max_length(96)
            .batch(4, false)
    };
    for how in [EqualBatches::Drop, EqualBatches::Pad] {
        let runs: Vec<Vec<infeed::batch::Batch>> = (0..2)
            .map(|i| host(i, how).build().unwrap().map(Result::unwrap).collect())
            .collect();
        assert_eq!(runs[0].len(), runs[1].len(), "{how:?}");
        assert!(!runs[0].is_empty());
        let shapes = |r: &[infeed::batch::Batch]| r.iter().map(|b| b.shape()).collect::<Vec<_>>();
        assert_eq!(shapes(&runs[0]), shapes(&runs[1]), "{how:?}");
        if how == EqualBatches::Pad {
            // Every record of both corpora, on one host or the other.
            let real: usize = runs.iter().flatten().map(|b| b.real_rows).sum();
            assert_eq!(real, 3 * 50 + 2 * 40);
        }
    }
}

/// (web, code) records of each batch.
fn shares(got: &[Vec<String>]) -> Vec<(usize, usize)> {
    got.iter().map(|b| (count(b, 'w'), count(b, 'c'))).collect()
}

#[test]
fn a_schedule_changes_the_weights_at_its_steps() {
    let c = corpora();
    let held = mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None)
        .mix_schedule(&[(5, vec![1.0, 1.0]), (10, vec![0.0, 1.0])], false);
    let got = shares(&batches(&held, 16, 14));
    assert_eq!(got[..5], [(12, 4); 5]);
    assert_eq!(got[5..10], [(8, 8); 5]);
    assert_eq!(got[10..], [(0, 16); 4]);
    // Linear from 3:1 at step 0 to 1:3 at step 8, then held.
    let linear = mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None)
        .mix_schedule(&[(8, vec![1.0, 3.0])], true);
    let got = shares(&batches(&linear, 16, 12));
    assert_eq!(
        got,
        [
            (12, 4),
            (11, 5),
            (10, 6),
            (9, 7),
            (8, 8),
            (7, 9),
            (6, 10),
            (5, 11),
            (4, 12),
            (4, 12),
            (4, 12),
            (4, 12)
        ]
    );
    // Random draws follow it too: 3:1 for 40 steps of 100, then 1:3.
    let random = mixture(&c, &[3.0, 1.0], MixChoice::Random, None)
        .mix_schedule(&[(40, vec![1.0, 3.0])], false);
    let got = batches(&random, 100, 80);
    let web = |b: &[Vec<String>]| b.iter().map(|b| count(b, 'w')).sum::<usize>();
    // 4 000 draws each: standard deviation 27; within 5 of them.
    assert!(
        3_000usize.abs_diff(web(&got[..40])) < 137,
        "{}",
        web(&got[..40])
    );
    assert!(
        1_000usize.abs_diff(web(&got[40..])) < 137,
        "{}",
        web(&got[40..])
    );
    // Each source still gives its own records in its own order.
    assert_eq!(
        of(&got, 'w'),
        batches(&source(&c.web, 1, None), 1, web(&got)).concat()
    );
}

#[test]
fn a_scheduled_mixture_restores_exactly_and_under_a_new_schedule() {
    let c = corpora();
    let schedule = [(4, vec![1.0, 1.0]), (9, vec![1.0, 3.0])];
    for (choice, interpolate) in [
        (MixChoice::Stratified, false),
        (MixChoice::Stratified, true),
        (MixChoice::Random, true),
    ] {
        let p = mixture(&c, &[3.0, 1.0], choice, Some(3)).mix_schedule(&schedule, interpolate);
        let all = batches(&p, 16, usize::MAX);
        for k in [0, 3, 4, 7, 12, all.len() - 1] {
            let state = state_after(&p, 16, k);
            let rest = batches(&p.clone().resume_from(&state), 16, usize::MAX);
            assert_eq!(rest, all[k..], "{choice:?} {interpolate} at {k}");
        }
    }
    // Saved at step 6 under the schedule; restored under another, whose
    // weights hold from step 6 on; each source continues where it was.
    let p = mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None).mix_schedule(&schedule, false);
    let before = batches(&p, 16, 6);
    let state = state_after(&p, 16, 6);
    let other = mixture(&c, &[3.0, 1.0], MixChoice::Stratified, None)
        .mix_schedule(&[(8, vec![0.0, 1.0])], false)
        .resume_from(&state);
    let after = batches(&other, 16, 6);
    assert_eq!(
        shares(&after),
        [(12, 4), (12, 4), (0, 16), (0, 16), (0, 16), (0, 16)]
    );
    let whole: Vec<Vec<String>> = before.iter().chain(&after).cloned().collect();
    let web = whole.iter().map(|b| count(b, 'w')).sum();
    let code = whole.iter().map(|b| count(b, 'c')).sum();
    assert_eq!(
        of(&whole, 'w'),
        batches(&source(&c.web, 1, None), 1, web).concat()
    );
    assert_eq!(
        of(&whole, 'c'),
        batches(&source(&c.code, 2, None), 1, code).concat()
    );
}

#[test]
fn hosts_follow_one_schedule_step_by_step() {
    let c = corpora();
    let host = |i: u64| sharded_host(&c, i).mix_schedule(&[(3, vec![1.0, 1.0])], false);
    // Global batches of 2 × 6: 9 and 3, then 6 and 6 from step 3.
    let (a, b) = (batches(&host(0), 6, 6), batches(&host(1), 6, 6));
    let global: Vec<(usize, usize)> = shares(&a)
        .iter()
        .zip(shares(&b))
        .map(|(x, y)| (x.0 + y.0, x.1 + y.1))
        .collect();
    assert_eq!(global, [(9, 3), (9, 3), (9, 3), (6, 6), (6, 6), (6, 6)]);
}

#[test]
fn what_a_schedule_cannot_do_is_refused() {
    let c = corpora();
    let err = |p: Pipeline| match p.build_raw(4, true) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    let base = || mixture(&c, &[3.0, 1.0], MixChoice::Random, None);
    assert!(
        err(base().mix_schedule(&[(3, vec![1.0])], false))
            .contains("step 3: 1 weights for 2 sources")
    );
    assert!(
        err(base().mix_schedule(&[(3, vec![1.0, 1.0]), (2, vec![1.0, 1.0])], false))
            .contains("steps must increase")
    );
    assert!(
        err(base()
            .mix_schedule(&[(3, vec![1.0, 1.0])], false)
            .mix_records_per_step(0))
        .contains("records_per_step must be positive")
    );
    // Packed batches take varying record counts: the step needs a size.
    let packed = base()
        .mix_schedule(&[(3, vec![1.0, 1.0])], false)
        .parse(infeed::spec::FeatureSpec::new().var_len("x", infeed::spec::DType::Int64))
        .pack(16)
        .batch(4, false);
    match packed.clone().build() {
        Err(PipelineError::Config(m)) => assert!(m.contains("give records_per_step"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    // Sized, a packed mixture draws the records a plain one does.
    scheduled_packing_draws_the_records_plain_batches_draw();
}

/// A scheduled mixture whose step is `records_per_step` records draws the
/// same records whatever its grouping: packed into rows, it delivers
/// exactly the records of plain batches of that many rows (both stop when
/// the first source runs out).
fn scheduled_packing_draws_the_records_plain_batches_draw() {
    use super::grouping::{id_of, rows, spec, write_lm_files};
    let dir = tempfile::tempdir().unwrap();
    let lens = |n: usize| (0..n).map(|i| i % 7 + 1).collect::<Vec<_>>();
    let files = write_lm_files(dir.path(), &[lens(60), lens(40)]);
    let source = |file: &str, seed| {
        Pipeline::from_files([file])
            .unwrap()
            .seed(seed)
            .shuffle(8)
            .repeat(Some(1))
    };
    let mixed = || {
        Pipeline::mix(
            [("a", source(&files[0], 1)), ("b", source(&files[1], 2))],
            &[3.0, 1.0],
        )
        .unwrap()
        .seed(5)
        .mix_schedule(&[(3, vec![1.0, 1.0])], false)
        .mix_records_per_step(8)
        .parse(spec())
    };
    let ids = |p: infeed::pipeline::ParsedPipeline| {
        let mut ids: Vec<i64> = p
            .build()
            .unwrap()
            .flat_map(|b| {
                let b = b.unwrap();
                rows(&b, "ids").concat()
            })
            .filter(|&v| v != 0)
            .map(id_of)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    };
    let plain = ids(mixed().max_length(16).batch(8, false));
    let packed = ids(mixed().pack(16).batch(4, false));
    assert_eq!(packed, plain);
    // Stopped at the first source's end: some of each, not all of both.
    assert!(plain.iter().any(|&id| id < 100) && plain.iter().any(|&id| id >= 100));
    assert!(plain.len() < 100, "{}", plain.len());
}

/// Host `i` of `n` of a mixture of 4 logical streams: sharded on the
/// mixture, the sources not.
fn elastic_host(c: &Corpora, choice: MixChoice, i: u64, n: u64) -> Pipeline {
    mixture(c, &[3.0, 1.0], choice, None)
        .mix_schedule(&[(6, vec![1.0, 1.0])], false)
        .shard(i, n)
        .streams(4)
}

/// The global batches of `steps` steps on `n` hosts (each host's batch
/// of a step, in host order), from `state` or the start, and the hosts'
/// states after them.
fn global_run(
    host: impl Fn(u64, u64) -> Pipeline,
    n: u64,
    steps: usize,
    state: Option<&[u8]>,
) -> (Vec<Vec<String>>, Vec<Vec<u8>>) {
    let mut per_host = Vec::new();
    let mut states = Vec::new();
    for i in 0..n {
        let p = match state {
            Some(s) => host(i, n).resume_from(s),
            None => host(i, n),
        };
        let mut b = p.build_raw(16 / n as usize, true).unwrap();
        let mut got = Vec::new();
        for _ in 0..steps {
            let batch = b.next_batch().unwrap().unwrap();
            got.push(
                batch
                    .records()
                    .map(|r| String::from_utf8(r.to_vec()).unwrap())
                    .collect::<Vec<_>>(),
            );
        }
        states.push(b.state());
        per_host.push(got);
    }
    let global = (0..steps)
        .map(|t| per_host.iter().flat_map(|h| h[t].clone()).collect())
        .collect();
    (global, states)
}

#[test]
fn a_mixture_of_logical_streams_is_the_same_on_any_host_count_and_moves() {
    let c = corpora();
    for choice in [MixChoice::Stratified, MixChoice::Random] {
        let host = |i, n| elastic_host(&c, choice, i, n);
        let (one, _) = global_run(host, 1, 12, None);
        if choice == MixChoice::Stratified {
            // 16 rows a step: 12 + 4, then 8 + 8 from step 6.
            let want: Vec<(usize, usize)> = [(12, 4); 6].into_iter().chain([(8, 8); 6]).collect();
            assert_eq!(shares(&one), want);
        }
        for n in [2, 4] {
            assert_eq!(
                global_run(host, n, 12, None).0,
                one,
                "{choice:?} on {n} hosts"
            );
        }
        // Saved on `from` hosts after `k` steps, merged, restored on `to`.
        for (from, to, k) in [(2, 4, 5), (4, 1, 7), (1, 2, 3)] {
            let (_, states) = global_run(host, from, k, None);
            let parts: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
            let merged = merge_states(&parts).unwrap();
            let (after, _) = global_run(host, to, 12 - k, Some(&merged));
            assert_eq!(
                after,
                one[k..],
                "{choice:?}: {from} -> {to} hosts at step {k}"
            );
        }
    }
    // The streams' records: each source's once, none on two streams.
    let (one, _) = global_run(
        |i, n| elastic_host(&c, MixChoice::Stratified, i, n),
        1,
        12,
        None,
    );
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in one.iter().flatten() {
        *seen.entry(r.clone()).or_default() += 1;
    }
    assert!(seen.values().all(|&n| n == 1));
}

#[test]
fn a_mixture_is_sharded_once() {
    let c = corpora();
    let both = Pipeline::mix(
        [
            ("web", source(&c.web, 1, None).shard(0, 2)),
            ("code", source(&c.code, 2, None).shard(0, 2)),
        ],
        &[1.0, 1.0],
    )
    .unwrap()
    .shard(0, 2);
    match both.build_raw(4, true) {
        Err(PipelineError::Config(m)) => assert!(m.contains("is sharded once"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// Tokens of records from source "short" (10 each) and "long" (30 each)
/// in packed batches of a mixture weighed 1:1, by records or by tokens.
#[test]
fn weights_by_tokens_count_tokens_not_records() {
    use super::grouping::{rows, spec, write_lm_files};
    use infeed::batch::SEGMENT_IDS;
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let short = write_lm_files(a.path(), &[vec![10; 400], vec![10; 400]]);
    let long = write_lm_files(b.path(), &[vec![30; 400], vec![30; 400]]);
    let tokens = |by_tokens: bool| -> (usize, usize) {
        let p = Pipeline::mix(
            [
                ("short", source(&short, 1, None)),
                ("long", source(&long, 2, None)),
            ],
            &[1.0, 1.0],
        )
        .unwrap()
        .seed(4)
        .mix_by_tokens(by_tokens)
        .parse(spec())
        .pack(64)
        .batch(16, true);
        let (mut s, mut l) = (0, 0);
        for batch in p.build().unwrap().take(60) {
            for seg in rows(&batch.unwrap(), SEGMENT_IDS) {
                let mut lens = BTreeMap::<i64, usize>::new();
                for id in seg.into_iter().filter(|&id| id > 0) {
                    *lens.entry(id).or_default() += 1;
                }
                for len in lens.into_values() {
                    match len {
                        10 => s += 10,
                        30 => l += 30,
                        other => panic!("a segment of {other}"),
                    }
                }
            }
        }
        (s, l)
    };
    // By records: 1:1 in records, 1:3 in tokens; by tokens: 1:1 in tokens.
    let share = |(s, l): (usize, usize)| s as f64 / (s + l) as f64;
    let by_records = share(tokens(false));
    let by_tokens = share(tokens(true));
    assert!((by_records - 0.25).abs() < 0.03, "{by_records}");
    assert!((by_tokens - 0.5).abs() < 0.03, "{by_tokens}");
    // Without a measured length there are no tokens to count.
    let padded = Pipeline::mix(
        [
            ("short", source(&short, 1, None)),
            ("long", source(&long, 2, None)),
        ],
        &[1.0, 1.0],
    )
    .unwrap()
    .mix_by_tokens(true)
    .parse(spec())
    .fixed_length(32)
    .batch(4, true);
    match padded.build() {
        Err(PipelineError::Config(m)) => assert!(m.contains("pack or bucket_by_length"), "{m}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}
