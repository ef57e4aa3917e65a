//! Batch assembly: plans, padding, bucketing, packing, pooled buffers.

mod assemble;
mod bucket;
mod buffer;
mod bytes;
mod columns;
mod pack;
mod props;
