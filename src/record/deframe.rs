//! The sans-IO deframer: push uncompressed chunks, pull verified records.
//!
//! Both readers (sync and async) are built on it, and the pipeline can run it
//! on a worker pool, away from the async executor. The hot path slices each
//! record out of the pushed chunk (`Bytes::slice`, no copy, no allocation);
//! only a record that spans two chunks is copied into a pending buffer.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use super::crc::{masked_crc32c, masked_crc32c_of_length};
use super::error::{ErrorKind, RecordError, RecordPart};
use super::frame::{FOOTER_LEN, HEADER_LEN, parse_header};
use super::mapped;
use super::options::{CorruptPolicy, ReadOptions, SkipEvent, SkipReport};

/// Header plus footer.
const FRAME_LEN: u64 = (HEADER_LEN + FOOTER_LEN) as u64;
/// How many bytes the resync scan pulls from the current chunk at a time.
const SCAN_PULL: usize = 64 * 1024;

/// One record: its payload and where it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The payload; a zero-copy slice of the read buffer when the record lies
    /// inside one chunk.
    pub data: Bytes,
    /// Byte offset of the record's 12-byte header in the uncompressed stream.
    pub offset: u64,
}

/// A resynchronisation in progress (skip policy).
#[derive(Debug)]
struct Scan {
    /// Offset of the corrupt record's header: where the skipped region starts.
    start: u64,
    /// Why the region is skipped.
    kind: ErrorKind,
    /// The next candidate position, relative to the start of `pending`.
    pos: usize,
    /// The skipped record's header is valid but its length runs past the
    /// end of the data: `(length, bytes left after the header)`. If a record
    /// is found after it, the region is [`ErrorKind::PastEnd`], not a
    /// truncation.
    past_end: Option<(u64, u64)>,
}

/// Turns a stream of uncompressed chunks into verified records.
///
/// Feed it with [`Deframer::push`], take records with
/// [`Deframer::next_record`] until it returns `Ok(None)` (it needs more
/// input), and call [`Deframer::finish`] at the end of the stream. Under
/// [`CorruptPolicy::Fail`] the first error ends it: afterwards it yields
/// nothing more. Under [`CorruptPolicy::Skip`] corruption never errors; it is
/// counted in [`Deframer::skipped`].
#[derive(Debug)]
pub struct Deframer {
    path: String,
    verify_crc: bool,
    max: u64,
    policy: CorruptPolicy,
    /// Unconsumed bytes that are not in `cur`; they come before `cur`.
    pending: BytesMut,
    /// The unconsumed rest of the last pushed chunk.
    cur: Bytes,
    /// Offset in the stream of the first unconsumed byte.
    offset: u64,
    scan: Option<Scan>,
    /// Records handed out (or queued) so far: the index of the next one.
    records: u64,
    /// Whether `records` counts from the start of the file (not a resume
    /// at an offset, where the records before are unknown).
    counts_from_start: bool,
    /// Records found by `finish` that the caller has not taken yet.
    ready: VecDeque<Record>,
    skipped: SkipReport,
    eof: bool,
    failed: bool,
    /// The address range of the last chunk pushed, and the process's map
    /// faults when it was last looked at (`mapped.rs`): a chunk of a map
    /// whose file was cut under it ends the read with an error.
    chunk_at: (usize, usize),
    faults_seen: u64,
}

#[inline(always)]
fn read_u32(b: &[u8]) -> Option<u32> {
    b.first_chunk::<4>().map(|c| u32::from_le_bytes(*c))
}

/// Checks a header; on success gives the payload length as `usize`.
enum Header {
    Ok(usize),
    Bad(ErrorKind),
}

impl Deframer {
    /// A deframer for the file `path` (used in errors) reading with `opts`
    /// (`verify_crc`, `max_record_size`, `on_corrupt`; the others belong to
    /// the readers).
    pub fn new(path: impl Into<String>, opts: &ReadOptions) -> Self {
        Deframer {
            path: path.into(),
            verify_crc: opts.verify_crc,
            max: opts.max_record_size,
            policy: opts.on_corrupt,
            pending: BytesMut::new(),
            cur: Bytes::new(),
            offset: 0,
            scan: None,
            records: 0,
            counts_from_start: true,
            ready: VecDeque::new(),
            skipped: SkipReport::default(),
            eof: false,
            failed: false,
            chunk_at: (0, 0),
            faults_seen: mapped::faults(),
        }
    }

