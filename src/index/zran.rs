//! Access points into a GZIP or ZLIB stream, so that a record far into a
//! compressed shard is reached by inflating at most one span of output,
//! not everything before it (the method of zlib's `examples/zran.c`).
//!
//! An access point is a place where a deflate block begins: the compressed
//! byte there and the bits of the byte before that belong to the block, the
//! uncompressed offset, and the 32 KiB of output before it (the window that
//! back-references may reach into). Inflating from a point primes those
//! bits, sets the window as the dictionary and inflates raw deflate from
//! the byte. Points are found in one pass ([`PointFinder`]), inflating with
//! `Z_BLOCK` so that inflate stops at each block boundary; a point is kept
//! every `span` bytes of output. Windows are stored deflated (a 32 KiB
//! window per MiB would be 3% of the data; deflated, about 1%).
//!
//! zlib's own API through `libz-rs-sys` (zlib-rs, the inflate flate2 uses
//! here): flate2 has neither `inflatePrime` nor `Z_BLOCK`.

use std::ffi::c_int;
use std::io::Write;

use bytes::Bytes;
use libz_rs_sys as z;

use crate::record::Compression;
use crate::record::chunk_ring::ChunkRing;

/// Bytes of output a back-reference may reach (deflate's window).
pub const WINDOW: usize = 32 * 1024;

/// Where inflating can start in the middle of a compressed stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessPoint {
    /// Offset in the uncompressed stream.
    pub out: u64,
    /// Offset in the compressed stream of the first whole byte of the block.
    pub input: u64,
    /// Bits of the byte before `input` that belong to the block (0 to 7).
    pub bits: u8,
    /// The window (up to 32 KiB of output before `out`), raw-deflated.
    pub window: Bytes,
}

/// Why inflating failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ZError(pub String);

/// One zlib inflate stream (owned, boxed: zlib's state points back at it).
struct Stream {
    strm: Box<z::z_stream>,
}

// SAFETY: a z_stream is owned by this value alone and used from one thread
// at a time (it holds raw pointers only into its own state and the buffers
// of the call in progress).
unsafe impl Send for Stream {}

impl Stream {
    /// An inflate stream: `window_bits` as zlib's (`-15` raw deflate, `15`
    /// ZLIB, `31` GZIP).
    fn new(window_bits: c_int) -> Result<Stream, ZError> {
        let mut strm = Box::new(z::z_stream::default());
        // SAFETY: a zeroed z_stream with default allocators, as zlib asks.
        let ret = unsafe {
            z::inflateInit2_(
                &mut *strm,
                window_bits,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as c_int,
            )
        };
        if ret != z::Z_OK {
            return Err(ZError(format!("inflateInit2 failed ({ret})")));
        }
        Ok(Stream { strm })
    }

    /// Starts a new stream of the same kind (after the end of one member).
    fn reset(&mut self, window_bits: c_int) -> Result<(), ZError> {
        // SAFETY: initialised by `new`.
        let ret = unsafe { z::inflateReset2(&mut *self.strm, window_bits) };
        check(ret, "inflateReset2")
    }

    /// Inserts `bits` bits of `value` before the next input byte.
    fn prime(&mut self, bits: u8, value: u8) -> Result<(), ZError> {
        // SAFETY: initialised by `new`.
        let ret =
            unsafe { z::inflatePrime(&mut *self.strm, c_int::from(bits), c_int::from(value)) };
        check(ret, "inflatePrime")
    }

    /// Sets the window back-references reach into.
    fn set_dictionary(&mut self, window: &[u8]) -> Result<(), ZError> {
        // SAFETY: the pointer and length describe `window`, alive for the call.
        let ret = unsafe {
            z::inflateSetDictionary(&mut *self.strm, window.as_ptr(), window.len() as u32)
        };
        check(ret, "inflateSetDictionary")
    }

