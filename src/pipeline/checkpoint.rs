//! The pipeline's checkpoint, end to end: what a state holds, how it is
//! encoded, and how it is tied to its pipeline.
//!
//! # What a state holds
//!
//! Positions and counters, never data. [`Batches::state`](super::Batches::state)
//! gives the state after the last batch delivered; a pipeline built with
//! [`resume_from`](super::Pipeline::resume_from) reads again what it needs
//! and continues with exactly the batches an uninterrupted run would have
//! produced. A state holds:
//!
//! - the number of batches delivered so far;
//! - the epoch, and where this epoch's file order stands (the next file to
//!   open, the interleave slot read next and the records taken from it in
//!   the current block);
//! - per interleave slot, the file it reads and the byte offset of its next
//!   record;
//! - the counters of record sharding, skip/take and of the records emitted
//!   this epoch;
//! - the shuffle's random number generator (one counter: the generator is
//!   counter-based) and, per buffer slot, the (file, offset) of the record
//!   it holds, and whether the buffer is draining or the run finished;
//! - the records already pulled but in no delivered batch yet (waiting in
//!   length buckets, in an open packed batch, or in a chunk out for
//!   `filter_rows`), as (file, offset) positions, and how many values of
//!   the first one are already packed.
//!
//! Positions are stored sorted and delta-coded, plus each slot's rank in the
//! sorted list: about 4 bytes per buffered record, so a 10 000-record
//! shuffle buffer takes ~40 KB whatever the records' size.
//!
//! # Encoding
//!
//! ```text
//! magic "INFS" | format version u32 | body length u32 | CRC32C u32 | body
//! ```
//! All integers little-endian; the CRC32C covers the version, the length
//! and the body. The body is a protobuf message: compact
//! (varints, packed lists), and it can grow new fields without breaking old
//! states. Format 1 was the bare message of earlier builds, without the
//! header; it is refused as not a state.
//!
//! A state that is cut short, damaged, of a newer format or from another
//! pipeline is refused with its own [`StateError`]; every field is checked
//! against the pipeline on restore (file indexes, slots, cursors, epochs,
//! counters, buffer sizes; offsets are checked when the records there are
//! read again), so a bad state is an error, never a panic or a different run.
//!
//! # Fingerprint
//!
//! A state restores only into the pipeline it was taken from. The
//! fingerprint is the CRC32C of a versioned, length-prefixed encoding of
//! exactly the settings that decide which records, in which order, make up
//! each batch: the host's files, host sharding, seed (and the shared seed
//! of the file order under record sharding, where it differs), file shuffle, interleave, skip/take, whether record filter and map are
//! set, shuffle buffer, epochs and where `repeat` stands, equal batches, the
//! grouping (batch size, buckets, packing) with the feature it measures, and
//! the order of the parsed ops. How a batch is parsed and padded (spec
//! types, cast, decode, padding) does not move a record, and may change
//! between a save and a restore.

use std::sync::Arc;

use prost::Message;

use super::error::StateError;
use super::group::plan::{EqualBatches, GroupMode};
use super::ops::{RecordRange, StreamState};
use crate::batch::{Bucketer, Overflow};

/// The first bytes of every state.
const MAGIC: [u8; 4] = *b"INFS";
/// Bumped when the meaning of the header or of a body field changes.
pub(crate) const FORMAT_VERSION: u32 = 2;
/// Magic, version, body length, CRC32C.
const HEADER_LEN: usize = 16;

/// Bumped when the fingerprint's encoding changes (which refuses every
/// state taken before).
const FINGERPRINT_VERSION: u8 = 1;

/// Where a pipeline is: the record ops' state and the records to feed
/// again before them. Positions only, never data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub stream: Arc<StreamState>,
    /// (file, offset) of records pulled from the ops but in no emitted
    /// batch yet, in the order to feed them again.
    pub replay: Vec<(u32, u64)>,
    /// Values of the first replayed record already packed into emitted
    /// batches (a record split across batches).
    pub replay_skip: u64,
    /// The first records of `replay` that wait in the grouper's queues and
    /// are fed back without cutting batches (scheduled buckets).
    pub replay_quiet: u64,
}

