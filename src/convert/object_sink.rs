//! Shards into a bucket: gs://, s3://, az:// through object_store.
//!
//! Each shard streams up as a multipart upload (object_store's buffered
//! writer: parts of a few MB, so a 100 MB shard never sits whole in memory),
//! under a temporary name; `commit` renames it (a server-side copy and a
//! delete). The calling threads are plain std threads, so they drive the
//! async client with `block_on` on infeed's I/O runtime.

use std::io::{self, Write};
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;
use tokio::runtime::Handle;

use super::sink::{ShardSink, ShardWrite};
use crate::source::{Store, io_runtime};

/// A bucket prefix (a "folder" of objects).
pub(super) struct ObjectSink {
    store: Arc<dyn ObjectStore>,
    /// `scheme://bucket`, for messages.
    base: String,
    /// The key prefix, without a trailing `/` (empty: the bucket's root).
    prefix: String,
    runtime: Handle,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl ObjectSink {
    /// A sink writing under `url` (e.g. `s3://bucket/datasets/lm`), with
    /// credentials from the environment as for reading.
    pub(super) fn new(url: &str) -> io::Result<Self> {
        let store = Store::for_url(url).map_err(io::Error::from)?;
        let objects = store.object_store().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{url} is not a bucket URL"),
            )
        })?;
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        Ok(ObjectSink {
            store: objects,
            base: format!("{scheme}://{bucket}"),
            prefix: key.trim_matches('/').to_owned(),
            runtime: io_runtime().map_err(io::Error::from)?.clone(),
        })
    }

    fn path(&self, name: &str) -> io::Result<Path> {
        if !super::sink::valid_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain object name"),
            ));
        }
        let key = if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.prefix)
        };
        Path::parse(&key).map_err(other)
    }
}

struct ObjectWrite {
    writer: Option<BufWriter>,
    runtime: Handle,
}

impl Write for ObjectWrite {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| other("write after close"))?;
        self.runtime.block_on(writer.write_all(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ShardWrite for ObjectWrite {
    fn close(mut self: Box<Self>) -> io::Result<()> {
        match self.writer.take() {
            Some(mut writer) => self.runtime.block_on(writer.shutdown()),
            None => Ok(()),
        }
    }
}

impl Drop for ObjectWrite {
    fn drop(&mut self) {
        // An upload dropped without close (an error elsewhere) is aborted,
        // so no partial object appears.
        if let Some(mut writer) = self.writer.take() {
            let _ = self.runtime.block_on(writer.abort());
        }
    }
}

impl ShardSink for ObjectSink {
    fn create(&self, name: &str) -> io::Result<Box<dyn ShardWrite>> {
        let writer = BufWriter::new(self.store.clone(), self.path(name)?);
        Ok(Box::new(ObjectWrite {
            writer: Some(writer),
            runtime: self.runtime.clone(),
        }))
    }

    fn commit(&self, temp: &str, name: &str) -> io::Result<()> {
        let (from, to) = (self.path(temp)?, self.path(name)?);
        match self.runtime.block_on(self.store.rename(&from, &to)) {
            Ok(()) => Ok(()),
            Err(e @ object_store::Error::NotFound { .. }) => {
                Err(io::Error::new(io::ErrorKind::NotFound, e.to_string()))
            }
            Err(e) => Err(other(e)),
        }
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match self.runtime.block_on(self.store.delete(&self.path(name)?)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(other(e)),
        }
    }

    fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        let folder = if self.prefix.is_empty() {
            None
        } else {
            Some(Path::parse(&self.prefix).map_err(other)?)
        };
        let objects: Vec<_> = self
            .runtime
            .block_on(self.store.list(folder.as_ref()).try_collect())
            .map_err(other)?;
        let skip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        Ok(objects
            .into_iter()
            .filter_map(|meta| meta.location.as_ref().get(skip..).map(str::to_owned))
            .filter(|name| !name.contains('/') && name.starts_with(prefix))
            .collect())
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        let path = self.path(name)?;
        let got = self.runtime.block_on(async {
            let result = self.store.get(&path).await?;
            result.bytes().await
        });
        match got {
            Ok(bytes) => Ok(Some(bytes.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(other(e)),
        }
    }

    fn location(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            format!("{}/{name}", self.base)
        } else {
            format!("{}/{}/{name}", self.base, self.prefix)
        }
    }
}
