//! Opening a logical stream: its chain built (one record chain, or a
//! mixture of its sources' chains: `open_mix.rs`), its fingerprint taken
//! from what each op, the grouping and the stream write into it, and the
//! chain started or restored from the stream's node of a state. The run
//! and the batch count of `equal_batches` open streams the same way.

use super::checkpoint::{Identity, StreamNode};
use super::error::PipelineError;
use super::group::grouping::RecordWork;
use super::group::part::GroupPart;
use super::loaded::Loaded;
use super::open_mix;
use super::ops::Restore;
use super::ops::chain::RecordChain;
use super::ops::stream_chain::StreamChain;
use super::settings::{RecordSettings, stream_identity};
use super::stats::StreamCounters;

/// Opens the logical streams of one job.
pub(crate) struct Opener<'a> {
    pub p: &'a RecordSettings,
    /// What the pipeline read at its start.
    pub loaded: &'a Loaded,
    /// The job's logical streams.
    pub streams: u64,
    /// One stream's work: its grouping (its share of the rows) and how it
    /// measures records.
    pub record: &'a RecordWork,
    pub counters: StreamCounters,
}

/// A logical stream's chain, started or restored, with what its state
/// needs.
pub(crate) struct Opened {
    pub chain: StreamChain,
    /// Its files (file indexes in its records and state point here).
    pub files: Vec<String>,
    pub fingerprint: u32,
    /// Records pulled but in no delivered batch (from a state; else none).
    pub group: GroupPart,
}

/// Where a restore starts: the batches delivered before it and, with a
/// fixed batch count, how many the stream delivers in all.
#[derive(Clone, Copy, Default)]
pub(crate) struct Resume {
    pub batches_before: u64,
    pub total_batches: Option<u64>,
}

