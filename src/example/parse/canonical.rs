//! The map scan for records laid out as every serializer writes them.
//!
//! `locate_runs` finds each feature's packed run before the decoder reads
//! it. The general scan (`scan_map`, then `packed_run`) reads every tag and
//! length through a cursor that checks and reports each step, which cost
//! ~1 100 instructions a lm record (callgrind), a tenth of the pinned lm
//! profile. Records as TensorFlow, prost and protobuf write them take one
//! layout: `Example { 1: Features { 1: entry { 1: key, 2: Feature { 3:
//! Int64List { 1: packed run } } } ... } }`, each length exactly filling
//! the message around it. [`runs`] walks that layout directly and gives up
//! (`false`) at the first byte that departs from it; the caller then scans
//! the record the general way, which has every rule and every error.

use super::buffers::bytes_of;
use super::lookup::NameIndex;
use crate::example::wire::{Span, decode_varint};

/// The field with the one-byte `tag` at `*at`, its length prefix fitting
/// its bytes before `end`: their span. Moves past it. `None` otherwise.
#[inline(always)]
fn field(rec: &[u8], at: &mut usize, end: usize, tag: u8) -> Option<Span> {
    if *at >= end || rec.get(*at) != Some(&tag) {
        return None;
    }
    let rest = rec.get(*at + 1..end)?;
    // Lengths below 16 KiB, the common ones, without a call.
    let (len, n) = match *rest {
        [b, ..] if b < 0x80 => (usize::from(b), 1),
        [b0, b1, ..] if b1 < 0x80 => (usize::from(b0 & 0x7f) | usize::from(b1) << 7, 2),
        _ => {
            let (len, n) = decode_varint(rest).ok()?;
            (usize::try_from(len).ok()?, n)
        }
    };
    let start = *at + 1 + n;
    let span = Span {
        start,
        end: start.checked_add(len).filter(|&e| e <= end)?,
    };
    *at = span.end;
    Some(span)
}

/// The one field with the one-byte `tag` that fills `within` exactly.
#[inline(always)]
fn only(rec: &[u8], within: Span, tag: u8) -> Option<Span> {
    let mut at = within.start;
    let span = field(rec, &mut at, within.end, tag)?;
    (at == within.end).then_some(span)
}

/// The packed run a map entry's `Feature` value holds, when it is one
/// `Int64List` of one packed run (or no list, or an empty one: an empty
/// run). `None` for any other form.
#[inline(always)]
fn run_of(rec: &[u8], value: Span) -> Option<Span> {
    if value.is_empty() {
        return Some(Span::default());
    }
    let list = only(rec, value, 0x1a)?;
    if list.is_empty() {
        return Some(Span::default());
    }
    only(rec, list, 0x0a)
}

/// Finds, in `rec` laid out canonically, the packed run of each feature of
/// `index`, into `runs` (an absent feature keeps its empty run; a key seen
/// twice, the last). False at the first departure from that layout, with
/// `runs` part written: the caller clears them and scans the general way.
pub(super) fn runs(rec: &[u8], index: &NameIndex, runs: &mut [Span]) -> bool {
    scan(rec, index, runs).is_some()
}

fn scan(rec: &[u8], index: &NameIndex, runs: &mut [Span]) -> Option<()> {
    let whole = Span {
        start: 0,
        end: rec.len(),
    };
    let features = only(rec, whole, 0x0a)?;
    let mut at = features.start;
    while at < features.end {
        let entry = field(rec, &mut at, features.end, 0x0a)?;
        // Its key, then its value, filling it.
        let mut e = entry.start;
        let key = field(rec, &mut e, entry.end, 0x0a)?;
        let value = field(rec, &mut e, entry.end, 0x12)?;
        if e != entry.end {
            return None;
        }
        if let Some(i) = index.find(bytes_of(rec, key)) {
            *runs.get_mut(i)? = run_of(rec, value)?;
        }
    }
    Some(())
}
