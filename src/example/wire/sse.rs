//! The SSE4.1 decoder: 16 bytes at a time. A run of 16 single-byte varints
//! is widened at once; otherwise the terminal bytes among the first 12 pick
//! a shuffle (from a table built at compile time) that spreads the next
//! four varints of at most 3 bytes (values below 2^21, e.g. token ids below
//! 2 million) into four 32-bit lanes, whose 7-bit groups are then joined
//! with shifts and masks. Anything else (longer varints, errors) takes the
//! scalar path one varint at a time, so results and errors are exactly the
//! scalar decoder's.

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use super::{VarintTarget, WireError, compress_7bit, decode_varint, scalar_into};

/// True when the CPU has what [`decode`] and [`count_terminal`] need.
#[inline]
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("sse4.1")
        && std::arch::is_x86_feature_detected!("ssse3")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// One table entry: a `pshufb` control putting varint `i` (at most 3
/// bytes) in lane `i`, zero-filled. Byte 3 is never a source index (its
/// top bit makes `pshufb` write zero), so it also carries the number of
/// bytes the four varints take (0x80 | n), or 0x80 when the first 12
/// bytes do not start with four varints of at most 3 bytes.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub(super) struct Entry(pub(super) [u8; 16]);

/// Indexed by the terminal-byte flags of 12 bytes (bit `i`: byte `i` is
/// below 0x80).
pub(super) static TABLE: [Entry; 4096] = build_table();

const fn build_table() -> [Entry; 4096] {
    let mut table = [Entry([0x80; 16]); 4096];
    let mut mask = 0usize;
    while mask < 4096 {
        let mut e = [0x80u8; 16];
        let mut pos = 0usize;
        let mut lane = 0usize;
        let mut ok = true;
        while lane < 4 && ok {
            // End of the varint starting at `pos`: the next set bit.
            let mut end = pos;
            while end < 12 && (mask >> end) & 1 == 0 {
                end += 1;
            }
            if end >= 12 || end - pos >= 3 {
                ok = false;
            } else {
                let mut k = 0;
                while k <= end - pos {
                    e[lane * 4 + k] = (pos + k) as u8;
                    k += 1;
                }
                pos = end + 1;
                lane += 1;
            }
        }
        e[3] = if ok { 0x80 | pos as u8 } else { 0x80 };
        table[mask] = Entry(e);
        mask += 1;
    }
    table
}

/// Writes the four u32 lanes of `v` as `T`s at `out`.
///
/// # Safety
/// `out` is valid for four writes of `T`; SSE4.1.
#[inline(always)]
unsafe fn store4<T: VarintTarget>(out: *mut MaybeUninit<T>, v: __m128i) {
    // SAFETY: the caller's; `T` is i32 or i64 (the only VarintTargets).
    unsafe {
        if size_of::<T>() == 4 {
            _mm_storeu_si128(out.cast(), v);
        } else {
            _mm_storeu_si128(out.cast(), _mm_cvtepu32_epi64(v));
            _mm_storeu_si128(out.add(2).cast(), _mm_cvtepu32_epi64(_mm_srli_si128(v, 8)));
        }
    }
}

/// Writes the 16 bytes of `v` (each below 0x80) as 16 `T`s at `out`.
///
/// # Safety
/// `out` is valid for 16 writes of `T`; SSE4.1.
#[inline(always)]
unsafe fn widen16<T: VarintTarget>(out: *mut MaybeUninit<T>, v: __m128i) {
    // SAFETY: the caller's.
    unsafe {
        if size_of::<T>() == 4 {
            _mm_storeu_si128(out.cast(), _mm_cvtepu8_epi32(v));
            _mm_storeu_si128(out.add(4).cast(), _mm_cvtepu8_epi32(_mm_srli_si128(v, 4)));
            _mm_storeu_si128(out.add(8).cast(), _mm_cvtepu8_epi32(_mm_srli_si128(v, 8)));
            _mm_storeu_si128(out.add(12).cast(), _mm_cvtepu8_epi32(_mm_srli_si128(v, 12)));
        } else {
            _mm_storeu_si128(out.cast(), _mm_cvtepu8_epi64(v));
            _mm_storeu_si128(out.add(2).cast(), _mm_cvtepu8_epi64(_mm_srli_si128(v, 2)));
            _mm_storeu_si128(out.add(4).cast(), _mm_cvtepu8_epi64(_mm_srli_si128(v, 4)));
            _mm_storeu_si128(out.add(6).cast(), _mm_cvtepu8_epi64(_mm_srli_si128(v, 6)));
            _mm_storeu_si128(out.add(8).cast(), _mm_cvtepu8_epi64(_mm_srli_si128(v, 8)));
            _mm_storeu_si128(out.add(10).cast(), _mm_cvtepu8_epi64(_mm_srli_si128(v, 10)));
            _mm_storeu_si128(out.add(12).cast(), _mm_cvtepu8_epi64(_mm_srli_si128(v, 12)));
            _mm_storeu_si128(out.add(14).cast(), _mm_cvtepu8_epi64(_mm_srli_si128(v, 14)));
        }
    }
}

