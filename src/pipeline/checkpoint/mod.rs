//! The pipeline's checkpoint, end to end: what a state holds, how it is
//! encoded, and how it is tied to its pipeline.
//!
//! # What a state holds
//!
//! Positions and counters, never data. [`Batches::state`](super::Batches::state)
//! gives the state after the last batch delivered; a pipeline built with
//! [`resume_from`](super::Pipeline::resume_from) reads again what it needs
//! and continues with exactly the batches an uninterrupted run would have
//! produced. A state is a tree:
//!
//! ```text
//! pipeline  (batches delivered, logical streams of the job, steps left out)
//! └── stream/i  (one per logical stream this host runs: its fingerprint)
//!     ├── shuffle       RNG counter, buffer positions, draining, finished
//!     ├── epochs        epoch, records emitted this epoch
//!     ├── skip_take     records past the record shard this epoch
//!     ├── record_shard  records the interleave produced this epoch
//!     ├── interleave    file order position, cursor, per slot (file, offset)
//!     └── group         records pulled but in no delivered batch yet
//! ```
//!
//! Every op owns its part — a key, a version and a protobuf body — and
//! saves and restores it next to its `next` (see `parts.rs`); adding an op
//! adds a part, never a field of the tree. The group part holds the records
//! waiting in length buckets, in an open packed batch or in a chunk out for
//! `filter_rows`, as (file, offset) positions, with how many values of the
//! first one are already packed.
//!
//! Positions are stored sorted and delta-coded, plus each slot's rank in the
//! sorted list (`positions.rs`): about 4 bytes per buffered record, so a
//! 10 000-record shuffle buffer takes ~40 KB whatever the records' size.
//!
//! A host saves the streams it runs. Logical streams are what make a state
//! move between host counts: a job of `L` streams runs them on any host
//! count that divides `L`, each host the streams of its slice; the states of
//! all hosts merged ([`merge`]) hold every stream, and each host of the new
//! job takes the streams it now runs (docs/many-hosts.md).
//!
//! # Encoding
//!
//! ```text
//! magic "INFS" | format version u32 | body length u32 | CRC32C u32 | body
//! ```
//! All integers little-endian; the CRC32C covers the version, the length
//! and the body. The body is the tree, each node a protobuf message (key,
//! version, body, children). Format 1 was the bare message of earlier
//! builds, without the header, refused as not a state; format 2 one flat
//! message per host, refused by its number; format 3 the tree of today
//! with the first fingerprint (numbered fields, `fingerprint.rs`), refused
//! by its number too.
//!
//! A state that is cut short, damaged, of another format or from another
//! pipeline is refused with its own [`StateError`]; every part is checked
//! against the pipeline on restore (file indexes, slots, cursors, epochs,
//! counters, buffer sizes; offsets are checked when the records there are
//! read again), so a bad state is an error, never a panic or a different run.
//!
//! # Fingerprint
//!
//! A stream's part restores only into the same stream of the pipeline it
//! was taken from (`fingerprint.rs`): the fingerprint covers, step by step
//! in the order records pass them, the settings that decide which records,
//! in which order, make up each stream's rows of a batch — the stream's
//! files and their slices, the interleave and its file order, the global
//! shuffle, the record share, skip/take, whether a record filter or map is
//! set, the epochs, the shuffle buffer and its seed, the mixture's choice,
//! the steps on parsed columns (a tokenizer's digest, a length filter's
//! bounds), the grouping (rows per stream, buckets, packing) with the
//! feature it measures, the stream's place and equal batches — and one
//! that moves no record: the masks, when not the default, so a state saved
//! with other masks is refused though it would give the same records. How
//! a batch is otherwise parsed and padded (spec types, cast, decode,
//! padding) does not move a record, and may change between a save and a
//! restore.

mod fingerprint;
mod parts;
pub(crate) mod positions;

use std::collections::BTreeMap;
use std::sync::Arc;

use prost::Message;

use super::error::StateError;
use super::skip_steps::SkipSteps;

pub(crate) use fingerprint::{Identity, StepWriter};
pub(crate) use parts::{NodeProto, OpPart, Part, RawParts, SavedParts, prost_part};
pub(crate) use positions::{Coded, Position, code_positions, decode_positions};

