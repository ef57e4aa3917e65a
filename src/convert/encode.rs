//! A direct `tf.train.Example` encoder: features are written in a fixed
//! order (the schema's), so the same input gives the same bytes on every run
//! (prost writes its `HashMap` in a random order), and no message tree is
//! built per record.
//!
//! Wire layout: `Example { 1: Features { 1: repeated entry { 1: key, 2: Feature } } }`,
//! `Feature { 1: BytesList, 2: FloatList (packed), 3: Int64List (packed) }`,
//! the same bytes TensorFlow's serializer gives for a one-feature Example.

use super::schema::ValueType;

/// One column's values for the current record, reused from record to record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColBuf {
    /// False when the record has no value for the column (the feature is left out).
    pub present: bool,
    /// Int64 values.
    pub ints: Vec<i64>,
    /// Float values.
    pub floats: Vec<f32>,
    /// Byte-string values, concatenated; `ends` marks where each ends.
    pub bytes: Vec<u8>,
    /// End offsets in `bytes`, one per byte-string value.
    pub ends: Vec<usize>,
}

impl ColBuf {
    /// Empties the buffer, keeping its allocations.
    pub fn clear(&mut self) {
        self.present = false;
        self.ints.clear();
        self.floats.clear();
        self.bytes.clear();
        self.ends.clear();
    }

    /// Appends one byte string.
    pub fn push_bytes(&mut self, value: &[u8]) {
        self.bytes.extend_from_slice(value);
        self.ends.push(self.bytes.len());
    }

    /// The byte-string values.
    pub fn byte_values(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let v = self.bytes.get(start..end).unwrap_or_default();
            start = end;
            v
        })
    }

    /// Number of values of type `vtype`.
    pub fn len(&self, vtype: ValueType) -> usize {
        match vtype {
            ValueType::Int64 => self.ints.len(),
            ValueType::Float => self.floats.len(),
            ValueType::Bytes => self.ends.len(),
        }
    }
}

