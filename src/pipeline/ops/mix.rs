//! Mixtures ([`Pipeline::mix`](crate::pipeline::Pipeline::mix)): several
//! sources, each a record chain of its own (files, host shard, file order,
//! interleave, shuffle buffer, repeat), drawn from in set proportions.
//!
//! Which source gives the mixture's `n`-th record is a function of the seed,
//! `n` and the weights alone:
//!
//! - [`MixChoice::Random`]: a draw from the counter-based RNG at counter
//!   `n`, by weight (tf.data's `sample_from_datasets`);
//! - [`MixChoice::Stratified`]: every global batch (the hosts' batches of
//!   one step together) holds each source's share within one row (the floor
//!   or the ceiling of its quota; the rows left go to the largest carried
//!   remainders, so the run is exact); each host takes its rows of that
//!   allocation, dealt round-robin, and orders them by smooth weighted
//!   round-robin.
//!
//! Its part of the state: records drawn, per source (by name) the records
//! taken, whether it ran out and its fingerprint, the weights and where
//! they took effect, the carried remainders; each source's chain saves its
//! own parts under
//! `source/<name>`. A restore with other weights or sources continues every
//! source it knows where it was and applies the new weights from there.

use std::sync::Arc;

use crate::pipeline::checkpoint::{Identity, NodeProto, OpPart, SavedParts};
use crate::pipeline::error::{PipelineError, StateError};
use crate::pipeline::item::Item;
use crate::pipeline::rng::{CounterRng, domain};

use super::chain::RecordChain;
use super::mix_schedule::MixSchedule;
use super::{Restore, invalid};

/// How a mixture picks the source of each record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MixChoice {
    /// A random draw per record, by weight.
    #[default]
    Random,
    /// Every batch holds each source's share (needs `batch`).
    Stratified,
}

impl crate::words::Words for MixChoice {
    const SETTING: &'static str = "mix_by";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["random"], MixChoice::Random),
        (&["stratified"], MixChoice::Stratified),
    ];
}

impl std::str::FromStr for MixChoice {
    type Err = crate::words::UnknownWord;

    /// `random` or `stratified`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
    }
}

/// What a mixture does when one of its sources runs out (a finite
/// `repeat` on the source).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnExhausted {
    /// The mixture ends there: the proportions hold to the last record.
    #[default]
    Stop,
    /// The source is dropped and the others' weights renormalized.
    Drop,
    /// An error ([`PipelineError::SourceExhausted`]).
    Fail,
}

impl crate::words::Words for OnExhausted {
    const SETTING: &'static str = "on_exhausted";
    const WORDS: &'static [crate::words::Word<Self>] = &[
        (&["stop"], OnExhausted::Stop),
        (&["drop"], OnExhausted::Drop),
        (&["fail"], OnExhausted::Fail),
    ];
}

impl std::str::FromStr for OnExhausted {
    type Err = crate::words::UnknownWord;

    /// `stop`, `drop` or `fail`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::words::read(s)
    }
}

/// What a mixture does; fixed when the pipeline is built.
#[derive(Clone, Debug)]
pub(crate) struct MixConfig {
    pub names: Vec<String>,
    /// Positive, in the order of `names`.
    pub weights: Vec<f64>,
    pub choice: MixChoice,
    pub on_exhausted: OnExhausted,
    pub seed: u64,
    /// Stratified: rows of this host's batch, and (host, hosts).
    pub batch: usize,
    pub host: (u64, u64),
    /// Weights by step, a step being `records_per_step` records drawn.
    pub schedule: Option<MixSchedule>,
    pub records_per_step: u64,
    /// Weights by tokens: each source's factor from its weight to its
    /// record weight (1 / its mean tokens per record).
    pub per_record: Option<Vec<f64>>,
}

/// One source of a mixture.
pub(crate) struct Source {
    pub chain: RecordChain,
    /// Where its file indexes start in the mixture's file list.
    pub first_file: u32,
    pub files: u32,
    pub fingerprint: u32,
}

