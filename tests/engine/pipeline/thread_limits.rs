//! A thread the system refuses to start ends the run with
//! `PipelineError::Spawn`, naming the thread: never a panic, an abort or a
//! hang; the batches before the error are the run's own, and every thread
//! the pipeline started is stopped and joined.
//!
//! The refusals are real: each test runs in a child process of this test
//! binary ([`in_child`]) that lowers its own `RLIMIT_NPROC`, the limit on
//! the threads and processes of its real user. The limit does not bind
//! root, so a child running as root first takes a user id of its own
//! ([`Limit::apply`]): then the count is its own threads alone, and a sweep
//! can leave room for exactly `h` more. Where the limit cannot be made to
//! bind (a plain `std::thread::spawn` still starts with no room left: root
//! that cannot change its user id, say), the test prints a note and
//! returns without checking: a skip, not a pass.
//!
//! The I/O runtime's threads (`infeed-io`, tokio's) are left out: tokio
//! panics where it cannot start them (its workers, at the runtime's start;
//! its blocking pool, in an I/O task, which the caller gets as a `Source`
//! error). The runtime is started before the limit is lowered, and no
//! pipeline here checks its shards through it under a limit.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use infeed::pipeline::{Batches, Pipeline, PipelineError};
use infeed::record::Compression;

use super::grouping::{real_rows, spec, write_lm_files};
use crate::support::tfrecord::write_files;

/// The environment variable that makes a rerun of this binary the child.
const CHILD: &str = "INFEED_THREAD_LIMITS_CHILD";

/// How long a child may run before it is taken for a hang.
const CHILD_SECS: u64 = 120;

/// The pipeline's thread names.
const NAMES: &[&str] = &[
    "infeed-shard",
    "infeed-records",
    "infeed-streams",
    "infeed-global",
    "infeed-prefilter",
    "infeed-worker",
    "infeed-async",
];

