//! The client cache: one store (object_store client, or the local
//! filesystem) per (scheme, bucket), configured from the environment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::error::SourceError;
use super::url::{Parsed, Scheme};

#[cfg(feature = "cloud")]
use object_store::{ObjectStore, list::PaginatedListStore};

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
    /// The path of `url` on the local filesystem where this store is it
    /// (`None`: a cloud store's object).
    pub(crate) fn local_path(&self, url: &str) -> Result<Option<String>, SourceError> {
        let parsed = self.parse_own(url)?;
        Ok(matches!(self.inner.backend, Backend::Local).then_some(parsed.key))
    }

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
    use super::super::retry_after::RetryAfterConnector;
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
                    .with_retry(no_retry())
                    .with_http_connector(RetryAfterConnector);
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
                    .with_retry(no_retry())
                    .with_http_connector(RetryAfterConnector);
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

#[cfg(all(test, feature = "cloud"))]
mod tests {
    use super::*;

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