/// The body of a state.
#[derive(Clone, PartialEq, prost::Message)]
struct StateProto {
    /// The pipeline's fingerprint: a state only restores into the pipeline
    /// it was taken from.
    #[prost(uint32, tag = "2")]
    fingerprint: u32,
    #[prost(uint64, tag = "3")]
    batches: u64,
    #[prost(uint64, tag = "4")]
    epoch: u64,
    #[prost(uint64, tag = "5")]
    next_file: u64,
    #[prost(uint64, tag = "6")]
    cursor: u64,
    #[prost(uint64, tag = "7")]
    in_block: u64,
    #[prost(uint64, tag = "8")]
    ordinal: u64,
    #[prost(uint64, tag = "9")]
    passed: u64,
    #[prost(uint64, tag = "10")]
    emitted: u64,
    #[prost(uint64, tag = "11")]
    rng_counter: u64,
    /// Per interleave slot: file index + 1, or 0 for an empty slot.
    #[prost(uint32, repeated, tag = "12")]
    slot_files: Vec<u32>,
    #[prost(uint64, repeated, tag = "13")]
    slot_offsets: Vec<u64>,
    /// Sorted buffer positions: (file, count) runs, then offset deltas
    /// within each run.
    #[prost(uint32, repeated, tag = "14")]
    buffer_files: Vec<u32>,
    #[prost(uint32, repeated, tag = "15")]
    buffer_counts: Vec<u32>,
    #[prost(uint64, repeated, tag = "16")]
    buffer_deltas: Vec<u64>,
    /// For each buffer slot, the index of its position in the sorted list.
    #[prost(uint32, repeated, tag = "17")]
    buffer_order: Vec<u32>,
    #[prost(bool, tag = "18")]
    draining: bool,
    #[prost(bool, tag = "19")]
    finished: bool,
    /// The replay list (records waiting in buckets or an open packed
    /// batch), coded as the buffer is.
    #[prost(uint32, repeated, tag = "20")]
    replay_files: Vec<u32>,
    #[prost(uint32, repeated, tag = "21")]
    replay_counts: Vec<u32>,
    #[prost(uint64, repeated, tag = "22")]
    replay_deltas: Vec<u64>,
    #[prost(uint32, repeated, tag = "23")]
    replay_order: Vec<u32>,
    /// Values of the first replayed record already packed.
    #[prost(uint64, tag = "24")]
    replay_skip: u64,
    /// Replayed records that wait in scheduled buckets.
    #[prost(uint64, tag = "25")]
    replay_quiet: u64,
    /// Per interleave slot, the record number of its next record in its
    /// file: only for files with record ranges (TFDS split slices), empty
    /// otherwise, so other states keep their bytes.
    #[prost(uint64, repeated, tag = "26")]
    slot_records: Vec<u64>,
}

/// Positions coded compactly: sorted (file, count) runs with offset deltas,
/// and each original slot's rank in the sorted list.
#[derive(Default)]
struct Coded {
    files: Vec<u32>,
    counts: Vec<u32>,
    deltas: Vec<u64>,
    order: Vec<u32>,
}

fn code_positions(positions: &[(u32, u64)]) -> Coded {
    let mut sorted: Vec<(u32, u64, u32)> = positions
        .iter()
        .enumerate()
        .map(|(slot, &(file, offset))| (file, offset, slot as u32))
        .collect();
    sorted.sort_unstable();
    let mut c = Coded {
        order: vec![0u32; sorted.len()],
        ..Coded::default()
    };
    let mut previous: Option<(u32, u64)> = None;
    for (rank, &(file, offset, slot)) in sorted.iter().enumerate() {
        c.order[slot as usize] = rank as u32;
        match (previous, c.counts.last_mut()) {
            (Some((f, o)), Some(count)) if f == file => {
                *count += 1;
                c.deltas.push(offset - o);
            }
            _ => {
                c.files.push(file);
                c.counts.push(1);
                c.deltas.push(offset);
            }
        }
        previous = Some((file, offset));
    }
    c
}