/// Whether this process is the child running `test` (a function of this
/// module). If not, reruns this test binary with only `test` as that
/// child, waits for it (a hang fails), prints its output and asserts that
/// it passed, and returns false: the caller returns, its work done in the
/// child.
fn in_child(test: &str) -> bool {
    let name = match module_path!().split_once("::") {
        Some((_, path)) => format!("{path}::{test}"),
        None => test.to_string(),
    };
    if std::env::var(CHILD).is_ok_and(|v| v == name) {
        return true;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("output");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([&name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, &name)
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("rerun the test binary");
    let deadline = Instant::now() + Duration::from_secs(CHILD_SECS);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let output = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("{name}: still running after {CHILD_SECS} s, a hang:\n{output}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    eprint!("{output}");
    // A skip is said past the harness's capture, so that it shows.
    for note in output.lines().filter(|l| l.contains("NOTE: skipped")) {
        let note = note.rsplit("... ").next().unwrap_or(note);
        let _ = writeln!(std::io::stderr(), "{name}: {note}");
    }
    assert!(
        status.success(),
        "{name}, in a child with a thread limit: {status}\n{output}"
    );
    false
}

/// The child's limit on its user's threads.
struct Limit {
    /// The soft limit it had.
    original: libc::rlimit,
    /// Its user's threads before any pipeline starts, where they are known:
    /// with a user id of its own, only its own threads count.
    baseline: Option<u64>,
}

impl Limit {
    /// Takes a user id of its own where it runs as root, checks that the
    /// limit binds (a plain spawn fails with no room left) and lifts it
    /// again; `None`, with a note printed, where it does not bind.
    fn apply() -> Option<Limit> {
        let private = take_own_user();
        // The I/O runtime (`infeed-io`, used here by the global shuffle's
        // indexes) is started before: tokio panics where it cannot start
        // its workers, which is not the pipeline's to mend.
        infeed::source::io_runtime().expect("the I/O runtime");
        let mut original = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a plain getrlimit into a local.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut original) },
            0
        );
        let limit = Limit {
            original,
            baseline: private.then(own_threads),
        };
        limit.room(Some(0));
        let refused = std::thread::Builder::new()
            .spawn(|| {})
            .map(|h| h.join())
            .is_err();
        limit.room(None);
        if !refused {
            eprintln!(
                "NOTE: skipped: RLIMIT_NPROC does not bind this process (uid {}): a thread still \
                 starts with no room left, so no spawn can be made to fail here",
                // SAFETY: no arguments, no failure.
                unsafe { libc::getuid() }
            );
            return None;
        }
        Some(limit)
    }

    /// Room for `room` more threads of the user (only 0 where the count is
    /// not known), or the original limit (`None`).
    fn room(&self, room: Option<u64>) {
        let soft = match (room, self.baseline) {
            (None, _) => self.original.rlim_cur,
            (Some(room), Some(base)) => base + room,
            (Some(0), None) => 0,
            (Some(_), None) => panic!("room for threads where the count is not known"),
        };
        let limit = libc::rlimit {
            rlim_cur: soft.min(self.original.rlim_max),
            rlim_max: self.original.rlim_max,
        };
        // SAFETY: a plain setrlimit from a local.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &limit) }, 0);
    }

    /// Waits until every thread a pipeline started has ended (none named
    /// `infeed-…` is left but the I/O runtime's).
    fn threads_back(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = pipeline_threads();
            if left.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: left running: {left:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The names of this process's threads that a pipeline starts (all named
/// `infeed-…`; the I/O runtime's `infeed-io` threads live as long as the
/// process).
fn pipeline_threads() -> Vec<String> {
    let mut names = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let comm = task.unwrap().path().join("comm");
        // A thread that ended between the listing and the read is gone.
        let Ok(name) = std::fs::read_to_string(comm) else {
            continue;
        };
        let name = name.trim();
        if name.starts_with("infeed-") && name != "infeed-io" {
            names.push(name.to_string());
        }
    }
    names
}

/// Running as root: takes a user and group id no other process has (from
/// the process id), so that the thread limit binds and counts only this
/// process's threads. False where not root, or where the ids cannot be
/// taken.
fn take_own_user() -> bool {
    // SAFETY: plain calls without pointers but the null list of no groups.
    unsafe {
        if libc::geteuid() != 0 {
            return false;
        }
        let id = 2_000_000_000 + std::process::id();
        libc::setgroups(0, std::ptr::null()) == 0 && libc::setgid(id) == 0 && libc::setuid(id) == 0
    }
}

/// This process's threads.
fn own_threads() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("Threads: in /proc/self/status")
}

/// What a run gave: the records (or rows) of each batch, then its error,
/// if any.
struct Run {
    batches: Vec<Vec<String>>,
    error: Option<PipelineError>,
}

/// Drains `built` (the build's own error, or the batches to the end or to
/// an error) after the batches `first` taken before, each batch read by
/// `rows`; after an error the iterator must end.
fn drain<T: Send + 'static>(
    built: Result<Batches<T>, PipelineError>,
    first: Vec<Vec<String>>,
    rows: impl Fn(&T) -> Vec<String>,
) -> Run {
    let mut run = Run {
        batches: first,
        error: None,
    };
    let mut batches = match built {
        Ok(b) => b,
        Err(error) => {
            run.error = Some(error);
            return run;
        }
    };
    while let Some(next) = batches.next() {
        match next {
            Ok(b) => run.batches.push(rows(&b)),
            Err(e) => {
                run.error = Some(e);
                assert!(batches.next().is_none(), "a batch after the error");
                break;
            }
        }
    }
    run
}

/// Checks a run against the run without a limit (`expected`): the same
/// batches, or those before a `Spawn` error naming one of the pipeline's
/// threads (the last cut short: the record thread sends on the records it
/// had grouped before an error); the name it gives.
fn check(what: &str, run: &Run, expected: &[Vec<String>]) -> Option<String> {
    match &run.error {
        None => {
            assert_eq!(run.batches, expected, "{what}");
            None
        }
        Some(PipelineError::Spawn { thread, message }) => {
            if let Some((last, before)) = run.batches.split_last() {
                assert!(
                    expected.starts_with(before)
                        && expected
                            .get(before.len())
                            .is_some_and(|e| e.starts_with(last)),
                    "{what}: the batches before the error are not the run's:\n{:?}\n{:?}",
                    run.batches,
                    &expected[..run.batches.len().min(expected.len())]
                );
            }
            assert!(NAMES.contains(&thread.as_str()), "{what}: thread {thread}");
            assert!(!message.is_empty());
            Some(thread.clone())
        }
        Some(other) => panic!("{what}: not a Spawn error: {other:?}"),
    }
}

