//! One file per thread role; the map of every thread and the channels
//! between them is in the docs of [`pipeline`](super).

pub(crate) mod prefilter;
pub(crate) mod record_thread;
pub(crate) mod shard_reader;
pub(crate) mod streams;
pub(crate) mod workers;
