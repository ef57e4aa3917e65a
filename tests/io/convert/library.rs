//! The `infeed::convert` library API with a sink that is not a local folder
//! (as a cloud sink will be): objects live in memory, commits are renames.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use infeed::convert::{
    self, BadKind, ConvertError, ConvertOptions, Location, NoProgress, Progress, ProgressSnapshot,
    ShardLimit, ShardSink, ShardWrite,
};
use infeed::record::{Compression, ReadOptions, RecordReader};

/// Objects in memory; `fail_create_after` makes the n-th `create` fail.
#[derive(Default)]
struct MemSink {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
    creates: Mutex<usize>,
    fail_create_after: Option<usize>,
}

struct MemWrite {
    sink: Arc<MemSink>,
    name: String,
    data: Vec<u8>,
}

impl Write for MemWrite {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ShardWrite for MemWrite {
    fn close(self: Box<Self>) -> io::Result<()> {
        let mut objects = self.sink.objects.lock().expect("lock");
        objects.insert(self.name.clone(), self.data);
        Ok(())
    }
}

/// The sink handed to `convert` (an `Arc` so writers can reach the objects).
struct Shared(Arc<MemSink>);

impl ShardSink for Shared {
    fn create(&self, name: &str) -> io::Result<Box<dyn ShardWrite>> {
        let mut n = self.0.creates.lock().expect("lock");
        *n += 1;
        if self.0.fail_create_after.is_some_and(|limit| *n > limit) {
            return Err(io::Error::other("quota exceeded"));
        }
        // An object is visible only once closed, as with a multipart upload.
        Ok(Box::new(MemWrite {
            sink: self.0.clone(),
            name: name.to_string(),
            data: Vec::new(),
        }))
    }
    fn commit(&self, temp: &str, name: &str) -> io::Result<()> {
        let mut objects = self.0.objects.lock().expect("lock");
        let data = objects
            .remove(temp)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        objects.insert(name.to_string(), data);
        Ok(())
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.0.objects.lock().expect("lock").remove(name);
        Ok(())
    }
    fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        Ok(self
            .0
            .objects
            .lock()
            .expect("lock")
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect())
    }
    fn location(&self, name: &str) -> String {
        format!("mem://{name}")
    }
}

fn sample() -> String {
    crate::support::testdata("convert/sample.jsonl")
        .display()
        .to_string()
}

fn names(sink: &MemSink) -> Vec<String> {
    sink.objects.lock().expect("lock").keys().cloned().collect()
}

#[derive(Default)]
struct Recorder(Mutex<Vec<ProgressSnapshot>>);

impl Progress for Recorder {
    fn update(&self, s: &ProgressSnapshot) {
        self.0.lock().expect("lock").push(*s);
    }
}

#[test]
fn converts_into_any_sink_and_commits_by_name() {
    let mem = Arc::new(MemSink::default());
    let opts = ConvertOptions::default()
        .inputs(vec![sample()])
        .shard_limit(ShardLimit::Records(2));
    let progress = Recorder::default();
    let summary =
        convert::convert(&opts, Arc::new(Shared(mem.clone())), &progress).expect("convert");
    assert_eq!(
        names(&mem),
        vec![
            ".infeed-index/train-00000-of-00003.tfrecord.index",
            ".infeed-index/train-00001-of-00003.tfrecord.index",
            ".infeed-index/train-00002-of-00003.tfrecord.index",
            "train-00000-of-00003.tfrecord",
            "train-00001-of-00003.tfrecord",
            "train-00002-of-00003.tfrecord",
            "train.manifest.json"
        ]
    );
    assert_eq!(
        (summary.records_in, summary.records_out, summary.skipped),
        (5, 5, 0)
    );
    assert_eq!(
        summary.shards.iter().map(|s| s.records).collect::<Vec<_>>(),
        vec![2, 2, 1]
    );
    let objects = mem.objects.lock().expect("lock");
    for shard in &summary.shards {
        let data = &objects[&shard.name];
        assert_eq!(shard.bytes, data.len() as u64);
        assert_eq!(shard.crc32c, crc32c::crc32c(data));
        let records = RecordReader::new(
            data.as_slice(),
            "mem",
            Compression::None,
            &ReadOptions::default(),
        )
        .count() as u64;
        assert_eq!(records, shard.records);
    }
    let last = progress
        .0
        .lock()
        .expect("lock")
        .last()
        .copied()
        .expect("progress");
    assert_eq!((last.records_in, last.records_out), (5, 5));
    assert_eq!(
        last.input_total,
        std::fs::metadata(sample()).expect("meta").len()
    );
}

#[test]
fn a_failing_sink_is_an_output_error_and_leaves_no_object() {
    let mem = Arc::new(MemSink {
        fail_create_after: Some(2),
        ..MemSink::default()
    });
    let opts = ConvertOptions::default()
        .inputs(vec![sample()])
        .shard_limit(ShardLimit::Records(1));
    let err =
        convert::convert(&opts, Arc::new(Shared(mem.clone())), &NoProgress).expect_err("must fail");
    match err {
        // A shard and its index take a create each: the third is shard 1's.
        ConvertError::Output { name, source } => {
            assert_eq!(name, "mem://.train-00001.tmp");
            assert_eq!(source.to_string(), "quota exceeded");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(names(&mem), Vec::<String>::new());
}

#[test]
fn bad_records_are_typed_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.jsonl");
    std::fs::write(&path, "{\"a\": 1}\n{\"a\": [2]}\n").expect("write");
    let opts = ConvertOptions::default()
        .inputs(vec![path.display().to_string()])
        .infer_records(1);
    let mem = Arc::new(MemSink::default());
    let err = convert::convert(&opts, Arc::new(Shared(mem.clone())), &NoProgress).expect_err("bad");
    let ConvertError::Bad(bad) = err else {
        panic!("expected a bad record: {err:?}")
    };
    assert_eq!(bad.file, path.display().to_string());
    assert_eq!(bad.location, Location::Line(2));
    assert_eq!(bad.column.as_deref(), Some("a"));
    assert!(
        matches!(&bad.kind, BadKind::WrongType { expected, found } if expected == "int64" && found == "a list")
    );
    assert_eq!(names(&mem), Vec::<String>::new());
}
