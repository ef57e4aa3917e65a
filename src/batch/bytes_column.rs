//! Bytes and text in batches: a [`BytesColumn`] holds one bytes value per
//! element of a static shape (rows first), end to end in one buffer with
//! offsets. It stays on the host: a device program takes numbers, so a
//! [`Batch`](super::Batch) keeps its bytes columns apart from its tensors
//! (and its [`BatchShape`](super::BatchShape), what XLA compiles for, leaves
//! them out).

use super::shape::{TensorError, checked_numel};
use crate::example::BytesValues;

/// One bytes value per element of `shape` (row-major; the first dimension
/// is the batch's rows). A padding position holds `b""`.
#[derive(Clone, Debug, PartialEq)]
pub struct BytesColumn {
    shape: Vec<usize>,
    values: BytesValues,
}

impl BytesColumn {
    /// A column over `values`, which must hold exactly one value per
    /// element of `shape`.
    pub fn new(shape: Vec<usize>, values: BytesValues) -> Result<Self, TensorError> {
        let expected = checked_numel(&shape).ok_or_else(|| TensorError::Overflow {
            shape: shape.clone(),
        })?;
        if values.len() != expected {
            return Err(TensorError::Values {
                shape,
                expected,
                actual: values.len(),
            });
        }
        Ok(Self { shape, values })
    }

    /// Built by batch assembly, which counted the values from the shape.
    pub(crate) fn from_parts(shape: Vec<usize>, values: BytesValues) -> Self {
        debug_assert_eq!(checked_numel(&shape), Some(values.len()));
        Self { shape, values }
    }

    /// The shape, rows first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of values (the product of the shape).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True for a column of no values (a shape with a 0 dimension).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Value `i`, in row-major order.
    ///
    /// # Panics
    /// When `i >= self.len()`.
    pub fn get(&self, i: usize) -> &[u8] {
        self.values.get(i)
    }

    /// The values in row-major order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.values.iter()
    }

    /// Every value end to end.
    pub fn data(&self) -> &[u8] {
        &self.values.data
    }

    /// `len() + 1` offsets into [`data`](Self::data): value `i` is
    /// `data[offsets[i]..offsets[i + 1]]`.
    pub fn offsets(&self) -> &[usize] {
        &self.values.offsets
    }

    /// Takes the column apart.
    pub fn into_parts(self) -> (Vec<usize>, BytesValues) {
        (self.shape, self.values)
    }
}

/// The column `[batch_size, ..shape]` of a fixed-length bytes feature:
/// for each real row, the `count` values of `values` from value `first`;
/// then `b""` for each value of the padding rows.
pub(super) fn fixed_column<'v>(
    rows: impl ExactSizeIterator<Item = (&'v BytesValues, usize)>,
    count: usize,
    batch_size: usize,
    shape: &[usize],
) -> BytesColumn {
    let real = rows.len();
    let mut out = BytesValues::with_capacity(batch_size * count, 0);
    for (values, first) in rows {
        for i in first..first + count {
            out.push(values.get(i));
        }
    }
    for _ in real * count..batch_size * count {
        out.push(b"");
    }
    let mut dims = Vec::with_capacity(shape.len() + 1);
    dims.push(batch_size);
    dims.extend_from_slice(shape);
    BytesColumn::from_parts(dims, out)
}

/// The column `[batch_size, len, ..step]` of a variable-length bytes
/// feature: for each real row, the values of positions `start..start + n`
/// of `values` (`step_count` values each), then `b""` to `len` positions;
/// then `b""` for the padding rows.
pub(super) fn padded_column<'v>(
    rows: impl ExactSizeIterator<Item = (&'v BytesValues, usize, usize)>,
    len: usize,
    step: &[usize],
    batch_size: usize,
) -> BytesColumn {
    let sc: usize = step.iter().product();
    let real = rows.len();
    let mut out = BytesValues::with_capacity(batch_size * len * sc, 0);
    for (values, start, n) in rows {
        for i in start * sc..(start + n) * sc {
            out.push(values.get(i));
        }
        for _ in n * sc..len * sc {
            out.push(b"");
        }
    }
    for _ in real * len * sc..batch_size * len * sc {
        out.push(b"");
    }
    let mut dims = vec![batch_size, len];
    dims.extend_from_slice(step);
    BytesColumn::from_parts(dims, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_holds_one_value_per_element() {
        let values: BytesValues = [&b"ab"[..], b"", b"c", b"def"].into_iter().collect();
        let col = BytesColumn::new(vec![2, 2], values.clone()).unwrap();
        assert_eq!(col.shape(), &[2, 2]);
        assert_eq!(col.get(3), b"def");
        assert_eq!(col.data(), b"abcdef");
        assert_eq!(col.offsets(), &[0, 2, 2, 3, 6]);
        assert_eq!(
            BytesColumn::new(vec![3], values),
            Err(TensorError::Values {
                shape: vec![3],
                expected: 3,
                actual: 4
            })
        );
    }

    #[test]
    fn padding_positions_and_rows_hold_empty_values() {
        let values: BytesValues = [&b"a"[..], b"bb", b"ccc"].into_iter().collect();
        let col = fixed_column([(&values, 1)].into_iter(), 2, 2, &[2]);
        assert_eq!(col.shape(), &[2, 2]);
        assert_eq!(
            col.iter().collect::<Vec<_>>(),
            [&b"bb"[..], b"ccc", b"", b""]
        );
        let col = padded_column([(&values, 0, 1), (&values, 1, 2)].into_iter(), 3, &[], 3);
        assert_eq!(col.shape(), &[3, 3]);
        let want: [&[u8]; 9] = [b"a", b"", b"", b"bb", b"ccc", b"", b"", b"", b""];
        assert_eq!(col.iter().collect::<Vec<_>>(), want);
    }
}
