//! One file per thread role (the shard readers, which the interleave starts,
//! are in `read/blocks.rs`); the map of every thread and the channels
//! between them is in the docs of [`pipeline`](super).

pub(crate) mod affinity;
pub(crate) mod prefilter;
pub(crate) mod record_thread;
pub(crate) mod streams;
pub(crate) mod window;
pub(crate) mod workers;

use std::thread::{JoinHandle, Scope, ScopedJoinHandle};

use super::error::PipelineError;

/// Starts a thread named `name` running `f`. A thread the system refuses
/// (`EAGAIN`: its limit on threads or processes; memory) is
/// [`PipelineError::Spawn`], never a panic: each caller hands it to the
/// consumer, the threads it started before stopped as a drop stops them.
pub(crate) fn spawn<F, T>(name: &str, f: F) -> Result<JoinHandle<T>, PipelineError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| refused(name, &e))
}

/// As [`spawn`], a thread of `scope`.
pub(crate) fn spawn_scoped<'scope, F, T>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    f: F,
) -> Result<ScopedJoinHandle<'scope, T>, PipelineError>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn_scoped(scope, f)
        .map_err(|e| refused(name, &e))
}

/// The error of a thread `name` the system would not start.
fn refused(name: &str, e: &std::io::Error) -> PipelineError {
    PipelineError::Spawn {
        thread: name.into(),
        message: e.to_string(),
    }
}

/// The message of a thread's panic (`JoinHandle::join`'s error).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}
