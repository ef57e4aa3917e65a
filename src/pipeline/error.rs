//! What a pipeline can fail with.

use std::fmt;

use crate::record::{Compression, RecordError};

/// A pipeline error, naming the file and byte offset where data is at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// Decompressing or framing a shard failed, or reading a local file
    /// did. (A cloud read that fails for good is [`Source`](Self::Source).)
    #[error(transparent)]
    Record(RecordError),
    /// A record does not match the feature spec.
    #[error("{}: {}", Place(path, *offset, at), ParseDetail(error))]
    Parse {
        path: String,
        offset: u64,
        /// The record's index in its file (when it could be found).
        at: Option<RecordIndex>,
        error: crate::example::ParseError,
    },
    /// Listing, reaching or reading the shards failed (bad URL, empty glob,
    /// unreachable bucket, a read that failed after its retries): the
    /// [`SourceError`](crate::source::SourceError) names the shard, and for a
    /// read the byte ([`SourceError::offset`](crate::source::SourceError::offset)).
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    /// A TFDS directory could not be read as asked (a missing split, a
    /// file format other than TFRecord, an unknown feature type, bad JSON):
    /// the [`TfdsError`](crate::tfds::TfdsError) names the file and the thing.
    #[error(transparent)]
    Tfds(#[from] crate::tfds::TfdsError),
    /// The pattern matched no file, or the file list is empty.
    #[error("no input files match {0:?}")]
    NoFiles(String),
    /// An input file could not be listed or opened.
    #[error("{path}: {message}")]
    Open { path: String, message: String },
    /// A source of a mixture ran out under `OnExhausted::Fail`.
    #[error(
        "source {name:?} of the mixture ran out after {records} records (on_exhausted: fail; \
         repeat it, or choose stop or drop)"
    )]
    SourceExhausted { name: String, records: u64 },
    /// A whole epoch produced no record, so `repeat` would never end.
    #[error("epoch {epoch} produced no records (empty files, or everything filtered out)")]
    EmptyEpoch { epoch: u64 },
    /// A record's values do not fit the batch plan (too long under the
    /// error truncation policy, an int32 overflow, a wrong byte count).
    #[error("{}: {}", Place(path, *offset, at), BatchDetail(error))]
    Batch {
        path: String,
        offset: u64,
        /// The record's index in its file (when it could be found).
        at: Option<RecordIndex>,
        error: crate::batch::BatchError,
    },
    /// An image feature's value could not be decoded into its static
    /// shape: corrupt, truncated, CMYK, neither PNG nor JPEG, too large, or
    /// (fixed size) of another size.
    #[cfg(feature = "images")]
    #[error("{}: feature {feature:?}: {error}", Place(path, *offset, at))]
    Image {
        path: String,
        offset: u64,
        /// The record's index in its file (when it could be found).
        at: Option<RecordIndex>,
        feature: String,
        error: crate::image::ImageError,
    },
    /// A record's length could not be read for bucketing or packing.
    #[error("{}: length of feature {feature:?}: {error}", Place(path, *offset, at))]
    Length {
        path: String,
        offset: u64,
        /// The record's index in its file (when it could be found).
        at: Option<RecordIndex>,
        feature: String,
        error: crate::example::LengthError,
    },
    /// A `map_batch` function failed, or changed the number of records.
    #[error("{path}: batch starting with the {}: map_batch: {message}", RecordPlace(*offset, at))]
    Map {
        path: String,
        offset: u64,
        /// The first record's index in its file (when it could be found).
        at: Option<RecordIndex>,
        message: String,
    },
    /// Bucket boundaries or batch sizes are unusable.
    #[error("invalid buckets: {0}")]
    Bucket(#[from] crate::batch::BucketError),
    /// The batch plan cannot give static shapes.
    #[error("invalid batch plan: {0}")]
    Plan(#[from] crate::batch::PlanError),
    /// The pipeline was described inconsistently.
    #[error("invalid pipeline: {0}")]
    Config(String),
    /// A pipeline's description could not be read or run as it is (see
    /// [`Description`](super::Description)): the place of a bad value, a
    /// later version, user code it only names.
    #[error("pipeline description: {0}")]
    Description(String),
    /// A description's feature spec that makes no spec: the feature (or the
    /// item of the spec's text form) at fault.
    #[error("pipeline description: parse: {message}")]
    Spec {
        message: String,
        feature: Option<String>,
    },
    /// A size setting is out of range (see `limits.rs`).
    #[error("invalid setting: {0}")]
    Setting(#[from] SettingError),
    /// A shard's index is missing, stale, foreign or damaged, or a record
    /// index is out of range ([`IndexError`](crate::index::IndexError)
    /// names the shard and the index file).
    #[error(transparent)]
    Index(crate::index::IndexError),
    /// A tokenizer could not be read or loaded, or lacks the bos or eos
    /// token asked for ([`TokenizerError`](crate::text::TokenizerError)
    /// names the file).
    #[error(transparent)]
    Tokenizer(#[from] crate::text::TokenizerError),
    /// A checkpoint could not be restored; [`StateError`] says why.
    #[error("cannot restore the pipeline state: {0}")]
    BadState(#[from] StateError),
    /// A worker thread died (a panic in a user's map or filter).
    #[error("a pipeline worker thread died: {0}")]
    Worker(String),
    /// The system refused to start one of the pipeline's threads (its
    /// limit on threads or processes, or on memory, was reached): the
    /// thread's name (`infeed-worker`, `infeed-shard`, ...) and the
    /// system's reason. The threads already started were stopped.
    #[error("cannot start thread {thread}: {message}")]
    Spawn { thread: String, message: String },
}

/// A size setting outside what a pipeline can hold: the setting, the value
/// given and the limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{setting} = {value}: {limit}")]
pub struct SettingError {
    /// The setting's name (`batch`, `prefetch`, `interleave`, ...).
    pub setting: &'static str,
    pub value: String,
    /// What it may be (`at most 16777216`).
    pub limit: String,
}

impl From<crate::index::IndexError> for PipelineError {
    /// An index error, or the record or source error it carries as such.
    fn from(e: crate::index::IndexError) -> Self {
        match e {
            crate::index::IndexError::Record(e) => e.into(),
            crate::index::IndexError::Source(e) => PipelineError::Source(e),
            e => PipelineError::Index(e),
        }
    }
}

impl From<RecordError> for PipelineError {
    /// A record error, or the [`SourceError`](crate::source::SourceError)
    /// it only carries: a shard reader's read failure comes through its
    /// `std::io::Read` as an I/O error wrapping the typed error, which is
    /// handed on as it was made (with its URL, offset and retries).
    ///
    /// A shard reader that could not start sends its
    /// [`Spawn`](PipelineError::Spawn) error the same way (`read/blocks.rs`):
    /// it is handed on as that error.
    fn from(e: RecordError) -> Self {
        if let Some(refused) = refused_thread(&e) {
            return refused;
        }
        match into_source_error(e) {
            Ok(source) => PipelineError::Source(source),
            Err(e) => PipelineError::Record(e),
        }
    }
}

/// The [`PipelineError::Spawn`] an I/O record error wraps (a shard reader
/// that could not start), if it wraps one: read by reference, so a record
/// error cloned on the way still gives it.
fn refused_thread(e: &RecordError) -> Option<PipelineError> {
    let crate::record::ErrorKind::Io { source, .. } = &e.kind else {
        return None;
    };
    match source.get_ref()?.downcast_ref::<PipelineError>()? {
        PipelineError::Spawn { thread, message } => Some(PipelineError::Spawn {
            thread: thread.clone(),
            message: message.clone(),
        }),
        _ => None,
    }
}

/// The [`SourceError`](crate::source::SourceError) an I/O record error
/// wraps, or the record error itself.
fn into_source_error(e: RecordError) -> Result<crate::source::SourceError, RecordError> {
    use crate::record::ErrorKind;
    use crate::source::SourceError;
    let RecordError {
        path,
        offset,
        kind,
        index,
        read_as,
    } = e;
    let record = move |kind| RecordError {
        path,
        offset,
        kind,
        index,
        read_as,
    };
    match kind {
        // The error is shared only if it was cloned on the way: the record
        // error is kept then.
        ErrorKind::Io {
            kind: io_kind,
            source,
        } if source
            .get_ref()
            .is_some_and(|inner| inner.is::<SourceError>()) =>
        {
            match std::sync::Arc::try_unwrap(source) {
                Ok(io) => match io.into_inner().map(|inner| inner.downcast::<SourceError>()) {
                    Some(Ok(source)) => Ok(*source),
                    // Not reached (checked by the guard); kept as an I/O error.
                    Some(Err(inner)) => Err(record(ErrorKind::Io {
                        kind: io_kind,
                        source: std::sync::Arc::new(std::io::Error::new(io_kind, inner)),
                    })),
                    None => Err(record(ErrorKind::Io {
                        kind: io_kind,
                        source: std::sync::Arc::new(std::io::Error::from(io_kind)),
                    })),
                },
                Err(shared) => Err(record(ErrorKind::Io {
                    kind: io_kind,
                    source: shared,
                })),
            }
        }
        kind => Err(record(kind)),
    }
}

/// Where a record sits in its file besides its byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordIndex {
    /// How many records of the file come before it.
    pub index: u64,
    /// The file's compression: for a compressed file the offset counts
    /// the uncompressed stream.
    pub compression: Compression,
}

/// `record 7 at byte 984 [of the uncompressed stream]`, or `record at byte 984`.
struct RecordPlace<'a>(u64, &'a Option<RecordIndex>);

impl fmt::Display for RecordPlace<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(r) => {
                write!(f, "record {} at byte {}", r.index, self.0)?;
                if r.compression != Compression::None {
                    f.write_str(" of the uncompressed stream")?;
                }
                Ok(())
            }
            None => write!(f, "record at byte {}", self.0),
        }
    }
}

