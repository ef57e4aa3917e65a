//! A mixture's weights on a schedule: weights that change at given steps,
//! held until the next point or moved linearly towards it. The weights of
//! a step are a pure function of the step, so every host draws alike and a
//! restore continues exactly; a state restored under another schedule
//! takes the new one's weights from its step on.
//!
//! A mixture's step is its own count: records drawn on this host divided
//! by the records a host's batch takes (its rows under plain `batch`; a
//! number the user gives for packed or bucketed batches, whose record
//! counts vary). It never depends on how fast a thread runs or how far
//! ahead records are pulled.

use crate::pipeline::error::PipelineError;

/// Weights from given steps on.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MixSchedule {
    /// (step, a weight per source), steps increasing; the mixture's own
    /// weights hold before the first point.
    pub points: Vec<(u64, Vec<f64>)>,
    /// Linear between points (and from the mixture's weights at step 0 to
    /// the first point) instead of held until the next.
    pub interpolate: bool,
}

impl MixSchedule {
    /// Checks the points against `sources` sources.
    pub(crate) fn check(&self, sources: usize) -> Result<(), PipelineError> {
        let bad = |m: String| Err(PipelineError::Config(format!("mix schedule: {m}")));
        if self.points.is_empty() {
            return bad("no point".into());
        }
        for (i, (step, weights)) in self.points.iter().enumerate() {
            if weights.len() != sources {
                return bad(format!(
                    "step {step}: {} weights for {sources} sources",
                    weights.len()
                ));
            }
            if weights.iter().any(|w| !w.is_finite() || *w < 0.0)
                || weights.iter().sum::<f64>() <= 0.0
            {
                return bad(format!(
                    "step {step}: weights {weights:?}: each finite and not negative, some positive"
                ));
            }
            if i > 0 && self.points[i - 1].0 >= *step {
                return bad(format!(
                    "steps must increase: {step} after {}",
                    self.points[i - 1].0
                ));
            }
        }
        Ok(())
    }

    /// The weights at `step`, the mixture's own being `base`.
    pub(crate) fn weights_at(&self, step: u64, base: &[f64]) -> Vec<f64> {
        let next = self.points.partition_point(|(s, _)| *s <= step);
        let (from_step, from): (u64, &[f64]) = match next {
            0 => (0, base),
            i => (self.points[i - 1].0, &self.points[i - 1].1),
        };
        let Some((to_step, to)) = self.points.get(next).filter(|_| self.interpolate) else {
            return from.to_vec();
        };
        let t = (step - from_step) as f64 / (to_step - from_step) as f64;
        from.iter().zip(to).map(|(a, b)| a + (b - a) * t).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(interpolate: bool) -> MixSchedule {
        MixSchedule {
            points: vec![(10, vec![1.0, 1.0]), (20, vec![0.0, 4.0])],
            interpolate,
        }
    }

    #[test]
    fn held_or_linear_between_points() {
        let base = [3.0, 1.0];
        let held = schedule(false);
        assert_eq!(held.weights_at(0, &base), [3.0, 1.0]);
        assert_eq!(held.weights_at(9, &base), [3.0, 1.0]);
        assert_eq!(held.weights_at(10, &base), [1.0, 1.0]);
        assert_eq!(held.weights_at(19, &base), [1.0, 1.0]);
        assert_eq!(held.weights_at(20, &base), [0.0, 4.0]);
        assert_eq!(held.weights_at(1 << 40, &base), [0.0, 4.0]);
        let linear = schedule(true);
        assert_eq!(linear.weights_at(0, &base), [3.0, 1.0]);
        assert_eq!(linear.weights_at(5, &base), [2.0, 1.0]);
        assert_eq!(linear.weights_at(10, &base), [1.0, 1.0]);
        assert_eq!(linear.weights_at(15, &base), [0.5, 2.5]);
        assert_eq!(linear.weights_at(25, &base), [0.0, 4.0]);
    }

    #[test]
    fn bad_points_are_named() {
        let err = |points: Vec<(u64, Vec<f64>)>| {
            MixSchedule {
                points,
                interpolate: false,
            }
            .check(2)
            .unwrap_err()
            .to_string()
        };
        assert!(err(vec![]).contains("no point"));
        assert!(err(vec![(3, vec![1.0])]).contains("step 3: 1 weights for 2 sources"));
        assert!(err(vec![(3, vec![0.0, 0.0])]).contains("some positive"));
        assert!(err(vec![(3, vec![-1.0, 2.0])]).contains("not negative"));
        assert!(err(vec![(3, vec![1.0, 1.0]), (3, vec![1.0, 2.0])]).contains("must increase"));
    }
}
