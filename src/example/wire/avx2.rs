//! The AVX2 decoder: the SSE4.1 decoder's two chains ([`super::sse`]) with
//! a wider step, eight varints instead of four. A step loads 32 bytes and
//! takes their continuation flags at once; the first 12 bytes' flags pick
//! the table entry for the first four varints (of at most 3 bytes), and
//! the flags from where those end pick the entry for the next four. The
//! two groups' bytes go in the two 128-bit lanes (the second lane loaded
//! from where the first group ends), one `vpshufb` spreads all eight into
//! 32-bit lanes and one join (shifts and masks) makes the values.
//!
//! Thirty-two single-byte varints (a mask feature's ones) are widened at
//! once.
//!
//! Each step still waits on the previous one's length, but one wait now
//! yields eight values. Where the second group does not fit the table the
//! step is the SSE one (sixteen single-byte varints, or four short ones);
//! anything else takes the SSE decoder's slow path, so values and errors
//! are exactly the SSE decoder's, hence the scalar decoder's.

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use super::VarintTarget;
use super::WireError;
use super::sse::{self, Sse, Step, TABLE};

/// True when the CPU has what [`decode`] needs.
#[inline]
pub(super) fn available() -> bool {
    sse::available() && std::arch::is_x86_feature_detected!("avx2")
}

/// The contract is [`super::decode_varints_into`]'s.
///
/// # Safety
/// The CPU has AVX2, SSSE3, SSE4.1 and POPCNT.
#[target_feature(enable = "avx2,ssse3,sse4.1,popcnt")]
pub(super) unsafe fn decode<T: VarintTarget>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
) -> Result<(usize, bool), WireError> {
    // SAFETY: the caller's CPU.
    unsafe { sse::two_chains::<T, Avx2>(data, base, dst) }
}

/// The AVX2 step: eight varints, else the SSE step.
struct Avx2;

impl Step for Avx2 {
    #[inline(always)]
    unsafe fn step<T: VarintTarget>(
        data: &[u8],
        p: &mut usize,
        dst: &mut [MaybeUninit<T>],
        n: &mut usize,
    ) -> bool {
        // SAFETY: the caller's.
        unsafe { eight(data, p, dst, n) || Sse::step(data, p, dst, n) }
    }
}

/// Eight varints of at most 3 bytes from `data[*p..]` into `dst[*n..]`, or
/// false (nothing done) where they are not there, the 32 bytes are not, or
/// the room is not.
///
/// # Safety
/// AVX2 (inlined into a function compiled for it).
#[inline(always)]
unsafe fn eight<T: VarintTarget>(
    data: &[u8],
    p: &mut usize,
    dst: &mut [MaybeUninit<T>],
    n: &mut usize,
) -> bool {
    let Some(bytes) = data.get(*p..*p + 32) else {
        return false;
    };
    // SAFETY: `bytes` holds 32 readable bytes; the caller's CPU.
    let v = unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) };
    // SAFETY: the caller's CPU.
    let ends = !unsafe { _mm256_movemask_epi8(v) } as u32;
    if ends == u32::MAX && *n + 32 <= dst.len() {
        // 32 single-byte varints (a mask feature's ones, say).
        // SAFETY: 32 slots from `n` are within `dst`; the caller's CPU.
        unsafe { widen32(dst.as_mut_ptr().add(*n), v) };
        *n += 32;
        *p += 32;
        return true;
    }
    if ends & 0xffff == 0xffff || *n + 8 > dst.len() {
        // The SSE step widens 16 single-byte varints at once.
        return false;
    }
    let first = &TABLE[(ends & 0xfff) as usize];
    let used_first = usize::from(first.0[3] & 0x7f);
    // The second group starts where the first ends (at most byte 12), so
    // its 12 bytes lie within the 32 loaded.
    let second = &TABLE[((ends >> used_first) & 0xfff) as usize];
    let used_second = usize::from(second.0[3] & 0x7f);
    if used_first == 0 || used_second == 0 {
        return false;
    }
    // SAFETY: both 16-byte loads lie within `bytes` (`used_first` <= 12),
    // entries are 16 readable bytes; the caller's CPU.
    let joined = unsafe {
        let v = _mm256_loadu2_m128i(bytes.as_ptr().add(used_first).cast(), bytes.as_ptr().cast());
        let control = _mm256_loadu2_m128i(second.0.as_ptr().cast(), first.0.as_ptr().cast());
        let x = _mm256_shuffle_epi8(v, control);
        _mm256_or_si256(
            _mm256_or_si256(
                _mm256_and_si256(x, _mm256_set1_epi32(0x7f)),
                _mm256_and_si256(_mm256_srli_epi32::<1>(x), _mm256_set1_epi32(0x7f << 7)),
            ),
            _mm256_and_si256(_mm256_srli_epi32::<2>(x), _mm256_set1_epi32(0x7f << 14)),
        )
    };
    // SAFETY: 8 slots from `n` are within `dst`; the caller's CPU.
    unsafe {
        let out = dst.as_mut_ptr().add(*n);
        if size_of::<T>() == 4 {
            _mm256_storeu_si256(out.cast(), joined);
        } else {
            _mm256_storeu_si256(
                out.cast(),
                _mm256_cvtepu32_epi64(_mm256_castsi256_si128(joined)),
            );
            _mm256_storeu_si256(
                out.add(4).cast(),
                _mm256_cvtepu32_epi64(_mm256_extracti128_si256::<1>(joined)),
            );
        }
    }
    *n += 8;
    *p += used_first + used_second;
    true
}

/// Writes the 32 bytes of `v` (each below 0x80) as 32 `T`s at `out`.
///
/// # Safety
/// `out` is valid for 32 writes of `T`; AVX2.
#[inline(always)]
unsafe fn widen32<T: VarintTarget>(out: *mut MaybeUninit<T>, v: __m256i) {
    // SAFETY: the caller's.
    unsafe {
        for (half, at) in [
            (_mm256_castsi256_si128(v), 0),
            (_mm256_extracti128_si256::<1>(v), 16),
        ] {
            if size_of::<T>() == 4 {
                _mm256_storeu_si256(out.add(at).cast(), _mm256_cvtepu8_epi32(half));
                let high = _mm_srli_si128::<8>(half);
                _mm256_storeu_si256(out.add(at + 8).cast(), _mm256_cvtepu8_epi32(high));
            } else {
                _mm256_storeu_si256(out.add(at).cast(), _mm256_cvtepu8_epi64(half));
                let quarter = |q| match q {
                    1 => _mm_srli_si128::<4>(half),
                    2 => _mm_srli_si128::<8>(half),
                    _ => _mm_srli_si128::<12>(half),
                };
                for q in 1..4 {
                    _mm256_storeu_si256(
                        out.add(at + 4 * q).cast(),
                        _mm256_cvtepu8_epi64(quarter(q)),
                    );
                }
            }
        }
    }
}
