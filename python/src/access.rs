//! Random access from Python (`infeed.grain.TFRecordSource`): records by
//! their index in a list of shards, through the shards' indexes, as bytes
//! or parsed by a spec into a dict of numpy arrays; and `build_index`.

use std::sync::Arc;

use infeed::example::{Column, ExampleParser, Values};
use infeed::index::{
    AccessOptions, BuildOptions, IndexOptions, RandomAccess, build, index_url, load_or_build, save,
};
use infeed::pipeline::PipelineError;
use infeed::spec::FeatureSpec;
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::build::feature_spec;
use crate::errors;

/// Records of shards by their index.
#[pyclass(frozen, subclass, module = "infeed._infeed")]
pub struct RecordSource {
    access: Arc<RandomAccess>,
    spec: Option<FeatureSpec>,
}

fn index_error(py: Python<'_>, e: infeed::index::IndexError) -> PyErr {
    errors::to_py(py, PipelineError::from(e))
}

#[pymethods]
impl RecordSource {
    /// The records of `files`, in order, through their indexes in
    /// `index_dir` (`None`: `.infeed-index` beside the shards, else beside
    /// each shard as versions before wrote them; a shard without one is
    /// indexed in memory, and a line on standard error says so); parsed by
    /// `spec` (the features of a description, as JSON) when given.
    #[new]
    #[pyo3(signature = (files, index_dir = None, spec = None))]
    fn new(
        py: Python<'_>,
        files: Vec<String>,
        index_dir: Option<String>,
        spec: Option<&str>,
    ) -> PyResult<Self> {
        let spec = spec.map(|s| feature_spec(py, s)).transpose()?;
        let opts = AccessOptions {
            index: IndexOptions {
                dir: index_dir,
                ..IndexOptions::default()
            },
            ..AccessOptions::default()
        };
        let access = py
            .detach(|| RandomAccess::open(&files, &opts))
            .map_err(|e| index_error(py, e))?;
        Ok(RecordSource {
            access: Arc::new(access),
            spec,
        })
    }

    fn __len__(&self) -> usize {
        self.access.len() as usize
    }

    /// The record at `i` (negative counts from the end): `get_many([i])[0]`
    /// without the list. Grain calls it once per record.
    fn __getitem__<'py>(&self, py: Python<'py>, i: i64) -> PyResult<Bound<'py, PyAny>> {
        self.get_many(py, vec![i])?.get_item(0)
    }

    /// The records at `indices`, in order (what Grain calls for a batch).
    fn __getitems__<'py>(
        &self,
        py: Python<'py>,
        indices: Vec<i64>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.get_many(py, indices)
    }

    /// The records at `indices` (negative counts from the end), in order:
    /// bytes, or with a spec dicts of numpy arrays.
    fn get_many<'py>(&self, py: Python<'py>, indices: Vec<i64>) -> PyResult<Bound<'py, PyList>> {
        let len = self.access.len();
        let mut wanted = Vec::with_capacity(indices.len());
        for &i in &indices {
            let at = if i < 0 { i + len as i64 } else { i };
            if at < 0 || at as u64 >= len {
                return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                    "record {i} is out of range: the source has {len} records"
                )));
            }
            wanted.push(at as u64);
        }
        let access = self.access.clone();
        // A few records sliced from mapped files take a microsecond or two:
        // read them holding the GIL, which costs less than handing it over
        // (Grain calls `__getitem__` from 16 threads at once).
        let quick = wanted.len() <= 16 && wanted.iter().all(|&i| access.in_memory(i));
        let records = if quick {
            access.get_many(&wanted)
        } else {
            py.detach(move || access.get_many(&wanted))
        }
        .map_err(|e| index_error(py, e))?;
        let out = PyList::empty(py);
        match &self.spec {
            None => {
                for (_, r) in &records {
                    out.append(PyBytes::new(py, &r.data))?;
                }
            }
            Some(spec) => {
                let data: Vec<&[u8]> = records.iter().map(|(_, r)| &r.data[..]).collect();
                let parsed = py
                    .detach(|| ExampleParser::new(spec).parse(&data))
                    .map_err(|e| {
                        let (shard, r) = &records[e.record.min(records.len().saturating_sub(1))];
                        let path = self
                            .access
                            .shards()
                            .nth(*shard)
                            .unwrap_or_default()
                            .to_owned();
                        errors::to_py(
                            py,
                            PipelineError::Parse {
                                path,
                                offset: r.offset,
                                at: None,
                                error: e,
                            },
                        )
                    })?;
                for row in 0..records.len() {
                    let dict = PyDict::new(py);
                    for (name, column) in &parsed.columns {
                        dict.set_item(name, row_of(py, column, row)?)?;
                    }
                    out.append(dict)?;
                }
            }
        }
        Ok(out)
    }
}