/// The mixture's part of a state.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct MixPart {
    /// Records drawn so far, and when the current weights took effect.
    #[prost(uint64, tag = "1")]
    pub drawn: u64,
    #[prost(uint64, tag = "2")]
    pub phase: u64,
    #[prost(string, repeated, tag = "3")]
    pub names: Vec<String>,
    #[prost(double, repeated, tag = "4")]
    pub weights: Vec<f64>,
    #[prost(uint64, repeated, tag = "5")]
    pub taken: Vec<u64>,
    #[prost(bool, repeated, tag = "6")]
    pub exhausted: Vec<bool>,
    #[prost(uint32, repeated, tag = "7")]
    pub fingerprints: Vec<u32>,
    /// Stratified: per source, the remainder carried into the current
    /// batch's allocation.
    #[prost(double, repeated, tag = "8")]
    pub carry: Vec<f64>,
    /// The schedule: its steps, their weights (a row per step), whether
    /// linear, and the records of a step (absent without one).
    #[prost(uint64, repeated, tag = "9")]
    pub schedule_steps: Vec<u64>,
    #[prost(double, repeated, tag = "10")]
    pub schedule_weights: Vec<f64>,
    #[prost(bool, tag = "11")]
    pub interpolate: bool,
    #[prost(uint64, tag = "12")]
    pub records_per_step: u64,
    /// Weights count tokens: each source's factor to record weights.
    #[prost(double, repeated, tag = "13")]
    pub per_record: Vec<f64>,
}
crate::pipeline::checkpoint::prost_part!(MixPart, "mix", 1);

/// The mixture op: its sources' chains and the draw.
pub(crate) struct MixChain {
    cfg: Arc<MixConfig>,
    sources: Vec<Source>,
    exhausted: Vec<bool>,
    drawn: u64,
    phase: u64,
    /// Per source: records taken (`Batches::source_counts` reads them from
    /// the state).
    taken: Vec<u64>,
    /// Stratified: the source of each row of the current batch, the batch
    /// they are planned for, and the remainders carried into it and out.
    rows: Vec<usize>,
    planned: Option<u64>,
    carry: Vec<f64>,
    carry_after: Vec<f64>,
    finished: bool,
    /// With a schedule or token weights: the record weights of step
    /// `step` (the step of the next draw).
    scheduled: Option<(u64, Vec<f64>)>,
}

fn child_key(name: &str) -> String {
    format!("source/{name}")
}

impl MixChain {
    /// A mixture of `sources` (not started: [`start`](Self::start) or
    /// [`restore`](Self::restore) it).
    pub fn new(cfg: Arc<MixConfig>, sources: Vec<Source>) -> Self {
        let n = sources.len();
        MixChain {
            cfg,
            sources,
            exhausted: vec![false; n],
            drawn: 0,
            phase: 0,
            taken: vec![0; n],
            rows: Vec::new(),
            planned: None,
            carry: vec![0.0; n],
            carry_after: vec![0.0; n],
            finished: false,
            scheduled: None,
        }
    }

    /// The weights of the next draw: the schedule's at its step, else the
    /// mixture's.
    fn weights(&self) -> &[f64] {
        match &self.scheduled {
            Some((_, w)) => w,
            None => &self.cfg.weights,
        }
    }

    /// Moves the record weights to the step of the next draw (the
    /// schedule's weights, per record when they count tokens).
    fn follow_schedule(&mut self) {
        if self.cfg.schedule.is_none() && self.cfg.per_record.is_none() {
            return;
        }
        let step = match &self.cfg.schedule {
            Some(_) => self.drawn / self.cfg.records_per_step.max(1),
            None => 0,
        };
        if self.scheduled.as_ref().is_some_and(|(s, _)| *s == step) {
            return;
        }
        let mut weights = match &self.cfg.schedule {
            Some(schedule) => schedule.weights_at(step, &self.cfg.weights),
            None => self.cfg.weights.clone(),
        };
        if let Some(factors) = &self.cfg.per_record {
            weights.iter_mut().zip(factors).for_each(|(w, f)| *w *= f);
        }
        self.scheduled = Some((step, weights));
    }

