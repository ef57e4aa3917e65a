//! Sizes that start small and double: the first pieces of a file (reads,
//! inflated output, blocks handed to the pipeline) are small, later ones a
//! full chunk.
//!
//! A pipeline's first batch waits for the first piece of every file it
//! interleaves, and while it waits each file's thread fills its read-ahead
//! too: 16 shards with 1 MiB pieces meant ~48 MiB read, framed (and for GZIP
//! inflated) on 2 cores before record one. Starting at 64 KiB and doubling
//! reaches full chunks after five pieces, so the steady state still costs
//! one hand-off, one read and one inflate call per chunk.

/// The first piece's size (or the chunk size, if smaller).
pub(crate) const FIRST_PIECE: usize = 64 << 10;

/// The size of each next piece: [`FIRST_PIECE`], then twice the last, up to
/// `max`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SizeRamp {
    next: usize,
    max: usize,
}

impl SizeRamp {
    /// A ramp up to `max` bytes (at least 1).
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        SizeRamp {
            next: FIRST_PIECE.min(max),
            max,
        }
    }

    /// The size of piece number `step` (from 0) of a ramp up to `max`:
    /// [`FIRST_PIECE`] doubled `step` times, at most `max` (at least 1).
    pub fn at(step: u32, max: usize) -> usize {
        let max = max.max(1);
        match FIRST_PIECE.checked_shl(step) {
            Some(size) if size >> step == FIRST_PIECE => size.min(max),
            _ => max, // doubled past usize: the maximum long before
        }
    }

    /// The next piece's size; the one after is twice as large, up to the
    /// maximum.
    pub fn take(&mut self) -> usize {
        let size = self.next;
        self.next = size.saturating_mul(2).min(self.max);
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_64_kib_up_to_the_maximum() {
        let mut ramp = SizeRamp::new(1 << 20);
        let sizes: Vec<usize> = (0..7).map(|_| ramp.take()).collect();
        assert_eq!(
            sizes,
            [
                64 << 10,
                128 << 10,
                256 << 10,
                512 << 10,
                1 << 20,
                1 << 20,
                1 << 20
            ]
        );
    }

    #[test]
    fn at_gives_the_size_of_a_piece_by_number() {
        let sizes: Vec<usize> = [0, 1, 4, 5, 40, 64, 200]
            .iter()
            .map(|&step| SizeRamp::at(step, 1 << 20))
            .collect();
        assert_eq!(
            sizes,
            [
                64 << 10,
                128 << 10,
                1 << 20,
                1 << 20,
                1 << 20,
                1 << 20,
                1 << 20
            ]
        );
        assert_eq!(SizeRamp::at(0, 1000), 1000);
        assert_eq!(SizeRamp::at(3, 0), 1);
    }

    #[test]
    fn a_maximum_below_the_first_piece_is_every_piece() {
        let mut ramp = SizeRamp::new(1000);
        assert_eq!([ramp.take(), ramp.take()], [1000, 1000]);
        let mut ramp = SizeRamp::new(0);
        assert_eq!(ramp.take(), 1);
        let mut ramp = SizeRamp::new(100_000);
        assert_eq!([ramp.take(), ramp.take()], [64 << 10, 100_000]);
    }
}
