//! TFRecord framing: format, corruption, property tests.

mod corrupt;
mod format;
mod props;

/// The byte offset of each record in a file holding `records` in order
/// (12 bytes of header and 4 of footer CRC around each payload).
pub fn offsets(records: &[Vec<u8>]) -> Vec<u64> {
    let mut off = 0;
    records
        .iter()
        .map(|r| {
            let o = off;
            off += r.len() as u64 + 16;
            o
        })
        .collect()
}
