//! How many values one feature of a serialized `tf.train.Example` holds,
//! without parsing it: a cheap scan for the pipeline's record thread, which
//! must know each record's length to bucket or pack it before any worker
//! parses it.
//!
//! It reads the wire format with the parser's semantics (see
//! [`parse`](super::parse)): `Example.features` and map entries may repeat
//! and the last entry of a key wins; in a `Feature` the last list kind set
//! wins and repeated occurrences of it add up; packed and unpacked values
//! both count. A packed `Int64List` is counted by its varint terminators
//! (bytes below 0x80), so no value is decoded.

use crate::spec::WireKind;

/// The bytes are not a well-formed `Example` where the scan had to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LengthError {
    /// A field runs past the end of its message, or a varint is too long.
    #[error("malformed protobuf at byte {at}")]
    Malformed { at: usize },
    /// The feature holds another list kind than asked for.
    #[error("the feature holds a {actual} list, not {expected}")]
    Kind {
        expected: WireKind,
        actual: WireKind,
    },
}

/// Number of values of feature `name` in the serialized `Example` `record`:
/// 0 when the record lacks it or its `Feature` sets no list.
pub fn feature_length(record: &[u8], name: &str, kind: WireKind) -> Result<usize, LengthError> {
    longest_feature_length(record, &[(name, kind)]).map_err(|(_, e)| e)
}

/// Features [`longest_feature_length`] finds in one pass over a record.
const ONE_PASS: usize = 8;

/// The most values any of `features` holds in `record` (each counted as
/// [`feature_length`] counts it), with one pass over the record's feature
/// map for up to 8 features. An error comes with the index in `features`
/// of the feature it concerns.
pub fn longest_feature_length<S: AsRef<str>>(
    record: &[u8],
    features: &[(S, WireKind)],
) -> Result<usize, (usize, LengthError)> {
    if features.len() > ONE_PASS {
        return features
            .chunks(ONE_PASS)
            .enumerate()
            .try_fold(0, |most, (c, chunk)| {
                longest_feature_length(record, chunk)
                    .map(|n| n.max(most))
                    .map_err(|(i, e)| (c * ONE_PASS + i, e))
            });
    }
    let mut found = [None; ONE_PASS];
    let found = &mut found[..features.len()];
    let mut example = Reader::new(record, 0, record.len());
    let whole = |e| (0, e);
    while let Some((field, wire)) = example.tag().map_err(whole)? {
        if field == 1 && wire == 2 {
            let (start, end) = example.len_delimited().map_err(whole)?;
            scan_features(record, start, end, features, found).map_err(whole)?;
        } else {
            example.skip(wire).map_err(whole)?;
        }
    }
    let mut most = 0;
    for (i, (&(_, kind), at)) in features.iter().zip(found.iter()).enumerate() {
        if let Some((start, end)) = *at {
            most = most.max(count_feature(record, start, end, kind).map_err(|e| (i, e))?);
        }
    }
    Ok(most)
}

/// Finds the last map entry of each of `features`' names in a `Features`
/// message.
fn scan_features<S: AsRef<str>>(
    rec: &[u8],
    start: usize,
    end: usize,
    features: &[(S, WireKind)],
    found: &mut [Option<(usize, usize)>],
) -> Result<(), LengthError> {
    let mut map = Reader::new(rec, start, end);
    while let Some((field, wire)) = map.tag()? {
        if field != 1 || wire != 2 {
            map.skip(wire)?;
            continue;
        }
        let (es, ee) = map.len_delimited()?;
        let mut entry = Reader::new(rec, es, ee);
        // A missing key is "", a missing value an empty `Feature`.
        let (mut k, mut v) = ((es, es), (es, es));
        while let Some((f, w)) = entry.tag()? {
            match (f, w) {
                (1, 2) => k = entry.len_delimited()?,
                (2, 2) => v = entry.len_delimited()?,
                _ => entry.skip(w)?,
            }
        }
        let key = rec.get(k.0..k.1);
        for ((name, _), at) in features.iter().zip(found.iter_mut()) {
            if key == Some(name.as_ref().as_bytes()) {
                *at = Some(v);
            }
        }
    }
    Ok(())
}