/// The first bytes of every state.
const MAGIC: [u8; 4] = *b"INFS";
/// Bumped when the meaning of the header or of the tree changes.
pub(crate) const FORMAT_VERSION: u32 = 4;
/// Magic, version, body length, CRC32C.
const HEADER_LEN: usize = 16;

const ROOT_KEY: &str = "pipeline";
const ROOT_VERSION: u32 = 1;
const STREAM_VERSION: u32 = 1;

/// Where one logical stream is: its ops' parts and its grouping's.
#[derive(Clone, Debug)]
pub(crate) struct StreamSnapshot {
    /// The stream's index among the pipeline's logical streams.
    pub index: u32,
    pub fingerprint: u32,
    pub chain: Arc<SavedParts>,
    /// The grouping's part: records pulled from the ops but in no batch
    /// delivered yet.
    pub group: Arc<dyn Part>,
}

/// Where a host is: each logical stream it runs, in stream order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    pub streams: Vec<StreamSnapshot>,
}

/// The root's body.
#[derive(Clone, PartialEq, prost::Message)]
struct RootProto {
    /// Batches (steps) delivered so far.
    #[prost(uint64, tag = "1")]
    batches: u64,
    /// The job's logical streams.
    #[prost(uint32, tag = "2")]
    streams: u32,
    /// Global steps the run leaves out: a, b, … for each `[a, b)`.
    #[prost(uint64, repeated, tag = "3")]
    skip: Vec<u64>,
}

/// A stream node's body.
#[derive(Clone, PartialEq, prost::Message)]
struct StreamProto {
    #[prost(uint32, tag = "1")]
    index: u32,
    #[prost(uint32, tag = "2")]
    fingerprint: u32,
}

fn stream_key(index: u32) -> String {
    format!("stream/{index}")
}

/// Serializes a host's state after `batches` delivered batches, in a job
/// of `streams` logical streams that leaves out the steps `skip`.
pub(crate) fn encode(snapshot: &Snapshot, batches: u64, streams: u32, skip: &SkipSteps) -> Vec<u8> {
    let children = snapshot
        .streams
        .iter()
        .map(|s| {
            let mut parts = s.chain.nodes();
            parts.push(NodeProto {
                key: s.group.key().into(),
                version: s.group.version(),
                body: s.group.encode(),
                children: Vec::new(),
            });
            NodeProto {
                key: stream_key(s.index),
                version: STREAM_VERSION,
                body: StreamProto {
                    index: s.index,
                    fingerprint: s.fingerprint,
                }
                .encode_to_vec(),
                children: parts,
            }
        })
        .collect();
    seal_root(batches, streams, skip.flat(), children)
}

fn seal_root(batches: u64, streams: u32, skip: Vec<u64>, children: Vec<NodeProto>) -> Vec<u8> {
    let root = NodeProto {
        key: ROOT_KEY.into(),
        version: ROOT_VERSION,
        body: RootProto {
            batches,
            streams,
            skip,
        }
        .encode_to_vec(),
        children,
    };
    seal(&root.encode_to_vec())
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
        return Err(StateError::OldFormat {
            found: version,
            supported: FORMAT_VERSION,
        });
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

/// A state read back: its counters and its streams' parts, by stream index.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub batches: u64,
    /// The logical streams of the job that saved it.
    pub streams: u32,
    /// The steps the run leaves out.
    pub skip: SkipSteps,
    pub parts: BTreeMap<u32, StreamNode>,
}

/// One stream's node, read back.
#[derive(Debug)]
pub(crate) struct StreamNode {
    pub fingerprint: u32,
    pub parts: Vec<NodeProto>,
}

impl StreamNode {
    /// Checks the stream's fingerprint and hands over its parts, for the
    /// grouping and the chain's ops to take each its own.
    pub fn open(self, index: u32, fingerprint: u32) -> Result<RawParts, StateError> {
        if self.fingerprint != fingerprint {
            return Err(StateError::OtherPipeline {
                found: self.fingerprint,
                expected: fingerprint,
            });
        }
        RawParts::new(stream_key(index), self.parts)
    }
}

