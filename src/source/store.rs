//! One client per (scheme, bucket), the I/O runtime every cloud request runs
//! on, and the retry loop for metadata requests (HEAD, LIST).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::runtime::Handle;

use super::error::SourceError;
use super::url::{Parsed, Scheme};
use super::{ReadStats, SourceOptions};

#[cfg(feature = "cloud")]
use object_store::{ObjectStore, list::PaginatedListStore};

/// The tokio runtime all source I/O runs on: a small multi-threaded runtime
/// owned by infeed, started on first use and kept for the life of the
/// process.
///
/// One runtime for every request keeps the cached HTTP clients valid (a
/// connection pool is tied to the runtime that opened its connections) and
/// keeps I/O moving while the caller's threads do CPU work. Streams returned
/// by [`super::read_chunks`] can be polled from any executor, or none.
pub fn io_runtime() -> Result<&'static Handle, SourceError> {
    static IO: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    let rt = IO.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("infeed-io")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });
    match rt {
        Ok(rt) => Ok(rt.handle()),
        Err(e) => Err(SourceError::Unreachable {
            url: String::new(),
            message: format!("cannot start the I/O runtime: {e}"),
        }),
    }
}

/// What a store holds: the local filesystem, or an object_store client.
pub(crate) enum Backend {
    /// Plain files through std (positional reads on the blocking pool).
    Local,
    /// A cloud (or HTTP) object store.
    #[cfg(feature = "cloud")]
    Cloud {
        /// Reads and HEADs.
        objects: Arc<dyn ObjectStore>,
        /// Listing by an arbitrary string prefix and `/` delimiter; `None`
        /// for stores that cannot list (plain HTTP).
        lister: Option<Arc<dyn PaginatedListStore>>,
    },
}

pub(crate) struct StoreInner {
    /// `scheme://authority` (or `""` / `"file://"` for local).
    pub base: String,
    pub scheme: Scheme,
    pub backend: Backend,
}

