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
