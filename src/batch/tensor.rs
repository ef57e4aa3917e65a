//! Tensors and batches: contiguous row-major data in aligned buffers.

use std::fmt;
use std::ops::Index;

use xxhash_rust::xxh3::Xxh3Default;

use super::buffer::{AlignedBuf, BufferPool};
use super::bytes_column::BytesColumn;
use super::dtype::{Element, TensorType};
use super::provenance::{Provenance, RecordPosition};
use super::shape::{BatchShape, TensorError, TensorShape, checked_numel};

/// A dense tensor: `shape.product()` elements of `dtype`, row-major, in one
/// 64-byte aligned buffer (so it can be handed to a device without a copy).
#[derive(Clone, PartialEq)]
pub struct Tensor {
    dtype: TensorType,
    shape: Vec<usize>,
    data: AlignedBuf,
}

impl Tensor {
    /// A tensor over `data`, which must hold exactly the bytes the shape needs.
    pub fn new(
        dtype: TensorType,
        shape: Vec<usize>,
        data: AlignedBuf,
    ) -> Result<Self, TensorError> {
        let expected = checked_numel(&shape)
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| TensorError::Overflow {
                shape: shape.clone(),
            })?;
        if data.len() != expected {
            return Err(TensorError::Length {
                dtype,
                shape,
                expected,
                actual: data.len(),
            });
        }
        Ok(Self { dtype, shape, data })
    }

    /// An unpooled tensor holding a copy of `values`.
    pub fn from_slice<T: Element>(shape: &[usize], values: &[T]) -> Result<Self, TensorError> {
        Self::new(T::DTYPE, shape.to_vec(), AlignedBuf::from_slice(values))
    }

    /// A tensor of zeros from `pool`.
    pub fn zeros(
        dtype: TensorType,
        shape: &[usize],
        pool: &BufferPool,
    ) -> Result<Self, TensorError> {
        let bytes = checked_numel(shape)
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| TensorError::Overflow {
                shape: shape.to_vec(),
            })?;
        Self::new(dtype, shape.to_vec(), pool.take_zeroed(bytes))
    }

    /// Builds a tensor whose buffer length was computed from its shape by the
    /// caller (crate-internal: batch assembly).
    pub(crate) fn from_parts(dtype: TensorType, shape: Vec<usize>, data: AlignedBuf) -> Self {
        debug_assert_eq!(
            checked_numel(&shape).map(|n| n * dtype.size()),
            Some(data.len())
        );
        Self { dtype, shape, data }
    }

    /// The element type.
    pub fn dtype(&self) -> TensorType {
        self.dtype
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn num_elements(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// The buffer (for its pointer, see [`AlignedBuf::as_ptr`]).
    pub fn data(&self) -> &AlignedBuf {
        &self.data
    }

    /// The raw bytes, native byte order.
    pub fn bytes(&self) -> &[u8] {
        self.data.as_bytes()
    }

    /// The elements, when `T` is this tensor's element type.
    pub fn values<T: Element>(&self) -> Option<&[T]> {
        (T::DTYPE == self.dtype).then(|| self.data.as_slice::<T>())
    }

    /// The elements for writing, when `T` is this tensor's element type.
    pub fn values_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        (T::DTYPE == self.dtype).then(|| self.data.as_mut_slice::<T>())
    }

    /// Takes the tensor apart.
    pub fn into_parts(self) -> (TensorType, Vec<usize>, AlignedBuf) {
        (self.dtype, self.shape, self.data)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Tensor");
        s.field("dtype", &self.dtype).field("shape", &self.shape);
        match self.dtype {
            TensorType::I64 => s.field("values", &self.data.as_slice::<i64>()),
            TensorType::I32 => s.field("values", &self.data.as_slice::<i32>()),
            TensorType::F32 => s.field("values", &self.data.as_slice::<f32>()),
            TensorType::U8 => s.field("values", &self.data.as_slice::<u8>()),
            TensorType::BF16 => s.field("values", &self.data.as_slice::<super::dtype::Bf16>()),
        };
        s.finish()
    }
}

/// A batch of named tensors with a common leading (row) dimension.
///
/// Rows at index `real_rows` and beyond are padding rows (a short last batch,
/// or a host that ran out of data): their masks are all 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// `(name, tensor)` in output order.
    pub tensors: Vec<(String, Tensor)>,
    /// Rows that hold data; the rest are padding.
    pub real_rows: usize,
    /// `(name, column)` of the bytes and text features, in output order:
    /// host data, apart from the tensors a device program takes.
    pub bytes: Vec<(String, BytesColumn)>,
    /// The records of each row (a pipeline's batches; empty otherwise):
    /// see [`positions`](Self::positions).
    pub provenance: Provenance,
}

