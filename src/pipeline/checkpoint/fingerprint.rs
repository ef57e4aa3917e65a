//! The fingerprint that ties a state to its pipeline: the CRC32C of a
//! versioned, canonical encoding of exactly the settings that decide which
//! records, in which order, make up each batch.
//!
//! Nothing here knows an op. Each op writes its own settings into an
//! [`Identity`] (its `identity` method, beside its `next`, `save` and
//! `restore`), as fields under tags of its own; the grouping and the
//! logical stream write theirs likewise. The encoding is the fields in
//! tag order, so it does not depend on who wrote first, and a new op adds
//! a field under a new tag — only where it is used, so that every other
//! pipeline keeps its fingerprint and its saved states.
//!
//! Tags in use (a new op takes the next free one, in its own file):
//!
//! | tag | field | written by |
//! | --- | --- | --- |
//! | 1 | the stream's files | interleave |
//! | 2 | host or stream (index, count) | the logical stream |
//! | 3 | seed | shuffle |
//! | 4 | file shuffle | interleave |
//! | 5 | cycle and block length | interleave |
//! | 6 | skip, take | skip/take |
//! | 7 | record filter and map set | filter/map |
//! | 8 | shuffle buffer | shuffle |
//! | 9 | epochs, then whether the buffer spans them | epochs, shuffle |
//! | 10 | equal batches | the logical stream |
//! | 11 | the grouping (16 within it: the bucket schedule) | grouping |
//! | 12 | the measured feature | grouping |
//! | 13 | the parsed ops | grouping |
//! | 14 | the file order's seed, when not the seed | interleave |
//! | 15 | masks, when not the default | grouping |
//! | 17 | logical streams, when the job sets them | the logical stream |
//! | 18 | record ranges (TFDS slices), when any | interleave |
//! | 19 | the mixture's choice and policy | mixture |
//! | 20 | global shuffle: records or blocks, block bytes, window | global shuffle |
//! | 21 | tokenize: feature, tokenizer digest, bos, eos, when any | grouping |

use std::collections::BTreeMap;

/// Bumped when the fingerprint's encoding changes (which refuses every
/// state taken before).
const FINGERPRINT_VERSION: u8 = 1;

/// The settings that decide a stream's sequence, field by field; its
/// [`fingerprint`](Self::fingerprint) is stored in every state of the
/// stream.
#[derive(Debug, Default)]
pub(crate) struct Identity {
    /// Each field's bytes (its tag first), by place in the encoding.
    fields: BTreeMap<u16, Vec<u8>>,
}

/// Where a field goes in the encoding: tag order, except tag 18, which
/// the first encoding wrote after tag 19 (kept so, or every state saved
/// with record ranges would be refused).
fn place(tag: u8) -> u16 {
    match tag {
        18 => 19 * 2 + 1,
        t => u16::from(t) * 2,
    }
}

impl Identity {
    /// The field under `tag`, to write into: new, or the one an op below
    /// began (tag 9: the epochs, then the shuffle over them).
    pub fn field(&mut self, tag: u8) -> FieldWriter<'_> {
        FieldWriter(self.fields.entry(place(tag)).or_insert_with(|| vec![tag]))
    }

    /// The canonical bytes the fingerprint is the CRC32C of.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FINGERPRINT_VERSION];
        for field in self.fields.values() {
            out.extend_from_slice(field);
        }
        out
    }

    /// The fingerprint stored in every state of this stream.
    pub fn fingerprint(&self) -> u32 {
        crc32c::crc32c(&self.encode())
    }
}

/// Writes one field: integers little-endian u64, strings and lists
/// length-prefixed, options a 0/1 byte then the value.
pub(crate) struct FieldWriter<'a>(&'a mut Vec<u8>);

impl FieldWriter<'_> {
    /// A tag byte inside a field (a sub-field).
    pub fn tag(&mut self, tag: u8) -> &mut Self {
        self.0.push(tag);
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.0.push(u8::from(v));
        self
    }
    pub fn opt(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            None => self.bool(false),
            Some(v) => self.bool(true).u64(v),
        }
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    pub fn list(&mut self, v: &[usize]) -> &mut Self {
        self.u64(v.len() as u64);
        for &x in v {
            self.u64(x as u64);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_encoded_in_tag_order_whoever_writes_first() {
        let mut a = Identity::default();
        a.field(3).u64(7);
        a.field(1).str("x");
        a.field(9).opt(None);
        a.field(9).bool(true);
        let mut b = Identity::default();
        b.field(1).str("x");
        b.field(9).opt(None).bool(true);
        b.field(3).u64(7);
        assert_eq!(a.encode(), b.encode());
        assert_eq!(
            a.encode(),
            [
                &[1u8, 1][..],
                &1u64.to_le_bytes(),
                b"x",
                &[3],
                &7u64.to_le_bytes(),
                &[9, 0, 1]
            ]
            .concat()
        );
        // Tag 18 goes after 19, as the first encoding wrote it.
        let mut c = Identity::default();
        c.field(18).bool(false);
        c.field(19).bool(true);
        assert_eq!(c.encode(), [1, 19, 1, 18, 0]);
    }
}
