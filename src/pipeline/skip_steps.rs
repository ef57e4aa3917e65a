//! `skip_steps`: global steps a run leaves out, as half-open ranges
//! `[a, b)`, kept sorted and merged. Steps are counted as an uninterrupted
//! run counts them, so every host leaves out its own batch of each, and the
//! batches after keep their numbers. The ranges travel in the state.

use super::error::{PipelineError, StateError};

/// Sorted, disjoint, non-empty `[a, b)` ranges of steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SkipSteps(Vec<(u64, u64)>);

impl SkipSteps {
    /// The union of `ranges` (each `a < b`).
    pub fn new(ranges: &[(u64, u64)]) -> Result<Self, PipelineError> {
        if let Some(&(a, b)) = ranges.iter().find(|(a, b)| a >= b) {
            return Err(PipelineError::Config(format!(
                "skip_steps: ({a}, {b}) is empty: a range (a, b) leaves out steps a to b - 1"
            )));
        }
        Ok(Self::merged(ranges.to_vec()))
    }

    fn merged(mut ranges: Vec<(u64, u64)>) -> Self {
        ranges.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        SkipSteps(out)
    }

    /// These and `other` together.
    pub fn union(&self, other: &SkipSteps) -> SkipSteps {
        Self::merged([self.0.as_slice(), other.0.as_slice()].concat())
    }

    pub fn contains(&self, step: u64) -> bool {
        let i = self.0.partition_point(|&(_, b)| b <= step);
        self.0.get(i).is_some_and(|&(a, _)| a <= step)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As a state stores them: a, b, a, b, …
    pub fn flat(&self) -> Vec<u64> {
        self.0.iter().flat_map(|&(a, b)| [a, b]).collect()
    }

    /// From a state's `flat` list, checked.
    pub fn from_flat(flat: &[u64]) -> Result<Self, StateError> {
        let bad = |reason: String| StateError::Invalid {
            field: "skipped steps",
            value: flat.len() as u64,
            reason,
        };
        if !flat.len().is_multiple_of(2) {
            return Err(bad("an odd count: they are (a, b) pairs".into()));
        }
        let ranges: Vec<(u64, u64)> = flat.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        if let Some(&(a, b)) = ranges.iter().find(|(a, b)| a >= b) {
            return Err(bad(format!("({a}, {b}) is empty")));
        }
        Ok(Self::merged(ranges))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_contain_their_steps() {
        let s = SkipSteps::new(&[(10, 20), (5, 8), (18, 25), (25, 26)]).unwrap();
        assert_eq!(s.flat(), [5, 8, 10, 26]);
        for (step, skipped) in [
            (4, false),
            (5, true),
            (7, true),
            (8, false),
            (9, false),
            (10, true),
            (25, true),
            (26, false),
        ] {
            assert_eq!(s.contains(step), skipped, "{step}");
        }
        let more = s.union(&SkipSteps::new(&[(8, 10)]).unwrap());
        assert_eq!(more.flat(), [5, 26]);
        assert!(SkipSteps::new(&[(3, 3)]).is_err());
        let odd = SkipSteps::from_flat(&[1, 2, 3]).unwrap_err();
        assert!(odd.to_string().contains("odd"), "{odd}");
        assert_eq!(SkipSteps::from_flat(&more.flat()).unwrap(), more);
    }
}