fn decode_positions(c: &Coded, field: &'static str) -> Result<Vec<(u32, u64)>, StateError> {
    let bad = |value: u64, reason: &str| StateError::Invalid {
        field,
        value,
        reason: reason.to_owned(),
    };
    if c.files.len() != c.counts.len() {
        return Err(bad(
            c.counts.len() as u64,
            "its file and count lists differ in length",
        ));
    }
    let total = c.counts.iter().map(|&n| u64::from(n)).sum::<u64>();
    if total != c.deltas.len() as u64 || c.deltas.len() != c.order.len() {
        return Err(bad(total, "its counts, offsets and order disagree"));
    }
    let mut sorted = Vec::with_capacity(c.deltas.len());
    let mut deltas = c.deltas.iter();
    for (&file, &count) in c.files.iter().zip(&c.counts) {
        let mut offset = 0u64;
        for _ in 0..count {
            let delta = deltas
                .next()
                .ok_or_else(|| bad(total, "fewer offsets than counted"))?;
            offset = offset
                .checked_add(*delta)
                .ok_or_else(|| bad(*delta, "an offset overflows"))?;
            sorted.push((file, offset));
        }
    }
    let mut seen = vec![false; sorted.len()];
    c.order
        .iter()
        .map(
            |&rank| match (sorted.get(rank as usize), seen.get_mut(rank as usize)) {
                (Some(&position), Some(seen)) if !*seen => {
                    *seen = true;
                    Ok(position)
                }
                (Some(_), _) => Err(bad(u64::from(rank), "a slot rank appears twice")),
                _ => Err(bad(u64::from(rank), "a slot rank is out of range")),
            },
        )
        .collect()
}

/// Serializes the state after `batches` delivered batches.
pub(crate) fn encode(snapshot: &Snapshot, batches: u64, fingerprint: u32) -> Vec<u8> {
    let state = &*snapshot.stream;
    let buffer = code_positions(&state.buffer);
    let replay = code_positions(&snapshot.replay);
    let body = StateProto {
        fingerprint,
        batches,
        epoch: state.epoch,
        next_file: state.next_file,
        cursor: state.cursor,
        in_block: state.in_block,
        ordinal: state.ordinal,
        passed: state.passed,
        emitted: state.emitted,
        rng_counter: state.rng_counter,
        slot_files: state
            .slots
            .iter()
            .map(|s| s.map_or(0, |(f, _)| f + 1))
            .collect(),
        slot_offsets: state
            .slots
            .iter()
            .map(|s| s.map_or(0, |(_, o)| o))
            .collect(),
        buffer_files: buffer.files,
        buffer_counts: buffer.counts,
        buffer_deltas: buffer.deltas,
        buffer_order: buffer.order,
        draining: state.draining,
        finished: state.finished,
        replay_files: replay.files,
        replay_counts: replay.counts,
        replay_deltas: replay.deltas,
        replay_order: replay.order,
        replay_skip: snapshot.replay_skip,
        replay_quiet: snapshot.replay_quiet,
        slot_records: state.slot_records.clone(),
    }
    .encode_to_vec();
    seal(&body)
}

