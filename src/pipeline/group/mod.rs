//! Grouping: which records make up each output batch — rows of a fixed
//! count ([`rows`]), by length into buckets ([`bucket`]) or packed into rows
//! ([`pack`]). [`grouping`] says which, and how records are measured;
//! [`raw_batch`] holds what passes from the record thread to the workers.
//!
//! The record thread alone decides order, so it also decides grouping.
//! For buckets and packing it needs each record's length, a cheap wire scan
//! ([`feature_length`](crate::example::feature_length)) that the shard
//! readers run as they frame records (the length travels with the record;
//! the record thread scans those changed by a record map or read again);
//! when parsed ops (`filter_rows`, or `map_batch` before bucketing or
//! packing) decide which records survive or how long they are, the
//! prefilter threads parse chunks of records first and the record thread
//! groups the survivors in order. Workers then parse each group again and
//! assemble it.
//!
//! Exact checkpoints: a group's state is the record ops' state plus a
//! *replay list* — the positions of records already pulled from the ops but
//! not yet in an emitted batch (records waiting in buckets or in the open
//! packed batch, and the rest of a prefiltered chunk). A restore reads them
//! again and feeds them before the ops continue; since grouping is a
//! function of the record sequence alone, it rebuilds the same buckets and
//! rows and emits exactly the batches an uninterrupted run would.

pub(crate) mod bucket;
pub(crate) mod grouping;
pub(crate) mod pack;
pub(crate) mod part;
pub(crate) mod raw_batch;
pub(crate) mod replay;
pub(crate) mod rows;
pub(crate) mod schedule;
pub(crate) mod scheduled;

use bucket::BucketGrouper;
use bytes::Bytes;
use grouping::Grouping;
use pack::PackGrouper;
use raw_batch::GroupLayout;
use replay::ReplayList;
use rows::RowsGrouper;
use scheduled::ScheduledGrouper;

use super::error::PipelineError;
use super::item::Item;

/// The grouping state of the record thread: one grouper per kind of grouping, chosen
/// once (an enum, not a trait object).
pub(crate) enum Grouper {
    Rows(RowsGrouper),
    Bucket(BucketGrouper),
    Scheduled(ScheduledGrouper),
    Pack(PackGrouper),
}

impl Grouper {
    /// A grouper whose next batch is batch `step` of the run; with
    /// `fixed_count`, the run emits a fixed number of batches.
    pub fn new(grouping: &Grouping, step: u64, fixed_count: bool) -> Self {
        match grouping {
            Grouping::Rows {
                batch_size,
                drop_remainder,
            } => Grouper::Rows(RowsGrouper::new(*batch_size, *drop_remainder)),
            Grouping::Bucket {
                bucketer,
                drop_remainder,
            } => Grouper::Bucket(BucketGrouper::new(bucketer.clone(), *drop_remainder)),
            Grouping::Scheduled {
                bucketer,
                schedule,
                drop_remainder,
            } => Grouper::Scheduled(ScheduledGrouper::new(
                bucketer.clone(),
                schedule
                    .clone()
                    .expect("the schedule is set when the pipeline starts"),
                step,
                *drop_remainder,
                fixed_count,
            )),
            Grouping::Pack {
                row_length,
                batch_size,
                overflow,
                rule,
                feature,
                drop_remainder,
            } => Grouper::Pack(PackGrouper::new(
                *row_length,
                *batch_size,
                rule.overflow(*overflow),
                *rule,
                feature,
                *drop_remainder,
            )),
        }
    }

    /// Adds a record of `len` values (`skip` of them already packed);
    /// appends the groups it completes.
    #[inline]
    pub fn push(
        &mut self,
        item: Item,
        len: usize,
        skip: usize,
        out: &mut Vec<Emitted>,
    ) -> Result<(), PipelineError> {
        match self {
            Grouper::Rows(g) => g.push(item, out),
            Grouper::Bucket(g) => g.push(item, len, out),
            Grouper::Scheduled(g) => g.push(item, len, out),
            Grouper::Pack(g) => return g.push(item, len, skip, out),
        }
        Ok(())
    }

    /// Records it can take with no group cut before the last of them
    /// (buckets: the fewest any bucket is short of full; packing: the rows
    /// left in the open batch); 1 where it cannot tell.
    pub fn room(&self) -> usize {
        match self {
            Grouper::Bucket(g) => g.room(),
            Grouper::Pack(g) => g.room(),
            _ => 1,
        }
    }

    /// Batches of rows only (the others measure or place each record):
    /// see [`RowsGrouper::push_run`].
    pub fn rows(&mut self) -> Option<&mut RowsGrouper> {
        match self {
            Grouper::Rows(g) => Some(g),
            _ => None,
        }
    }

    /// Ends the input: the next remainder group, if any is left to emit.
    pub fn finish_one(&mut self) -> Option<Emitted> {
        match self {
            Grouper::Rows(g) => g.finish_one(),
            Grouper::Bucket(g) => g.finish_one(),
            Grouper::Scheduled(g) => g.finish_one(),
            Grouper::Pack(g) => g.finish_one(),
        }
    }

    /// Records it left out for having no values (packing).
    pub fn empties(&self) -> u64 {
        match self {
            Grouper::Pack(g) => g.empties,
            _ => 0,
        }
    }

    /// An empty batch for a host past its records that must reach its
    /// batch count.
    pub fn empty(&mut self) -> Emitted {
        match self {
            Grouper::Scheduled(g) => g.empty(),
            _ => Emitted::plain(Vec::new(), GroupLayout::Rows),
        }
    }

    /// While quiet, records are taken but no batch is cut (the waiting
    /// records of a restore, for groupers that feed them back so);
    /// leaving quiet appends the batches they already fill.
    pub fn set_quiet(&mut self, quiet: bool, out: &mut Vec<Emitted>) {
        if let Grouper::Scheduled(g) = self {
            g.set_quiet(quiet, out);
        }
    }
}

/// A group ready for a worker, with the replay list right after it.
pub(crate) struct Emitted {
    pub items: Vec<Item>,
    pub layout: GroupLayout,
    pub replay: ReplayList,
    pub replay_skip: u64,
    /// The grouper's waiting records (`replay`) are fed back quietly on a
    /// restore, then settled (scheduled buckets: see `schedule.rs`).
    pub replay_quiet: bool,
}

impl Emitted {
    /// A group with nothing left to replay after it.
    pub fn plain(items: Vec<Item>, layout: GroupLayout) -> Self {
        Emitted {
            items,
            layout,
            replay: ReplayList::default(),
            replay_skip: 0,
            replay_quiet: false,
        }
    }
}

/// A buffered record must not pin the read chunk it was sliced from (a
/// view of a mapped file pins no heap memory, and an unread one must not be
/// read here: kept as they are).
pub(crate) fn compact(mut item: Item) -> Item {
    if !item.mapped && !item.unread {
        item.data = Bytes::copy_from_slice(&item.data);
    }
    item
}