/// A batch's raw records.
fn records(b: &infeed::pipeline::RawBatch) -> Vec<String> {
    b.records()
        .map(|r| String::from_utf8_lossy(r).into_owned())
        .collect()
}

/// A parsed batch's real rows.
fn rows(b: &infeed::batch::Batch) -> Vec<String> {
    real_rows(b).iter().map(|r| format!("{r:?}")).collect()
}

/// Raw pipelines over `files`, batch 4: plain (interleave 2, two
/// workers), and two logical streams. (Not the global shuffle: its indexes
/// are checked through the I/O runtime, whose blocking pool tokio starts
/// as it needs, and where it cannot, the I/O task panics: a `Source` error.)
fn raw_pipelines(files: &[String]) -> Vec<(&'static str, Pipeline)> {
    let plain = Pipeline::from_files(files.to_vec())
        .unwrap()
        .interleave(2, 1)
        .threads(2);
    vec![("plain", plain.clone()), ("two streams", plain.streams(2))]
}

#[test]
fn a_thread_refused_at_the_start_is_the_builds_error() {
    if !in_child("a_thread_refused_at_the_start_is_the_builds_error") {
        return;
    }
    let Some(limit) = Limit::apply() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[20, 20, 20], Compression::None);
    let lm = write_lm_files(dir.path(), &[vec![5; 30], vec![12; 30]]);
    for (what, p) in raw_pipelines(&files) {
        limit.room(Some(0));
        let built = p.build_raw(4, false);
        limit.room(None);
        let error = built.err().unwrap_or_else(|| panic!("{what}: built"));
        println!("{what}: {error}");
        // Opening started no reader (each one's error waits in its
        // channel); a worker is the first thread the start needs.
        assert!(
            matches!(&error, PipelineError::Spawn { thread, .. } if thread == "infeed-worker"),
            "{what}: {error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("cannot start thread infeed-worker: ")
        );
        limit.threads_back(what);
    }
    let parsed = Pipeline::from_files(lm)
        .unwrap()
        .parse(spec())
        .filter_rows(|_, row| row % 2 == 0)
        .fixed_length(16)
        .batch(4, false);
    limit.room(Some(0));
    let built = parsed.build();
    limit.room(None);
    let error = built.err().expect("built");
    println!("parsed: {error}");
    assert!(matches!(&error, PipelineError::Spawn { thread, .. } if thread == "infeed-worker"));
    limit.threads_back("parsed");
}

/// Runs `p` in batches of `batch` to its end, then again with no thread
/// allowed to start after its first batch: the run ends with `thread`
/// refused, its batches before the error the whole run's (`case` names it
/// in messages). Returns the batches of the run that was cut, and all.
fn refused_mid_run(
    limit: &Limit,
    case: &str,
    p: &Pipeline,
    batch: usize,
    thread: &str,
) -> (usize, usize) {
    let expected: Vec<Vec<String>> = p
        .build_raw(batch, false)
        .unwrap()
        .map(|b| records(&b.unwrap()))
        .collect();
    limit.threads_back("without a limit");
    let mut batches = p.build_raw(batch, false).unwrap();
    let first = records(&batches.next().unwrap().unwrap());
    // From here no thread starts.
    limit.room(Some(0));
    let run = drain(Ok(batches), vec![first], records);
    limit.room(None);
    let error = run.error.as_ref().expect("an error");
    println!(
        "after {} batches of {}: {error}",
        run.batches.len(),
        expected.len()
    );
    assert_eq!(check(case, &run, &expected).as_deref(), Some(thread));
    limit.threads_back(case);
    (run.batches.len(), expected.len())
}

#[test]
fn a_shard_reader_refused_mid_run_ends_the_batches_with_its_error() {
    if !in_child("a_shard_reader_refused_mid_run_ends_the_batches_with_its_error") {
        return;
    }
    let Some(limit) = Limit::apply() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[40; 8], Compression::None);
    let p = Pipeline::from_files(files)
        .unwrap()
        .interleave(2, 1)
        .threads(1);
    // The readers of the later files are refused.
    refused_mid_run(&limit, "mid run", &p, 4, "infeed-shard");
}

