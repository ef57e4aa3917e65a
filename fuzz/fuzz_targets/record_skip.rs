//! The skip policy against a reference: records are framed, the framed
//! bytes are damaged (bit flips, overwrites, insertions, deletions,
//! truncation), and the reader's output must be exactly what a plain greedy
//! scan finds (a valid frame at the current position is a record; otherwise
//! the next position holding a valid frame). When the damage keeps byte
//! positions and no valid frame exists except at original record starts,
//! the output is exactly the undamaged records, in order: a subsequence of
//! what was written, with no valid record dropped.
#![no_main]

use std::io::Cursor;

use arbitrary::Arbitrary;
use infeed::record::{Compression, CorruptPolicy, ReadOptions, RecordReader, masked_crc32c};
use libfuzzer_sys::fuzz_target;

const MAX_RECORD: u64 = 1 << 16;
const HEADER: usize = 12;
const FOOTER: usize = 4;

#[derive(Arbitrary, Debug)]
enum Damage {
    Flip { at: u16, xor: u8 },
    Overwrite { at: u16, bytes: Vec<u8> },
    Insert { at: u16, bytes: Vec<u8> },
    Delete { at: u16, len: u8 },
    Truncate { keep: u16 },
}

impl Damage {
    fn keeps_positions(&self) -> bool {
        matches!(
            self,
            Damage::Flip { .. } | Damage::Overwrite { .. } | Damage::Truncate { .. }
        )
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    records: Vec<Vec<u8>>,
    damage: Vec<Damage>,
    chunk: u8,
}

fn frame(data: &[u8], out: &mut Vec<u8>) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
}

/// The payload of a valid frame at `pos`, if one is there.
fn valid_at(buf: &[u8], pos: usize) -> Option<&[u8]> {
    let h = buf.get(pos..pos.checked_add(HEADER)?)?;
    let len = u64::from_le_bytes(h[..8].try_into().ok()?);
    let crc = u32::from_le_bytes(h[8..].try_into().ok()?);
    if len > MAX_RECORD || masked_crc32c(&h[..8]) != crc {
        return None;
    }
    let start = pos + HEADER;
    let end = start + len as usize;
    let payload = buf.get(start..end)?;
    let stored = u32::from_le_bytes(buf.get(end..end + FOOTER)?.try_into().ok()?);
    (masked_crc32c(payload) == stored).then_some(payload)
}

/// The reference skip reader.
fn greedy(buf: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        match valid_at(buf, pos) {
            Some(p) => {
                out.push((pos as u64, p.to_vec()));
                pos += HEADER + p.len() + FOOTER;
            }
            None => pos += 1,
        }
    }
    out
}

fuzz_target!(|input: Input| {
    let mut buf = Vec::new();
    let mut starts = Vec::new();
    for r in input.records.iter().take(64) {
        starts.push(buf.len());
        frame(r, &mut buf);
    }
    let originals = input.records.len().min(64);
    let original = buf.clone();
    let keeps = input.damage.iter().all(Damage::keeps_positions);
    for d in input.damage.iter().take(8) {
        let at = |a: u16, len: usize| usize::from(a) % (len + 1);
        match d {
            Damage::Flip { at: a, xor } => {
                if !buf.is_empty() {
                    let i = usize::from(*a) % buf.len();
                    buf[i] ^= xor;
                }
            }
            Damage::Overwrite { at: a, bytes } => {
                let i = at(*a, buf.len());
                for (k, b) in bytes.iter().enumerate() {
                    if let Some(slot) = buf.get_mut(i + k) {
                        *slot = *b;
                    }
                }
            }
            Damage::Insert { at: a, bytes } => {
                let i = at(*a, buf.len());
                buf.splice(i..i, bytes.iter().copied());
            }
            Damage::Delete { at: a, len } => {
                let i = at(*a, buf.len());
                let j = (i + usize::from(*len)).min(buf.len());
                buf.drain(i..j);
            }
            Damage::Truncate { keep } => {
                let n = usize::from(*keep).min(buf.len());
                buf.truncate(n);
            }
        }
    }

    let opts = ReadOptions::default()
        .compression(Compression::None)
        .verify_crc(true)
        .max_record_size(MAX_RECORD)
        .on_corrupt(CorruptPolicy::Skip)
        .chunk_size(usize::from(input.chunk) + 1);
    let mut reader = RecordReader::new(Cursor::new(&buf[..]), "fuzz", Compression::None, &opts);
    let mut got = Vec::new();
    for r in reader.by_ref() {
        let rec = r.expect("the skip policy never errors on in-memory input");
        got.push((rec.offset, rec.data.to_vec()));
    }
    assert_eq!(
        got,
        greedy(&buf),
        "skip output differs from the reference scan"
    );
    let skipped = reader.skipped();
    let kept: u64 = got
        .iter()
        .map(|(_, p)| (HEADER + p.len() + FOOTER) as u64)
        .sum();
    assert_eq!(
        kept + skipped.bytes,
        buf.len() as u64,
        "bytes neither read nor skipped"
    );

    // Only frames that were written, unchanged, at their own place.
    let only_written = (0..buf.len()).all(|p| match valid_at(&buf, p) {
        None => true,
        Some(payload) => starts
            .iter()
            .position(|&s| s == p)
            .is_some_and(|i| input.records[i] == payload),
    });
    if keeps && only_written {
        let intact: Vec<(u64, Vec<u8>)> = (0..originals)
            .filter(|&i| {
                let (s, r) = (starts[i], &input.records[i]);
                let e = s + HEADER + r.len() + FOOTER;
                // Undamaged: every byte of its frame still there, unchanged.
                e <= buf.len() && buf[s..e] == original[s..e]
            })
            .map(|i| (starts[i] as u64, input.records[i].clone()))
            .collect();
        assert_eq!(
            got, intact,
            "skip output is not exactly the undamaged records"
        );
    }
});
