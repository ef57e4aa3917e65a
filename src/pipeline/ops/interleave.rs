//! Interleave: the epoch's file order (shuffled per epoch with
//! `shuffle_files`), `cycle_length` files open at once, `block_length`
//! records from each in turn; an exhausted file's slot takes the next file
//! of the order. Each open file is read by its own shard reader thread
//! ([`ShardBlocks`]), and the next file of the order by one more, ahead.
//!
//! A file with a record range (a TFDS split slice) gives only the records
//! of its range: those before are read and dropped, and the file ends after
//! the last.
//!
//! Its state: the position in the file order, the slot read next and the
//! records taken from it in this block, and per slot (file, offset of its
//! next record) and, with record ranges, the record number of that record.

use std::sync::Arc;

use crate::pipeline::checkpoint::{Identity, SavedParts, prost_part};
use crate::pipeline::error::{PipelineError, StateError};
use crate::pipeline::item::{Item, LengthScan};
use crate::pipeline::read::blocks::{Begin, Framing, ShardBlocks};
use crate::pipeline::read::kept::Kept;
use crate::pipeline::read::spans::SpanReads;
use crate::pipeline::read::unread::LeftUnread;
use crate::pipeline::rng::{CounterRng, domain};
use crate::pipeline::stats::{StageFigures, StageStats};
use crate::prefetch::prefetch;
use crate::record::chunk_ring::SpareHold;
use crate::record::{CorruptPolicy, FOOTER_LEN, HEADER_LEN, ReadOptions};
use crate::source::SourceOptions;

use super::{EpochInput, Restore};

/// The words of `interleave` and `shuffle_files`, as the builder collected
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InterleaveSettings {
    /// Shuffle the file order, anew each epoch.
    pub shuffle_files: bool,
    /// Files open at once (at least 1).
    pub cycle_length: usize,
    /// Records taken from a file before the next (at least 1).
    pub block_length: usize,
}

impl Default for InterleaveSettings {
    fn default() -> Self {
        InterleaveSettings {
            shuffle_files: false,
            cycle_length: 1,
            block_length: 1,
        }
    }
}

/// The records of one file to read: `count` records from its record
/// number `first` (counted from 0 in the file). The records before are read
/// and dropped (TFRecord has no index); the file is closed after the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRange {
    pub first: u64,
    pub count: u64,
}

impl RecordRange {
    /// The record number after the last one read.
    pub(crate) fn end(self) -> u64 {
        self.first.saturating_add(self.count)
    }
}

/// What a logical stream reads, and how: the interleave's input.
pub(crate) struct StreamFiles {
    /// The stream's files, in listing order.
    pub files: Vec<String>,
    /// Per file, the records to read from it (a TFDS split slice); empty
    /// when every file is read whole.
    pub ranges: Vec<Option<RecordRange>>,
    pub read: ReadOptions,
    /// How the shards' bytes are fetched.
    pub source: SourceOptions,
    /// The grouping's length scan, for the shard readers to run (`None`
    /// where nothing is measured, or a record map changes the bytes).
    pub scan: Option<LengthScan>,
    /// The shards whose readers frame them, leaving their records for the
    /// workers to read (`None`: every shard's reader reads its records).
    pub unread: Option<LeftUnread>,
    /// How its compressed local shards are read by spans on several
    /// threads, where they have indexes (`None`: one thread a shard).
    pub spans: Option<SpanReads>,
    /// Where small shards read whole are kept for the passes after
    /// (`None`: each file is read once, or each pass reads again).
    pub kept: Option<Arc<Kept>>,
    /// The seed of the file order where it is not the stream's: under
    /// record sharding every host orders the files alike, since a host
    /// keeps records by their ordinal in the interleaved stream.
    pub order_seed: Option<u64>,
}

/// A stream's files and their record ranges in its fingerprint, as the op
/// that reads them writes them (the interleave, or the global shuffle).
pub(crate) fn write_files(id: &mut Identity, files: &[String], ranges: &[Option<RecordRange>]) {
    let mut w = id.step("files");
    w.u64(files.len() as u64);
    for file in files {
        w.str(file);
    }
    // A file's range is part of what it is: the same file with another
    // slice gives other records at the same offsets.
    w.u64(ranges.len() as u64);
    for range in ranges {
        match range {
            None => w.bool(false),
            Some(r) => w.bool(true).u64(r.first).u64(r.count),
        };
    }
}