    /// Inflates from `input` into `output` with `flush`: zlib's return code,
    /// the input used and the output made.
    fn inflate(&mut self, input: &[u8], output: &mut [u8], flush: c_int) -> (c_int, usize, usize) {
        let avail_in = input.len().min(u32::MAX as usize) as u32;
        let avail_out = output.len().min(u32::MAX as usize) as u32;
        self.strm.next_in = input.as_ptr();
        self.strm.avail_in = avail_in;
        self.strm.next_out = output.as_mut_ptr();
        self.strm.avail_out = avail_out;
        // SAFETY: next_in/next_out point into `input` and `output` for the
        // lengths given, alive for the call.
        let ret = unsafe { z::inflate(&mut *self.strm, flush) };
        let used = (avail_in - self.strm.avail_in) as usize;
        let made = (avail_out - self.strm.avail_out) as usize;
        self.strm.next_in = std::ptr::null();
        self.strm.next_out = std::ptr::null_mut();
        (ret, used, made)
    }

    fn data_type(&self) -> c_int {
        self.strm.data_type
    }

    fn message(&self, ret: c_int) -> String {
        if self.strm.msg.is_null() {
            return format!("zlib error {ret}");
        }
        // SAFETY: zlib sets msg to a static NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(self.strm.msg) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: initialised by `new`, ended once.
        unsafe {
            z::inflateEnd(&mut *self.strm);
        }
    }
}

fn check(ret: c_int, what: &str) -> Result<(), ZError> {
    if ret == z::Z_OK {
        Ok(())
    } else {
        Err(ZError(format!("{what} failed ({ret})")))
    }
}

/// zlib's window bits for a stream of `compression` with its header.
fn header_bits(compression: Compression) -> c_int {
    match compression {
        Compression::Gzip => 31,
        _ => 15,
    }
}

/// Bytes after a stream's deflate data: the GZIP trailer (CRC-32 and size)
/// or the ZLIB one (Adler-32).
fn trailer_len(compression: Compression) -> usize {
    match compression {
        Compression::Gzip => 8,
        _ => 4,
    }
}

/// A window deflated for storage.
fn pack_window(window: &[u8]) -> Bytes {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(window);
    Bytes::from(e.finish().unwrap_or_default())
}

/// A stored window, inflated.
fn unpack_window(packed: &[u8]) -> Result<Vec<u8>, ZError> {
    let mut out = Vec::with_capacity(WINDOW);
    let mut d = flate2::write::DeflateDecoder::new(&mut out);
    d.write_all(packed)
        .and_then(|()| d.finish().map(|_| ()))
        .map_err(|e| ZError(format!("its window does not inflate: {e}")))?;
    if out.len() > WINDOW {
        return Err(ZError(format!(
            "its window is {} bytes, more than 32 KiB",
            out.len()
        )));
    }
    Ok(out)
}

/// Output handed on at a time.
const OUT_CHUNK: usize = 1 << 20;

/// Inflates a whole GZIP or ZLIB shard as its bytes arrive, handing on its
/// output in chunks and keeping an access point every `span` bytes of it.
/// The output is inflated straight into the chunks it hands on (recycled
/// once released), and a window is copied only where a point is kept.
pub struct PointFinder {
    compression: Compression,
    stream: Stream,
    span: u64,
    /// Compressed bytes consumed, output made.
    input: u64,
    output: u64,
    points: Vec<AccessPoint>,
    /// Within a stream (member); `false` between members and at the start.
    in_stream: bool,
    /// The chunk being filled, and how far.
    chunk: Vec<u8>,
    filled: usize,
    /// The last chunk handed on (the window may reach into it).
    previous: Bytes,
    ring: ChunkRing,
}

impl PointFinder {
    /// A finder for a shard of `compression` (GZIP or ZLIB), keeping a point
    /// every `span` bytes of output.
    pub fn new(compression: Compression, span: u64) -> Result<PointFinder, ZError> {
        let mut ring = ChunkRing::shared();
        let chunk = full_chunk(&mut ring);
        Ok(PointFinder {
            compression,
            stream: Stream::new(header_bits(compression))?,
            span: span.max(1),
            input: 0,
            output: 0,
            points: Vec::new(),
            in_stream: false,
            chunk,
            filled: 0,
            previous: Bytes::new(),
            ring,
        })
    }