/// Wraps a body in the header: magic, version, length, checksum.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    // A body is positions of at most a shuffle buffer and a few batches:
    // far below 4 GiB.
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[4..12]), body);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The little-endian u32 at `at` (the caller checked the length).
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// Checks the header and returns the body.
fn open(bytes: &[u8]) -> Result<&[u8], StateError> {
    let head = &bytes[..bytes.len().min(MAGIC.len())];
    if head != &MAGIC[..head.len()] {
        return Err(StateError::Corrupt(
            "it does not begin with \"INFS\": not an infeed pipeline state (or one \
             written before state format 2)"
                .into(),
        ));
    }
    if bytes.len() < HEADER_LEN {
        // A newer format is named as such even when cut short.
        if bytes.len() >= 8 && u32_at(bytes, 4) > FORMAT_VERSION {
            return Err(StateError::NewerFormat {
                found: u32_at(bytes, 4),
                supported: FORMAT_VERSION,
            });
        }
        return Err(StateError::Truncated {
            found: bytes.len(),
            expected: HEADER_LEN,
        });
    }
    let version = u32_at(bytes, 4);
    if version > FORMAT_VERSION {
        return Err(StateError::NewerFormat {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version < FORMAT_VERSION {
        return Err(StateError::Corrupt(format!(
            "state format {version} is not one this build reads ({FORMAT_VERSION})"
        )));
    }
    let expected = HEADER_LEN + u32_at(bytes, 8) as usize;
    if bytes.len() < expected {
        return Err(StateError::Truncated {
            found: bytes.len(),
            expected,
        });
    }
    if bytes.len() > expected {
        return Err(StateError::Corrupt(format!(
            "{} bytes follow its end at byte {expected}",
            bytes.len() - expected
        )));
    }
    let body = &bytes[HEADER_LEN..];
    let stored = u32_at(bytes, 12);
    let computed = crc32c::crc32c_append(crc32c::crc32c(&bytes[4..12]), body);
    if stored != computed {
        return Err(StateError::Corrupt(format!(
            "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        )));
    }
    Ok(body)
}

/// Reads a state back; returns it with the number of batches delivered.
/// The fields are checked for consistency here and against the pipeline
/// where they are restored (see [`check_replay`] and the record stream's
/// restore).
pub(crate) fn decode(bytes: &[u8], fingerprint: u32) -> Result<(Snapshot, u64), StateError> {
    let p = StateProto::decode(open(bytes)?)
        .map_err(|e| StateError::Corrupt(format!("its body does not decode: {e}")))?;
    if p.fingerprint != fingerprint {
        return Err(StateError::OtherPipeline {
            found: p.fingerprint,
            expected: fingerprint,
        });
    }
    if p.slot_files.len() != p.slot_offsets.len() {
        return Err(StateError::Invalid {
            field: "slots",
            value: p.slot_offsets.len() as u64,
            reason: format!("{} files for these offsets", p.slot_files.len()),
        });
    }
    let buffer = decode_positions(
        &Coded {
            files: p.buffer_files,
            counts: p.buffer_counts,
            deltas: p.buffer_deltas,
            order: p.buffer_order,
        },
        "shuffle buffer",
    )?;
    let replay = decode_positions(
        &Coded {
            files: p.replay_files,
            counts: p.replay_counts,
            deltas: p.replay_deltas,
            order: p.replay_order,
        },
        "waiting records",
    )?;
    let slots = p
        .slot_files
        .iter()
        .zip(&p.slot_offsets)
        .map(|(&f, &o)| if f == 0 { None } else { Some((f - 1, o)) })
        .collect();
    let state = StreamState {
        epoch: p.epoch,
        next_file: p.next_file,
        cursor: p.cursor,
        in_block: p.in_block,
        slots,
        slot_records: p.slot_records,
        ordinal: p.ordinal,
        passed: p.passed,
        emitted: p.emitted,
        rng_counter: p.rng_counter,
        buffer,
        draining: p.draining,
        finished: p.finished,
    };
    let snapshot = Snapshot {
        stream: Arc::new(state),
        replay,
        replay_skip: p.replay_skip,
        replay_quiet: p.replay_quiet,
    };
    Ok((snapshot, p.batches))
}

/// Checks the grouping's part of a state: the waiting records name files
/// of the pipeline, a packed record's progress only exists when packing,
/// and a host with a fixed batch count has not delivered more.
pub(crate) fn check_replay(
    snapshot: &Snapshot,
    batches: u64,
    mode: &GroupMode,
    files: usize,
    limit: Option<u64>,
) -> Result<(), StateError> {
    if let Some(&(file, _)) = snapshot.replay.iter().find(|p| p.0 as usize >= files) {
        return Err(StateError::Invalid {
            field: "waiting records",
            value: u64::from(file),
            reason: format!("a file index; the pipeline has {files} files"),
        });
    }
    let packing = matches!(mode, GroupMode::Pack { .. });
    if snapshot.replay_skip > 0 && (!packing || snapshot.replay.is_empty()) {
        return Err(StateError::Invalid {
            field: "packed values",
            value: snapshot.replay_skip,
            reason: "only a packing pipeline with a waiting record has packed values".into(),
        });
    }
    let scheduled = matches!(mode, GroupMode::Scheduled { .. });
    if snapshot.replay_quiet > snapshot.replay.len() as u64
        || (snapshot.replay_quiet > 0 && !scheduled)
    {
        return Err(StateError::Invalid {
            field: "records waiting in scheduled buckets",
            value: snapshot.replay_quiet,
            reason: format!(
                "only a pipeline with scheduled buckets has them, and at most the {} \
                 waiting records",
                snapshot.replay.len()
            ),
        });
    }
    if let Some(limit) = limit.filter(|&n| batches > n) {
        return Err(StateError::Invalid {
            field: "batches",
            value: batches,
            reason: format!("this host emits {limit} batches in all"),
        });
    }
    Ok(())
}

/// The settings that decide which records, in which order, make up each
/// batch: all that the fingerprint covers.
pub(crate) struct SequenceKey<'a> {
    /// The host's files, after host sharding.
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
    pub grouping: &'a GroupMode,
    /// The feature whose length buckets or packs records.
    pub length_feature: Option<&'a str>,
    /// The parsed ops in builder order: `m` a map, `f` a filter.
    pub parsed_ops: &'a str,
    /// The mask settings (batch_plan's `mask_key`), empty when default.
    pub masks: &'a str,
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
            GroupMode::Fixed {
                batch_size,
                drop_remainder,
            } => w
                .tag(11)
                .u64(1)
                .u64(*batch_size as u64)
                .bool(*drop_remainder),
            GroupMode::Bucket {
                bucketer,
                drop_remainder,
            } => w.tag(11).u64(2).buckets(bucketer).bool(*drop_remainder),
            GroupMode::Scheduled {
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
            GroupMode::Pack {
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
        // A file's range is part of what it is: the same file with another
        // slice gives other records at the same offsets.
        if !self.ranges.is_empty() {
            w.tag(17).u64(self.ranges.len() as u64);
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

    fn snapshot() -> Snapshot {
        // 10 000 buffered records of ~1 KB from 4 files, in shuffled slot order.
        let mut rng = super::super::rng::CounterRng::new(1, 0, 0);
        let mut buffer: Vec<(u32, u64)> = (0..10_000u64)
            .map(|i| ((i % 4) as u32, 50_000_000 + i * 1_100))
            .collect();
        rng.shuffle(&mut buffer);
        let state = StreamState {
            epoch: 3,
            next_file: 2,
            cursor: 1,
            in_block: 0,
            slots: vec![Some((0, 123)), None, Some((3, 99_999_999))],
            // Record numbers, as a pipeline with record ranges keeps them.
            slot_records: vec![12, 0, 4_000],
            ordinal: 77,
            passed: 70,
            emitted: 60,
            rng_counter: 5_000,
            buffer,
            draining: false,
            finished: false,
        };
        // And 960 records waiting in buckets (512 + 256 + 128 + 64).
        let replay: Vec<(u32, u64)> = (0..960u64)
            .map(|i| ((i % 4) as u32, 60_000_000 + i * 1_300))
            .collect();
        Snapshot {
            stream: Arc::new(state),
            replay,
            replay_skip: 17,
            replay_quiet: 0,
        }
    }

    #[test]
    fn round_trips_and_stays_small_with_a_large_buffer() {
        let snapshot = snapshot();
        let bytes = encode(&snapshot, 42, 0xfeed);
        assert!(bytes.len() < 52 * 1024, "{} bytes", bytes.len());
        assert_eq!(&bytes[..4], b"INFS");
        assert_eq!(decode(&bytes, 0xfeed).unwrap(), (snapshot, 42));
        assert!(matches!(
            decode(&bytes, 0xbeef),
            Err(StateError::OtherPipeline {
                found: 0xfeed,
                expected: 0xbeef
            })
        ));
        assert!(matches!(
            decode(b"\xff\xff\xff", 0xfeed),
            Err(StateError::Corrupt(_))
        ));
    }

    #[test]
    fn every_cut_is_truncated_and_every_flip_is_caught() {
        let bytes = encode(&snapshot(), 42, 0xfeed);
        for cut in 0..bytes.len() {
            let err = decode(&bytes[..cut], 0xfeed).unwrap_err();
            assert!(
                matches!(err, StateError::Truncated { found, expected } if found == cut
                    && expected == if cut < HEADER_LEN { HEADER_LEN } else { bytes.len() }),
                "cut at {cut}: {err:?}"
            );
        }
        // Every byte but the version's flipped in turn: corrupt (a flipped
        // version byte reads as another format).
        for at in (0..bytes.len()).filter(|at| !(4..8).contains(at)) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let err = decode(&bad, 0xfeed).unwrap_err();
            match at {
                // A length made shorter leaves trailing bytes, longer a cut.
                8..12 => assert!(
                    matches!(err, StateError::Corrupt(_) | StateError::Truncated { .. }),
                    "flip at {at}: {err:?}"
                ),
                _ => assert!(
                    matches!(err, StateError::Corrupt(_)),
                    "flip at {at}: {err:?}"
                ),
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            decode(&longer, 0xfeed),
            Err(StateError::Corrupt(m)) if m.contains("1 bytes follow")
        ));
    }

    #[test]
    fn a_newer_format_is_named_as_such() {
        let mut bytes = encode(&snapshot(), 42, 0xfeed);
        bytes[4..8].copy_from_slice(&3u32.to_le_bytes());
        let err = decode(&bytes, 0xfeed).unwrap_err();
        assert!(
            matches!(
                err,
                StateError::NewerFormat {
                    found: 3,
                    supported: 2
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("newer"), "{err}");
        assert!(matches!(
            decode(&bytes[..9], 0xfeed),
            Err(StateError::NewerFormat { found: 3, .. })
        ));
    }

    #[test]
    fn inconsistent_position_lists_are_invalid_not_a_panic() {
        let body = StateProto {
            fingerprint: 7,
            buffer_files: vec![0],
            buffer_counts: vec![2],
            buffer_deltas: vec![5, 5],
            buffer_order: vec![1, 1],
            ..StateProto::default()
        };
        let err = decode(&seal(&body.encode_to_vec()), 7).unwrap_err();
        assert!(
            matches!(
                err,
                StateError::Invalid {
                    field: "shuffle buffer",
                    ..
                }
            ),
            "{err:?}"
        );
        let body = StateProto {
            fingerprint: 7,
            buffer_files: vec![0],
            buffer_counts: vec![u32::MAX],
            buffer_deltas: vec![5],
            buffer_order: vec![0],
            ..StateProto::default()
        };
        assert!(matches!(
            decode(&seal(&body.encode_to_vec()), 7),
            Err(StateError::Invalid { .. })
        ));
    }

    fn key<'a>(files: &'a [String], grouping: &'a GroupMode) -> SequenceKey<'a> {
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
        let grouping = GroupMode::Fixed {
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
        let buckets = GroupMode::Bucket {
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
