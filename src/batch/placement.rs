//! Where each piece of a packed sequence goes: the packing strategies as a
//! rule on lengths alone ([`RowPlanner`]), so that the record thread plans
//! which records make up each packed batch before any is parsed and the
//! workers' [`Packer`](super::Packer) lays them out exactly so.

/// How a packer chooses the row of each sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PackStrategy {
    /// The first row of the batch with room for the whole sequence.
    #[default]
    FirstFit,
    /// The row with room for the whole sequence that it leaves with the
    /// least room (the first such row on a tie).
    BestFit,
    /// Sequences end to end, row after row: one that does not fit the room
    /// left in a row is cut there and goes on in the next row (of the next
    /// batch, past the last row). No padding but at the end of the input
    /// (or where `max_segments` closes a row); each piece is a segment of
    /// its own, positions from 0.
    ConcatSplit,
}

impl crate::words::Words for PackStrategy {
    const SETTING: &'static str = "pack_strategy";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["first_fit"], PackStrategy::FirstFit),
        (&["best_fit"], PackStrategy::BestFit),
        (&["concat_split"], PackStrategy::ConcatSplit),
    ];
}

impl std::str::FromStr for PackStrategy {
    type Err = crate::words::UnknownWord;

    /// `first_fit`, `best_fit` or `concat_split`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
    }
}

/// The packing rule: a strategy, and a cap on the segments of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PackRule {
    pub strategy: PackStrategy,
    /// At most this many segments (sequences, or pieces of one) in a row;
    /// `None`: as many as fit.
    pub max_segments: Option<usize>,
}

impl PackRule {
    /// The overflow policy this rule packs with: concat-split cuts every
    /// sequence at row boundaries anyway, so a sequence longer than a row
    /// is split there rather than refused.
    pub fn overflow(&self, overflow: super::Overflow) -> super::Overflow {
        match (self.strategy, overflow) {
            (PackStrategy::ConcatSplit, super::Overflow::Error) => super::Overflow::Split,
            (_, o) => o,
        }
    }

    /// The rule in a checkpoint's fingerprint: the strategy's code and the
    /// cap (0: none).
    pub fn key(&self) -> (u64, u64) {
        let strategy = match self.strategy {
            PackStrategy::FirstFit => 0,
            PackStrategy::BestFit => 1,
            PackStrategy::ConcatSplit => 2,
        };
        let cap = self.max_segments.map_or(0, |m| m as u64);
        (strategy, cap)
    }
}

/// Where one piece of a sequence goes: [`RowPlanner::place`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The batch being filled had no room: it is complete, and this piece
    /// begins a new batch.
    pub closed: bool,
    /// Row of the batch.
    pub row: usize,
    /// Offset of the piece in the row.
    pub at: usize,
    /// Values of the piece placed: all that were asked, but under
    /// [`PackStrategy::ConcatSplit`] only what the row has room for (the
    /// rest is placed next).
    pub len: usize,
}

/// The packer's placement rule on lengths alone.
///
/// A piece goes into a row of the current batch by the [`PackRule`]'s
/// strategy, else into a new row; when all `batch_size` rows are open and
/// none takes it, the batch is complete and a new one begins (Grain's
/// packing bins, emitted together, are the same rule).
#[derive(Clone, Debug)]
pub struct RowPlanner {
    row_length: usize,
    batch_size: usize,
    rule: PackRule,
    /// Values used in each opened row of the current batch.
    used: Vec<usize>,
    /// Segments in each opened row.
    segments: Vec<usize>,
    open: bool,
    /// Pieces of the current batch go into rows from this one on
    /// ([`fence`](Self::fence)).
    first: usize,
}

impl RowPlanner {
    /// A planner for batches of `batch_size` rows of `row_length`.
    pub fn new(row_length: usize, batch_size: usize, rule: PackRule) -> Self {
        Self {
            row_length,
            batch_size,
            rule,
            used: Vec::with_capacity(batch_size),
            segments: Vec::with_capacity(batch_size),
            open: false,
            first: 0,
        }
    }

    /// Places a piece of `n` values (`1 ..= row_length`).
    pub fn place(&mut self, n: usize) -> Placement {
        let mut closed = false;
        let (row, len) = match self.open.then(|| self.find(n)).flatten() {
            Some(found) => found,
            None => {
                if !self.open || self.used.len() == self.batch_size {
                    closed = self.open;
                    self.open = true;
                    self.first = 0;
                    self.used.clear();
                    self.segments.clear();
                }
                self.used.push(0);
                self.segments.push(0);
                (self.used.len() - 1, n)
            }
        };
        let at = self.used[row];
        self.used[row] += len;
        self.segments[row] += 1;
        Placement {
            closed,
            row,
            at,
            len,
        }
    }

    /// An open row from the fence on that takes (part of) a piece of `n`
    /// values by the strategy: the row and how much of the piece it takes.
    fn find(&self, n: usize) -> Option<(usize, usize)> {
        let l = self.row_length;
        let cap = self.rule.max_segments.unwrap_or(usize::MAX);
        let rows = self.first.min(self.used.len())..self.used.len();
        let takes = |r: &usize| self.segments[*r] < cap && l - self.used[*r] >= n;
        match self.rule.strategy {
            PackStrategy::FirstFit => rows.clone().find(takes).map(|r| (r, n)),
            PackStrategy::BestFit => rows
                .filter(takes)
                .min_by_key(|&r| l - self.used[r])
                .map(|r| (r, n)),
            PackStrategy::ConcatSplit => {
                let r = rows.last()?;
                let room = l - self.used[r];
                (room > 0 && self.segments[r] < cap).then_some((r, n.min(room)))
            }
        }
    }