/// Reads a state's tree back (the parts are checked by their ops).
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded, StateError> {
    let root = NodeProto::decode(open(bytes)?)
        .map_err(|e| StateError::Corrupt(format!("its body does not decode: {e}")))?;
    if root.key != ROOT_KEY || root.version != ROOT_VERSION {
        return Err(StateError::Part {
            part: root.key,
            reason: format!(
                "the root of a state is `{ROOT_KEY}` version {ROOT_VERSION}, this is version {}",
                root.version
            ),
        });
    }
    let body = RootProto::decode(root.body.as_slice()).map_err(|e| StateError::Part {
        part: ROOT_KEY.into(),
        reason: format!("it does not decode: {e}"),
    })?;
    let mut parts = BTreeMap::new();
    for node in root.children {
        let stream = StreamProto::decode(node.body.as_slice()).map_err(|e| StateError::Part {
            part: node.key.clone(),
            reason: format!("it does not decode: {e}"),
        })?;
        if node.key != stream_key(stream.index) || node.version != STREAM_VERSION {
            return Err(StateError::Part {
                part: node.key,
                reason: format!(
                    "a stream node is `{}` version {STREAM_VERSION}",
                    stream_key(stream.index)
                ),
            });
        }
        if stream.index >= body.streams {
            return Err(StateError::Streams(format!(
                "it holds stream {} of a job of {} streams",
                stream.index, body.streams
            )));
        }
        let node = StreamNode {
            fingerprint: stream.fingerprint,
            parts: node.children,
        };
        if parts.insert(stream.index, node).is_some() {
            return Err(StateError::Streams(format!(
                "it holds stream {} twice",
                stream.index
            )));
        }
    }
    Ok(Decoded {
        batches: body.batches,
        streams: body.streams,
        skip: SkipSteps::from_flat(&body.skip)?,
        parts,
    })
}

/// Merges the states of several hosts of one job, taken at the same step,
/// into one that holds all their streams: any host of a job on another
/// host count restores from it, taking the streams it runs.
pub fn merge(states: &[&[u8]]) -> Result<Vec<u8>, StateError> {
    merge_ended(states, &vec![false; states.len()])
}

