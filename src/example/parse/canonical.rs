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

use super::lookup::NameIndex;
use crate::example::wire::Span;

/// A length prefix of at most 3 bytes (2 MiB) at `*at`, that fits before
/// `end`; moves past it. `None` otherwise (the general scan reads longer
/// ones).
#[inline(always)]
fn length(rec: &[u8], at: &mut usize, end: usize) -> Option<usize> {
    let b0 = *rec.get(*at)?;
    let (len, n) = if b0 < 0x80 {
        (usize::from(b0), 1)
    } else {
        let b1 = *rec.get(*at + 1)?;
        if b1 < 0x80 {
            (usize::from(b0 & 0x7f) | usize::from(b1) << 7, 2)
        } else {
            let b2 = *rec.get(*at + 2)?;
            if b2 >= 0x80 {
                return None;
            }
            let low = usize::from(b0 & 0x7f) | usize::from(b1 & 0x7f) << 7;
            (low | usize::from(b2) << 14, 3)
        }
    };
    *at += n;
    (len <= end.saturating_sub(*at)).then_some(len)
}

/// The span of `len` bytes at `*at` that ends exactly at `end`, after the
/// one-byte `tag` and its length; moves to its start. `None` if the bytes
/// there are not that.
#[inline(always)]
fn filling(rec: &[u8], at: &mut usize, end: usize, tag: u8) -> Option<Span> {
    if rec.get(*at) != Some(&tag) {
        return None;
    }
    *at += 1;
    let len = length(rec, at, end)?;
    (*at + len == end).then_some(Span {
        start: *at,
        end: *at + len,
    })
}

/// The packed run a map entry's `Feature` value holds, when it is one
/// `Int64List` of one packed run (or no list, or an empty one: an empty
/// run). `None` for any other form.
#[inline(always)]
fn run_of(rec: &[u8], value: Span) -> Option<Span> {
    if value.start == value.end {
        return Some(Span::default());
    }
    let mut at = value.start;
    let list = filling(rec, &mut at, value.end, 0x1a)?;
    if list.start == list.end {
        return Some(Span::default());
    }
    filling(rec, &mut at, list.end, 0x0a)
}

/// Finds, in `rec` laid out canonically, the packed run of each feature of
/// `index`, into `runs` (an absent feature keeps its empty run; a key seen
/// twice, the last). False at the first departure from that layout, with
/// `runs` part written: the caller clears them and scans the general way.
pub(super) fn runs(rec: &[u8], index: &NameIndex, runs: &mut [Span]) -> bool {
    scan(rec, index, runs).is_some()
}

fn scan(rec: &[u8], index: &NameIndex, runs: &mut [Span]) -> Option<()> {
    let mut at = 0;
    let features = filling(rec, &mut at, rec.len(), 0x0a)?;
    while at < features.end {
        if rec[at] != 0x0a {
            return None;
        }
        at += 1;
        let len = length(rec, &mut at, features.end)?;
        let entry_end = at + len;
        if rec.get(at) != Some(&0x0a) {
            return None;
        }
        at += 1;
        let key_len = length(rec, &mut at, entry_end)?;
        let key = rec.get(at..at + key_len)?;
        at += key_len;
        let value = filling(rec, &mut at, entry_end, 0x12)?;
        at = entry_end;
        if let Some(i) = index.find(key) {
            *runs.get_mut(i)? = run_of(rec, value)?;
        }
    }
    Some(())
}