/// The interleave's part of a state.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct InterleavePart {
    /// Position in this epoch's file order of the next file to open.
    #[prost(uint64, tag = "1")]
    pub next_file: u64,
    /// The slot read next, and records taken from it in this block.
    #[prost(uint64, tag = "2")]
    pub cursor: u64,
    #[prost(uint64, tag = "3")]
    pub in_block: u64,
    /// Per slot: file index + 1, or 0 for an empty slot.
    #[prost(uint32, repeated, tag = "4")]
    pub slot_files: Vec<u32>,
    /// Per slot: the offset of its next record.
    #[prost(uint64, repeated, tag = "5")]
    pub slot_offsets: Vec<u64>,
    /// Per slot: the record number in its file of its next record; kept
    /// only when files have record ranges (TFDS split slices), since a byte
    /// offset alone does not say how much of a range is left.
    #[prost(uint64, repeated, tag = "6")]
    pub slot_records: Vec<u64>,
}
prost_part!(InterleavePart, "interleave", 1);

impl InterleavePart {
    /// Per slot: (file, offset of its next record), if open.
    fn slots(&self) -> Result<Vec<Option<(u32, u64)>>, StateError> {
        if self.slot_files.len() != self.slot_offsets.len() {
            return Err(StateError::Invalid {
                field: "interleave slots",
                value: self.slot_offsets.len() as u64,
                reason: format!("{} files for these offsets", self.slot_files.len()),
            });
        }
        Ok(self
            .slot_files
            .iter()
            .zip(&self.slot_offsets)
            .map(|(&f, &o)| if f == 0 { None } else { Some((f - 1, o)) })
            .collect())
    }
}

/// One open interleave slot.
struct Slot {
    file: u32,
    reader: ShardBlocks,
    /// A reader started ahead: its counts, passed on to the read stage's
    /// as its blocks are taken (declared after `reader`, so that the
    /// reader's thread has ended when the last are passed on).
    counts: Option<AheadCounts>,
    block: std::vec::IntoIter<Item>,
    next_offset: u64,
    /// The record number in the file of the next record, and the file's
    /// record range (the whole file when `None`).
    record_no: u64,
    range: Option<RecordRange>,
    /// After a restore: the offset its first record must have (a state
    /// naming a byte that is no record boundary must not resynchronise
    /// silently), or under the skip policy the start of the corrupt region
    /// skipped before it.
    check_at: Option<u64>,
}

impl Slot {
    /// The next record.
    fn next_record(&mut self, stats: &StageStats) -> Result<Option<Item>, PipelineError> {
        loop {
            if let Some(record) = self.block.next() {
                // This slot is read again a cycle later: its next record
                // by then is in cache (an unread one is the worker's).
                if let Some(next) = self.block.as_slice().first()
                    && !self.reader.unread()
                {
                    prefetch(&next.data[..next.data.len().min(256)]);
                }
                self.next_offset =
                    record.offset + (HEADER_LEN + FOOTER_LEN) as u64 + record.data.len() as u64;
                return Ok(Some(record));
            }
            let next = {
                let _wait = stats.wait_timer();
                self.reader.next_block()
            };
            match next {
                None => return Ok(None),
                Some(block) => {
                    if let Some(counts) = self.counts.as_mut() {
                        counts.pass_on();
                    }
                    self.block = block?.into_iter();
                }
            }
        }
    }
}

/// The counts of a reader started ahead of its file. It counts into stats
/// of its own, since what it read of a file the epoch never reached (an
/// epoch cut short) is no reading done for records the pipeline delivered;
/// taken over, it passes on what it counted so far, then what it counts
/// from there on. (Its waits for room count only from its turn on:
/// [`Begin::ahead`].)
struct AheadCounts {
    own: Arc<StageStats>,
    into: Arc<StageStats>,
    passed: StageFigures,
}

