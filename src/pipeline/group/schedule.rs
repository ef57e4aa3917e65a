//! Scheduled buckets: the same shapes on every host at every step, with no
//! message between hosts.
//!
//! When hosts read disjoint shards, a batch padded to its own longest
//! record has a length only its host knows, and hosts of one SPMD step
//! would feed programs of different shapes into the same collectives. Here
//! the length bucket of step `t` is a pure function of `t` and of what every
//! host shares (the global file list and a length histogram read from the
//! same records on every host): the [`Schedule`]. Each host keeps a queue
//! per bucket and fills step `t`'s batch from the queue of its bucket, then
//! from the queues of shorter buckets (a shorter record padded up costs a
//! little padding); longer records wait for a step of their bucket. So a
//! batch holds records of about one length (less padding than one host's
//! batches padded to their longest record), and no record is cut or lost.
//!
//! The schedule draws bucket `b` with probability proportional to the
//! share of records of `b` in the histogram divided by its batch size, so
//! each queue drains as fast as it fills; a small extra share of the last
//! bucket (which takes any record) keeps the queues of long records from
//! drifting upward. With a fixed batch count (equal batches), the last
//! [`TAIL_STEPS`] steps all take the last bucket, so the records still
//! waiting near the end fit whatever their length.
//!
//! Checkpoint: the step is the number of batches delivered; the waiting
//! records are the replay list, queue by queue, fed back *quietly* (no
//! batch is cut while they are fed) and then settled, so a restore rebuilds
//! the same queues and cuts the same batches.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::batch::Bucketer;
use crate::pipeline::ops::Item;
use crate::pipeline::rng::{CounterRng, stream};

use super::plan::{Emitted, Layout, compact};

/// Extra share of steps given to the last bucket, which any record fits:
/// it drains long records that arrived faster than their share.
const LAST_BUCKET_EXTRA: f64 = 1.0 / 32.0;

/// With a fixed batch count, the last steps that all take the last bucket.
pub(crate) const TAIL_STEPS: u64 = 64;

/// Records read from the shared sample, per file and in all, to estimate
/// how records spread over the buckets.
pub(crate) const SAMPLE_PER_FILE: usize = 256;
pub(crate) const SAMPLE_FILES: usize = 8;

/// The bucket of every step: the same on every host.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Schedule {
    seed: u64,
    /// Per bucket, the upper end of its share of the 64-bit draws
    /// (cumulative; the last is `u64::MAX`).
    thresholds: Vec<u64>,
    /// Steps from this one on take the last bucket.
    tail_from: Option<u64>,
}

impl Schedule {
    /// A schedule for buckets of `batch_sizes` whose shared sample held
    /// `counts[b]` records of bucket `b`; `seed` is shared by every host.
    pub fn new(seed: u64, counts: &[u64], batch_sizes: &[usize]) -> Self {
        let last = batch_sizes.len().saturating_sub(1);
        let total: u64 = counts.iter().sum();
        // Steps of a bucket per record of it: 1 / batch size.
        let mut weights: Vec<f64> = batch_sizes
            .iter()
            .enumerate()
            .map(|(b, &size)| {
                let share = match total {
                    0 => f64::from(u8::from(b == last)),
                    _ => counts.get(b).copied().unwrap_or(0) as f64 / total as f64,
                };
                share / size.max(1) as f64
            })
            .collect();
        let sum: f64 = weights.iter().sum();
        for w in &mut weights {
            *w = *w / sum * (1.0 - LAST_BUCKET_EXTRA);
        }
        if let Some(w) = weights.last_mut() {
            *w += LAST_BUCKET_EXTRA;
        }
        let mut cumulative = 0.0;
        let mut thresholds: Vec<u64> = weights
            .iter()
            .map(|w| {
                cumulative += w;
                // 2^64 as f64; the cast saturates at u64::MAX.
                (cumulative * 18_446_744_073_709_551_616.0) as u64
            })
            .collect();
        if let Some(t) = thresholds.last_mut() {
            *t = u64::MAX;
        }
        Schedule {
            seed,
            thresholds,
            tail_from: None,
        }
    }

    /// From step `tail_from` on, every step takes the last bucket.
    pub fn with_tail_from(mut self, tail_from: u64) -> Self {
        self.tail_from = Some(tail_from);
        self
    }

    /// The bucket of step `step`.
    pub fn bucket(&self, step: u64) -> usize {
        let last = self.thresholds.len().saturating_sub(1);
        if self.tail_from.is_some_and(|t| step >= t) {
            return last;
        }
        let draw = CounterRng::new(self.seed, stream::SCHEDULE, step).next_u64();
        self.thresholds.partition_point(|&t| t < draw).min(last)
    }

    /// What the checkpoint's fingerprint covers: the seed, the shares and
    /// the tail.
    pub fn key(&self) -> (u64, &[u64], Option<u64>) {
        (self.seed, &self.thresholds, self.tail_from)
    }
}