/// Runs at least this long (of varints of at most 3 bytes on average)
/// are decoded as two halves at once.
pub(super) const SPLIT_MIN: usize = 128;

/// See the module docs; the contract is [`super::decode_varints_into`]'s.
///
/// # Safety
/// The CPU has SSSE3, SSE4.1 and POPCNT.
#[target_feature(enable = "ssse3,sse4.1,popcnt")]
pub(super) unsafe fn decode<T: VarintTarget>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
) -> Result<(usize, bool), WireError> {
    // SAFETY: the caller's.
    unsafe { two_chains::<T, Sse>(data, base, dst) }
}

/// One fast step of a chain of [`two_chains`].
pub(super) trait Step {
    /// One step from `data[*p..]` (at least 16 bytes) into `dst[*n..]`,
    /// moving both on; false where the fast paths do not apply (nothing
    /// done).
    ///
    /// # Safety
    /// `data` has 16 bytes at `*p`; the CPU has what the step needs.
    unsafe fn step<T: VarintTarget>(
        data: &[u8],
        p: &mut usize,
        dst: &mut [MaybeUninit<T>],
        n: &mut usize,
    ) -> bool;
}

/// The SSE4.1 step ([`fast_step`]).
pub(super) struct Sse;

impl Step for Sse {
    #[inline(always)]
    unsafe fn step<T: VarintTarget>(
        data: &[u8],
        p: &mut usize,
        dst: &mut [MaybeUninit<T>],
        n: &mut usize,
    ) -> bool {
        // SAFETY: the caller's.
        unsafe { fast_step(&data[*p..*p + 16], p, dst, n) }.is_ok()
    }
}

/// A long run of short varints is cut after the first varint that
/// ends at or past its middle, and the halves are decoded in one loop,
/// a step of each in turn: each step's next load waits on the previous
/// step's length, so one chain leaves the core idle half the time and
/// two fill it. Varints end exactly at the bytes below 0x80, so the
/// halves hold the same varints, errors and offsets as the whole; the
/// first half's error is reported first, as a single pass would.
///
/// `S` takes the steps (a trait, not a closure, so that the step is
/// inlined into the caller compiled for its CPU features).
///
/// # Safety
/// The CPU has SSSE3, SSE4.1 and POPCNT, and what `S` needs (inlined
/// into a function compiled for it).
#[inline(always)]
pub(super) unsafe fn two_chains<T: VarintTarget, S: Step>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
) -> Result<(usize, bool), WireError> {
    let middle = data.len() / 2;
    let ends = match data.get(middle..middle + 16) {
        // SAFETY: `chunk` holds 16 readable bytes.
        Some(chunk) if data.len() >= SPLIT_MIN => unsafe {
            !_mm_movemask_epi8(_mm_loadu_si128(chunk.as_ptr().cast())) & 0xffff
        },
        _ => 0,
    };
    if ends == 0 {
        // Short, or no varint ends in the 16 bytes from the middle.
        // SAFETY: the caller's.
        return unsafe { decode_from(data, base, 0, dst, 0) };
    }
    let cut = middle + ends.trailing_zeros() as usize + 1;
    let (first, second) = data.split_at(cut);
    // SAFETY: the caller's.
    let first_count = unsafe { count_terminal(first) };
    // Varints longer than 3 bytes on average take the slow path, which
    // two chains do not speed up (ids below 2^40, say).
    if first_count > dst.len() || first_count * 3 < cut {
        // SAFETY: the caller's.
        return unsafe { decode_from(data, base, 0, dst, 0) };
    }
    let (dst_a, dst_b) = dst.split_at_mut(first_count);
    let (mut pa, mut na, mut pb, mut nb) = (0, 0, 0, 0);
    while pa + 16 <= first.len() && pb + 16 <= second.len() {
        // SAFETY: each chain has 16 bytes at its position; the caller's CPU.
        let stepped_a = unsafe { S::step(first, &mut pa, dst_a, &mut na) };
        // SAFETY: as above.
        let stepped_b = unsafe { S::step(second, &mut pb, dst_b, &mut nb) };
        if !stepped_a || !stepped_b {
            break;
        }
    }
    // SAFETY: the caller's.
    let (na, fits_a) = unsafe { decode_from(first, base, pa, dst_a, na) }?;
    debug_assert_eq!(na, first_count);
    // SAFETY: the caller's.
    let (nb, fits_b) = unsafe { decode_from(second, base + cut, pb, dst_b, nb) }?;
    Ok((na + nb, fits_a && fits_b))
}

