//! A sans-IO GZIP/ZLIB decompressor: push compressed chunks, pull
//! decompressed `Bytes`.
//!
//! Decompression uses flate2 with the zlib-rs backend (pure Rust, the fastest
//! inflate on crates.io).

use std::collections::VecDeque;
use std::fmt;

use bytes::{Buf, Bytes};
use flate2::{Decompress, DecompressError, FlushDecompress, Status};

use super::chunk_ring::ChunkRing;
use super::compression::Compression;
use super::ramp::SizeRamp;

/// What is wrong with a compressed stream.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InflateCause {
    /// The decoder rejected the data.
    #[error("{}", corrupt_message(.0))]
    Corrupt(#[source] DecompressError),
    /// The decoder stopped making progress with input and room for output.
    #[error("the decoder made no progress")]
    NoProgress,
    /// The file ends inside a stream.
    #[error("unexpected end of file inside the stream (truncated?)")]
    UnexpectedEof,
}

fn corrupt_message(e: &DecompressError) -> String {
    let msg = e.to_string();
    if msg.is_empty() {
        "invalid compressed data".into()
    } else {
        msg
    }
}

impl PartialEq for InflateCause {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (InflateCause::Corrupt(a), InflateCause::Corrupt(b)) => a.to_string() == b.to_string(),
            (InflateCause::NoProgress, InflateCause::NoProgress)
            | (InflateCause::UnexpectedEof, InflateCause::UnexpectedEof) => true,
            _ => false,
        }
    }
}

/// A corrupt or unfinished compressed stream.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("corrupt {compression} stream at compressed byte {offset}: {cause}")]
#[non_exhaustive]
pub struct InflateError {
    /// The compression being decoded.
    pub compression: Compression,
    /// Offset in the compressed input where the problem was detected.
    pub offset: u64,
    /// What is wrong.
    #[source]
    pub cause: InflateCause,
}

/// Default size of one piece of decompressed output.
const DEFAULT_OUTPUT_CHUNK: usize = 1 << 20;

/// A sans-IO decompressor: push compressed bytes, take decompressed `Bytes`.
///
/// Output comes in pieces of at most the output chunk size
/// ([`Inflater::next_output`]), so a small, highly compressed input cannot
/// make one huge buffer. Concatenated GZIP members (and ZLIB streams) are
/// decoded one after another, like `gzip -d`; bytes after a stream that do not
/// start another valid stream are an error. [`Compression::None`] passes the
/// input through unchanged (zero-copy).
pub struct Inflater {
    compression: Compression,
    decoder: Option<Decompress>,
    input: VecDeque<Bytes>,
    /// Compressed bytes consumed so far.
    consumed: u64,
    /// A stream (member) has started and not yet ended.
    in_stream: bool,
    /// The size of the next output piece: small first, then the output chunk.
    out_size: SizeRamp,
    /// Output chunks handed out, to inflate into again once released.
    ring: ChunkRing,
    /// An error found after some output was already produced, reported next.
    error: Option<InflateError>,
    failed: bool,
}

impl fmt::Debug for Inflater {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inflater")
            .field("compression", &self.compression)
            .field("consumed", &self.consumed)
            .field("in_stream", &self.in_stream)
            .finish_non_exhaustive()
    }
}

impl Inflater {
    /// A decompressor for `compression`, producing output pieces of up to 1 MiB.
    pub fn new(compression: Compression) -> Self {
        Self::with_output_chunk(compression, DEFAULT_OUTPUT_CHUNK)
    }

    /// A decompressor producing output pieces of up to `out_chunk` bytes
    /// (the first ones smaller, from 64 KiB doubling).
    pub fn with_output_chunk(compression: Compression, out_chunk: usize) -> Self {
        let decoder = match compression {
            Compression::None => None,
            Compression::Gzip => Some(Decompress::new_gzip(15)),
            Compression::Zlib => Some(Decompress::new(true)),
        };
        Inflater {
            compression,
            decoder,
            input: VecDeque::new(),
            consumed: 0,
            in_stream: false,
            out_size: SizeRamp::new(out_chunk),
            ring: ChunkRing::shared(),
            error: None,
            failed: false,
        }
    }

    /// The compression this inflater decodes.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Compressed bytes consumed so far.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Queues compressed input; take the output with [`Inflater::next_output`].
    pub fn feed(&mut self, input: Bytes) {
        if !input.is_empty() && !self.failed {
            self.input.push_back(input);
        }
    }

    /// Decompresses `input` and returns all of its output at once.
    ///
    /// Convenient for small inputs; the output is about as large as the
    /// compression ratio allows (up to ~1000× for deflate), so readers use
    /// [`Inflater::feed`] and [`Inflater::next_output`] instead.
    pub fn push(&mut self, input: &[u8]) -> Result<Bytes, InflateError> {
        self.feed(Bytes::copy_from_slice(input));
        let mut pieces = Vec::new();
        while let Some(piece) = self.next_output()? {
            pieces.push(piece);
        }
        Ok(match pieces.len() {
            0 => Bytes::new(),
            1 => pieces.pop().unwrap_or_default(),
            _ => Bytes::from(pieces.concat()),
        })
    }