    /// The schedule as the mixture's part saves it.
    fn schedule_fields(&self) -> (Vec<u64>, Vec<f64>, bool, u64) {
        match &self.cfg.schedule {
            None => (Vec::new(), Vec::new(), false, 0),
            Some(s) => (
                s.points.iter().map(|(step, _)| *step).collect(),
                s.points
                    .iter()
                    .flat_map(|(_, w)| w.iter().copied())
                    .collect(),
                s.interpolate,
                self.cfg.records_per_step,
            ),
        }
    }

    /// Starts every source from its start.
    pub fn start(&mut self) {
        for source in &mut self.sources {
            source.chain.start();
        }
    }

    /// Continues where the mixture's part was saved. Sources are matched
    /// by name: each restores its own chain from its parts (under
    /// `source/<name>`), a source the state does not have starts from its
    /// start, and the parts of a source the mixture no longer has are
    /// dropped; weights or sources that changed start a new phase here.
    pub fn restore(&mut self, r: &mut Restore<'_>) -> Result<(), PipelineError> {
        let part: MixPart = r.take()?;
        let n = part.names.len();
        if [part.weights.len(), part.taken.len(), part.exhausted.len()]
            .iter()
            .chain([&part.fingerprints.len()])
            .any(|&len| len != n)
        {
            return Err(invalid(
                "mixture sources",
                n as u64,
                "its names, weights, counts and flags differ in number".into(),
            ));
        }
        if part.phase > part.drawn {
            return Err(invalid(
                "mixture phase",
                part.phase,
                format!("only {} records were drawn", part.drawn),
            ));
        }
        let names = self.cfg.names.clone();
        let (steps, weights, interpolate, per_step) = self.schedule_fields();
        let mut same = part.names == names
            && part.weights == self.cfg.weights
            && (part.schedule_steps == steps)
            && (part.schedule_weights == weights)
            && part.interpolate == interpolate
            && part.records_per_step == per_step
            && part.per_record == self.cfg.per_record.clone().unwrap_or_default();
        for (i, name) in names.iter().enumerate() {
            let saved = part.names.iter().position(|s| s == name);
            let child = r.take_child(&child_key(name))?;
            let source = &mut self.sources[i];
            match (saved, child) {
                (Some(s), Some(mut child)) => {
                    if part.fingerprints[s] != source.fingerprint {
                        return Err(StateError::Part {
                            part: child_key(name),
                            reason: "the source was saved with other files or settings that \
                                     decide its order"
                                .into(),
                        }
                        .into());
                    }
                    source.chain.restore(&mut child)?;
                    child.finish()?;
                    self.taken[i] = part.taken[s];
                    self.exhausted[i] = part.exhausted[s];
                }
                (None, None) => {
                    same = false;
                    source.chain.start();
                }
                _ => {
                    return Err(StateError::Part {
                        part: child_key(name),
                        reason: "the mixture's part and its sources' parts disagree".into(),
                    }
                    .into());
                }
            }
        }
        // Sources the mixture no longer has.
        for name in &part.names {
            if !names.contains(name) {
                r.drop_key(&child_key(name));
            }
        }
        let phase = if same { part.phase } else { part.drawn };
        // A new phase starts with nothing carried.
        let carry = if same {
            part.carry.clone()
        } else {
            vec![0.0; names.len()]
        };
        if carry.len() != names.len() || carry.iter().any(|c| !c.is_finite()) {
            return Err(invalid(
                "mixture remainders",
                carry.len() as u64,
                format!("one finite remainder per source ({})", names.len()),
            ));
        }
        if self.cfg.choice == MixChoice::Stratified
            && !(part.drawn - part.phase).is_multiple_of(self.cfg.batch as u64)
            && !same
        {
            return Err(invalid(
                "records drawn",
                part.drawn,
                "a stratified mixture changes weights or sources only at a batch boundary".into(),
            ));
        }
        self.drawn = part.drawn;
        self.phase = phase;
        self.carry = carry;
        // Under `Stop` (and `Fail`) a source runs out only as the mixture
        // ends: a state saved then is of an ended mixture, which a restore
        // must not draw on from the other sources.
        self.finished =
            self.cfg.on_exhausted != OnExhausted::Drop && self.exhausted.iter().any(|&e| e);
        Ok(())
    }

