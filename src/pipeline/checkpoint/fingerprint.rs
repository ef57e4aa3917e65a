//! The fingerprint that ties a state to its pipeline: the CRC32C of a
//! versioned, length-prefixed encoding of exactly the settings that decide
//! which records, in which order, make up each batch.

use crate::batch::{Bucketer, Overflow};
use crate::pipeline::group::grouping::Grouping;
use crate::pipeline::ops::RecordRange;
use crate::pipeline::settings::EqualBatches;

/// Bumped when the fingerprint's encoding changes (which refuses every
/// state taken before).
const FINGERPRINT_VERSION: u8 = 1;

/// The settings that decide which records, in which order, make up each
/// batch: all that the fingerprint covers.
pub(crate) struct SequenceKey<'a> {
    /// The stream's files, after sharding.
    pub files: &'a [String],
    /// Their record ranges (TFDS split slices); empty: whole files.
    pub ranges: &'a [Option<RecordRange>],
    pub host: Option<(u64, u64)>,
    pub seed: u64,
    /// The seed of the file order where it is not `seed` (record sharding
    /// orders files by a seed shared by all hosts); `None`: `seed`.
    pub file_order_seed: Option<u64>,
    pub shuffle_files: bool,
    pub cycle_length: u64,
    pub block_length: u64,
    pub skip: u64,
    pub take: Option<u64>,
    pub record_filter: bool,
    pub record_map: bool,
    pub shuffle_buffer: u64,
    /// `None`: forever.
    pub epochs: Option<u64>,
    pub shuffle_across_epochs: bool,
    pub equal_batches: Option<EqualBatches>,
    pub grouping: &'a Grouping,
    /// The feature whose length buckets or packs records.
    pub length_feature: Option<&'a str>,
    /// The parsed ops in builder order: `m` a map, `f` a filter.
    pub parsed_ops: &'a str,
    /// The mask settings (`ParsedSettings::mask_key`, batching/), empty when default.
    pub masks: &'a str,
    /// The job's logical streams when it sets them (`host` is then the
    /// stream's index among them).
    pub streams: Option<u64>,
    /// A mixture's choice and exhaustion policy (its sources and weights
    /// are not here: they may change between a save and a restore).
    pub mixture: Option<u64>,
}

/// A canonical encoding: each field a tag byte then its value, integers
/// little-endian u64, strings and lists length-prefixed, options a 0/1 byte.
struct KeyWriter(Vec<u8>);

