//! Static-shape batches: parsed columns into padded, masked, 64-byte aligned
//! tensors from a recycling pool, with the finite set of shapes a plan can
//! produce known before the first batch (so an XLA program can be compiled
//! once per shape ahead of time).
//!
//! - [`AlignedBuf`] and [`BufferPool`] (PJRT zero-copy needs 64-byte
//!   alignment and memory that outlives the device buffer; see there).
//! - [`Tensor`], [`Batch`] (with a stable [`Batch::digest`]); a bytes or
//!   text feature is a [`BytesColumn`] of the batch, kept on the host.
//! - [`BatchPlan`] → [`Assembler`]: [`LengthPolicy`] per padding group (pad to a
//!   multiple, fixed or max length, [`Truncation`]), masks, casts, raw
//!   decode of bytes (else bytes columns); [`Assembler::shapes`] lists
//!   every shape.
//! - [`Bucketer`]: rows grouped by length, each bucket one shape.
//! - [`Packer`]: sequences packed into fixed-length rows with segment ids
//!   and positions.

mod assemble;
mod bucket;
mod buffer;
mod bytes_column;
mod direct;
mod direct_dense;
mod dtype;
mod pack;
mod placement;
mod plan;
mod provenance;
// Only a device runtime maps memory (feature xla).
#[cfg(feature = "xla")]
pub(crate) mod registered;
mod shape;
mod tensor;

pub use assemble::{BatchError, BatchErrorKind};
pub use bucket::{BucketError, BucketGroup, Bucketer, Remainder};
#[cfg(feature = "xla")]
pub(crate) use buffer::PAGE_ALIGNED_FROM;
pub use buffer::{ALIGN, AlignedBuf, BufferPool, PoolConfig, PoolStats};
pub use bytes_column::BytesColumn;
pub use dtype::{Bf16, Element, TensorType};
pub use pack::{Overflow, POSITIONS, PackPlan, Packer, SEGMENT_IDS, kept_span};
pub use placement::{PackRule, PackStrategy, Placement, RowPlanner};
pub use plan::{
    Assembler, BatchPlan, LengthPolicy, MAX_SHAPES, MaskType, PlanError, Scalar, Truncation,
};
pub use provenance::{Provenance, ProvenanceParts, RecordPosition};
pub use shape::{BatchShape, TensorError, TensorShape};
pub use tensor::{Batch, Tensor};
