//! A counter-based random number generator.
//!
//! Every draw is a pure function of `(seed, domain, counter)`, so the whole
//! RNG state in a checkpoint is one counter, and two hosts (or a restored
//! run) given the same seed draw the same numbers. SplitMix64's finaliser
//! mixes the inputs; it passes BigCrush as a counter-based generator and
//! costs a few cycles. Written here rather than taken from a crate because
//! the checkpoint needs exactly this shape of state.

/// Which of a seed's sequences of numbers an op draws from (its domain).
/// Made only in this file ([`domain`]), so no op can draw from another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Domain(u64);

/// The domain of every op that draws numbers, all in one place, so that
/// no two ops can share one (their values are part of what a seed means:
/// changing one changes every run's order).
pub(crate) mod domain {
    use super::Domain;

    /// The shuffle buffer's draws.
    pub const SHUFFLE: Domain = Domain(0);
    /// The file order of epoch `e` is domain `FILE_ORDER + e` ([`file_order`]).
    const FILE_ORDER: u64 = 1 << 32;
    /// The shape schedule of several hosts (`group/schedule.rs`).
    pub const SCHEDULE: Domain = Domain(2 << 32);
    /// The seed of logical stream `s` (`Pipeline::streams`) is the first
    /// draw of counter `s`.
    pub const LOGICAL_STREAMS: Domain = Domain(3 << 32);
    /// A mixture's random choice of source for record `n` is counter `n`.
    pub const MIX: Domain = Domain(4 << 32);
    /// Image crops and flips (`pipeline/images.rs`): one generator per
    /// record, its seed derived from the pipeline seed and the record.
    pub const IMAGE: Domain = Domain(5 << 32);
    /// The global shuffle's permutations (`ops/global_shuffle.rs`) of an
    /// epoch's records, of its blocks (block mode), and of the records of
    /// each window of blocks: epoch `e`'s keys from counter `e·8`.
    pub const GLOBAL_SHUFFLE: Domain = Domain(6 << 32);
    pub const GLOBAL_BLOCKS: Domain = Domain(7 << 32);
    pub const GLOBAL_WINDOWS: Domain = Domain(8 << 32);

    /// The file order of epoch `epoch`.
    pub fn file_order(epoch: u64) -> Domain {
        Domain(FILE_ORDER.wrapping_add(epoch))
    }

    // The domains never meet: file orders take one per epoch, up to 2^32
    // epochs between FILE_ORDER and SCHEDULE (checked when compiling).
    const _: () = assert!(
        SHUFFLE.0 < FILE_ORDER
            && SCHEDULE.0 - FILE_ORDER == 1 << 32
            && LOGICAL_STREAMS.0 > SCHEDULE.0
            && MIX.0 > LOGICAL_STREAMS.0
            && IMAGE.0 > MIX.0
            && GLOBAL_SHUFFLE.0 > IMAGE.0
            && GLOBAL_BLOCKS.0 > GLOBAL_SHUFFLE.0
            && GLOBAL_WINDOWS.0 > GLOBAL_BLOCKS.0
    );
}

/// Golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A sequence of random numbers named by `(seed, domain)`; `counter` is how
/// many have been drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterRng {
    key: u64,
    pub counter: u64,
}

impl CounterRng {
    /// The domain `domain` of `seed`, positioned after `counter` draws.
    pub fn new(seed: u64, domain: Domain, counter: u64) -> Self {
        CounterRng {
            key: mix(seed ^ mix(domain.0.wrapping_add(GAMMA))),
            counter,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        // A counter from a state can be anything: wrap, never panic.
        self.counter = self.counter.wrapping_add(1);
        mix(self.key.wrapping_add(self.counter.wrapping_mul(GAMMA)))
    }

    /// A uniform integer in `0..n` (`n > 0`), without modulo bias worth
    /// speaking of: Lemire's multiply-shift on 64 bits.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// Rounds of the index shuffle's Feistel network.
const ROUNDS: usize = 6;

/// A pseudo-random permutation of `0..n`, any position computed on its own
/// in constant time and memory: a balanced Feistel network on the smallest
/// even number of bits that holds `n`, its rounds keyed by draws of the
/// counter-based generator, walked again from any value that falls at or
/// past `n` (cycle walking: fewer than 4 steps on average, since the
/// network's domain is less than 4·n). So a global shuffle of a billion
/// records keeps no table, and a stream at any position of any epoch finds
/// its next record at once.
#[derive(Clone, Debug)]
pub(crate) struct IndexShuffle {
    n: u64,
    half: u32,
    mask: u64,
    keys: [u64; ROUNDS],
}

impl IndexShuffle {
    /// The permutation of `0..n` keyed by the draws of `(seed, domain)` from
    /// `counter` on.
    pub fn new(n: u64, seed: u64, domain: Domain, counter: u64) -> Self {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        let half = bits.div_ceil(2);
        let mut rng = CounterRng::new(seed, domain, counter);
        let keys = std::array::from_fn(|_| rng.next_u64());
        IndexShuffle {
            n,
            half,
            mask: (1u64 << half) - 1,
            keys,
        }
    }

    /// The size of the permuted range.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// The value at position `i` (`i < n`).
    pub fn at(&self, i: u64) -> u64 {
        let mut x = i;
        loop {
            x = self.network(x);
            if x < self.n {
                return x;
            }
        }
    }

    /// One pass of the network over `2·half` bits.
    fn network(&self, x: u64) -> u64 {
        let (mut left, mut right) = (x >> self.half, x & self.mask);
        for &key in &self.keys {
            let f = mix(right ^ key) & self.mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half) | right
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_inputs_same_numbers_and_counter_restores_position() {
        let mut a = CounterRng::new(7, Domain(1), 0);
        let first: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let mut b = CounterRng::new(7, Domain(1), 2);
        assert_eq!(b.next_u64(), first[2]);
        assert_ne!(CounterRng::new(7, Domain(2), 0).next_u64(), first[0]);
        assert_ne!(CounterRng::new(8, Domain(1), 0).next_u64(), first[0]);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut rng = CounterRng::new(1, Domain(0), 0);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[rng.below(10)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn index_shuffle_is_a_permutation_of_every_size_and_moves_things() {
        for n in [0u64, 1, 2, 3, 5, 64, 1000, 4097, 65_536, 100_003] {
            let p = IndexShuffle::new(n, 9, Domain(6), 0);
            let mut seen: Vec<u64> = (0..n).map(|i| p.at(i)).collect();
            let fixed = seen
                .iter()
                .enumerate()
                .filter(|(i, v)| *i as u64 == **v)
                .count();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
            // About one fixed point, as for a random permutation.
            assert!(fixed < 20, "n = {n}: {fixed} fixed points");
        }
        let a = IndexShuffle::new(1000, 9, Domain(6), 0);
        let b = IndexShuffle::new(1000, 9, Domain(6), 8);
        let same = (0..1000).filter(|&i| a.at(i) == b.at(i)).count();
        assert!(same < 10, "{same}");
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut items: Vec<u32> = (0..1000).collect();
        CounterRng::new(3, Domain(0), 0).shuffle(&mut items);
        assert_ne!(items, (0..1000).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..1000).collect::<Vec<_>>());
    }
}
