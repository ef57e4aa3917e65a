//! Byte ranges of one uncompressed file of lines (JSONL, plain text, CSV
//! whose records are one line each), so that several workers read one large
//! file: `infeed.beam.ConvertFiles` (docs/beam.md, "Large files").
//!
//! A file of `size` bytes is cut into ranges `[start, end)` of about the
//! same length ([`split`]). A range owns every line that *starts* inside it
//! (a line starts at byte 0 and after each `\n`): its reader skips the rest
//! of the line it begins in, unless that line starts exactly at `start`,
//! and reads on past `end` to the end of its last line. So the ranges' bytes
//! are the file's bytes cut at line starts, every line read exactly once,
//! whatever the range size; a line longer than a range makes the ranges it
//! covers empty. A CSV file's header belongs to the file: every range reads
//! it ([`csv_header`]) and owns no byte before the header's end.

use std::io::{self, Read};

use super::error::ConvertError;
use super::input::{self, MAX_RECORD_BYTES};

/// Receives whole lines and the file offset of their first byte; returns
/// false to stop.
pub(super) type Emit<'a> = dyn FnMut(&[u8], u64) -> Result<bool, ConvertError> + 'a;

/// Ranges `[k·bytes, (k+1)·bytes)` covering `[0, size)` (the last one
/// shorter); one range `[0, size)` when `bytes` is 0 or at least `size`.
pub(super) fn split(size: u64, bytes: u64) -> Vec<(u64, u64)> {
    if bytes == 0 || size <= bytes {
        return vec![(0, size)];
    }
    (0..size.div_ceil(bytes))
        .map(|k| (k * bytes, ((k + 1) * bytes).min(size)))
        .collect()
}

/// Reads into `buf[len..]`, retrying interrupted reads: 0 at the end.
fn fill(src: &mut dyn Read, buf: &mut [u8], display: &str) -> Result<usize, ConvertError> {
    loop {
        match src.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ConvertError::io(display, e)),
        }
    }
}

/// Reads the lines that start in `[start, end)` from `src`, which is
/// positioned at byte `start.saturating_sub(1)` of the file, and hands them
/// to `emit` in pieces of whole lines of about `chunk` bytes, each with the
/// file offset of its first byte (`emit` returns false to stop). The last
/// line of the file may lack its `\n`.
pub(super) fn read_lines(
    src: &mut dyn Read,
    start: u64,
    end: u64,
    chunk: usize,
    display: &str,
    emit: &mut Emit<'_>,
) -> Result<(), ConvertError> {
    let chunk = chunk.max(1);
    let mut out: Vec<u8> = Vec::with_capacity(chunk * 2);
    // The file offset of `out[0]`.
    let mut at = start.saturating_sub(1);
    if start > 0 {
        // Skip to the first line start at or after `start`: the byte after
        // the first `\n` at or after `start - 1`.
        let mut block = vec![0u8; chunk.min(1 << 16)];
        loop {
            let n = fill(src, &mut block, display)?;
            if n == 0 {
                return Ok(()); // no line starts in the range
            }
            if let Some(i) = memchr::memchr(b'\n', &block[..n]) {
                out.extend_from_slice(&block[i + 1..n]);
                at += i as u64 + 1;
                break;
            }
            at += n as u64;
        }
    }
    if at >= end {
        return Ok(()); // the line that covers `start` also covers `end`
    }
    // Every `\n` in `out[..scanned]` is before `end - 1`: the lines after
    // them start inside the range.
    let mut scanned = 0usize;
    let mut eof = false;
    loop {
        // The range's last line ends at the first `\n` at or after `end - 1`.
        let from = scanned.max(usize::try_from(end - 1 - at).unwrap_or(usize::MAX));
        if let Some(i) = out.get(from..).and_then(|rest| memchr::memchr(b'\n', rest)) {
            let cut = from + i + 1;
            emit_lines(&out[..cut], at, chunk, emit)?;
            return Ok(());
        }
        scanned = out.len();
        if eof {
            if !out.is_empty() {
                emit_lines(&out, at, chunk, emit)?;
            }
            return Ok(());
        }
        if out.len() >= chunk {
            // Hand on the whole lines so far.
            if let Some(last) = memchr::memrchr(b'\n', &out) {
                if !emit_lines(&out[..=last], at, chunk, emit)? {
                    return Ok(());
                }
                out.drain(..=last);
                at += last as u64 + 1;
                scanned = out.len();
            } else if out.len() > MAX_RECORD_BYTES {
                return Err(ConvertError::input(
                    display,
                    format!(
                        "byte {at}: a line longer than {} MiB (is the format right?)",
                        MAX_RECORD_BYTES >> 20
                    ),
                ));
            }
        }
        let len = out.len();
        out.resize(len + chunk, 0);
        let n = fill(src, &mut out[len..], display)?;
        out.truncate(len + n);
        eof = n == 0;
    }
}

