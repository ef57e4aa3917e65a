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
//!
//! Records written by one writer mostly share a layout: the same keys in
//! the same order, the same lengths, values in the same places. After one
//! record is walked field by field, a record of the same length whose bytes
//! outside the values it wrote (tags, lengths, keys, features not asked
//! for) are the walked record's is read by [`Layout::replay`] straight from
//! those places. Only the values' bytes were free to differ, and none of them
//! moves the walk: a bytes or float value is taken whole, a packed run of
//! varints is bounded by its length, and an unpacked varint must end where
//! the walked one ended. So the walk over such a record would take every
//! branch it took before, and replaying it writes what the walk would (the
//! same counts and range checks are made). The walk cost img ~80 ns a
//! record pinned; a replay is a compare of ~40 bytes.

use super::dtype::TensorType;
use super::plan::{Assembler, OutKind};
use super::tensor::{Batch, Tensor};
use crate::prefetch::{WHOLE_RECORD_BYTES, prefetch_ahead};
use crate::spec::{DType, FeatureSpec};

/// One protobuf field's value.
enum Val<'a> {
    /// A varint: where its bytes start in the field's buffer (they end
    /// where the field does; [`Out::put`] decodes them).
    Varint(usize),
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
        0 => {
            let start = *pos;
            varint(b, pos)?;
            Val::Varint(start)
        }
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

/// How a value's bytes are written ([`Out::put`]).
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// One bytes value of a raw decode.
    Bytes,
    /// A packed run of little-endian float32s.
    Floats,
    /// A packed run of varints.
    Packed,
    /// One unpacked varint.
    Varint,
}

/// A value of a walked record: output `out`'s bytes at `start..end` of it.
#[derive(Clone, Copy, Debug)]
struct Piece {
    out: usize,
    start: usize,
    end: usize,
    kind: Kind,
}

/// Where `inner`, a slice of `outer`, starts in it.
fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

impl Out<'_> {
    /// Writes the `Feature` message `feature`, at `base` in its record, as
    /// row `r` of output `out`, noting where each value lay in `pieces`;
    /// `None` if it is not exactly the planned values.
    fn write(
        &mut self,
        feature: &[u8],
        base: usize,
        r: usize,
        out: usize,
        pieces: &mut Vec<Piece>,
    ) -> Option<()> {
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
        let list_at = base + offset_in(feature, list);
        let mut pos = 0;
        let mut n = 0;
        while pos < list.len() {
            let (number, val) = field(list, &mut pos)?;
            let (kind, value) = match (number, val, self.dcount, self.spec) {
                (1, Val::Len(bytes), Some(_), _) => (Kind::Bytes, bytes),
                // Packed only: unpacked floats (fixed32 fields) go the
                // general way.
                (1, Val::Len(packed), None, DType::Float32) => (Kind::Floats, packed),
                (_, _, None, DType::Float32) | (_, _, Some(_), _) => return None,
                (1, Val::Len(packed), None, _) => (Kind::Packed, packed),
                (1, Val::Varint(start), None, _) => (Kind::Varint, &list[start..pos]),
                _ => return None,
            };
            self.put(kind, value, r, &mut n)?;
            let start = list_at + offset_in(list, value);
            pieces.push(Piece {
                out,
                start,
                end: start + value.len(),
                kind,
            });
        }
        (n == self.count).then_some(())
    }

    /// Writes `value`, a value of `kind`, to row `r` after the `n` values
    /// it has; `None` if it does not fit the row or the type.
    fn put(&mut self, kind: Kind, value: &[u8], r: usize, n: &mut usize) -> Option<()> {
        let at = r * self.per_row;
        match kind {
            Kind::Bytes => {
                let dcount = self.dcount?;
                if *n >= self.count || value.len() != dcount {
                    return None;
                }
                let o = at + *n * dcount;
                self.buf
                    .as_bytes_mut()
                    .get_mut(o..o + dcount)?
                    .copy_from_slice(value);
                *n += 1;
            }
            Kind::Floats => {
                let k = value.len() / 4;
                if !value.len().is_multiple_of(4) || *n + k > self.count {
                    return None;
                }
                let row = self
                    .buf
                    .as_mut_slice::<f32>()
                    .get_mut(at + *n..at + *n + k)?;
                for (v, b) in row.iter_mut().zip(value.chunks_exact(4)) {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
                *n += k;
            }
            Kind::Packed => {
                let mut p = 0;
                while p < value.len() {
                    self.put_int(varint(value, &mut p)?, at, n)?;
                }
            }
            Kind::Varint => {
                // It must end where the walked one ended: a replayed
                // record's varint is one only then.
                let mut p = 0;
                let v = varint(value, &mut p)?;
                if p != value.len() {
                    return None;
                }
                self.put_int(v, at, n)?;
            }
        }
        Some(())
    }

    /// Writes the integer `v` at `at + n` (row start `at`).
    fn put_int(&mut self, v: u64, at: usize, n: &mut usize) -> Option<()> {
        let v = v as i64;
        if *n >= self.count || (self.spec == DType::Int32 && i32::try_from(v).is_err()) {
            return None;
        }
        match self.dtype {
            TensorType::I64 => *self.buf.as_mut_slice::<i64>().get_mut(at + *n)? = v,
            TensorType::I32 => {
                *self.buf.as_mut_slice::<i32>().get_mut(at + *n)? = i32::try_from(v).ok()?
            }
            _ => return None,
        }
        *n += 1;
        Some(())
    }
}

