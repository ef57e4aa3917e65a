//! The uncompressed deframer through `RecordReader`, under both corruption
//! policies, on arbitrary bytes. Properties: never panics; the skip policy
//! never errors on in-memory input; the fail policy yields exactly the skip
//! policy's records up to its first error; the result does not depend on the
//! read chunk size.
#![no_main]

use std::io::Cursor;

use infeed::record::{Compression, CorruptPolicy, ReadOptions, RecordReader};
use libfuzzer_sys::fuzz_target;

/// Records are bounded so a length field can never claim much memory.
const MAX_RECORD: u64 = 1 << 16;

fn read(
    data: &[u8],
    policy: CorruptPolicy,
    verify_crc: bool,
    chunk: usize,
) -> (Vec<(u64, Vec<u8>)>, Option<String>) {
    let opts = ReadOptions::default()
        .compression(Compression::None)
        .verify_crc(verify_crc)
        .max_record_size(MAX_RECORD)
        .on_corrupt(policy)
        .chunk_size(chunk);
    let reader = RecordReader::new(Cursor::new(data), "fuzz", Compression::None, &opts);
    let mut records = Vec::new();
    for r in reader {
        match r {
            Ok(rec) => records.push((rec.offset, rec.data.to_vec())),
            Err(e) => return (records, Some(e.to_string())),
        }
    }
    (records, None)
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, data)) = input.split_first() else {
        return;
    };
    let verify_crc = flags & 1 == 0;
    // Small chunks make records span reads; 0 is clamped to 1 by the reader.
    let chunk = usize::from(flags >> 1) + 1;

    let (skip, skip_err) = read(data, CorruptPolicy::Skip, verify_crc, chunk);
    assert!(skip_err.is_none(), "skip policy errored: {skip_err:?}");
    let (skip_big, _) = read(data, CorruptPolicy::Skip, verify_crc, 1 << 20);
    assert_eq!(skip, skip_big, "skip output depends on the chunk size");

    let (fail, fail_err) = read(data, CorruptPolicy::Fail, verify_crc, chunk);
    let (fail_big, fail_big_err) = read(data, CorruptPolicy::Fail, verify_crc, 1 << 20);
    assert_eq!(
        (&fail, &fail_err),
        (&fail_big, &fail_big_err),
        "fail output depends on the chunk size"
    );
    assert!(fail.len() <= skip.len());
    assert_eq!(
        fail[..],
        skip[..fail.len()],
        "fail policy's records are not the skip policy's prefix"
    );
    if fail_err.is_none() {
        assert_eq!(fail, skip, "no error, yet the policies disagree");
    }
    // Records are in file order and never overlap.
    for w in skip.windows(2) {
        assert!(
            w[0].0 + 16 + w[0].1.len() as u64 <= w[1].0,
            "overlapping records"
        );
    }
});
