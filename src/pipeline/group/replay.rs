//! The replay list: the positions of records pulled from the ops but in no
//! emitted batch yet, in the order to feed them again (`mod.rs`).
//!
//! Every batch carries the list of its moment, and with scheduled buckets
//! thousands of records can wait (docs/many-hosts.md), so copying the list
//! for each batch cost the record thread a fifth of its time (lm, host 0 of
//! 2). The list is made of shared pieces instead: a grouper hands out the
//! blocks of positions it keeps anyway, each batch's list holds them by
//! reference, and the positions are copied once, when a state is encoded.

use std::fmt;
use std::sync::Arc;

use crate::pipeline::checkpoint::positions::Position;

/// Positions in order, as shared pieces (see the module doc).
#[derive(Clone, Default)]
pub(crate) struct ReplayList {
    pieces: Vec<Piece>,
    len: usize,
}

/// `block[start..]`: a piece of a block that is never changed once shared.
#[derive(Clone)]
struct Piece {
    block: Arc<Vec<Position>>,
    start: usize,
}

impl Piece {
    fn positions(&self) -> &[Position] {
        &self.block[self.start..]
    }
}

impl ReplayList {
    /// The positions from the `start`-th of `block` on, after those already here.
    pub fn push_shared(&mut self, block: &Arc<Vec<Position>>, start: usize) {
        if start < block.len() {
            self.len += block.len() - start;
            self.pieces.push(Piece {
                block: block.clone(),
                start,
            });
        }
    }

    /// `positions` after those already here.
    pub fn extend(&mut self, positions: Vec<Position>) {
        if !positions.is_empty() {
            self.push_shared(&Arc::new(positions), 0);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &Position> {
        self.pieces.iter().flat_map(Piece::positions)
    }

    pub fn to_vec(&self) -> Vec<Position> {
        let mut all = Vec::with_capacity(self.len);
        for piece in &self.pieces {
            all.extend_from_slice(piece.positions());
        }
        all
    }
}

impl From<Vec<Position>> for ReplayList {
    fn from(positions: Vec<Position>) -> Self {
        let mut list = ReplayList::default();
        list.extend(positions);
        list
    }
}

impl FromIterator<Position> for ReplayList {
    fn from_iter<I: IntoIterator<Item = Position>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

/// The same positions in the same order, however they are cut in pieces.
impl PartialEq for ReplayList {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for ReplayList {}

impl fmt::Debug for ReplayList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_read_as_one_list_and_compare_by_their_positions() {
        let block = Arc::new(vec![(0, 1), (0, 2), (1, 3)]);
        let mut list = ReplayList::default();
        list.push_shared(&block, 1);
        list.push_shared(&block, 3);
        list.extend(vec![(2, 9)]);
        list.extend(Vec::new());
        assert_eq!(list.len(), 3);
        assert_eq!(list.to_vec(), [(0, 2), (1, 3), (2, 9)]);
        assert_eq!(list, ReplayList::from(vec![(0, 2), (1, 3), (2, 9)]));
        assert_ne!(list, ReplayList::from(vec![(0, 2), (1, 3)]));
        assert_eq!(format!("{list:?}"), "[(0, 2), (1, 3), (2, 9)]");
        assert!(ReplayList::default().is_empty());
    }
}