/// Hands `data` (whole lines from file offset `at`) to `emit` in pieces of
/// about `chunk` bytes cut after a `\n`. False when `emit` asked to stop.
fn emit_lines(
    mut data: &[u8],
    mut at: u64,
    chunk: usize,
    emit: &mut Emit<'_>,
) -> Result<bool, ConvertError> {
    while data.len() > chunk {
        let Some(i) = memchr::memchr(b'\n', &data[chunk - 1..]) else {
            break;
        };
        let cut = chunk + i;
        if !emit(&data[..cut], at)? {
            return Ok(false);
        }
        data = &data[cut..];
        at += cut as u64;
    }
    if data.is_empty() {
        return Ok(true);
    }
    emit(data, at)
}

/// A CSV file's header, read from its start (`src` at byte 0): the field
/// names, the file offset where the first record can start (after the
/// header's line break) and the number of the line there; `None` for a
/// file of blank lines only.
pub(super) fn csv_header(
    src: &mut dyn Read,
    delim: u8,
    display: &str,
) -> Result<Option<(Vec<String>, u64, u64)>, ConvertError> {
    let mut buf: Vec<u8> = Vec::new();
    let (mut pos, mut line, mut eof) = (0usize, 1u64, false);
    loop {
        let Some(unit) = input::split_unit(&buf[pos..], eof, Some(delim)) else {
            if eof {
                return Ok(None);
            }
            if buf.len() - pos > MAX_RECORD_BYTES {
                return Err(ConvertError::input(
                    display,
                    format!(
                        "line {line}: a header longer than {} MiB",
                        MAX_RECORD_BYTES >> 20
                    ),
                ));
            }
            let len = buf.len();
            buf.resize(len + (64 << 10), 0);
            let n = fill(src, &mut buf[len..], display)?;
            buf.truncate(len + n);
            eof = n == 0;
            continue;
        };
        let content = &buf[pos..pos + unit.content];
        let unit_line = line;
        pos += unit.len;
        line += unit.newlines;
        if input::csv_blank(content) {
            continue;
        }
        let names = input::csv_header(content, delim, display, unit_line)?;
        return Ok(Some((names, pos as u64, line)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Cursor;

    /// The pieces every range of `data` hands on, with their offsets.
    fn pieces(data: &[u8], bytes: u64, chunk: usize) -> Vec<(Vec<u8>, u64)> {
        let mut got = Vec::new();
        for (start, end) in split(data.len() as u64, bytes) {
            let mut src = Cursor::new(data);
            src.set_position(start.saturating_sub(1));
            read_lines(&mut src, start, end, chunk, "t", &mut |piece, at| {
                // Every piece is whole lines: it starts at a line start, and
                // ends after a `\n` or at the end of the file.
                let at_usize = at as usize;
                assert!(at_usize == 0 || data[at_usize - 1] == b'\n');
                let stop = at_usize + piece.len();
                assert!(stop == data.len() || data[stop - 1] == b'\n');
                // The piece's first line starts inside the range.
                assert!(at >= start && at < end, "{at} outside [{start}, {end})");
                got.push((piece.to_vec(), at));
                Ok(true)
            })
            .unwrap();
        }
        got
    }

    /// The lines (with their start offsets) of `data` as one reader sees them.
    fn lines(data: &[u8]) -> Vec<(u64, &[u8])> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let len = memchr::memchr(b'\n', &data[at..]).map_or(data.len() - at, |i| i + 1);
            out.push((at as u64, &data[at..at + len]));
            at += len;
        }
        out
    }

    #[test]
    fn ranges_cover_the_file() {
        assert_eq!(split(10, 4), vec![(0, 4), (4, 8), (8, 10)]);
        assert_eq!(split(8, 4), vec![(0, 4), (4, 8)]);
        assert_eq!(split(3, 4), vec![(0, 3)]);
        assert_eq!(split(0, 4), vec![(0, 0)]);
        assert_eq!(split(5, 0), vec![(0, 5)]);
    }

    #[test]
    fn a_line_belongs_to_the_range_it_starts_in() {
        let data = b"aaaa\nbb\n\ncccccc\r\nd";
        // Lines start at 0, 5, 8, 9 and 17. Ranges of 5: [0,5) owns
        // "aaaa\n"; [5,10) "bb\n", "\n" and "cccccc\r\n" (which runs on
        // to 16); [10,15) no line; [15,18) "d".
        let got = pieces(data, 5, 1 << 20);
        let starts: Vec<u64> = got.iter().map(|p| p.1).collect();
        assert_eq!(starts, vec![0, 5, 17]);
        assert_eq!(got[0].0, b"aaaa\n");
        assert_eq!(got[1].0, b"bb\n\ncccccc\r\n");
        assert_eq!(got[2].0, b"d");
        // "d" starts at 17, in [15, 19).
        let got = pieces(data, 15, 1 << 20);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], (b"d".to_vec(), 17));
        // A range that starts exactly at a line start owns it.
        let got = pieces(b"ab\ncd\n", 3, 1 << 20);
        assert_eq!(got, vec![(b"ab\n".to_vec(), 0), (b"cd\n".to_vec(), 3)]);
    }

    #[test]
    fn the_csv_header_is_read_from_the_start() {
        let data = b"\n\xEF\xBB\xBFid,\"te\nxt\"\r\n1,a\n";
        let (names, end, line) = csv_header(&mut Cursor::new(&data[..]), b',', "t")
            .unwrap()
            .unwrap();
        assert_eq!(names, vec!["id".to_string(), "te\nxt".to_string()]);
        assert_eq!(&data[end as usize..], b"1,a\n");
        assert_eq!(line, 4);
        assert_eq!(
            csv_header(&mut Cursor::new(&b"\n\r\n"[..]), b',', "t").unwrap(),
            None
        );
    }

    proptest! {
        /// Every line of the file, exactly once, in order, for any range
        /// size and piece size: blank lines, CRLF, a last line without `\n`.
        #[test]
        fn every_line_is_read_exactly_once(
            data in proptest::collection::vec(
                prop_oneof![Just(b'\n'), Just(b'\r'), Just(b'a'), Just(b'{')], 0..300),
            bytes in 1u64..64,
            chunk in 1usize..40,
        ) {
            let got = pieces(&data, bytes, chunk);
            let joined: Vec<u8> = got.iter().flat_map(|p| p.0.clone()).collect();
            prop_assert_eq!(&joined, &data);
            // Offsets follow each other: the pieces tile the file.
            let mut at = 0u64;
            for (piece, start) in &got {
                prop_assert_eq!(*start, at);
                at += piece.len() as u64;
            }
            // Each line lies in one piece, and in the range it starts in.
            let ranges = split(data.len() as u64, bytes);
            for (line_at, line) in lines(&data) {
                let owner = ranges.iter().position(|&(s, e)| line_at >= s && line_at < e);
                let piece = got.iter().find(|(p, s)| line_at >= *s && line_at < s + p.len() as u64);
                let (p, s) = piece.expect("the line is in a piece");
                prop_assert!(line_at + line.len() as u64 <= s + p.len() as u64, "a line is cut");
                let piece_range = ranges.iter().position(|&(rs, re)| *s >= rs && *s < re);
                prop_assert_eq!(owner, piece_range);
            }
        }
    }
}
