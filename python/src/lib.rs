//! `infeed._infeed`: the Rust half of the Python package.
//!
//! The Python side (`infeed/pipeline.py`) keeps a pipeline as the engine's
//! description (`infeed::pipeline::Description`, plain data); this module
//! reads it, as JSON, into a
//! [`ParsedPipeline`](infeed::pipeline::ParsedPipeline) (`build.rs`), runs
//! it without the GIL and hands out each batch as numpy arrays over the
//! pipeline's pooled buffers (`batches.rs`). Errors become the exceptions of
//! `infeed.errors` with their fields (`errors.rs`).

mod access;
mod batches;
mod build;
mod errors;
mod rows;
#[cfg(feature = "beam")]
mod writer;

use infeed::pipeline::Listed;
use pyo3::prelude::*;

/// The files a glob matches (local paths or gs://, s3://, az:// URLs), sorted.
#[pyfunction]
fn list_files(py: Python<'_>, pattern: &str) -> PyResult<Vec<String>> {
    py.detach(|| infeed::pipeline::Pipeline::from_glob(pattern))
        .map(|p| p.files().to_vec())
        .map_err(|e| errors::to_py(py, e))
}

/// The files a TFDS split string selects in the dataset directory `dir`,
/// in reading order.
#[pyfunction]
fn tfds_files(py: Python<'_>, dir: &str, split: &str) -> PyResult<Vec<String>> {
    py.detach(|| infeed::pipeline::Pipeline::from_tfds(dir, split))
        .map(|p| p.files().to_vec())
        .map_err(|e| errors::to_py(py, e))
}

/// A feature as the Python spec classes give it: `(name, kind, dtype,
/// shape, default)` (an image's dtype slot holds its text form).
type SpecEntry = (String, &'static str, String, Vec<usize>, Option<Vec<i64>>);

/// The spec of a TFDS dataset's own features (features.json), as entries,
/// each with the TFDS feature it comes from (`Text`, `Image`, …).
#[pyfunction]
fn tfds_spec(py: Python<'_>, dir: &str) -> PyResult<Vec<(SpecEntry, String)>> {
    let features = py
        .detach(|| infeed::tfds::TfdsDataset::open(dir).and_then(|d| d.features()))
        .map_err(|e| errors::to_py(py, e.into()))?;
    Ok(features
        .into_iter()
        .map(|f| {
            let dtype = match f.dtype {
                infeed::spec::DType::Int64 => "int64",
                infeed::spec::DType::Int32 => "int32",
                infeed::spec::DType::Float32 => "float32",
                infeed::spec::DType::Bytes => "bytes",
            };
            // An image's text form rides in the dtype slot, as infeed.Image writes it.
            let entry = match (f.image, f.fixed_shape()) {
                (Some([h, w, c]), _) => {
                    let text = format!("image[{h},{w},{c}]:fixed");
                    (f.name, "image", text, Vec::new(), None)
                }
                (None, Some(shape)) => (f.name, "fixed_len", dtype.into(), shape, None),
                (None, None) => (f.name, "var_len", dtype.into(), Vec::new(), None),
            };
            (entry, f.tfds_type)
        })
        .collect())
}

/// The description in `json`, checked, with its defaults filled in (JSON);
/// an error names the place of a bad value.
#[pyfunction]
fn describe(py: Python<'_>, json: &str) -> PyResult<String> {
    Ok(build::description(py, json)?.to_json())
}

/// The files the description's pipeline reads, before host sharding (a
/// glob listed, a TFDS split read), and each glob's files (what its runs
/// take as `listed`, so as to list none again).
#[pyfunction]
fn files_of(py: Python<'_>, json: &str) -> PyResult<(Vec<String>, Listed)> {
    let mut d = build::description(py, json)?;
    // Its record-level part: the files come from there.
    d.parse = None;
    d.batches.clear();
    py.detach(|| infeed::pipeline::Pipeline::from_description(&d))
        .map(|p| (p.files().to_vec(), p.listed()))
        .map_err(|e| errors::to_py(py, e))
}

/// One tensor of a batch shape: `(name, numpy dtype name, shape)`.
type TensorShape = (String, &'static str, Vec<usize>);

/// Every batch shape the described pipeline can emit: a list of lists of
/// `(name, dtype, shape)`.
#[pyfunction]
#[pyo3(signature = (description, listed = None))]
fn shapes(
    py: Python<'_>,
    description: &str,
    listed: Option<Listed>,
) -> PyResult<Vec<Vec<TensorShape>>> {
    let pipeline = build::build(py, description, None, listed)?;
    let shapes = py
        .detach(|| pipeline.shapes())
        .map_err(|e| errors::to_py(py, e))?;
    Ok(shapes
        .into_iter()
        .map(|shape| {
            shape
                .tensors
                .into_iter()
                .map(|t| (t.name, batches::numpy_dtype(t.dtype), t.shape))
                .collect()
        })
        .collect())
}

/// What limits a pipeline over a stretch (the engine's rule): its word
/// (`consumer`, a stage's name, `unclear`, `unknown`), the busiest stage
/// (when a stage is named or unclear) and the share behind it, from the
/// stretch's seconds, batches, the consumer's wait and each stage's
/// (busy, wait), in `read`, `records`, `batch` order.
#[pyfunction]
fn limit_of(
    seconds: f64,
    batches: u64,
    consumer_wait: f64,
    stages: [(f64, f64); 3],
) -> (&'static str, Option<&'static str>, Option<f64>) {
    use infeed::pipeline::bottleneck::{Bottleneck, StageTime};
    let limit = Bottleneck::of(
        seconds,
        batches,
        consumer_wait,
        stages.map(|(busy, wait)| StageTime { busy, wait }),
    );
    let (stage, share) = match &limit {
        Bottleneck::Consumer { wait_share } => (None, Some(*wait_share)),
        Bottleneck::Stage { name, busy_share } => (Some(*name), Some(*busy_share)),
        Bottleneck::Unclear { best } => (best.map(|(n, _)| n), best.map(|(_, s)| s)),
        Bottleneck::Unknown => (None, None),
    };
    (limit.word(), stage, share)
}

/// The records of the global steps `wanted` (`Pipeline.records_of`): per
/// step, per global row, the `(file, offset)` of its records.
#[pyfunction]
#[pyo3(signature = (description, wanted, state = None, listed = None))]
fn records_of(
    py: Python<'_>,
    description: &str,
    wanted: Vec<u64>,
    state: Option<Vec<u8>>,
    listed: Option<Listed>,
) -> PyResult<std::collections::BTreeMap<u64, Vec<infeed::pipeline::RowRecords>>> {
    let pipeline = build::build(py, description, state.as_deref(), listed)?;
    py.detach(|| pipeline.records_of(&wanted))
        .map_err(|e| errors::to_py(py, e))
}

/// The states of several hosts of one job, taken at the same step, merged
/// into one that any host of the job on another host count restores from
/// (`Pipeline.streams`). `ended[i]`: every stream of state `i`'s host has
/// ended, so its state of an earlier step stands for this one.
#[pyfunction]
#[pyo3(signature = (states, ended = None))]
fn merge_states(
    py: Python<'_>,
    states: Vec<Vec<u8>>,
    ended: Option<Vec<bool>>,
) -> PyResult<Vec<u8>> {
    let parts: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
    let ended = ended.unwrap_or_else(|| vec![false; parts.len()]);
    if ended.len() != parts.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "merge_states: {} states and {} ended flags",
            parts.len(),
            ended.len()
        )));
    }
    infeed::pipeline::merge_ended_states(&parts, &ended)
        .map_err(|e| errors::state(py, format!("cannot merge the pipeline states: {e}")))
}