    /// Inflates `input` (the next compressed bytes), calling `emit` with
    /// each full chunk of output, in order.
    pub fn push(&mut self, mut input: &[u8], mut emit: impl FnMut(Bytes)) -> Result<(), ZError> {
        while !input.is_empty() {
            if !self.in_stream {
                // Another member (or the first): its header follows.
                self.stream.reset(header_bits(self.compression))?;
                self.in_stream = true;
            }
            if self.filled == self.chunk.len() {
                self.hand_on(&mut emit);
            }
            let (ret, used, made) =
                self.stream
                    .inflate(input, &mut self.chunk[self.filled..], z::Z_BLOCK);
            input = &input[used..];
            self.input += used as u64;
            self.filled += made;
            self.output += made as u64;
            match ret {
                z::Z_OK | z::Z_BUF_ERROR => {}
                // A GZIP member ends after its trailer, which inflate reads.
                z::Z_STREAM_END => self.in_stream = false,
                _ => {
                    return Err(ZError(format!(
                        "{} at compressed byte {}",
                        self.stream.message(ret),
                        self.input
                    )));
                }
            }
            let kind = self.stream.data_type();
            // At a block boundary (bit 128), not in the last block (64).
            let boundary = kind & 128 != 0 && kind & 64 == 0;
            let due = self
                .points
                .last()
                .is_none_or(|last| self.output - last.out >= self.span);
            if self.in_stream && boundary && due {
                self.points.push(AccessPoint {
                    out: self.output,
                    input: self.input,
                    bits: (kind & 7) as u8,
                    window: pack_window(&self.window()),
                });
            }
            if used == 0 && made == 0 && ret != z::Z_STREAM_END {
                // Needs more input than was given.
                break;
            }
        }
        Ok(())
    }

    /// The last 32 KiB of output (fewer at the start).
    fn window(&self) -> Vec<u8> {
        let here = &self.chunk[..self.filled];
        if here.len() >= WINDOW {
            return here[here.len() - WINDOW..].to_vec();
        }
        let before = &self.previous[self.previous.len().saturating_sub(WINDOW - here.len())..];
        [before, here].concat()
    }

    /// Hands on the chunk filled so far and starts another.
    fn hand_on(&mut self, emit: &mut impl FnMut(Bytes)) {
        let next = full_chunk(&mut self.ring);
        let mut done = std::mem::replace(&mut self.chunk, next);
        done.truncate(self.filled);
        self.filled = 0;
        let done = Bytes::from(done);
        self.ring.keep(&done);
        self.previous = done.clone();
        emit(done);
    }

    /// Hands on the rest of the output and checks that the stream ended
    /// where the input did; the access points.
    pub fn finish(mut self, mut emit: impl FnMut(Bytes)) -> Result<Vec<AccessPoint>, ZError> {
        if self.filled > 0 {
            self.hand_on(&mut emit);
        }
        if self.in_stream {
            return Err(ZError(format!(
                "the compressed stream is cut short at byte {} (truncated?)",
                self.input
            )));
        }
        Ok(self.points)
    }
}

/// An output chunk of the ring, its whole length writable.
fn full_chunk(ring: &mut ChunkRing) -> Vec<u8> {
    let mut chunk = ring.take(OUT_CHUNK);
    chunk.resize(OUT_CHUNK, 0);
    chunk
}

/// Inflates from `point` on: `compressed` holds the shard's bytes from
/// `point.input - 1` (or `point.input` when `bits` is 0) onward, as far as
/// needed; `want` is the uncompressed range to return (it must start at or
/// after `point.out`). A stream that ends inside the range continues into
/// the next member, as the shard reader does.
pub fn inflate_from(
    compression: Compression,
    point: &AccessPoint,
    compressed: &[u8],
    want: std::ops::Range<u64>,
) -> Result<Vec<u8>, ZError> {
    let mut out = Vec::new();
    inflate_into(compression, point, compressed, want, &mut out)?;
    Ok(out)
}

