//! The shuffle buffer's positions, as the buffer keeps them and as states
//! hold them.
//!
//! Every batch carries a state, and a state names the (file, offset) of
//! every buffered record, but a batch changes only the slots of its own
//! records. Copying all the slots for each batch (16 bytes a slot: 160 KB
//! with a 10 000-record buffer) took about a third of the record thread's
//! time, the pipeline's serial stage, with batches of 32 (docs/performance.md,
//! "The shuffle buffer's positions"). So a state holds a snapshot of the slots
//! and the edits made since, both shared by reference and never changed
//! once shared; the positions are put together once, when a state is
//! encoded.

use std::fmt;
use std::sync::Arc;

use crate::pipeline::checkpoint::positions::Position;

/// Links of edits after which the log starts from a new snapshot, so
/// putting a state together walks a short chain (and dropping one recurses
/// no deeper than this).
const MAX_LINKS: usize = 64;

/// One change to the slots, as `Vec` would make it.
#[derive(Clone, Copy, Debug)]
enum Edit {
    Push(Position),
    Set(u32, Position),
    SwapRemove(u32),
}

/// The edits of one stretch between two states, after those of `earlier`.
struct Edits {
    earlier: Option<Arc<Edits>>,
    edits: Vec<Edit>,
}

/// The slots' positions at one moment: `base` with every link of `edits`
/// applied, oldest first.
#[derive(Clone, Default)]
pub(crate) struct SlotPositions {
    base: Arc<Vec<Position>>,
    edits: Option<Arc<Edits>>,
    len: usize,
}

impl SlotPositions {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The positions, slot by slot.
    pub fn to_vec(&self) -> Vec<Position> {
        let mut links = Vec::new();
        let mut link = self.edits.as_deref();
        while let Some(l) = link {
            links.push(l);
            link = l.earlier.as_deref();
        }
        let mut slots = Vec::with_capacity(self.len.max(self.base.len()));
        slots.extend_from_slice(&self.base);
        for l in links.iter().rev() {
            for &edit in &l.edits {
                apply(&mut slots, edit);
            }
        }
        debug_assert_eq!(slots.len(), self.len);
        slots
    }
}

impl From<Vec<Position>> for SlotPositions {
    fn from(positions: Vec<Position>) -> Self {
        SlotPositions {
            len: positions.len(),
            base: Arc::new(positions),
            edits: None,
        }
    }
}

impl PartialEq for SlotPositions {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.to_vec() == other.to_vec()
    }
}

impl Eq for SlotPositions {}

impl fmt::Debug for SlotPositions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.to_vec()).finish()
    }
}

fn apply(slots: &mut Vec<Position>, edit: Edit) {
    match edit {
        Edit::Push(p) => slots.push(p),
        Edit::Set(j, p) => slots[j as usize] = p,
        Edit::SwapRemove(j) => {
            slots.swap_remove(j as usize);
        }
    }
}

/// The buffer's side: the slots now, and the log that states share.
#[derive(Default)]
pub(crate) struct SlotLog {
    now: Vec<Position>,
    base: Arc<Vec<Position>>,
    shared: Option<Arc<Edits>>,
    /// Edits since the last [`share`](Self::share), while at most a quarter
    /// as many as the slots: beyond that the next state is a snapshot (a
    /// copy of the slots costs at most 4 per edit then), and `stale` says
    /// so. A stretch without states, such as a counting pass, thus never
    /// grows the log.
    open: Vec<Edit>,
    stale: bool,
    /// Edits and links in `shared`.
    shared_edits: usize,
    links: usize,
}

impl SlotLog {
    pub fn with_capacity(slots: usize) -> Self {
        SlotLog {
            now: Vec::with_capacity(slots),
            ..SlotLog::default()
        }
    }

    /// The positions now, slot by slot.
    #[cfg(test)]
    pub fn now(&self) -> &[Position] {
        &self.now
    }

    /// Bytes allocated for the slots now and the edits not yet shared.
    pub fn allocated_bytes(&self) -> usize {
        self.now.capacity() * size_of::<Position>() + self.open.capacity() * size_of::<Edit>()
    }

    #[inline]
    fn note(&mut self, edit: Edit) {
        if !self.stale {
            self.open.push(edit);
            if self.open.len() > self.now.len() / 4 {
                self.open.clear();
                self.stale = true;
            }
        }
    }

    /// Asks for slot `j`'s line ahead of its use (a hint).
    #[inline]
    pub fn prefetch(&self, j: usize) {
        if let Some(p) = self.now.get(j) {
            crate::prefetch::prefetch_value(p);
        }
    }

    #[inline]
    pub fn push(&mut self, p: Position) {
        self.now.push(p);
        self.note(Edit::Push(p));
    }

    /// Sets slot `j` (which exists) to `p`, returning what it held.
    #[inline]
    pub fn set(&mut self, j: usize, p: Position) -> Position {
        let old = std::mem::replace(&mut self.now[j], p);
        self.note(Edit::Set(j as u32, p));
        old
    }

