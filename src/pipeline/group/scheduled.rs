//! The grouper of scheduled buckets: per-bucket queues filled as records
//! come, and a batch cut whenever the queues can fill the step the
//! [`Schedule`] names (the design: `schedule.rs`). Its waiting records are
//! the replay list, fed back quietly on a restore.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::batch::Bucketer;
use crate::pipeline::ops::Item;

use super::plan::{Emitted, Layout, compact};
use super::schedule::Schedule;

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
