//! Rows: `batch_size` records per batch in arrival order; the last,
//! partial one is kept or dropped. Nothing waits between batches, so a
//! batch of rows adds nothing to the checkpoint.

use crate::pipeline::item::Item;

use super::Emitted;

use super::raw_batch::GroupLayout;

/// Cuts batches of `batch_size` records.
pub(crate) struct RowsGrouper {
    batch_size: usize,
    drop_remainder: bool,
    current: Vec<Item>,
}

impl RowsGrouper {
    pub fn new(batch_size: usize, drop_remainder: bool) -> Self {
        RowsGrouper {
            batch_size,
            drop_remainder,
            // The full size once a batch has filled: a batch size no data
            // reaches reserves nothing large.
            current: Vec::with_capacity(batch_size.min(1024)),
        }
    }

    #[inline]
    pub fn push(&mut self, item: Item, out: &mut Vec<Emitted>) {
        self.current.push(item);
        if self.current.len() >= self.batch_size {
            let items = std::mem::replace(&mut self.current, Vec::with_capacity(self.batch_size));
            out.push(Emitted::plain(items, GroupLayout::Rows));
        }
    }

    /// Fills the batch being cut from `fill` (which appends at most the
    /// room left, none at the end of the input) and cuts it when full.
    /// Returns false when `fill` appended nothing.
    #[inline]
    pub fn push_run<E>(
        &mut self,
        fill: impl FnOnce(&mut Vec<Item>, usize) -> Result<(), E>,
        out: &mut Vec<Emitted>,
    ) -> Result<bool, E> {
        let before = self.current.len();
        fill(&mut self.current, self.batch_size - before)?;
        let appended = self.current.len() > before;
        if self.current.len() >= self.batch_size {
            let items = std::mem::replace(&mut self.current, Vec::with_capacity(self.batch_size));
            out.push(Emitted::plain(items, GroupLayout::Rows));
        }
        Ok(appended)
    }

    /// The partial batch at the end of the input, unless dropped.
    pub fn finish_one(&mut self) -> Option<Emitted> {
        let items = std::mem::take(&mut self.current);
        (!items.is_empty() && !self.drop_remainder)
            .then(|| Emitted::plain(items, GroupLayout::Rows))
    }
}
