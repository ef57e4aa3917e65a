//! What building, loading or reading through an index can fail with: each
//! error names the shard and the index file, never a wrong record.

use crate::record::RecordError;
use crate::source::SourceError;

/// An index that cannot be built, loaded or trusted, or a read through it
/// that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// No index where indexes were looked for.
    #[error("{shard}: no index at {index} (build one: infeed index, or infeed.build_index)")]
    Missing { shard: String, index: String },
    /// The index describes another version of the shard.
    #[error(
        "{index}: stale index of {shard}: its {what} was {recorded} when indexed and is {found} \
         now (build the index again)"
    )]
    Stale {
        index: String,
        shard: String,
        what: &'static str,
        recorded: String,
        found: String,
    },
    /// The index was built for a shard of another name.
    #[error("{index}: an index of {recorded:?}, not of {shard}")]
    OtherShard {
        index: String,
        shard: String,
        recorded: String,
    },
    /// Not an index, cut short, damaged, or of another format version.
    #[error("{index}: {reason}")]
    Corrupt { index: String, reason: String },
    /// A record index past the end.
    #[error("record {index} is out of range: the dataset has {records} records")]
    OutOfRange { index: u64, records: u64 },
    /// An access point of a compressed shard's index that does not inflate.
    #[error("{shard}: access point {point} of its index {index} does not inflate: {reason}")]
    BadPoint {
        shard: String,
        index: String,
        point: usize,
        reason: String,
    },
    /// The index places a record where the shard has none (the record's own
    /// framing and CRCs say so).
    #[error("{index}: {error}")]
    NoRecord { index: String, error: RecordError },
    /// Reading the shard failed, or the shard is corrupt where the index is
    /// built.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// Listing, reaching or reading a shard or an index failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The shard does not inflate, or does not frame as records, where the
    /// index builder reads it.
    #[error("{shard}: byte {offset}: {reason}")]
    Shard {
        shard: String,
        offset: u64,
        reason: String,
    },
    /// Writing an index failed.
    #[error("{index}: cannot write it: {message}")]
    Write { index: String, message: String },
}