impl AheadCounts {
    fn taken_over(own: Arc<StageStats>, into: Arc<StageStats>) -> Self {
        let mut counts = AheadCounts {
            own,
            into,
            passed: StageFigures::default(),
        };
        counts.pass_on();
        counts
    }

    fn pass_on(&mut self) {
        let now = self.own.figures();
        self.into.add_figures(&now.since(&self.passed));
        self.passed = now;
    }
}

impl Drop for AheadCounts {
    fn drop(&mut self) {
        self.pass_on();
    }
}

/// The interleave op: the first of the chain.
pub(crate) struct Interleave {
    settings: InterleaveSettings,
    input: Arc<StreamFiles>,
    /// The stream's seed (of the file order, unless the input says).
    seed: u64,
    read_stats: Arc<StageStats>,
    stats: Arc<StageStats>,
    /// The epochs the stream reads (`None`: forever), this one, and its
    /// file order.
    epochs: Option<u64>,
    epoch: u64,
    order: Vec<u32>,
    slots: Vec<Option<Slot>>,
    /// Position in this epoch's file order of the next file to open.
    next_file: u64,
    /// Interleave slot read next, and records taken from it in this block.
    cursor: u64,
    in_block: u64,
    /// A finished shard's read chunks go to the next shard's reader.
    _spare: SpareHold,
    /// How far a finished shard's block sizes had ramped up (blocks
    /// taken): the next file's reader starts there.
    ramped: u32,
    /// The reader of the next file of the order (from its start), started
    /// when the file before it was opened, so that a slot whose file ends
    /// finds the next one's first blocks read (or its first cloud range
    /// requested) instead of waiting for a thread to start and read. After
    /// the epoch's last file, the next epoch's first: a small file repeated
    /// starts each epoch as read as a large file's next block.
    ahead: Option<(u32, ShardBlocks, Arc<StageStats>)>,
}

impl Interleave {
    /// Before its first epoch: nothing open until [`start_epoch`] or a
    /// restore.
    ///
    /// [`start_epoch`]: EpochInput::start_epoch
    pub fn new(
        settings: &InterleaveSettings,
        input: Arc<StreamFiles>,
        seed: u64,
        epochs: Option<u64>,
        read_stats: Arc<StageStats>,
        stats: Arc<StageStats>,
    ) -> Self {
        let cycle = settings.cycle_length.max(1);
        Interleave {
            settings: settings.clone(),
            input,
            seed,
            epochs,
            epoch: 0,
            order: Vec::new(),
            slots: (0..cycle).map(|_| None).collect(),
            next_file: 0,
            cursor: 0,
            in_block: 0,
            _spare: SpareHold::new(),
            ramped: 0,
            ahead: None,
            read_stats,
            stats,
        }
    }