/// Groups records into the schedule's buckets, step by step.
pub(crate) struct ScheduledGrouper {
    bucketer: Bucketer<Item>,
    schedule: Arc<Schedule>,
    queues: Vec<VecDeque<Item>>,
    /// The step the next batch is for (batches emitted before it, counted
    /// from the start of the run), and its bucket.
    step: u64,
    current: usize,
    /// Records the current step still needs that can fit it (0: cut it).
    short: usize,
    drop_remainder: bool,
    /// A fixed batch count: at the end of the input a step that no waiting
    /// record fits is an empty batch of its bucket, so that every host
    /// keeps the schedule to the last step.
    fixed_count: bool,
    /// Feeding the replay list of a restore: no batch is cut.
    quiet: bool,
}

impl ScheduledGrouper {
    pub fn new(
        bucketer: Bucketer<Item>,
        schedule: Arc<Schedule>,
        step: u64,
        drop_remainder: bool,
        fixed_count: bool,
    ) -> Self {
        let queues = (0..bucketer.num_buckets())
            .map(|_| VecDeque::new())
            .collect();
        let mut grouper = ScheduledGrouper {
            bucketer,
            schedule,
            queues,
            step,
            current: 0,
            short: 0,
            drop_remainder,
            fixed_count,
            quiet: false,
        };
        grouper.next_step(step);
        grouper
    }

    /// Moves to step `step`: its bucket, and what it lacks.
    fn next_step(&mut self, step: u64) {
        self.step = step;
        self.current = self.schedule.bucket(step);
        self.short = self.shortfall();
    }

    /// The current step's bucket.
    fn bucket(&self) -> usize {
        self.current
    }

    /// Records waiting that fit `bucket` (its own and shorter buckets').
    fn fitting(&self, bucket: usize) -> usize {
        self.queues[..=bucket].iter().map(VecDeque::len).sum()
    }

    /// Records the current step still lacks.
    fn shortfall(&self) -> usize {
        let b = self.bucket();
        self.bucketer.batch_size(b).saturating_sub(self.fitting(b))
    }

    pub fn push(&mut self, item: Item, len: usize, out: &mut Vec<Emitted>) {
        let bucket = self.bucketer.bucket_of(len).min(self.queues.len() - 1);
        self.queues[bucket].push_back(compact(item));
        if bucket <= self.bucket() {
            self.short = self.short.saturating_sub(1);
        }
        if !self.quiet {
            self.settle(out);
        }
    }

    /// Stops (`true`) or resumes cutting batches; resuming cuts those the
    /// waiting records already fill.
    pub fn set_quiet(&mut self, quiet: bool, out: &mut Vec<Emitted>) {
        self.quiet = quiet;
        if !quiet {
            self.next_step(self.step);
            self.settle(out);
        }
    }

    /// Cuts every step the waiting records fill.
    fn settle(&mut self, out: &mut Vec<Emitted>) {
        while self.short == 0 {
            let b = self.bucket();
            let group = self.take(b, self.bucketer.batch_size(b));
            out.push(group);
        }
    }

    /// The current step's batch of bucket `b`: up to `n` records from
    /// bucket `b`'s queue, then from the next shorter ones, each in
    /// arrival order.
    fn take(&mut self, b: usize, n: usize) -> Emitted {
        let mut items = Vec::with_capacity(n);
        for queue in self.queues[..=b].iter_mut().rev() {
            let k = (n - items.len()).min(queue.len());
            items.extend(queue.drain(..k));
            if items.len() == n {
                break;
            }
        }
        self.next_step(self.step + 1);
        Emitted {
            items,
            layout: Layout::Bucket(b),
            replay: self.waiting(),
            replay_skip: 0,
            replay_quiet: true,
        }
    }

    /// The waiting records, queue by queue, each in arrival order: fed
    /// again in this order into an empty grouper, they rebuild its queues.
    fn waiting(&self) -> Vec<(u32, u64)> {
        self.queues
            .iter()
            .flatten()
            .map(|i| (i.file, i.offset))
            .collect()
    }

    /// At the end of the input: the next step's batch from the records
    /// still waiting, if any.
    pub fn finish_one(&mut self) -> Option<Emitted> {
        if self.queues.iter().all(VecDeque::is_empty) {
            return None;
        }
        let mut b = self.bucket();
        if self.fitting(b) == 0 {
            if self.fixed_count {
                return Some(self.empty());
            }
            // Hosts no longer step together once one runs out: the
            // waiting records go out in the last bucket, which fits all.
            b = self.queues.len() - 1;
        }
        let size = self.bucketer.batch_size(b);
        let n = size.min(self.fitting(b));
        if n < size && self.drop_remainder {
            self.queues.iter_mut().for_each(VecDeque::clear);
            return None;
        }
        Some(self.take(b, n))
    }