/// Row `row` of a parsed column as a numpy array (bytes: an object array
/// of `bytes`).
fn row_of<'py>(py: Python<'py>, column: &Column, row: usize) -> PyResult<Bound<'py, PyAny>> {
    let (values, range, shape) = match column {
        Column::Dense { shape, values } => {
            let per: usize = shape[1..].iter().product();
            (values, row * per..(row + 1) * per, shape[1..].to_vec())
        }
        Column::Ragged {
            values,
            row_splits,
            inner_shape,
        } => {
            let per: usize = inner_shape.iter().product::<usize>().max(1);
            let (a, b) = (row_splits[row] * per, row_splits[row + 1] * per);
            let mut shape = vec![row_splits[row + 1] - row_splits[row]];
            shape.extend_from_slice(inner_shape);
            (values, a..b, shape)
        }
        Column::Ragged2 {
            values,
            outer_splits,
            inner_splits,
        } => {
            let (a, b) = (
                inner_splits[outer_splits[row]],
                inner_splits[outer_splits[row + 1]],
            );
            (values, a..b, vec![b - a])
        }
    };
    let array = match values {
        Values::Int64(v) => PyArray1::from_slice(py, &v[range]).into_any(),
        Values::Int32(v) => PyArray1::from_slice(py, &v[range]).into_any(),
        Values::Float32(v) => PyArray1::from_slice(py, &v[range]).into_any(),
        Values::Bytes(v) => {
            let items: Vec<Bound<'py, PyBytes>> =
                range.map(|i| PyBytes::new(py, v.get(i))).collect();
            let np = py.import("numpy")?;
            let array = np.call_method1("empty", (items.len(), "object"))?;
            for (i, item) in items.into_iter().enumerate() {
                array.set_item(i, item)?;
            }
            array
        }
    };
    array.call_method1("reshape", (shape,))
}

/// Builds each shard's index and writes it to `.infeed-index` beside the
/// shard or into
/// `output` (a folder or gs://, s3://, az:// prefix); `(shard, index,
/// records)` per shard.
#[pyfunction]
#[pyo3(signature = (files, output = None, span = infeed::index::DEFAULT_SPAN))]
pub fn build_index(
    py: Python<'_>,
    files: Vec<String>,
    output: Option<String>,
    span: u64,
) -> PyResult<Vec<(String, String, u64)>> {
    if span == 0 {
        return Err(errors::spec(
            py,
            "build_index: span 0: at least 1 byte".into(),
        ));
    }
    let opts = BuildOptions {
        span,
        ..BuildOptions::default()
    };
    py.detach(|| {
        files
            .iter()
            .map(|shard| {
                let idx = build(shard, &opts)?;
                let index = index_url(shard, output.as_deref());
                save(&idx, &index, &Default::default())?;
                Ok((shard.clone(), index, idx.len()))
            })
            .collect::<Result<Vec<_>, infeed::index::IndexError>>()
    })
    .map_err(|e| index_error(py, e))
}

/// The record index in its file of each `(file, offset)` position (as a
/// batch's positions name them), from each file's index (in `.infeed-index`
/// beside it, or beside it as versions before wrote it, or in
/// `index_dir`; built in memory by reading the file where there is none);
/// `None` for a position no record starts at.
#[pyfunction]
#[pyo3(signature = (positions, index_dir = None))]
pub fn record_indexes(
    py: Python<'_>,
    positions: Vec<(String, u64)>,
    index_dir: Option<String>,
) -> PyResult<Vec<Option<u64>>> {
    let mut files: Vec<String> = positions.iter().map(|(f, _)| f.clone()).collect();
    files.sort();
    files.dedup();
    let opts = IndexOptions {
        dir: index_dir,
        build: BuildOptions::default(),
    };
    let indexes = py
        .detach(|| load_or_build(&files, &opts))
        .map_err(|e| index_error(py, e))?;
    Ok(positions
        .iter()
        .map(|(file, offset)| {
            let at = files.binary_search(file).ok()?;
            indexes[at].0.record_at(*offset)
        })
        .collect())
}