    /// The order in which epoch `epoch` reads the stream's files.
    fn file_order(&self, epoch: u64) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.input.files.len() as u32).collect();
        if self.settings.shuffle_files {
            let seed = self.input.order_seed.unwrap_or(self.seed);
            CounterRng::new(seed, domain::file_order(epoch), 0).shuffle(&mut order);
        }
        order
    }

    /// Opens `file` in `slot` at byte `offset`, whose record is record
    /// number `record` of the file.
    fn open(
        &mut self,
        slot: usize,
        file: u32,
        offset: u64,
        record: u64,
    ) -> Result<(), PipelineError> {
        let path = self
            .input
            .files
            .get(file as usize)
            .ok_or_else(|| bad_file(file, self.input.files.len()))?;
        let (reader, counts) = match self.ahead.take() {
            Some((next, reader, own)) if next == file && offset == 0 => {
                reader.take_over(self.ramped);
                let counts = AheadCounts::taken_over(own, self.read_stats.clone());
                (reader, Some(counts))
            }
            _ => {
                let reader = self.spawn(file, path, offset, self.read_stats.clone(), false);
                (reader, None)
            }
        };
        self.slots[slot] = Some(Slot {
            file,
            reader,
            counts,
            block: Vec::new().into_iter(),
            next_offset: offset,
            record_no: record,
            range: self.input.ranges.get(file as usize).copied().flatten(),
            check_at: None,
        });
        Ok(())
    }

    /// Starts reading the next file of the order (or, after the epoch's
    /// last, the next epoch's first if one follows), unless it is being
    /// read ahead already.
    fn read_ahead(&mut self) {
        let another_epoch = self.epochs.is_none_or(|n| self.epoch + 1 < n);
        let next = match self.order.get(self.next_file as usize) {
            Some(&file) => Some(file),
            None if another_epoch => self.file_order(self.epoch + 1).first().copied(),
            None => None,
        };
        let Some(file) = next else {
            return;
        };
        if self.ahead.as_ref().is_some_and(|(next, ..)| *next == file) {
            return;
        }
        let Some(path) = self.input.files.get(file as usize) else {
            return;
        };
        let own = Arc::new(StageStats::default());
        let reader = self.spawn(file, path, 0, own.clone(), true);
        self.ahead = Some((file, reader, own));
    }

    /// A reader of file `file` (at `path`) from byte `offset`, counting
    /// into `stats`, at the block size the last finished file reached;
    /// `ahead` of its turn or not.
    fn spawn(
        &self,
        file: u32,
        path: &str,
        offset: u64,
        stats: Arc<StageStats>,
        ahead: bool,
    ) -> ShardBlocks {
        ShardBlocks::spawn_measured(
            path.to_owned(),
            offset,
            self.input.read.clone(),
            self.input.source.clone(),
            stats,
            Framing {
                scan: self.input.scan.clone(),
                unread: self
                    .input
                    .unread
                    .as_ref()
                    .and_then(|u| u.framing(path, &self.input.read)),
                spans: self.input.spans.clone(),
                kept: self.input.kept.clone(),
            },
            Begin {
                ramped: self.ramped,
                ahead,
                file,
            },
        )
    }
}

impl EpochInput for Interleave {
    /// The next record in interleave order.
    fn next(&mut self) -> Result<Option<Item>, PipelineError> {
        let cycle = self.slots.len() as u64;
        loop {
            if self.slots.iter().all(Option::is_none) && self.next_file as usize >= self.order.len()
            {
                return Ok(None);
            }
            let cur = self.cursor as usize;
            let Some(slot) = self.slots[cur].as_mut() else {
                self.cursor = (self.cursor + 1) % cycle;
                self.in_block = 0;
                continue;
            };
            // A range's end closes the file without reading on.
            let ended = slot.range.is_some_and(|r| slot.record_no >= r.end());
            let next = if ended {
                None
            } else {
                slot.next_record(&self.stats)?
            };
            match next {
                Some(record) => {
                    let file = slot.file;
                    if let Some(offset) = slot.check_at.take() {
                        // A slot's saved offset is the end of the record it
                        // gave last. Under the skip policy the bytes from
                        // there may be a corrupt region, which the restored
                        // reader skips (and counts) as the saving run did.
                        let skipped = self.input.read.on_corrupt == CorruptPolicy::Skip
                            && record.offset > offset;
                        if record.offset != offset && !skipped {
                            let path = self.input.files.get(file as usize);
                            return Err(StateError::NoRecord {
                                path: path.cloned().unwrap_or_default(),
                                offset,
                            }
                            .into());
                        }
                    }
                    let number = slot.record_no;
                    slot.record_no += 1;
                    if slot.range.is_some_and(|r| number < r.first) {
                        continue;
                    }
                    self.in_block += 1;
                    if self.in_block >= self.settings.block_length.max(1) as u64 {
                        self.in_block = 0;
                        self.cursor = (self.cursor + 1) % cycle;
                    }
                    return Ok(Some(record));
                }
                None => {
                    // The next file goes on at the block size this one
                    // reached: the ramp is for the pipeline's first batch,
                    // and a small file would otherwise end mid-ramp every
                    // time (four small hand-offs instead of one).
                    self.ramped = self.ramped.max(slot.reader.blocks_taken());
                    self.slots[cur] = None;
                    if let Some(&file) = self.order.get(self.next_file as usize) {
                        self.next_file += 1;
                        self.open(cur, file, 0, 0)?;
                        self.read_ahead();
                    }
                    self.in_block = 0;
                    self.cursor = (self.cursor + 1) % cycle;
                }
            }
        }
    }

