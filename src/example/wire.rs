//! Protobuf wire-format primitives for the batch parser: a bounds-checked
//! cursor over one serialized record, field skipping and fast decoders for
//! packed lists.
//!
//! Every position is an offset from the start of the record, so an error can
//! say exactly where the bad byte is. Nothing here panics or allocates on bad
//! input: every length is checked against the bytes that remain.

use std::fmt;
use std::mem::MaybeUninit;

/// Tag of field 1, wire type 2 (length-delimited): `Example.features`,
/// `Features.feature`, map keys, `BytesList.value`, packed list payloads,
/// `FeatureList.feature`, `SequenceExample.context`.
pub(crate) const TAG_1_LEN: u64 = 0x0a;
/// Tag of field 2, wire type 2: map values, `Feature.float_list`,
/// `SequenceExample.feature_lists`.
pub(crate) const TAG_2_LEN: u64 = 0x12;
/// Tag of field 3, wire type 2: `Feature.int64_list`.
pub(crate) const TAG_3_LEN: u64 = 0x1a;
/// Tag of field 1, wire type 0: one unpacked `Int64List.value`.
pub(crate) const TAG_1_VARINT: u64 = 0x08;
/// Tag of field 1, wire type 5: one unpacked `FloatList.value`.
pub(crate) const TAG_1_FIXED32: u64 = 0x0d;

/// What was wrong with the wire data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireErrorKind {
    /// The record ends inside a varint.
    TruncatedVarint,
    /// A varint runs past 10 bytes.
    VarintTooLong,
    /// A length prefix claims more bytes than remain in the enclosing message.
    LengthPastEnd { len: u64, left: usize },
    /// A fixed-width field needs more bytes than remain.
    Truncated { need: usize, left: usize },
    /// Field number 0 is not valid protobuf.
    FieldZero,
    /// Wire types 3 and 4 (groups) are not used by these messages and not
    /// supported (TensorFlow's parser rejects them too).
    Group,
    /// Wire types 6 and 7 do not exist.
    InvalidWireType(u8),
    /// A packed `FloatList` whose byte length is not a multiple of 4.
    PackedFloatLength(usize),
}

impl fmt::Display for WireErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WireErrorKind::TruncatedVarint => f.write_str("truncated varint"),
            WireErrorKind::VarintTooLong => f.write_str("varint longer than 10 bytes"),
            WireErrorKind::LengthPastEnd { len, left } => {
                write!(f, "length {len} runs past the end ({left} bytes left)")
            }
            WireErrorKind::Truncated { need, left } => {
                write!(f, "field needs {need} bytes but {left} are left")
            }
            WireErrorKind::FieldZero => f.write_str("field number 0"),
            WireErrorKind::Group => f.write_str("groups (wire types 3 and 4) are not supported"),
            WireErrorKind::InvalidWireType(w) => write!(f, "invalid wire type {w}"),
            WireErrorKind::PackedFloatLength(n) => {
                write!(f, "packed float list of {n} bytes (not a multiple of 4)")
            }
        }
    }
}

/// Bad wire data at `offset` bytes from the start of the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WireError {
    pub offset: usize,
    pub kind: WireErrorKind,
}

impl WireError {
    fn at(offset: usize, kind: WireErrorKind) -> Self {
        Self { offset, kind }
    }
}

/// A half-open byte range `start..end` within a record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    /// True when the span holds no bytes.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.start == self.end
    }
}