/// Writes record `rec` as row `r`, walking its fields; `pieces` gets where
/// its values lay. `None` if it is not exactly the planned values.
fn walk(
    rec: &[u8],
    outs: &mut [Out],
    seen: &mut [bool],
    r: usize,
    pieces: &mut Vec<Piece>,
) -> Option<()> {
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
                // A feature the spec does not ask for: skipped, as the
                // parser skips it.
                continue;
            };
            if std::mem::replace(&mut seen[i], true) {
                return None;
            }
            let value = value?;
            outs[i].write(value, offset_in(rec, value), r, i, pieces)?;
        }
    }
    seen.iter().all(|&s| s).then_some(())
}

/// The places of the values of the record walked last (see the module
/// docs), which a record of the same layout is read by.
struct Layout<'r> {
    /// The record walked last; none yet.
    template: Option<&'r [u8]>,
    pieces: Vec<Piece>,
    /// Per output, the values a replay wrote.
    counts: Vec<usize>,
}

impl<'r> Layout<'r> {
    fn new(outputs: usize) -> Self {
        Layout {
            template: None,
            pieces: Vec::new(),
            counts: vec![0; outputs],
        }
    }

    /// Writes `rec` as row `r`, by the template's layout if it has it, else
    /// by walking it and keeping its layout. `None` if it is not exactly
    /// the planned values.
    fn write(
        &mut self,
        rec: &'r [u8],
        outs: &mut [Out],
        seen: &mut [bool],
        r: usize,
    ) -> Option<()> {
        if self.replay(rec, outs, r) {
            return Some(());
        }
        self.pieces.clear();
        walk(rec, outs, seen, r, &mut self.pieces)?;
        self.template = Some(rec);
        Some(())
    }

