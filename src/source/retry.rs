//! What a failed cloud request means, and the retry loop for metadata
//! requests (HEAD, one LIST page). Range reads have their own loop in
//! `read.rs` (it resumes at the byte), with the same classes and backoff.

use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::SourceOptions;
use super::backoff::wait_before_retry;
use super::error::BoxError;
use super::retry_after::retry_after_in;
use super::stats::ReadStats;

/// How a failed object_store request should be handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// 404: the object (or, for a listing, the bucket) does not exist.
    NotFound,
    /// 401/403: credentials are missing or lack permission.
    Denied,
    /// The connection could not be made (refused, DNS, TLS handshake).
    Connect,
    /// 5xx, 408, 429, resets, timeouts, cut bodies: worth retrying (after
    /// the answer's `Retry-After`, when it has one).
    Transient,
    /// Anything retrying will not fix (other 4xx, precondition, bad path).
    Permanent,
    /// A failure with no HTTP status and no known network error kind:
    /// retried only with [`SourceOptions::retry_unknown_errors`].
    Unknown,
}

impl Class {
    /// Whether a failure of this class is worth a retry under `opts`.
    pub fn retryable(self, opts: &SourceOptions) -> bool {
        match self {
            Class::Transient | Class::Connect => true,
            Class::Unknown => opts.retry_unknown_errors,
            Class::NotFound | Class::Denied | Class::Permanent => false,
        }
    }
}

/// Whether a retry that waits `wait` first still starts within
/// [`SourceOptions::retry_timeout`] of the request's first failure (at
/// `first_failure`).
pub(crate) fn within_deadline(
    opts: &SourceOptions,
    first_failure: Instant,
    wait: Duration,
) -> bool {
    opts.retry_timeout
        .is_none_or(|deadline| first_failure.elapsed() + wait <= deadline)
}

/// The words of an error whose retries stopped at the deadline.
pub(crate) fn past_deadline(opts: &SourceOptions, message: String) -> String {
    match opts.retry_timeout {
        Some(deadline) => format!("{message} (no retry after the retry deadline of {deadline:?})"),
        None => message,
    }
}

/// Logs a retry about to be made (at `warn`, through `tracing`): what is
/// retried, where, the how-many-th retry, the wait before it and the error.
pub(crate) fn log_retry(url: &str, offset: Option<u64>, attempt: u32, wait: Duration, error: &str) {
    tracing::warn!(
        url,
        offset,
        attempt,
        wait_ms = wait.as_millis() as u64,
        error,
        "infeed: retrying a cloud request"
    );
}

/// One failed attempt: its class, its message on one line, and the error
/// it came from (none for a timeout or a cut body, which are ours).
#[derive(Debug)]
pub(crate) struct Failure {
    pub class: Class,
    pub message: String,
    pub source: Option<BoxError>,
    /// The wait the answer asked for (`Retry-After`), if it did.
    pub retry_after: Option<std::time::Duration>,
}

impl Failure {
    /// A failure object_store reported.
    pub fn from_store(e: object_store::Error) -> Failure {
        Failure {
            class: classify(&e),
            message: one_line(&e.to_string()),
            retry_after: retry_after_in(&e),
            source: Some(Box::new(e)),
        }
    }

    /// A failure infeed saw itself (a timeout, a short body): retried.
    pub fn transient(message: String) -> Failure {
        Failure {
            class: Class::Transient,
            message,
            source: None,
            retry_after: None,
        }
    }
}

/// The class of an object_store error, from its type: the `Error` variant
/// object_store chose from the HTTP status (404 → `NotFound`, 401/403 →
/// `Unauthenticated`/`PermissionDenied`, 412 → `Precondition`, …), then
/// the kind of an [`HttpError`](object_store::client::HttpError) among its
/// sources (connect, timeout, interrupted body).
pub(crate) fn classify(e: &object_store::Error) -> Class {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => Class::NotFound,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Class::Denied,
        E::Precondition { .. }
        | E::NotModified { .. }
        | E::InvalidPath { .. }
        | E::NotSupported { .. }
        | E::NotImplemented { .. }
        | E::UnknownConfigurationKey { .. }
        | E::AlreadyExists { .. } => Class::Permanent,
        _ => classify_chain(e),
    }
}

/// Looks through an error's sources for object_store's `HttpError` (whose
/// kind says whether the connection was made) and, failing that, for an
/// HTTP status.
fn classify_chain(e: &(dyn std::error::Error + 'static)) -> Class {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(http) = err.downcast_ref::<HttpError>() {
            return match http.kind() {
                HttpErrorKind::Connect => Class::Connect,
                // reqwest refused to build the request: configuration (e.g. a
                // plain http:// endpoint without allow_http), not the network.
                HttpErrorKind::Unknown if http.to_string().contains("builder error") => {
                    Class::Permanent
                }
                HttpErrorKind::Unknown => Class::Unknown,
                _ => Class::Transient,
            };
        }
        if let Some(status) = status_in(&err.to_string()) {
            return match status {
                408 | 429 => Class::Transient,
                401 | 403 => Class::Denied,
                404 => Class::NotFound,
                400..=499 => Class::Permanent,
                500..=599 => Class::Transient,
                _ => Class::Unknown,
            };
        }
        cur = err.source();
    }
    Class::Unknown
}

/// The status of an answer object_store did not map to an `Error` variant
/// (5xx, 429, and any status of a LIST request, which it reports as
/// `Generic`): its `RetryError`, the one type that holds the status, lives
/// in a private module (`object_store::client::retry`), so the status is
/// read from its message, "… status code: 503 Service Unavailable …".
fn status_in(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("status code: ")?;
    let digits = rest.get(..3)?;
    digits.parse().ok()
}