    /// Removes slot `j` (which exists) as `Vec::swap_remove`, returning
    /// what it held.
    #[inline]
    pub fn swap_remove(&mut self, j: usize) -> Position {
        let old = self.now.swap_remove(j);
        self.note(Edit::SwapRemove(j as u32));
        old
    }

    /// The positions now, for a state: the edits since the last call become
    /// a shared link, or, once the links hold as many edits as there are
    /// slots (or [`MAX_LINKS`] links), the slots now become the new
    /// snapshot. The slots are thus copied once per buffer's worth of
    /// records or per 64 states, whichever comes first, not once per state.
    pub fn share(&mut self) -> SlotPositions {
        if self.stale || !self.open.is_empty() {
            self.shared_edits += self.open.len();
            self.links += 1;
            if self.stale || self.shared_edits >= self.now.len() || self.links >= MAX_LINKS {
                self.base = Arc::new(self.now.clone());
                self.shared = None;
                self.shared_edits = 0;
                self.links = 0;
                self.stale = false;
            } else {
                self.shared = Some(Arc::new(Edits {
                    earlier: self.shared.take(),
                    edits: self.open.to_vec(),
                }));
            }
            self.open.clear();
        }
        SlotPositions {
            base: self.base.clone(),
            edits: self.shared.clone(),
            len: self.now.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A change the buffer makes, with numbers to pick its slot from.
    #[derive(Clone, Debug)]
    enum Op {
        Push,
        Set(usize),
        SwapRemove(usize),
        Share,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Push),
            4 => any::<usize>().prop_map(Op::Set),
            2 => any::<usize>().prop_map(Op::SwapRemove),
            2 => Just(Op::Share),
        ]
    }

    proptest! {
        /// Every state shared gives exactly the slots of its moment, however
        /// the buffer changed before and after it.
        #[test]
        fn a_shared_state_keeps_the_slots_of_its_moment(
            ops in proptest::collection::vec(op(), 0..600),
        ) {
            let mut log = SlotLog::with_capacity(8);
            let mut model: Vec<Position> = Vec::new();
            let mut states = Vec::new();
            for (i, op) in ops.into_iter().enumerate() {
                let p = (i as u32 % 7, i as u64 * 100);
                match op {
                    Op::Push => {
                        log.push(p);
                        model.push(p);
                    }
                    Op::Set(j) if !model.is_empty() => {
                        let j = j % model.len();
                        prop_assert_eq!(log.set(j, p), std::mem::replace(&mut model[j], p));
                    }
                    Op::SwapRemove(j) if !model.is_empty() => {
                        let j = j % model.len();
                        prop_assert_eq!(log.swap_remove(j), model.swap_remove(j));
                    }
                    Op::Share => states.push((log.share(), model.clone())),
                    _ => {}
                }
                prop_assert_eq!(log.now(), model.as_slice());
            }
            states.push((log.share(), model.clone()));
            for (state, want) in &states {
                prop_assert_eq!(state.len(), want.len());
                prop_assert_eq!(&state.to_vec(), want);
            }
        }
    }

    /// A log of `n` slots, (0, i) in slot i, not shared yet.
    fn filled(n: u64) -> SlotLog {
        let mut log = SlotLog::with_capacity(n as usize);
        for i in 0..n {
            log.push((0, i));
        }
        log
    }

    #[test]
    fn the_log_starts_over_from_a_snapshot() {
        let mut log = filled(4);
        let first = log.share();
        assert!(first.edits.is_none(), "4 edits for 4 slots: a snapshot");
        log.set(1, (1, 10));
        let second = log.share();
        assert_eq!(log.links, 1);
        assert!(
            Arc::ptr_eq(&first.base, &second.base),
            "the snapshot is shared"
        );
        assert_eq!(second.to_vec(), [(0, 0), (1, 10), (0, 2), (0, 3)]);
        log.set(2, (1, 20));
        log.set(3, (1, 30));
        log.swap_remove(0);
        let third = log.share();
        assert!(
            third.edits.is_none(),
            "4 edits since the snapshot: a new one"
        );
        assert_eq!(*third.base, [(1, 30), (1, 10), (1, 20)]);
        // A state with no edit since the last shares that one's pieces.
        let again = log.share();
        assert!(Arc::ptr_eq(&third.base, &again.base));
        assert_eq!(second.to_vec(), [(0, 0), (1, 10), (0, 2), (0, 3)]);
    }

    #[test]
    fn a_long_stretch_without_states_keeps_the_log_short() {
        let mut log = filled(100);
        log.share();
        for i in 0..100_000u64 {
            log.set((i % 100) as usize, (1, i));
            assert!(log.open.len() <= 25);
        }
        assert!(log.stale);
        let state = log.share();
        assert!(state.edits.is_none(), "a snapshot");
        assert_eq!(state.to_vec()[99], (1, 99_999));
        assert!(!log.stale);
    }

    #[test]
    fn links_are_bounded() {
        let mut log = filled(10_000);
        log.share();
        for i in 0..MAX_LINKS as u64 * 3 {
            log.set(0, (1, i));
            let state = log.share();
            assert!(log.links < MAX_LINKS);
            assert_eq!(state.to_vec()[0], (1, i));
        }
    }
}