    /// Its seed, choice and exhaustion policy. Its sources and weights
    /// are not here: they may change between a save and a restore (each
    /// source's own fingerprint is in the mixture's part).
    pub fn identity(&self, id: &mut Identity) {
        id.step("mix")
            .u64(self.cfg.seed)
            .u64(match self.cfg.choice {
                MixChoice::Random => 0,
                MixChoice::Stratified => 1,
            })
            .u64(match self.cfg.on_exhausted {
                OnExhausted::Stop => 0,
                OnExhausted::Drop => 1,
                OnExhausted::Fail => 2,
            });
    }

    /// Pushes its parts: the mixture's, then each source's chain's, as a
    /// group under the source's name.
    pub fn save(&mut self, parts: &mut SavedParts) {
        let (schedule_steps, schedule_weights, interpolate, records_per_step) =
            self.schedule_fields();
        parts.push(MixPart {
            per_record: self.cfg.per_record.clone().unwrap_or_default(),
            schedule_steps,
            schedule_weights,
            interpolate,
            records_per_step,
            drawn: self.drawn,
            phase: self.phase,
            names: self.cfg.names.clone(),
            weights: self.cfg.weights.clone(),
            taken: self.taken.clone(),
            exhausted: self.exhausted.clone(),
            fingerprints: self.sources.iter().map(|s| s.fingerprint).collect(),
            carry: if self.planned == Some(self.batch()) || self.planned.is_none() {
                self.carry.clone()
            } else {
                // At a batch boundary, the next batch not planned yet.
                self.carry_after.clone()
            },
        });
        for (name, source) in self.cfg.names.iter().zip(&mut self.sources) {
            let mut child = SavedParts::default();
            source.chain.save(&mut child);
            parts.push_child(child_key(name), child);
        }
    }

    /// The next record of the mixture, `None` at its end.
    pub fn next_item(&mut self) -> Result<Option<Item>, PipelineError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            self.follow_schedule();
            if self.cfg.choice == MixChoice::Stratified && self.planned != Some(self.batch()) {
                self.plan_batch();
            }
            let Some(j) = self.choose() else {
                self.finished = true;
                return Ok(None);
            };
            let source = &mut self.sources[j];
            match source.chain.next_item()? {
                Some(mut item) => {
                    item.file += source.first_file;
                    self.drawn += 1;
                    self.taken[j] += 1;
                    return Ok(Some(item));
                }
                None => match self.cfg.on_exhausted {
                    OnExhausted::Stop => {
                        self.exhausted[j] = true;
                        self.finished = true;
                        return Ok(None);
                    }
                    OnExhausted::Fail => {
                        self.exhausted[j] = true;
                        self.finished = true;
                        return Err(PipelineError::SourceExhausted {
                            name: self.cfg.names[j].clone(),
                            records: self.taken[j],
                        });
                    }
                    // Drawn again among the others, for the same record.
                    OnExhausted::Drop => self.exhausted[j] = true,
                },
            }
        }
    }

    /// The source of the next record, among those not run out.
    fn choose(&self) -> Option<usize> {
        // Runs per record: no allocation.
        let alive = || (0..self.sources.len()).filter(|&j| !self.exhausted[j]);
        let last = alive().next_back()?;
        if self.cfg.choice == MixChoice::Stratified {
            let row = ((self.drawn - self.phase) % self.cfg.batch as u64) as usize;
            if let Some(&j) = self.rows.get(row).filter(|&&j| !self.exhausted[j]) {
                return Some(j);
            }
            // The planned source ran out (OnExhausted::Drop): a draw among
            // the others, below.
        }
        let weights = self.weights();
        let total: f64 = alive().map(|j| weights[j]).sum();
        // A schedule can leave only sources it turned off.
        if total <= 0.0 {
            return None;
        }
        let mut rng = CounterRng::new(self.cfg.seed, domain::MIX, self.drawn);
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let mut sum = 0.0;
        let mut chosen = last;
        for j in alive().filter(|&j| weights[j] > 0.0) {
            sum += weights[j];
            chosen = j;
            if u < sum {
                return Some(j);
            }
        }
        Some(chosen)
    }

    /// The batch the next record belongs to (stratified).
    fn batch(&self) -> u64 {
        (self.drawn - self.phase) / self.cfg.batch as u64
    }

    /// Stratified: the sources of the rows of this host's current batch.
    fn plan_batch(&mut self) {
        let batch = self.batch();
        // Moving on from the batch planned last: its remainders carry over.
        if self.planned.is_some_and(|p| p + 1 == batch) {
            self.carry = std::mem::take(&mut self.carry_after);
        }
        self.planned = Some(batch);
        let weights = self.weights();
        let alive: Vec<f64> = (0..self.sources.len())
            .map(|j| if self.exhausted[j] { 0.0 } else { weights[j] })
            .collect();
        let global = self.cfg.batch as u64 * self.cfg.host.1.max(1);
        // From the remainders carried into this batch: planning it again (a
        // restore) gives the same rows.
        self.carry_after = self.carry.clone();
        let counts = allocate(&alive, global, &mut self.carry_after);
        self.rows = host_rows(&counts, batch, self.cfg.batch, self.cfg.host);
    }

    /// Records its sources took in and hold (their shuffle buffers').
    pub fn held(&self) -> u64 {
        self.sources.iter().map(|s| s.chain.held()).sum()
    }

    /// Reads records at mixture file indexes again, each from its source,
    /// in the given order.
    pub fn read_again(&self, positions: &[(u32, u64)]) -> Result<Vec<Item>, PipelineError> {
        let mut out: Vec<Option<Item>> = vec![None; positions.len()];
        for source in &self.sources {
            let range = source.first_file..source.first_file + source.files;
            let (mine, local): (Vec<usize>, Vec<(u32, u64)>) = positions
                .iter()
                .enumerate()
                .filter(|(_, (f, _))| range.contains(f))
                .map(|(i, &(f, o))| (i, (f - source.first_file, o)))
                .unzip();
            if mine.is_empty() {
                continue;
            }
            for (i, mut item) in mine.into_iter().zip(source.chain.read_again(&local)?) {
                item.file += source.first_file;
                out[i] = Some(item);
            }
        }
        out.into_iter()
            .zip(positions)
            .map(|(item, &(file, _))| {
                item.ok_or_else(|| {
                    StateError::Invalid {
                        field: "file index",
                        value: u64::from(file),
                        reason: "no source of the mixture has it".into(),
                    }
                    .into()
                })
            })
            .collect()
    }
}

