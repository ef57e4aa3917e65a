//! convert's JSONL and CSV row readers through the public `convert` API: the
//! input is written to a file, converted with one thread into an in-memory
//! sink. Input: a flags byte (bit 0: CSV, bit 1: skip bad records, bit 2:
//! null omits), then the file's content. Properties: never panic; a
//! conversion that succeeds wrote `records_out` records, every one a valid
//! TFRecord frame holding an `Example` prost decodes.
#![no_main]

use std::collections::BTreeMap;
use std::io::{self, Cursor, Write};
use std::sync::{Arc, Mutex, OnceLock};

use infeed::convert::{self, ConvertOptions, NoProgress, ShardSink, ShardWrite};
use infeed::example::proto::Example;
use infeed::record::{Compression, ReadOptions, RecordReader};
use libfuzzer_sys::fuzz_target;
use prost::Message;

#[derive(Default)]
struct Mem(Mutex<BTreeMap<String, Vec<u8>>>);

struct MemWrite(Arc<Mem>, String, Vec<u8>);

impl Write for MemWrite {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.2.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ShardWrite for MemWrite {
    fn close(self: Box<Self>) -> io::Result<()> {
        let MemWrite(mem, name, data) = *self;
        mem.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .insert(name, data);
        Ok(())
    }
}

struct Sink(Arc<Mem>);

impl ShardSink for Sink {
    fn create(&self, name: &str) -> io::Result<Box<dyn ShardWrite>> {
        Ok(Box::new(MemWrite(
            self.0.clone(),
            name.to_owned(),
            Vec::new(),
        )))
    }
    fn commit(&self, temp: &str, name: &str) -> io::Result<()> {
        let mut m = self.0.0.lock().map_err(|_| io::Error::other("poisoned"))?;
        let data = m
            .remove(temp)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        m.insert(name.to_owned(), data);
        Ok(())
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.0
            .0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .remove(name);
        Ok(())
    }
    fn list(&self, prefix: &str) -> io::Result<Vec<String>> {
        let m = self.0.0.lock().map_err(|_| io::Error::other("poisoned"))?;
        Ok(m.keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect())
    }
    fn location(&self, name: &str) -> String {
        format!("mem://{name}")
    }
}

fn dir() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary folder"))
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, content)) = input.split_first() else {
        return;
    };
    let name = if flags & 1 == 0 { "in.jsonl" } else { "in.csv" };
    let path = dir().path().join(name);
    std::fs::write(&path, content).expect("write the input file");
    let opts = ConvertOptions::default()
        .inputs(vec![path.to_string_lossy().into_owned()])
        .skip_bad(flags & 2 != 0)
        .null_omit(flags & 4 != 0)
        .threads(1);
    let mem = Arc::new(Mem::default());
    let result = convert::convert(&opts, Arc::new(Sink(mem.clone())), &NoProgress);
    let _ = std::fs::remove_file(&path);
    let Ok(summary) = result else {
        return;
    };
    let objects = mem.0.lock().expect("lock");
    let mut records = 0u64;
    for shard in &summary.shards {
        let data = &objects[&shard.name];
        let read = ReadOptions::default().compression(Compression::None);
        for rec in RecordReader::new(Cursor::new(data), &shard.name, Compression::None, &read) {
            let rec = rec.expect("convert wrote a valid frame");
            Example::decode(rec.data).expect("convert wrote a valid Example");
            records += 1;
        }
    }
    assert_eq!(records, summary.records_out);
    assert_eq!(summary.records_out + summary.skipped, summary.records_in);
});