impl Opener<'_> {
    /// Logical stream `index`: from its start, or from its `node` of a
    /// state (its fingerprint, then the grouping's part and each op's part
    /// checked).
    pub fn open(
        &self,
        index: u64,
        node: Option<StreamNode>,
        resume: Resume,
    ) -> Result<Opened, PipelineError> {
        let (mut chain, files) = self.build(index)?;
        let mut id = Identity::default();
        chain.identity(&mut id);
        self.record.identity(&mut id);
        let place = match &self.p.mixture {
            Some(_) => self.host_of_mixture(index),
            None => {
                (self.p.host.is_some() || self.p.streams.is_some()).then_some((index, self.streams))
            }
        };
        stream_identity(&mut id, place, self.p.equal_batches, self.p.streams);
        let fingerprint = id.fingerprint();
        let group = match node {
            None => {
                chain.start();
                GroupPart::default()
            }
            Some(node) => {
                // One shape from here down: the grouping takes its part,
                // then the chain (a mixture: each source's group) its own.
                let mut r = Restore::root(node.open(index as u32, fingerprint)?);
                let group = GroupPart::restore(
                    &mut r,
                    resume.batches_before,
                    &self.record.grouping,
                    files.len(),
                    resume.total_batches,
                )?;
                chain.restore(&mut r)?;
                r.finish()?;
                group
            }
        };
        Ok(Opened {
            chain,
            files,
            fingerprint,
            group,
        })
    }

    /// Stream `index`'s chain, not started, and its files.
    fn build(&self, index: u64) -> Result<(StreamChain, Vec<String>), PipelineError> {
        match &self.p.mixture {
            None => {
                let cfg = self.p.stream_config(
                    index,
                    self.streams,
                    self.record.scan.as_ref(),
                    self.loaded,
                );
                let chain = RecordChain::new(&cfg, &self.counters)?;
                let files = chain.files().to_vec();
                Ok((StreamChain::One(chain), files))
            }
            Some(mix) => {
                let (chain, files) = open_mix::build(
                    self.p,
                    mix,
                    self.loaded,
                    (index, self.streams),
                    self.record,
                    &self.counters,
                )?;
                Ok((StreamChain::Mix(chain), files))
            }
        }
    }

    /// The place of a mixture's stream `index`: among the job's streams
    /// when the mixture is sharded, else as its sources are.
    fn host_of_mixture(&self, index: u64) -> Option<(u64, u64)> {
        let mix = self.p.mixture.as_ref()?;
        if self.p.host.is_some() || self.p.streams.is_some() {
            return Some((index, self.streams));
        }
        mix.sources
            .first()
            .and_then(|(_, s)| s.host)
            .map(|(_, n)| (index, n))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::batch::Bucketer;
    use crate::pipeline::group::grouping::Grouping;
    use crate::pipeline::ops::chain::{ChainConfig, ChainSettings};
    use crate::pipeline::ops::epochs::EpochsSettings;
    use crate::pipeline::ops::interleave::{InterleaveSettings, RecordRange, StreamFiles};
    use crate::pipeline::ops::shuffle::ShuffleSettings;
    use crate::pipeline::parsed::FilterStep;
    use crate::pipeline::settings::EqualBatches;

    /// What a stream's fingerprint is made of, for the test to vary.
    struct Key {
        files: Vec<String>,
        ranges: Vec<Option<RecordRange>>,
        ops: ChainSettings,
        seed: u64,
        order_seed: Option<u64>,
        work: RecordWork,
        place: Option<(u64, u64)>,
        equal: Option<EqualBatches>,
        streams: Option<u64>,
    }

    impl Key {
        fn new(grouping: Grouping) -> Key {
            let mut work = RecordWork::fixed(0, false);
            work.grouping = grouping;
            Key {
                files: vec![
                    "gs://bucket/train-00000.tfrecord".to_owned(),
                    "gs://bucket/train-00001.tfrecord".to_owned(),
                ],
                ranges: Vec::new(),
                ops: ChainSettings {
                    interleave: InterleaveSettings {
                        shuffle_files: true,
                        cycle_length: 4,
                        block_length: 1,
                    },
                    epochs: EpochsSettings { repeat: Some(None) },
                    shuffle: ShuffleSettings {
                        buffer: 10_000,
                        across_epochs: false,
                    },
                    ..ChainSettings::default()
                },
                seed: 7,
                order_seed: None,
                work,
                place: Some((1, 2)),
                equal: None,
                streams: None,
            }
        }

        fn identity(&self) -> Identity {
            let cfg = ChainConfig {
                ops: self.ops.clone(),
                files: Arc::new(StreamFiles {
                    files: self.files.clone(),
                    ranges: self.ranges.clone(),
                    read: Default::default(),
                    source: Default::default(),
                    scan: None,
                    unread: None,
                    spans: None,
                    kept: None,
                    order_seed: self.order_seed,
                }),
                seed: self.seed,
                record_shard: None,
                place: (0, 1),
                job_seed: self.seed,
                dataset: None,
            };
            let chain = RecordChain::new(&cfg, &StreamCounters::default()).unwrap();
            let mut id = Identity::default();
            chain.identity(&mut id);
            self.work.identity(&mut id);
            stream_identity(&mut id, self.place, self.equal, self.streams);
            id
        }

        fn fingerprint(&self) -> u32 {
            self.identity().fingerprint()
        }
    }

    /// One setting changed.
    type Change = dyn Fn(&mut Key);

    fn fixed() -> Grouping {
        Grouping::Rows {
            batch_size: 256,
            drop_remainder: true,
        }
    }

    /// The fingerprint of a fixed pipeline is pinned: if this test fails,
    /// every saved checkpoint would be refused by the new build. Change the
    /// encoding only on purpose, with a new fingerprint version and state
    /// format.
    #[test]
    fn fingerprint_of_a_fixed_pipeline_is_pinned() {
        let k = Key::new(fixed());
        assert_eq!(k.fingerprint(), 0xfb5c_e0cb);
        // Version 2, then the first step: "files", its body's length, two
        // files, the first 32 bytes long.
        let le = |v: u64| v.to_le_bytes();
        let head = [&[2u8][..], &le(5), b"files", &le(96), &le(2), &le(32), b"g"].concat();
        assert_eq!(k.identity().encode()[..head.len()], head);
        // The steps in the order records pass them.
        let names: Vec<String> = steps(&k.identity());
        assert_eq!(
            names,
            [
                "files",
                "interleave",
                "repeat",
                "shuffle",
                "batch",
                "stream"
            ]
        );
        // Each setting moves it.
        let base = k.fingerprint();
        let changes: Vec<Box<Change>> = vec![
            Box::new(|k| k.seed = 8),
            Box::new(|k| k.place = None),
            Box::new(|k| k.order_seed = Some(0)),
            Box::new(|k| k.ops.skip_take.take = Some(0)),
            Box::new(|k| k.ops.skip_take.skip = 1),
            Box::new(|k| k.ops.epochs.repeat = Some(Some(1))),
            Box::new(|k| k.ops.shuffle.across_epochs = true),
            Box::new(|k| k.ops.shuffle.buffer = 9_999),
            Box::new(|k| k.ops.interleave.block_length = 2),
            Box::new(|k| k.ops.interleave.shuffle_files = false),
            Box::new(|k| k.ops.record_map.map = Some(Arc::new(|b| b))),
            Box::new(|k| k.work.column_steps = vec![Arc::new(FilterStep(Arc::new(|_, _| true)))]),
            Box::new(|k| k.work.length_feature = Some(String::new())),
            Box::new(|k| k.work.masks = "*=none;".into()),
            Box::new(|k| k.files.truncate(1)),
            Box::new(|k| k.streams = Some(2)),
            Box::new(|k| k.equal = Some(EqualBatches::Pad)),
            Box::new(|k| k.ranges = vec![None, Some(RecordRange { first: 0, count: 5 })]),
            Box::new(|k| k.ranges = vec![None, Some(RecordRange { first: 1, count: 4 })]),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut k = Key::new(fixed());
            change(&mut k);
            assert_ne!(k.fingerprint(), base, "change {i}");
        }
        // Buckets are encoded by their boundaries and batch sizes.
        let k = Key::new(Grouping::Bucket {
            bucketer: Bucketer::new(vec![64, 128], vec![8, 4, 2]).unwrap(),
            drop_remainder: false,
        });
        let tail: Vec<u8> = [2u64, 64, 128]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .chain(3u64.to_le_bytes())
            .chain([8u64, 4, 2].iter().flat_map(|v| v.to_le_bytes()))
            .chain([0u8])
            .collect();
        let id = k.identity();
        let encoded = id.encode();
        assert!(
            encoded.windows(tail.len()).any(|w| w == tail.as_slice()),
            "{encoded:?}"
        );
        assert_eq!(k.fingerprint(), 0xde4a_db12);
        // Strings are length-prefixed: moving a byte between two file names
        // is another pipeline.
        let mut moved = Key::new(fixed());
        moved.files = vec!["ab".to_owned(), "c".to_owned()];
        let mut other = Key::new(fixed());
        other.files = vec!["a".to_owned(), "bc".to_owned()];
        assert_ne!(moved.fingerprint(), other.fingerprint());
    }

    /// The names of the steps of an encoding, in order.
    fn steps(id: &Identity) -> Vec<String> {
        let bytes = id.encode();
        let (mut names, mut at) = (Vec::new(), 1);
        let len = |at: &mut usize| {
            let n = u64::from_le_bytes(bytes[*at..*at + 8].try_into().unwrap()) as usize;
            *at += 8;
            n
        };
        while at < bytes.len() {
            let n = len(&mut at);
            names.push(String::from_utf8(bytes[at..at + n].to_vec()).unwrap());
            at += n;
            let body = len(&mut at);
            at += body;
        }
        names
    }

    #[test]
    fn steps_at_their_no_op_settings_write_nothing() {
        let mut k = Key::new(fixed());
        k.ops = ChainSettings::default();
        k.place = None;
        assert_eq!(
            steps(&k.identity()),
            ["files", "interleave", "batch", "stream"]
        );
    }
}
