//! A shard's index, in memory and as a file.
//!
//! ```text
//! magic "INFX" | format version u32 (1) | header length u32 | header | records | CRC32C u32
//! ```
//!
//! Integers little-endian. The header is a protobuf message: what the index
//! describes (the shard's name, size, hashes of its first and last 4 KiB,
//! its ETag or modification time), its compression, its record count and
//! the end of its last record, and for a GZIP or ZLIB shard the access
//! points (every `span` bytes of output, each with its window deflated).
//! The records follow as varints, one or two per record: `length << 1 |
//! gap`, then the gap when `gap` is 1 — the bytes between the record and
//! the end of the one before (0 in a file read without corruption, so the
//! usual record costs its length's varint: 2 bytes for a 1 KiB record).
//! The CRC32C covers every byte before it.
//!
//! In memory a shard's records are their offsets (8 bytes a record) and,
//! only where they do not follow one another, their lengths.

use bytes::Bytes;
use prost::Message;

use super::error::IndexError;
use super::identity::{ShardId, Version};
use super::zran::AccessPoint;
use crate::record::{Compression, FOOTER_LEN, HEADER_LEN};

const MAGIC: [u8; 4] = *b"INFX";
/// Bumped when the meaning of the format changes; other versions are
/// refused by number.
pub const FORMAT_VERSION: u32 = 1;
/// Header and footer of a framed record.
const FRAME: u64 = (HEADER_LEN + FOOTER_LEN) as u64;

