//! The grouping's part of a stream's state: the records it pulled from the
//! ops but put in no delivered batch yet (waiting in buckets, in an open
//! packed batch, in a chunk out for `filter_rows`), as positions, read
//! again and fed back on a restore.

use prost::Message;

use crate::pipeline::checkpoint::{Coded, OpPart, code_positions, decode_positions};
use crate::pipeline::error::StateError;
use crate::pipeline::ops::Restore;

use super::grouping::Grouping;
use super::replay::ReplayList;

/// The grouping's part of a stream: records pulled from the ops but in no
/// emitted batch yet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GroupPart {
    /// (file, offset) of the waiting records, in the order to feed them
    /// again.
    pub replay: ReplayList,
    /// Values of the first replayed record already packed into emitted
    /// batches (a record split across batches).
    pub replay_skip: u64,
    /// The first records of `replay` that wait in the grouper's queues and
    /// are fed back without cutting batches (scheduled buckets).
    pub replay_quiet: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GroupProto {
    #[prost(uint32, repeated, tag = "1")]
    files: Vec<u32>,
    #[prost(uint32, repeated, tag = "2")]
    counts: Vec<u32>,
    #[prost(uint64, repeated, tag = "3")]
    deltas: Vec<u64>,
    #[prost(uint32, repeated, tag = "4")]
    order: Vec<u32>,
    #[prost(uint64, tag = "5")]
    replay_skip: u64,
    #[prost(uint64, tag = "6")]
    replay_quiet: u64,
}

impl OpPart for GroupPart {
    const KEY: &'static str = "group";
    const VERSION: u32 = 1;

    fn encode_body(&self) -> Vec<u8> {
        let c = code_positions(&self.replay.to_vec());
        GroupProto {
            files: c.files,
            counts: c.counts,
            deltas: c.deltas,
            order: c.order,
            replay_skip: self.replay_skip,
            replay_quiet: self.replay_quiet,
        }
        .encode_to_vec()
    }

    fn decode_body(body: &[u8]) -> Result<Self, StateError> {
        let p = GroupProto::decode(body).map_err(|e| StateError::Part {
            part: Self::KEY.into(),
            reason: format!("it does not decode: {e}"),
        })?;
        let replay = decode_positions(
            &Coded {
                files: p.files,
                counts: p.counts,
                deltas: p.deltas,
                order: p.order,
            },
            "waiting records",
        )?;
        Ok(GroupPart {
            replay: replay.into(),
            replay_skip: p.replay_skip,
            replay_quiet: p.replay_quiet,
        })
    }
}

impl GroupPart {
    /// Takes the grouping's part of a stream back, checked (see
    /// [`check`](Self::check)).
    pub fn restore(
        r: &mut Restore<'_>,
        batches: u64,
        grouping: &Grouping,
        files: usize,
        limit: Option<u64>,
    ) -> Result<GroupPart, StateError> {
        let group: GroupPart = r.take()?;
        group.check(batches, grouping, files, limit)?;
        Ok(group)
    }

    /// Checks the grouping's part of a stream: the waiting records name files
    /// of the stream, a packed record's progress only exists when packing,
    /// and a stream with a fixed batch count has not delivered more.
    pub fn check(
        &self,
        batches: u64,
        grouping: &Grouping,
        files: usize,
        limit: Option<u64>,
    ) -> Result<(), StateError> {
        let group = self;
        if let Some(&(file, _)) = group.replay.iter().find(|p| p.0 as usize >= files) {
            return Err(StateError::Invalid {
                field: "waiting records",
                value: u64::from(file),
                reason: format!("a file index; the pipeline has {files} files"),
            });
        }
        let packing = matches!(grouping, Grouping::Pack { .. });
        if group.replay_skip > 0 && (!packing || group.replay.is_empty()) {
            return Err(StateError::Invalid {
                field: "packed values",
                value: group.replay_skip,
                reason: "only a packing pipeline with a waiting record has packed values".into(),
            });
        }
        let scheduled = matches!(grouping, Grouping::Scheduled { .. });
        if group.replay_quiet > group.replay.len() as u64 || (group.replay_quiet > 0 && !scheduled)
        {
            return Err(StateError::Invalid {
                field: "records waiting in scheduled buckets",
                value: group.replay_quiet,
                reason: format!(
                    "only a pipeline with scheduled buckets has them, and at most the {} \
                     waiting records",
                    group.replay.len()
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
}
