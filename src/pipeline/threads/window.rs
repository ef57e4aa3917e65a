//! The window of batches in flight: numbered by the record (or streams)
//! thread and not yet delivered by the consumer. The numbering thread takes
//! a place before it sends each raw batch; the consumer gives one back for
//! each batch it delivers (or leaves out). Without it, a worker late with
//! one batch (a slow `map_batch`, a thread the scheduler put aside) let the
//! others run on, and the consumer held every later batch, out of order
//! and without bound, until the late one came: ~600 MB of lm batches after
//! one second with 16 workers on 2 cores (docs/architecture.md, "Decisions").

use crossbeam_channel::{Receiver, Sender, bounded};

use super::workers::Delivery;
use crate::pipeline::group::raw_batch::RawBatch;

/// Where a numbering thread sends its raw batches, a place in the window
/// taken first when there is a window.
pub(crate) struct Entry {
    tx: Sender<Delivery<RawBatch>>,
    places: Option<Receiver<()>>,
}

/// The consumer went away: nothing more is sent.
#[derive(Debug)]
pub(crate) struct Gone;

/// The consumer's side: gives places back.
pub(crate) struct Exit(Sender<()>);

/// A window of `places` batches in front of `tx`.
pub(crate) fn window(tx: Sender<Delivery<RawBatch>>, places: usize) -> (Entry, Exit) {
    let places = places.max(1);
    let (give, take) = bounded(places);
    for _ in 0..places {
        let _ = give.try_send(());
    }
    (
        Entry {
            tx,
            places: Some(take),
        },
        Exit(give),
    )
}

impl Entry {
    /// No window: a stream's own channel, which the streams thread (inside
    /// the window) empties.
    pub(crate) fn open(tx: Sender<Delivery<RawBatch>>) -> Self {
        Entry { tx, places: None }
    }

    /// Waits for a place, then sends. Fails once the consumer is gone
    /// (its [`Exit`] dropped with no place left, or its receiver dropped).
    pub(crate) fn send(&self, delivery: Delivery<RawBatch>) -> Result<(), Gone> {
        if let Some(places) = &self.places
            && places.recv().is_err()
        {
            return Err(Gone);
        }
        self.tx.send(delivery).map_err(|_| Gone)
    }
}

impl Exit {
    /// A batch left the window.
    pub(crate) fn leave(&self) {
        // Never full: a place comes back only after it was taken.
        let _ = self.0.try_send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(seq: u64) -> Delivery<RawBatch> {
        (
            seq,
            Err(crate::pipeline::error::PipelineError::Worker(String::new())),
        )
    }

    #[test]
    fn a_window_admits_its_places_then_one_per_batch_left() {
        let (tx, rx) = bounded(100);
        let (entry, exit) = window(tx, 3);
        let sender = std::thread::spawn(move || {
            for seq in 0..10 {
                entry.send(raw(seq)).unwrap();
            }
        });
        let mut seen = Vec::new();
        for _ in 0..10 {
            // At most three sent and not yet let out.
            let (seq, _) = rx.recv().unwrap();
            seen.push(seq);
            assert!(rx.len() <= 2, "{} waiting behind {seq}", rx.len());
            exit.leave();
        }
        sender.join().unwrap();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_sender_waiting_for_a_place_stops_when_the_consumer_goes() {
        let (tx, rx) = bounded(100);
        let (entry, exit) = window(tx, 1);
        entry.send(raw(0)).unwrap();
        let sender = std::thread::spawn(move || entry.send(raw(1)).is_err());
        drop(exit);
        assert!(sender.join().unwrap());
        assert_eq!(rx.len(), 1);
    }
}
