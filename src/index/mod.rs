//! Random access into the TFRecord shards users already have: an index per
//! shard, built in one streaming pass, and reads of any record through it.
//!
//! - [`build`]: a shard's index — every record's offset and length, what
//!   identifies the shard, and for GZIP/ZLIB shards inflate access points
//!   ([`zran`]) — checking every record's CRCs as it goes.
//! - [`ShardIndex`] (`format.rs`): the index in memory and as a file.
//! - `location.rs`: where index files live (a hidden `.infeed-index` folder
//!   beside the shards, beside each shard as earlier versions put them, or in a
//!   folder of their own, local or in a bucket), and a stale or foreign one
//!   refused ([`ShardId::check`]).
//! - [`RandomAccess`] (`access.rs`): records by their index in a list of
//!   shards, one at a time or many at once, neighbours read together and
//!   the rest in parallel; every record's framing and CRCs checked.
//!
//! Files depend one way: `zran`, `identity`, `error` ← `format` ← `build`
//! ← `location` ← `access`.

mod access;
mod build;
mod error;
mod format;
mod identity;
mod location;
pub mod zran;

pub(crate) use access::read_at;
pub use access::{AccessOptions, RandomAccess};
pub use build::{BuildOptions, DEFAULT_SPAN, IndexBuilder, build};
pub use error::IndexError;
pub(crate) use format::RecordsBuilder;
pub use format::{FORMAT_VERSION, ShardIndex};
pub use identity::{ShardId, Version, current};
pub use location::{
    Found, INDEX_DIR, IndexOptions, SUFFIX, beside_url, find, index_name, index_url, index_urls,
    load, load_or_build, save,
};