impl KeyWriter {
    fn tag(&mut self, tag: u8) -> &mut Self {
        self.0.push(tag);
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bool(&mut self, v: bool) -> &mut Self {
        self.0.push(u8::from(v));
        self
    }
    fn opt(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            None => self.bool(false),
            Some(v) => self.bool(true).u64(v),
        }
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn list(&mut self, v: &[usize]) -> &mut Self {
        self.u64(v.len() as u64);
        for &x in v {
            self.u64(x as u64);
        }
        self
    }
    /// A bucketer's boundaries, then its batch sizes.
    fn buckets<T>(&mut self, bucketer: &Bucketer<T>) -> &mut Self {
        let n = bucketer.num_buckets();
        let boundaries: Vec<usize> = (0..n).filter_map(|b| bucketer.pad_to(b)).collect();
        let batch_sizes: Vec<usize> = (0..n).map(|b| bucketer.batch_size(b)).collect();
        self.list(&boundaries).list(&batch_sizes)
    }
}

impl SequenceKey<'_> {
    /// The canonical bytes the fingerprint is the CRC32C of.
    fn encode(&self) -> Vec<u8> {
        let mut w = KeyWriter(vec![FINGERPRINT_VERSION]);
        w.tag(1).u64(self.files.len() as u64);
        for file in self.files {
            w.str(file);
        }
        match self.host {
            None => w.tag(2).bool(false),
            Some((index, count)) => w.tag(2).bool(true).u64(index).u64(count),
        };
        w.tag(3).u64(self.seed);
        w.tag(4).bool(self.shuffle_files);
        w.tag(5).u64(self.cycle_length).u64(self.block_length);
        w.tag(6).u64(self.skip).opt(self.take);
        w.tag(7).bool(self.record_filter).bool(self.record_map);
        w.tag(8).u64(self.shuffle_buffer);
        w.tag(9).opt(self.epochs).bool(self.shuffle_across_epochs);
        w.tag(10).u64(match self.equal_batches {
            None => 0,
            Some(EqualBatches::Drop) => 1,
            Some(EqualBatches::Pad) => 2,
        });
        match self.grouping {
            Grouping::Fixed {
                batch_size,
                drop_remainder,
            } => w
                .tag(11)
                .u64(1)
                .u64(*batch_size as u64)
                .bool(*drop_remainder),
            Grouping::Bucket {
                bucketer,
                drop_remainder,
            } => w.tag(11).u64(2).buckets(bucketer).bool(*drop_remainder),
            Grouping::Scheduled {
                bucketer,
                schedule,
                drop_remainder,
            } => {
                w.tag(11).u64(4).buckets(bucketer).bool(*drop_remainder);
                if let Some(schedule) = schedule {
                    let (seed, shares, tail) = schedule.key();
                    w.tag(16).u64(seed).u64(shares.len() as u64);
                    for &share in shares {
                        w.u64(share);
                    }
                    w.opt(tail);
                }
                &mut w
            }
            Grouping::Pack {
                row_length,
                batch_size,
                overflow,
                feature: _, // the length feature below
                drop_remainder,
            } => w
                .tag(11)
                .u64(3)
                .u64(*row_length as u64)
                .u64(*batch_size as u64)
                .u64(match overflow {
                    Overflow::Error => 0,
                    Overflow::KeepStart => 1,
                    Overflow::KeepEnd => 2,
                    Overflow::Split => 3,
                })
                .bool(*drop_remainder),
        };
        match self.length_feature {
            None => w.tag(12).bool(false),
            Some(f) => w.tag(12).bool(true).str(f),
        };
        w.tag(13).str(self.parsed_ops);
        // Added after version 1 and only where it applies, so every other
        // pipeline keeps its fingerprint (and its saved states).
        if let Some(seed) = self.file_order_seed {
            w.tag(14).u64(seed);
        }
        // Masks do not move the sequence, but a state restored under other
        // masks would feed a step tensors it was not saved with.
        if !self.masks.is_empty() {
            w.tag(15).str(self.masks);
        }
        // Streams set by the job: their seeds are derived, and the state
        // moves between host counts.
        if let Some(streams) = self.streams {
            w.tag(17).u64(streams);
        }
        if let Some(code) = self.mixture {
            w.tag(19).u64(code);
        }
        // A file's range is part of what it is: the same file with another
        // slice gives other records at the same offsets.
        if !self.ranges.is_empty() {
            w.tag(18).u64(self.ranges.len() as u64);
            for range in self.ranges {
                match range {
                    None => w.bool(false),
                    Some(r) => w.bool(true).u64(r.first).u64(r.count),
                };
            }
        }
        w.0
    }

