//! The pipeline engine and its builder.
//!
//! ```no_run
//! use infeed::batch::TensorType;
//! use infeed::pipeline::Pipeline;
//! use infeed::spec::{DType, FeatureSpec};
//!
//! let spec = FeatureSpec::new()
//!     .var_len("input_ids", DType::Int64)
//!     .var_len("attention_mask", DType::Int64);
//! let pipeline = Pipeline::from_glob("gs_or_local/train-*.tfrecord")?
//!     .shard(0, 1)
//!     .seed(7)
//!     .shuffle_files()
//!     .interleave(4, 1)
//!     .shuffle(10_000)
//!     .repeat(None)
//!     .parse(spec)
//!     .pad_to_multiple_of(64)
//!     .max_length(512)
//!     .cast(TensorType::I32)
//!     .batch(256, true);
//! let shapes = pipeline.shapes()?; // compile one XLA program per shape here
//! let mut batches = pipeline.build()?;
//! while let Some(batch) = batches.next_batch()? {
//!     let ids = &batch["input_ids"]; // [256, L] i32, L in {64, 128, ..., 512}
//!     let mask = &batch["input_ids_mask"];
//!     # let _ = (ids, mask, &shapes);
//! }
//! # Ok::<(), infeed::pipeline::PipelineError>(())
//! ```
//!
//! The record-level steps always run in this order, whatever the order of
//! the builder calls: host shard → file order → interleave → record shard →
//! skip/take → filter/map → shuffle → batch; `repeat` wraps the steps before
//! the shuffle, and whether it is called before or after `shuffle` decides
//! whether the shuffle buffer mixes epochs (before) or drains at the end of
//! each epoch (after, as tf.data's `shuffle().repeat()`).
//!
//! After parsing: `map_batch` and `filter_rows` (on parsed records, in
//! builder order), then the grouping into batches — fixed-size
//! ([`ParsedPipeline::batch`]), by length
//! ([`ParsedPipeline::bucket_by_length`]) or packed
//! ([`ParsedPipeline::pack`]) — then padding and assembly. The record thread
//! decides the grouping (see `group/`), so it is deterministic and its
//! waiting records are part of the checkpoint, as positions.
//!
//! # Threads and channels
//!
//! ```text
//!  infeed-io (2, tokio)     infeed-shard (1 per open file    infeed-records (1)            infeed-worker (threads)    consumer
//!                           and 1 for the next)
//!  cloud range reads ─────► read, inflate, frame, CRC ─────► record ops, grouping ───────► parse, map, pad, ────────► Batches::next_batch
//!      tokio mpsc(1)          std sync_channel(2):             crossbeam bounded(threads+1):  assemble                (reorders by number)
//!      of read chunks         blocks of ~chunk_size bytes      numbered raw batches +         crossbeam bounded(
//!                                                              the state after each           prefetch+threads)
//!                                                              (4×threads: records unread)
//!                                                     │  ▲
//!                               crossbeam bounded(2×threads): chunks │  │ verdicts (kept?, length)
//!                                                     ▼  │
//!                                            infeed-prefilter (threads; only with filter_rows,
//!                                            or map_batch before bucketing/packing)
//!
//!  window: the record thread takes a place before it numbers a raw batch; the consumer gives one back
//!  per batch delivered. Places: both bounded channels' capacities + threads, so a late worker holds
//!  the rest back there, not in an unbounded reorder buffer (threads/window.rs).
//!
//!  infeed-async (1; only with Batches::into_stream): Batches::next_batch ──tokio mpsc(1)──► BatchStream
//! ```
//!
//! | thread | how many, how long | does | file |
//! | --- | --- | --- | --- |
//! | `infeed-io` | 2, the process's life (started by the first cloud read) | the tokio runtime of cloud reads: range requests, retries; local files never touch it | `source` |
//! | `infeed-shard` | one per open interleave slot, until its file ends, and one for the next file of the order; on a restore, one more per file whose records are read again (shuffle buffer, waiting records), until they are found; none for a small shard framed by its index or kept from an earlier pass, which the opening thread hands on itself | reads one shard from an offset, inflates, frames, checks CRCs; hands over blocks of the pipeline's items, which the record thread only moves (a plain local shard, when nothing before the workers needs the bytes: framed by its headers or index, its records left unread) | `read/blocks.rs` |
//! | `infeed-inflate` | a shard thread's helpers, while it reads a GZIP/ZLIB local shard that has an index, where a host's `threads` give each open shard two or more | each inflates a span of the shard from its index's access point, frames it and checks its CRCs; the shard thread hands the spans' records on in order | `read/spans.rs` |
//! | `infeed-records` | one per logical stream the host runs (one, unless [`Pipeline::streams`] gives a host several) | the record ops (`ops/`: interleave, record shard, skip/take, filter/map, epochs, shuffle) and the grouping (`group/`); numbers each group and attaches the state after it | `threads/record_thread.rs` |
//! | `infeed-streams` | one, only when a host runs several logical streams | joins the streams' groups of each step, in stream order, into the host's batch | `threads/streams.rs` |
//! | `infeed-prefilter` | `threads`, while the record thread runs, only with parsed filters | reads chunks' unread records, parses them (length filters alone: the wire scan) and runs the parsed ops, so the record thread groups survivors in order | `threads/prefilter.rs` |
//! | `infeed-worker` | `threads` per pipeline (default: one per core, or per core of [`Pipeline::cpu_affinity`]) | turns a group into the output batch (reads the records left unread, parse, map, pad, assemble) | `threads/workers.rs` |
//! | `infeed-async` | one, with [`Batches::into_stream`] | pulls batches from the blocking iterator into a one-slot tokio channel, so an async executor never blocks | `async_iter.rs` |
//!
//! Every channel is bounded, so memory is bounded and a slow consumer
//! slows the readers. Work crosses threads in whole blocks and whole
//! batches, never record by record (a cross-core wake-up costs ~40 µs
//! here). Dropping [`Batches`] closes its channels and joins its threads;
//! each thread ends at its next send. A thread the system refuses to start
//! is [`PipelineError::Spawn`], delivered as the build's error (the threads
//! started before stopped the same way) or, for a thread started later, as
//! an error of the batches. Under [`Pipeline::cpu_affinity`] the
//! record, streams and worker threads pin themselves to its cores as they
//! start, and the threads they start inherit the mask.

