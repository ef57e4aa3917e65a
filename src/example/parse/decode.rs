//! Decoding one `tf.train.Feature`: its list, onto a column buffer.

use super::buffers::{Buf, bytes_of};
use super::columns::BytesValues;
use super::error::ParseErrorKind;
use crate::example::wire::{
    Cursor, Span, TAG_1_FIXED32, TAG_1_LEN, TAG_1_VARINT, TAG_2_LEN, TAG_3_LEN, VarintTarget,
    WireError, decode_packed_floats, decode_packed_varints,
};
use crate::spec::{DType, WireKind};

/// What a `Feature` held.
pub(super) enum Decoded {
    /// No list set (empty oneof).
    NoList,
    /// This many values were appended.
    Values(usize),
}

fn list_kind(tag: u64) -> Option<WireKind> {
    match tag {
        TAG_1_LEN => Some(WireKind::BytesList),
        TAG_2_LEN => Some(WireKind::FloatList),
        TAG_3_LEN => Some(WireKind::Int64List),
        _ => None,
    }
}

fn list_tag(kind: WireKind) -> u64 {
    match kind {
        WireKind::BytesList => TAG_1_LEN,
        WireKind::FloatList => TAG_2_LEN,
        WireKind::Int64List => TAG_3_LEN,
    }
}

/// Decodes the `Feature` message at `span` of `rec` onto `buf` (whose dtype
/// is `dtype`). Protobuf semantics: the last list field set wins the oneof,
/// and repeated occurrences of that same field merge (concatenate).
pub(super) fn decode_feature(
    rec: &[u8],
    span: Span,
    dtype: DType,
    buf: &mut Buf,
) -> Result<Decoded, ParseErrorKind> {
    // Pass 1: which list is set, and where its final run of fields starts.
    let mut c = Cursor::over(rec, span);
    let mut kind: Option<WireKind> = None;
    let mut run_start = span.start;
    let mut fields = 0usize;
    let mut last_list = Span::default();
    while !c.at_end() {
        let field_start = c.pos();
        let tag = c.tag()?;
        fields += 1;
        match list_kind(tag) {
            Some(k) => {
                last_list = c.len_delimited()?;
                if kind != Some(k) {
                    kind = Some(k);
                    run_start = field_start;
                }
            }
            None => c.skip(tag)?,
        }
    }
    let Some(kind) = kind else {
        return Ok(Decoded::NoList);
    };
    if kind != dtype.wire_kind() {
        return Err(ParseErrorKind::TypeMismatch {
            expected: dtype,
            actual: kind,
        });
    }
    let before = buf.len();
    if fields == 1 {
        // The usual case: exactly one list field.
        decode_list(rec, last_list, buf)?;
    } else {
        let want = list_tag(kind);
        let mut c = Cursor::over(
            rec,
            Span {
                start: run_start,
                end: span.end,
            },
        );
        while !c.at_end() {
            let tag = c.tag()?;
            if tag == want {
                let list = c.len_delimited()?;
                decode_list(rec, list, buf)?;
            } else {
                c.skip(tag)?;
            }
        }
    }
    Ok(Decoded::Values(buf.len() - before))
}

/// Decodes one list message (`Int64List`, `FloatList` or `BytesList`, by the
/// type of `buf`) at `span`.
fn decode_list(rec: &[u8], span: Span, buf: &mut Buf) -> Result<(), ParseErrorKind> {
    match buf {
        Buf::I64(out) => {
            decode_int64_list(rec, span, out)?;
        }
        Buf::I32(out) => {
            if !decode_int64_list(rec, span, out)? {
                // Find the value that does not fit, for the error.
                let mut wide: Vec<i64> = Vec::new();
                decode_int64_list(rec, span, &mut wide)?;
                let value = wide
                    .into_iter()
                    .find(|&v| i32::try_from(v).is_err())
                    .unwrap_or_default();
                return Err(ParseErrorKind::Int32Overflow { value });
            }
        }
        Buf::F32(out) => decode_float_list(rec, span, out)?,
        Buf::Bytes(out) => decode_bytes_list(rec, span, out)?,
    }
    Ok(())
}

/// Returns false when a value does not fit `T`.
#[inline]
fn decode_int64_list<T: VarintTarget>(
    rec: &[u8],
    span: Span,
    out: &mut Vec<T>,
) -> Result<bool, WireError> {
    let mut fits = true;
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag == TAG_1_LEN {
            let packed = c.len_delimited()?;
            fits &= decode_packed_varints(bytes_of(rec, packed), packed.start, out)?;
        } else if tag == TAG_1_VARINT {
            let v = c.varint()?;
            fits &= T::fits(v);
            out.push(T::from_u64(v));
        } else {
            c.skip(tag)?;
        }
    }
    Ok(fits)
}

fn decode_float_list(rec: &[u8], span: Span, out: &mut Vec<f32>) -> Result<(), WireError> {
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag == TAG_1_LEN {
            let packed = c.len_delimited()?;
            decode_packed_floats(bytes_of(rec, packed), packed.start, out)?;
        } else if tag == TAG_1_FIXED32 {
            out.push(f32::from_bits(c.fixed32()?));
        } else {
            c.skip(tag)?;
        }
    }
    Ok(())
}

fn decode_bytes_list(rec: &[u8], span: Span, out: &mut BytesValues) -> Result<(), WireError> {
    let mut c = Cursor::over(rec, span);
    while !c.at_end() {
        let tag = c.tag()?;
        if tag == TAG_1_LEN {
            let v = c.len_delimited()?;
            out.push(bytes_of(rec, v));
        } else {
            c.skip(tag)?;
        }
    }
    Ok(())
}
