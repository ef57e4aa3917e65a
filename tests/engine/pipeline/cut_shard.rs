//! A shard cut short while a pipeline reads it ends the run with an error
//! naming the shard, in every read mode, and never with a signal: read into
//! buffers, mapped (`ReadOptions::mmap`, and the global shuffle's maps),
//! through the shard threads or the workers (`src/record/mapped.rs` turns
//! a read past a mapped file's new end into that error). The records
//! delivered before it are whole.

use crate::support::tfrecord::write_file;
use infeed::pipeline::Pipeline;
use infeed::record::{Compression, ReadOptions};

const RECORDS: u32 = 2_000;
const SIZE: usize = 4_096;

/// Record `i`: its number, then its number's low byte to `SIZE` bytes.
fn record(i: u32) -> Vec<u8> {
    let mut r = i.to_le_bytes().to_vec();
    r.resize(SIZE, i as u8);
    r
}

/// Whether `r` is one of the shard's records, whole.
fn whole(r: &[u8]) -> bool {
    let i = u32::from_le_bytes(r[..4].try_into().unwrap());
    i < RECORDS && r == record(i).as_slice()
}

/// A read mode: its name, the words that choose it, its read options.
type Mode<'a> = (&'a str, fn(Pipeline) -> Pipeline, &'a ReadOptions);

#[test]
fn a_shard_cut_while_read_is_an_error_naming_it_in_every_mode() {
    let mapped = ReadOptions::default().mmap(true).chunk_size(64 << 10);
    let read = ReadOptions::default().chunk_size(64 << 10);
    let modes: [Mode; 7] = [
        ("worker reads", |p| p, &read),
        ("worker reads, mapped", |p| p, &mapped),
        // A map on serialized records needs their bytes before the
        // workers: the shard thread reads them.
        ("shard thread", |p| p.map(|r| r), &read),
        ("shard thread, mapped", |p| p.map(|r| r), &mapped),
        // A shuffle buffer's batches are scattered: read through the
        // workers' shared maps.
        ("worker reads, shuffled", |p| p.shuffle(64), &read),
        // The global shuffle maps its shards (whatever `mmap` says) and
        // leaves a plain local shard's records to the workers, who read
        // them through its maps; unless a step before them needs their
        // bytes (a filter): then its own reader reads them there.
        (
            "global shuffle, read by the workers",
            |p| p.global_shuffle(),
            &read,
        ),
        (
            "global shuffle, read by its reader",
            |p| p.global_shuffle().filter(|_: &[u8]| true),
            &read,
        ),
    ];
    for (mode, with, opts) in modes {
        let dir = tempfile::tempdir().unwrap();
        let path = write_file(
            &dir.path().join("cut.tfrecord"),
            (0..RECORDS).map(record),
            Compression::None,
        );
        let p = with(Pipeline::from_files([path.clone()]).unwrap())
            .read_options(opts.clone())
            .threads(1)
            .prefetch(1);
        let mut batches = p.build_raw(16, false).unwrap();
        let first = batches.next_batch().unwrap().expect("a first batch");
        // A quarter of the shard left: most of what follows is past its end.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(2 << 20).unwrap();
        let mut delivered = first.into_records();
        let err = loop {
            match batches.next_batch() {
                Ok(Some(batch)) => delivered.extend(batch.into_records()),
                Ok(None) => panic!("{mode}: the run ended without an error"),
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains(&path), "{mode}: {err}");
        assert!(
            delivered.iter().all(|r| whole(r)),
            "{mode}: a record not whole"
        );
        assert!((delivered.len() as u32) < RECORDS, "{mode}");
    }
}

/// Buckets have each record measured by its shard's walk, which scans the
/// payloads through its maps of the shard: a cut there is the same error
/// naming the shard, after whole batches.
#[test]
fn a_shard_cut_while_its_walk_measures_it_is_an_error_naming_it() {
    use super::grouping::{lm_record, spec};
    let dir = tempfile::tempdir().unwrap();
    let records = (0..4000).map(|i| lm_record(i, 100 + (i as usize * 37) % 400));
    let path = write_file(&dir.path().join("cut.tfrecord"), records, Compression::None);
    let mut batches = Pipeline::from_files([path.clone()])
        .unwrap()
        .threads(1)
        .prefetch(1)
        .parse(spec())
        .max_length(512)
        .bucket_by_length("ids", &[200, 350], &[8, 8, 8])
        .build()
        .unwrap();
    batches.next_batch().unwrap().expect("a first batch");
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(1 << 20).unwrap();
    let err = loop {
        match batches.next_batch() {
            Ok(Some(batch)) => assert!(batch.real_rows > 0),
            Ok(None) => panic!("the run ended without an error"),
            Err(e) => break e,
        }
    };
    assert!(err.to_string().contains(&path), "{err}");
}