mod accounting;
mod async_iter;
mod batches;
mod batching;
pub mod bottleneck;
mod builder;
pub mod checkpoint;
mod counts;
pub mod description;
mod equal;
mod error;
mod filter_length;
mod group;
mod images;
mod inputs_targets;
mod item;
pub mod limits;
mod loaded;
mod normalize;
mod open;
mod open_mix;
mod ops;
mod parsed;
mod read;
mod records_of;
mod rng;
mod settings;
mod skip_steps;
mod start;
mod stats;
mod threads;
mod tokenize;

pub use accounting::{LeftOut, RecordAccount};
pub use async_iter::BatchStream;
pub use batches::{Batches, PipelineStats};
pub use builder::{Listed, ParsedPipeline, Pipeline};
pub use checkpoint::{merge as merge_states, merge_ended as merge_ended_states};
pub use description::Description;
pub use error::{PipelineError, RecordIndex, SettingError, StateError};
pub use group::raw_batch::{BatchFn, GroupLayout, Packed, RawBatch};
pub use inputs_targets::{INPUTS, TARGETS, TARGETS_MASK};
pub use ops::interleave::RecordRange;
pub use ops::mix::{MixChoice, OnExhausted};
pub use ops::mix_schedule::MixSchedule;
pub use ops::record_map::{RecordFilter, RecordMap};
pub use parsed::{MapError, ParsedMap, RowFilter, select_rows};
pub use records_of::RowRecords;
pub use settings::EqualBatches;
pub use stats::StageFigures;
