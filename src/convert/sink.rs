//! Where shards go. A [`ShardSink`] writes each shard under a temporary
//! name and commits it under its final name at the end (an atomic rename on
//! a local disk; a completed multipart upload, or copy + delete, on an object
//! store), so a crashed or retried task never leaves a half-written shard
//! under a final name. [`LocalSink`] writes to a local folder; a cloud sink
//! (gs://, s3://, az://) implements the same trait.
//!
//! A name is a file name, or a folder's and a file's
//! (`.infeed-index/train-00000-of-00004.tfrecord.index`: shards' indexes go
//! one level down, out of reach of other readers' shard globs).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An object being written; bytes are durable once [`ShardWrite::close`] returns.
pub trait ShardWrite: Write + Send {
    /// Flushes and makes the object durable (fsync, or completes an upload).
    fn close(self: Box<Self>) -> io::Result<()>;
}

/// A place for shards: a folder or a bucket prefix. A name is a file's, or
/// a folder's and a file's (`.infeed-index/SHARD.index`: the folder is made
/// when something is written or committed into it).
pub trait ShardSink: Send + Sync {
    /// Starts writing the object `name` (replacing any object of that name).
    /// Used for temporary names only; see [`ShardSink::commit`].
    fn create(&self, name: &str) -> io::Result<Box<dyn ShardWrite>>;
    /// Atomically renames the closed object `temp` to `name`, replacing `name`.
    fn commit(&self, temp: &str, name: &str) -> io::Result<()>;
    /// Removes an object; a missing one is not an error.
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Names of the objects whose names start with `prefix`.
    fn list(&self, prefix: &str) -> io::Result<Vec<String>>;
    /// Writes a small object atomically (the manifest).
    fn put(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let temp = match name.rsplit_once('/') {
            Some((dir, file)) => format!("{dir}/.{file}.tmp"),
            None => format!(".{name}.tmp"),
        };
        let mut w = self.create(&temp)?;
        w.write_all(data)?;
        w.close()?;
        self.commit(&temp, name)
    }
    /// Where `name` is, for messages (a path or URL).
    /// The whole object `name`, or `None` when there is none (small files
    /// only: a dataset_info.json that another split's run wrote). Sinks that
    /// cannot read say so.
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("this sink cannot read {name} back"),
        ))
    }
    fn location(&self, name: &str) -> String;
    /// Makes committed renames durable (fsync of the folder); no-op by default.
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether `name` is a plain name (`a.tfrecord`) or a folder's and a plain
/// name (`.infeed-index/a.tfrecord.index`): nothing that climbs out.
pub(super) fn valid_name(name: &str) -> bool {
    let plain =
        |part: &str| !(part.is_empty() || part == "." || part == ".." || part.contains('\\'));
    match name.split_once('/') {
        None => plain(name),
        Some((dir, file)) => plain(dir) && plain(file) && !file.contains('/'),
    }
}

/// A local folder (created if missing).
#[derive(Clone, Debug)]
pub(super) struct LocalSink {
    dir: PathBuf,
    /// The folders below `dir` something was committed into (synced with it).
    folders: Arc<Mutex<Vec<PathBuf>>>,
}

impl LocalSink {
    /// A sink writing into `dir`, creating it (and its parents) if needed.
    pub(super) fn new(dir: impl AsRef<Path>) -> io::Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        Ok(LocalSink {
            dir,
            folders: Arc::default(),
        })
    }

    fn path(&self, name: &str) -> io::Result<PathBuf> {
        if !valid_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain file name"),
            ));
        }
        Ok(self.dir.join(name))
    }

    /// The path of `name`, its folder made if it is one below `dir`.
    fn path_in_folder(&self, name: &str) -> io::Result<PathBuf> {
        let path = self.path(name)?;
        if let Some(folder) = path.parent().filter(|&p| p != self.dir) {
            fs::create_dir_all(folder)?;
            let mut folders = self.folders.lock().unwrap_or_else(|e| e.into_inner());
            if !folders.iter().any(|f| f == folder) {
                folders.push(folder.to_path_buf());
            }
        }
        Ok(path)
    }
}

struct LocalWrite {
    file: BufWriter<File>,
}

impl Write for LocalWrite {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl ShardWrite for LocalWrite {
    fn close(self: Box<Self>) -> io::Result<()> {
        let file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()
    }
}

impl ShardSink for LocalSink {
    fn create(&self, name: &str) -> io::Result<Box<dyn ShardWrite>> {
        let file = File::create(self.path_in_folder(name)?)?;
        Ok(Box::new(LocalWrite {
            file: BufWriter::with_capacity(1 << 20, file),
        }))
    }

    fn commit(&self, temp: &str, name: &str) -> io::Result<()> {
        fs::rename(self.path(temp)?, self.path_in_folder(name)?)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        match fs::remove_file(self.path(name)?) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str()
                && name.starts_with(prefix)
                && entry.file_type()?.is_file()
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.path(name)?) {
            Ok(data) => Ok(Some(data)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn location(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn sync(&self) -> io::Result<()> {
        let folders = self
            .folders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for folder in folders {
            File::open(folder)?.sync_all()?;
        }
        File::open(&self.dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_sink_commits_by_rename_and_lists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sink = LocalSink::new(dir.path().join("out")).expect("sink");
        let mut w = sink.create(".t0").expect("create");
        w.write_all(b"abc").expect("write");
        w.close().expect("close");
        assert_eq!(sink.list("a").expect("list"), Vec::<String>::new());
        sink.commit(".t0", "a.rec").expect("commit");
        assert_eq!(
            fs::read(dir.path().join("out/a.rec")).expect("read"),
            b"abc"
        );
        assert_eq!(sink.list("a").expect("list"), vec!["a.rec".to_string()]);
        sink.put("m.json", b"{}").expect("put");
        assert_eq!(
            fs::read(dir.path().join("out/m.json")).expect("read"),
            b"{}"
        );
        sink.remove("a.rec").expect("remove");
        sink.remove("a.rec").expect("remove missing is fine");
        assert!(sink.create("../x").is_err());
        assert!(sink.create("a/../x").is_err());
        assert!(sink.create("a/b/c").is_err());
        // One folder down: made when first written into.
        sink.put(".idx/a.rec.index", b"i").expect("put in a folder");
        assert_eq!(
            fs::read(dir.path().join("out/.idx/a.rec.index")).expect("read"),
            b"i"
        );
        assert_eq!(sink.list("").expect("list"), vec!["m.json".to_string()]);
        sink.sync().expect("sync");
    }
}
