//! Direct assembly of fixed-length features (the img pipeline: raw image
//! bytes and an int64 label; ctr's: an int64 label, float and int64
//! vectors): each value is copied from the serialized record straight into
//! its row of the output tensor, with no parsed column in between (that
//! column was one more copy of every image).
//!
//! Only the plain, well-formed case is taken here: every feature of the spec
//! emitted in order, each fixed-length int64/int32 (packed or not), float32
//! (packed, as TensorFlow writes it) or bytes with a raw decode, present
//! exactly once in every record with exactly its count of values. Anything else — a missing
//! feature (default values), a duplicate key, a field the parser would have
//! to judge, a value out of range — gives `None`, and the caller takes the
//! two-step path, which gives the same batch or the exact error.

use super::dtype::TensorType;
use super::plan::{Assembler, OutKind};
use super::tensor::{Batch, Tensor};
use crate::prefetch::prefetch_ahead;
use crate::spec::{DType, FeatureSpec};

/// One protobuf field's value.
enum Val<'a> {
    Varint(u64),
    Len(&'a [u8]),
    /// A fixed32 or fixed64 (skipped).
    Fixed,
}

fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The next field of `b` at `pos`: (field number, value).
fn field<'a>(b: &'a [u8], pos: &mut usize) -> Option<(u64, Val<'a>)> {
    let key = varint(b, pos)?;
    let number = key >> 3;
    if number == 0 {
        return None;
    }
    let val = match key & 7 {
        0 => Val::Varint(varint(b, pos)?),
        2 => {
            let n = usize::try_from(varint(b, pos)?).ok()?;
            let end = pos.checked_add(n).filter(|&e| e <= b.len())?;
            let s = &b[*pos..end];
            *pos = end;
            Val::Len(s)
        }
        w @ (1 | 5) => {
            *pos = pos
                .checked_add(if w == 1 { 8 } else { 4 })
                .filter(|&e| e <= b.len())?;
            Val::Fixed
        }
        _ => return None,
    };
    Some((number, val))
}

/// What a worker writes for one output, and where.
struct Out<'s> {
    name: &'s str,
    spec: DType,
    dtype: TensorType,
    count: usize,
    /// Bytes per value of a raw decode.
    dcount: Option<usize>,
    buf: super::buffer::AlignedBuf,
    per_row: usize,
}

impl Out<'_> {
    /// Writes the `Feature` message `feature` as row `r`; `None` if it is
    /// not exactly the planned values.
    fn write(&mut self, feature: &[u8], r: usize) -> Option<()> {
        let mut pos = 0;
        let mut list = None;
        while pos < feature.len() {
            let (number, val) = field(feature, &mut pos)?;
            // bytes_list = 1, float_list = 2, int64_list = 3.
            let want = match (self.dcount, self.spec) {
                (Some(_), _) => 1,
                (None, DType::Float32) => 2,
                (None, _) => 3,
            };
            match val {
                Val::Len(s) if number == want && list.is_none() => list = Some(s),
                _ => return None,
            }
        }
        let list = list?;
        let at = r * self.per_row;
        let mut pos = 0;
        let mut n = 0;
        match self.dcount {
            None if self.spec == DType::Float32 => {
                let out = self.buf.as_mut_slice::<f32>();
                while pos < list.len() {
                    // Packed only: unpacked floats (fixed32 fields) go the
                    // general way.
                    let (1, Val::Len(packed)) = field(list, &mut pos)? else {
                        return None;
                    };
                    if packed.len() % 4 != 0 || n + packed.len() / 4 > self.count {
                        return None;
                    }
                    let row = out.get_mut(at + n..at + n + packed.len() / 4)?;
                    for (v, b) in row.iter_mut().zip(packed.chunks_exact(4)) {
                        *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    }
                    n += packed.len() / 4;
                }
            }
            Some(dcount) => {
                let out = self.buf.as_bytes_mut();
                while pos < list.len() {
                    let (1, Val::Len(bytes)) = field(list, &mut pos)? else {
                        return None;
                    };
                    if n >= self.count || bytes.len() != dcount {
                        return None;
                    }
                    let o = at + n * dcount;
                    out.get_mut(o..o + dcount)?.copy_from_slice(bytes);
                    n += 1;
                }
            }
            None => {
                let mut put = |v: u64, n: &mut usize| -> Option<()> {
                    let v = v as i64;
                    if *n >= self.count || (self.spec == DType::Int32 && i32::try_from(v).is_err())
                    {
                        return None;
                    }
                    match self.dtype {
                        TensorType::I64 => *self.buf.as_mut_slice::<i64>().get_mut(at + *n)? = v,
                        TensorType::I32 => {
                            *self.buf.as_mut_slice::<i32>().get_mut(at + *n)? =
                                i32::try_from(v).ok()?
                        }
                        _ => return None,
                    }
                    *n += 1;
                    Some(())
                };
                while pos < list.len() {
                    match field(list, &mut pos)? {
                        (1, Val::Varint(v)) => put(v, &mut n)?,
                        (1, Val::Len(packed)) => {
                            let mut p = 0;
                            while p < packed.len() {
                                put(varint(packed, &mut p)?, &mut n)?;
                            }
                        }
                        _ => return None,
                    }
                }
            }
        }
        (n == self.count).then_some(())
    }
}