/// A shard's index: every record's place, and what it was built from.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardIndex {
    /// The shard it describes.
    pub shard: ShardId,
    pub compression: Compression,
    /// Output between access points (compressed shards).
    pub span: u64,
    /// Per record: the offset of its header in the uncompressed stream.
    offsets: Vec<u64>,
    /// Per record: its payload length, where records do not follow one
    /// another (a file read past a corrupt region); else `None`, the length
    /// following from the next offset.
    lens: Option<Vec<u32>>,
    /// The end of the last record.
    end: u64,
    /// GZIP or ZLIB: where inflating can start.
    pub points: Vec<AccessPoint>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct HeaderProto {
    #[prost(string, tag = "1")]
    shard_name: String,
    #[prost(uint64, tag = "2")]
    size: u64,
    #[prost(uint64, tag = "3")]
    head_hash: u64,
    #[prost(uint64, tag = "4")]
    tail_hash: u64,
    #[prost(string, tag = "5")]
    etag: String,
    #[prost(uint64, tag = "6")]
    mtime_ns: u64,
    /// 0 none, 1 GZIP, 2 ZLIB.
    #[prost(uint32, tag = "7")]
    compression: u32,
    #[prost(uint64, tag = "8")]
    records: u64,
    #[prost(uint64, tag = "9")]
    end: u64,
    #[prost(uint64, tag = "10")]
    span: u64,
    #[prost(message, repeated, tag = "11")]
    points: Vec<PointProto>,
    /// Bytes of the records' varints.
    #[prost(uint64, tag = "12")]
    records_bytes: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PointProto {
    #[prost(uint64, tag = "1")]
    out: u64,
    #[prost(uint64, tag = "2")]
    input: u64,
    #[prost(uint32, tag = "3")]
    bits: u32,
    #[prost(bytes = "bytes", tag = "4")]
    window: Bytes,
}

/// Collects a shard's records in order as it is read.
#[derive(Debug, Default)]
pub(crate) struct RecordsBuilder {
    offsets: Vec<u64>,
    lens: Vec<u32>,
    contiguous: bool,
    end: u64,
}

impl RecordsBuilder {
    pub fn new() -> Self {
        RecordsBuilder {
            contiguous: true,
            ..Default::default()
        }
    }

    /// The next record: its header's offset and its payload's length.
    /// Records pushed so far.
    pub fn len(&self) -> u64 {
        self.offsets.len() as u64
    }

    pub fn push(&mut self, offset: u64, len: u64) -> Result<(), String> {
        let len32 =
            u32::try_from(len).map_err(|_| format!("a record of {len} bytes (at most 4 GiB)"))?;
        if offset < self.end {
            return Err(format!(
                "a record at {offset} before the end of the last ({})",
                self.end
            ));
        }
        if offset != self.end {
            self.contiguous = false;
        }
        self.offsets.push(offset);
        self.lens.push(len32);
        self.end = offset + FRAME + len;
        Ok(())
    }

    /// The index of these records.
    pub fn finish(
        self,
        shard: ShardId,
        compression: Compression,
        span: u64,
        points: Vec<AccessPoint>,
    ) -> ShardIndex {
        ShardIndex {
            shard,
            compression,
            span,
            lens: (!self.contiguous).then_some(self.lens),
            offsets: self.offsets,
            end: self.end,
            points,
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(w)
}

impl ShardIndex {
    /// Records in the shard.
    pub fn len(&self) -> u64 {
        self.offsets.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Record `i`'s header offset in the uncompressed stream and its framed
    /// length (header, payload, footer).
    pub fn record(&self, i: u64) -> Option<(u64, u64)> {
        let i = usize::try_from(i).ok()?;
        let offset = *self.offsets.get(i)?;
        let framed = match &self.lens {
            Some(lens) => u64::from(lens[i]) + FRAME,
            None => self.offsets.get(i + 1).copied().unwrap_or(self.end) - offset,
        };
        Some((offset, framed))
    }

    /// The corrupt regions a skipping reader meets at record `i`, counted
    /// as it counts them (regions, bytes): the gap before the record (a
    /// region runs from a bad record to the next good one, so a gap is one
    /// region), and after the last record of a plain shard the bytes to its
    /// end (a compressed shard's stream length is not kept: its cut tail is
    /// not counted). A contiguous index has none but a plain shard's tail.
    pub fn corrupt_at(&self, i: u64) -> (u64, u64) {
        let Some(k) = usize::try_from(i).ok().filter(|&k| k < self.offsets.len()) else {
            return (0, 0);
        };
        let gap = |bytes: u64| (u64::from(bytes > 0), bytes);
        let before = match &self.lens {
            None if k > 0 => (0, 0),
            None => gap(self.offsets[0]),
            Some(lens) => {
                let end = match k.checked_sub(1) {
                    Some(j) => self.offsets[j] + u64::from(lens[j]) + FRAME,
                    None => 0,
                };
                gap(self.offsets[k] - end)
            }
        };
        let tail = if k + 1 == self.offsets.len() && self.compression == Compression::None {
            gap(self.shard.size.saturating_sub(self.end))
        } else {
            (0, 0)
        };
        (before.0 + tail.0, before.1 + tail.1)
    }

    /// Whether a skipping reader meets any corrupt region in the shard
    /// that [`corrupt_at`](Self::corrupt_at) counts: a gap between records
    /// or a plain shard's cut tail.
    pub fn has_corrupt_regions(&self) -> bool {
        !self.contiguous() || (self.compression == Compression::None && self.end != self.shard.size)
    }

    /// The index of the record whose header is at `offset` in the
    /// uncompressed stream (what a batch's positions name), if one is.
    pub fn record_at(&self, offset: u64) -> Option<u64> {
        self.offsets.binary_search(&offset).ok().map(|i| i as u64)
    }

    /// The number of the first record whose header is at `offset` or
    /// after it (`len()` when none is).
    pub fn first_from(&self, offset: u64) -> u64 {
        self.offsets.partition_point(|&o| o < offset) as u64
    }

    /// Whether its records follow one another from the first to the end
    /// (false for an index built past a corrupt region, whose bytes are
    /// between records).
    pub fn contiguous(&self) -> bool {
        self.lens.is_none()
    }

    /// The end of the last record in the uncompressed stream.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Bytes the index takes in memory (what a reader of many shards holds).
    pub fn memory_bytes(&self) -> usize {
        self.offsets.len() * 8
            + self.lens.as_ref().map_or(0, |l| l.len() * 4)
            + self
                .points
                .iter()
                .map(|p| p.window.len() + 32)
                .sum::<usize>()
    }

    /// The index as a file.
    pub fn encode(&self) -> Vec<u8> {
        let mut records = Vec::with_capacity(self.offsets.len() * 2);
        let mut end = 0u64;
        for i in 0..self.offsets.len() {
            let (offset, framed) = self.record(i as u64).unwrap_or_default();
            let len = framed - FRAME;
            let gap = offset - end;
            put_varint(&mut records, len << 1 | u64::from(gap > 0));
            if gap > 0 {
                put_varint(&mut records, gap);
            }
            end = offset + framed;
        }
        let (etag, mtime_ns) = match &self.shard.version {
            Some(Version::Etag(e)) => (e.clone(), 0),
            Some(Version::Modified(ns)) => (String::new(), *ns),
            None => (String::new(), 0),
        };
        let header = HeaderProto {
            shard_name: self.shard.name.clone(),
            size: self.shard.size,
            head_hash: self.shard.head_hash,
            tail_hash: self.shard.tail_hash,
            etag,
            mtime_ns,
            compression: match self.compression {
                Compression::None => 0,
                Compression::Gzip => 1,
                Compression::Zlib => 2,
            },
            records: self.offsets.len() as u64,
            end: self.end,
            span: self.span,
            points: self
                .points
                .iter()
                .map(|p| PointProto {
                    out: p.out,
                    input: p.input,
                    bits: u32::from(p.bits),
                    window: p.window.clone(),
                })
                .collect(),
            records_bytes: records.len() as u64,
        }
        .encode_to_vec();
        let mut out = Vec::with_capacity(16 + header.len() + records.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&records);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// An index file read back; `name` (its path or URL) is for errors.
    /// Anything cut short, damaged or inconsistent is refused.
    pub fn decode(bytes: &[u8], name: &str) -> Result<ShardIndex, IndexError> {
        let corrupt = |reason: String| IndexError::Corrupt {
            index: name.to_owned(),
            reason,
        };
        if bytes.len() < 4 || bytes[..4] != MAGIC {
            return Err(corrupt(
                "it does not begin with \"INFX\": not an infeed index".into(),
            ));
        }
        if bytes.len() < 16 {
            return Err(corrupt(format!("it is cut short ({} bytes)", bytes.len())));
        }
        let version = u32_at(bytes, 4);
        if version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "it is index format {version}; this build reads format {FORMAT_VERSION}: \
                 build the index again (infeed index)"
            )));
        }
        let body = &bytes[..bytes.len() - 4];
        let stored = u32_at(bytes, bytes.len() - 4);
        if crc32c::crc32c(body) != stored {
            return Err(corrupt(
                "its checksum does not match (damaged or cut short)".into(),
            ));
        }
        let header_len = u32_at(bytes, 8) as usize;
        let header_end = 12usize
            .checked_add(header_len)
            .filter(|&e| e <= body.len())
            .ok_or_else(|| {
                corrupt(format!(
                    "its header of {header_len} bytes runs past its end"
                ))
            })?;
        let h = HeaderProto::decode(&body[12..header_end])
            .map_err(|e| corrupt(format!("its header does not decode: {e}")))?;
        let records_bytes = &body[header_end..];
        if records_bytes.len() as u64 != h.records_bytes {
            return Err(corrupt(format!(
                "{} bytes of records, the header says {}",
                records_bytes.len(),
                h.records_bytes
            )));
        }
        let compression = match h.compression {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Zlib,
            c => return Err(corrupt(format!("unknown compression {c}"))),
        };
        // At least one byte a record: a count larger than the bytes is a lie
        // (and must not size an allocation).
        if h.records > records_bytes.len() as u64 {
            return Err(corrupt(format!(
                "{} records in {} bytes",
                h.records,
                records_bytes.len()
            )));
        }
        let mut records = RecordsBuilder::new();
        let mut at = 0usize;
        let mut end = 0u64;
        for i in 0..h.records {
            let bad = || corrupt(format!("record {i} does not decode"));
            let v = get_varint(records_bytes, &mut at).ok_or_else(bad)?;
            let gap = if v & 1 == 1 {
                get_varint(records_bytes, &mut at).ok_or_else(bad)?
            } else {
                0
            };
            let offset = end.checked_add(gap).ok_or_else(bad)?;
            records
                .push(offset, v >> 1)
                .map_err(|e| corrupt(format!("record {i}: {e}")))?;
            end = records.end;
        }
        if at != records_bytes.len() || end != h.end {
            return Err(corrupt(format!(
                "its records end at {end}, the header says {}",
                h.end
            )));
        }
        let mut points = Vec::with_capacity(h.points.len());
        for (i, p) in h.points.into_iter().enumerate() {
            let in_order = points
                .last()
                .is_none_or(|q: &AccessPoint| q.out < p.out && q.input < p.input);
            if p.bits > 7 || !in_order || p.input > h.size {
                return Err(corrupt(format!("access point {i} is out of place")));
            }
            points.push(AccessPoint {
                out: p.out,
                input: p.input,
                bits: p.bits as u8,
                window: p.window,
            });
        }
        if compression != Compression::None && points.is_empty() && h.records > 0 {
            return Err(corrupt(
                "a compressed shard's index has no access point".into(),
            ));
        }
        let version = match (h.etag.is_empty(), h.mtime_ns) {
            (false, _) => Some(Version::Etag(h.etag)),
            (true, 0) => None,
            (true, ns) => Some(Version::Modified(ns)),
        };
        let shard = ShardId {
            name: h.shard_name,
            size: h.size,
            head_hash: h.head_hash,
            tail_hash: h.tail_hash,
            version,
        };
        Ok(records.finish(shard, compression, h.span, points))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard() -> ShardId {
        ShardId {
            name: "train-00000.tfrecord".into(),
            size: 1_000_000,
            head_hash: 7,
            tail_hash: 8,
            version: Some(Version::Modified(1_700_000_000_000_000_000)),
        }
    }

    fn index(contiguous: bool) -> ShardIndex {
        let mut b = RecordsBuilder::new();
        let mut at = 0;
        for i in 0..1000u64 {
            if !contiguous && i % 100 == 7 {
                at += 33;
            }
            let len = 900 + i % 300;
            b.push(at, len).unwrap();
            at += len + 16;
        }
        b.finish(shard(), Compression::None, 0, Vec::new())
    }

    #[test]
    fn an_index_round_trips_and_takes_two_bytes_a_kilobyte_record() {
        for contiguous in [true, false] {
            let idx = index(contiguous);
            let bytes = idx.encode();
            assert_eq!(ShardIndex::decode(&bytes, "x").unwrap(), idx);
            if contiguous {
                // 2 bytes a record, a header of a few dozen bytes.
                assert!(bytes.len() < 2 * 1000 + 100, "{}", bytes.len());
            }
        }
        let idx = index(true);
        assert_eq!(idx.record(0), Some((0, 916)));
        assert_eq!(idx.record(1), Some((916, 917)));
        assert_eq!(idx.record(1000), None);
        let gaps = index(false);
        assert_eq!(
            gaps.record(7).unwrap().0,
            index(true).record(7).unwrap().0 + 33
        );
    }

    #[test]
    fn each_gap_and_a_plain_tail_is_one_corrupt_region() {
        let sum = |idx: &ShardIndex| {
            (0..idx.len() + 1)
                .map(|k| idx.corrupt_at(k))
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        // A shard that ends with its last record, then one cut 40 bytes
        // after it.
        let mut whole = index(true);
        whole.shard.size = whole.end();
        assert_eq!(sum(&whole), (0, 0));
        assert!(!whole.has_corrupt_regions());
        let mut cut = index(true);
        cut.shard.size = cut.end() + 40;
        assert_eq!(sum(&cut), (1, 40));
        assert!(cut.has_corrupt_regions());
        assert_eq!(cut.corrupt_at(999), (1, 40));
        let mut gaps = index(false);
        gaps.shard.size = gaps.end();
        assert_eq!(gaps.corrupt_at(7), (1, 33));
        assert_eq!(gaps.corrupt_at(8), (0, 0));
        assert_eq!(sum(&gaps), (10, 10 * 33));
        // A leading gap, and a shard that ends with its last record.
        let mut b = RecordsBuilder::new();
        b.push(5, 10).unwrap();
        b.push(31, 10).unwrap();
        let size = ShardId {
            size: 57,
            ..shard()
        };
        let idx = b.finish(size.clone(), Compression::None, 0, Vec::new());
        assert_eq!((idx.corrupt_at(0), idx.corrupt_at(1)), ((1, 5), (0, 0)));
        let mut b = RecordsBuilder::new();
        b.push(5, 10).unwrap();
        let idx = b.finish(size, Compression::Gzip, 1 << 20, Vec::new());
        // A compressed shard's tail is not known.
        assert_eq!(idx.corrupt_at(0), (1, 5));
    }

    #[test]
    fn every_cut_and_flip_is_refused_by_name() {
        let bytes = index(false).encode();
        for cut in (0..bytes.len()).step_by(97) {
            let err = ShardIndex::decode(&bytes[..cut], "train.index").unwrap_err();
            assert!(err.to_string().starts_with("train.index: "), "{err}");
        }
        for at in (0..bytes.len()).step_by(13) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x20;
            assert!(ShardIndex::decode(&bad, "i").is_err(), "flip at {at}");
        }
        let mut newer = bytes.clone();
        newer[4] = 9;
        let err = ShardIndex::decode(&newer, "i").unwrap_err();
        assert!(err.to_string().contains("index format 9"), "{err}");
    }
}