/// Reads one message (or sub-message) of a record. `buf` is the whole record
/// so that positions are record offsets; reading stops at `end`.
///
/// Invariant: `pos <= end <= buf.len()`.
#[derive(Clone, Copy)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor over the whole record.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            end: buf.len(),
        }
    }

    /// A cursor over `span` of the record (a span this module returned).
    #[inline]
    pub fn over(buf: &'a [u8], span: Span) -> Self {
        let end = span.end.min(buf.len());
        Self {
            buf,
            pos: span.start.min(end),
            end,
        }
    }

    /// True when the message has no bytes left.
    #[inline]
    pub fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    /// The current offset in the record.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..self.end).unwrap_or(&[])
    }

    /// Reads a varint (at most 10 bytes; bits past 64 are dropped, as
    /// protobuf does).
    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let rest = self.rest();
        match *rest {
            [b, ..] if b < 0x80 => {
                self.pos += 1;
                return Ok(u64::from(b));
            }
            [b0, b1, ..] if b1 < 0x80 => {
                self.pos += 2;
                return Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
            }
            _ => {}
        }
        self.varint_slow()
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Result<u64, WireError> {
        match decode_varint(self.rest()) {
            Ok((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            Err(kind) => Err(WireError::at(self.pos, kind)),
        }
    }

    /// Reads a field tag: field number 0 is an error.
    #[inline]
    pub fn tag(&mut self) -> Result<u64, WireError> {
        let start = self.pos;
        let tag = self.varint()?;
        if tag >> 3 == 0 || tag > u64::from(u32::MAX) {
            return Err(WireError::at(start, WireErrorKind::FieldZero));
        }
        Ok(tag)
    }

    /// Reads a length prefix and returns the span of the bytes it covers,
    /// moving past them.
    #[inline]
    pub fn len_delimited(&mut self) -> Result<Span, WireError> {
        let at = self.pos;
        let len = self.varint()?;
        let left = self.end - self.pos;
        if len > left as u64 {
            return Err(WireError::at(
                at,
                WireErrorKind::LengthPastEnd { len, left },
            ));
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(Span {
            start,
            end: self.pos,
        })
    }

    /// Reads 4 little-endian bytes.
    #[inline]
    pub fn fixed32(&mut self) -> Result<u32, WireError> {
        match self.rest().first_chunk::<4>() {
            Some(b) => {
                self.pos += 4;
                Ok(u32::from_le_bytes(*b))
            }
            None => Err(WireError::at(
                self.pos,
                WireErrorKind::Truncated {
                    need: 4,
                    left: self.end - self.pos,
                },
            )),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), WireError> {
        let left = self.end - self.pos;
        if n > left {
            return Err(WireError::at(
                self.pos,
                WireErrorKind::Truncated { need: n, left },
            ));
        }
        self.pos += n;
        Ok(())
    }

    /// Skips the value of a field whose tag was just read.
    #[inline]
    pub fn skip(&mut self, tag: u64) -> Result<(), WireError> {
        match (tag & 7) as u8 {
            0 => self.varint().map(drop),
            1 => self.advance(8),
            2 => self.len_delimited().map(drop),
            5 => self.advance(4),
            3 | 4 => Err(WireError::at(self.pos, WireErrorKind::Group)),
            w => Err(WireError::at(self.pos, WireErrorKind::InvalidWireType(w))),
        }
    }
}

/// Decodes one varint from the front of `data`: the value and its length.
#[inline]
pub(crate) fn decode_varint(data: &[u8]) -> Result<(u64, usize), WireErrorKind> {
    let mut value = 0u64;
    for i in 0..10 {
        let Some(&b) = data.get(i) else {
            return Err(WireErrorKind::TruncatedVarint);
        };
        // At i = 9 the shift is 63: only the lowest bit survives, as in protobuf.
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok((value, i + 1));
        }
    }
    Err(WireErrorKind::VarintTooLong)
}

/// An integer column type that int64 varints are decoded into.
pub(crate) trait VarintTarget: Copy {
    /// The value of a decoded varint (two's complement int64, then narrowed).
    fn from_u64(v: u64) -> Self;
    /// True when the int64 value `v` fits this type.
    fn fits(v: u64) -> bool;
    /// Varints of at most this many bytes always fit (7 bits per byte).
    const SAFE_LEN: usize;
}

impl VarintTarget for i64 {
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as i64
    }
    #[inline(always)]
    fn fits(_: u64) -> bool {
        true
    }
    const SAFE_LEN: usize = 10;
}

impl VarintTarget for i32 {
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as i64 as i32
    }
    #[inline(always)]
    fn fits(v: u64) -> bool {
        i32::try_from(v as i64).is_ok()
    }
    const SAFE_LEN: usize = 4;
}

const MSBS: u64 = 0x8080_8080_8080_8080;

/// Gathers the 7-bit groups of a varint of at most 8 bytes held in `x`
/// (little-endian, continuation bits included) into one integer.
#[inline(always)]
fn compress_7bit(x: u64) -> u64 {
    let x = x & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// Decodes a packed run of varints (`data`, starting at record offset
/// `base`) onto `out`. Returns false when some value does not fit `T`
/// (the values pushed are then truncated; the caller reports the overflow).
pub(crate) fn decode_packed_varints<T: VarintTarget>(
    data: &[u8],
    base: usize,
    out: &mut Vec<T>,
) -> Result<bool, WireError> {
    decode_packed_with(data, base, out, Decoder::Best)
}

/// Values a block of [`decode_blocks`] may write.
const BLOCK: usize = 64;

/// [`decode_packed_varints`] with a chosen decoder (tests run each).
fn decode_packed_with<T: VarintTarget>(
    data: &[u8],
    base: usize,
    out: &mut Vec<T>,
    decoder: Decoder,
) -> Result<bool, WireError> {
    #[cfg(target_arch = "x86_64")]
    let wide = match decoder {
        Decoder::Best => level(),
        Decoder::Avx512 => Level::Avx512,
        Decoder::Avx2 => Level::Avx2,
        Decoder::Sse => Level::Sse,
        Decoder::Bmi2 | Decoder::Portable => Level::Portable,
    };
    #[cfg(target_arch = "x86_64")]
    if wide != Level::Portable {
        // Each varint has at least one byte: the data's length bounds the
        // count, so no counting pass is needed to size the column.
        out.reserve(data.len());
        let spare = out.spare_capacity_mut();
        // SAFETY: `level` checked the CPU features (tests force a level only
        // where the CPU has it).
        let (n, fits) = unsafe {
            match wide {
                Level::Avx512 => avx512::decode(data, base, spare),
                Level::Avx2 => avx2::decode(data, base, spare),
                _ => sse::decode(data, base, spare),
            }
        }?;
        // SAFETY: `decode` initialised the first `n` slots of the spare
        // capacity, and `n` is at most its length.
        unsafe { out.set_len(out.len() + n) };
        return Ok(fits);
    }
    // Each byte below 0x80 ends one varint: count them (a vectorised pass)
    // so the column grows by exactly what this list needs, and decode into
    // the spare capacity (`BLOCK` slots of slack let a block write without
    // checking each slot).
    let count = count_varints(data);
    out.reserve(count + BLOCK);
    let spare = out.spare_capacity_mut();
    #[cfg(target_arch = "x86_64")]
    let decoded = if decoder != Decoder::Portable && std::arch::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has the feature `decode_varints_bmi2` is compiled for.
        unsafe { decode_varints_bmi2(data, base, spare) }
    } else {
        decode_blocks(data, base, spare, compress_7bit, terminal_bytes)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let decoded = {
        let _ = decoder;
        decode_blocks(data, base, spare, compress_7bit, terminal_bytes)
    };
    let (n, fits) = decoded?;
    // SAFETY: `decode_blocks` initialised the first `n` slots of the spare
    // capacity, and `n` is at most its length.
    unsafe { out.set_len(out.len() + n) };
    Ok(fits)
}

/// Which packed-varint decoder to run (tests pin each one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)]
enum Decoder {
    /// The best the CPU has ([`level`]): AVX-512, else AVX2, else SSE4.1,
    /// else BMI2 blocks, else portable.
    Best,
    /// The AVX-512 decoder (when the CPU has it).
    Avx512,
    /// The AVX2 decoder (when the CPU has it).
    Avx2,
    /// The SSE4.1 decoder.
    Sse,
    /// The 64-byte block decoder with BMI2 `pext` (when the CPU has it).
    Bmi2,
    /// The 64-byte block decoder in portable code.
    Portable,
}

/// Decodes the varints of `data` (at record offset `base`) into `dst`,
/// which must have room for all of them: at least one slot per byte below
/// 0x80 ([`count_terminal_bytes`]; `data.len()` slots always do). Returns
/// how many were written (the first that many slots) and whether all fit
/// `T`; errors (with their offsets) exactly as [`decode_packed_varints`].
pub(crate) fn decode_varints_into<T: VarintTarget>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
) -> Result<(usize, bool), WireError> {
    decode_varints_into_at(data, base, dst, level())
}

