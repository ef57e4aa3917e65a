//! Masked CRC32C, the checksum TFRecord stores for the length and the payload.
//!
//! TFRecord does not store the plain CRC32C of a field: it stores a rotated,
//! offset ("masked") value, so that a CRC computed over data that itself
//! contains CRCs does not degenerate. The CRC itself is the `crc-fast`
//! crate's carry-less multiply folding where the CPU has AVX-512
//! VPCLMULQDQ, else the `crc32c` crate's hardware `crc32` chains.

/// The constant TensorFlow adds after rotating the CRC.
const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a raw CRC32C the way TFRecord stores it: rotate right by 15, add a constant.
#[inline]
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Undoes [`mask_crc`], giving back the raw CRC32C.
#[inline]
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The masked CRC32C of `data`, exactly as stored in a TFRecord header or footer.
///
/// Every record's two CRCs go through here, on the shard threads. Where the
/// CPU has AVX-512 with VPCLMULQDQ the `crc-fast` crate folds 64 bytes a
/// step with carry-less multiplies: 35 ns for 1 KB and 85 ns for 3 KB
/// against the `crc32c` crate's 57 and 135 (hot data, one core). Elsewhere
/// (and under valgrind, whose CPU has no AVX-512) the `crc32c` crate's
/// three interleaved `crc32` chains, as before: `crc-fast`'s 128-bit path
/// was not measured faster.
#[inline]
pub fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = if folds_wide() {
        // CRC-32/ISCSI is CRC32C; the checksum of a 32-bit CRC fits 32 bits.
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32
    } else {
        crc32c::crc32c(data)
    };
    mask_crc(crc)
}

/// The masked CRC32C of a record's length field (the 8 little-endian
/// bytes of `len`), as its header stores it. Every record's header goes
/// through here; where the CPU has SSE4.2 it is one `crc32` instruction,
/// where the general path spent a call and a dispatch on 8 bytes (~1.5% of
/// the lm profile pinned; 148 instructions a record under callgrind).
#[inline]
pub(crate) fn masked_crc32c_of_length(len: u64) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if has_sse42() {
        // SAFETY: the CPU has SSE4.2, checked above.
        return mask_crc(unsafe { crc32c_u64(len) });
    }
    masked_crc32c(&len.to_le_bytes())
}

/// The CRC32C of the 8 bytes of `v` (little-endian): one `crc32`.
///
/// # Safety
/// The CPU has SSE4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_u64(v: u64) -> u32 {
    // The CRC starts at all ones and ends inverted (CRC-32C's init and
    // final XOR); `crc32` computes the reflected update between.
    !(std::arch::x86_64::_mm_crc32_u64(u64::from(u32::MAX), v) as u32)
}

/// True where the CPU has SSE4.2 (checked once).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_sse42() -> bool {
    static SSE42: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SSE42.get_or_init(|| std::arch::is_x86_feature_detected!("sse4.2"))
}

/// True where the CPU has AVX-512 with VPCLMULQDQ (checked once).
#[inline]
fn folds_wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *WIDE.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("vpclmulqdq")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_length_crc_is_the_general_one() {
        // Lengths as records have them, and any 8 bytes (a damaged header).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut cases: Vec<u64> = vec![0, 1, 5, 255, 256, 1 << 20, u64::MAX, 1 << 63];
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x);
        }
        for v in cases {
            let bytes = v.to_le_bytes();
            assert_eq!(masked_crc32c_of_length(v), masked_crc32c(&bytes), "{v:#x}");
        }
    }

    #[test]
    fn mask_rotates_right_15_and_adds_the_delta() {
        assert_eq!(mask_crc(0), 0xa282_ead8);
        assert_eq!(mask_crc(1), 0xa284_ead8); // bit 0 -> bit 17
        assert_eq!(mask_crc(0x8000), 0xa282_ead9); // bit 15 -> bit 0
    }

    #[test]
    fn unmask_inverts_mask() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX, 0x8000_0000] {
            assert_eq!(unmask_crc(mask_crc(crc)), crc);
        }
    }

    #[test]
    fn known_values_from_tensorflow() {
        // Written by tf.io.TFRecordWriter: the header and footer of b"hello"
        // and of the empty record.
        assert_eq!(masked_crc32c(&5u64.to_le_bytes()), 0x3e04_b2ea);
        assert_eq!(masked_crc32c(b"hello"), 0x191c_1fbb);
        assert_eq!(masked_crc32c(&0u64.to_le_bytes()), 0x0798_0329);
        assert_eq!(masked_crc32c(b""), 0xa282_ead8);
    }

    proptest::proptest! {
        /// The same CRC as the `crc32c` crate's at every length and
        /// alignment.
        #[test]
        fn matches_the_crc32c_crate(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..5000),
            skip in 0usize..64,
        ) {
            let data = &data[skip.min(data.len())..];
            proptest::prop_assert_eq!(masked_crc32c(data), mask_crc(crc32c::crc32c(data)));
            // Both crates, whichever this CPU picks.
            let folded = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32;
            proptest::prop_assert_eq!(folded, crc32c::crc32c(data));
        }
    }

    #[test]
    fn plain_crc32c_check_value() {
        // The standard CRC-32C check value.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }
}