    /// The next piece of output (at most the output chunk size), or `None`
    /// when all queued input has been consumed and more is needed.
    pub fn next_output(&mut self) -> Result<Option<Bytes>, InflateError> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        if self.failed {
            return Ok(None);
        }
        let Some(decoder) = self.decoder.as_mut() else {
            let piece = self.input.pop_front();
            if let Some(p) = &piece {
                self.consumed += p.len() as u64;
            }
            return Ok(piece);
        };
        let mut out: Vec<u8> = Vec::new();
        while let Some(front) = self.input.front_mut() {
            if front.is_empty() {
                self.input.pop_front();
                continue;
            }
            if out.capacity() == 0 {
                out = self.ring.take(self.out_size.take());
                out.clear();
            }
            if out.len() == out.capacity() {
                break;
            }
            if !self.in_stream {
                decoder.reset(true);
                self.in_stream = true;
            }
            let in_before = decoder.total_in();
            let out_before = out.len();
            let result = decoder.decompress_vec(front, &mut out, FlushDecompress::None);
            let used = decoder.total_in().saturating_sub(in_before);
            let used_usize = usize::try_from(used).unwrap_or(usize::MAX).min(front.len());
            front.advance(used_usize);
            self.consumed += used;
            match result {
                Ok(Status::StreamEnd) => self.in_stream = false,
                Ok(Status::Ok) | Ok(Status::BufError) => {
                    if used == 0 && out.len() == out_before {
                        // No progress with input and output space available.
                        let err = self.make_error(InflateCause::NoProgress);
                        return self.fail_with(err, out);
                    }
                }
                Err(e) => {
                    let err = self.make_error(InflateCause::Corrupt(e));
                    return self.fail_with(err, out);
                }
            }
        }
        Ok(if out.is_empty() {
            None
        } else {
            let piece = Bytes::from(out);
            self.ring.keep(&piece);
            Some(piece)
        })
    }

    /// Checks, at the end of the input, that the last stream was complete.
    /// An empty input is valid (a 0-byte file holds zero records).
    pub fn finish(&mut self) -> Result<(), InflateError> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        if self.failed {
            return Ok(());
        }
        if self.in_stream || self.input.iter().any(|b| !b.is_empty()) {
            self.failed = true;
            return Err(self.make_error(InflateCause::UnexpectedEof));
        }
        Ok(())
    }

    fn make_error(&self, cause: InflateCause) -> InflateError {
        InflateError {
            compression: self.compression,
            offset: self.consumed,
            cause,
        }
    }

    /// Marks the stream failed; returns output made before the error first.
    fn fail_with(
        &mut self,
        err: InflateError,
        out: Vec<u8>,
    ) -> Result<Option<Bytes>, InflateError> {
        self.failed = true;
        self.input.clear();
        if out.is_empty() {
            Err(err)
        } else {
            self.error = Some(err);
            Ok(Some(Bytes::from(out)))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// `data` as one GZIP member (also used by compression.rs's tests).
    pub(crate) fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// `data` as one ZLIB stream.
    pub(crate) fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn inflate_round_trip_and_multi_member() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (c, enc) in [
            (Compression::Gzip, gzip as fn(&[u8]) -> Vec<u8>),
            (Compression::Zlib, zlib),
        ] {
            let mut two = enc(&data);
            two.extend_from_slice(&enc(b"tail"));
            let mut inf = Inflater::with_output_chunk(c, 4096);
            let mut out = Vec::new();
            for piece in two.chunks(777) {
                inf.feed(Bytes::copy_from_slice(piece));
                while let Some(o) = inf.next_output().unwrap() {
                    assert!(o.len() <= 4096);
                    out.extend_from_slice(&o);
                }
            }
            inf.finish().unwrap();
            let mut want = data.clone();
            want.extend_from_slice(b"tail");
            assert_eq!(out, want);
            assert_eq!(inf.consumed(), two.len() as u64);
        }
    }

    #[test]
    fn push_returns_everything() {
        let mut inf = Inflater::new(Compression::Zlib);
        assert_eq!(
            inf.push(&zlib(b"hello world")).unwrap(),
            Bytes::from_static(b"hello world")
        );
        inf.finish().unwrap();
        let mut inf = Inflater::new(Compression::None);
        assert_eq!(inf.push(b"abc").unwrap(), Bytes::from_static(b"abc"));
        inf.finish().unwrap();
    }

    #[test]
    fn empty_input_is_valid() {
        for c in [Compression::None, Compression::Gzip, Compression::Zlib] {
            let mut inf = Inflater::new(c);
            assert_eq!(inf.next_output().unwrap(), None);
            inf.finish().unwrap();
        }
    }

    #[test]
    fn truncated_stream_is_an_error_at_its_end() {
        let z = gzip(b"some data that is long enough to compress");
        let cut = &z[..z.len() - 3];
        let mut inf = Inflater::new(Compression::Gzip);
        let out = inf.push(cut).unwrap();
        assert!(b"some data that is long enough to compress".starts_with(&out));
        let err = inf.finish().unwrap_err();
        assert_eq!(err.offset, cut.len() as u64);
        assert_eq!(err.compression, Compression::Gzip);
        assert_eq!(err.cause, InflateCause::UnexpectedEof);
    }

    #[test]
    fn corrupt_trailer_crc_is_an_error() {
        let mut z = gzip(b"hello hello hello");
        let n = z.len();
        z[n - 8] ^= 0xff; // CRC32 of the gzip trailer
        let mut inf = Inflater::new(Compression::Gzip);
        let err = inf.push(&z).unwrap_err();
        assert_eq!(err.compression, Compression::Gzip);
        assert_eq!(err.offset, n as u64 - 4);
    }

    #[test]
    fn garbage_after_a_member_is_an_error() {
        let mut z = gzip(b"hello");
        let n = z.len() as u64;
        z.extend_from_slice(b"garbage");
        let mut inf = Inflater::new(Compression::Gzip);
        // Output before the error comes first, then the error.
        inf.feed(Bytes::from(z));
        assert_eq!(
            inf.next_output().unwrap(),
            Some(Bytes::from_static(b"hello"))
        );
        let err = inf.next_output().unwrap_err();
        assert!(err.offset >= n, "{err:?}");
        assert_eq!(inf.next_output().unwrap(), None);
    }
}
