//! Record positions coded compactly for a state: sorted (file, count)
//! runs with offset deltas, plus each slot's rank in the sorted list —
//! about 4 bytes per position whatever the records' size.

use crate::pipeline::error::StateError;

/// A file index and a byte offset: where a record is read again.
pub(crate) type Position = (u32, u64);

/// Positions coded compactly: sorted (file, count) runs with offset deltas,
/// and each original slot's rank in the sorted list.
#[derive(Default)]
pub(crate) struct Coded {
    pub files: Vec<u32>,
    pub counts: Vec<u32>,
    pub deltas: Vec<u64>,
    pub order: Vec<u32>,
}

pub(crate) fn code_positions(positions: &[(u32, u64)]) -> Coded {
    let mut sorted: Vec<(u32, u64, u32)> = positions
        .iter()
        .enumerate()
        .map(|(slot, &(file, offset))| (file, offset, slot as u32))
        .collect();
    sorted.sort_unstable();
    let mut c = Coded {
        order: vec![0u32; sorted.len()],
        ..Coded::default()
    };
    let mut previous: Option<(u32, u64)> = None;
    for (rank, &(file, offset, slot)) in sorted.iter().enumerate() {
        c.order[slot as usize] = rank as u32;
        match (previous, c.counts.last_mut()) {
            (Some((f, o)), Some(count)) if f == file => {
                *count += 1;
                c.deltas.push(offset - o);
            }
            _ => {
                c.files.push(file);
                c.counts.push(1);
                c.deltas.push(offset);
            }
        }
        previous = Some((file, offset));
    }
    c
}

pub(crate) fn decode_positions(
    c: &Coded,
    field: &'static str,
) -> Result<Vec<(u32, u64)>, StateError> {
    let bad = |value: u64, reason: &str| StateError::Invalid {
        field,
        value,
        reason: reason.to_owned(),
    };
    if c.files.len() != c.counts.len() {
        return Err(bad(
            c.counts.len() as u64,
            "its file and count lists differ in length",
        ));
    }
    let total = c.counts.iter().map(|&n| u64::from(n)).sum::<u64>();
    if total != c.deltas.len() as u64 || c.deltas.len() != c.order.len() {
        return Err(bad(total, "its counts, offsets and order disagree"));
    }
    let mut sorted = Vec::with_capacity(c.deltas.len());
    let mut deltas = c.deltas.iter();
    for (&file, &count) in c.files.iter().zip(&c.counts) {
        let mut offset = 0u64;
        for _ in 0..count {
            let delta = deltas
                .next()
                .ok_or_else(|| bad(total, "fewer offsets than counted"))?;
            offset = offset
                .checked_add(*delta)
                .ok_or_else(|| bad(*delta, "an offset overflows"))?;
            sorted.push((file, offset));
        }
    }
    let mut seen = vec![false; sorted.len()];
    c.order
        .iter()
        .map(
            |&rank| match (sorted.get(rank as usize), seen.get_mut(rank as usize)) {
                (Some(&position), Some(seen)) if !*seen => {
                    *seen = true;
                    Ok(position)
                }
                (Some(_), _) => Err(bad(u64::from(rank), "a slot rank appears twice")),
                _ => Err(bad(u64::from(rank), "a slot rank is out of range")),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Positions in runs each in order, as a grouper's queues hold them,
    /// the runs' offsets overlapping and repeating (a record waiting twice).
    fn in_runs() -> impl Strategy<Value = Vec<Position>> {
        proptest::collection::vec(proptest::collection::vec((0u32..3, 0u64..50), 0..40), 0..80)
            .prop_map(|runs| {
                runs.into_iter()
                    .flat_map(|mut run| {
                        run.sort_unstable();
                        run
                    })
                    .collect()
            })
    }

    proptest! {
        #[test]
        fn positions_coded_decode_to_themselves(positions in in_runs()) {
            let decoded = decode_positions(&code_positions(&positions), "positions").unwrap();
            prop_assert_eq!(decoded, positions);
        }
    }
}