impl Assembler {
    /// The batch of `records` parsed by `spec` then assembled, made in one
    /// copy per value when every output is a plain fixed-length feature (see
    /// the module docs); `None` otherwise, for the two-step path.
    pub(crate) fn assemble_dense_direct<R: AsRef<[u8]>>(
        &self,
        spec: &FeatureSpec,
        records: &[R],
    ) -> Option<Batch> {
        let batch_size = self.batch_size;
        let rows = records.len();
        let defs = spec.features();
        if rows > batch_size || defs.len() != self.outputs.len() {
            return None;
        }
        let mut outs = Vec::with_capacity(defs.len());
        for (out, def) in self.outputs.iter().zip(defs) {
            let OutKind::Dense {
                count, decode: d, ..
            } = &out.kind
            else {
                return None;
            };
            let ok = matches!(
                (def.dtype, out.dtype, d),
                (DType::Bytes, TensorType::U8, Some(_))
                    | (DType::Float32, TensorType::F32, None)
                    | (
                        DType::Int64 | DType::Int32,
                        TensorType::I64 | TensorType::I32,
                        None
                    )
            );
            if out.name != def.name || !ok {
                return None;
            }
            let dcount = d.as_ref().map(|d| d.1);
            let per_row = count.checked_mul(dcount.unwrap_or(1))?;
            let bytes = batch_size
                .checked_mul(per_row)?
                .checked_mul(out.dtype.size())?;
            outs.push(Out {
                name: &out.name,
                spec: def.dtype,
                dtype: out.dtype,
                count: *count,
                dcount,
                buf: self.pool.take_stale(bytes),
                per_row,
            });
        }
        let mut seen = vec![false; outs.len()];
        for (r, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            prefetch_ahead(records, r);
            seen.iter_mut().for_each(|s| *s = false);
            let mut pos = 0;
            let mut features_seen = false;
            while pos < rec.len() {
                // Example.features = 1, once.
                let (1, Val::Len(features)) = field(rec, &mut pos)? else {
                    return None;
                };
                if std::mem::replace(&mut features_seen, true) {
                    return None;
                }
                let mut fp = 0;
                while fp < features.len() {
                    // Features.feature = 1: map entries (key = 1, value = 2).
                    let (1, Val::Len(entry)) = field(features, &mut fp)? else {
                        return None;
                    };
                    let (mut key, mut value) = (None, None);
                    let mut ep = 0;
                    while ep < entry.len() {
                        match field(entry, &mut ep)? {
                            (1, Val::Len(k)) if key.is_none() => key = Some(k),
                            (2, Val::Len(v)) if value.is_none() => value = Some(v),
                            _ => return None,
                        }
                    }
                    let key = key?;
                    let Some(i) = outs.iter().position(|o| o.name.as_bytes() == key) else {
                        // A feature the spec does not ask for: skipped, as
                        // the parser skips it.
                        continue;
                    };
                    if std::mem::replace(&mut seen[i], true) {
                        return None;
                    }
                    outs[i].write(value?, r)?;
                }
            }
            if !seen.iter().all(|&s| s) {
                return None;
            }
        }
        let mut tensors = Vec::with_capacity(outs.len());
        for (out, o) in self.outputs.iter().zip(outs) {
            let OutKind::Dense { shape, decode, .. } = &out.kind else {
                return None;
            };
            let mut buf = o.buf;
            let size = o.dtype.size();
            buf.as_bytes_mut()
                .get_mut(rows * o.per_row * size..)?
                .fill(0);
            let mut s = Vec::with_capacity(shape.len() + 4);
            s.push(batch_size);
            s.extend_from_slice(shape);
            if let Some((d, _)) = decode {
                s.extend_from_slice(d);
            }
            tensors.push((out.name.clone(), Tensor::from_parts(o.dtype, s, buf)));
        }
        Some(Batch::new(tensors, rows))
    }
}