/// `FILE: record 7 at byte 984`.
struct Place<'a>(&'a str, u64, &'a Option<RecordIndex>);

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0, RecordPlace(self.1, self.2))
    }
}

/// A parse error without its position in the batch (the place says where).
struct ParseDetail<'a>(&'a crate::example::ParseError);

impl fmt::Display for ParseDetail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.feature {
            Some(name) => write!(f, "feature {name:?}: {}", self.0.kind),
            None => write!(f, "not a tf.train.Example: {}", self.0.kind),
        }
    }
}

/// A batch error without its position in the batch.
struct BatchDetail<'a>(&'a crate::batch::BatchError);

impl fmt::Display for BatchDetail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.feature {
            Some(name) => write!(f, "feature {name:?}: {}", self.0.kind),
            None => write!(f, "{}", self.0.kind),
        }
    }
}

impl PipelineError {
    /// Fills in the index in its file of the record a data error names,
    /// which the pipeline does not carry: found by reading the file's
    /// framing up to the record (`find`), once, on this error path.
    pub(crate) fn with_record_index(
        mut self,
        find: impl FnOnce(&str, u64) -> Option<RecordIndex>,
    ) -> Self {
        #[cfg(feature = "images")]
        if let PipelineError::Image {
            path, offset, at, ..
        } = &mut self
            && at.is_none()
        {
            *at = find(path, *offset);
            return self;
        }
        if let PipelineError::Parse {
            path, offset, at, ..
        }
        | PipelineError::Batch {
            path, offset, at, ..
        }
        | PipelineError::Length {
            path, offset, at, ..
        }
        | PipelineError::Map {
            path, offset, at, ..
        } = &mut self
            && at.is_none()
        {
            *at = find(path, *offset);
        }
        self
    }
}

