//! What can go wrong with a tokenizer: [`TokenizerError`].

use crate::source::SourceError;

/// A tokenizer that cannot be read, loaded or used as asked; each names the
/// file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// The file could not be read.
    #[error("tokenizer {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: SourceError,
    },
    /// Reading failed part way.
    #[error("tokenizer {path}: {message}")]
    Io { path: String, message: String },
    /// Larger than any tokenizer: a wrong file.
    #[error("tokenizer {path}: larger than {max} bytes: not a tokenizer")]
    TooLarge { path: String, max: u64 },
    /// The library refused the file.
    #[error("tokenizer {path}: cannot load it as a {kind}: {message}")]
    Load {
        path: String,
        kind: &'static str,
        message: String,
    },
    /// A kind of tokenizer this build cannot run.
    #[error(
        "tokenizer {path} is a {kind}: this build of infeed cannot load one \
         (cargo feature `{feature}`)"
    )]
    Unsupported {
        path: String,
        kind: &'static str,
        feature: &'static str,
    },
    /// `add_bos` or `add_eos` with a tokenizer that has no such token.
    #[error("tokenizer {path} has no {which} token ({how}): tokenize without add_{short}")]
    NoSpecialToken {
        path: String,
        which: &'static str,
        short: &'static str,
        how: &'static str,
    },
    /// A token id that does not fit the int32 ids column.
    #[error("tokenizer {path}: token id {id} does not fit an int32")]
    IdTooLarge { path: String, id: u64 },
}
