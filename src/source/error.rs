//! Typed errors of the source layer: each names the URL (and the byte offset
//! when reading), so a failing shard can be found and retried by hand.

/// The error a failure came from (object_store's, or std's for local files).
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error finding or reading shards.
///
/// New variants may be added; match with a `_` arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The URL or pattern cannot be used: unknown scheme, missing bucket, a
    /// wildcard where none is allowed, a cloud URL in a build without the
    /// `cloud` feature, or a client that cannot be configured from it.
    #[error("{url}: bad URL: {reason}")]
    BadUrl {
        /// The URL or pattern as given.
        url: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// A glob matched no object. An empty glob is an error, not an empty
    /// dataset: it is almost always a typo.
    #[error("{pattern}: no shard matches")]
    NoMatch {
        /// The pattern as given.
        pattern: String,
    },
    /// A single object (a URL without wildcards) does not exist.
    #[error("{url}: no such object")]
    NotFound {
        /// The URL as given.
        url: String,
    },
    /// The store cannot be reached or refuses us: a missing bucket, a refused
    /// connection, a failed name lookup, bad credentials or no permission.
    #[error("{url}: unreachable: {message}")]
    Unreachable {
        /// The URL or pattern being resolved.
        url: String,
        /// What the store (or the network) said, on one line.
        message: String,
        /// The error it came from, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// Reading a shard failed, after `retries` retries (or at once for an
    /// error that retrying cannot fix).
    #[error("{url}: byte {offset}: read failed after {retries} retries: {message}")]
    Read {
        /// The shard.
        url: String,
        /// The first byte that could not be read.
        offset: u64,
        /// What the last attempt failed with.
        message: String,
        /// Retries made for this byte range before giving up.
        retries: u32,
        /// The error of the last attempt, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The shard is shorter than its listed size: it changed while being read.
    #[error("{url}: byte {offset}: the object ended before its listed size {size}")]
    Truncated {
        /// The shard.
        url: String,
        /// Where the data ended.
        offset: u64,
        /// The size the listing (or HEAD) gave.
        size: u64,
    },
    /// The object was replaced while being read: a response came from
    /// another version (another ETag) than the shard's first response, so
    /// its bytes would mix two versions.
    #[error(
        "{url}: byte {offset}: the object changed while being read (ETag {first} at the \
         first read, {now} here); not mixing two versions of it"
    )]
    Changed {
        /// The shard.
        url: String,
        /// The first byte of the response from the other version.
        offset: u64,
        /// The ETag of the shard's first response.
        first: String,
        /// The ETag of this response.
        now: String,
    },
    /// A read was asked to start past the end of the shard.
    #[error("{url}: start offset {offset} is past the end of the shard ({size} bytes)")]
    BadOffset {
        /// The shard.
        url: String,
        /// The requested start.
        offset: u64,
        /// The shard's size.
        size: u64,
    },
}

impl SourceError {
    /// The URL (or pattern) the error is about.
    pub fn url(&self) -> &str {
        match self {
            SourceError::BadUrl { url, .. }
            | SourceError::NotFound { url }
            | SourceError::Unreachable { url, .. }
            | SourceError::Read { url, .. }
            | SourceError::Truncated { url, .. }
            | SourceError::Changed { url, .. }
            | SourceError::BadOffset { url, .. } => url,
            SourceError::NoMatch { pattern } => pattern,
        }
    }

    /// The byte offset the error happened at, for read errors.
    pub fn offset(&self) -> Option<u64> {
        match self {
            SourceError::Read { offset, .. }
            | SourceError::Truncated { offset, .. }
            | SourceError::Changed { offset, .. }
            | SourceError::BadOffset { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// A local file's I/O error at `url`: missing, or unreachable.
    pub(crate) fn local_io(url: &str, e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::NotFound => SourceError::NotFound {
                url: url.to_owned(),
            },
            _ => SourceError::Unreachable {
                url: url.to_owned(),
                message: e.to_string(),
                source: Some(Box::new(e)),
            },
        }
    }

    pub(crate) fn bad_url(url: &str, reason: impl Into<String>) -> Self {
        SourceError::BadUrl {
            url: url.to_owned(),
            reason: reason.into(),
        }
    }
}

impl From<SourceError> for std::io::Error {
    fn from(e: SourceError) -> Self {
        let kind = match &e {
            SourceError::NotFound { .. } | SourceError::NoMatch { .. } => {
                std::io::ErrorKind::NotFound
            }
            SourceError::BadUrl { .. } | SourceError::BadOffset { .. } => {
                std::io::ErrorKind::InvalidInput
            }
            SourceError::Truncated { .. } => std::io::ErrorKind::UnexpectedEof,
            SourceError::Unreachable { .. }
            | SourceError::Read { .. }
            | SourceError::Changed { .. } => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, e)
    }
}
