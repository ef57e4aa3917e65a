//! Protobuf wire bytes by hand, to build encodings prost never writes.

/// A base-128 varint.
pub fn varint(v: u64) -> Vec<u8> {
    let mut v = v;
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// A field key.
pub fn tag(field: u64, wire: u64) -> Vec<u8> {
    varint(field << 3 | wire)
}

/// A length-delimited field.
pub fn ld(field: u64, payload: &[u8]) -> Vec<u8> {
    [
        tag(field, 2),
        varint(payload.len() as u64),
        payload.to_vec(),
    ]
    .concat()
}

/// A map entry `key -> value` (of a `Features` or `FeatureLists` map).
pub fn entry(key: &str, value: &[u8]) -> Vec<u8> {
    ld(1, &[ld(1, key.as_bytes()), ld(2, value)].concat())
}

/// A `Feature` holding a packed `Int64List`.
pub fn ints(vals: &[i64]) -> Vec<u8> {
    let body: Vec<u8> = vals.iter().flat_map(|&v| varint(v as u64)).collect();
    ld(3, &ld(1, &body))
}