impl Batch {
    /// A batch of `tensors` with no bytes columns.
    pub fn new(tensors: Vec<(String, Tensor)>, real_rows: usize) -> Self {
        Self {
            tensors,
            real_rows,
            bytes: Vec::new(),
            provenance: Provenance::default(),
        }
    }

    /// For each row, the (file, byte offset) of the records it holds: one
    /// for a row of a record, the sequences of a packed row (a sequence cut
    /// over rows in each), none for a padding row.
    pub fn positions(&self) -> Vec<Vec<RecordPosition<'_>>> {
        self.provenance.rows(self.rows())
    }

    /// The bytes column called `name`.
    pub fn get_bytes(&self, name: &str) -> Option<&BytesColumn> {
        self.bytes.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// The tensor called `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// Number of rows (the leading dimension; 0 for a batch with no tensors).
    pub fn rows(&self) -> usize {
        self.tensors
            .first()
            .and_then(|(_, t)| t.shape().first().copied())
            .unwrap_or(0)
    }

    /// Total bytes of tensor data and bytes columns' values.
    pub fn num_bytes(&self) -> usize {
        let tensors: usize = self.tensors.iter().map(|(_, t)| t.bytes().len()).sum();
        tensors
            + self
                .bytes
                .iter()
                .map(|(_, c)| c.data().len())
                .sum::<usize>()
    }

    /// Names, types and shapes of the tensors, in order (bytes columns are
    /// not part of what a device program is compiled for).
    pub fn shape(&self) -> BatchShape {
        BatchShape {
            tensors: self
                .tensors
                .iter()
                .map(|(name, t)| TensorShape {
                    name: name.clone(),
                    dtype: t.dtype(),
                    shape: t.shape().to_vec(),
                })
                .collect(),
        }
    }

    /// A stable 64-bit hash of the batch (XXH3-64, seed 0) for comparing runs.
    ///
    /// Hashed, in order, with every integer as 8 little-endian bytes: the
    /// number of tensors; for each tensor its name's length and bytes, its
    /// type as one byte (i64 0, i32 1, f32 2, u8 3, bf16 4), its rank, each dimension,
    /// its byte length and its bytes (little-endian elements); then
    /// `real_rows`; then, only when the batch has bytes columns, their
    /// number and for each its name's length and bytes, its rank, each
    /// dimension, and each value's length and bytes. The encoding is fixed:
    /// a change would be a new digest.
    pub fn digest(&self) -> u64 {
        let mut h = Xxh3Default::new();
        let word = |h: &mut Xxh3Default, v: usize| h.update(&(v as u64).to_le_bytes());
        word(&mut h, self.tensors.len());
        for (name, t) in &self.tensors {
            word(&mut h, name.len());
            h.update(name.as_bytes());
            h.update(&[t.dtype().code()]);
            word(&mut h, t.shape().len());
            for &d in t.shape() {
                word(&mut h, d);
            }
            word(&mut h, t.bytes().len());
            if cfg!(target_endian = "little") {
                h.update(t.bytes());
            } else {
                hash_le(&mut h, t);
            }
        }
        word(&mut h, self.real_rows);
        if !self.bytes.is_empty() {
            word(&mut h, self.bytes.len());
            for (name, c) in &self.bytes {
                word(&mut h, name.len());
                h.update(name.as_bytes());
                word(&mut h, c.shape().len());
                for &d in c.shape() {
                    word(&mut h, d);
                }
                for v in c.iter() {
                    word(&mut h, v.len());
                    h.update(v);
                }
            }
        }
        h.digest()
    }
}

/// Hashes a tensor's elements as little-endian bytes (big-endian hosts).
fn hash_le(h: &mut Xxh3Default, t: &Tensor) {
    let size = t.dtype().size();
    let mut chunk = [0u8; 4096];
    for block in t.bytes().chunks(4096) {
        let out = &mut chunk[..block.len()];
        for (o, e) in out.chunks_mut(size).zip(block.chunks(size)) {
            for (d, s) in o.iter_mut().zip(e.iter().rev()) {
                *d = *s;
            }
        }
        h.update(out);
    }
}

impl Index<&str> for Batch {
    type Output = Tensor;

    /// The tensor called `name`.
    ///
    /// # Panics
    /// When there is none (use [`Batch::get`] to ask).
    fn index(&self, name: &str) -> &Tensor {
        self.get(name)
            .unwrap_or_else(|| panic!("batch has no tensor {name:?}"))
    }
}
