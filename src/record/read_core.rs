//! The state machine shared by the sync and async readers: compression
//! detection, inflating, deframing, and the corruption policy for a corrupt
//! compressed stream. It does no I/O; the readers feed it raw chunks.

use bytes::Bytes;

use super::compression::{Compression, DETECT_LEN, Detection};
use super::deframe::{Deframer, Record};
use super::error::{ErrorKind, RecordError};
use super::inflate::{InflateError, Inflater};
use super::options::{CorruptPolicy, ReadOptions, SkipEvent, SkipReport};

/// What the reader should do next.
pub(crate) enum Step {
    /// A record.
    Record(Record),
    /// An error; the reader ends after it.
    Error(RecordError),
    /// Feed the next raw chunk ([`ReadCore::on_chunk`]) or the end ([`ReadCore::on_eof`]).
    NeedInput,
    /// Finished.
    Done,
}

enum Mode {
    /// Buffering the first bytes to detect the compression.
    Detect(Vec<Bytes>),
    /// Reading.
    Run,
    /// Skip policy after a corrupt compressed stream: counting the rest of
    /// the file, to report it as skipped.
    Drain { offset: u64, kind: ErrorKind },
    /// Ended (error or end of stream); drains the deframer's last records.
    Done,
}

pub(crate) struct ReadCore {
    deframer: Deframer,
    inflater: Inflater,
    /// The compression and what chose it (`Caller` while detecting).
    detection: Detection,
    mode: Mode,
    policy: CorruptPolicy,
    out_chunk: usize,
    /// Raw (as stored) bytes received so far.
    raw: u64,
    input_eof: bool,
    finished: bool,
    /// Uncompressed bytes still to drop before deframing (a compressed file
    /// resumed mid-stream).
    to_drop: u64,
}

impl ReadCore {
    /// A core reading `compression`, or detecting it from the first bytes
    /// and `path` when `None`.
    pub(crate) fn new(path: String, compression: Option<Detection>, opts: &ReadOptions) -> Self {
        let out_chunk = opts.effective_chunk_size();
        let (mode, detection) = match compression {
            Some(d) => (Mode::Run, d),
            None => (Mode::Detect(Vec::new()), Detection::from(Compression::None)),
        };
        ReadCore {
            deframer: Deframer::new(path, opts),
            inflater: Inflater::with_output_chunk(detection.compression, out_chunk),
            detection,
            mode,
            policy: opts.on_corrupt,
            out_chunk,
            raw: 0,
            input_eof: false,
            finished: false,
            to_drop: 0,
        }
    }

    /// A core resuming at the record boundary `offset` of the uncompressed
    /// stream. A plain source must already be positioned there; a
    /// compressed one is read from its start and the first `offset` bytes
    /// of output are dropped.
    pub(crate) fn resume(
        path: String,
        compression: Detection,
        opts: &ReadOptions,
        offset: u64,
    ) -> Self {
        let mut core = ReadCore::new(path.clone(), Some(compression), opts);
        core.deframer = Deframer::starting_at(path, opts, offset);
        if compression.compression != Compression::None {
            core.to_drop = offset;
        }
        core
    }

    pub(crate) fn path(&self) -> &str {
        self.deframer.path()
    }

    /// See [`Deframer::count_from`].
    pub(crate) fn count_from(&mut self, records: u64) {
        self.deframer.count_from(records);
    }

    /// The compression and what chose it, once known (after the first
    /// bytes when detecting).
    pub(crate) fn detection(&self) -> Option<Detection> {
        match self.mode {
            Mode::Detect(_) => None,
            _ => Some(self.detection),
        }
    }

    pub(crate) fn skipped(&self) -> &SkipReport {
        self.deframer.skipped()
    }

    /// Raw bytes received so far (the offset of the next read).
    pub(crate) fn raw_offset(&self) -> u64 {
        self.raw
    }

    /// Feeds the next raw chunk of the file.
    pub(crate) fn on_chunk(&mut self, chunk: Bytes) {
        self.raw += chunk.len() as u64;
        match &mut self.mode {
            Mode::Detect(chunks) => {
                chunks.push(chunk);
                if chunks.iter().map(Bytes::len).sum::<usize>() >= DETECT_LEN {
                    self.end_detect();
                }
            }
            Mode::Run => self.inflater.feed(chunk),
            Mode::Drain { .. } | Mode::Done => {}
        }
    }

