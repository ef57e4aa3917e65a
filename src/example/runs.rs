//! The narrow kernel batch assembly decodes through when every feature is
//! a variable-length integer: where each record's packed run of values
//! lies ([`PackedRuns`], found by `ExampleParser::locate_runs`), and the
//! decoding of those runs straight into padded rows of `i64` or `i32`.
//! The wire format stays in this module; batch sees counts and rows.

use std::mem::MaybeUninit;

use crate::prefetch::prefetch;

use super::wire::{Span, VarintTarget, count_terminal_bytes, decode_varints_into};

/// Records ahead of the one being decoded whose run is prefetched. A
/// batch's records are read, checked and scanned before they are decoded,
/// by which time the batch (~256 KiB for lm) has left L1: the decoder's
/// loads waited on L2 (a fifth of its time, lm pinned) until each run was
/// prefetched two records ahead (lm 3% faster; 4 ahead gained nothing more).
const RUNS_AHEAD: usize = 2;

/// Which values a row keeps when a record holds more than the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// None: a longer record is not decoded here (the caller reports it).
    Refuse,
    /// The first values.
    KeepStart,
    /// The last values.
    KeepEnd,
}

/// Rows to decode into: `records × len` values, row-major.
pub(crate) enum Rows<'a> {
    I64(&'a mut [i64]),
    I32(&'a mut [i32]),
}

/// Where the values of each feature of each record of a batch lie: what
/// [`ExampleParser::locate_runs`] found. Their counts are not taken here:
/// decoding gives them ([`PackedRuns::decode_rows`]), in the same pass.
#[derive(Default)]
pub(crate) struct PackedRuns {
    features: usize,
    /// Per record, per feature: the packed run's bytes in the record.
    spans: Vec<Span>,
}

impl PackedRuns {
    /// Empty runs for `records` records of `features` features: cleared
    /// here for the whole batch at once (a `resize` per record called
    /// `memset` for its few bytes, ~0.25% of lm's worker time).
    pub(super) fn reset(&mut self, features: usize, records: usize) {
        self.features = features;
        self.spans.clear();
        self.spans
            .resize(records.saturating_mul(features), Span::default());
    }

    /// Record `record`'s runs, one per feature, empty until set.
    pub(super) fn record_mut(&mut self, record: usize) -> &mut [Span] {
        let first = record * self.features;
        &mut self.spans[first..first + self.features]
    }

    /// The most bytes a record's run of `feature` takes: no record has
    /// more values than that (a packed value takes at least a byte).
    pub(crate) fn widest(&self, feature: usize) -> usize {
        let of_feature = self.spans.iter().skip(feature);
        of_feature
            .step_by(self.features.max(1))
            .map(|s| s.end - s.start)
            .max()
            .unwrap_or(0)
    }

    /// Decodes the spec's feature of each record into the first values of
    /// its row in `rows` (rows of `spec.stride`), one pass over each run,
    /// and writes `pad` to the rest of the row: `counts` gets each
    /// record's number of values (the whole run's), which the caller sizes
    /// the batch by. After each row, `done(row, values kept)`: the caller
    /// writes the row's mask there, while the row is in cache (with the same
    /// writes as a pass of their own after all rows, lm was 6–8% slower). A
    /// record with more values than the row keeps one end as
    /// `spec.cut` says. False when the general path must run instead (it
    /// reports the error exactly): a malformed run, a value that does not
    /// fit, a record longer than the row with [`Cut::Refuse`].
    pub(crate) fn decode_rows<R: AsRef<[u8]>>(
        &self,
        records: &[R],
        spec: RowSpec,
        rows: Rows<'_>,
        pad: i64,
        counts: &mut Vec<usize>,
        done: &mut dyn FnMut(usize, usize),
    ) -> bool {
        counts.clear();
        match rows {
            Rows::I64(out) => self.rows_of(records, spec, out, pad, counts, done),
            Rows::I32(out) => self.rows_of(records, spec, out, pad as i32, counts, done),
        }
    }

    /// Prefetches `feature`'s run in record `r`, if there is one.
    #[inline]
    fn prefetch_run<R: AsRef<[u8]>>(&self, records: &[R], r: usize, feature: usize) {
        if let (Some(rec), Some(span)) =
            (records.get(r), self.spans.get(r * self.features + feature))
        {
            prefetch(rec.as_ref().get(span.start..span.end).unwrap_or(&[]));
        }
    }

    fn rows_of<T: VarintTarget, R: AsRef<[u8]>>(
        &self,
        records: &[R],
        spec: RowSpec,
        out: &mut [T],
        pad: T,
        counts: &mut Vec<usize>,
        done: &mut dyn FnMut(usize, usize),
    ) -> bool {
        let RowSpec {
            feature,
            spec_i32,
            stride,
            cut,
        } = spec;
        let mut long: Vec<i64> = Vec::new();
        for (r, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            let (Some(&span), Some(row)) = (
                self.spans.get(r * self.features + feature),
                out.get_mut(r * stride..(r + 1) * stride),
            ) else {
                return false;
            };
            let run = rec.get(span.start..span.end).unwrap_or(&[]);
            self.prefetch_run(records, r + RUNS_AHEAD, feature);
            let decoded = decode_all(run, span.start, row);
            // A full row, or a value that does not fit `T`: the run may hold
            // more than the row (counted only then), and what does not fit
            // may be cut off.
            let total = match decoded {
                Some(n) if n < stride => n,
                _ => count_terminal_bytes(run),
            };
            if decoded == Some(total) {
                counts.push(total);
                crate::fill::fill(&mut row[total..], pad);
                done(r, total);
                continue;
            }
            if total <= stride {
                // The whole run is in the row: its error is the general path's.
                return false;
            }
            counts.push(total);
            // Longer than the row: decode it all as int64 (the general path
            // parses every value too), keep one end, which must fit `T` (the
            // cast checks only the kept values).
            if cut == Cut::Refuse {
                return false;
            }
            long.clear();
            long.resize(total, 0);
            if decode_all(run, span.start, &mut long) != Some(total) {
                return false;
            }
            // An int32 spec feature: parsing checks every value.
            if spec_i32 && !long.iter().all(|&v| i32::try_from(v).is_ok()) {
                return false;
            }
            let kept = match cut {
                Cut::KeepEnd => &long[total - stride..],
                _ => &long[..stride],
            };
            for (d, &v) in row.iter_mut().zip(kept) {
                if !T::fits(v as u64) {
                    return false;
                }
                *d = T::from_u64(v as u64);
            }
            done(r, stride);
        }
        true
    }
}

/// What [`PackedRuns::decode_rows`] decodes: which feature, into rows of
/// how many values, and what it checks.
#[derive(Clone, Copy)]
pub(crate) struct RowSpec {
    /// The feature's place in the spec.
    pub(crate) feature: usize,
    /// The spec's type is int32: every value, kept or not, must fit i32.
    pub(crate) spec_i32: bool,
    /// Values a row holds.
    pub(crate) stride: usize,
    /// What a longer record keeps.
    pub(crate) cut: Cut,
}

/// Decodes the varints of `run` (at record offset `base`) into the front
/// of `dst` until the run or `dst` ends: how many, or `None` when the
/// general parser would report something (a malformed varint, a value that
/// does not fit `T`).
#[inline]
fn decode_all<T: VarintTarget>(run: &[u8], base: usize, dst: &mut [T]) -> Option<usize> {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the decoder only writes
    // initialised values.
    let room = unsafe { &mut *(dst as *mut [T] as *mut [MaybeUninit<T>]) };
    match decode_varints_into(run, base, room) {
        Ok((n, true)) => Some(n),
        _ => None,
    }
}
