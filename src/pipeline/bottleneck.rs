//! What limits a pipeline (its bottleneck), decided from the figures every
//! run keeps: the rule `infeed bench` prints, and that the Python JAX
//! iterator applies to each host's last stretch of steps to say which stage
//! starved the slowest. (`limits.rs` is another thing: the largest value of
//! each size setting.)

/// Under this share of a stretch spent waiting for batches, the consumer
/// itself is the limit: the pipeline stays ahead of it.
pub const CONSUMER_WAIT_LIMIT: f64 = 0.10;
/// A stage busier than this share of its threads' time is saturated.
pub const STAGE_BUSY_LIMIT: f64 = 0.50;
/// The stages, in pipeline order: the shard readers (read, CRC, inflate),
/// the record thread (`records`: interleave, shuffle, grouping; not only
/// the shuffle), the workers (parse, assemble).
pub const STAGES: [&str; 3] = ["read", "records", "batch"];

/// A stage's busy and waiting time over a stretch, summed over its
/// threads (in the unit of the stretch given to [`Bottleneck::of`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTime {
    pub busy: f64,
    pub wait: f64,
}

impl StageTime {
    /// The workers time only their work: their wait is the rest of their
    /// threads' time, `workers × seconds − busy`, when none was measured.
    pub fn workers(busy: f64, wait: f64, workers: usize, seconds: f64) -> StageTime {
        let wait = if wait == 0.0 {
            (workers as f64 * seconds - busy).max(0.0)
        } else {
            wait
        };
        StageTime { busy, wait }
    }
}

/// What limits a pipeline over a stretch of time.
#[derive(Debug, Clone, PartialEq)]
pub enum Bottleneck {
    /// The consumer waited for batches less than [`CONSUMER_WAIT_LIMIT`] of
    /// the stretch: the pipeline delivers as fast as the consumer takes.
    Consumer { wait_share: f64 },
    /// The stage whose threads were busy the largest share of their time.
    Stage { name: &'static str, busy_share: f64 },
    /// The consumer waited, yet no stage was busy more than
    /// [`STAGE_BUSY_LIMIT`] of its time: the time went elsewhere (other
    /// processes on the cores, or the source's latency between reads).
    Unclear { best: Option<(&'static str, f64)> },
    /// No batch came in the stretch.
    Unknown,
}

impl Bottleneck {
    /// The rule over a stretch of `seconds` in which `batches` were
    /// delivered, the consumer waited `consumer_wait` and the stages
    /// ([`STAGES`] order) spent `stages` (one unit of time for all: only
    /// shares count):
    /// 1. the consumer waited under 10% → the consumer limits;
    /// 2. else the stage busy the largest share of its time (busy over busy
    ///    plus wait, so a stage of 4 threads compares with one of 1) limits
    ///    if that share is over 50% (ties to the later stage, closer to the
    ///    consumer): a stage that mostly waits is not what the others wait
    ///    for;
    /// 3. else unclear, named with the busiest stage.
    pub fn of(
        seconds: f64,
        batches: u64,
        consumer_wait: f64,
        stages: [StageTime; 3],
    ) -> Bottleneck {
        if batches == 0 || seconds <= 0.0 {
            return Bottleneck::Unknown;
        }
        let wait_share = consumer_wait / seconds;
        if wait_share < CONSUMER_WAIT_LIMIT {
            return Bottleneck::Consumer { wait_share };
        }
        let mut best: Option<(&'static str, f64)> = None;
        for (name, time) in STAGES.iter().zip(stages) {
            let total = time.busy + time.wait;
            if total <= 0.0 {
                continue;
            }
            let share = time.busy / total;
            if best.is_none_or(|(_, b)| share >= b) {
                best = Some((name, share));
            }
        }
        match best {
            Some((name, busy_share)) if busy_share > STAGE_BUSY_LIMIT => {
                Bottleneck::Stage { name, busy_share }
            }
            best => Bottleneck::Unclear { best },
        }
    }

    /// A word for it: `consumer`, a stage's name, `unclear` or `unknown`.
    pub fn word(&self) -> &'static str {
        match self {
            Bottleneck::Consumer { .. } => "consumer",
            Bottleneck::Stage { name, .. } => name,
            Bottleneck::Unclear { .. } => "unclear",
            Bottleneck::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(busy: f64, wait: f64) -> StageTime {
        StageTime { busy, wait }
    }

    #[test]
    fn the_rule_in_order() {
        let idle = [t(0.1, 0.9); 3];
        assert_eq!(Bottleneck::of(10.0, 0, 5.0, idle), Bottleneck::Unknown);
        assert_eq!(
            Bottleneck::of(10.0, 5, 0.5, idle),
            Bottleneck::Consumer { wait_share: 0.05 }
        );
        let workers = [t(0.2, 0.8), t(0.4, 0.6), t(0.9, 0.1)];
        assert_eq!(
            Bottleneck::of(10.0, 5, 4.0, workers),
            Bottleneck::Stage {
                name: "batch",
                busy_share: 0.9
            }
        );
        assert_eq!(
            Bottleneck::of(10.0, 5, 4.0, idle),
            Bottleneck::Unclear {
                best: Some(("batch", 0.1))
            }
        );
        assert_eq!(StageTime::workers(3.0, 0.0, 2, 2.5), t(3.0, 2.0));
        assert_eq!(Bottleneck::of(1.0, 1, 0.0, idle).word(), "consumer");
    }
}
