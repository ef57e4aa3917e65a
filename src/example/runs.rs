//! The narrow kernel batch assembly decodes through when every feature is
//! a variable-length integer: where each record's packed run of values
//! lies ([`PackedRuns`], found by `ExampleParser::locate_runs`), and the
//! decoding of those runs straight into padded rows of `i64` or `i32`.
//! The wire format stays in this module; batch sees counts and rows.

use std::mem::MaybeUninit;

use super::wire::{Span, VarintTarget, count_terminal_bytes, decode_varints_into};

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
    /// Empties the runs for `records` records of `features` features.
    pub(super) fn reset(&mut self, features: usize, records: usize) {
        self.features = features;
        self.spans.clear();
        self.spans.reserve(records.saturating_mul(features));
    }

    /// Adds the next run (record-major, feature-minor).
    pub(super) fn push(&mut self, run: Span) {
        self.spans.push(run);
    }

    /// Decodes `feature` of each record into the first values of its row
    /// of `stride` in `rows`, one pass over each run: `counts` gets each
    /// record's number of values (the whole run's), which the caller pads
    /// after and sizes the batch by. A record with more values than the
    /// row keeps one end as `cut` says. False when the general path must
    /// run instead (it reports the error exactly): a malformed run, a value
    /// that does not fit, a record longer than the row with [`Cut::Refuse`].
    /// `spec_i32`: the spec's type is int32, so every value, kept or not,
    /// must fit i32.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decode_rows<R: AsRef<[u8]>>(
        &self,
        records: &[R],
        feature: usize,
        spec_i32: bool,
        stride: usize,
        cut: Cut,
        rows: Rows<'_>,
        counts: &mut Vec<usize>,
    ) -> bool {
        counts.clear();
        match rows {
            Rows::I64(out) => self.rows_of(records, feature, spec_i32, stride, cut, out, counts),
            Rows::I32(out) => self.rows_of(records, feature, spec_i32, stride, cut, out, counts),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn rows_of<T: VarintTarget, R: AsRef<[u8]>>(
        &self,
        records: &[R],
        feature: usize,
        spec_i32: bool,
        stride: usize,
        cut: Cut,
        out: &mut [T],
        counts: &mut Vec<usize>,
    ) -> bool {
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
        }
        true
    }
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
