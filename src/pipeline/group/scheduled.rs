//! The grouper of scheduled buckets: per-bucket queues filled as records
//! come, and a batch cut whenever the queues can fill the step the
//! [`Schedule`] names (the design: `schedule.rs`). Its waiting records are
//! the replay list, fed back quietly on a restore.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::Bucketer;
use crate::pipeline::item::Item;

use super::{Emitted, compact};

use super::raw_batch::GroupLayout;
use super::replay::ReplayList;
use super::schedule::Schedule;
use crate::pipeline::checkpoint::positions::Position;

/// Steps a record waits in its queue before it is copied out of the chunk
/// it is a slice of ([`compact`]). Most records leave within a few steps:
/// copying each one as it came cost an allocation and a copy per record,
/// a fifth of the record thread's time (lm, 2 hosts), while a record that
/// waits longer must not pin its chunk (a shuffle's output chunk, a read
/// chunk) for long. Young records pin at most this many steps' chunks.
const COMPACT_AFTER: u64 = 8;

/// One bucket's waiting records, in arrival order.
#[derive(Default)]
struct Queue {
    /// The records, each with the step at which it came.
    items: VecDeque<(Item, u64)>,
    /// Their positions: blocks already shared with a replay list (never
    /// changed again), then those that came since, in `open`; the waiting
    /// records' positions start at index `first` of the first of them.
    /// Each batch's replay list takes these blocks by reference
    /// (`replay.rs`).
    blocks: VecDeque<Arc<Vec<Position>>>,
    open: Vec<Position>,
    first: usize,
    /// The first `compacted` records no longer pin their chunk.
    compacted: usize,
}

impl Queue {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn push(&mut self, item: Item, step: u64) {
        self.open.push((item.file, item.offset));
        self.items.push_back((item, step));
    }

    /// Moves the first `k` records to `out`.
    fn take_front(&mut self, k: usize, out: &mut Vec<Item>) {
        out.extend(self.items.drain(..k).map(|(item, _)| item));
        self.compacted = self.compacted.saturating_sub(k);
        self.first += k;
        while let Some(block) = self.blocks.front() {
            if self.first < block.len() {
                return;
            }
            self.first -= block.len();
            self.blocks.pop_front();
        }
        if self.first == self.open.len() {
            self.open.clear();
            self.first = 0;
        }
    }

    /// Appends the waiting records' positions to `replay`; from here on
    /// they are shared, so the next records start a new block.
    fn share_positions(&mut self, replay: &mut ReplayList) {
        if !self.open.is_empty() {
            self.blocks
                .push_back(Arc::new(std::mem::take(&mut self.open)));
        }
        let mut start = self.first;
        for block in &self.blocks {
            replay.push_shared(block, start);
            start = 0;
        }
    }

    /// Copies out the records that came before step `before` (the oldest
    /// are first).
    fn compact_older(&mut self, before: u64) {
        while let Some((item, came)) = self.items.get_mut(self.compacted) {
            if *came >= before {
                break;
            }
            *item = compact(std::mem::replace(item, Item::new(Bytes::new(), 0, 0)));
            self.compacted += 1;
        }
    }

    fn clear(&mut self) {
        self.items.clear();
        self.blocks.clear();
        self.open.clear();
        self.first = 0;
        self.compacted = 0;
    }
}

