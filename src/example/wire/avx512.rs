//! The AVX-512 decoder (with VBMI and VBMI2): 64 bytes a step, every
//! varint of at most 4 bytes that ends in them decoded at once, 16 to a
//! vector, in one pass (the count falls out of the terminal-byte mask).
//!
//! A step loads 64 bytes (the last ones with a masked load, so nothing past
//! the data is read) and takes the mask of the bytes below 0x80, each the
//! end of a varint. `vpcompressb` packs the positions of those ends; each
//! varint starts one byte after the previous end. For each group of 16
//! varints, `vpermb` copies each start and end into a 32-bit lane, the
//! lane's four byte indexes (start + 0..3, those past the end zeroed) pick
//! the varint's bytes out of the 64, and two shifts-and-masks and one
//! `vpmaddwd` join the 7-bit groups. Values of at most 4 bytes are below
//! 2^28, so they fit i32 and i64 alike and the write needs no check.
//!
//! A varint of 5 or more bytes (four continuation bytes in a row) stops the
//! step before it and is decoded on its own; bytes that end no varint (a
//! truncated or over-long one) go to the scalar decoder, which reports the
//! error at the offset the scalar decoder gives. So values and errors are
//! exactly the scalar decoder's.

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use super::{VarintTarget, WireError, decode_varint, scalar_into};

/// True when the CPU has what [`decode`] and [`count_terminal`] need.
#[inline]
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Byte `i` of the vector: `f(i)`.
#[inline(always)]
fn bytes_of(f: impl Fn(usize) -> u8) -> [u8; 64] {
    let mut b = [0u8; 64];
    for (i, x) in b.iter_mut().enumerate() {
        *x = f(i);
    }
    b
}

/// The mask of the first `n` of 64 bytes (all of them from 64 on).
#[inline(always)]
fn first_bits(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// Loads 64 bytes from an array (unaligned).
///
/// # Safety
/// AVX-512F.
#[inline(always)]
unsafe fn vector(b: &[u8; 64]) -> __m512i {
    // SAFETY: `b` holds 64 readable bytes; the caller's CPU.
    unsafe { _mm512_loadu_si512(b.as_ptr().cast()) }
}

/// Writes the 16 u32 lanes of `v` selected by `lanes` as `T`s at `out`.
///
/// # Safety
/// `out` is valid for as many writes of `T` as `lanes` has bits, from the
/// first; AVX-512F.
#[inline(always)]
unsafe fn store16<T: VarintTarget>(out: *mut MaybeUninit<T>, lanes: __mmask16, v: __m512i) {
    // SAFETY: the caller's; masked stores touch only the selected lanes.
    unsafe {
        if size_of::<T>() == 4 {
            _mm512_mask_storeu_epi32(out.cast(), lanes, v);
        } else {
            let low = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(v));
            let high = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(v));
            _mm512_mask_storeu_epi64(out.cast(), lanes as u8, low);
            _mm512_mask_storeu_epi64(out.add(8).cast(), (lanes >> 8) as u8, high);
        }
    }
}

/// Writes 64 bytes (each below 0x80) as 64 `T`s at `out`.
///
/// # Safety
/// `out` is valid for 64 writes of `T`; AVX-512F and BW.
#[inline(always)]
unsafe fn widen64<T: VarintTarget>(out: *mut MaybeUninit<T>, v: __m512i) {
    // SAFETY: the caller's.
    unsafe {
        for q in 0..4 {
            let part = match q {
                0 => _mm512_extracti32x4_epi32::<0>(v),
                1 => _mm512_extracti32x4_epi32::<1>(v),
                2 => _mm512_extracti32x4_epi32::<2>(v),
                _ => _mm512_extracti32x4_epi32::<3>(v),
            };
            store16::<T>(out.add(16 * q), 0xffff, _mm512_cvtepu8_epi32(part));
        }
    }
}

