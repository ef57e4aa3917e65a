//! The shuffle buffer's memory as the allocator sees it.
//!
//! docs/performance.md (Shuffle buffer memory): a buffered record read
//! before the workers costs at most 1.25x its bytes (tf.data's buffer: ~2.5x). The pipeline's own figure (`stats().record_thread`) is the
//! buffer's bookkeeping; here a counting global allocator (this binary's
//! only, which is why this is a test binary of its own) counts every live
//! byte of the process, read while the consumer pauses and every pipeline
//! thread has filled its channel: with a 10 000-record buffer, with a
//! 1 000-record one and without a shuffle. The first minus the second is
//! what 9 000 more buffered records cost, all included (blocks, slot
//! tables, the checkpoint snapshot each batch in flight carries): at most
//! 1.25x their payload. The first minus the third is the whole shuffle,
//! which also keeps a few MB of output chunks that records leave the
//! buffer in: at most 1.25x the payload plus 2 MiB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use infeed::pipeline::Pipeline;
use infeed::record::{Compression, RecordWriter};

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    LIVE.fetch_add(by, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; the counters are only
// bookkeeping beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time (held from its start, its files' writing included):
/// the counter is the whole process's.
static MEASURING: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes `n` records of `len(i)` bytes to one file; returns its path and
/// the records' lengths.
fn write_file(dir: &Path, n: u64, mut len: impl FnMut(u64) -> usize) -> (String, Vec<usize>) {
    // GZIP: records read by the shard thread, which the buffer stores (a
    // plain local shard's are left unread for the workers, and the buffer
    // holds their ~50-byte stand-ins).
    let path = dir.join("records.tfrecord.gz");
    let mut w = RecordWriter::create(&path, Compression::Gzip).unwrap();
    let mut lens = Vec::new();
    for i in 0..n {
        let len = len(i);
        let record: Vec<u8> = (0..len).map(|k| (i as usize + k) as u8).collect();
        w.write_record(&record).unwrap();
        lens.push(len);
    }
    w.finish().unwrap();
    (path.display().to_string(), lens)
}

/// Live bytes (above those before the run) at pauses of a run of `p`
/// (batches of 256, dropped as they come): after batches `step`,
/// `2 * step`, ... up to `last` the consumer waits, every pipeline thread
/// fills its bounded channel and blocks, and the live bytes are read. So
/// each sample is taken with as much in flight as the pipeline allows,
/// however busy the machine is. Returns the median sample and the shuffle
/// buffer's own figure of its peak storage.
fn live_at_pauses(p: &Pipeline, records: usize, last: usize) -> (usize, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let step = (last / 8).max(1);
    let mut batches = p.build_raw(256, false).unwrap();
    let mut samples = Vec::new();
    let (mut n, mut taken) = (0, 0);
    while let Some(batch) = batches.next_batch().unwrap() {
        n += batch.len();
        drop(batch);
        taken += 1;
        if taken % step == 0 && taken <= last {
            std::thread::sleep(std::time::Duration::from_millis(150));
            samples.push(LIVE.load(Ordering::Relaxed).saturating_sub(before));
        }
    }
    assert_eq!(n, records);
    let own = batches.stats().record_thread.buffer_bytes as usize;
    drop(batches);
    samples.sort_unstable();
    (samples[samples.len() / 2], own)
}

/// The allocator's figures for a shuffle buffer of `big` records.
struct Cost {
    /// Payload of `big` records (at the mean length).
    payload: usize,
    /// Live bytes with the `big` buffer minus those without a shuffle.
    whole: usize,
    /// Payload of the `big - small` records more.
    more_payload: usize,
    /// Live bytes with the `big` buffer minus those with the `small` one:
    /// what the records buffered beyond `small` cost. Both runs shuffle, so
    /// the output chunks records leave the buffer in, the batches in flight
    /// and the read chunks are alike and cancel; the buffer's storage and
    /// the checkpoint snapshot of its positions that each batch in flight
    /// carries differ.
    more: usize,
}

fn shuffle_cost(file: &str, lens: &[usize], small: usize, big: usize) -> Cost {
    // Small reads, one worker, one batch ahead: little else in flight.
    let read = infeed::record::ReadOptions::default().chunk_size(64 << 10);
    let base = Pipeline::from_files([file])
        .unwrap()
        .read_options(read)
        .threads(1)
        .prefetch(1)
        .seed(3);
    let mean = |n: usize| lens.iter().sum::<usize>() * n / lens.len();
    // Pauses while the buffer is full: until the input is done.
    let last = (lens.len() - big) / 256 - 1;
    let (plain, _) = live_at_pauses(&base, lens.len(), last);
    let (low, _) = live_at_pauses(&base.clone().shuffle(small), lens.len(), last);
    let (high, own) = live_at_pauses(&base.clone().shuffle(big), lens.len(), last);
    let c = Cost {
        payload: mean(big),
        whole: high.saturating_sub(plain),
        more_payload: mean(big - small),
        more: high.saturating_sub(low),
    };
    eprintln!(
        "live: no shuffle {plain}, {small} records {low}, {big} records {high}; \
         whole shuffle {} for {} ({:.3}x); {} more records {} for {} ({:.3}x); \
         the buffer's own figure for {big}: {own} ({:.3}x)",
        c.whole,
        c.payload,
        c.whole as f64 / c.payload as f64,
        big - small,
        c.more,
        c.more_payload,
        c.more as f64 / c.more_payload as f64,
        own as f64 / c.payload as f64,
    );
    c
}

/// docs/performance.md: each buffered record costs at most 1.25x its bytes,
/// and the whole shuffle at most that plus a fixed 2 MiB (its output chunks).
fn assert_documented_bound(c: &Cost) {
    let per_record = c.more as f64 / c.more_payload as f64;
    assert!(
        (1.0..=1.25).contains(&per_record),
        "records buffered cost {} for a payload of {}: {per_record:.3}x",
        c.more,
        c.more_payload
    );
    let bound = c.payload + c.payload / 4 + (2 << 20);
    assert!(
        c.whole <= bound,
        "the shuffle costs {} for a payload of {}: over 1.25x + 2 MiB = {bound}",
        c.whole,
        c.payload
    );
}

/// lm-sized records: 40..2 056 bytes (like the lm workload's Examples).
#[test]
fn lm_records_cost_at_most_1_25x_their_bytes_in_the_buffer() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let mut x = 7u64;
    let (file, lens) = write_file(dir.path(), 30_000, |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        40 + 4 * (x % 505) as usize
    });
    assert_documented_bound(&shuffle_cost(&file, &lens, 1_000, 10_000));
}

/// img-sized records: 3 113 bytes each (a 32×32×3 image and its label).
#[test]
fn img_records_cost_at_most_1_25x_their_bytes_in_the_buffer() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let (file, lens) = write_file(dir.path(), 15_000, |_| 3_113);
    assert_documented_bound(&shuffle_cost(&file, &lens, 1_000, 10_000));
}