/// [`merge`], where `ended[i]` says that every stream of state `i`'s host
/// has ended: its streams' nodes are final, so a state of it taken at an
/// earlier step is that host's state at every later step too (the
/// `infeed.ray` trainer merges its actors' states so, an actor being a host
/// of the job). The merged state is of the step the others were taken at
/// (the latest, when every host has ended).
pub fn merge_ended(states: &[&[u8]], ended: &[bool]) -> Result<Vec<u8>, StateError> {
    let mut roots = Vec::with_capacity(states.len());
    for (i, bytes) in states.iter().enumerate() {
        let root = NodeProto::decode(open(bytes)?).map_err(|e| {
            StateError::Corrupt(format!("state {i}: its body does not decode: {e}"))
        })?;
        let body = RootProto::decode(root.body.as_slice()).map_err(|e| {
            StateError::Corrupt(format!("state {i}: its root does not decode: {e}"))
        })?;
        roots.push((root.children, body, ended.get(i).copied().unwrap_or(false)));
    }
    let (_, first, _) = roots
        .first()
        .ok_or_else(|| StateError::Streams("no state to merge".into()))?;
    let (count, skip) = (first.streams, first.skip.clone());
    let live = roots.iter().find(|(_, _, ended)| !ended);
    let step = live.map_or_else(
        || roots.iter().map(|(_, b, _)| b.batches).max().unwrap_or(0),
        |(_, b, _)| b.batches,
    );
    let mut streams: BTreeMap<u32, NodeProto> = BTreeMap::new();
    for (i, (children, body, ended)) in roots.into_iter().enumerate() {
        let same_step = body.batches == step || (ended && body.batches <= step);
        if !same_step || body.streams != count {
            return Err(StateError::Streams(format!(
                "state {i} was taken after {} batches of a job of {} streams, the others \
                 after {step} of {count}: merge the states of one step",
                body.batches, body.streams
            )));
        }
        if body.skip != skip {
            return Err(StateError::Streams(format!(
                "state {i} leaves out other steps than state 0: merge the states of one run"
            )));
        }
        for node in children {
            let index = StreamProto::decode(node.body.as_slice())
                .map_err(|e| StateError::Corrupt(format!("state {i}: a stream node: {e}")))?
                .index;
            match streams.get(&index) {
                Some(seen) if *seen != node => {
                    return Err(StateError::Streams(format!(
                        "state {i} holds stream {index}, which an earlier state holds \
                         differently: these are states of different runs"
                    )));
                }
                _ => {
                    streams.insert(index, node);
                }
            }
        }
    }
    Ok(seal_root(
        step,
        count,
        skip,
        streams.into_values().collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state that leaves no step out.
    fn enc(snapshot: &Snapshot, batches: u64, streams: u32) -> Vec<u8> {
        encode(snapshot, batches, streams, &SkipSteps::default())
    }

    #[test]
    fn skipped_steps_travel_and_must_agree_to_merge() {
        let snapshot = Snapshot {
            streams: vec![stream(0)],
        };
        let skip = SkipSteps::new(&[(5, 9), (20, 21)]).unwrap();
        let bytes = encode(&snapshot, 3, 1, &skip);
        assert_eq!(decode(&bytes).unwrap().skip, skip);
        assert_eq!(
            decode(&enc(&snapshot, 3, 1)).unwrap().skip,
            SkipSteps::default()
        );
        let err = merge(&[&bytes, &enc(&snapshot, 3, 1)]).unwrap_err();
        assert!(err.to_string().contains("leaves out other steps"), "{err}");
        assert_eq!(
            decode(&merge(&[&bytes, &bytes]).unwrap()).unwrap().skip,
            skip
        );
    }
    use crate::pipeline::group::part::GroupPart;
    use crate::pipeline::ops::epochs::EpochsPart;
    use crate::pipeline::ops::shuffle::ShufflePart;
    use crate::pipeline::rng::{CounterRng, domain};

    /// 960 records waiting in buckets, the first with 17 values packed.
    fn waiting(replay_skip: u64) -> GroupPart {
        GroupPart {
            replay: (0..960u64)
                .map(|i| ((i % 4) as u32, 60_000_000 + i * 1_300))
                .collect(),
            replay_skip,
            replay_quiet: 0,
        }
    }

    /// A stream's snapshot with 10 000 buffered records of ~1 KB from 4
    /// files, in shuffled slot order, and the records `waiting` (17).
    fn stream(index: u32) -> StreamSnapshot {
        let mut rng = CounterRng::new(u64::from(index), domain::SHUFFLE, 0);
        let mut buffer: Vec<(u32, u64)> = (0..10_000u64)
            .map(|i| ((i % 4) as u32, 50_000_000 + i * 1_100))
            .collect();
        rng.shuffle(&mut buffer);
        let mut chain = SavedParts::default();
        chain.push(ShufflePart {
            rng_counter: 5_000,
            buffer: buffer.into(),
            draining: false,
            finished: false,
        });
        chain.push(EpochsPart {
            epoch: 3,
            emitted: 60,
        });
        StreamSnapshot {
            index,
            fingerprint: 0xfeed + index,
            chain: Arc::new(chain),
            group: Arc::new(waiting(17)),
        }
    }

    /// Decodes a stream's parts back into the snapshot's values.
    fn read_back(decoded: &mut Decoded, index: u32) -> (GroupPart, ShufflePart, EpochsPart) {
        let node = decoded.parts.remove(&index).unwrap();
        let mut parts = node.open(index, 0xfeed + index).unwrap();
        let group = parts.take::<GroupPart>().unwrap();
        let shuffle = parts.take::<ShufflePart>().unwrap();
        let epochs = parts.take::<EpochsPart>().unwrap();
        parts.finish().unwrap();
        (group, shuffle, epochs)
    }

    #[test]
    fn a_host_state_round_trips_and_stays_under_64_kib_with_a_large_buffer() {
        let snapshot = Snapshot {
            streams: vec![stream(1)],
        };
        let bytes = enc(&snapshot, 42, 4);
        assert!(bytes.len() < 52 * 1024, "{} bytes", bytes.len());
        assert_eq!(&bytes[..8], b"INFS\x04\0\0\0");
        let mut decoded = decode(&bytes).unwrap();
        assert_eq!((decoded.batches, decoded.streams), (42, 4));
        let (group, shuffle, epochs) = read_back(&mut decoded, 1);
        let original = stream(1);
        assert_eq!(group, waiting(17));
        assert_eq!(
            epochs,
            EpochsPart {
                epoch: 3,
                emitted: 60
            }
        );
        assert_eq!(shuffle.rng_counter, 5_000);
        assert_eq!(shuffle.buffer.len(), 10_000);
        assert_eq!(shuffle.encode_body(), original.chain.nodes()[0].body);
        // Another stream's fingerprint is another pipeline.
        let mut decoded = decode(&bytes).unwrap();
        let node = decoded.parts.remove(&1).unwrap();
        assert!(matches!(
            node.open(1, 7),
            Err(StateError::OtherPipeline {
                found: 0xfeee,
                expected: 7
            })
        ));
    }

    #[test]
    fn every_cut_is_truncated_and_every_flip_is_caught() {
        let bytes = enc(
            &Snapshot {
                streams: vec![stream(0)],
            },
            42,
            1,
        );
        for cut in (0..bytes.len()).step_by(7) {
            let err = decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(err, StateError::Truncated { found, expected } if found == cut
                    && expected == if cut < HEADER_LEN { HEADER_LEN } else { bytes.len() }),
                "cut at {cut}: {err:?}"
            );
        }
        for at in (0..bytes.len())
            .filter(|at| !(4..12).contains(at))
            .step_by(5)
        {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let err = decode(&bad).unwrap_err();
            assert!(
                matches!(err, StateError::Corrupt(_)),
                "flip at {at}: {err:?}"
            );
        }
    }

    #[test]
    fn states_of_one_step_merge_and_others_are_refused() {
        let a = enc(
            &Snapshot {
                streams: vec![stream(0), stream(1)],
            },
            9,
            4,
        );
        let b = enc(
            &Snapshot {
                streams: vec![stream(3), stream(2)],
            },
            9,
            4,
        );
        let merged = merge(&[&a, &b]).unwrap();
        let mut decoded = decode(&merged).unwrap();
        assert_eq!((decoded.batches, decoded.streams), (9, 4));
        assert_eq!(
            decoded.parts.keys().copied().collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        for index in 0..4 {
            assert_eq!(read_back(&mut decoded, index).0, waiting(17));
        }
        // Merging again, or with a part of itself, changes nothing.
        assert_eq!(merge(&[&merged, &a]).unwrap(), merged);
        let later = enc(
            &Snapshot {
                streams: vec![stream(2)],
            },
            10,
            4,
        );
        let err = merge(&[&a, &later]).unwrap_err();
        assert!(
            err.to_string().contains("merge the states of one step"),
            "{err}"
        );
        let mut other = stream(0);
        other.group = Arc::new(waiting(1));
        let other = enc(
            &Snapshot {
                streams: vec![other],
            },
            9,
            4,
        );
        let err = merge(&[&a, &other]).unwrap_err();
        assert!(
            err.to_string().contains("states of different runs"),
            "{err}"
        );
        assert!(matches!(merge(&[]), Err(StateError::Streams(_))));
    }

    #[test]
    fn an_ended_hosts_earlier_state_merges_at_the_others_step() {
        let of = |index, batches| {
            enc(
                &Snapshot {
                    streams: vec![stream(index)],
                },
                batches,
                2,
            )
        };
        let (ended, live) = (of(0, 4), of(1, 9));
        let merged = merge_ended(&[&ended, &live], &[true, false]).unwrap();
        let decoded = decode(&merged).unwrap();
        assert_eq!((decoded.batches, decoded.streams), (9, 2));
        assert_eq!(decoded.parts.keys().copied().collect::<Vec<_>>(), [0, 1]);
        // Every host ended: the latest step.
        let both = merge_ended(&[&ended, &live], &[true, true]).unwrap();
        assert_eq!(decode(&both).unwrap().batches, 9);
        // Not said to have ended, or ended after the others' step: refused.
        for (states, flags) in [
            ([&ended, &live], [false, false]),
            ([&live, &of(0, 12)], [false, true]),
        ] {
            let err = merge_ended(&states.map(Vec::as_slice), &flags).unwrap_err();
            assert!(
                err.to_string().contains("merge the states of one step"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_stream_beyond_the_jobs_count_is_refused() {
        let bytes = enc(
            &Snapshot {
                streams: vec![stream(5)],
            },
            1,
            4,
        );
        let err = decode(&bytes).unwrap_err();
        assert_eq!(err.to_string(), "it holds stream 5 of a job of 4 streams");
    }
}
