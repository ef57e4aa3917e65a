//! Parsed columns built by hand, shared by the batch tests.

use infeed::example::{Column, Values};

/// An int64 ragged column with one row per item of `rows`.
pub fn ragged<R: AsRef<[i64]>>(rows: impl IntoIterator<Item = R>) -> Column {
    let mut splits = vec![0];
    let mut values = Vec::new();
    for r in rows {
        values.extend_from_slice(r.as_ref());
        splits.push(values.len());
    }
    Column::Ragged {
        values: Values::Int64(values),
        row_splits: splits,
        inner_shape: vec![],
    }
}
