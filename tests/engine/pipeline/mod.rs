//! The pipeline on local files: records, parsing, grouping, checkpoints.

mod accounting;
mod bucket;
mod checkpoint;
mod cpu_budget;
mod cut_shard;
mod dense_direct;
mod description;
mod elastic;
mod equal_batches;
mod every_step;
mod global_shuffle;
mod grouping;
mod host_shard;
mod in_flight;
mod inputs_targets;
mod many_hosts;
mod masks;
mod mixture;
mod pack;
mod parse;
mod parsed_ops;
mod positions;
mod records;
mod recycle;
mod restore_props;
mod sequence;
mod spans;
mod state_fixtures;
mod tf_oracle;
// RLIMIT_NPROC and /proc: Linux only.
#[cfg(target_os = "linux")]
mod thread_limits;
mod tokenize;
mod worker_reads;

use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

/// Runs `body` on its own thread and fails the test if it has not finished
/// within `secs` seconds, so that a test named "... not a hang" fails on a
/// hang instead of stalling the run. A panic in `body` is passed on as is.
pub fn within<T: Send + 'static>(secs: u64, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = channel();
    let worker = std::thread::spawn(move || {
        let out = body();
        let _ = done.send(());
        out
    });
    match finished.recv_timeout(Duration::from_secs(secs)) {
        // Disconnected: `body` panicked; join hands its panic on.
        Ok(()) | Err(RecvTimeoutError::Disconnected) => worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        Err(RecvTimeoutError::Timeout) => panic!("still running after {secs} s: a hang"),
    }
}

/// The path of a file in testdata/, as `Pipeline::from_files` takes it.
pub fn testdata(name: &str) -> String {
    crate::support::testdata(name).display().to_string()
}

/// `v` sorted.
pub fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}