/// See the module docs; the contract is [`super::decode_varints_into`]'s.
///
/// # Safety
/// The CPU has AVX-512F, BW, VBMI, VBMI2 and POPCNT ([`available`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,popcnt,bmi1,lzcnt")]
pub(super) unsafe fn decode<T: VarintTarget>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
) -> Result<(usize, bool), WireError> {
    // SAFETY (every block below): the CPU has the features enabled above;
    // loads stay inside `data` (a masked load past its end reads nothing);
    // stores stay inside `dst` (checked before each step).
    let iota = unsafe { vector(&bytes_of(|i| i as u8)) };
    // Lane i takes byte i - 1 (lane 0 is zeroed after).
    let previous = unsafe { vector(&bytes_of(|i| i.saturating_sub(1) as u8)) };
    // Group g: 32-bit lane j holds byte 16 g + j in each of its 4 bytes.
    let select: [__m512i; 4] =
        std::array::from_fn(|g| unsafe { vector(&bytes_of(|i| (16 * g + i / 4) as u8)) });
    let byte_in_lane = _mm512_set1_epi32(0x0302_0100);
    let low7 = _mm512_set1_epi8(0x7f);
    let high_of_pair = _mm512_set1_epi16(0xff80u16 as i16);
    // 16-bit pairs (1, 2^14): the two 14-bit halves of a lane joined.
    let join = _mm512_set1_epi32(0x4000_0001);
    let one = _mm512_set1_epi8(1);

    let out = dst.as_mut_ptr();
    let mut p = 0usize;
    let mut n = 0usize;
    let mut fits = true;
    while p < data.len() {
        let left = data.len() - p;
        let valid = first_bits(left);
        let v = unsafe { _mm512_maskz_loadu_epi8(valid, data.as_ptr().add(p).cast()) };
        // The masked load zeroed the bytes past the data: none is "more".
        let more = _mm512_movepi8_mask(v);
        let ends = !more & valid;
        if more == 0 && left >= 64 && n + 64 <= dst.len() {
            unsafe { widen64(out.add(n), v) };
            n += 64;
            p += 64;
            continue;
        }
        // Four continuation bytes in a row start a varint of 5+ bytes: stop
        // the step at the last end before them.
        let long = more & (more >> 1) & (more >> 2) & (more >> 3);
        let ends = if long == 0 {
            ends
        } else {
            ends_before(ends, long)
        };
        if ends == 0 {
            // The varint at `p` is long, or ends past the data: one, the
            // slow way (errors as the scalar decoder reports them).
            let Some(slot) = dst.get_mut(n) else { break };
            let (value, len) = decode_varint(&data[p..]).map_err(|k| WireError::at(base + p, k))?;
            fits &= T::fits(value);
            slot.write(T::from_u64(value));
            n += 1;
            p += len;
            continue;
        }
        let count = ends.count_ones() as usize;
        if n + count > dst.len() {
            break;
        }
        let last_end = 63 - ends.leading_zeros() as usize;
        let written = first_bits(count);
        unsafe {
            let end_at = _mm512_maskz_compress_epi8(ends, iota);
            let start_at =
                _mm512_maskz_add_epi8(!1u64, _mm512_permutexvar_epi8(previous, end_at), one);
            // The 7-bit groups, once for the step's 16-value groups.
            let low = _mm512_and_si512(v, low7);
            for (g, select) in select.iter().enumerate().take(count.div_ceil(16)) {
                let first = _mm512_permutexvar_epi8(*select, start_at);
                let last = _mm512_permutexvar_epi8(*select, end_at);
                let index = _mm512_add_epi8(first, byte_in_lane);
                let inside = _mm512_cmple_epu8_mask(index, last);
                let groups = _mm512_maskz_permutexvar_epi8(inside, index, low);
                // Per 16-bit pair (b0, b1): b0 | b1 << 7.
                let pairs = _mm512_ternarylogic_epi32::<0xe4>(
                    _mm512_srli_epi16::<1>(groups),
                    groups,
                    high_of_pair,
                );
                let values = _mm512_madd_epi16(pairs, join);
                // The group's lanes that hold one of the `count` values.
                let mask = (written >> (16 * g)) as u16;
                store16::<T>(out.add(n + 16 * g), mask, values);
            }
        }
        n += count;
        p += last_end + 1;
    }
    scalar_into(data, base, p, dst, n, fits)
}

/// The ends of `ends` before the first varint of 5 or more bytes (`long`:
/// where four continuation bytes in a row start). Out of line and cold, so
/// that the common step's ends come straight from its mask: computed in
/// line, the cut sat on the chain from one step's load to the next's
/// address.
#[cold]
#[inline(never)]
fn ends_before(ends: u64, long: u64) -> u64 {
    ends & ((1u64 << long.trailing_zeros()) - 1)
}

/// Bytes below 0x80 in `data`, 64 at a time.
///
/// # Safety
/// The CPU has AVX-512F, BW and POPCNT.
#[target_feature(enable = "avx512f,avx512bw,popcnt")]
pub(super) unsafe fn count_terminal(data: &[u8]) -> usize {
    let mut total = 0usize;
    let mut p = 0usize;
    while p < data.len() {
        let valid = first_bits(data.len() - p);
        // SAFETY: the masked load reads only the `valid` bytes, all inside
        // `data`; the caller's CPU.
        let more = unsafe {
            _mm512_movepi8_mask(_mm512_maskz_loadu_epi8(valid, data.as_ptr().add(p).cast()))
        };
        total += (!more & valid).count_ones() as usize;
        p += 64;
    }
    total
}
