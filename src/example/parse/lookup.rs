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
            .find(|(name, _)| **name == *key)
            .map(|&(_, i)| i)
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