/// [`decode_varints_into`] by the decoder of `level` (tests run each the
/// CPU has).
#[inline]
fn decode_varints_into_at<T: VarintTarget>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
    level: Level,
) -> Result<(usize, bool), WireError> {
    // SAFETY: `level` checked the CPU features (tests pass only levels the
    // CPU has).
    #[cfg(target_arch = "x86_64")]
    match level {
        Level::Avx512 => return unsafe { avx512::decode(data, base, dst) },
        Level::Avx2 => return unsafe { avx2::decode(data, base, dst) },
        Level::Sse => return unsafe { sse::decode(data, base, dst) },
        Level::Portable => {}
    }
    scalar_into(data, base, 0, dst, 0, true)
}

/// The widest varint decoder to use: what the CPU has, at most what
/// `INFEED_VARINT` names (`avx512`, `avx2`, `sse`, `portable`; read once), so a run
/// can exercise the narrower paths on a CPU that has the wider ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Portable,
    Sse,
    Avx2,
    Avx512,
}

fn level() -> Level {
    static LEVEL: std::sync::OnceLock<Level> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        let best = if avx512::available() {
            Level::Avx512
        } else if avx2::available() {
            Level::Avx2
        } else if sse::available() {
            Level::Sse
        } else {
            Level::Portable
        };
        #[cfg(not(target_arch = "x86_64"))]
        let best = Level::Portable;
        let cap = match std::env::var("INFEED_VARINT").as_deref() {
            Ok("portable") => Level::Portable,
            Ok("avx2") => Level::Avx2,
            Ok("sse") => Level::Sse,
            _ => Level::Avx512,
        };
        best.min(cap)
    })
}

/// Number of varints that end in `data` (its bytes below 0x80): the number
/// of values of a valid packed run.
#[inline]
pub(crate) fn count_terminal_bytes(data: &[u8]) -> usize {
    // SAFETY: `level` checked the CPU features.
    #[cfg(target_arch = "x86_64")]
    match level() {
        Level::Avx512 => return unsafe { avx512::count_terminal(data) },
        Level::Avx2 | Level::Sse => return unsafe { sse::count_terminal(data) },
        Level::Portable => {}
    }
    count_varints(data)
}

