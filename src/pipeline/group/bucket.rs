//! Length buckets: each record goes to the bucket of its length; a bucket
//! emits a batch when full, and at the end of the input each partial bucket
//! gives a batch (padded or dropped). The records waiting in buckets are
//! the replay list of the checkpoint.

use std::collections::VecDeque;

use crate::batch::{BucketGroup, Bucketer, Remainder};
use crate::pipeline::item::Item;

use super::{Emitted, compact};

use super::raw_batch::GroupLayout;

/// Fills length buckets.
pub(crate) struct BucketGrouper {
    bucketer: Bucketer<Item>,
    drop_remainder: bool,
    /// At the end of the input: the remainder groups not yet emitted.
    leftover: VecDeque<BucketGroup<Item>>,
}

impl BucketGrouper {
    /// Groups with `bucketer` (checked with the rest of the pipeline's settings).
    pub fn new(bucketer: Bucketer<Item>, drop_remainder: bool) -> Self {
        BucketGrouper {
            bucketer,
            drop_remainder,
            leftover: VecDeque::new(),
        }
    }

    /// See [`Bucketer::room`].
    pub fn room(&self) -> usize {
        self.bucketer.room()
    }

    pub fn push(&mut self, item: Item, len: usize, out: &mut Vec<Emitted>) {
        if let Some(group) = self.bucketer.push(compact(item), len) {
            let replay = self
                .bucketer
                .pending_items()
                .map(|i| (i.file, i.offset))
                .collect();
            out.push(Emitted {
                items: group.items,
                layout: GroupLayout::bucket(group.bucket),
                replay,
                replay_skip: 0,
                replay_quiet: false,
            });
        }
    }

    /// The next remainder group at the end of the input.
    pub fn finish_one(&mut self) -> Option<Emitted> {
        let remainder = if self.drop_remainder {
            Remainder::Drop
        } else {
            Remainder::Pad
        };
        self.leftover.extend(self.bucketer.finish(remainder));
        let group = self.leftover.pop_front()?;
        let replay = self
            .leftover
            .iter()
            .flat_map(|g| g.items.iter())
            .map(|i| (i.file, i.offset))
            .collect();
        Some(Emitted {
            items: group.items,
            layout: GroupLayout::bucket(group.bucket),
            replay,
            replay_skip: 0,
            replay_quiet: false,
        })
    }
}