/// A handle on one store: the local filesystem, or one bucket (container,
/// HTTP host) with its client. Cheap to clone (an `Arc`).
///
/// [`Store::for_url`] caches one store per (scheme, bucket), so every shard
/// of a bucket shares one connection pool.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<StoreInner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("base", &self.inner.base)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// The store for `url` (a local path, `file://`, `gs://`, `s3://`,
    /// `az://`, `abfs[s]://`, `http(s)://`), configured from the environment
    /// the usual way, shared with every other URL of the same bucket.
    ///
    /// Credentials and endpoints come from object_store's `from_env`
    /// builders: `GOOGLE_SERVICE_ACCOUNT` (a key file path),
    /// `GOOGLE_SERVICE_ACCOUNT_KEY` (the JSON itself),
    /// `GOOGLE_APPLICATION_CREDENTIALS`; `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT`,
    /// `AWS_ALLOW_HTTP`, …; `AZURE_STORAGE_ACCOUNT_NAME`,
    /// `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_USE_EMULATOR`, ….
    /// Building a client makes no request.
    pub fn for_url(url: &str) -> Result<Store, SourceError> {
        let parsed = Parsed::new(url)?;
        if parsed.scheme == Scheme::Local {
            return Ok(Store::local(&parsed.base));
        }
        static CACHE: OnceLock<Mutex<HashMap<String, Store>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        // A poisoned lock only means another thread panicked while inserting;
        // the map itself is still consistent.
        let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = map.get(&parsed.base) {
            return Ok(store.clone());
        }
        let store = Store::build(url, &parsed, &[])?;
        map.insert(parsed.base.clone(), store.clone());
        Ok(store)
    }

    /// A new, uncached store for `url`'s bucket: configured from the
    /// environment, then from `config`, whose keys are object_store's
    /// configuration keys for that cloud (`google_service_account_key`,
    /// `aws_endpoint`, `azure_storage_account_key`, `allow_http`, …).
    ///
    /// Use it for explicit credentials, or for tests that point one bucket at
    /// a particular endpoint.
    pub fn with_config(url: &str, config: &[(&str, &str)]) -> Result<Store, SourceError> {
        let parsed = Parsed::new(url)?;
        if parsed.scheme == Scheme::Local {
            if let Some((key, _)) = config.first() {
                return Err(SourceError::bad_url(
                    url,
                    format!("local files take no configuration (got {key:?})"),
                ));
            }
            return Ok(Store::local(&parsed.base));
        }
        Store::build(url, &parsed, config)
    }

    fn local(base: &str) -> Store {
        Store {
            inner: Arc::new(StoreInner {
                base: base.to_owned(),
                scheme: Scheme::Local,
                backend: Backend::Local,
            }),
        }
    }

    /// `scheme://bucket` of a cloud store; `""` (plain paths) or `"file://"`
    /// for the local filesystem.
    pub fn base(&self) -> &str {
        &self.inner.base
    }

    /// The object_store client of a cloud store (`None` for local files):
    /// for writers such as `infeed convert`'s cloud output.
    #[cfg(feature = "cloud")]
    pub fn object_store(&self) -> Option<Arc<dyn ObjectStore>> {
        match &self.inner.backend {
            Backend::Local => None,
            Backend::Cloud { objects, .. } => Some(objects.clone()),
        }
    }

    /// Parses `url` and checks that it lives in this store.
    pub(crate) fn parse_own(&self, url: &str) -> Result<Parsed, SourceError> {
        let parsed = Parsed::new(url)?;
        let same = match (self.inner.scheme, parsed.scheme) {
            (Scheme::Local, Scheme::Local) => true,
            (a, b) => a == b && parsed.base == self.inner.base,
        };
        if !same {
            return Err(SourceError::bad_url(
                url,
                format!("not in this store ({})", self.inner.base),
            ));
        }
        Ok(parsed)
    }

    #[cfg(not(feature = "cloud"))]
    fn build(url: &str, _parsed: &Parsed, _config: &[(&str, &str)]) -> Result<Store, SourceError> {
        Err(SourceError::bad_url(
            url,
            "cloud URLs need infeed built with the `cloud` feature",
        ))
    }

    #[cfg(feature = "cloud")]
    fn build(url: &str, parsed: &Parsed, config: &[(&str, &str)]) -> Result<Store, SourceError> {
        let backend = cloud::build(url, parsed, config)?;
        Ok(Store {
            inner: Arc::new(StoreInner {
                base: parsed.base.clone(),
                scheme: parsed.scheme,
                backend,
            }),
        })
    }

    /// Lists the shards matching `pattern` (one pattern, in this store); see
    /// [`super::list_shards`]. Counts requests and listed entries in `stats`.
    pub async fn list(
        &self,
        pattern: &str,
        opts: &SourceOptions,
        stats: &Arc<ReadStats>,
    ) -> Result<Vec<super::ShardInfo>, SourceError> {
        let store = self.clone();
        let pattern = pattern.to_owned();
        let opts = opts.clone();
        let stats = stats.clone();
        let handle = io_runtime()?;
        let url = pattern.clone();
        handle
            .spawn(async move { super::list::list_one(&store, &pattern, &opts, &stats).await })
            .await
            .unwrap_or_else(|e| {
                Err(SourceError::Unreachable {
                    url,
                    message: format!("listing task failed: {e}"),
                })
            })
    }

    /// The shard at `url` (no wildcards) with its size, from a HEAD request
    /// (or `stat` for local files).
    pub async fn head(
        &self,
        url: &str,
        opts: &SourceOptions,
        stats: &Arc<ReadStats>,
    ) -> Result<super::ShardInfo, SourceError> {
        let store = self.clone();
        let url = url.to_owned();
        let opts = opts.clone();
        let stats = stats.clone();
        let handle = io_runtime()?;
        let u = url.clone();
        handle
            .spawn(async move { super::list::head_one(&store, &url, &opts, &stats).await })
            .await
            .unwrap_or_else(|e| {
                Err(SourceError::Unreachable {
                    url: u,
                    message: format!("HEAD task failed: {e}"),
                })
            })
    }
}

/// How a failed object_store request should be handled.
#[cfg(feature = "cloud")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// 404: the object (or, for a listing, the bucket) does not exist.
    NotFound,
    /// 401/403: credentials are missing or lack permission.
    Denied,
    /// The connection could not be made (refused, DNS, TLS handshake).
    Connect,
    /// 5xx, 408, 429, resets, timeouts, cut bodies: worth retrying.
    Transient,
    /// Anything retrying will not fix (other 4xx, precondition, bad path).
    Permanent,
}

#[cfg(feature = "cloud")]
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
/// kind says whether the connection was made) and for the HTTP status that
/// object_store only exposes in its message.
#[cfg(feature = "cloud")]
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
                _ => Class::Transient,
            };
        }
        if let Some(status) = status_in(&err.to_string()) {
            return match status {
                408 | 429 => Class::Transient,
                401 | 403 => Class::Denied,
                404 => Class::NotFound,
                400..=499 => Class::Permanent,
                _ => Class::Transient,
            };
        }
        cur = err.source();
    }
    Class::Transient
}

