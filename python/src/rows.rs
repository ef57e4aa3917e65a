//! A padded feature's rows without their padding, and back: how
//! `infeed.ray` sends padded features between an actor and its trainer.
//! Numpy's boolean indexing does both at about 5 ns an element, which was
//! most of the trainer's time for an lm batch; these copy a row at a time.
//!
//! Every array is seen as bytes (`ndarray.view(np.uint8)`): a row of `cols`
//! elements of `size` bytes is `cols * size` bytes, so one function serves
//! every dtype. The copies run without the GIL, on arrays the caller does
//! not touch meanwhile (`infeed.ray`'s own).

use numpy::{
    PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A padded feature's values without their padding (bytes), and each
/// row's length.
type Unpadded<'py> = (Bound<'py, PyArray1<u8>>, Bound<'py, PyArray1<i64>>);

/// `(values, lengths)` of a padded feature whose mask says each row is its
/// first `lengths[i]` elements then padding: the rows' first elements one
/// after another (bytes), and how many each row has. `None` when the mask
/// is not ones then zeros in every row, or a padding element is not zero:
/// such a feature is sent as it is. `one`: the bytes of 1 in the mask's
/// dtype; `size`: the bytes of one element of `values`.
#[pyfunction]
pub fn unpad_rows<'py>(
    py: Python<'py>,
    values: PyReadonlyArray2<'py, u8>,
    mask: PyReadonlyArray2<'py, u8>,
    one: &[u8],
    size: usize,
) -> PyResult<Option<Unpadded<'py>>> {
    if !values.is_c_contiguous() || !mask.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "unpad_rows: arrays must be C-contiguous",
        ));
    }
    let (rows, width) = (values.shape()[0], values.shape()[1]);
    let (mask_rows, mask_width) = (mask.shape()[0], mask.shape()[1]);
    if size == 0 || one.is_empty() || !width.is_multiple_of(size) {
        return Err(PyValueError::new_err("unpad_rows: bad element sizes"));
    }
    let cols = width / size;
    if mask_rows != rows || mask_width != cols * one.len() {
        return Err(PyValueError::new_err(
            "unpad_rows: the mask's shape is not the values'",
        ));
    }
    let (values, mask) = (values.as_slice()?, mask.as_slice()?);
    let found = py.detach(|| unpad(values, mask, one, rows, cols, size));
    Ok(found.map(|(kept, lengths)| {
        (
            PyArray1::from_vec(py, kept),
            PyArray1::from_vec(py, lengths),
        )
    }))
}

fn unpad(
    values: &[u8],
    mask: &[u8],
    one: &[u8],
    rows: usize,
    cols: usize,
    size: usize,
) -> Option<(Vec<u8>, Vec<i64>)> {
    let m = one.len();
    // Ones compared a block at a time (a memcmp), not an element at a time.
    let ones = one.repeat(64);
    let mut kept = Vec::new();
    let mut lengths = Vec::with_capacity(rows);
    for r in 0..rows {
        let mask_row = &mask[r * cols * m..(r + 1) * cols * m];
        let whole = mask_row
            .chunks_exact(ones.len())
            .take_while(|block| *block == ones.as_slice())
            .count()
            * 64;
        let len = whole
            + mask_row[whole * m..]
                .chunks_exact(m)
                .take_while(|e| *e == one)
                .count();
        let row = &values[r * cols * size..(r + 1) * cols * size];
        if !zeros(&mask_row[len * m..]) || !zeros(&row[len * size..]) {
            return None;
        }
        kept.extend_from_slice(&row[..len * size]);
        lengths.push(len as i64);
    }
    Some((kept, lengths))
}

/// Whether every byte is zero: OR-ed a block at a time, which the compiler
/// vectorizes (an early exit per byte it does not).
fn zeros(bytes: &[u8]) -> bool {
    let blocks = bytes.chunks_exact(64);
    let tail = blocks.remainder().iter().fold(0, |a, &b| a | b);
    tail == 0
        && blocks
            .into_iter()
            .all(|block| block.iter().fold(0, |a, &b| a | b) == 0)
}

/// Writes rows sent by [`unpad_rows`] into rows `at..` of `out` (bytes,
/// rows of `size`-byte elements), each row's elements from its start and
/// zeros after them: every byte of those rows. With `values` `None`, writes
/// the mask instead: `one` repeated `lengths[i]` times, then zeros.
#[pyfunction]
#[pyo3(signature = (out, at, lengths, size, values = None, one = None))]
pub fn repad_rows<'py>(
    py: Python<'py>,
    mut out: PyReadwriteArray2<'py, u8>,
    at: usize,
    lengths: PyReadonlyArray1<'py, i64>,
    size: usize,
    values: Option<PyReadonlyArray1<'py, u8>>,
    one: Option<&[u8]>,
) -> PyResult<()> {
    if !out.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "repad_rows: `out` must be C-contiguous",
        ));
    }
    let (rows, width) = (out.shape()[0], out.shape()[1]);
    let lengths = lengths.as_slice()?;
    let values = values.as_ref().map(|v| v.as_slice()).transpose()?;
    let bad = |what: &str| Err(PyValueError::new_err(format!("repad_rows: {what}")));
    if size == 0 || !width.is_multiple_of(size) {
        return bad("`out`'s rows are not whole elements");
    }
    if at.checked_add(lengths.len()).is_none_or(|end| end > rows) {
        return bad("the rows do not fit");
    }
    let mut total = 0usize;
    for &len in lengths {
        let Some(bytes) = usize::try_from(len).ok().and_then(|l| l.checked_mul(size)) else {
            return bad("a negative or absurd length");
        };
        if bytes > width {
            return bad("a row longer than the batch's");
        }
        total += bytes;
    }
    match (values, one) {
        (Some(v), _) if v.len() < total => return bad("fewer values than the lengths say"),
        (None, Some(one)) if one.len() != size => return bad("`one` is not one element"),
        (None, None) => return bad("neither values nor `one`"),
        _ => {}
    }
    let out = out.as_slice_mut()?;
    py.detach(|| {
        // A whole row of ones, so that each row of the mask is one copy.
        let ones = match values {
            Some(_) => Vec::new(),
            None => one.unwrap_or_default().repeat(width / size),
        };
        let mut from = 0;
        for (i, &len) in lengths.iter().enumerate() {
            let n = len as usize * size;
            let (row, rest) = out[(at + i) * width..][..width].split_at_mut(n);
            rest.fill(0);
            match values {
                Some(v) => {
                    row.copy_from_slice(&v[from..from + n]);
                    from += n;
                }
                None => row.copy_from_slice(&ones[..n]),
            }
        }
    });
    Ok(())
}