    /// A deframer whose first pushed byte is at `offset` of the stream: for
    /// resuming a file at a record boundary (offsets in records and errors
    /// stay absolute).
    pub fn starting_at(path: impl Into<String>, opts: &ReadOptions, offset: u64) -> Self {
        Deframer {
            offset,
            counts_from_start: offset == 0,
            ..Deframer::new(path, opts)
        }
    }

    /// Counts the records from the file's start as `records` before the
    /// next one (a deframer resumed where that count is known), so its
    /// errors are numbered as a reader's from the start.
    pub(crate) fn count_from(&mut self, records: u64) {
        self.records = records;
        self.counts_from_start = true;
    }

    /// The file name given at construction.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Adds the next chunk of the uncompressed stream. Ignored after
    /// [`Deframer::finish`] or a failure.
    pub fn push(&mut self, chunk: Bytes) {
        if self.failed || self.eof || chunk.is_empty() {
            return;
        }
        if !self.cur.is_empty() {
            // The caller pushed before draining: keep the order of the bytes.
            self.pending.extend_from_slice(&self.cur);
        }
        self.chunk_at = (chunk.as_ptr() as usize, chunk.len());
        self.cur = chunk;
    }

    /// What the skip policy has skipped so far.
    pub fn skipped(&self) -> &SkipReport {
        &self.skipped
    }

    /// Adds a skipped region found outside the framing (a corrupt compressed
    /// stream), so that one report covers the whole file.
    pub fn note_skip(&mut self, event: SkipEvent) {
        self.skipped.push(event);
    }

    /// Bytes of the uncompressed stream consumed into records (or skipped)
    /// so far: the offset of the next record's header.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Records handed out so far, when counted from the start of the file
    /// (`None` for a deframer resumed at an offset).
    pub fn records_from_start(&self) -> Option<u64> {
        self.counts_from_start.then_some(self.records)
    }

    /// Whether the deframer has stopped for good (error under the fail
    /// policy, or end of stream with every record taken).
    pub fn is_done(&self) -> bool {
        self.failed || (self.eof && self.ready.is_empty())
    }

    /// The next record, `Ok(None)` when more input is needed (or, after
    /// [`Deframer::finish`], when there are no more records).
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<Record>, RecordError> {
        let at = (self.offset, self.records);
        let next = self.next_framed();
        if mapped::faults() != self.faults_seen {
            return self.unless_cut(next, at);
        }
        next
    }

    /// `next` unless the map the last chunk lies in was cut under it (a
    /// read there faulted, and read zeros): then the error of the record
    /// read from it, `at` (its offset, and the records before it).
    #[cold]
    fn unless_cut(
        &mut self,
        next: Result<Option<Record>, RecordError>,
        at: (u64, u64),
    ) -> Result<Option<Record>, RecordError> {
        self.faults_seen = mapped::faults();
        let (start, len) = self.chunk_at;
        if start == 0 || !mapped::cut_under(start, len) {
            return next;
        }
        let path = self.path.strip_prefix("file://").unwrap_or(&self.path);
        let now = std::fs::metadata(path).map_or(0, |m| m.len());
        (self.offset, self.records) = at;
        Err(self.error(ErrorKind::CutWhileMapped { len: now }))
    }

    /// The next record as the chunks frame it.
    #[inline(always)]
    fn next_framed(&mut self) -> Result<Option<Record>, RecordError> {
        if self.eof {
            return Ok(self.ready.pop_front());
        }
        if self.failed {
            return Ok(None);
        }
        // Hot path: the record lies in the current chunk.
        if self.pending.is_empty()
            && self.scan.is_none()
            && let Some((header, _)) = self.cur.split_first_chunk::<HEADER_LEN>()
        {
            let (len, stored) = parse_header(header);
            if masked_crc32c_of_length(len) == stored
                && len <= self.max
                && let Ok(n) = usize::try_from(len)
                && let Some(end) = n.checked_add(HEADER_LEN)
                && let Some(payload) = self.cur.get(HEADER_LEN..end)
                && let Some(footer) = self.cur.get(end..).and_then(read_u32)
            {
                if self.verify_crc {
                    let computed = masked_crc32c(payload);
                    if computed != footer {
                        return self.corrupt(ErrorKind::DataCrc {
                            stored: footer,
                            computed,
                        });
                    }
                }
                let data = self.cur.slice(HEADER_LEN..end);
                self.cur.advance(end + FOOTER_LEN);
                let offset = self.offset;
                self.offset += len + FRAME_LEN;
                self.records += 1;
                return Ok(Some(Record { data, offset }));
            }
        }
        self.next_slow()
    }