    /// The fingerprint stored in every state of this pipeline.
    pub(crate) fn fingerprint(&self) -> u32 {
        crc32c::crc32c(&self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(files: &'a [String], grouping: &'a Grouping) -> SequenceKey<'a> {
        SequenceKey {
            files,
            ranges: &[],
            host: Some((1, 2)),
            seed: 7,
            file_order_seed: None,
            shuffle_files: true,
            cycle_length: 4,
            block_length: 1,
            skip: 0,
            take: None,
            record_filter: false,
            record_map: false,
            shuffle_buffer: 10_000,
            epochs: None,
            shuffle_across_epochs: false,
            equal_batches: None,
            grouping,
            length_feature: None,
            parsed_ops: "",
            masks: "",
            streams: None,
            mixture: None,
        }
    }

    /// The fingerprint of a fixed pipeline is pinned: if this test fails,
    /// every saved checkpoint would be refused by the new build. Change the
    /// encoding only on purpose, with a new `FINGERPRINT_VERSION`.
    #[test]
    fn fingerprint_of_a_fixed_pipeline_is_pinned() {
        let files = vec![
            "gs://bucket/train-00000.tfrecord".to_owned(),
            "gs://bucket/train-00001.tfrecord".to_owned(),
        ];
        let grouping = Grouping::Fixed {
            batch_size: 256,
            drop_remainder: true,
        };
        let k = key(&files, &grouping);
        assert_eq!(k.fingerprint(), 0x143d_525e);
        // Version 1, then tag 1: two files, the first 32 bytes long.
        assert_eq!(
            k.encode()[..19],
            [1, 1, 2, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, b'g']
        );
        // Each setting moves it.
        let base = k.fingerprint();
        let changed = [
            SequenceKey {
                seed: 8,
                ..key(&files, &grouping)
            },
            SequenceKey {
                host: None,
                ..key(&files, &grouping)
            },
            SequenceKey {
                file_order_seed: Some(7),
                ..key(&files, &grouping)
            },
            SequenceKey {
                take: Some(0),
                ..key(&files, &grouping)
            },
            SequenceKey {
                epochs: Some(1),
                ..key(&files, &grouping)
            },
            SequenceKey {
                shuffle_across_epochs: true,
                ..key(&files, &grouping)
            },
            SequenceKey {
                record_map: true,
                ..key(&files, &grouping)
            },
            SequenceKey {
                parsed_ops: "f",
                ..key(&files, &grouping)
            },
            SequenceKey {
                length_feature: Some(""),
                ..key(&files, &grouping)
            },
            SequenceKey {
                masks: "*=none;",
                ..key(&files, &grouping)
            },
            SequenceKey {
                files: &files[..1],
                ..key(&files, &grouping)
            },
            SequenceKey {
                streams: Some(2),
                ..key(&files, &grouping)
            },
            SequenceKey {
                ranges: &[None, Some(RecordRange { first: 0, count: 5 })],
                ..key(&files, &grouping)
            },
            SequenceKey {
                ranges: &[None, Some(RecordRange { first: 1, count: 4 })],
                ..key(&files, &grouping)
            },
        ];
        for (i, k) in changed.iter().enumerate() {
            assert_ne!(k.fingerprint(), base, "change {i}");
        }
        // Buckets are encoded by their boundaries and batch sizes.
        let buckets = Grouping::Bucket {
            bucketer: crate::batch::Bucketer::new(vec![64, 128], vec![8, 4, 2]).unwrap(),
            drop_remainder: false,
        };
        let k = key(&files, &buckets);
        let tail: Vec<u8> = [&[11u8][..], &2u64.to_le_bytes(), &2u64.to_le_bytes()]
            .concat()
            .into_iter()
            .chain([64u64, 128].iter().flat_map(|v| v.to_le_bytes()))
            .chain(3u64.to_le_bytes())
            .chain([8u64, 4, 2].iter().flat_map(|v| v.to_le_bytes()))
            .chain([0u8])
            .collect();
        let encoded = k.encode();
        assert!(
            encoded.windows(tail.len()).any(|w| w == tail.as_slice()),
            "{encoded:?}"
        );
        assert_eq!(k.fingerprint(), 0x832a_0f6b);
        // Strings are length-prefixed: moving a byte between two file names
        // is another pipeline.
        let moved = vec!["ab".to_owned(), "c".to_owned()];
        let other = vec!["a".to_owned(), "bc".to_owned()];
        assert_ne!(
            key(&moved, &grouping).fingerprint(),
            key(&other, &grouping).fingerprint()
        );
    }
}
