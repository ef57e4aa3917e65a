//! An index file of arbitrary bytes, decoded, and records read through the
//! index it gives (when it decodes) from a small plain shard. Properties:
//! never panics; a decoded index re-encodes to bytes that decode to the
//! same index; a record read through any index that decodes is a whole,
//! CRC-checked record of the shard, or an error — never other bytes.
#![no_main]

use std::sync::{Arc, OnceLock};

use infeed::index::{AccessOptions, RandomAccess, ShardIndex};
use infeed::record::{Compression, RecordWriter};
use libfuzzer_sys::fuzz_target;

/// A shard of 20 records, written once.
fn shard() -> &'static (tempfile::TempDir, String, Vec<Vec<u8>>) {
    static SHARD: OnceLock<(tempfile::TempDir, String, Vec<Vec<u8>>)> = OnceLock::new();
    SHARD.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tfrecord");
        let records: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8; 10 + i * 7]).collect();
        let mut w = RecordWriter::create(&path, Compression::None).unwrap();
        for r in &records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        (dir, path.display().to_string(), records)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(idx) = ShardIndex::decode(data, "fuzz") else {
        return;
    };
    let again = ShardIndex::decode(&idx.encode(), "fuzz").expect("re-encoded index decodes");
    assert_eq!(again, idx);
    if idx.len() > 64 || idx.compression != Compression::None {
        return;
    }
    let (_, path, records) = shard();
    let access = RandomAccess::with_indexes(
        std::slice::from_ref(path),
        vec![Arc::new(idx.clone())],
        &AccessOptions::default(),
    );
    for i in 0..idx.len() {
        if let Ok((_, r)) = access.get(i) {
            assert!(
                records.iter().any(|w| w[..] == r.data[..]),
                "a record of the shard"
            );
        }
    }
});
