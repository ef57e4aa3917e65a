//! Batches in flight: a worker late with one batch holds the others back
//! once the window of batches numbered and not yet delivered is full
//! (`threads/window.rs`), so the consumer never holds more than that out
//! of order, and the run then goes on unchanged.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use infeed::pipeline::Pipeline;

use super::parse::lm_spec;
use super::{testdata, within};

/// Holds the first call of `map_batch` until opened.
#[derive(Default)]
struct Gate {
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.opened.notify_all();
    }
}

/// Opens the gate when dropped: a failed assertion must not leave a worker
/// waiting (the pipeline joins its workers when dropped).
struct Opens(Arc<Gate>);

impl Drop for Opens {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// 2 workers, prefetch 2, batches of 8 from 4 epochs of the 256 lm records
/// in testdata's `file`, each batch counted by `calls` and the first held
/// until `gate` opens.
fn build(
    file: &str,
    gate: Arc<Gate>,
    calls: Arc<AtomicUsize>,
) -> infeed::pipeline::Batches<infeed::batch::Batch> {
    Pipeline::from_files([testdata(file)])
        .unwrap()
        .repeat(Some(4))
        .threads(2)
        .prefetch(2)
        .parse(lm_spec())
        .map_batch(move |batch| {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                gate.wait();
            }
            Ok(batch)
        })
        .max_length(512)
        .batch(8, true)
        .build()
        .unwrap()
}

/// The first batch a worker maps waits until the others fill the window:
/// then exactly `window` batches past those delivered have been mapped, and
/// no more. Opened, the run delivers every batch as an ungated run does.
fn a_late_batch_holds_back_at_most(window: usize, file: &'static str) {
    within(120, move || {
        let gate = Arc::new(Gate::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let mut gated = build(file, gate.clone(), calls.clone());
        // Declared after the pipeline, so dropped before it.
        let opens = Opens(gate.clone());
        let mut got = Vec::new();
        // Until the workers stop: every batch numbered is mapped, and the
        // window bounds how many are numbered past those delivered.
        let mut same = 0;
        let mut last = 0;
        while same < 50 {
            if let Some(batch) = gated.next_batch_within(Duration::from_millis(1)) {
                got.push(batch.unwrap().unwrap().digest());
            }
            let now = calls.load(Ordering::SeqCst);
            assert!(
                now <= got.len() + window,
                "{now} batches mapped, {} delivered: past the window of {window}",
                got.len()
            );
            (same, last) = if now == last && now == got.len() + window {
                (same + 1, now)
            } else {
                (0, now)
            };
        }
        assert!(gated.stats().ready < window);
        drop(opens);
        for batch in gated.by_ref() {
            got.push(batch.unwrap().digest());
        }
        let open = Arc::new(Gate::default());
        open.open();
        let want: Vec<u64> = build(file, open, Arc::default())
            .map(|b| b.unwrap().digest())
            .collect();
        assert_eq!(want.len(), 4 * 256 / 8);
        assert_eq!(got, want);
    });
}

// The window: raw batches the record thread may have ahead (4 x threads
// where the workers read the records, as they do a plain local shard's;
// threads + 1 where the shard threads read them, as a GZIP shard's), one at
// each worker, the output queue (prefetch + threads), `window_places` in
// src/pipeline/batches.rs.

#[test]
fn a_late_batch_holds_back_at_most_the_window() {
    a_late_batch_holds_back_at_most(8 + 2 + 4, "lm-sample.tfrecord");
}

#[test]
fn a_late_batch_holds_back_at_most_the_window_with_records_read_before_the_workers() {
    a_late_batch_holds_back_at_most(3 + 2 + 4, "lm-sample.tfrecord.gz");
}