/// Counts the values of a `Feature` message.
fn count_feature(
    rec: &[u8],
    start: usize,
    end: usize,
    kind: WireKind,
) -> Result<usize, LengthError> {
    let kind_of = |field| match field {
        1 => Some(WireKind::BytesList),
        2 => Some(WireKind::FloatList),
        3 => Some(WireKind::Int64List),
        _ => None,
    };
    // The last list kind set wins and only its final run of fields counts;
    // lists before that run are never looked into, as the parser never
    // decodes them (a malformed list that loses the oneof is no error).
    let mut last: Option<WireKind> = None;
    let mut run_start = start;
    let mut feature = Reader::new(rec, start, end);
    loop {
        let field_start = feature.pos;
        let Some((field, wire)) = feature.tag()? else {
            break;
        };
        match kind_of(field) {
            Some(k) if wire == 2 => {
                feature.len_delimited()?;
                if last != Some(k) {
                    last = Some(k);
                    run_start = field_start;
                }
            }
            _ => feature.skip(wire)?,
        }
    }
    match last {
        None => Ok(0),
        Some(actual) if actual != kind => Err(LengthError::Kind {
            expected: kind,
            actual,
        }),
        Some(_) => {
            let mut count = 0usize;
            let mut run = Reader::new(rec, run_start, end);
            while let Some((field, wire)) = run.tag()? {
                if kind_of(field) == Some(kind) && wire == 2 {
                    let (ls, le) = run.len_delimited()?;
                    count += count_list(rec, ls, le, kind)?;
                } else {
                    run.skip(wire)?;
                }
            }
            Ok(count)
        }
    }
}

/// Counts the values of one list message.
fn count_list(rec: &[u8], start: usize, end: usize, kind: WireKind) -> Result<usize, LengthError> {
    let mut list = Reader::new(rec, start, end);
    let mut n = 0usize;
    while let Some((field, wire)) = list.tag()? {
        if field != 1 {
            list.skip(wire)?;
            continue;
        }
        match (kind, wire) {
            (WireKind::Int64List, 2) => {
                let (s, e) = list.len_delimited()?;
                let bytes = rec.get(s..e).unwrap_or_default();
                if bytes.last().is_some_and(|&b| b >= 0x80) {
                    return Err(LengthError::Malformed { at: e });
                }
                // The parser's vectorised count (a plain filter-count here
                // widens each byte to 64 bits: ~8x slower on lm records).
                n += super::wire::count_terminal_bytes(bytes);
            }
            (WireKind::FloatList, 2) => {
                let (s, e) = list.len_delimited()?;
                if (e - s) % 4 != 0 {
                    return Err(LengthError::Malformed { at: s });
                }
                n += (e - s) / 4;
            }
            (WireKind::Int64List, 0) | (WireKind::FloatList, 5) | (WireKind::BytesList, 2) => {
                list.skip(wire)?;
                n += 1;
            }
            _ => list.skip(wire)?,
        }
    }
    Ok(n)
}

