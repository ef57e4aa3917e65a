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
//! The schedule gives bucket `b` a share of the steps proportional to the
//! share of records of `b` in the histogram divided by its batch size, so
//! each queue drains as fast as it fills; a small extra share of the last
//! bucket (which takes any record) keeps the queues of long records from
//! drifting upward. The steps' draws are a low-discrepancy sequence (step
//! `t` draws `offset + t·φ` modulo 2^64, the offset from the seed): over
//! any stretch of steps each bucket's count stays within a few steps of its
//! share. Independent random draws (as the first version had) let each
//! queue's length wander like a random walk of about a batch per step: on
//! lm, host 0 of 2, ~15 000 records waited in the queues, each copied out
//! of its chunk and listed in the state after every batch. With a fixed
//! batch count (equal batches), every step from the tail on takes the last
//! bucket, so the records still waiting near the end fit whatever their
//! length; the tail begins where the first stream's input ends
//! (`equal.rs`, `scheduled_end`).
//!
//! Checkpoint: the step is the number of batches delivered; the waiting
//! records are the replay list, queue by queue, fed back *quietly* (no
//! batch is cut while they are fed) and then settled, so a restore rebuilds
//! the same queues and cuts the same batches.

use crate::pipeline::rng::{CounterRng, domain};

/// Extra share of steps given to the last bucket, which any record fits:
/// it drains long records that arrived faster than their share.
const LAST_BUCKET_EXTRA: f64 = 1.0 / 32.0;

/// Records read from the shared sample, per file and in all, to estimate
/// how records spread over the buckets.
pub(crate) const SAMPLE_PER_FILE: usize = 256;
pub(crate) const SAMPLE_FILES: usize = 8;

/// 2^64 / φ, odd: successive multiples of it spread over 64-bit draws as
/// evenly as any sequence can (the Weyl sequence of the golden ratio).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The bucket of every step: the same on every host.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Schedule {
    seed: u64,
    /// Where the seed starts the sequence of draws.
    offset: u64,
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
            offset: CounterRng::new(seed, domain::SCHEDULE, 0).next_u64(),
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
        let draw = self.offset.wrapping_add(step.wrapping_mul(GOLDEN));
        self.thresholds.partition_point(|&t| t < draw).min(last)
    }

    /// What the checkpoint's fingerprint covers: the seed, the shares and
    /// the tail.
    pub fn key(&self) -> (u64, &[u64], Option<u64>) {
        (self.seed, &self.thresholds, self.tail_from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