/// As [`inflate_from`], into `out` (its bytes replaced; a buffer used
/// again costs no page faults): the wanted range is inflated straight
/// into it, only the output before the range goes through a scratch
/// buffer.
pub fn inflate_into(
    compression: Compression,
    point: &AccessPoint,
    compressed: &[u8],
    want: std::ops::Range<u64>,
    out: &mut Vec<u8>,
) -> Result<(), ZError> {
    match inflate_range(compression, point, compressed, want, out)? {
        Filled::Whole => Ok(()),
        Filled::Short(short) => Err(ZError(format!(
            "the compressed bytes end {short} bytes before the wanted range does"
        ))),
    }
}

/// Whether the stream inflated from `point` (its bytes from there as
/// [`inflate_from`] takes them) ends exactly at output `end`: no byte after
/// it, and the compressed bytes end with its last member's trailer. False
/// where it goes on, or does not inflate cleanly to there.
pub fn ends_at(compression: Compression, point: &AccessPoint, compressed: &[u8], end: u64) -> bool {
    let mut after = Vec::new();
    let next = end..end.saturating_add(1);
    matches!(
        inflate_range(compression, point, compressed, next, &mut after),
        Ok(Filled::Short(1))
    )
}

/// How far [`inflate_range`] filled its range.
enum Filled {
    Whole,
    /// The compressed bytes ended this many bytes before the range did.
    Short(u64),
}

/// Inflates `want` from `point` into `out`, as [`inflate_into`] does;
/// where the compressed bytes end first, how far short.
fn inflate_range(
    compression: Compression,
    point: &AccessPoint,
    compressed: &[u8],
    want: std::ops::Range<u64>,
    out: &mut Vec<u8>,
) -> Result<Filled, ZError> {
    if want.start < point.out {
        return Err(ZError(format!(
            "the range starts at {}, before the access point at {}",
            want.start, point.out
        )));
    }
    let mut stream = Stream::new(-15)?;
    let mut input = compressed;
    if point.bits > 0 {
        let Some((&first, rest)) = input.split_first() else {
            return Err(ZError("no compressed bytes at the access point".into()));
        };
        stream.prime(point.bits, first >> (8 - point.bits))?;
        input = rest;
    }
    let window = unpack_window(&point.window)?;
    if !window.is_empty() {
        stream.set_dictionary(&window)?;
    }
    let len = usize::try_from(want.end.saturating_sub(want.start))
        .map_err(|_| ZError("the range is too large".into()))?;
    out.clear();
    out.resize(len, 0);
    let mut at = point.out;
    let mut filled = 0;
    let mut before = Vec::new();
    let mut skip = 0usize;
    let mut raw = true;
    while filled < len {
        if skip > 0 {
            let n = skip.min(input.len());
            skip -= n;
            input = &input[n..];
            if skip > 0 {
                return Err(ZError("the compressed bytes end in a trailer".into()));
            }
            stream.reset(header_bits(compression))?;
            raw = false;
            continue;
        }
        let (ret, used, made) = if at < want.start {
            // Never past the range's start: what follows goes into `out`.
            let n = usize::try_from(want.start - at).map_or(BEFORE, |n| n.min(BEFORE));
            before.resize(n, 0);
            stream.inflate(input, &mut before, z::Z_NO_FLUSH)
        } else {
            let made = stream.inflate(input, &mut out[filled..], z::Z_NO_FLUSH);
            filled += made.2;
            made
        };
        input = &input[used..];
        at += made as u64;
        match ret {
            z::Z_OK => {}
            z::Z_STREAM_END => {
                // A raw stream ends before its member's trailer; a stream
                // read with its header ends after it.
                skip = if raw { trailer_len(compression) } else { 0 };
                if skip == 0 {
                    stream.reset(header_bits(compression))?;
                }
            }
            z::Z_BUF_ERROR if used == 0 && made == 0 => {
                return Ok(Filled::Short(want.end - at));
            }
            z::Z_BUF_ERROR => {}
            _ => return Err(ZError(stream.message(ret))),
        }
    }
    Ok(Filled::Whole)
}