/// A cursor over `rec[pos..end]`.
struct Reader<'a> {
    rec: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    fn new(rec: &'a [u8], pos: usize, end: usize) -> Self {
        Self {
            rec,
            pos,
            end: end.min(rec.len()),
        }
    }

    /// A varint; tags and most lengths take one byte, read inline.
    #[inline]
    fn varint(&mut self) -> Result<u64, LengthError> {
        if let Some(&b) = self.rec.get(self.pos).filter(|_| self.pos < self.end)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.long_varint()
    }

    fn long_varint(&mut self) -> Result<u64, LengthError> {
        let mut value = 0u64;
        for i in 0..10 {
            let &b = self
                .rec
                .get(self.pos)
                .filter(|_| self.pos < self.end)
                .ok_or(LengthError::Malformed { at: self.pos })?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(LengthError::Malformed { at: self.pos })
    }

    /// The next (field number, wire type), or `None` at the end.
    #[inline]
    fn tag(&mut self) -> Result<Option<(u64, u8)>, LengthError> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let tag = self.varint()?;
        Ok(Some((tag >> 3, (tag & 7) as u8)))
    }

    fn len_delimited(&mut self) -> Result<(usize, usize), LengthError> {
        let at = self.pos;
        let len = self.varint()?;
        let start = self.pos;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&e| e <= self.end)
            .ok_or(LengthError::Malformed { at })?;
        self.pos = end;
        Ok((start, end))
    }

    fn skip(&mut self, wire: u8) -> Result<(), LengthError> {
        let at = self.pos;
        let n = match wire {
            0 => return self.varint().map(drop),
            1 => 8,
            2 => return self.len_delimited().map(drop),
            5 => 4,
            _ => return Err(LengthError::Malformed { at }),
        };
        if self.end - self.pos < n {
            return Err(LengthError::Malformed { at });
        }
        self.pos += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example::proto::{self, Example};
    use prost::Message;

    fn example(features: &[(&str, proto::feature::Kind)]) -> Vec<u8> {
        let mut map = std::collections::HashMap::new();
        for (name, kind) in features {
            map.insert(
                name.to_string(),
                proto::Feature {
                    kind: Some(kind.clone()),
                },
            );
        }
        Example {
            features: Some(proto::Features { feature: map }),
        }
        .encode_to_vec()
    }

    #[test]
    fn counts_each_list_kind_packed_and_not() {
        let rec = example(&[
            (
                "ids",
                proto::feature::Kind::Int64List(proto::Int64List {
                    value: vec![1, 300, -5, 0, 1 << 40],
                }),
            ),
            (
                "f",
                proto::feature::Kind::FloatList(proto::FloatList {
                    value: vec![1.0, 2.0],
                }),
            ),
            (
                "b",
                proto::feature::Kind::BytesList(proto::BytesList {
                    value: vec![b"x".to_vec(), vec![], b"yz".to_vec()],
                }),
            ),
        ]);
        assert_eq!(feature_length(&rec, "ids", WireKind::Int64List), Ok(5));
        assert_eq!(feature_length(&rec, "f", WireKind::FloatList), Ok(2));
        assert_eq!(feature_length(&rec, "b", WireKind::BytesList), Ok(3));
        assert_eq!(feature_length(&rec, "nope", WireKind::Int64List), Ok(0));
        assert_eq!(
            feature_length(&rec, "f", WireKind::Int64List),
            Err(LengthError::Kind {
                expected: WireKind::Int64List,
                actual: WireKind::FloatList
            })
        );
        // Unpacked int64 values: features { feature { key "u" value {
        // int64_list { value: 7 value: 8 } } } } written by hand.
        let list = [0x08, 7, 0x08, 8];
        let feature = [&[0x1a, list.len() as u8][..], &list].concat();
        let entry = [&[0x0a, 1, b'u', 0x12, feature.len() as u8][..], &feature].concat();
        let features = [&[0x0a, entry.len() as u8][..], &entry].concat();
        let rec = [&[0x0a, features.len() as u8][..], &features].concat();
        assert_eq!(feature_length(&rec, "u", WireKind::Int64List), Ok(2));
        // Two entries of one key: the last wins.
        let entry2 = [0x0a, 1, b'u', 0x12, 0];
        let features2 = [&[0x0a, entry.len() as u8][..], &entry, &[0x0a, 5], &entry2].concat();
        let rec2 = [&[0x0a, features2.len() as u8][..], &features2].concat();
        assert_eq!(feature_length(&rec2, "u", WireKind::Int64List), Ok(0));
        // Truncated: an error, never a panic.
        for cut in 0..rec.len() {
            let _ = feature_length(&rec[..cut], "u", WireKind::Int64List);
        }
        assert!(feature_length(&rec[..rec.len() - 1], "u", WireKind::Int64List).is_err());
    }
}
