//! The pipeline's checkpoint: positions and counters, never data.
//!
//! A prost message, so it is compact (varints, packed lists) and can grow
//! new fields without breaking old checkpoints. The shuffle buffer is stored
//! as (file, offset) positions: sorted and delta-coded, plus the slot order
//! as indices into that sorted list — about 4 bytes per buffered record, so
//! a 10 000-record buffer takes ~40 KB whatever the records' size. The
//! records waiting in length buckets or in an open packed batch (the replay
//! list, see [`group`](super::group)) are stored the same way.

use std::sync::Arc;

use prost::Message;

use super::error::PipelineError;
use super::group::Snapshot;
use super::records::StreamState;

/// Bumped when the meaning of a field changes.
const VERSION: u32 = 1;

#[derive(Clone, PartialEq, prost::Message)]
struct StateProto {
    #[prost(uint32, tag = "1")]
    version: u32,
    /// Fingerprint of the pipeline's description: a state only restores
    /// into the pipeline it was taken from.
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

fn decode_positions(c: &Coded, what: &str) -> Result<Vec<(u32, u64)>, PipelineError> {
    let bad = |m: &str| PipelineError::BadState(format!("{what}: {m}"));
    if c.files.len() != c.counts.len()
        || c.deltas.len() != c.order.len()
        || c.counts.iter().map(|&n| n as usize).sum::<usize>() != c.deltas.len()
    {
        return Err(bad("its lists have inconsistent lengths"));
    }
    let mut sorted = Vec::with_capacity(c.deltas.len());
    let mut deltas = c.deltas.iter();
    for (&file, &count) in c.files.iter().zip(&c.counts) {
        let mut offset = 0u64;
        for _ in 0..count {
            offset = offset
                .checked_add(*deltas.next().ok_or_else(|| bad("truncated"))?)
                .ok_or_else(|| bad("offset overflow"))?;
            sorted.push((file, offset));
        }
    }
    c.order
        .iter()
        .map(|&rank| {
            sorted
                .get(rank as usize)
                .copied()
                .ok_or_else(|| bad("order out of range"))
        })
        .collect()
}

/// Serializes the state after `batches` delivered batches.
pub(crate) fn encode(snapshot: &Snapshot, batches: u64, fingerprint: u32) -> Vec<u8> {
    let state = &*snapshot.stream;
    let buffer = code_positions(&state.buffer);
    let replay = code_positions(&snapshot.replay);
    StateProto {
        version: VERSION,
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
    }
    .encode_to_vec()
}

/// Reads a state back; returns it with the number of batches delivered.
pub(crate) fn decode(bytes: &[u8], fingerprint: u32) -> Result<(Snapshot, u64), PipelineError> {
    let bad = |m: &str| PipelineError::BadState(m.to_owned());
    let p = StateProto::decode(bytes)
        .map_err(|e| PipelineError::BadState(format!("not a pipeline state: {e}")))?;
    if p.version != VERSION {
        return Err(PipelineError::BadState(format!(
            "state version {} (this build reads {VERSION})",
            p.version
        )));
    }
    if p.fingerprint != fingerprint {
        return Err(bad(
            "it was taken from a different pipeline (files, seed or settings differ)",
        ));
    }
    if p.slot_files.len() != p.slot_offsets.len() {
        return Err(bad("its lists have inconsistent lengths"));
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
    };
    Ok((snapshot, p.batches))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_stays_small_with_a_large_buffer() {
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
        let snapshot = Snapshot {
            stream: Arc::new(state),
            replay,
            replay_skip: 17,
        };
        let bytes = encode(&snapshot, 42, 0xfeed);
        assert!(bytes.len() < 52 * 1024, "{} bytes", bytes.len());
        assert_eq!(decode(&bytes, 0xfeed).unwrap(), (snapshot, 42));
        assert!(matches!(
            decode(&bytes, 0xbeef),
            Err(PipelineError::BadState(_))
        ));
        assert!(matches!(
            decode(b"\xff\xff\xff", 0xfeed),
            Err(PipelineError::BadState(_))
        ));
    }
}