    /// Marks the end of the stream.
    ///
    /// Under the fail policy a partial record left over is
    /// [`ErrorKind::Truncated`]. Under the skip policy it is no record: the
    /// scan for the next valid record runs over the bytes still buffered
    /// (a truncation to the end if none is found), as does a resync in
    /// progress; records it finds there are returned by later
    /// calls of [`Deframer::next_record`] — so drain it until `None` after
    /// `finish`. Take all records before calling `finish` (anything still
    /// buffered is handled as the end of the stream).
    pub fn finish(&mut self) -> Result<(), RecordError> {
        if self.failed || self.eof {
            return Ok(());
        }
        self.eof = true;
        loop {
            match self.next_slow() {
                Ok(Some(r)) => self.ready.push_back(r),
                Ok(None) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    fn error(&mut self, kind: ErrorKind) -> RecordError {
        self.failed = true;
        self.pending = BytesMut::new();
        self.cur = Bytes::new();
        self.scan = None;
        let mut err = RecordError::new(self.path.clone(), self.offset, kind);
        err.index = self.records_from_start();
        err
    }

    /// Handles a corrupt record whose header is at `self.offset`.
    #[cold]
    fn corrupt(&mut self, kind: ErrorKind) -> Result<Option<Record>, RecordError> {
        let kind = match kind {
            ErrorKind::LengthCrc { .. } if self.offset == 0 => ErrorKind::NotTfRecord,
            k => k,
        };
        match self.policy {
            CorruptPolicy::Fail => Err(self.error(kind)),
            CorruptPolicy::Skip => {
                self.scan = Some(Scan {
                    start: self.offset,
                    kind,
                    pos: 1,
                    past_end: None,
                });
                self.next_slow()
            }
        }
    }

    /// Checks a header: length CRC, then the maximum size.
    #[inline]
    fn check_header(&self, h: &[u8; HEADER_LEN]) -> Header {
        let (len, stored) = parse_header(h);
        let computed = masked_crc32c_of_length(len);
        if computed != stored {
            return Header::Bad(ErrorKind::LengthCrc { stored, computed });
        }
        match usize::try_from(len) {
            Ok(n) if len <= self.max && n <= usize::MAX - HEADER_LEN - FOOTER_LEN => Header::Ok(n),
            _ => Header::Bad(ErrorKind::TooLarge {
                length: len,
                max: self.max,
            }),
        }
    }

    /// Moves up to `n` bytes from the front of `cur` to the end of `pending`.
    fn pull(&mut self, n: usize) {
        let take = n.min(self.cur.len());
        if take > 0 {
            self.pending.extend_from_slice(&self.cur[..take]);
            self.cur.advance(take);
        }
    }

    /// Makes `pending` hold at least `n` bytes if the input allows.
    fn fill_pending(&mut self, n: usize) -> bool {
        if self.pending.len() < n {
            self.pull(n - self.pending.len());
        }
        self.pending.len() >= n
    }

    /// Everything but the hot path: records spanning chunks, resync, end of stream.
    fn next_slow(&mut self) -> Result<Option<Record>, RecordError> {
        loop {
            if self.failed {
                return Ok(None);
            }
            if self.scan.is_some() {
                if !self.resync() {
                    return Ok(None);
                }
                continue;
            }
            if self.pending.is_empty() {
                if self.cur.is_empty() {
                    return Ok(None);
                }
                if !self.eof {
                    // The hot path did not take the record: it is corrupt or
                    // spans the end of the chunk.
                    if let Some(r) = self.try_from_cur()? {
                        return Ok(Some(r));
                    }
                    if self.scan.is_some() {
                        continue;
                    }
                }
                // Park the partial record in `pending`.
                let rest = std::mem::take(&mut self.cur);
                self.pending.extend_from_slice(&rest);
                continue;
            }
            // A record starts at the front of `pending`.
            if !self.fill_pending(HEADER_LEN) {
                if self.eof {
                    return self.truncated(
                        RecordPart::Header,
                        self.pending.len(),
                        HEADER_LEN,
                        None,
                    );
                }
                return Ok(None);
            }
            let Some(h) = self.pending.first_chunk::<HEADER_LEN>() else {
                return Ok(None);
            };
            let n = match self.check_header(h) {
                Header::Ok(n) => n,
                Header::Bad(kind) => return self.corrupt(kind),
            };
            let total = n + HEADER_LEN + FOOTER_LEN;
            if !self.fill_pending(total) {
                if self.eof {
                    let have = self.pending.len() - HEADER_LEN;
                    let past_end = Some((n as u64, have as u64));
                    return if have < n {
                        self.truncated(RecordPart::Payload, have, n, past_end)
                    } else {
                        self.truncated(RecordPart::Footer, have - n, FOOTER_LEN, past_end)
                    };
                }
                return Ok(None);
            }
            if self.verify_crc {
                let payload = self.pending.get(HEADER_LEN..HEADER_LEN + n).unwrap_or(&[]);
                let stored = self
                    .pending
                    .get(HEADER_LEN + n..)
                    .and_then(read_u32)
                    .unwrap_or(0);
                let computed = masked_crc32c(payload);
                if computed != stored {
                    return self.corrupt(ErrorKind::DataCrc { stored, computed });
                }
            }
            let frame = self.pending.split_to(total).freeze();
            let offset = self.offset;
            self.offset += total as u64;
            self.records += 1;
            return Ok(Some(Record {
                data: frame.slice(HEADER_LEN..HEADER_LEN + n),
                offset,
            }));
        }
    }

    /// With `pending` empty: a record that is complete in `cur` but was not
    /// taken by the hot path is corrupt; report it. `Ok(None)` if it is
    /// incomplete (or a resync started).
    fn try_from_cur(&mut self) -> Result<Option<Record>, RecordError> {
        let Some(h) = self.cur.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let n = match self.check_header(h) {
            Header::Ok(n) => n,
            Header::Bad(kind) => return self.corrupt(kind),
        };
        let end = n + HEADER_LEN;
        if self.cur.len() < end + FOOTER_LEN {
            return Ok(None);
        }
        let payload = self.cur.get(HEADER_LEN..end).unwrap_or(&[]);
        let stored = self.cur.get(end..).and_then(read_u32).unwrap_or(0);
        let computed = masked_crc32c(payload);
        if computed != stored {
            return self.corrupt(ErrorKind::DataCrc { stored, computed });
        }
        // Unreachable in practice (the hot path takes valid records), but correct.
        let data = self.cur.slice(HEADER_LEN..end);
        self.cur.advance(end + FOOTER_LEN);
        let offset = self.offset;
        self.offset += n as u64 + FRAME_LEN;
        self.records += 1;
        Ok(Some(Record { data, offset }))
    }

    /// The stream ends inside the record at `self.offset`: an error under
    /// the fail policy. Under the skip policy the record's header is only a
    /// candidate that runs past the end of the data, so it is not a record:
    /// the scan for the next valid one goes on from the byte after it, as
    /// the resync scan treats any such candidate (a damaged length field
    /// must not swallow the rest of the file).
    fn truncated(
        &mut self,
        part: RecordPart,
        have: usize,
        need: usize,
        past_end: Option<(u64, u64)>,
    ) -> Result<Option<Record>, RecordError> {
        let kind = ErrorKind::Truncated {
            part,
            have: have as u64,
            need: need as u64,
        };
        match self.policy {
            CorruptPolicy::Fail => Err(self.error(kind)),
            CorruptPolicy::Skip => {
                self.scan = Some(Scan {
                    start: self.offset,
                    kind,
                    pos: 1,
                    past_end,
                });
                self.next_slow()
            }
        }
    }

    /// Scans forward for the next valid record. Returns `true` when one was
    /// found (it now starts `pending`, the skipped region is recorded) or the
    /// stream ended (the region runs to the end), `false` when more input is
    /// needed.
    fn resync(&mut self) -> bool {
        let Some(mut scan) = self.scan.take() else {
            return true;
        };
        // The bytes to scan must be in `pending`; it starts at the corrupt
        // record (or `cur` does, when `pending` is empty).
        if self.pending.is_empty() {
            self.pull(SCAN_PULL);
        }
        loop {
            // Drop what is behind the candidate, keeping memory bounded.
            if scan.pos > 0 && (scan.pos >= SCAN_PULL || scan.pos == self.pending.len()) {
                self.pending.advance(scan.pos);
                self.offset += scan.pos as u64;
                scan.pos = 0;
            }
            let p = scan.pos;
            if self.pending.len() < p + HEADER_LEN {
                self.pull(SCAN_PULL.max(p + HEADER_LEN - self.pending.len()));
                if self.pending.len() < p + HEADER_LEN {
                    if self.eof {
                        self.end_scan_at_eof(scan);
                        return true;
                    }
                    self.scan = Some(scan);
                    return false;
                }
            }
            let Some(h) = self
                .pending
                .get(p..)
                .and_then(|b| b.first_chunk::<HEADER_LEN>())
            else {
                self.scan = Some(scan);
                return false;
            };
            let (len, _) = parse_header(h);
            // Cheap length test first: most positions in garbage fail it.
            if len > self.max {
                scan.pos += 1;
                continue;
            }
            let n = match self.check_header(h) {
                Header::Ok(n) => n,
                Header::Bad(_) => {
                    scan.pos += 1;
                    continue;
                }
            };
            let Some(total) = p.checked_add(n + HEADER_LEN + FOOTER_LEN) else {
                scan.pos += 1;
                continue;
            };
            if !self.fill_pending(total) {
                if self.eof {
                    // The candidate runs past the end: not a record.
                    scan.pos += 1;
                    continue;
                }
                self.scan = Some(scan);
                return false;
            }
            let payload = self
                .pending
                .get(p + HEADER_LEN..p + HEADER_LEN + n)
                .unwrap_or(&[]);
            let stored = self
                .pending
                .get(p + HEADER_LEN + n..)
                .and_then(read_u32)
                .unwrap_or(0);
            if masked_crc32c(payload) != stored {
                scan.pos += 1;
                continue;
            }
            // Found: skip up to it.
            self.pending.advance(p);
            self.offset += p as u64;
            let kind = match scan.past_end {
                Some((length, left)) => ErrorKind::PastEnd { length, left },
                None => scan.kind,
            };
            self.skipped.push(SkipEvent {
                offset: scan.start,
                bytes: self.offset - scan.start,
                kind,
            });
            return true;
        }
    }

    fn end_scan_at_eof(&mut self, scan: Scan) {
        let rest = (self.pending.len() + self.cur.len()) as u64;
        self.offset += rest;
        self.pending = BytesMut::new();
        self.cur = Bytes::new();
        self.skipped.push(SkipEvent {
            offset: scan.start,
            bytes: self.offset - scan.start,
            kind: scan.kind,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip_opts() -> ReadOptions {
        ReadOptions {
            on_corrupt: CorruptPolicy::Skip,
            ..ReadOptions::default()
        }
    }

    fn frame(data: &[u8]) -> Vec<u8> {
        let mut v = (data.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(&masked_crc32c(&v).to_le_bytes());
        v.extend_from_slice(data);
        v.extend_from_slice(&masked_crc32c(data).to_le_bytes());
        v
    }

    #[test]
    fn resync_over_garbage_keeps_memory_bounded() {
        for fill in [0x00u8, 0xff, 0x5a] {
            let mut d = Deframer::new("g", &skip_opts());
            let chunk = vec![fill; 1 << 20];
            for _ in 0..8 {
                d.push(Bytes::from(chunk.clone()));
                assert_eq!(d.next_record().unwrap(), None);
                assert!(
                    d.pending.len() <= 2 * SCAN_PULL + HEADER_LEN,
                    "pending {} bytes",
                    d.pending.len()
                );
            }
            let good = frame(b"found me");
            d.push(Bytes::from(good));
            let r = d.next_record().unwrap().unwrap();
            assert_eq!((&r.data[..], r.offset), (&b"found me"[..], 8 << 20));
            d.finish().unwrap();
            assert_eq!(d.next_record().unwrap(), None);
            assert_eq!(
                d.skipped().events,
                vec![SkipEvent {
                    offset: 0,
                    bytes: 8 << 20,
                    kind: ErrorKind::NotTfRecord
                }]
            );
        }
    }

    #[test]
    fn a_record_spanning_many_chunks_is_reassembled() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        let bytes = frame(&data);
        let mut d = Deframer::new("big", &ReadOptions::default());
        let mut got = None;
        for piece in bytes.chunks(4096) {
            d.push(Bytes::copy_from_slice(piece));
            if let Some(r) = d.next_record().unwrap() {
                got = Some(r);
            }
        }
        d.finish().unwrap();
        let r = got.unwrap();
        assert_eq!(r.offset, 0);
        assert_eq!(r.data, data);
        assert!(d.pending.is_empty());
    }

    #[test]
    fn pushing_without_draining_keeps_byte_order() {
        let mut bytes = frame(b"one");
        bytes.extend_from_slice(&frame(b"two"));
        let mut d = Deframer::new("f", &ReadOptions::default());
        d.push(Bytes::copy_from_slice(&bytes[..10]));
        d.push(Bytes::copy_from_slice(&bytes[10..30]));
        d.push(Bytes::copy_from_slice(&bytes[30..]));
        let a = d.next_record().unwrap().unwrap();
        let b = d.next_record().unwrap().unwrap();
        assert_eq!((&a.data[..], a.offset), (&b"one"[..], 0));
        assert_eq!((&b.data[..], b.offset), (&b"two"[..], 19));
        assert_eq!(d.next_record().unwrap(), None);
        d.finish().unwrap();
    }

    #[test]
    fn finish_without_draining_queues_the_records() {
        let mut bytes = frame(b"one");
        bytes.extend_from_slice(&frame(b"two"));
        let mut d = Deframer::new("f", &ReadOptions::default());
        d.push(Bytes::from(bytes));
        d.finish().unwrap();
        assert_eq!(d.next_record().unwrap().map(|r| r.offset), Some(0));
        assert_eq!(d.next_record().unwrap().map(|r| r.offset), Some(19));
        assert_eq!(d.next_record().unwrap(), None);
        assert!(d.is_done());
    }

    #[test]
    fn resync_rejects_a_candidate_that_runs_past_the_end() {
        // Garbage, then a valid header claiming 100 bytes that never come,
        // then (inside those "100 bytes") a real record: under skip the real
        // record is found after the end-of-stream check rejects the candidate.
        let mut bytes = b"xx".to_vec();
        bytes.extend_from_slice(&frame(&[0u8; 100])[..HEADER_LEN]);
        let good_at = bytes.len() as u64;
        bytes.extend_from_slice(&frame(b"real"));
        let mut d = Deframer::new("f", &skip_opts());
        d.push(Bytes::from(bytes));
        assert_eq!(d.next_record().unwrap(), None);
        d.finish().unwrap();
        let r = d.next_record().unwrap().unwrap();
        assert_eq!((&r.data[..], r.offset), (&b"real"[..], good_at));
        assert_eq!(d.next_record().unwrap(), None);
        assert_eq!(d.skipped().records, 1);
        assert_eq!(
            d.skipped().events[0],
            SkipEvent {
                offset: 0,
                bytes: good_at,
                kind: ErrorKind::NotTfRecord
            }
        );
    }

    #[test]
    fn resync_survives_a_candidate_length_near_usize_max() {
        let opts = ReadOptions {
            on_corrupt: CorruptPolicy::Skip,
            max_record_size: u64::MAX,
            ..ReadOptions::default()
        };
        let huge = (usize::MAX - HEADER_LEN - FOOTER_LEN) as u64;
        let mut bytes = b"x".to_vec();
        bytes.extend_from_slice(&huge.to_le_bytes());
        bytes.extend_from_slice(&masked_crc32c(&huge.to_le_bytes()).to_le_bytes());
        bytes.extend_from_slice(&frame(b"ok"));
        let mut d = Deframer::new("f", &opts);
        d.push(Bytes::from(bytes));
        let r = d.next_record().unwrap().unwrap();
        assert_eq!((&r.data[..], r.offset), (&b"ok"[..], 13));
        assert_eq!(d.next_record().unwrap(), None);
        d.finish().unwrap();
        assert_eq!(d.next_record().unwrap(), None);
        assert_eq!(
            d.skipped().events,
            vec![SkipEvent {
                offset: 0,
                bytes: 13,
                kind: ErrorKind::NotTfRecord
            }]
        );
    }
}