#[inline]
fn varint_len(v: u64) -> usize {
    // 1 byte per 7 bits, at least 1.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends the varints of `values`, whose encoded length is `packed`.
/// Values below 2^21 (token ids, labels) take an unrolled path.
fn put_varints(out: &mut Vec<u8>, values: &[i64], packed: usize) {
    let start = out.len();
    out.resize(start + packed, 0);
    let buf = &mut out[start..];
    let mut i = 0;
    for &v in values {
        let v = v as u64;
        if v < 1 << 7 {
            if let Some(b) = buf.get_mut(i) {
                *b = v as u8;
            }
            i += 1;
        } else if v < 1 << 14 {
            if let Some([a, b]) = buf.get_mut(i..i + 2) {
                *a = (v as u8) | 0x80;
                *b = (v >> 7) as u8;
            }
            i += 2;
        } else if v < 1 << 21 {
            if let Some([a, b, c]) = buf.get_mut(i..i + 3) {
                *a = (v as u8) | 0x80;
                *b = ((v >> 7) as u8) | 0x80;
                *c = (v >> 14) as u8;
            }
            i += 3;
        } else {
            let mut v = v;
            while v >= 0x80 {
                if let Some(b) = buf.get_mut(i) {
                    *b = (v as u8) | 0x80;
                }
                v >>= 7;
                i += 1;
            }
            if let Some(b) = buf.get_mut(i) {
                *b = v as u8;
            }
            i += 1;
        }
    }
}

/// Length of a length-delimited field (tag + length + payload).
#[inline]
fn field_len(payload: usize) -> usize {
    1 + varint_len(payload as u64) + payload
}

/// The payload length of the value list (Int64List / FloatList / BytesList)
/// and, for ints, the length of the packed varints.
fn list_payload_len(col: &ColBuf, vtype: ValueType) -> (usize, usize) {
    match vtype {
        ValueType::Int64 => {
            let packed: usize = col.ints.iter().map(|&v| varint_len(v as u64)).sum();
            (
                if col.ints.is_empty() {
                    0
                } else {
                    field_len(packed)
                },
                packed,
            )
        }
        ValueType::Float => {
            if col.floats.is_empty() {
                (0, 0)
            } else {
                (field_len(4 * col.floats.len()), 0)
            }
        }
        ValueType::Bytes => (col.byte_values().map(|b| field_len(b.len())).sum(), 0),
    }
}

/// Encodes one Example with the features `(name, type, values)` in the given
/// order, appending it to `out`. Columns with `present == false` are left out.
pub(super) fn encode_example<'a>(
    out: &mut Vec<u8>,
    features: impl Iterator<Item = (&'a str, ValueType, &'a ColBuf)> + Clone,
) {
    // Pass 1: sizes (list payload and packed length per present feature).
    let mut sizes: [(usize, usize); 16] = [(0, 0); 16];
    let mut more: Vec<(usize, usize)> = Vec::new();
    let mut features_len = 0usize;
    for (i, (name, vtype, col)) in features.clone().filter(|f| f.2.present).enumerate() {
        let size = list_payload_len(col, vtype);
        match sizes.get_mut(i) {
            Some(slot) => *slot = size,
            None => more.push(size),
        }
        let feature = field_len(size.0);
        features_len += field_len(field_len(name.len()) + field_len(feature));
    }
    out.reserve(field_len(features_len));
    out.push(0x0a);
    put_varint(out, features_len as u64);
    // Pass 2: bytes.
    for (i, (name, vtype, col)) in features.filter(|f| f.2.present).enumerate() {
        let (list, packed) = match sizes.get(i) {
            Some(s) => *s,
            None => more.get(i - sizes.len()).copied().unwrap_or_default(),
        };
        let feature = field_len(list);
        let entry = field_len(name.len()) + field_len(feature);
        out.push(0x0a); // Features.feature map entry
        put_varint(out, entry as u64);
        out.push(0x0a); // key
        put_varint(out, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
        out.push(0x12); // value: Feature
        put_varint(out, feature as u64);
        match vtype {
            ValueType::Bytes => {
                out.push(0x0a);
                put_varint(out, list as u64);
                for b in col.byte_values() {
                    out.push(0x0a);
                    put_varint(out, b.len() as u64);
                    out.extend_from_slice(b);
                }
            }
            ValueType::Float => {
                out.push(0x12);
                put_varint(out, list as u64);
                if !col.floats.is_empty() {
                    out.push(0x0a);
                    put_varint(out, 4 * col.floats.len() as u64);
                    for f in &col.floats {
                        out.extend_from_slice(&f.to_le_bytes());
                    }
                }
            }
            ValueType::Int64 => {
                out.push(0x1a);
                put_varint(out, list as u64);
                if !col.ints.is_empty() {
                    out.push(0x0a);
                    put_varint(out, packed as u64);
                    put_varints(out, &col.ints, packed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example::proto::{Example, Feature};
    use proptest::prelude::*;
    use prost::Message;

    fn col_ints(v: &[i64]) -> ColBuf {
        ColBuf {
            present: true,
            ints: v.to_vec(),
            ..ColBuf::default()
        }
    }

    #[test]
    fn varint_lengths() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(u64::MAX), 10);
    }

    #[test]
    fn one_feature_matches_prost_bytes() {
        let col = col_ints(&[5, -1, 300]);
        let mut out = Vec::new();
        encode_example(&mut out, [("ids", ValueType::Int64, &col)].into_iter());
        let expected =
            Example::from_features([("ids", Feature::int64s(vec![5, -1, 300]))]).encode_to_vec();
        assert_eq!(out, expected);
    }

    #[test]
    fn empty_lists_and_absent_features() {
        let empty = ColBuf {
            present: true,
            ..ColBuf::default()
        };
        let absent = ColBuf::default();
        for vtype in [ValueType::Int64, ValueType::Float, ValueType::Bytes] {
            let mut out = Vec::new();
            encode_example(
                &mut out,
                [("a", vtype, &empty), ("b", vtype, &absent)].into_iter(),
            );
            let decoded = Example::decode(out.as_slice()).expect("decode");
            let features = decoded.features.expect("features").feature;
            assert_eq!(features.len(), 1);
            let expected = match vtype {
                ValueType::Int64 => Feature::int64s(vec![]),
                ValueType::Float => Feature::floats(vec![]),
                ValueType::Bytes => Feature::bytes(Vec::<Vec<u8>>::new()),
            };
            assert_eq!(features.get("a"), Some(&expected));
            // Same bytes as prost for the one feature.
            assert_eq!(
                out,
                Example::from_features([("a", expected)]).encode_to_vec()
            );
        }
        let mut out = Vec::new();
        encode_example(&mut out, std::iter::empty());
        assert_eq!(out, vec![0x0a, 0x00]);
    }

    #[test]
    fn many_features() {
        let cols: Vec<ColBuf> = (0..20).map(|i| col_ints(&[i, -i, 1000 * i])).collect();
        let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        let mut out = Vec::new();
        encode_example(
            &mut out,
            names
                .iter()
                .zip(&cols)
                .map(|(n, c)| (n.as_str(), ValueType::Int64, c)),
        );
        let decoded = Example::decode(out.as_slice()).expect("decode");
        let expected = Example::from_features(
            (0..20).map(|i| (format!("f{i}"), Feature::int64s(vec![i, -i, 1000 * i]))),
        );
        assert_eq!(decoded, expected);
    }

    proptest! {
        #[test]
        fn decodes_to_the_same_values(
            ints in proptest::collection::vec(any::<i64>(), 0..40),
            floats in proptest::collection::vec(any::<f32>(), 0..40),
            strs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..10),
            name in "[a-z_]{1,140}",
        ) {
            let a = col_ints(&ints);
            let b = ColBuf { present: true, floats: floats.clone(), ..ColBuf::default() };
            let mut c = ColBuf { present: true, ..ColBuf::default() };
            for s in &strs { c.push_bytes(s); }
            let mut out = Vec::new();
            let names = [format!("{name}1"), format!("{name}2"), format!("{name}3")];
            encode_example(&mut out, [
                (names[0].as_str(), ValueType::Int64, &a),
                (names[1].as_str(), ValueType::Float, &b),
                (names[2].as_str(), ValueType::Bytes, &c),
            ].into_iter());
            let decoded = Example::decode(out.as_slice()).expect("decode");
            let expected = Example::from_features([
                (names[0].clone(), Feature::int64s(ints)),
                (names[1].clone(), Feature::floats(floats)),
                (names[2].clone(), Feature::bytes(strs)),
            ]);
            // Compare floats by bits (NaN).
            let bits = |e: &Example| {
                let mut v: Vec<_> = e.features.as_ref().map(|f| f.feature.iter().map(|(k, f)| (k.clone(), format!("{:?}", f.kind.as_ref().map(|k| match k {
                    crate::example::proto::feature::Kind::FloatList(l) => format!("{:?}", l.value.iter().map(|x| x.to_bits()).collect::<Vec<_>>()),
                    other => format!("{other:?}"),
                })))).collect()).unwrap_or_default();
                v.sort();
                v
            };
            prop_assert_eq!(bits(&decoded), bits(&expected));
        }
    }
}