    /// Writes `rec` as row `r` by the template's layout, if it has it:
    /// false (having written part of the row, perhaps) if not.
    fn replay(&mut self, rec: &[u8], outs: &mut [Out], r: usize) -> bool {
        let Some(template) = self.template.filter(|t| t.len() == rec.len()) else {
            return false;
        };
        let mut at = 0;
        for p in &self.pieces {
            if rec[at..p.start] != template[at..p.start] {
                return false;
            }
            at = p.end;
        }
        if rec[at..] != template[at..] {
            return false;
        }
        self.counts.iter_mut().for_each(|c| *c = 0);
        for p in &self.pieces {
            if outs[p.out]
                .put(p.kind, &rec[p.start..p.end], r, &mut self.counts[p.out])
                .is_none()
            {
                return false;
            }
        }
        outs.iter().zip(&self.counts).all(|(o, &n)| n == o.count)
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
        let mut layout = Layout::new(outs.len());
        for (r, rec) in records.iter().enumerate() {
            prefetch_ahead(records, r, WHOLE_RECORD_BYTES);
            layout.write(rec.as_ref(), &mut outs, &mut seen, r)?;
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::batch::plan::BatchPlan;
    use crate::example::ExampleParser;

    fn varint_bytes(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    /// A length-delimited field: `tag`, the length, `body`.
    fn ld(tag: u8, body: &[u8]) -> Vec<u8> {
        [&[tag][..], &varint_bytes(body.len() as u64), body].concat()
    }

    /// How a test record writes its label.
    #[derive(Clone, Copy, Debug)]
    enum LabelForm {
        Packed,
        /// One `0x08` field per value.
        Unpacked,
    }

    /// An img-like record (a raw image, an int64 label, two int64 ids, two
    /// floats, perhaps a feature no spec asks for), its map entries in
    /// `order`. Floats `packed` or as fixed32 fields.
    #[derive(Clone, Debug)]
    struct Rec {
        image: Vec<u8>,
        label: i64,
        form: LabelForm,
        ids: [i64; 2],
        floats: [u32; 2],
        packed_floats: bool,
        extra: bool,
        label_first: bool,
    }

    impl Rec {
        fn encode(&self) -> Vec<u8> {
            let image = ld(0x0a, &ld(0x0a, &self.image));
            let label = match self.form {
                LabelForm::Packed => ld(0x1a, &ld(0x0a, &varint_bytes(self.label as u64))),
                LabelForm::Unpacked => ld(
                    0x1a,
                    &[&[0x08][..], &varint_bytes(self.label as u64)].concat(),
                ),
            };
            let ids: Vec<u8> = self
                .ids
                .iter()
                .flat_map(|&v| varint_bytes(v as u64))
                .collect();
            let ids = ld(0x1a, &ld(0x0a, &ids));
            let floats = if self.packed_floats {
                let b: Vec<u8> = self.floats.iter().flat_map(|f| f.to_le_bytes()).collect();
                ld(0x12, &ld(0x0a, &b))
            } else {
                let b: Vec<u8> = (self.floats.iter())
                    .flat_map(|f| [&[0x0d][..], &f.to_le_bytes()].concat())
                    .collect();
                ld(0x12, &b)
            };
            let entry = |key: &str, feature: &[u8]| {
                ld(
                    0x0a,
                    &[ld(0x0a, key.as_bytes()), ld(0x12, feature)].concat(),
                )
            };
            let mut entries = vec![entry("image", &image), entry("label", &label)];
            if self.label_first {
                entries.swap(0, 1);
            }
            entries.push(entry("ids", &ids));
            entries.push(entry("dense", &floats));
            if self.extra {
                entries.insert(1, entry("blob", &ld(0x0a, &ld(0x0a, b"not asked for"))));
            }
            ld(0x0a, &entries.concat())
        }
    }

    fn rec() -> impl Strategy<Value = Rec> {
        // Mostly one layout, so most records replay the one walked before.
        let image = prop_oneof![
            12 => proptest::collection::vec(any::<u8>(), 12),
            1 => proptest::collection::vec(any::<u8>(), 11),
        ];
        let label = prop_oneof![
            8 => 0i64..128,
            2 => 128i64..20_000,
            1 => any::<i64>(),
        ];
        let form = prop_oneof![4 => Just(LabelForm::Packed), 1 => Just(LabelForm::Unpacked)];
        let id = prop_oneof![4 => 0i64..100, 1 => any::<i64>()];
        (image, label, form, [id.clone(), id], any::<[u32; 2]>())
            .prop_flat_map(|(image, label, form, ids, floats)| {
                (
                    Just((image, label, form, ids, floats)),
                    proptest::bool::weighted(0.95),
                    proptest::bool::weighted(0.1),
                    proptest::bool::weighted(0.1),
                )
            })
            .prop_map(
                |((image, label, form, ids, floats), packed_floats, extra, label_first)| Rec {
                    image,
                    label,
                    form,
                    ids,
                    floats,
                    packed_floats,
                    extra,
                    label_first,
                },
            )
    }

    fn bytes_of(b: &Batch) -> Vec<(String, Vec<usize>, Vec<u8>)> {
        (b.tensors.iter())
            .map(|(n, t)| (n.clone(), t.shape().to_vec(), t.bytes().to_vec()))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Records read by a replayed layout give exactly the two-step
        /// batch; a batch the two-step path fails on is declined; and one
        /// of plain records (packed floats) the two-step path takes is
        /// taken.
        #[test]
        fn replayed_layouts_match_two_step(
            rows in proptest::collection::vec(rec(), 0..12),
            label_i32 in proptest::bool::weighted(0.3),
        ) {
            let label = if label_i32 { DType::Int32 } else { DType::Int64 };
            let spec = FeatureSpec::new()
                .fixed_len("image", DType::Bytes, &[])
                .fixed_len("label", label, &[])
                .fixed_len("ids", DType::Int64, &[2])
                .fixed_len("dense", DType::Float32, &[2]);
            let a = BatchPlan::new(&spec, 12).decode_raw("image", &[2, 2, 3]).build().unwrap();
            let records: Vec<Vec<u8>> = rows.iter().map(Rec::encode).collect();
            let want = ExampleParser::new(&spec)
                .parse(&records)
                .map_err(|e| e.to_string())
                .and_then(|p| a.assemble(&p).map_err(|e| e.to_string()));
            let got = a.assemble_dense_direct(&spec, &records);
            let plain = rows.iter().all(|r| r.packed_floats);
            match (&want, got) {
                (Ok(w), Some(g)) => {
                    prop_assert_eq!(bytes_of(w), bytes_of(&g));
                    prop_assert_eq!(w.real_rows, g.real_rows);
                }
                (Ok(_), None) => prop_assert!(!plain, "declined a plain batch"),
                (Err(e), Some(_)) => prop_assert!(false, "hid the error {}", e),
                (Err(_), None) => {}
            }
        }
    }

    /// A record whose unpacked varints split its bytes differently is not
    /// replayed by the layout of one of the same length: its values are the
    /// walk's. One with every compared byte equal but a varint that ends
    /// early is caught by the varint-end check alone (the second half).
    #[test]
    fn a_varint_that_ends_elsewhere_is_walked() {
        let spec = FeatureSpec::new().fixed_len("ids", DType::Int64, &[2]);
        let a = BatchPlan::new(&spec, 2).build().unwrap();
        // ids [1, 300] and [300, 1], each as two 0x08 fields: the same
        // length, but the second tag moves (a byte the replay compares),
        // so the second record is walked.
        let record = |values: [u64; 2]| {
            let list: Vec<u8> = (values.iter())
                .flat_map(|&v| [&[0x08][..], &varint_bytes(v)].concat())
                .collect();
            let entry = ld(
                0x0a,
                &[ld(0x0a, b"ids"), ld(0x12, &ld(0x1a, &list))].concat(),
            );
            ld(0x0a, &entry)
        };
        let records = [record([1, 300]), record([300, 1])];
        assert_eq!(records[0].len(), records[1].len());
        let got = a.assemble_dense_direct(&spec, &records).unwrap();
        let ids = &got.tensors[0].1;
        assert_eq!(ids.shape(), [2, 2]);
        let want: Vec<u8> = [1i64, 300, 300, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(ids.bytes(), &want[..]);
        // The same tags at the same places, but the second varint ends a
        // byte early, and the byte after it is no field (number 0): the
        // parser's error, so the batch is declined, not read as [1, 5].
        let mut bad = records[0].clone();
        let at = bad.len() - 2;
        bad[at..].copy_from_slice(&[0x05, 0x02]);
        let records = [records[0].clone(), bad];
        assert!(ExampleParser::new(&spec).parse(&records).is_err());
        assert!(a.assemble_dense_direct(&spec, &records).is_none());
    }

    /// A packed run of the walked record's length may hold fewer values:
    /// the count is checked on a replay as on the walk.
    #[test]
    fn a_packed_run_with_fewer_values_is_declined() {
        let spec = FeatureSpec::new().fixed_len("ids", DType::Int64, &[2]);
        let a = BatchPlan::new(&spec, 2).build().unwrap();
        let record = |run: &[u8]| {
            let entry = ld(
                0x0a,
                &[ld(0x0a, b"ids"), ld(0x12, &ld(0x1a, &ld(0x0a, run)))].concat(),
            );
            ld(0x0a, &entry)
        };
        // [1, 300], then one value in as many bytes.
        let records = [record(&[0x01, 0xac, 0x02]), record(&[0xac, 0xac, 0x02])];
        assert!(ExampleParser::new(&spec).parse(&records).is_err());
        assert!(a.assemble_dense_direct(&spec, &records).is_none());
    }
}