/// The status in object_store's "… status code: 503 Service Unavailable …".
#[cfg(feature = "cloud")]
fn status_in(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("status code: ")?;
    let digits = rest.get(..3)?;
    digits.parse().ok()
}

/// Retries of a metadata request that cannot connect at all: a refused
/// connection or an unknown host on a HEAD or LIST is almost always a wrong
/// endpoint, so it fails fast instead of spending the whole retry budget.
#[cfg(feature = "cloud")]
const CONNECT_RETRIES_FOR_METADATA: u32 = 2;

/// Runs a metadata request (HEAD, one LIST page) with a timeout per attempt
/// and bounded retries with backoff. `Err` carries the class of the last
/// failure and its message.
#[cfg(feature = "cloud")]
pub(crate) async fn retry_meta<T, F, Fut>(
    opts: &SourceOptions,
    stats: &ReadStats,
    mut attempt: F,
) -> Result<T, (Class, String)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, object_store::Error>>,
{
    use std::sync::atomic::Ordering::Relaxed;
    let mut failures = 0u32;
    loop {
        stats.requests.fetch_add(1, Relaxed);
        let (class, message) = match tokio::time::timeout(opts.request_timeout, attempt()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => (classify(&e), one_line(&e.to_string())),
            Err(_) => {
                stats.timeouts.fetch_add(1, Relaxed);
                (
                    Class::Transient,
                    format!("no answer within {:?}", opts.request_timeout),
                )
            }
        };
        let budget = match class {
            Class::Transient => opts.max_retries,
            Class::Connect => opts.max_retries.min(CONNECT_RETRIES_FOR_METADATA),
            _ => return Err((class, message)),
        };
        if failures >= budget {
            return Err((class, message));
        }
        failures += 1;
        stats.retries.fetch_add(1, Relaxed);
        tokio::time::sleep(backoff(opts, failures)).await;
    }
}

/// An error message on one line, at most 1000 bytes: object_store quotes
/// whole (XML) response bodies, which would otherwise span many lines.
#[cfg_attr(not(feature = "cloud"), allow(dead_code))]
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

/// The wait before retry number `n` (1-based): `retry_backoff · 2^(n-1)`,
/// capped at `max_backoff`, with "equal jitter" (a random point in the upper
/// half) so that many readers failing together do not retry together.
#[cfg_attr(not(feature = "cloud"), allow(dead_code))]
pub(crate) fn backoff(opts: &SourceOptions, n: u32) -> Duration {
    let base = opts.retry_backoff.as_secs_f64() * 2f64.powi(n.saturating_sub(1).min(30) as i32);
    let capped = base.min(opts.max_backoff.as_secs_f64()).max(0.0);
    Duration::from_secs_f64(capped * (0.5 + 0.5 * jitter()))
}

