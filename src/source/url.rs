//! Splitting a shard URL (or a plain path) into the store it lives in and the
//! key inside it, without percent-decoding or normalising anything: the user's
//! spelling is kept so that shard names in errors and listings are theirs.

use super::error::SourceError;
use super::glob;

/// Which kind of store a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// A local path, or a `file://` URL.
    Local,
    /// `gs://bucket/key`.
    Gcs,
    /// `s3://bucket/key` (also `s3a://`).
    S3,
    /// `az://container/key`, `azure://`, `adl://`, `abfs[s]://container@account.dfs.core.windows.net/key`.
    Azure,
    /// `http://host/path` or `https://…`: single objects only (no listing).
    Http,
}

/// A parsed URL: the store (`base`) and the key inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub scheme: Scheme,
    /// `scheme://authority` for cloud stores (the client cache key); `""`
    /// for a plain local path; `"file://"` for a `file://` URL.
    pub base: String,
    /// The object key (no leading `/`) for cloud stores; the filesystem path
    /// as written for local ones (for `file:///a/b`: `/a/b`).
    pub key: String,
}

impl Parsed {
    /// Parses a URL or a local path.
    pub fn new(url: &str) -> Result<Parsed, SourceError> {
        if url.is_empty() {
            return Err(SourceError::bad_url(url, "empty URL"));
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Ok(Parsed {
                scheme: Scheme::Local,
                base: String::new(),
                key: url.to_owned(),
            });
        };
        let scheme_lower = scheme.to_ascii_lowercase();
        let kind = match scheme_lower.as_str() {
            "file" => Scheme::Local,
            "gs" => Scheme::Gcs,
            "s3" | "s3a" => Scheme::S3,
            "az" | "azure" | "adl" | "abfs" | "abfss" => Scheme::Azure,
            "http" | "https" => Scheme::Http,
            _ => {
                return Err(SourceError::bad_url(
                    url,
                    format!(
                        "unknown scheme {scheme:?}: use a local path, file://, gs://, s3://, az://, abfs[s]:// or http(s)://"
                    ),
                ));
            }
        };
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        if kind == Scheme::Local {
            // file:///abs/path (empty authority) or file://localhost/abs/path.
            if !(authority.is_empty() || authority.eq_ignore_ascii_case("localhost")) {
                return Err(SourceError::bad_url(
                    url,
                    "a file:// URL must name a local absolute path (file:///path)",
                ));
            }
            if key.is_empty() {
                return Err(SourceError::bad_url(url, "no path"));
            }
            return Ok(Parsed {
                scheme: kind,
                base: "file://".to_owned(),
                key: format!("/{key}"),
            });
        }
        if authority.is_empty() {
            return Err(SourceError::bad_url(
                url,
                "no bucket (or container, or host)",
            ));
        }
        if glob::has_wildcard(authority) {
            return Err(SourceError::bad_url(
                url,
                "wildcards are only allowed in the object path, not the bucket",
            ));
        }
        Ok(Parsed {
            scheme: kind,
            base: format!("{scheme}://{authority}"),
            key: key.to_owned(),
        })
    }

    /// The URL of `key` in this store, spelled like the pattern was.
    pub fn url_of(&self, key: &str) -> String {
        match self.scheme {
            Scheme::Local => format!("{}{key}", self.base),
            _ => format!("{}/{key}", self.base),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> (Scheme, String, String) {
        let p = Parsed::new(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        (p.scheme, p.base, p.key)
    }

    #[test]
    fn schemes_bases_and_keys() {
        assert_eq!(
            parse("gs://b/lm/train-*.tfrecord"),
            (Scheme::Gcs, "gs://b".into(), "lm/train-*.tfrecord".into())
        );
        assert_eq!(
            parse("s3://bk/x"),
            (Scheme::S3, "s3://bk".into(), "x".into())
        );
        assert_eq!(
            parse("s3a://bk/x"),
            (Scheme::S3, "s3a://bk".into(), "x".into())
        );
        assert_eq!(
            parse("az://c/d/e"),
            (Scheme::Azure, "az://c".into(), "d/e".into())
        );
        assert_eq!(
            parse("abfss://c@acct.dfs.core.windows.net/d"),
            (
                Scheme::Azure,
                "abfss://c@acct.dfs.core.windows.net".into(),
                "d".into()
            )
        );
        assert_eq!(
            parse("http://127.0.0.1:8/a/b"),
            (Scheme::Http, "http://127.0.0.1:8".into(), "a/b".into())
        );
        assert_eq!(parse("gs://b"), (Scheme::Gcs, "gs://b".into(), "".into()));
        assert_eq!(
            parse("rel/x.tfrecord"),
            (Scheme::Local, "".into(), "rel/x.tfrecord".into())
        );
        assert_eq!(parse("/abs/x"), (Scheme::Local, "".into(), "/abs/x".into()));
        assert_eq!(
            parse("file:///abs/x"),
            (Scheme::Local, "file://".into(), "/abs/x".into())
        );
        assert_eq!(
            parse("file://localhost/abs/x"),
            (Scheme::Local, "file://".into(), "/abs/x".into())
        );
    }

    #[test]
    fn url_of_keeps_the_spelling() {
        let p = Parsed::new("gs://b/lm/*").unwrap();
        assert_eq!(p.url_of("lm/a"), "gs://b/lm/a");
        let p = Parsed::new("file:///x/*").unwrap();
        assert_eq!(p.url_of("/x/a"), "file:///x/a");
        let p = Parsed::new("rel/*").unwrap();
        assert_eq!(p.url_of("rel/a"), "rel/a");
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, reason) in [
            ("", "empty URL"),
            ("ftp://h/x", "unknown scheme"),
            ("gs:///x", "no bucket"),
            ("s3://buck*/x", "not the bucket"),
            ("file://host/x", "local absolute path"),
            ("file:///", "no path"),
        ] {
            match Parsed::new(url) {
                Err(SourceError::BadUrl { url: u, reason: r }) => {
                    assert_eq!(u, url);
                    assert!(r.contains(reason), "{url}: {r}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }
}