/// One varint at a time from `data[p..]` into `dst[n..]` until the data or
/// the room ends: the exact reference behaviour, used for the last bytes.
#[inline]
fn scalar_into<T: VarintTarget>(
    data: &[u8],
    base: usize,
    mut p: usize,
    dst: &mut [MaybeUninit<T>],
    mut n: usize,
    mut fits: bool,
) -> Result<(usize, bool), WireError> {
    while let Some(rest) = data.get(p..).filter(|r| !r.is_empty()) {
        let (v, len) = decode_varint(rest).map_err(|k| WireError::at(base + p, k))?;
        // With room for every terminal byte, bytes left once the room is
        // full end in no terminal byte: `decode_varint` reported them.
        let Some(slot) = dst.get_mut(n) else { break };
        fits &= T::fits(v);
        slot.write(T::from_u64(v));
        n += 1;
        p += len;
    }
    Ok((n, fits))
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
mod sse;

/// Number of varints that end in `data` (bytes below 0x80), eight bytes at
/// a time: per-byte flags summed in byte lanes (at most 255 words before
/// the lanes are folded).
#[inline]
fn count_varints(data: &[u8]) -> usize {
    const LOW16: u64 = 0x00ff_00ff_00ff_00ff;
    let whole = data.len() - data.len() % 8;
    let (words, tail) = data.split_at(whole);
    let mut total = 0usize;
    for group in words.chunks(255 * 8) {
        let mut lanes = 0u64;
        for w in group.chunks_exact(8) {
            let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            lanes += (!w & MSBS) >> 7;
        }
        let pairs = (lanes & LOW16) + ((lanes >> 8) & LOW16);
        total += (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize;
    }
    total + tail.iter().filter(|&&b| b < 0x80).count()
}

/// Bit `i` set when byte `i` of `w` (little-endian) is below 0x80.
#[inline(always)]
fn terminal_bytes(w: u64) -> u8 {
    // Move each byte's inverted top bit to the byte's bit 0, then gather the
    // eight bits into the top byte with one multiplication.
    let bits = (!w >> 7) & 0x0101_0101_0101_0101;
    (bits.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// [`decode_blocks`] compiled for BMI2: `pext` gathers the 7-bit groups and
/// the terminal-byte flags in one instruction each, `bzhi` masks.
///
/// # Safety
/// The CPU must have BMI1 and BMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2")]
unsafe fn decode_varints_bmi2<T: VarintTarget>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
) -> Result<(usize, bool), WireError> {
    use std::arch::x86_64::_pext_u64;
    // SAFETY (both closures): the caller guarantees BMI2. Newer compilers
    // see these calls as safe here, older ones need the blocks.
    #[allow(unused_unsafe)]
    let gather = |w| unsafe { _pext_u64(w, 0x7f7f_7f7f_7f7f_7f7f) };
    #[allow(unused_unsafe)]
    let terminals = |w: u64| unsafe { _pext_u64(!w, MSBS) } as u8;
    decode_blocks(data, base, dst, gather, terminals)
}

#[inline(always)]
fn load_u64(b: &[u8; 8]) -> u64 {
    u64::from_le_bytes(*b)
}

/// Decodes the varint of `len` bytes at `p` (the slow path of
/// [`decode_blocks`]: long varints, and values that may not fit `T`).
#[inline(never)]
fn decode_one<T: VarintTarget>(
    data: &[u8],
    base: usize,
    p: usize,
    len: usize,
    gather: &impl Fn(u64) -> u64,
    fits: &mut bool,
) -> Result<u64, WireError> {
    let v = match data.get(p..).and_then(|d| d.first_chunk::<8>()) {
        Some(word) if len <= 8 => gather(load_u64(word)) & low_bits(7 * len as u8),
        _ => {
            decode_varint(data.get(p..).unwrap_or(&[]))
                .map_err(|k| WireError::at(base + p, k))?
                .0
        }
    };
    *fits &= T::fits(v);
    Ok(v)
}

/// Decodes the varints of `data` into `dst`: how many (the first that many
/// slots of `dst` are initialised) and whether all fit `T`.
///
/// The data is taken 64 bytes at a time. First a 64-bit mask of the bytes
/// that end a varint is built from eight independent words; then each set
/// bit gives one varint, read with an 8-byte load at its start. The next
/// start comes from the mask (register bit operations), not from the data,
/// so the loads do not wait on each other. A block of 64 single-byte values
/// is copied straight out.
#[inline(always)]
fn decode_blocks<T: VarintTarget>(
    data: &[u8],
    base: usize,
    dst: &mut [MaybeUninit<T>],
    gather: impl Fn(u64) -> u64,
    terminals: impl Fn(u64) -> u8,
) -> Result<(usize, bool), WireError> {
    let mut fits = true;
    // Start of the next varint.
    let mut p = 0usize;
    let mut n = 0usize;
    let mut block = 0usize;
    let mask_of = |window: &[u8; 72]| {
        let mut mask = 0u64;
        for (i, w) in window.chunks_exact(8).take(8).enumerate() {
            let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            mask |= u64::from(terminals(w)) << (8 * i);
        }
        mask
    };
    // The window reaches 8 bytes past the block, so that every 8-byte load
    // from a start inside the block stays inside it.
    while let Some(window) = data.get(block..).and_then(|d| d.first_chunk::<72>()) {
        let Some(out) = dst.get_mut(n..).and_then(|d| d.first_chunk_mut::<BLOCK>()) else {
            break;
        };
        let mask = mask_of(window);
        if mask == u64::MAX && p == block {
            // 64 values below 128.
            for (o, &b) in out.iter_mut().zip(window) {
                o.write(T::from_u64(u64::from(b)));
            }
            n += BLOCK;
            p += BLOCK;
        } else {
            n += decode_block(
                data, base, window, mask, block, &mut p, out, &gather, &mut fits,
            )?;
        }
        block += BLOCK;
    }
    // The last bytes (fewer than 72): the same, on a zero-padded copy, with
    // the mask cut at the end of the data.
    if block < data.len() {
        let mut padded = [0u8; 72 + BLOCK];
        let rest = data.get(block..).unwrap_or(&[]);
        if let Some(head) = padded.get_mut(..rest.len()) {
            head.copy_from_slice(rest);
        }
        let mut at = 0usize;
        while block < data.len() {
            let Some(window) = padded.get(at..).and_then(|d| d.first_chunk::<72>()) else {
                break;
            };
            let Some(out) = dst.get_mut(n..).and_then(|d| d.first_chunk_mut::<BLOCK>()) else {
                break;
            };
            let left = data.len() - block;
            let real = if left >= 64 {
                u64::MAX
            } else {
                (1u64 << left) - 1
            };
            let mask = mask_of(window) & real;
            n += decode_block(
                data, base, window, mask, block, &mut p, out, &gather, &mut fits,
            )?;
            block += BLOCK;
            at += BLOCK;
        }
    }
    // Whatever is left does not end a varint (or did not fit `dst`).
    while p < data.len() {
        let Some(slot) = dst.get_mut(n) else { break };
        let (v, len) = decode_varint(&data[p..]).map_err(|k| WireError::at(base + p, k))?;
        fits &= T::fits(v);
        slot.write(T::from_u64(v));
        n += 1;
        p += len;
    }
    Ok((n, fits))
}

/// Decodes the varints that end in the block at `block` (`window` holds its
/// 64 bytes and the 8 after; `mask` flags the bytes that end a varint),
/// writing them to `out` and moving `p` past them. Returns how many.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn decode_block<T: VarintTarget>(
    data: &[u8],
    base: usize,
    window: &[u8; 72],
    mut mask: u64,
    block: usize,
    p: &mut usize,
    out: &mut [MaybeUninit<T>; BLOCK],
    gather: &impl Fn(u64) -> u64,
    fits: &mut bool,
) -> Result<usize, WireError> {
    let mut k = 0usize;
    // A varint that started in an earlier block ends at the first set bit
    // (or, with no set bit, runs on past this block).
    if *p < block {
        if mask == 0 {
            return Ok(0);
        }
        let end = block + mask.trailing_zeros() as usize;
        mask &= mask - 1;
        let v = decode_one::<T>(data, base, *p, end + 1 - *p, gather, fits)?;
        out[0].write(T::from_u64(v));
        k = 1;
        *p = end + 1;
    }
    // The rest start inside the block, at `s` (below 64 while a set bit
    // remains), so their loads need no bounds checks.
    let mut s = *p - block;
    while mask != 0 {
        let e = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        let len = e + 1 - s;
        let v = if len <= T::SAFE_LEN.min(8) {
            let at = s % BLOCK;
            let w = load_u64(&[
                window[at],
                window[at + 1],
                window[at + 2],
                window[at + 3],
                window[at + 4],
                window[at + 5],
                window[at + 6],
                window[at + 7],
            ]);
            gather(w) & low_bits(7 * len as u8)
        } else {
            decode_one::<T>(data, base, block + s, len, gather, fits)?
        };
        // At most 64 varints end in a block: `k` stays below BLOCK.
        out[k % BLOCK].write(T::from_u64(v));
        k += 1;
        s = e + 1;
    }
    *p = block + s;
    Ok(k)
}

/// The `n` lowest bits set (`n` at most 63).
#[inline(always)]
fn low_bits(n: u8) -> u64 {
    (1u64 << (n & 63)) - 1
}

/// Decodes a packed run of little-endian floats onto `out`.
pub(crate) fn decode_packed_floats(
    data: &[u8],
    base: usize,
    out: &mut Vec<f32>,
) -> Result<(), WireError> {
    if !data.len().is_multiple_of(4) {
        return Err(WireError::at(
            base,
            WireErrorKind::PackedFloatLength(data.len()),
        ));
    }
    out.extend(
        data.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn encode_varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    #[test]
    fn varint_edges() {
        assert_eq!(decode_varint(&[0]), Ok((0, 1)));
        assert_eq!(decode_varint(&[0x96, 0x01]), Ok((150, 2)));
        let minus_one = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(decode_varint(&minus_one), Ok((u64::MAX, 10)));
        // Protobuf (and TensorFlow) drop bits past 64 in the tenth byte.
        let high = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(decode_varint(&high), Ok((u64::MAX, 10)));
        let eleven = [0xff; 11];
        assert_eq!(decode_varint(&eleven), Err(WireErrorKind::VarintTooLong));
        assert_eq!(decode_varint(&[0x80]), Err(WireErrorKind::TruncatedVarint));
        assert_eq!(decode_varint(&[]), Err(WireErrorKind::TruncatedVarint));
    }

    #[test]
    fn compress_matches_scalar() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            49_999,
            1 << 40,
            (1 << 56) - 1,
        ] {
            let enc = encode_varint(v);
            let mut word = [0u8; 8];
            word[..enc.len()].copy_from_slice(&enc);
            assert_eq!(compress_7bit(u64::from_le_bytes(word)), v);
        }
    }

    #[test]
    fn packed_varints_all_lengths() {
        let mut values: Vec<u64> = Vec::new();
        let mut data = Vec::new();
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, u64::MAX >> shift] {
                values.push(v);
                data.extend(encode_varint(v));
            }
        }
        // Runs of single bytes hit the eight-at-a-time path.
        for v in 0..40u64 {
            values.push(v);
            data.extend(encode_varint(v));
        }
        let mut out: Vec<i64> = Vec::new();
        assert_eq!(decode_packed_varints(&data, 0, &mut out), Ok(true));
        let want: Vec<i64> = values.iter().map(|&v| v as i64).collect();
        assert_eq!(out, want);
    }

    #[test]
    fn count_varints_counts_terminal_bytes() {
        let mut x = 99u64;
        for len in [0usize, 1, 7, 8, 9, 255 * 8, 255 * 8 + 3, 5000] {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let want = data.iter().filter(|&&b| b < 0x80).count();
            assert_eq!(count_varints(&data), want, "len {len}");
        }
        assert_eq!(count_varints(&[0u8; 4096]), 4096);
    }

    #[test]
    fn terminal_bytes_flags_each_byte() {
        for i in 0..8 {
            let mut bytes = [0x80u8; 8];
            bytes[i] = 0x7f;
            assert_eq!(terminal_bytes(u64::from_le_bytes(bytes)), 1 << i);
        }
        assert_eq!(terminal_bytes(0), 0xff);
        assert_eq!(terminal_bytes(MSBS), 0);
    }

    /// The portable decoder, whatever the CPU (the dispatcher may pick BMI2).
    fn decode_portable(data: &[u8]) -> Result<(Vec<i64>, bool), WireError> {
        let mut out = Vec::new();
        let fits = decode_packed_with(data, 0, &mut out, Decoder::Portable)?;
        Ok((out, fits))
    }

    #[test]
    fn portable_decoder_matches_scalar() {
        let mut values: Vec<u64> = Vec::new();
        let mut data = Vec::new();
        let mut x = 7u64;
        for i in 0..5000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mix widths: 1 to 10 bytes.
            let v = x >> (x % 64);
            let v = if i % 3 == 0 { v % 200 } else { v };
            values.push(v);
            data.extend(encode_varint(v));
        }
        let want: Vec<i64> = values.iter().map(|&v| v as i64).collect();
        assert_eq!(decode_portable(&data), Ok((want.clone(), true)));
        let mut out: Vec<i64> = Vec::new();
        assert_eq!(decode_packed_varints(&data, 0, &mut out), Ok(true));
        assert_eq!(out, want);
    }

    /// One varint at a time, the plain way: the reference decoder.
    fn decode_scalar(data: &[u8], base: usize) -> Result<Vec<i64>, WireError> {
        let mut out = Vec::new();
        let mut p = 0;
        while p < data.len() {
            let (v, n) = decode_varint(&data[p..]).map_err(|k| WireError::at(base + p, k))?;
            out.push(v as i64);
            p += n;
        }
        Ok(out)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// Every decoder (SSE4.1, BMI2 and portable blocks, and the exact-room
        /// `decode_varints_into` as i64 and i32) agrees with the scalar one
        /// on valid runs of varints.
        #[test]
        fn decoders_match_scalar(
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    0u64..128,
                    0u64..50_000,
                    0u64..(1 << 21),
                    proptest::prelude::any::<u64>(),
                    (0u32..64).prop_map(|s| 1u64 << s),
                ],
                0..400,
            )
        ) {
            let data: Vec<u8> = values.iter().flat_map(|&v| encode_varint(v)).collect();
            let want: Vec<i64> = values.iter().map(|&v| v as i64).collect();
            for (name, got) in all_decoders(&data, 0) {
                proptest::prop_assert_eq!(got, Ok((want.clone(), true)), "{}", name);
            }
            let fits = values.iter().all(|&v| i32::try_from(v as i64).is_ok());
            let narrow: Vec<i32> = want.iter().map(|&v| v as i32).collect();
            proptest::prop_assert_eq!(decode_into_i32(&data, 0), Ok((narrow, fits)));
        }

        /// Token-id-like runs: mostly 1 to 3 byte varints with runs of ones
        /// (attention masks), which the SSE4.1 fast paths take.
        #[test]
        fn decoders_match_scalar_on_token_runs(
            runs in proptest::collection::vec(
                (0usize..40, proptest::prop_oneof![
                    proptest::strategy::Just(1u64),
                    0u64..128,
                    0u64..50_000,
                    0u64..(1 << 21),
                    (1u64 << 21)..(1 << 35),
                ]),
                0..40,
            ),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let mut x = seed | 1;
            let mut values = Vec::new();
            for (len, top) in runs {
                for _ in 0..len {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    values.push(if top <= 1 { top } else { x % top });
                }
            }
            let data: Vec<u8> = values.iter().flat_map(|&v| encode_varint(v)).collect();
            let want: Vec<i64> = values.iter().map(|&v| v as i64).collect();
            for (name, got) in all_decoders(&data, 7) {
                proptest::prop_assert_eq!(got, Ok((want.clone(), true)), "{}", name);
            }
            let fits = want.iter().all(|&v| i32::try_from(v).is_ok());
            let narrow: Vec<i32> = want.iter().map(|&v| v as i32).collect();
            proptest::prop_assert_eq!(decode_into_i32(&data, 7), Ok((narrow, fits)));
        }

        /// At every alignment (the run starts 0 to 63 bytes into its
        /// buffer, and bytes follow it that are not its own), with 1- to
        /// 10-byte varints: every decoder gives the scalar one's values.
        #[test]
        fn decoders_match_scalar_at_every_alignment(
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    0u64..128,
                    0u64..(1 << 28),
                    (0u32..64).prop_map(|s| 1u64 << s),
                    proptest::prelude::any::<u64>(),
                ],
                0..200,
            ),
            offset in 0usize..64,
            after in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..70),
        ) {
            let run: Vec<u8> = values.iter().flat_map(|&v| encode_varint(v)).collect();
            let mut buffer = vec![0x80u8; offset];
            buffer.extend(&run);
            buffer.extend(&after);
            let data = &buffer[offset..offset + run.len()];
            let want: Vec<i64> = values.iter().map(|&v| v as i64).collect();
            for (name, got) in all_decoders(data, offset) {
                proptest::prop_assert_eq!(got, Ok((want.clone(), true)), "{}", name);
            }
            proptest::prop_assert_eq!(count_terminal_bytes(data), values.len());
        }

        /// On any bytes, every decoder gives what the scalar decoder gives:
        /// the same values, or the same error at the same offset.
        #[test]
        fn decoders_match_scalar_on_any_bytes(
            data in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<u8>(),
                    0x80u8..=0xff,
                    0u8..0x80,
                ],
                0..300,
            ),
            base in 0usize..1000,
        ) {
            let want = decode_scalar(&data, base);
            for (name, got) in all_decoders(&data, base) {
                proptest::prop_assert_eq!(got.map(|(v, _)| v), want.clone(), "{}", name);
            }
            let narrow = want.map(|v| v.iter().map(|&x| x as i32).collect::<Vec<_>>());
            proptest::prop_assert_eq!(decode_into_i32(&data, base).map(|(v, _)| v), narrow);
        }
    }

    /// Each decoder's output on `data`: values as i64 and whether all fit.
    #[allow(clippy::type_complexity)]
    fn all_decoders(
        data: &[u8],
        base: usize,
    ) -> Vec<(&'static str, Result<(Vec<i64>, bool), WireError>)> {
        let mut out = Vec::new();
        let mut decoders = vec![
            ("best", Decoder::Best),
            ("bmi2", Decoder::Bmi2),
            ("portable", Decoder::Portable),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            if sse::available() {
                decoders.push(("sse", Decoder::Sse));
            }
            if avx2::available() {
                decoders.push(("avx2", Decoder::Avx2));
            }
            if avx512::available() {
                decoders.push(("avx512", Decoder::Avx512));
            }
        }
        for (name, d) in decoders {
            let mut v: Vec<i64> = vec![-9];
            let got = decode_packed_with(data, base, &mut v, d).map(|fits| {
                // The values are appended after what the column held.
                assert_eq!(v[0], -9);
                (v[1..].to_vec(), fits)
            });
            // Into int32 the same values come out narrowed, flagged when
            // one does not fit, and the same errors.
            let mut narrow: Vec<i32> = vec![-9];
            let got32 = decode_packed_with(data, base, &mut narrow, d);
            match &got {
                Ok((values, _)) => {
                    let fits = values.iter().all(|&x| i32::try_from(x).is_ok());
                    let expected: Vec<i32> = values.iter().map(|&x| x as i32).collect();
                    assert_eq!(got32, Ok(fits), "{name}: int32 fit flag");
                    assert_eq!(narrow[1..], expected[..], "{name}: int32 values");
                }
                Err(e) => assert_eq!(got32, Err(*e), "{name}: int32 error"),
            }
            out.push((name, got));
        }
        let mut room = vec![MaybeUninit::<i64>::uninit(); data.len()];
        let got = decode_varints_into(data, base, &mut room).map(|(n, fits)| {
            let v = room[..n]
                .iter()
                // SAFETY: the first `n` slots were written.
                .map(|s| unsafe { s.assume_init() })
                .collect();
            (v, fits)
        });
        out.push(("into", got));
        out
    }

    /// `decode_varints_into` as i32, into exactly as many slots as varints.
    fn decode_into_i32(data: &[u8], base: usize) -> Result<(Vec<i32>, bool), WireError> {
        let mut room = vec![MaybeUninit::<i32>::uninit(); count_terminal_bytes(data)];
        let (n, fits) = decode_varints_into(data, base, &mut room)?;
        let v = room[..n]
            .iter()
            // SAFETY: the first `n` slots were written.
            .map(|s| unsafe { s.assume_init() })
            .collect();
        Ok((v, fits))
    }

    #[test]
    fn simd_table_entries() {
        // Four 3-byte varints: lanes hold bytes 0-2, 3-5, 6-8, 9-11; 12 used.
        let mut data = Vec::new();
        for v in [1u64 << 20, 50_000, 16_384, (1 << 21) - 1] {
            data.extend(encode_varint(v));
        }
        data.extend([0u8; 4]);
        assert_eq!(data.len(), 16);
        let (v, fits) = decode_into_i32(&data, 0).unwrap();
        assert!(fits);
        assert_eq!(v, vec![1 << 20, 50_000, 16_384, (1 << 21) - 1, 0, 0, 0, 0]);
        // 16 single bytes, then a lone 2-byte varint in the scalar tail.
        let mut data: Vec<u8> = (0..16).collect();
        data.extend(encode_varint(300));
        let (v, _) = decode_into_i32(&data, 0).unwrap();
        let mut want: Vec<i32> = (0..16).collect();
        want.push(300);
        assert_eq!(v, want);
    }

    /// The levels this CPU can run, narrowest first.
    fn levels() -> Vec<Level> {
        let mut levels = vec![Level::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if sse::available() {
                levels.push(Level::Sse);
            }
            if avx2::available() {
                levels.push(Level::Avx2);
            }
            if avx512::available() {
                levels.push(Level::Avx512);
            }
        }
        levels
    }

    /// `decode_varints_into_at` into `room` slots, the values written.
    fn into_room(data: &[u8], room: usize, level: Level) -> Result<(Vec<i32>, bool), WireError> {
        let mut slots = vec![MaybeUninit::<i32>::uninit(); room];
        let (n, fits) = decode_varints_into_at(data, 0, &mut slots, level)?;
        // SAFETY: the first `n` slots were written.
        Ok((
            slots[..n]
                .iter()
                .map(|s| unsafe { s.assume_init() })
                .collect(),
            fits,
        ))
    }

    #[test]
    fn decode_into_stops_when_the_room_is_full() {
        for level in levels() {
            let data = [1u8; 40];
            assert_eq!(
                into_room(&data, 10, level),
                Ok((vec![1; 10], true)),
                "{level:?}"
            );
            // Long runs of one-, two- and three-byte varints (every fast
            // step of every decoder) into room for some of them only.
            for varint in [&[5u8][..], &[0x81, 0x01], &[0x81, 0x80, 0x01]] {
                let value = decode_varint(varint).unwrap().0 as i32;
                let data = varint.repeat(300);
                for room in [0, 1, 7, 8, 9, 31, 32, 33, 100, 150, 151, 299, 300, 301] {
                    let want = room.min(300);
                    assert_eq!(
                        into_room(&data, room, level),
                        Ok((vec![value; want], true)),
                        "{level:?}, {} bytes a varint, room {room}",
                        varint.len()
                    );
                }
            }
        }
    }

    #[test]
    fn packed_varints_errors_carry_offsets() {
        let mut out: Vec<i64> = Vec::new();
        // 12 good bytes, then a truncated varint at offset 12 (+ base 100).
        let mut data = vec![1u8; 12];
        data.push(0x80);
        assert_eq!(
            decode_packed_varints(&data, 100, &mut out),
            Err(WireError::at(112, WireErrorKind::TruncatedVarint))
        );
        let mut data = vec![5u8, 6];
        data.extend([0xffu8; 11]);
        out.clear();
        assert_eq!(
            decode_packed_varints(&data, 0, &mut out),
            Err(WireError::at(2, WireErrorKind::VarintTooLong))
        );
    }

    #[test]
    fn a_long_run_decoded_in_two_halves_keeps_values_and_errors_in_order() {
        // The cut follows the first varint to end at or past the middle
        // byte: the middle byte itself (one-byte varints), the byte after
        // it (two-byte ones), or two bytes on (three-byte ones).
        for (value, width) in [(1u64, 1usize), (300, 2), (50_000, 3)] {
            let values: Vec<i64> = (0..200).map(|i| (value + i % 100) as i64).collect();
            let data: Vec<u8> = values
                .iter()
                .flat_map(|&v| encode_varint(v as u64))
                .collect();
            assert_eq!(data.len(), 200 * width);
            for (name, got) in all_decoders(&data, 9) {
                assert_eq!(got, Ok((values.clone(), true)), "{name}");
            }
            let narrow: Vec<i32> = values.iter().map(|&v| v as i32).collect();
            assert_eq!(decode_into_i32(&data, 9), Ok((narrow, true)));
        }
        // Errors in the second half only: the offset within the whole run.
        let mut data = vec![1u8; 200];
        data.push(0x80);
        let mut out: Vec<i64> = Vec::new();
        assert_eq!(
            decode_packed_varints(&data, 1000, &mut out),
            Err(WireError::at(1200, WireErrorKind::TruncatedVarint))
        );
        // An error in each half: the first half's, as one pass reports it.
        let mut data = vec![1u8; 20];
        data.extend([0xffu8; 11]);
        data.extend([1u8; 150]);
        data.push(0x80);
        out.clear();
        assert_eq!(
            decode_packed_varints(&data, 0, &mut out),
            Err(WireError::at(20, WireErrorKind::VarintTooLong))
        );
        let mut room = vec![MaybeUninit::<i32>::uninit(); data.len()];
        assert_eq!(
            decode_varints_into(&data, 0, &mut room),
            Err(WireError::at(20, WireErrorKind::VarintTooLong))
        );
        for level in levels() {
            // Less room than the first half holds: one pass, stopping when
            // full; room for the first half and part of the second.
            let data = [7u8; 300];
            assert_eq!(into_room(&data, 100, level), Ok((vec![7; 100], true)));
            assert_eq!(into_room(&data, 200, level), Ok((vec![7; 200], true)));
        }
    }

    #[test]
    fn unfinished_varint_across_a_block_edge() {
        // Found by the property test: the varint that starts at byte 63
        // never ends; the error must point at its start.
        for zeros in [63usize, 64, 71, 72, 127, 135] {
            let mut data = vec![0u8; zeros];
            data.extend([0x80, 0x80]);
            let mut out: Vec<i64> = Vec::new();
            assert_eq!(
                decode_packed_varints(&data, 5, &mut out),
                Err(WireError::at(5 + zeros, WireErrorKind::TruncatedVarint)),
                "{zeros} zeros"
            );
            assert_eq!(
                decode_portable(&data),
                Err(WireError::at(zeros, WireErrorKind::TruncatedVarint))
            );
        }
    }

    #[test]
    fn packed_i32_overflow_is_flagged() {
        let mut out: Vec<i32> = Vec::new();
        let mut data = encode_varint(i32::MAX as u64);
        data.extend(encode_varint((-5i64) as u64));
        assert_eq!(decode_packed_varints(&data, 0, &mut out), Ok(true));
        assert_eq!(out, vec![i32::MAX, -5]);
        data.extend(encode_varint(1 << 31));
        out.clear();
        assert_eq!(decode_packed_varints(&data, 0, &mut out), Ok(false));
    }

    #[test]
    fn cursor_bounds() {
        let rec = [0x0a, 0x05, 1, 2];
        let mut c = Cursor::new(&rec);
        assert_eq!(c.tag(), Ok(0x0a));
        assert_eq!(
            c.len_delimited(),
            Err(WireError::at(
                1,
                WireErrorKind::LengthPastEnd { len: 5, left: 2 }
            ))
        );
        let mut c = Cursor::new(&[0x0b]);
        assert_eq!(c.tag(), Ok(0x0b));
        assert_eq!(c.skip(0x0b), Err(WireError::at(1, WireErrorKind::Group)));
        let mut c = Cursor::new(&[0x00]);
        assert_eq!(c.tag(), Err(WireError::at(0, WireErrorKind::FieldZero)));
        let mut c = Cursor::new(&[0x0d, 1, 2]);
        assert_eq!(c.tag(), Ok(0x0d));
        assert_eq!(
            c.fixed32(),
            Err(WireError::at(
                1,
                WireErrorKind::Truncated { need: 4, left: 2 }
            ))
        );
    }
}
