//! Filling a run of elements with one value (padding, masks): the widest
//! stores the CPU has. Rows are filled one run at a time, so runs are short
//! (a row's padding, its mask) and many; with AVX-512 a run takes 64-byte
//! stores and one masked store for its ragged end, where the baseline build
//! (SSE2) writes 16 bytes a store and finishes element by element. Batch
//! writes are a fifth of the lm pipeline's work, so this is ours rather than
//! `slice::fill`.

/// Writes `value` to every element of `s`.
#[inline]
pub(crate) fn fill<T: Copy>(s: &mut [T], value: T) {
    #[cfg(target_arch = "x86_64")]
    if size_of_val(s) >= 16 && wide() && matches!(size_of::<T>(), 1 | 2 | 4 | 8) {
        // SAFETY: `wide` checked the CPU; `T` is plain data of 1, 2, 4 or 8
        // bytes (its value's bytes repeat every `size_of::<T>()`).
        unsafe { avx512::fill(s, value) };
        return;
    }
    s.fill(value);
}

#[cfg(target_arch = "x86_64")]
fn wide() -> bool {
    static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WIDE.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
    })
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// [`super::fill`] with 64-byte stores.
    ///
    /// # Safety
    /// AVX-512F and BW; `T` has no padding bytes and a size of 1, 2, 4 or 8.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn fill<T: Copy>(s: &mut [T], value: T) {
        let size = size_of::<T>();
        let mut pattern = [0u8; 64];
        // SAFETY: `value` is `size` readable bytes of plain data.
        let bytes = unsafe { std::slice::from_raw_parts((&raw const value).cast::<u8>(), size) };
        for chunk in pattern.chunks_exact_mut(size) {
            chunk.copy_from_slice(bytes);
        }
        // SAFETY: `pattern` holds 64 bytes.
        let v = unsafe { _mm512_loadu_si512(pattern.as_ptr().cast()) };
        let len = size_of_val(s);
        let p = s.as_mut_ptr().cast::<u8>();
        // A run starts where the row before it ended, rarely on a cache
        // line: 64-byte stores from there would each straddle two lines
        // (fill's share of the lm profile fell from 23% to 17% without).
        // So one masked store up to the next line, then whole lines. The
        // pattern still lines up where the head is a whole number of
        // elements (always, for the aligned types this fills).
        let head = (p as usize).wrapping_neg() & 63;
        let mut at = 0usize;
        if head != 0 && head.is_multiple_of(size) {
            let n = head.min(len);
            // SAFETY: the masked store writes only bytes `0..n`, inside `s`.
            unsafe { _mm512_mask_storeu_epi8(p.cast(), low_bytes(n), v) };
            at = n;
        }
        while at + 64 <= len {
            // SAFETY: bytes `at..at + 64` are inside `s`.
            unsafe { _mm512_storeu_si512(p.add(at).cast(), v) };
            at += 64;
        }
        if at < len {
            // `at` is a multiple of `size`: the pattern lines up.
            // SAFETY: the masked store writes only bytes `at..len`, inside `s`.
            unsafe { _mm512_mask_storeu_epi8(p.add(at).cast(), low_bytes(len - at), v) };
        }
    }

    /// A mask of the low `n` of 64 bytes, `n < 64`.
    fn low_bytes(n: usize) -> u64 {
        (1u64 << n) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_and_offset_gets_exactly_the_value() {
        for len in 0..200 {
            // Offsets past 64 bytes start a run at every place in a cache line.
            for offset in 0..20 {
                let mut a = vec![7u32; len + offset + 5];
                fill(&mut a[offset..offset + len], 0x0102_0304);
                for (i, &x) in a.iter().enumerate() {
                    let inside = (offset..offset + len).contains(&i);
                    assert_eq!(
                        x,
                        if inside { 0x0102_0304 } else { 7 },
                        "{len} {offset} {i}"
                    );
                }
                let mut b = vec![9u8; len + offset + 3];
                fill(&mut b[offset..offset + len], 1);
                assert!(b[offset..offset + len].iter().all(|&x| x == 1));
                assert!(
                    b[..offset]
                        .iter()
                        .chain(&b[offset + len..])
                        .all(|&x| x == 9)
                );
                let mut c = vec![-1i64; len + 2];
                fill(&mut c[1..=len], i64::MIN + 3);
                assert!(c[1..=len].iter().all(|&x| x == i64::MIN + 3));
                assert_eq!((c[0], c[len + 1]), (-1, -1));
                let mut d = vec![0u16; len + 1];
                fill(&mut d[..len], 0xabcd);
                assert!(d[..len].iter().all(|&x| x == 0xabcd));
                assert_eq!(d[len], 0);
            }
        }
    }
}