/// Why a saved pipeline state cannot be restored (see
/// [`checkpoint`](super::checkpoint) for what a state holds).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The state is shorter than its header says: cut short when written
    /// or copied.
    #[error("it is truncated: {found} bytes, its header says {expected}")]
    Truncated { found: usize, expected: usize },
    /// The bytes are not a state, or were damaged (checksum mismatch).
    #[error("it is corrupt: {0}")]
    Corrupt(String),
    /// Written by a newer infeed, in a format this build cannot read.
    #[error(
        "it is in state format {found}, newer than this build reads ({supported}): \
         restore it with the infeed that wrote it, or a newer one"
    )]
    NewerFormat { found: u32, supported: u32 },
    /// Taken from another pipeline: its files, seed or a setting that
    /// decides the order of records differ.
    #[error(
        "it was taken from a different pipeline (fingerprint {found:08x}, this pipeline's \
         is {expected:08x}): the files, seed or a setting that decides the order of \
         records differ"
    )]
    OtherPipeline { found: u32, expected: u32 },
    /// A field is out of range for this pipeline.
    #[error("its {field} is {value}: {reason}")]
    Invalid {
        field: &'static str,
        value: u64,
        reason: String,
    },
    /// Written by an older infeed in a format this build no longer reads.
    #[error(
        "it is in state format {found}, which this build no longer reads (it reads format \
         {supported}, a tree of per-op parts with a fingerprint of steps in order): restore it \
         with the infeed that wrote it, or start the run again"
    )]
    OldFormat { found: u32, supported: u32 },
    /// One op's part is missing, of another version, does not decode, or
    /// belongs to no op of this pipeline.
    #[error("its part {part} is wrong: {reason}")]
    Part { part: String, reason: String },
    /// The logical streams it holds do not fit this pipeline's: another
    /// stream count, a stream this host needs and the state lacks, or
    /// states from different steps merged.
    #[error("{0}")]
    Streams(String),
    /// A position it names holds no record (the data changed since).
    #[error("{path} has no record at byte {offset} (was the file changed?)")]
    NoRecord { path: String, offset: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ErrorKind;
    use crate::source::SourceError;

    /// A read failure that came through a shard reader's `std::io::Read`
    /// reaches the user as the typed `SourceError` it wraps; other I/O
    /// errors stay record errors.
    #[test]
    fn a_wrapped_source_error_is_handed_on_typed() {
        let read = SourceError::Read {
            url: "gs://b/shard".into(),
            offset: 1234,
            message: "503".into(),
            retries: 2,
            source: None,
        };
        let record = RecordError::new("gs://b/shard", 1000, ErrorKind::from_io(read.into()));
        match PipelineError::from(record) {
            PipelineError::Source(SourceError::Read {
                url,
                offset,
                retries,
                ..
            }) => assert_eq!((url.as_str(), offset, retries), ("gs://b/shard", 1234, 2)),
            other => panic!("{other:?}"),
        }
        let plain = RecordError::new("f", 7, ErrorKind::from_io(std::io::Error::other("disk")));
        assert!(matches!(
            PipelineError::from(plain),
            PipelineError::Record(RecordError { offset: 7, .. })
        ));
        // Shared (cloned on the way): kept as the record error.
        let kind = ErrorKind::from_io(SourceError::NotFound { url: "x".into() }.into());
        let _clone = kind.clone();
        assert!(matches!(
            PipelineError::from(RecordError::new("x", 0, kind)),
            PipelineError::Record(_)
        ));
    }
}