/// A number in [0, 1) from a cheap per-thread generator (splitmix64): jitter
/// needs no cryptographic or reproducible randomness.
#[cfg_attr(not(feature = "cloud"), allow(dead_code))]
fn jitter() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            t ^ (&t as *const u64 as u64)
        });
    }
    STATE.with(|s| {
        let mut z = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(z);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(feature = "cloud")]
mod cloud {
    //! Building object_store clients from a URL, the environment and
    //! explicit configuration.

    use std::sync::Arc;

    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
    use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
    use object_store::http::HttpBuilder;
    use object_store::{ClientConfigKey, RetryConfig};

    use super::super::error::SourceError;
    use super::super::url::{Parsed, Scheme};
    use super::Backend;

    /// No retries inside object_store: infeed retries itself, so that it can
    /// resume a range at the exact byte where the data stopped and count
    /// every retry.
    fn no_retry() -> RetryConfig {
        RetryConfig {
            max_retries: 0,
            ..RetryConfig::default()
        }
    }

    /// Client settings infeed needs (applied before the user's `config`, so
    /// the user can override them): no overall request timeout (infeed times
    /// each wait for data itself, so a long range read that keeps making
    /// progress is never cut), and a bounded connect timeout.
    const CLIENT_DEFAULTS: [(ClientConfigKey, &str); 2] = [
        (ClientConfigKey::Timeout, "1day"),
        (ClientConfigKey::ConnectTimeout, "10s"),
    ];

    pub(super) fn build(
        url: &str,
        parsed: &Parsed,
        config: &[(&str, &str)],
    ) -> Result<Backend, SourceError> {
        let bad = |e: object_store::Error| SourceError::bad_url(url, e.to_string());
        let key_err = |key: &str, e: object_store::Error| {
            SourceError::bad_url(url, format!("configuration key {key:?}: {e}"))
        };
        // The three bucket clients differ only in their builder and config
        // key types.
        macro_rules! bucket_backend {
            ($builder:ident, $key:ident) => {{
                let mut b = $builder::from_env()
                    .with_url(parsed.base.as_str())
                    .with_retry(no_retry());
                for (k, v) in CLIENT_DEFAULTS {
                    b = b.with_config($key::Client(k), v);
                }
                for (k, v) in config {
                    b = b.with_config(k.parse().map_err(|e| key_err(k, e))?, *v);
                }
                let s = Arc::new(b.build().map_err(bad)?);
                Ok(Backend::Cloud {
                    objects: s.clone(),
                    lister: Some(s),
                })
            }};
        }
        match parsed.scheme {
            Scheme::Gcs => bucket_backend!(GoogleCloudStorageBuilder, GoogleConfigKey),
            Scheme::S3 => bucket_backend!(AmazonS3Builder, AmazonS3ConfigKey),
            Scheme::Azure => bucket_backend!(MicrosoftAzureBuilder, AzureConfigKey),
            Scheme::Http => {
                let mut b = HttpBuilder::new()
                    .with_url(parsed.base.as_str())
                    .with_retry(no_retry());
                for (k, v) in CLIENT_DEFAULTS {
                    b = b.with_config(k, v);
                }
                if parsed.base.to_ascii_lowercase().starts_with("http://") {
                    // The user wrote http://: that is consent to plain HTTP.
                    b = b.with_config(ClientConfigKey::AllowHttp, "true");
                }
                for (k, v) in config {
                    b = b.with_config(k.parse().map_err(|e| key_err(k, e))?, *v);
                }
                let s = Arc::new(b.build().map_err(bad)?);
                Ok(Backend::Cloud {
                    objects: s,
                    lister: None,
                })
            }
            Scheme::Local => Err(SourceError::bad_url(url, "not a cloud URL")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let opts = SourceOptions {
            retry_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..SourceOptions::default()
        };
        for _ in 0..100 {
            let b1 = backoff(&opts, 1);
            assert!(
                b1 >= Duration::from_millis(50) && b1 <= Duration::from_millis(100),
                "{b1:?}"
            );
            let b3 = backoff(&opts, 3);
            assert!(
                b3 >= Duration::from_millis(200) && b3 <= Duration::from_millis(400),
                "{b3:?}"
            );
            let b20 = backoff(&opts, 20);
            assert!(
                b20 >= Duration::from_millis(500) && b20 <= Duration::from_secs(1),
                "{b20:?}"
            );
            let b_huge = backoff(&opts, u32::MAX);
            assert!(b_huge <= Duration::from_secs(1), "{b_huge:?}");
        }
    }

    #[test]
    fn messages_are_put_on_one_bounded_line() {
        assert_eq!(one_line("a\n  <b>\n\tc  "), "a <b> c");
        let long = "word ".repeat(1000);
        let short = one_line(&long);
        assert!(short.len() <= 1004, "{}", short.len());
        assert!(short.ends_with(" …"));
    }

    #[cfg(feature = "cloud")]
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

    #[cfg(feature = "cloud")]
    #[test]
    fn clients_are_cached_per_bucket_and_need_no_request() {
        let a = Store::for_url("s3://infeed-cache-test/a/x").unwrap();
        let b = Store::for_url("s3://infeed-cache-test/b/y").unwrap();
        let c = Store::for_url("s3://infeed-cache-test-2/a").unwrap();
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
        assert!(!Arc::ptr_eq(&a.inner, &c.inner));
        assert_eq!(a.base(), "s3://infeed-cache-test");
        match a.parse_own("s3://other/x") {
            Err(SourceError::BadUrl { url, .. }) => assert_eq!(url, "s3://other/x"),
            other => panic!("{other:?}"),
        }
    }

    #[cfg(feature = "cloud")]
    #[test]
    fn unknown_configuration_keys_are_bad_urls() {
        match Store::with_config("gs://b/x", &[("no_such_key", "1")]) {
            Err(SourceError::BadUrl { url, reason }) => {
                assert_eq!(url, "gs://b/x");
                assert!(reason.contains("no_such_key"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