/// One step of the fast paths on the 16 bytes `chunk` at `*p`: 16
/// single-byte varints, or four of at most 3 bytes. When neither
/// applies or `dst` lacks the room, nothing is done and the error holds
/// the chunk's continuation flags (bit i: byte i continues a varint)
/// for the slow path.
///
/// # Safety
/// The CPU has SSSE3 and SSE4.1.
#[inline(always)]
pub(super) unsafe fn fast_step<T: VarintTarget>(
    chunk: &[u8],
    p: &mut usize,
    dst: &mut [MaybeUninit<T>],
    n: &mut usize,
) -> Result<(), u32> {
    debug_assert!(chunk.len() >= 16);
    // SAFETY: `chunk` holds 16 readable bytes; the caller's CPU
    // (inlined into functions compiled for it).
    let v = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
    // Bit i set: byte i continues a varint.
    // SAFETY: the caller's CPU.
    let more = unsafe { _mm_movemask_epi8(v) } as u32;
    let out = dst.as_mut_ptr();
    if more == 0 && *n + 16 <= dst.len() {
        // SAFETY: 16 slots from `n` are within `dst`.
        unsafe { widen16(out.add(*n), v) };
        *n += 16;
        *p += 16;
        return Ok(());
    }
    let entry = &TABLE[(!more & 0xfff) as usize];
    let used = usize::from(entry.0[3] & 0x7f);
    if used == 0 || *n + 4 > dst.len() {
        return Err(more);
    }
    // SAFETY: `Entry` is 16 bytes, 16-byte aligned.
    let control = unsafe { _mm_load_si128(entry.0.as_ptr().cast()) };
    // SAFETY: the caller's CPU.
    let joined = unsafe {
        let x = _mm_shuffle_epi8(v, control);
        _mm_or_si128(
            _mm_or_si128(
                _mm_and_si128(x, _mm_set1_epi32(0x7f)),
                _mm_and_si128(_mm_srli_epi32(x, 1), _mm_set1_epi32(0x7f << 7)),
            ),
            _mm_and_si128(_mm_srli_epi32(x, 2), _mm_set1_epi32(0x7f << 14)),
        )
    };
    // SAFETY: 4 slots from `n` are within `dst`.
    unsafe { store4(out.add(*n), joined) };
    *n += 4;
    *p += used;
    Ok(())
}

/// Decodes `data[p..]` (at record offset `base`) into `dst[n..]`, one
/// chain of steps: the fast paths where they apply, otherwise one
/// varint the slow way, and the last bytes by the scalar decoder.
///
/// # Safety
/// The CPU has SSSE3, SSE4.1 and POPCNT.
#[target_feature(enable = "ssse3,sse4.1,popcnt")]
pub(super) unsafe fn decode_from<T: VarintTarget>(
    data: &[u8],
    base: usize,
    mut p: usize,
    dst: &mut [MaybeUninit<T>],
    mut n: usize,
) -> Result<(usize, bool), WireError> {
    let mut fits = true;
    while let Some(chunk) = data.get(p..p + 16) {
        // SAFETY: `chunk` holds 16 bytes; the caller's CPU.
        let Err(more) = (unsafe { fast_step(chunk, &mut p, dst, &mut n) }) else {
            continue;
        };
        // One varint the slow way (longer than 3 bytes, or an error).
        let Some(slot) = dst.get_mut(n) else { break };
        let end = (!more).trailing_zeros() as usize;
        let value = match chunk.first_chunk::<8>() {
            Some(word) if end < 8 => {
                // Ends within the first 8 bytes: gather its 7-bit groups.
                let word = u64::from_le_bytes(*word);
                let keep = 8 * (end + 1);
                let word = if keep == 64 {
                    word
                } else {
                    word & ((1u64 << keep) - 1)
                };
                p += end + 1;
                compress_7bit(word)
            }
            _ => {
                let (value, len) = decode_varint(chunk).map_err(|k| WireError::at(base + p, k))?;
                p += len;
                value
            }
        };
        fits &= T::fits(value);
        slot.write(T::from_u64(value));
        n += 1;
    }
    scalar_into(data, base, p, dst, n, fits)
}

/// Bytes below 0x80 in `data`, 16 at a time.
///
/// # Safety
/// The CPU has SSE4.1 and POPCNT.
#[target_feature(enable = "sse4.1,popcnt")]
pub(super) unsafe fn count_terminal(data: &[u8]) -> usize {
    let mut chunks = data.chunks_exact(16);
    let mut total = 0usize;
    for c in &mut chunks {
        // SAFETY: `c` holds 16 readable bytes.
        let v = unsafe { _mm_loadu_si128(c.as_ptr().cast()) };
        total += 16 - (_mm_movemask_epi8(v) as u32).count_ones() as usize;
    }
    total + chunks.remainder().iter().filter(|&&b| b < 0x80).count()
}
