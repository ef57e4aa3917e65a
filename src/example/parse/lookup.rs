//! Finding a feature by its name: the spec's names, and the scan of a
//! record's feature map.

use super::buffers::bytes_of;
use crate::example::wire::{Cursor, Span, TAG_1_LEN, TAG_2_LEN, WireError};

/// Finds a spec feature by the raw key bytes of a map entry, without
/// allocating: names are bucketed by length, then compared byte for byte.
pub(super) struct NameIndex {
    /// Names of length `n` (up to [`NameIndex::MAX_BUCKETED`]) in `by_len[n]`.
    by_len: Vec<Vec<(Box<[u8]>, usize)>>,
    /// Longer names.
    long: Vec<(Box<[u8]>, usize)>,
}

impl NameIndex {
    const MAX_BUCKETED: usize = 64;

    pub(super) fn new<'a>(names: impl Iterator<Item = &'a str>) -> Self {
        let mut by_len: Vec<Vec<(Box<[u8]>, usize)>> = Vec::new();
        let mut long = Vec::new();
        for (i, name) in names.enumerate() {
            let entry = (name.as_bytes().into(), i);
            let n = name.len();
            if n > Self::MAX_BUCKETED {
                long.push(entry);
                continue;
            }
            if by_len.len() <= n {
                by_len.resize_with(n + 1, Vec::new);
            }
            by_len[n].push(entry);
        }
        Self { by_len, long }
    }

    #[inline]
    pub(super) fn find(&self, key: &[u8]) -> Option<usize> {
        let bucket = if key.len() > Self::MAX_BUCKETED {
            &self.long
        } else {
            self.by_len.get(key.len())?
        };
        bucket
            .iter()
            .find(|(name, _)| same(name, key))
            .map(|&(_, i)| i)
    }
}

/// `a == b`, comparing names of 4 to 16 bytes (most feature names) as two
/// overlapping words each, where `==` calls `memcmp` once per map entry of
/// every record (~1% of the pinned lm profile).
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    fn word<const N: usize>(s: &[u8], at: usize) -> Option<[u8; N]> {
        s.get(at..)?.first_chunk::<N>().copied()
    }
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        8..=16 => word::<8>(a, 0) == word(b, 0) && word::<8>(a, n - 8) == word(b, n - 8),
        4..=7 => word::<4>(a, 0) == word(b, 0) && word::<4>(a, n - 4) == word(b, n - 4),
        _ => a == b,
    }
}

/// Scans a map message (`Features` or `FeatureLists`) at `span`: for each
/// entry whose key is in `index`, calls `found(feature index, value span)`.
/// Later entries overwrite earlier ones in the caller's slots, which gives
/// protobuf's last-wins map semantics.
#[inline]
pub(super) fn scan_map(
    rec: &[u8],
    span: Span,
    index: &NameIndex,
    mut found: impl FnMut(usize, Span),
) -> Result<(), WireError> {
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag != TAG_1_LEN {
            c.skip(tag)?;
            continue;
        }
        let entry = c.len_delimited()?;
        let mut e = Cursor::over(rec, entry);
        // A missing key is "", a missing value an empty message.
        let mut key = Span {
            start: entry.start,
            end: entry.start,
        };
        let mut value = key;
        while !e.at_end() {
            let t = e.tag()?;
            match t {
                TAG_1_LEN => key = e.len_delimited()?,
                TAG_2_LEN => value = e.len_delimited()?,
                _ => e.skip(t)?,
            }
        }
        if let Some(i) = index.find(bytes_of(rec, key)) {
            found(i, value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_same_only_byte_for_byte() {
        let names: Vec<Vec<u8>> = (0..40)
            .map(|n| (0..n).map(|i| b'a' + (i % 26) as u8).collect())
            .collect();
        for a in &names {
            assert!(same(a, a));
            for b in &names {
                assert_eq!(same(a, b), a == b);
            }
            // One byte changed, at every place.
            for at in 0..a.len() {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same(a, &b), "{a:?} {at}");
            }
        }
    }
}