    /// From here on the current batch's pieces go into rows from `row` on
    /// (`row <= batch_size`); rows before it that hold nothing stay
    /// padding. How one batch holds the rows of several logical streams,
    /// each packed apart into its own rows (docs/many-hosts.md).
    pub fn fence(&mut self, row: usize) {
        let row = row.min(self.batch_size);
        if !self.open {
            self.open = true;
            self.used.clear();
            self.segments.clear();
        }
        if self.used.len() < row {
            self.used.resize(row, 0);
            self.segments.resize(row, 0);
        }
        self.first = row;
    }

    /// Rows of the current batch up to the last that holds a piece (0
    /// when none is open): rows holding one, and rows a
    /// [`fence`](Self::fence) passed over.
    pub fn rows(&self) -> usize {
        if self.open { self.used.len() } else { 0 }
    }

    /// Ends the current batch; true when one was open.
    pub fn finish(&mut self) -> bool {
        let open = self.open;
        self.open = false;
        self.first = 0;
        self.used.clear();
        self.segments.clear();
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(p: Placement) -> (bool, usize, usize, usize) {
        (p.closed, p.row, p.at, p.len)
    }

    fn planner(strategy: PackStrategy, max_segments: Option<usize>) -> RowPlanner {
        let rule = PackRule {
            strategy,
            max_segments,
        };
        RowPlanner::new(8, 2, rule)
    }

    /// After a fence, first fit looks only at rows from it on, and a new
    /// row opens after the rows passed over.
    #[test]
    fn a_fence_keeps_the_next_pieces_in_rows_from_it_on() {
        let mut rows = RowPlanner::new(8, 4, PackRule::default());
        let at = |p: Placement| (p.closed, p.row, p.at);
        assert_eq!(at(rows.place(3)), (false, 0, 0));
        rows.fence(2);
        assert_eq!(rows.rows(), 2);
        // Row 0 has room for 5 but is before the fence.
        assert_eq!(at(rows.place(5)), (false, 2, 0));
        assert_eq!(at(rows.place(3)), (false, 2, 5));
        assert_eq!(at(rows.place(4)), (false, 3, 0));
        // No row from the fence on has room: the batch closes.
        assert_eq!(at(rows.place(8)), (true, 0, 0));
        // A fence before anything is placed opens the batch there.
        rows.finish();
        rows.fence(3);
        assert_eq!(at(rows.place(8)), (false, 3, 0));
        assert_eq!(rows.rows(), 4);
    }

    /// The same lengths under each strategy: first fit takes the first row
    /// with room, best fit the tightest, concat-split cuts.
    #[test]
    fn each_strategy_places_the_same_pieces_its_own_way() {
        let mut first = planner(PackStrategy::FirstFit, None);
        let mut best = planner(PackStrategy::BestFit, None);
        for p in [&mut first, &mut best] {
            assert_eq!(at(p.place(3)), (false, 0, 0, 3));
            assert_eq!(at(p.place(6)), (false, 1, 0, 6));
        }
        // Room: row 0 has 5, row 1 has 2.
        assert_eq!(at(first.place(2)), (false, 0, 3, 2));
        assert_eq!(at(best.place(2)), (false, 1, 6, 2));
        // Nothing fits 7 in two open rows: the batch closes.
        assert_eq!(at(first.place(7)), (true, 0, 0, 7));
        assert_eq!(at(best.place(7)), (true, 0, 0, 7));

        let mut cut = planner(PackStrategy::ConcatSplit, None);
        assert_eq!(at(cut.place(3)), (false, 0, 0, 3));
        assert_eq!(at(cut.place(6)), (false, 0, 3, 5));
        assert_eq!(at(cut.place(1)), (false, 1, 0, 1));
        assert_eq!(at(cut.place(8)), (false, 1, 1, 7));
        assert_eq!(at(cut.place(1)), (true, 0, 0, 1));
    }

    /// A row holding `max_segments` segments takes no more: first fit opens
    /// another row, concat-split leaves the rest of the row padding.
    #[test]
    fn max_segments_caps_every_strategy() {
        for strategy in [PackStrategy::FirstFit, PackStrategy::BestFit] {
            let mut p = planner(strategy, Some(2));
            assert_eq!(at(p.place(1)), (false, 0, 0, 1));
            assert_eq!(at(p.place(1)), (false, 0, 1, 1));
            assert_eq!(at(p.place(1)), (false, 1, 0, 1), "{strategy:?}");
        }
        let mut p = planner(PackStrategy::ConcatSplit, Some(2));
        assert_eq!(at(p.place(1)), (false, 0, 0, 1));
        assert_eq!(at(p.place(1)), (false, 0, 1, 1));
        assert_eq!(at(p.place(8)), (false, 1, 0, 8));
        assert_eq!(at(p.place(2)), (true, 0, 0, 2));
    }

    /// Concat-split after a fence: the stream's first piece opens the
    /// fence's row, not the room left before it.
    #[test]
    fn concat_split_starts_a_fenced_stream_in_its_own_row() {
        let mut p = RowPlanner::new(
            8,
            4,
            PackRule {
                strategy: PackStrategy::ConcatSplit,
                max_segments: None,
            },
        );
        assert_eq!(at(p.place(3)), (false, 0, 0, 3));
        p.fence(2);
        assert_eq!(at(p.place(8)), (false, 2, 0, 8));
        assert_eq!(at(p.place(2)), (false, 3, 0, 2));
    }

    #[test]
    fn strategies_read_from_words() {
        assert_eq!("best-fit".parse(), Ok(PackStrategy::BestFit));
        assert_eq!("concat_split".parse(), Ok(PackStrategy::ConcatSplit));
        let e = "best".parse::<PackStrategy>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "pack_strategy \"best\": expected first_fit, best_fit or concat_split"
        );
        assert_eq!(PackRule::default().key(), (0, 0));
    }
}