    /// An empty batch for the current step (a host past its records that
    /// must reach the batch count).
    pub fn empty(&mut self) -> Emitted {
        let b = self.bucket();
        self.next_step(self.step + 1);
        Emitted {
            items: Vec::new(),
            layout: Layout::Bucket(b),
            replay: self.waiting(),
            replay_skip: 0,
            replay_quiet: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn item(n: u64) -> Item {
        Item::new(Bytes::from(n.to_string()), 0, n)
    }

    fn offsets(e: &Emitted) -> Vec<u64> {
        e.items.iter().map(|i| i.offset).collect()
    }

    #[test]
    fn the_schedule_follows_the_shares_and_is_the_same_for_the_same_inputs() {
        let s = Schedule::new(5, &[600, 300, 100], &[4, 4, 4]);
        assert_eq!(s, Schedule::new(5, &[600, 300, 100], &[4, 4, 4]));
        let mut seen = [0u32; 3];
        for step in 0..100_000 {
            seen[s.bucket(step)] += 1;
        }
        // 0.6, 0.3, 0.1 of 31/32, plus 1/32 for the last.
        let expected = [0.58125, 0.290625, 0.128125];
        for (b, e) in expected.iter().enumerate() {
            let got = f64::from(seen[b]) / 100_000.0;
            assert!((got - e).abs() < 0.01, "{seen:?}");
        }
        assert_ne!(
            (0..64).map(|t| s.bucket(t)).collect::<Vec<_>>(),
            (0..64)
                .map(|t| Schedule::new(6, &[600, 300, 100], &[4, 4, 4]).bucket(t))
                .collect::<Vec<_>>()
        );
        let tail = s.clone().with_tail_from(10);
        assert!((10..50).all(|t| tail.bucket(t) == 2));
        assert!((0..10).all(|t| tail.bucket(t) == s.bucket(t)));
    }

    #[test]
    fn a_step_takes_its_bucket_then_shorter_records_and_long_ones_wait() {
        // Buckets: (0, 10], (10, 20], (20, ...); the schedule always says 1.
        let bucketer = Bucketer::new(vec![10, 20], vec![3, 3, 3]).unwrap();
        let schedule = Arc::new(Schedule::new(0, &[0, 1, 0], &[3, 3, 3]));
        let step_one = (0..1000).find(|&t| schedule.bucket(t) == 1).unwrap();
        let mut g = ScheduledGrouper::new(bucketer, schedule.clone(), step_one, false, false);
        let mut out = Vec::new();
        // Long (bucket 2), short (0), mid (1): one record fits bucket 1 yet...
        g.push(item(1), 25, &mut out);
        g.push(item(2), 5, &mut out);
        g.push(item(3), 15, &mut out);
        assert!(out.is_empty());
        // ...a third that fits completes the step: its own first, then shorter.
        g.push(item(4), 12, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(offsets(&out[0]), [3, 4, 2]);
        assert_eq!(out[0].layout, Layout::Bucket(1));
        // The long record waits, and is the replay list.
        assert_eq!(out[0].replay, [(0, 1)]);
    }

    #[test]
    fn fed_back_quietly_the_waiting_records_cut_the_same_batches() {
        let bucketer = Bucketer::new(vec![10, 20], vec![2, 3, 4]).unwrap();
        let schedule = Arc::new(Schedule::new(3, &[5, 3, 2], &[2, 3, 4]));
        let lengths = [5, 25, 15, 7, 30, 12, 3, 18, 22, 9, 1, 14, 27, 16, 4, 11];
        let run = |from: usize, step: u64, replay: &[(u64, usize)]| {
            let mut g =
                ScheduledGrouper::new(bucketer.clone(), schedule.clone(), step, false, false);
            let mut out = Vec::new();
            g.set_quiet(true, &mut out);
            for &(n, len) in replay {
                g.push(item(n), len, &mut out);
            }
            g.set_quiet(false, &mut out);
            for (n, &len) in lengths.iter().enumerate().skip(from) {
                g.push(item(n as u64), len, &mut out);
            }
            while let Some(e) = g.finish_one() {
                out.push(e);
            }
            out
        };
        let full = run(0, 0, &[]);
        let all: usize = full.iter().map(|e| e.items.len()).sum();
        assert_eq!(all, lengths.len());
        // Cut after every batch whose input point is known: restore there.
        let mut fed = 0;
        for (k, e) in full.iter().enumerate() {
            // Records fed before batch k was cut: those in batches so far and waiting.
            let taken: usize = full[..=k].iter().map(|e| e.items.len()).sum();
            fed = fed.max(taken + e.replay.len());
            if fed > lengths.len() {
                break;
            }
            let replay: Vec<(u64, usize)> = e
                .replay
                .iter()
                .map(|&(_, o)| (o, lengths[o as usize]))
                .collect();
            let rest = run(fed, k as u64 + 1, &replay);
            let want: Vec<Vec<u64>> = full[k + 1..].iter().map(offsets).collect();
            let got: Vec<Vec<u64>> = rest.iter().map(offsets).collect();
            assert_eq!(got, want, "restored after batch {k}");
        }
    }
}