#[pymodule]
fn _infeed(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(list_files, m)?)?;
    m.add_function(wrap_pyfunction!(rows::unpad_rows, m)?)?;
    m.add_function(wrap_pyfunction!(rows::repad_rows, m)?)?;
    m.add_function(wrap_pyfunction!(batches::pooled_empty, m)?)?;
    m.add_function(wrap_pyfunction!(batches::positions_of, m)?)?;
    m.add_function(wrap_pyfunction!(describe, m)?)?;
    m.add_function(wrap_pyfunction!(files_of, m)?)?;
    m.add_function(wrap_pyfunction!(shapes, m)?)?;
    m.add_function(wrap_pyfunction!(records_of, m)?)?;
    m.add_function(wrap_pyfunction!(limit_of, m)?)?;
    m.add_function(wrap_pyfunction!(access::record_indexes, m)?)?;
    m.add_function(wrap_pyfunction!(merge_states, m)?)?;
    m.add_function(wrap_pyfunction!(tfds_files, m)?)?;
    m.add_function(wrap_pyfunction!(tfds_spec, m)?)?;
    #[cfg(feature = "beam")]
    {
        m.add_class::<writer::RowWriter>()?;
        m.add_function(wrap_pyfunction!(writer::finalize, m)?)?;
        m.add_function(wrap_pyfunction!(writer::split_file, m)?)?;
        m.add_function(wrap_pyfunction!(writer::resolve_feature, m)?)?;
        m.add_function(wrap_pyfunction!(writer::can_tokenize, m)?)?;
    }
    m.add_class::<batches::Batches>()?;
    m.add_class::<access::RecordSource>()?;
    m.add_function(wrap_pyfunction!(access::build_index, m)?)?;
    m.add_class::<batches::Buffer>()?;
    m.add("ALIGN", infeed::batch::ALIGN)?;
    // The package's version, python/Cargo.toml's (pyproject.toml takes it
    // from there too): `infeed.__version__`.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
