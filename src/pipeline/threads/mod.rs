//! One file per thread role (the shard readers, which the interleave starts,
//! are in `read/blocks.rs`); the map of every thread and the channels
//! between them is in the docs of [`pipeline`](super).

pub(crate) mod affinity;
pub(crate) mod prefilter;
pub(crate) mod record_thread;
pub(crate) mod streams;
pub(crate) mod window;
pub(crate) mod workers;

/// The message of a thread's panic (`JoinHandle::join`'s error).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}
