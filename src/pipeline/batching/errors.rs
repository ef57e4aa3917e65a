//! Errors placed at the file and offset of the record they name.

use crate::batch::BatchError;
use crate::pipeline::error::PipelineError;
use crate::pipeline::group::raw_batch::RawBatch;
use crate::pipeline::parsed::OpError;

/// A batch error, placed at the file and offset of the record it names.
pub(super) fn batch_error(raw: &RawBatch, error: BatchError) -> PipelineError {
    let (path, offset) = raw.origin(error.record.unwrap_or(0));
    PipelineError::Batch {
        path: path.to_owned(),
        offset,
        at: None,
        error,
    }
}

/// A parse error, placed at the file and offset of the record it names.
pub(super) fn parse_error(raw: &RawBatch, error: crate::example::ParseError) -> PipelineError {
    let (path, offset) = raw.origin(error.record);
    PipelineError::Parse {
        path: path.to_owned(),
        offset,
        at: None,
        error,
    }
}

/// A parsed op's failure, placed at the batch's first record.
pub(super) fn map_error(raw: &RawBatch, error: OpError) -> PipelineError {
    let (path, offset) = raw.origin(0);
    let message = match error {
        OpError::Map(e) => e.to_string(),
        OpError::Count { before, after } => format!(
            "it returned {after} records for {before}: a map must keep every record \
             (filter_rows drops records)"
        ),
    };
    PipelineError::Map {
        path: path.to_owned(),
        offset,
        at: None,
        message,
    }
}