    /// A run from the current slot's block, with the bookkeeping `next`
    /// does per record, while the block lasts and the interleave stays on
    /// the slot (the records' bytes are not touched: no prefetch). Anything
    /// else (the next block, a file's end, a record range, a restore's
    /// check) goes through `next`.
    fn next_run(&mut self, out: &mut Vec<Item>, max: usize) -> Result<(), PipelineError> {
        let cycle = self.slots.len() as u64;
        let block_length = self.settings.block_length.max(1) as u64;
        let Some(slot) = self.slots[self.cursor as usize]
            .as_mut()
            .filter(|s| s.range.is_none() && s.check_at.is_none() && s.block.len() > 0)
        else {
            return self.next().map(|item| out.extend(item));
        };
        // With one slot the cursor stays: the block length only counts.
        let stay = if cycle == 1 {
            usize::MAX
        } else {
            usize::try_from(block_length - self.in_block).unwrap_or(usize::MAX)
        };
        let n = max.min(slot.block.len()).min(stay);
        // Moved whole: the shard thread made each item.
        out.extend(slot.block.by_ref().take(n));
        if let Some(last) = out.last() {
            slot.next_offset =
                last.offset + (HEADER_LEN + FOOTER_LEN) as u64 + last.data.len() as u64;
        }
        slot.record_no += n as u64;
        self.in_block += n as u64;
        if self.in_block >= block_length {
            self.in_block %= block_length;
            if cycle > 1 {
                self.cursor = (self.cursor + 1) % cycle;
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
        self.ahead = None;
        self.next_file = self.order.len() as u64;
    }

    /// Opens the first files of the epoch, one per interleave slot.
    fn start_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.order = self.file_order(epoch);
        self.next_file = 0;
        self.cursor = 0;
        self.in_block = 0;
        for i in 0..self.slots.len() {
            self.slots[i] = None;
            if let Some(&file) = self.order.get(self.next_file as usize) {
                self.next_file += 1;
                // Opening cannot fail here: the file index comes from the order.
                let _ = self.open(i, file, 0, 0);
            }
        }
        self.read_ahead();
    }

    fn input_done(&self) -> bool {
        self.slots.iter().all(Option::is_none) && self.next_file as usize >= self.order.len()
    }

    fn save(&self, parts: &mut SavedParts) {
        parts.push(InterleavePart {
            next_file: self.next_file,
            cursor: self.cursor,
            in_block: self.in_block,
            slot_files: self
                .slots
                .iter()
                .map(|s| s.as_ref().map_or(0, |s| s.file + 1))
                .collect(),
            slot_offsets: self
                .slots
                .iter()
                .map(|s| s.as_ref().map_or(0, |s| s.next_offset))
                .collect(),
            slot_records: if self.input.ranges.is_empty() {
                Vec::new()
            } else {
                self.slots
                    .iter()
                    .map(|s| s.as_ref().map_or(0, |s| s.record_no))
                    .collect()
            },
        });
    }

    /// Where the part was taken, in the epoch the op above restored: its
    /// fields checked, its files reopened at their offsets. The first op:
    /// it counts no records.
    fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let part: InterleavePart = r.take()?;
        let slots = part.slots()?;
        check(&self.settings, &self.input, &part, &slots)?;
        self.epoch = r.epoch;
        self.order = self.file_order(r.epoch);
        self.next_file = part.next_file;
        self.cursor = part.cursor;
        self.in_block = part.in_block;
        for (i, slot) in slots.iter().enumerate() {
            if let Some((file, offset)) = *slot {
                let record = part.slot_records.get(i).copied().unwrap_or(0);
                self.open(i, file, offset, record)?;
                if let Some(slot) = self.slots[i].as_mut() {
                    slot.check_at = Some(offset);
                }
            }
        }
        self.read_ahead();
        r.passed = None;
        Ok(())
    }

    fn identity(&self, id: &mut Identity) {
        let s = &self.settings;
        write_files(id, &self.input.files, &self.input.ranges);
        // The file order's seed only when the files are shuffled.
        let order_seed = s
            .shuffle_files
            .then(|| self.input.order_seed.unwrap_or(self.seed));
        id.step("interleave")
            .u64(s.cycle_length.max(1) as u64)
            .u64(s.block_length.max(1) as u64)
            .opt(order_seed);
    }
}

