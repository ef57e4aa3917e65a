//! splitmix64: a small deterministic generator for the benches' and the
//! callgrind guard's inputs, so runs (and builds) compare on the same data.
//! Included by path (`#[path]`) from benches/*.rs and examples/kernels.rs.

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` for test data.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
