//! Reading options and the policy for corrupt records.

use super::compression::Compression;

/// The default maximum record size: 1 GiB. Generous (real records are KBs to
/// MBs), but it keeps a corrupt length field from claiming unbounded memory.
pub const DEFAULT_MAX_RECORD_SIZE: u64 = 1 << 30;

/// The default size of one read from the underlying source: 1 MiB.
pub const DEFAULT_CHUNK_SIZE: usize = 1 << 20;

/// What to do with a corrupt record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CorruptPolicy {
    /// Return the first corruption as an error and stop reading the file.
    #[default]
    Fail,
    /// Count and skip corrupt regions, resynchronising on the next valid
    /// record; see [`super::SkipReport`].
    Skip,
}

impl crate::words::Words for CorruptPolicy {
    const SETTING: &'static str = "on_corrupt";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["fail"], CorruptPolicy::Fail),
        (&["skip"], CorruptPolicy::Skip),
    ];
}

impl std::str::FromStr for CorruptPolicy {
    type Err = crate::words::UnknownWord;

    /// `fail` or `skip`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
    }
}

/// How to read a TFRecord file.
///
/// Built from [`ReadOptions::default`] and the setters, which keep working
/// as settings are added (the type is `#[non_exhaustive]`; its fields stay
/// public to read and to set):
///
/// ```
/// use infeed::record::{Compression, CorruptPolicy, ReadOptions};
///
/// let opts = ReadOptions::default()
///     .compression(Compression::Gzip)
///     .on_corrupt(CorruptPolicy::Skip);
/// assert_eq!(opts.compression, Some(Compression::Gzip));
/// ```
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ReadOptions {
    /// `None` detects the compression from the file name and first bytes
    /// ([`Compression::detect`]).
    #[serde(with = "compression_word")]
    pub compression: Option<Compression>,
    /// Verify the masked CRC32C of each payload (default `true`). The CRC of
    /// the length is always checked: it costs nothing and guards every
    /// allocation made from a length field. Resynchronisation under
    /// [`CorruptPolicy::Skip`] always checks both, whatever this says.
    pub verify_crc: bool,
    /// Records whose header claims more bytes than this are errors
    /// ([`super::ErrorKind::TooLarge`]) and are never allocated.
    pub max_record_size: u64,
    /// Fail on the first corrupt record, or skip corrupt regions.
    #[serde(with = "crate::words::as_word")]
    pub on_corrupt: CorruptPolicy,
    /// Bytes per read from the source (and per piece of decompressed output).
    pub chunk_size: usize,
    /// Map local files into memory rather than read them (default `false`):
    /// records are then checked and sliced where the page cache holds them,
    /// with no copy into a buffer of infeed's (as DALI's readers do by
    /// default): img full 30% faster, 25% less CPU. A shuffle buffer then
    /// holds records of 1 KiB and more as they are, not copied (its memory
    /// is page cache the kernel can reclaim, counted in RSS while mapped).
    /// A file cut short while mapped is an error naming it, as when read
    /// (on Linux a fault there is turned into that error: `record::mapped`;
    /// elsewhere it stops the process with SIGBUS). Off by default: a map's
    /// pages count in the process's RSS (below).
    /// Where the workers read a pipeline's records (its plain local shards,
    /// by default), each worker maps the shards it reads, a map of its own, and takes its
    /// batch's records as views of it instead of reading them into its
    /// buffer: img +13–19% pinned to one core, +8–20% on two (4 shards, or
    /// 40 with maps dropped and made again; lm +1%).
    pub mmap: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            compression: None,
            verify_crc: true,
            max_record_size: DEFAULT_MAX_RECORD_SIZE,
            on_corrupt: CorruptPolicy::Fail,
            chunk_size: DEFAULT_CHUNK_SIZE,
            mmap: false,
        }
    }
}

impl ReadOptions {
    /// Sets [`compression`](Self::compression): a [`Compression`] reads
    /// every file so, `None` detects each file's.
    pub fn compression(mut self, compression: impl Into<Option<Compression>>) -> Self {
        self.compression = compression.into();
        self
    }

    /// Sets [`verify_crc`](Self::verify_crc): whether each payload's CRC
    /// is checked.
    pub fn verify_crc(mut self, verify: bool) -> Self {
        self.verify_crc = verify;
        self
    }