    /// Marks the end of the file.
    pub(crate) fn on_eof(&mut self) {
        if matches!(self.mode, Mode::Detect(_)) {
            self.end_detect();
        }
        self.input_eof = true;
    }

    /// An I/O error from the source: it ends the reader.
    pub(crate) fn on_io_error(&mut self, err: std::io::Error) -> RecordError {
        self.mode = Mode::Done;
        self.finished = true;
        let mut e = RecordError::new(self.deframer.path(), self.raw, ErrorKind::from_io(err));
        e.read_as = self.detection();
        e
    }

    fn end_detect(&mut self) {
        let Mode::Detect(chunks) = std::mem::replace(&mut self.mode, Mode::Run) else {
            return;
        };
        let mut first = Vec::with_capacity(DETECT_LEN);
        for c in &chunks {
            let want = DETECT_LEN - first.len();
            first.extend_from_slice(&c[..want.min(c.len())]);
        }
        self.detection = Detection::detect(self.deframer.path(), &first);
        self.inflater = Inflater::with_output_chunk(self.detection.compression, self.out_chunk);
        for chunk in chunks {
            self.inflater.feed(chunk);
        }
    }

    /// Advances the state machine.
    pub(crate) fn step(&mut self) -> Step {
        loop {
            match self.deframer.next_record() {
                Ok(Some(r)) => return Step::Record(r),
                Ok(None) => {}
                Err(e) => {
                    self.mode = Mode::Done;
                    self.finished = true;
                    return Step::Error(self.placed(e));
                }
            }
            if self.finished {
                return Step::Done;
            }
            match self.mode {
                Mode::Detect(_) => {
                    if self.input_eof {
                        self.end_detect();
                        continue;
                    }
                    return Step::NeedInput;
                }
                Mode::Run => {}
                Mode::Drain { .. } => {
                    if !self.input_eof {
                        return Step::NeedInput;
                    }
                    if let Mode::Drain { offset, kind } =
                        std::mem::replace(&mut self.mode, Mode::Done)
                    {
                        self.deframer.note_skip(SkipEvent {
                            offset,
                            bytes: self.raw.saturating_sub(offset),
                            kind,
                        });
                    }
                    self.finished = true;
                    continue;
                }
                Mode::Done => {
                    self.finished = true;
                    continue;
                }
            }
            match self.inflater.next_output() {
                Ok(Some(mut piece)) => {
                    if self.to_drop > 0 {
                        let cut = self.to_drop.min(piece.len() as u64);
                        self.to_drop -= cut;
                        piece = piece.slice(cut as usize..);
                    }
                    if !piece.is_empty() {
                        self.deframer.push(piece);
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    if let Some(step) = self.decompress_failed(e) {
                        return step;
                    }
                    continue;
                }
            }
            if !self.input_eof {
                return Step::NeedInput;
            }
            if let Err(e) = self.inflater.finish() {
                if let Some(step) = self.decompress_failed(e) {
                    return step;
                }
                continue;
            }
            self.mode = Mode::Done;
            self.finished = true;
            if let Err(e) = self.deframer.finish() {
                return Step::Error(self.placed(e));
            }
        }
    }

    /// Adds the compression read with to an error from the deframer.
    fn placed(&self, mut e: RecordError) -> RecordError {
        e.read_as = Some(self.detection);
        e
    }

    /// A corrupt compressed stream: an error (fail) or the rest of the file
    /// skipped (skip). `None` means carry on stepping.
    fn decompress_failed(&mut self, e: InflateError) -> Option<Step> {
        let offset = e.offset;
        let kind = ErrorKind::from_inflate(e);
        match self.policy {
            CorruptPolicy::Fail => {
                self.mode = Mode::Done;
                self.finished = true;
                let mut err = RecordError::new(self.deframer.path(), offset, kind);
                err.index = self.deframer.records_from_start();
                err.read_as = Some(self.detection);
                Some(Step::Error(err))
            }
            CorruptPolicy::Skip => {
                // A partial record cut by the corruption is a truncation.
                if let Err(err) = self.deframer.finish() {
                    self.mode = Mode::Done;
                    self.finished = true;
                    return Some(Step::Error(self.placed(err)));
                }
                self.mode = Mode::Drain { offset, kind };
                None
            }
        }
    }
}