/// A state names a file the pipeline does not have.
fn bad_file(file: u32, files: usize) -> PipelineError {
    StateError::Invalid {
        field: "file index",
        value: u64::from(file),
        reason: format!("the pipeline has {files} files"),
    }
    .into()
}

/// Checks the interleave's part of a state.
fn check(
    settings: &InterleaveSettings,
    cfg: &StreamFiles,
    s: &InterleavePart,
    slots: &[Option<(u32, u64)>],
) -> Result<(), StateError> {
    let invalid = |field: &'static str, value: u64, reason: String| {
        Err(StateError::Invalid {
            field,
            value,
            reason,
        })
    };
    let files = cfg.files.len() as u64;
    let cycle = settings.cycle_length.max(1) as u64;
    let block = settings.block_length.max(1) as u64;
    if s.next_file > files {
        return invalid(
            "position in the file order",
            s.next_file,
            format!("the pipeline has {files} files"),
        );
    }
    if slots.len() as u64 != cycle {
        return invalid(
            "number of interleave slots",
            slots.len() as u64,
            format!("the pipeline interleaves {cycle} files"),
        );
    }
    if s.cursor >= cycle {
        return invalid(
            "interleave cursor",
            s.cursor,
            format!("the pipeline interleaves {cycle} files"),
        );
    }
    if s.in_block >= block {
        return invalid(
            "records taken from the current block",
            s.in_block,
            format!("blocks are {block} records"),
        );
    }
    let open = slots.iter().flatten().count() as u64;
    if open > s.next_file {
        return invalid(
            "open interleave slots",
            open,
            format!("only {} files of the epoch were opened", s.next_file),
        );
    }
    // A slot is emptied only when no file of the epoch is left to open in
    // it; a state with an empty slot and files still to open would never
    // open them (found by the state_restore fuzz target: a hang).
    if open < cycle && s.next_file < files {
        return invalid(
            "open interleave slots",
            open,
            format!(
                "{} of the epoch's {files} files are still to open, so all {cycle} slots \
                 must be open",
                files - s.next_file
            ),
        );
    }
    // Record numbers come with record ranges, one per slot, and only then.
    let records_expected = if cfg.ranges.is_empty() { 0 } else { cycle };
    if s.slot_records.len() as u64 != records_expected {
        return invalid(
            "record numbers of the interleave slots",
            s.slot_records.len() as u64,
            format!("the pipeline keeps {records_expected}"),
        );
    }
    if let Some((file, _)) = slots.iter().flatten().find(|(f, _)| u64::from(*f) >= files) {
        return invalid(
            "file index of an interleave slot",
            u64::from(*file),
            format!("the pipeline has {files} files"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::read::testing::record;
    use crate::record::{Compression, RecordWriter};

    /// Files of 200 records each; file `bad` has one record's data
    /// corrupted (its CRC then fails).
    fn files_with_a_corrupt_one(dir: &std::path::Path, count: usize, bad: usize) -> Vec<String> {
        (0..count)
            .map(|f| {
                let path = dir.join(format!("f{f}.tfrecord"));
                let mut w = RecordWriter::create(&path, Compression::None).unwrap();
                for i in 0..200 {
                    w.write_record(&record(f, i)).unwrap();
                }
                w.finish().unwrap();
                if f == bad {
                    let mut bytes = std::fs::read(&path).unwrap();
                    // Record 5's data starts 5 * 116 + 12 bytes in.
                    bytes[5 * 116 + 12 + 50] ^= 0xff;
                    std::fs::write(&path, bytes).unwrap();
                }
                path.display().to_string()
            })
            .collect()
    }

    /// What a reader started ahead read counts for the read stage only
    /// once its file is taken over: an epoch cut short before the next
    /// file counts that file's records and corrupt regions not at all; an
    /// epoch read through counts every file's, exactly once.
    #[test]
    fn a_file_read_ahead_counts_only_once_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let files = files_with_a_corrupt_one(dir.path(), 3, 1);
        let skipping = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
        let input = input_of(files, skipping, None);
        let counted = |cut: Option<usize>| {
            let read_stats = Arc::new(StageStats::default());
            let stats = Arc::new(StageStats::default());
            let mut op = Interleave::new(
                &InterleaveSettings::default(),
                input.clone(),
                1,
                Some(1),
                read_stats.clone(),
                stats,
            );
            op.start_epoch(0);
            let mut got = 0;
            while cut != Some(got) && op.next().unwrap().is_some() {
                got += 1;
            }
            // As an epoch cut short by `take` ends.
            op.stop();
            let f = read_stats.figures();
            (got, f.records, f.skipped_records)
        };
        // File 0 is one block (200 records of 116 bytes): all of it read.
        assert_eq!(counted(Some(10)), (10, 200, 0));
        assert_eq!(counted(None), (599, 599, 1));
    }

    /// A pipeline that reads its files more than once keeps a small shard
    /// its reader read whole, and later epochs hand on the kept records
    /// (the same records, at the same offsets: the same bytes as the kept
    /// copies, not another read); a GZIP shard and a plain one alike.
    #[test]
    fn later_epochs_hand_on_the_records_a_whole_pass_kept() {
        use crate::pipeline::read::testing::gzip_shard_of;
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<Vec<u8>> = (0..300).map(|i| record(0, i)).collect();
        let gzip = gzip_shard_of(&dir.path().join("a.tfrecord.gz"), &records, None);
        let plain = three_files(dir.path(), 200).files[1].clone();
        let kept = Arc::new(Kept::new(1 << 20));
        let files = vec![gzip.clone(), plain.clone()];
        let input = input_of(files, ReadOptions::default(), Some(kept.clone()));
        let stats = || Arc::new(StageStats::default());
        let settings = InterleaveSettings::default();
        let mut op = Interleave::new(&settings, input, 1, Some(4), stats(), stats());
        let mut epochs = Vec::new();
        for epoch in 0..4 {
            op.start_epoch(epoch);
            let mut items = Vec::new();
            while let Some(item) = op.next().unwrap() {
                items.push(item);
            }
            epochs.push(items);
        }
        let expected: Vec<(u32, Vec<u8>)> = (0..300)
            .map(|i| (0, record(0, i)))
            .chain((0..200).map(|i| (1, record(1, i))))
            .collect();
        let last = epochs.last().unwrap();
        for items in &epochs {
            let got: Vec<(u32, Vec<u8>)> =
                items.iter().map(|r| (r.file, r.data.to_vec())).collect();
            assert_eq!(got, expected);
            let offsets: Vec<u64> = items.iter().map(|r| r.offset).collect();
            let last_offsets: Vec<u64> = last.iter().map(|r| r.offset).collect();
            assert_eq!(offsets, last_offsets);
        }
        for (file, url) in [(0, &gzip), (1, &plain)] {
            let shard = kept.get(url, &ReadOptions::default(), false).expect("kept");
            let mut handed = Vec::new();
            let taker = crate::pipeline::read::testing::Taker::new(u64::MAX);
            shard.hand_on(0, &StageStats::default(), &taker);
            handed.extend(taker.blocks.into_inner().concat());
            let from_kept: Vec<_> = handed.iter().map(|r| r.data.as_ptr()).collect();
            let in_last: Vec<_> = last
                .iter()
                .filter(|r| r.file == file)
                .map(|r| r.data.as_ptr())
                .collect();
            assert_eq!(in_last, from_kept, "{url}");
        }
    }

    /// Three plain files in `dir` of `records` records each (`record(f, i)`),
    /// read with the default options.
    fn three_files(dir: &std::path::Path, records: usize) -> Arc<StreamFiles> {
        let files = (0..3)
            .map(|f| {
                let path = dir.join(format!("f{f}.tfrecord"));
                let mut w = RecordWriter::create(&path, Compression::None).unwrap();
                for i in 0..records {
                    w.write_record(&record(f, i)).unwrap();
                }
                w.finish().unwrap();
                path.display().to_string()
            })
            .collect();
        input_of(files, ReadOptions::default(), None)
    }

    /// `files` read whole with `read`, each shard by its own reader, kept
    /// in `kept` where given.
    fn input_of(
        files: Vec<String>,
        read: ReadOptions,
        kept: Option<Arc<Kept>>,
    ) -> Arc<StreamFiles> {
        Arc::new(StreamFiles {
            files,
            ranges: Vec::new(),
            read,
            source: SourceOptions::default(),
            scan: None,
            unread: None,
            spans: None,
            kept,
            order_seed: None,
        })
    }

    /// The next file of the order is read ahead from its start while the
    /// one before it is read, and taken over when that one ends; a reader
    /// started once a file has ended starts at the block size that file
    /// had ramped up to (what that size does: the blocks.rs tests). The
    /// records are the files' own, in order.
    #[test]
    fn the_next_file_is_read_ahead_at_the_block_size_the_last_reached() {
        let dir = tempfile::tempdir().unwrap();
        let input = three_files(dir.path(), 3000);
        let stats = || Arc::new(StageStats::default());
        let mut op = Interleave::new(
            &InterleaveSettings::default(),
            input,
            1,
            Some(1),
            stats(),
            stats(),
        );
        op.start_epoch(0);
        let ahead = |op: &Interleave| op.ahead.as_ref().map(|(file, ..)| *file);
        assert_eq!(ahead(&op), Some(1));
        for f in 0..3 {
            for i in 0..3000 {
                let item = op.next().unwrap().expect("a record");
                assert_eq!((item.file, &item.data[..]), (f, &record(f as usize, i)[..]));
                if i == 0 && f > 0 {
                    assert_eq!(ahead(&op), (f < 2).then_some(f + 1));
                }
                if (f, i) == (1, 0) {
                    // File 0 came in 64 KiB blocks (565 records of 116
                    // framed bytes), five or six of them (its fifth is
                    // twice that if made after the fourth was taken), and
                    // its end taken; file 2's reader, started as file 1
                    // was opened, starts there (nothing took from it yet).
                    assert!([6, 7].contains(&op.ramped), "{}", op.ramped);
                    let (_, next, _) = op.ahead.as_ref().unwrap();
                    assert_eq!(next.blocks_taken(), op.ramped);
                    // File 1's reader, taken over, goes on at least there.
                    let slot = op.slots[0].as_ref().unwrap();
                    assert!(slot.reader.blocks_taken() >= op.ramped);
                }
            }
        }
        assert!(op.next().unwrap().is_none());
    }

    /// After an epoch's last file is opened, the next epoch's first is read
    /// ahead, if the stream reads another epoch (a small file repeated
    /// starts each epoch with its blocks read), and taken over when that
    /// epoch starts; with shuffled files, the next epoch's order decides
    /// which file. A stream of one epoch reads nothing ahead of its end.
    #[test]
    fn the_next_epochs_first_file_is_read_ahead_when_one_follows() {
        let dir = tempfile::tempdir().unwrap();
        let input = three_files(dir.path(), 10);
        let stats = || Arc::new(StageStats::default());
        let ahead = |op: &Interleave| op.ahead.as_ref().map(|(file, ..)| *file);
        for (shuffle_files, epochs) in [(false, Some(1)), (false, Some(3)), (true, None)] {
            let settings = InterleaveSettings {
                shuffle_files,
                ..InterleaveSettings::default()
            };
            let mut op = Interleave::new(&settings, input.clone(), 7, epochs, stats(), stats());
            for epoch in 0..epochs.unwrap_or(4) {
                op.start_epoch(epoch);
                let order = op.file_order(epoch);
                let last = epochs.is_some_and(|e| epoch + 1 == e);
                for (n, &f) in order.iter().enumerate() {
                    for i in 0..10 {
                        let item = op.next().unwrap().expect("a record");
                        assert_eq!((item.file, &item.data[..]), (f, &record(f as usize, i)[..]));
                        // File `f` is open: the one after it is read ahead,
                        // or after the last the next epoch's first.
                        let next = match order.get(n + 1) {
                            Some(&next) => Some(next),
                            None if !last => op.file_order(epoch + 1).first().copied(),
                            None => None,
                        };
                        assert_eq!(ahead(&op), next, "epoch {epoch}, file {n}");
                    }
                }
                assert!(op.next().unwrap().is_none());
            }
        }
    }
}