/// Retries of a metadata request that cannot connect at all: a refused
/// connection or an unknown host on a HEAD or LIST is almost always a wrong
/// endpoint, so it fails fast instead of spending the whole retry budget.
const CONNECT_RETRIES_FOR_METADATA: u32 = 2;

/// Runs a metadata request (HEAD, one LIST page) on `url` with a timeout
/// per attempt and bounded retries with backoff, up to the retry deadline.
/// `Err` is the last failure.
pub(crate) async fn retry_meta<T, F, Fut>(
    opts: &SourceOptions,
    stats: &ReadStats,
    url: &str,
    mut attempt: F,
) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, object_store::Error>>,
{
    let mut failures = 0u32;
    let mut first_failure = None;
    loop {
        stats.requests.fetch_add(1, Relaxed);
        let mut failure = match tokio::time::timeout(opts.request_timeout, attempt()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => Failure::from_store(e),
            Err(_) => {
                stats.timeouts.fetch_add(1, Relaxed);
                Failure::transient(format!("no answer within {:?}", opts.request_timeout))
            }
        };
        let first_failure = *first_failure.get_or_insert_with(Instant::now);
        let budget = match failure.class {
            Class::Connect => opts.max_retries.min(CONNECT_RETRIES_FOR_METADATA),
            class if class.retryable(opts) => opts.max_retries,
            _ => return Err(failure),
        };
        if failures >= budget {
            return Err(failure);
        }
        let wait = wait_before_retry(opts, failures + 1, failure.retry_after);
        if !within_deadline(opts, first_failure, wait) {
            failure.message = past_deadline(opts, failure.message);
            return Err(failure);
        }
        failures += 1;
        stats.retries.fetch_add(1, Relaxed);
        log_retry(url, None, failures, wait, &failure.message);
        tokio::time::sleep(wait).await;
    }
}

/// An error message on one line, at most 1000 bytes: object_store quotes
/// whole (XML) response bodies, which would otherwise span many lines.
pub(crate) fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(1000));
    if message.contains("builder error") {
        out.push_str(
            "the HTTP client refused the request (an http:// endpoint needs allow_http, e.g. AWS_ALLOW_HTTP=true):",
        );
    }
    for word in message.split_whitespace() {
        if out.len() + word.len() + 1 > 1000 {
            out.push_str(" …");
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_put_on_one_bounded_line() {
        assert_eq!(one_line("a\n  <b>\n\tc  "), "a <b> c");
        let long = "word ".repeat(1000);
        let short = one_line(&long);
        assert!(short.len() <= 1004, "{}", short.len());
        assert!(short.ends_with(" …"));
    }

    #[test]
    fn status_is_found_in_object_store_messages() {
        assert_eq!(
            status_in(
                "Error performing GET http://x in 1ms - Server returned non-2xx status code: 503 Service Unavailable: "
            ),
            Some(503)
        );
        assert_eq!(status_in("no status here"), None);
        assert_eq!(status_in("status code: 4"), None);
    }

    #[test]
    fn unclassifiable_failures_are_retried_only_when_asked() {
        let generic = object_store::Error::Generic {
            store: "x",
            source: Box::new(std::io::Error::other("something odd")),
        };
        assert_eq!(classify(&generic), Class::Unknown);
        let opts = SourceOptions::default();
        assert!(!Class::Unknown.retryable(&opts));
        assert!(Class::Unknown.retryable(&opts.clone().retry_unknown_errors(true)));
        assert!(Class::Transient.retryable(&opts) && Class::Connect.retryable(&opts));
        assert!(!Class::Permanent.retryable(&opts.clone().retry_unknown_errors(true)));
        let status = |code: &str| object_store::Error::Generic {
            store: "x",
            source: Box::new(std::io::Error::other(format!(
                "Server returned non-2xx status code: {code}"
            ))),
        };
        assert_eq!(
            classify(&status("503 Service Unavailable")),
            Class::Transient
        );
        assert_eq!(classify(&status("429 Too Many Requests")), Class::Transient);
        assert_eq!(classify(&status("418 I'm a teapot")), Class::Permanent);
        assert_eq!(classify(&status("302 Found")), Class::Unknown);
    }

    #[test]
    fn no_retry_starts_past_the_deadline() {
        let first = Instant::now();
        let opts = SourceOptions::default();
        assert!(within_deadline(&opts, first, Duration::from_secs(3600)));
        let opts = opts.retry_timeout(Duration::from_secs(10));
        assert!(within_deadline(&opts, first, Duration::from_secs(1)));
        assert!(!within_deadline(&opts, first, Duration::from_secs(11)));
        let opts = opts.retry_timeout(Duration::ZERO);
        assert!(!within_deadline(&opts, first, Duration::from_millis(1)));
        assert!(past_deadline(&opts, "503".into()).contains("retry deadline"));
    }

    #[test]
    fn object_store_variants_are_classified_by_type() {
        let source = || Box::new(std::io::Error::other("x")) as BoxError;
        let not_found = object_store::Error::NotFound {
            path: "p".into(),
            source: source(),
        };
        assert_eq!(classify(&not_found), Class::NotFound);
        let denied = object_store::Error::PermissionDenied {
            path: "p".into(),
            source: source(),
        };
        assert_eq!(classify(&denied), Class::Denied);
        let precondition = object_store::Error::Precondition {
            path: "p".into(),
            source: source(),
        };
        assert_eq!(classify(&precondition), Class::Permanent);
        let failure = Failure::from_store(not_found);
        assert_eq!(failure.class, Class::NotFound);
        assert!(failure.source.is_some());
    }
}
