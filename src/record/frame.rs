//! The TFRecord frame: `u64 length (LE) | u32 masked_crc32c(length) | data |
//! u32 masked_crc32c(data)`. Sizes, encoding and the header check, shared
//! by the deframer, the writer and compression detection.

use super::crc::{masked_crc32c, masked_crc32c_of_length};

/// Bytes of a record header: `u64 length (LE) | u32 masked_crc32c(length)`.
pub const HEADER_LEN: usize = 12;
/// Bytes of a record footer: `u32 masked_crc32c(data)`.
pub const FOOTER_LEN: usize = 4;

/// The 12-byte header of a record of `len` bytes.
#[inline]
pub fn encode_header(len: u64) -> [u8; HEADER_LEN] {
    let l = len.to_le_bytes();
    let c = masked_crc32c_of_length(len).to_le_bytes();
    [
        l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], c[0], c[1], c[2], c[3],
    ]
}

/// The 4-byte footer of a record with payload `data`.
#[inline]
pub fn encode_footer(data: &[u8]) -> [u8; FOOTER_LEN] {
    masked_crc32c(data).to_le_bytes()
}

/// Splits a header into its length and stored length CRC.
#[inline(always)]
pub(crate) fn parse_header(h: &[u8; HEADER_LEN]) -> (u64, u32) {
    let len = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
    let crc = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    (len, crc)
}

/// Whether the stored CRC of a header matches its length bytes.
#[inline]
pub(crate) fn header_crc_matches(h: &[u8; HEADER_LEN]) -> bool {
    let (len, stored) = parse_header(h);
    masked_crc32c_of_length(len) == stored
}
