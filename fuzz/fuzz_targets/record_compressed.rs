//! The GZIP/ZLIB reader. Arbitrary bytes read as a compressed stream under
//! both policies must never panic (the skip policy never errors on
//! in-memory input, and yields the fail policy's records as a prefix);
//! records written compressed with damage past the end of the stream, or
//! none, read back exactly.
#![no_main]

use std::io::Cursor;

use arbitrary::Arbitrary;
use infeed::record::{Compression, CorruptPolicy, ReadOptions, RecordReader, RecordWriter};
use libfuzzer_sys::fuzz_target;

const MAX_RECORD: u64 = 1 << 16;

#[derive(Arbitrary, Debug)]
enum Input {
    /// Raw bytes read as a compressed stream.
    Raw {
        zlib: bool,
        verify_crc: bool,
        chunk: u8,
        data: Vec<u8>,
    },
    /// Records written compressed, then read back; `damage` overwrites
    /// bytes at `at` of the compressed stream.
    RoundTrip {
        zlib: bool,
        chunk: u8,
        records: Vec<Vec<u8>>,
        damage: Option<(u16, Vec<u8>)>,
    },
}

fn read(
    data: &[u8],
    c: Compression,
    policy: CorruptPolicy,
    verify_crc: bool,
    chunk: usize,
) -> (Vec<Vec<u8>>, Option<String>) {
    let opts = ReadOptions::default()
        .compression(c)
        .verify_crc(verify_crc)
        .max_record_size(MAX_RECORD)
        .on_corrupt(policy)
        .chunk_size(chunk);
    let mut records = Vec::new();
    for r in RecordReader::new(Cursor::new(data), "fuzz", c, &opts) {
        match r {
            Ok(rec) => records.push(rec.data.to_vec()),
            Err(e) => return (records, Some(e.to_string())),
        }
    }
    (records, None)
}

fn compression(zlib: bool) -> Compression {
    if zlib {
        Compression::Zlib
    } else {
        Compression::Gzip
    }
}

fuzz_target!(|input: Input| match input {
    Input::Raw {
        zlib,
        verify_crc,
        chunk,
        data,
    } => {
        let c = compression(zlib);
        let chunk = usize::from(chunk) + 1;
        let (skip, err) = read(&data, c, CorruptPolicy::Skip, verify_crc, chunk);
        assert!(err.is_none(), "skip policy errored: {err:?}");
        let (fail, fail_err) = read(&data, c, CorruptPolicy::Fail, verify_crc, chunk);
        assert!(fail.len() <= skip.len());
        assert_eq!(fail[..], skip[..fail.len()]);
        if fail_err.is_none() {
            assert_eq!(fail, skip);
        }
    }
    Input::RoundTrip {
        zlib,
        chunk,
        records,
        damage,
    } => {
        let c = compression(zlib);
        let mut w = RecordWriter::new(Vec::new(), c);
        for r in &records {
            w.write_record(r).expect("write to memory");
        }
        let mut bytes = w.finish().expect("finish to memory");
        let clean = damage.is_none();
        if let Some((at, patch)) = damage {
            let at = usize::from(at) % (bytes.len() + 1);
            for (k, b) in patch.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + k) {
                    *slot = *b;
                }
            }
        }
        let chunk = usize::from(chunk) + 1;
        let (skip, err) = read(&bytes, c, CorruptPolicy::Skip, true, chunk);
        assert!(err.is_none(), "skip policy errored: {err:?}");
        let (fail, fail_err) = read(&bytes, c, CorruptPolicy::Fail, true, chunk);
        assert_eq!(fail[..], skip[..fail.len()]);
        if clean {
            assert_eq!(fail_err, None);
            assert_eq!(fail, records);
        }
    }
});