/// A mixture's sources with the records taken from each, as the mixture's
/// part among a state's nodes (at any depth) has them; `None` when the
/// state holds no mixture.
pub(crate) fn source_counts(nodes: &[NodeProto]) -> Option<Vec<(String, u64)>> {
    nodes.iter().find_map(|node| {
        if node.key == <MixPart as OpPart>::KEY {
            let part = MixPart::decode_body(&node.body).ok()?;
            Some(part.names.into_iter().zip(part.taken).collect())
        } else {
            source_counts(&node.children)
        }
    })
}

/// The rows of a global batch of `rows` for each source, by `weights`: the
/// floor of each quota, and the rows left to the sources whose carried
/// remainders (`carry`, updated) are largest (ties to the first). So every
/// source gets the floor or the ceiling of its quota in every batch, and
/// the carried remainders keep the run's totals exact.
fn allocate(weights: &[f64], rows: u64, carry: &mut [f64]) -> Vec<u64> {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return vec![0; weights.len()];
    }
    let quotas: Vec<f64> = weights.iter().map(|w| rows as f64 * w / total).collect();
    let mut counts: Vec<u64> = quotas.iter().map(|q| q.floor() as u64).collect();
    let left = rows.saturating_sub(counts.iter().sum());
    for (c, q) in carry.iter_mut().zip(&quotas) {
        *c += q - q.floor();
    }
    let mut order: Vec<usize> = (0..weights.len()).filter(|&j| weights[j] > 0.0).collect();
    order.sort_by(|&a, &b| carry[b].total_cmp(&carry[a]).then(a.cmp(&b)));
    for &j in order.iter().take(left as usize) {
        counts[j] += 1;
        carry[j] -= 1.0;
    }
    counts
}