#[test]
fn the_global_shuffles_reader_refused_in_a_later_epoch_ends_the_batches_with_its_error() {
    if !in_child(
        "the_global_shuffles_reader_refused_in_a_later_epoch_ends_the_batches_with_its_error",
    ) {
        return;
    }
    let Some(limit) = Limit::apply() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[100; 4], Compression::None);
    let p = Pipeline::from_files(files)
        .unwrap()
        .seed(5)
        .global_shuffle()
        .repeat(Some(2))
        .threads(1);
    // The second epoch's reader thread is refused; the whole first epoch came.
    let (came, all) = refused_mid_run(&limit, "epoch 2", &p, 2, "infeed-global");
    assert!(came >= all / 2);
}

#[test]
fn an_async_stream_whose_thread_is_refused_yields_the_error_first() {
    if !in_child("an_async_stream_whose_thread_is_refused_yields_the_error_first") {
        return;
    }
    let Some(limit) = Limit::apply() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[30, 30], Compression::None);
    let batches = Pipeline::from_files(files)
        .unwrap()
        .threads(2)
        .build_raw(4, false)
        .unwrap();
    limit.room(Some(0));
    let mut stream = batches.into_stream();
    limit.room(None);
    let (first, then) = futures::executor::block_on(async {
        let first = stream.next().await;
        (first, stream.next().await)
    });
    let error = first.expect("an item").err().expect("an error");
    println!("into_stream: {error}");
    assert!(matches!(&error, PipelineError::Spawn { thread, .. } if thread == "infeed-async"));
    assert!(then.is_none(), "an item after the error");
    drop(stream);
    limit.threads_back("into_stream");
}

/// With room for `h` more threads, for each `h` from none on until two
/// runs in a row have room enough: every run gives its batches, or a prefix
/// of them and a `Spawn` error, and ends with its threads joined. The
/// shards are long enough that their readers are still running when the
/// record thread starts its own threads, so that each `h` refuses the same
/// thread on every run: the start's (record thread, streams thread,
/// workers), then the record thread's prefilter threads. Only where the
/// child has a user id of its own (root), so that the room is exact.
#[test]
fn every_room_for_threads_gives_the_batches_or_a_spawn_error() {
    if !in_child("every_room_for_threads_gives_the_batches_or_a_spawn_error") {
        return;
    }
    let Some(limit) = Limit::apply() else { return };
    if limit.baseline.is_none() {
        eprintln!(
            "NOTE: skipped: the limit counts every process of this user (not root), so the \
             room for threads cannot be set exactly"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = write_files(dir.path(), &[10_000; 3], Compression::None);
    let lm = write_lm_files(
        dir.path(),
        &[vec![12; 3000], vec![10; 3000], vec![14; 3000]],
    );
    let mut seen = BTreeSet::new();
    let mut sweep = |what: &str, run: &dyn Fn() -> Run| {
        let expected = run();
        assert!(expected.error.is_none(), "{what}: {:?}", expected.error);
        limit.threads_back(what);
        let mut line = format!("{what}:");
        let mut ok_in_a_row = 0;
        for h in 0.. {
            assert!(h <= 32, "{what}: still refused with room for 32 threads");
            limit.room(Some(h));
            let got = run();
            limit.room(None);
            let name = check(&format!("{what}, room {h}"), &got, &expected.batches);
            limit.threads_back(what);
            line.push_str(&format!(" {h}={}", name.as_deref().unwrap_or("ok")));
            ok_in_a_row = if name.is_none() { ok_in_a_row + 1 } else { 0 };
            seen.extend(name);
            if ok_in_a_row == 2 {
                break;
            }
        }
        println!("{line}");
    };
    for (what, p) in raw_pipelines(&files) {
        sweep(what, &|| drain(p.build_raw(4, false), Vec::new(), records));
    }
    let parsed = Pipeline::from_files(lm)
        .unwrap()
        .interleave(2, 1)
        .threads(2)
        .parse(spec())
        .filter_rows(|_, row| row % 3 != 0)
        .fixed_length(16)
        .batch(4, false);
    sweep("filter_rows", &|| drain(parsed.build(), Vec::new(), rows));
    println!("refused: {seen:?}");
    for name in [
        "infeed-records",
        "infeed-streams",
        "infeed-worker",
        "infeed-prefilter",
    ] {
        assert!(seen.contains(name), "no run refused {name}");
    }
}