/// The scratch buffer the output before a wanted range is inflated into.
const BEFORE: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(data: &[u8], level: u32) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Text-like data that compresses but has long back-references.
    fn data(n: usize) -> Vec<u8> {
        let words = [
            "infeed ", "record ", "shard ", "batch ", "tensor ", "epoch ",
        ];
        let mut out = Vec::with_capacity(n);
        let mut x: u64 = 7;
        while out.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.extend_from_slice(words[(x >> 60) as usize % words.len()].as_bytes());
            out.extend_from_slice(&(x >> 40).to_le_bytes()[..(x >> 62) as usize]);
        }
        out.truncate(n);
        out
    }

    fn points(
        compression: Compression,
        compressed: &[u8],
        span: u64,
    ) -> (Vec<AccessPoint>, Vec<u8>) {
        let mut finder = PointFinder::new(compression, span).unwrap();
        let mut all = Vec::new();
        for chunk in compressed.chunks(10_007) {
            finder
                .push(chunk, |piece| all.extend_from_slice(&piece))
                .unwrap();
        }
        let points = finder
            .finish(|piece| all.extend_from_slice(&piece))
            .unwrap();
        (points, all)
    }

    /// Every range read from its nearest point equals the plain output, for
    /// GZIP (one and several members) and ZLIB, at every span.
    #[test]
    fn any_range_from_its_point_equals_the_stream() {
        let plain = data(3 << 20);
        let mut two = gzip(&plain[..1 << 20], 6);
        two.extend_from_slice(&gzip(&plain[1 << 20..], 1));
        for (compression, compressed) in [
            (Compression::Gzip, gzip(&plain, 6)),
            (Compression::Gzip, two),
            (Compression::Zlib, zlib(&plain)),
        ] {
            for span in [64 << 10, 1 << 20] {
                let (points, all) = points(compression, &compressed, span);
                assert_eq!(all, plain);
                // A point only where a deflate block begins: blocks of this
                // data hold up to ~200 KiB of output.
                assert!(
                    points.len() as u64 >= plain.len() as u64 / span.max(256 << 10) / 2,
                    "{}",
                    points.len()
                );
                assert!(points.windows(2).all(|w| w[1].out - w[0].out >= span));
                let ranges = [
                    (0u64, 100u64),
                    (1 << 20, (1 << 20) + 5000),
                    (3_000_000, 3 << 20),
                    (1_048_000, 1_049_000),
                ];
                for (start, end) in ranges {
                    let p = points.iter().rev().find(|p| p.out <= start).unwrap();
                    let from = (p.input - u64::from(p.bits > 0)) as usize;
                    let got =
                        inflate_from(compression, p, &compressed[from..], start..end).unwrap();
                    assert_eq!(
                        got,
                        &plain[start as usize..end as usize],
                        "{start}..{end} span {span}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_cut_stream_and_a_bad_window_are_errors() {
        let plain = data(1 << 20);
        let compressed = gzip(&plain, 6);
        let mut finder = PointFinder::new(Compression::Gzip, 1 << 16).unwrap();
        finder
            .push(&compressed[..compressed.len() / 2], |_| {})
            .unwrap();
        assert!(finder.finish(|_| {}).unwrap_err().0.contains("cut short"));
        let (points, _) = points(Compression::Gzip, &compressed, 1 << 16);
        let mut p = points[3].clone();
        p.window = Bytes::from_static(b"\xff\xff\xff");
        let from = (p.input - u64::from(p.bits > 0)) as usize;
        let err = inflate_from(
            Compression::Gzip,
            &p,
            &compressed[from..],
            p.out..p.out + 10,
        )
        .unwrap_err();
        assert!(err.0.contains("window does not inflate"), "{err}");
    }
}
