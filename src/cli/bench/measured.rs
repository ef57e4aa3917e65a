//! What a bench counts and hashes in each kind of batch: raw records,
//! assembled tensors, parsed columns.

use infeed::batch::Batch;
use infeed::example::{Column, ParsedBatch, Values};
use infeed::pipeline::RawBatch;
use serde_json::{Value, json};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

/// Something a bench can hash and count.
pub(super) trait Measured {
    fn records(&self) -> usize;
    fn hash_into(&self, h: &mut Xxh3);
    /// `name → dims` of what the batch holds (`null` for a ragged dimension),
    /// so a comparison can check that two pipelines emit the same shapes.
    fn shape(&self) -> Value;
    /// A key equal for equal shapes, cheaper than [`shape`](Self::shape)
    /// (which the bench then builds once per key); `None`: build the shape
    /// of every batch.
    fn shape_key(&self) -> Option<u64> {
        None
    }
    /// Bytes of the output tensors as emitted (what a floor must count as written).
    fn output_bytes(&self) -> Option<u64> {
        None
    }
}

impl Measured for RawBatch {
    fn records(&self) -> usize {
        self.len()
    }
    fn hash_into(&self, h: &mut Xxh3) {
        for r in self.records() {
            h.update(&(r.len() as u64).to_le_bytes());
            h.update(r);
        }
    }
    fn shape(&self) -> Value {
        json!({ "records": [self.len()] })
    }
}

impl Measured for Batch {
    fn records(&self) -> usize {
        // A packed batch holds several sequences per row: count them (a
        // record split across rows counts once per piece).
        match self
            .get(infeed::batch::SEGMENT_IDS)
            .and_then(|t| Some((t.values::<i32>()?, *t.shape().get(1)?)))
        {
            Some((ids, width)) if width > 0 => ids
                .chunks(width)
                .map(|row| row.iter().copied().max().unwrap_or(0).max(0) as usize)
                .sum(),
            _ => self.real_rows,
        }
    }
    fn hash_into(&self, h: &mut Xxh3) {
        h.update(&self.digest().to_le_bytes());
    }
    fn output_bytes(&self) -> Option<u64> {
        Some(self.num_bytes() as u64)
    }
    fn shape(&self) -> Value {
        self.tensors
            .iter()
            .map(|(name, t)| (name.clone(), json!(t.shape())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
    fn shape_key(&self) -> Option<u64> {
        let mut h = Xxh3::new();
        for (name, t) in &self.tensors {
            h.update(&(name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(&(t.shape().len() as u64).to_le_bytes());
            for &d in t.shape() {
                h.update(&(d as u64).to_le_bytes());
            }
        }
        Some(h.digest())
    }
}

impl Measured for ParsedBatch {
    fn records(&self) -> usize {
        self.num_records
    }
    fn output_bytes(&self) -> Option<u64> {
        let bytes = |values: &Values| match values {
            Values::Int64(v) => std::mem::size_of_val(v.as_slice()),
            Values::Int32(v) => std::mem::size_of_val(v.as_slice()),
            Values::Float32(v) => std::mem::size_of_val(v.as_slice()),
            Values::Bytes(b) => b.data.len() + std::mem::size_of_val(b.offsets.as_slice()),
        };
        let total: usize = self
            .columns
            .iter()
            .map(|(_, column)| match column {
                Column::Dense { values, .. } => bytes(values),
                Column::Ragged {
                    values, row_splits, ..
                } => bytes(values) + std::mem::size_of_val(row_splits.as_slice()),
                Column::Ragged2 {
                    values,
                    outer_splits,
                    inner_splits,
                } => {
                    bytes(values)
                        + std::mem::size_of_val(outer_splits.as_slice())
                        + std::mem::size_of_val(inner_splits.as_slice())
                }
            })
            .sum();
        Some(total as u64)
    }
    fn hash_into(&self, h: &mut Xxh3) {
        // One-shot hashes of whole buffers, chained: xxh3's streaming update
        // copies its input through a small buffer and is several times slower.
        let mut update = |bytes: &[u8]| h.update(&xxh3_64(bytes).to_le_bytes());
        for (name, column) in &self.columns {
            update(name.as_bytes());
            let (values, splits): (&Values, Vec<&[usize]>) = match column {
                Column::Dense { values, .. } => (values, vec![]),
                Column::Ragged {
                    values, row_splits, ..
                } => (values, vec![row_splits]),
                Column::Ragged2 {
                    values,
                    outer_splits,
                    inner_splits,
                } => (values, vec![outer_splits, inner_splits]),
            };
            // Whole slices at once, in memory order (little-endian on every
            // platform we build for).
            for s in splits {
                update(bytemuck::cast_slice(s));
            }
            match values {
                Values::Int64(v) => update(bytemuck::cast_slice(v)),
                Values::Int32(v) => update(bytemuck::cast_slice(v)),
                Values::Float32(v) => update(bytemuck::cast_slice(v)),
                Values::Bytes(b) => {
                    update(bytemuck::cast_slice(&b.offsets));
                    update(&b.data);
                }
            }
        }
    }
    fn shape(&self) -> Value {
        let rows = self.num_records;
        self.columns
            .iter()
            .map(|(name, column)| {
                let dims = match column {
                    Column::Dense { shape, .. } => json!(shape),
                    Column::Ragged { inner_shape, .. } => {
                        let mut dims = vec![json!(rows), Value::Null];
                        dims.extend(inner_shape.iter().map(|d| json!(d)));
                        json!(dims)
                    }
                    Column::Ragged2 { .. } => json!([rows, null, null]),
                };
                (name.clone(), dims)
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}