/// The sources of the rows of host `host.0`'s batch (of `rows` rows each on
/// `host.1` hosts), from the global batch's `counts`: each source's rows are
/// dealt to the hosts round-robin from a place that moves each batch
/// (`batch`); a host orders its rows by smooth weighted round-robin.
pub(crate) fn host_rows(counts: &[u64], batch: u64, rows: usize, host: (u64, u64)) -> Vec<usize> {
    let (h, hosts) = (host.0, host.1.max(1));
    // Each source's rows: an equal share per host, the remainder dealt one
    // per host in turn, continuing from where the previous source stopped.
    let mut mine = vec![0u64; counts.len()];
    let mut next = batch % hosts;
    for (j, &c) in counts.iter().enumerate() {
        mine[j] = c / hosts;
        let extra = c % hosts;
        // Hosts next, next+1, ... (mod hosts) get one more.
        if (h + hosts - next) % hosts < extra {
            mine[j] += 1;
        }
        next = (next + extra) % hosts;
    }
    // The dealing gives every host the same number of rows (all rows are
    // dealt in one round-robin sequence), `rows` each.
    let mut order = Vec::with_capacity(rows);
    let total: u64 = mine.iter().sum();
    let mut current = vec![0i64; mine.len()];
    for _ in 0..total {
        for (j, c) in current.iter_mut().enumerate() {
            *c += mine[j] as i64;
        }
        let j = (0..mine.len())
            .filter(|&j| mine[j] > 0)
            .max_by(|&a, &b| current[a].cmp(&current[b]).then(b.cmp(&a)))
            .unwrap_or(0);
        current[j] -= total as i64;
        order.push(j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(rows: &[usize], k: usize) -> Vec<u64> {
        let mut c = vec![0; k];
        for &j in rows {
            c[j] += 1;
        }
        c
    }

    #[test]
    fn every_global_batch_holds_the_shares_and_the_run_is_exact() {
        for (weights, hosts, rows) in [
            (vec![3.0, 1.0], 1u64, 16usize),
            (vec![3.0, 1.0], 4, 6),
            (vec![0.5, 0.3, 0.2], 3, 7),
            (vec![1.0, 1.0, 1.0, 1.0, 5.0], 2, 9),
            (vec![0.37, 0.21, 0.3, 0.12], 5, 13),
        ] {
            let k = weights.len();
            let total: f64 = weights.iter().sum();
            let global = rows as u64 * hosts;
            let mut carry = vec![0.0; k];
            let mut run = vec![0u64; k];
            for batch in 0..500 {
                let counts = allocate(&weights, global, &mut carry);
                assert_eq!(counts.iter().sum::<u64>(), global);
                let mut step = vec![0u64; k];
                for h in 0..hosts {
                    let mine = host_rows(&counts, batch, rows, (h, hosts));
                    assert_eq!(mine.len(), rows, "{weights:?} batch {batch} host {h}");
                    for (j, c) in tally(&mine, k).into_iter().enumerate() {
                        step[j] += c;
                        // A host's rows: its even share of the step's, or one more.
                        assert!(c == counts[j] / hosts || c == counts[j] / hosts + 1);
                    }
                }
                assert_eq!(step, counts);
                for j in 0..k {
                    // Every global batch: the floor or the ceiling of the share.
                    let share = global as f64 * weights[j] / total;
                    assert!(
                        step[j] == share.floor() as u64 || step[j] == share.ceil() as u64,
                        "{weights:?} batch {batch}: {step:?}"
                    );
                    run[j] += step[j];
                }
                // The run so far: within one row of exact.
                for j in 0..k {
                    let exact = (batch + 1) as f64 * global as f64 * weights[j] / total;
                    assert!(
                        (run[j] as f64 - exact).abs() < 1.0 + 1e-6,
                        "{weights:?} {run:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_source_without_weight_gets_no_row() {
        let global = allocate(&[2.0, 0.0, 1.0], 9, &mut [0.0; 3]);
        let rows = host_rows(&global, 5, 9, (0, 1));
        assert_eq!(tally(&rows, 3), [6, 0, 3]);
        // Interleaved, not blocked.
        assert_eq!(&rows[..3], &[0, 2, 0]);
    }
}