/// Groups records into the schedule's buckets, step by step.
pub(crate) struct ScheduledGrouper {
    bucketer: Bucketer<Item>,
    schedule: Arc<Schedule>,
    queues: Vec<Queue>,
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
            .map(|_| Queue::default())
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
        let before = step.saturating_sub(COMPACT_AFTER);
        for queue in &mut self.queues {
            queue.compact_older(before);
        }
        self.current = self.schedule.bucket(step);
        self.short = self.shortfall();
    }

    /// The current step's bucket.
    fn bucket(&self) -> usize {
        self.current
    }

    /// Records waiting that fit `bucket` (its own and shorter buckets').
    fn fitting(&self, bucket: usize) -> usize {
        self.queues[..=bucket].iter().map(Queue::len).sum()
    }

    /// Records the current step still lacks.
    fn shortfall(&self) -> usize {
        let b = self.bucket();
        self.bucketer.batch_size(b).saturating_sub(self.fitting(b))
    }

    pub fn push(&mut self, item: Item, len: usize, out: &mut Vec<Emitted>) {
        let bucket = self.bucketer.bucket_of(len).min(self.queues.len() - 1);
        self.queues[bucket].push(item, self.step);
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
            queue.take_front(k, &mut items);
            if items.len() == n {
                break;
            }
        }
        self.next_step(self.step + 1);
        Emitted {
            items,
            layout: GroupLayout::bucket(b),
            replay: self.waiting(),
            replay_skip: 0,
            replay_quiet: true,
        }
    }

    /// The waiting records, queue by queue, each in arrival order: fed
    /// again in this order into an empty grouper, they rebuild its queues.
    fn waiting(&mut self) -> ReplayList {
        let mut replay = ReplayList::default();
        for queue in &mut self.queues {
            queue.share_positions(&mut replay);
        }
        replay
    }

    /// At the end of the input: the next step's batch from the records
    /// still waiting, if any. It has the step's rows, so that it joins the
    /// other streams' groups of the step (`threads/streams.rs`): the
    /// waiting records that fit the step's bucket, or, when none does, as
    /// many as its rows and the last bucket's batches hold, padded to the
    /// last bucket's length, which fits all (a shape `shapes()` lists for
    /// every bucket's rows). Waiting for the schedule to name a bucket they
    /// fit could take many steps of padding. With `drop_remainder`, a batch
    /// that holds fewer than that ends the stream.
    pub fn finish_one(&mut self) -> Option<Emitted> {
        let last = self.queues.len() - 1;
        if self.fitting(last) == 0 {
            return None;
        }
        let b = self.bucket();
        let length = if self.fitting(b) > 0 { b } else { last };
        if length > b && self.fixed_count {
            return Some(self.empty());
        }
        let full = self
            .bucketer
            .batch_size(b)
            .min(self.bucketer.batch_size(length));
        let n = full.min(self.fitting(length));
        if n < full && self.drop_remainder {
            self.queues.iter_mut().for_each(Queue::clear);
            return None;
        }
        let mut group = self.take(length, n);
        group.layout = GroupLayout::Bucket { rows: b, length };
        Some(group)
    }

    /// An empty batch for the current step (a host past its records that
    /// must reach the batch count).
    pub fn empty(&mut self) -> Emitted {
        let b = self.bucket();
        self.next_step(self.step + 1);
        Emitted {
            items: Vec::new(),
            layout: GroupLayout::bucket(b),
            replay: self.waiting(),
            replay_skip: 0,
            replay_quiet: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(n: u64) -> Item {
        Item::new(Bytes::from(n.to_string()), 0, n)
    }

    fn offsets(e: &Emitted) -> Vec<u64> {
        e.items.iter().map(|i| i.offset).collect()
    }

    proptest::proptest! {
        /// Whatever the pushes, takes and shares, a queue's shared
        /// positions are exactly its waiting records', in order.
        #[test]
        fn a_queue_shares_exactly_the_positions_of_its_waiting_records(
            ops in proptest::collection::vec((0u8..3, 1usize..40), 1..80),
        ) {
            let mut queue = Queue::default();
            let mut model = VecDeque::new();
            let mut next = 0u64;
            for (op, n) in ops {
                match op {
                    0 => for _ in 0..n {
                        queue.push(item(next), 0);
                        model.push_back((0u32, next));
                        next += 1;
                    },
                    1 => {
                        let k = n.min(queue.len());
                        let mut out = Vec::new();
                        queue.take_front(k, &mut out);
                        let taken: Vec<(u32, u64)> = model.drain(..k).collect();
                        proptest::prop_assert_eq!(offsets_of(&out), taken);
                    }
                    _ => {
                        let mut replay = ReplayList::default();
                        queue.share_positions(&mut replay);
                        proptest::prop_assert_eq!(replay.to_vec(), Vec::from(model.clone()));
                    }
                }
            }
            let mut replay = ReplayList::default();
            queue.share_positions(&mut replay);
            proptest::prop_assert_eq!(replay.to_vec(), Vec::from(model));
        }
    }

    fn offsets_of(items: &[Item]) -> Vec<(u32, u64)> {
        items.iter().map(|i| (i.file, i.offset)).collect()
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
        assert_eq!(out[0].layout, GroupLayout::bucket(1));
        // The long record waits, and is the replay list.
        assert_eq!(out[0].replay.to_vec(), [(0, 1)]);
    }

    /// At the end of the input, a record that fits the step's bucket
    /// leaves in it; when none does, the step's rows take as many records
    /// as the last bucket's batches hold, padded to its length; with
    /// `drop_remainder`, a batch short of that ends the stream; with a fixed
    /// count, the step is an empty batch of its bucket.
    #[test]
    fn at_the_end_the_waiting_records_keep_the_steps_rows() {
        // Buckets (0, 10] and (10, ...), batches of 4 and 2; from `start`
        // on, four steps of bucket 0, which no long record fits.
        let bucketer = Bucketer::new(vec![10], vec![4, 2]).unwrap();
        let schedule = Arc::new(Schedule::new(0, &[1, 0], &[4, 2]));
        let start = (0..).find(|&t| (t..t + 4).all(|s| schedule.bucket(s) == 0));
        let start = start.unwrap();
        let tail = GroupLayout::Bucket { rows: 0, length: 1 };
        let waiting = |drop: bool, fixed: bool| {
            let (b, s) = (bucketer.clone(), schedule.clone());
            let mut g = ScheduledGrouper::new(b, s, start, drop, fixed);
            let mut out = Vec::new();
            for (n, len) in [(1, 20), (2, 5), (3, 30), (4, 25)] {
                g.push(item(n), len, &mut out);
            }
            assert!(out.is_empty());
            g
        };
        let mut g = waiting(false, false);
        let first = g.finish_one().unwrap();
        assert_eq!(
            (offsets(&first), &first.layout),
            (vec![2], &GroupLayout::bucket(0))
        );
        let second = g.finish_one().unwrap();
        assert_eq!((offsets(&second), &second.layout), (vec![1, 3], &tail));
        assert_eq!(second.replay.to_vec(), [(0, 4)]);
        let third = g.finish_one().unwrap();
        assert_eq!((offsets(&third), &third.layout), (vec![4], &tail));
        assert!(g.finish_one().is_none());
        // Dropping the remainder: the short record's batch is short of 4.
        assert!(waiting(true, false).finish_one().is_none());
        // A fixed count keeps the schedule: the short record, then steps
        // of bucket 0 that no waiting record fits.
        let mut g = waiting(false, true);
        assert_eq!(offsets(&g.finish_one().unwrap()), [2]);
        let empty = g.finish_one().unwrap();
        assert!(empty.items.is_empty());
        assert_eq!(empty.layout, GroupLayout::bucket(0));
    }

    /// With `drop_remainder`, a tail batch as full as the last bucket's
    /// batches leaves; the rest ends the stream.
    #[test]
    fn dropping_the_remainder_keeps_tail_batches_the_last_bucket_fills() {
        let bucketer = Bucketer::new(vec![10], vec![4, 2]).unwrap();
        let schedule = Arc::new(Schedule::new(0, &[1, 0], &[4, 2]));
        let start = (0..).find(|&t| (t..t + 3).all(|s| schedule.bucket(s) == 0));
        let mut g = ScheduledGrouper::new(bucketer, schedule, start.unwrap(), true, false);
        let mut out = Vec::new();
        for n in 1..=5 {
            g.push(item(n), 20, &mut out);
        }
        assert_eq!(offsets(&g.finish_one().unwrap()), [1, 2]);
        assert_eq!(offsets(&g.finish_one().unwrap()), [3, 4]);
        assert!(g.finish_one().is_none());
    }

    /// A record that leaves within `COMPACT_AFTER` steps goes on as the
    /// slice it came as; one that waits longer is copied out of its chunk.
    #[test]
    fn only_records_that_wait_long_are_copied_out_of_their_chunk() {
        // Buckets (0, 10] and (10, ...), batches of 1; step t's bucket is
        // whatever the schedule draws, so feed short records and one long.
        let bucketer = Bucketer::new(vec![10], vec![1, 1]).unwrap();
        // A schedule whose first step of bucket 1 comes after
        // COMPACT_AFTER steps: the long record waits that long.
        let first_long = |s: &Schedule| (0..).find(|&t| s.bucket(t) == 1).unwrap();
        let schedule = (0..)
            .map(|seed| Schedule::new(seed, &[100, 1], &[1, 1]))
            .find(|s| first_long(s) > COMPACT_AFTER + 1)
            .map(Arc::new)
            .unwrap();
        let mut g = ScheduledGrouper::new(bucketer, schedule.clone(), 0, false, false);
        let chunk = Bytes::from(vec![7u8; 64]);
        let slice = |n: u64| Item::new(chunk.slice(n as usize..n as usize + 1), 0, n);
        let mut out = Vec::new();
        // The long record waits for a step of bucket 1 while short ones
        // pass; put it in first.
        let first_long = first_long(&schedule);
        g.push(slice(0), 20, &mut out);
        let mut n = 1;
        while g.step <= first_long {
            g.push(slice(n), 5, &mut out);
            n += 1;
        }
        let shares = |i: &Item| chunk.as_ptr_range().contains(&i.data.as_ptr());
        let all: Vec<&Item> = out.iter().flat_map(|e| &e.items).collect();
        let long = all.iter().find(|i| i.offset == 0).expect("its step came");
        assert!(!shares(long), "it waited long: copied out");
        // Short records of bucket 0 left at once, as slices.
        assert!(all.iter().filter(|i| i.offset != 0).all(|i| shares(i)));
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