    /// Sets [`max_record_size`](Self::max_record_size): the longest record
    /// a header may claim.
    pub fn max_record_size(mut self, bytes: u64) -> Self {
        self.max_record_size = bytes;
        self
    }

    /// Sets [`on_corrupt`](Self::on_corrupt): fail on a corrupt record, or
    /// skip it.
    pub fn on_corrupt(mut self, policy: CorruptPolicy) -> Self {
        self.on_corrupt = policy;
        self
    }

    /// Sets [`chunk_size`](Self::chunk_size): bytes per read.
    pub fn chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = bytes;
        self
    }

    /// Sets [`mmap`](Self::mmap): map local files instead of reading them.
    pub fn mmap(mut self, mmap: bool) -> Self {
        self.mmap = mmap;
        self
    }

    /// The chunk size, at least 1 byte (a zero chunk size would never make progress).
    pub(crate) fn effective_chunk_size(&self) -> usize {
        self.chunk_size.max(1)
    }
}

/// The most skip events a [`SkipReport`] keeps; after that only the counts grow.
pub const MAX_SKIP_EVENTS: usize = 10_000;

/// What the [`CorruptPolicy::Skip`] policy skipped in one file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SkipReport {
    /// Number of corrupt regions skipped.
    pub records: u64,
    /// Bytes skipped in all (uncompressed bytes for framing corruption,
    /// compressed bytes for a corrupt compressed stream).
    pub bytes: u64,
    /// The first [`MAX_SKIP_EVENTS`] skipped regions, in file order.
    pub events: Vec<SkipEvent>,
}

/// One skipped region.
#[derive(Clone, Debug, PartialEq)]
pub struct SkipEvent {
    /// Where the region starts: the uncompressed offset of the corrupt
    /// record's header, or for [`super::ErrorKind::Decompress`] the
    /// compressed offset where the stream became undecodable.
    pub offset: u64,
    /// Bytes skipped: up to the next valid record, or to the end of the file.
    /// For [`super::ErrorKind::Decompress`], compressed bytes to the end of the file.
    pub bytes: u64,
    /// Why it was skipped.
    pub kind: super::ErrorKind,
}

impl SkipReport {
    /// Records one skipped region, keeping at most [`MAX_SKIP_EVENTS`] events.
    pub fn push(&mut self, event: SkipEvent) {
        self.records += 1;
        self.bytes += event.bytes;
        if self.events.len() < MAX_SKIP_EVENTS {
            self.events.push(event);
        }
    }

    /// Whether nothing was skipped.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::ErrorKind;
    use super::*;

    #[test]
    fn defaults() {
        let o = ReadOptions::default();
        assert_eq!(o.compression, None);
        assert!(o.verify_crc);
        assert_eq!(o.max_record_size, 1 << 30);
        assert_eq!(o.on_corrupt, CorruptPolicy::Fail);
        assert_eq!(o.chunk_size, 1 << 20);
    }

    #[test]
    fn skip_report_caps_events_but_keeps_counting() {
        let mut r = SkipReport::default();
        for i in 0..(MAX_SKIP_EVENTS as u64 + 5) {
            r.push(SkipEvent {
                offset: i,
                bytes: 2,
                kind: ErrorKind::NotTfRecord,
            });
        }
        assert_eq!(r.records, MAX_SKIP_EVENTS as u64 + 5);
        assert_eq!(r.bytes, 2 * (MAX_SKIP_EVENTS as u64 + 5));
        assert_eq!(r.events.len(), MAX_SKIP_EVENTS);
        assert_eq!(
            r.events.last().map(|e| e.offset),
            Some(MAX_SKIP_EVENTS as u64 - 1)
        );
    }
}

/// serde's form of [`ReadOptions::compression`]: `auto` (detected),
/// `none`, `gzip` or `zlib`, read as [`Compression::parse`] reads them.
mod compression_word {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use super::Compression;

    pub fn serialize<S: Serializer>(value: &Option<Compression>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            None => s.serialize_str("auto"),
            Some(c) => s.collect_str(c),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Compression>, D::Error> {
        let given = String::deserialize(d)?;
        Compression::parse(&given).ok_or_else(|| {
            D::Error::custom(format!(
                "compression {given:?}: expected auto, none, gzip or zlib"
            ))
        })
    }
}
