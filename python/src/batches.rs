//! The running pipeline as a Python iterator of dicts of numpy arrays that
//! view infeed's pooled buffers.

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use infeed::batch::{
    AlignedBuf, Batch, BufferPool, BytesColumn, PoolConfig, Provenance, ProvenanceParts, Tensor,
    TensorType,
};
use infeed::pipeline::Listed;
use numpy::ndarray::{ArrayView, IxDyn};
use numpy::{Element, PyArray};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use xxhash_rust::xxh3::xxh3_64;

use crate::{build, errors};

/// How long `next()` waits without the GIL before it looks for signals
/// (Ctrl-C), so a KeyboardInterrupt arrives within this.
const POLL: Duration = Duration::from_millis(20);

/// The numpy name of a tensor type.
pub fn numpy_dtype(dtype: TensorType) -> &'static str {
    match dtype {
        TensorType::I64 => "int64",
        TensorType::I32 => "int32",
        TensorType::F32 => "float32",
        TensorType::U8 => "uint8",
        // ml_dtypes' name (numpy knows it once ml_dtypes is imported).
        TensorType::BF16 => "bfloat16",
    }
}

/// The owner of one tensor's buffer: the `base` of the numpy array viewing
/// it. When the last array (or view of one) is collected, this drops and
/// the buffer returns to its pool.
#[pyclass(module = "infeed._infeed", frozen)]
pub struct Buffer {
    buf: AlignedBuf,
}

#[pymethods]
impl Buffer {
    /// Address of the first byte (a multiple of `infeed._infeed.ALIGN`).
    #[getter]
    fn address(&self) -> usize {
        self.buf.as_ptr() as usize
    }

    /// Bytes of data.
    #[getter]
    fn nbytes(&self) -> usize {
        self.buf.len()
    }

    /// Bytes allocated (the pool's capacity class).
    #[getter]
    fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether the buffer goes back to a pool when dropped.
    #[getter]
    fn pooled(&self) -> bool {
        self.buf.is_pooled()
    }
}

/// A running pipeline (`infeed.Iterator` wraps it).
#[pyclass(module = "infeed._infeed")]
pub struct Batches {
    inner: Mutex<Option<infeed::pipeline::Batches<Batch>>>,
    /// The state when the pipeline was closed (its threads are gone).
    closed_state: Mutex<Option<Vec<u8>>>,
    real_rows: Mutex<Option<usize>>,
    /// Whether each batch's digest is taken (it reads every byte of it).
    digests: bool,
    /// The last batch's digest, as `infeed bench --digests` lists it.
    digest: Mutex<Option<String>>,
    /// The last batch's rows and where they came from.
    provenance: Mutex<Option<(usize, Provenance)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl Batches {
    /// Starts the pipeline `description` (JSON) describes, from `state`
    /// (bytes from `state()`) when given; with `digests`, takes each
    /// batch's digest (`digest`); on the files its globs matched before
    /// (`listed`, by pattern), listing none of those again.
    #[new]
    #[pyo3(signature = (description, state = None, digests = false, listed = None))]
    fn new(
        py: Python<'_>,
        description: &str,
        state: Option<Vec<u8>>,
        digests: bool,
        listed: Option<Listed>,
    ) -> PyResult<Self> {
        let pipeline = build::build(py, description, state.as_deref(), listed)?;
        let batches = py
            .detach(|| pipeline.build())
            .map_err(|e| errors::to_py(py, e))?;
        Ok(Self {
            inner: Mutex::new(Some(batches)),
            closed_state: Mutex::new(None),
            real_rows: Mutex::new(None),
            digests,
            digest: Mutex::new(None),
            provenance: Mutex::new(None),
        })
    }

    /// The next batch as a dict name → numpy array, or `None` at the end.
    /// Waits without the GIL; Ctrl-C while waiting raises KeyboardInterrupt
    /// (the batch being waited for is not lost: the next call returns it).
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let batch = loop {
            let polled = py.detach(|| match lock(&self.inner).as_mut() {
                Some(batches) => batches.next_batch_within(POLL),
                None => Some(Ok(None)),
            });
            match polled {
                None => py.check_signals()?,
                Some(Ok(Some(batch))) => break batch,
                Some(Ok(None)) => return Ok(None),
                Some(Err(e)) => return Err(errors::to_py(py, e)),
            }
        };
        *lock(&self.real_rows) = Some(batch.real_rows);
        if self.digests {
            // The bench hashes each batch's digest once more (xxh3 of its
            // 8 bytes): the same text here.
            let digest = xxh3_64(&batch.digest().to_le_bytes());
            *lock(&self.digest) = Some(format!("{digest:016x}"));
        }
        *lock(&self.provenance) = Some((batch.rows(), batch.provenance));
        let dict = PyDict::new(py);
        for (name, tensor) in batch.tensors {
            dict.set_item(name, to_array(py, tensor)?)?;
        }
        for (name, column) in batch.bytes {
            dict.set_item(name, to_object_array(py, &column)?)?;
        }
        Ok(Some(dict))
    }

    /// The state after the last batch `next()` returned: positions and
    /// counters, a few KB. `Batches(files, steps, state)` continues from it.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        if let Some(state) = lock(&self.closed_state).as_ref() {
            return Ok(PyBytes::new(py, state));
        }
        let state = py.detach(|| lock(&self.inner).as_ref().map(|b| b.state()));
        match state {
            Some(state) => Ok(PyBytes::new(py, &state)),
            None => Err(errors::state(py, "the iterator is closed".into())),
        }
    }

    /// A digest of the schedule by which batches take their shapes when
    /// hosts must agree on them (0 when each batch's shape is its own):
    /// processes that give different ones would feed steps of different
    /// shapes.
    #[getter]
    fn shape_schedule(&self) -> u64 {
        lock(&self.inner).as_ref().map_or(0, |b| b.shape_schedule())
    }

    /// A mixture's sources with the records taken from each so far; empty
    /// for a pipeline that mixes nothing.
    #[getter]
    fn source_counts(&self) -> Vec<(String, u64)> {
        lock(&self.inner)
            .as_ref()
            .map_or_else(Vec::new, |b| b.source_counts())
    }

    /// Where each row of the last batch came from: a `(file, offset)`
    /// tuple per row, `None` for a padding row; for packed rows, a list of
    /// the tuples of its sequences.
    fn positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match lock(&self.provenance).as_ref() {
            Some((rows, provenance)) => position_list(py, *rows, provenance),
            None => Ok(PyList::empty(py)),
        }
    }

    /// What `positions()` lists, as plain data that pickles small: `(rows,
    /// files, records, pieces)`, the records' `(file, offset)` and the
    /// packed pieces' `(row, record)` as little-endian bytes (u32 and u64,
    /// u32 and u32). `positions_of` lists it.
    fn provenance<'py>(&self, py: Python<'py>) -> Option<ProvenanceTuple<'py>> {
        let (rows, provenance) = lock(&self.provenance).clone()?;
        let parts = provenance.to_parts();
        let records: Vec<u8> = (parts.records.iter())
            .flat_map(|&(f, o)| f.to_le_bytes().into_iter().chain(o.to_le_bytes()))
            .collect();
        let pieces = parts.pieces.map(|p| {
            let bytes: Vec<u8> = (p.iter())
                .flat_map(|&(r, i)| r.to_le_bytes().into_iter().chain(i.to_le_bytes()))
                .collect();
            PyBytes::new(py, &bytes)
        });
        Some((rows, parts.files, PyBytes::new(py, &records), pieces))
    }

    /// The last batch's digest (taken with `digests`), as `infeed bench
    /// --digests` lists it.
    #[getter]
    fn digest(&self) -> Option<String> {
        lock(&self.digest).clone()
    }

    /// Rows of the last batch that hold data (the rest are padding rows).
    #[getter]
    fn real_rows(&self) -> Option<usize> {
        *lock(&self.real_rows)
    }

    /// Batches delivered so far, counting those before a restore.
    #[getter]
    fn batches_delivered(&self) -> u64 {
        lock(&self.inner)
            .as_ref()
            .map_or(0, |b| b.batches_delivered())
    }

    /// Figures so far: `batches`, `consumer_wait_ns` (time `next()` waited),
    /// `first_batch_ns`, and per stage records and busy/waiting time.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        if let Some(b) = lock(&self.inner).as_ref() {
            let stats = b.stats();
            dict.set_item("batches", stats.batches)?;
            dict.set_item("consumer_wait_ns", stats.consumer_wait_ns)?;
            dict.set_item("first_batch_ns", stats.first_batch_ns)?;
            for (stage, figures) in [
                ("read", &stats.read),
                ("records", &stats.record_thread),
                ("batch", &stats.batch),
            ] {
                dict.set_item(stage, format!("{figures:?}"))?;
            }
        }
        Ok(dict)
    }

    /// The figures so far as numbers (seconds and counts): `elapsed`,
    /// `batches`, `consumer_wait`, `workers`, `ready` (batches waiting for
    /// the consumer), and per stage (`read`, `records`, `batch`) a dict of
    /// `records`, `bytes`, `busy`, `wait`, `skipped_records`,
    /// `skipped_bytes`, `retries`; and `record_account`, what became of
    /// the records this host took in: `read`, `delivered` and `left_out`
    /// by cause (`dropped`, `sliced`, `skipped_steps`, `filtered`,
    /// `corrupt`, `empty`, `mixture_end`); empty once closed.
    fn figures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        let Some(stats) = lock(&self.inner).as_ref().map(|b| b.stats()) else {
            return Ok(dict);
        };
        let s = |ns: u64| ns as f64 / 1e9;
        dict.set_item("elapsed", s(stats.elapsed_ns))?;
        dict.set_item("batches", stats.batches)?;
        dict.set_item("consumer_wait", s(stats.consumer_wait_ns))?;
        dict.set_item("workers", stats.workers)?;
        dict.set_item("ready", stats.ready)?;
        let times = stats.stage_times();
        for ((name, f), time) in [
            ("read", &stats.read),
            ("records", &stats.record_thread),
            ("batch", &stats.batch),
        ]
        .into_iter()
        .zip(times)
        {
            let stage = PyDict::new(py);
            stage.set_item("records", f.records)?;
            stage.set_item("bytes", f.bytes)?;
            stage.set_item("busy", time.busy / 1e9)?;
            stage.set_item("wait", time.wait / 1e9)?;
            stage.set_item("skipped_records", f.skipped_records)?;
            stage.set_item("skipped_bytes", f.skipped_bytes)?;
            stage.set_item("retries", f.retries)?;
            dict.set_item(name, stage)?;
        }
        let a = &stats.records;
        let l = &a.left_out;
        let left_out = PyDict::new(py);
        for (cause, n) in [
            ("dropped", l.dropped),
            ("sliced", l.sliced),
            ("skipped_steps", l.skipped_steps),
            ("filtered", l.filtered),
            ("corrupt", l.corrupt),
            ("empty", l.empty),
            ("mixture_end", l.mixture_end),
        ] {
            left_out.set_item(cause, n)?;
        }
        let account = PyDict::new(py);
        account.set_item("read", a.read)?;
        account.set_item("delivered", a.delivered)?;
        account.set_item("left_out", left_out)?;
        dict.set_item("record_account", account)?;
        Ok(dict)
    }

    /// Stops the pipeline's threads (and waits for them); `state()` still
    /// answers. Arrays already handed out stay valid.
    fn close(&self, py: Python<'_>) {
        // Without the GIL: another thread may hold the lock while it waits
        // in next() (for at most POLL).
        let state = py.detach(|| {
            lock(&self.inner).take().map(|batches| {
                let state = batches.state();
                drop(batches);
                state
            })
        });
        if let Some(state) = state {
            *lock(&self.closed_state) = Some(state);
        }
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        // Joining the threads needs no GIL (none of them takes it); release
        // it meanwhile, so other Python threads run while a reader finishes
        // its read.
        if let Some(batches) = lock(&self.inner).take() {
            Python::attach(|py| py.detach(move || drop(batches)));
        }
    }
}

/// `nbytes` bytes (uint8) in a pooled buffer, holding whatever they held
/// (zeros or an earlier batch's), for a writer that writes every byte: the
/// buffer returns to the pool when the last array viewing it is collected.
/// `infeed.ray`'s trainer joins its host batches into these: a fresh
/// array's pages cost a fault and the kernel's zeroing each on first
/// write, and zeroing a warm one costs a pass over it, which together were
/// most of a join.
#[pyfunction]
pub fn pooled_empty(py: Python<'_>, nbytes: usize) -> PyResult<Bound<'_, PyAny>> {
    static POOL: OnceLock<BufferPool> = OnceLock::new();
    let pool = POOL.get_or_init(|| BufferPool::new(PoolConfig::default()));
    let buf = pool.take_stale(nbytes);
    let ptr = buf.as_ptr();
    let owner = Bound::new(py, Buffer { buf })?.into_any();
    // SAFETY: as in `to_array`: `owner` owns the memory and is the array's
    // base; it holds `nbytes` bytes.
    Ok(unsafe { view::<u8>(ptr, &[nbytes], owner) })
}

/// [`Batches::provenance`]'s answer.
type ProvenanceTuple<'py> = (
    usize,
    Vec<String>,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
);

/// Where each of `rows` rows came from, as `Iterator.positions()` lists it.
fn position_list<'py>(
    py: Python<'py>,
    rows: usize,
    provenance: &Provenance,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for row in provenance.rows(rows) {
        if provenance.is_packed() {
            match row.is_empty() {
                true => out.append(py.None())?,
                false => out.append(PyList::new(py, row)?)?,
            }
        } else {
            match row.first() {
                Some(position) => out.append(position)?,
                None => out.append(py.None())?,
            }
        }
    }
    Ok(out)
}

/// The rows `Batches.provenance()` gave, listed as `positions()` lists
/// them (in another process: `infeed.ray`'s trainer).
#[pyfunction]
#[pyo3(signature = (rows, files, records, pieces = None))]
pub fn positions_of<'py>(
    py: Python<'py>,
    rows: usize,
    files: Vec<String>,
    records: &[u8],
    pieces: Option<&[u8]>,
) -> PyResult<Bound<'py, PyList>> {
    let bad = || pyo3::exceptions::PyValueError::new_err("positions_of: bad record bytes");
    if !records.len().is_multiple_of(12) || pieces.is_some_and(|p| !p.len().is_multiple_of(8)) {
        return Err(bad());
    }
    // Listed row by row: a number no batch has is a caller's mistake, not
    // an allocation to attempt.
    if rows > 1 << 24 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "positions_of: {rows} rows"
        )));
    }
    let u32_at = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap_or_default());
    let records = (records.chunks_exact(12))
        .map(|r| {
            (
                u32_at(r),
                u64::from_le_bytes(r[4..].try_into().unwrap_or_default()),
            )
        })
        .collect();
    let pieces = pieces.map(|p| {
        (p.chunks_exact(8))
            .map(|r| (u32_at(r), u32_at(&r[4..])))
            .collect()
    });
    let parts = ProvenanceParts {
        files,
        records,
        pieces,
    };
    position_list(py, rows, &Provenance::from_parts(parts))
}

/// A numpy array viewing the tensor's buffer, which a [`Buffer`] owns.
fn to_array<'py>(py: Python<'py>, tensor: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let (dtype, shape, buf) = tensor.into_parts();
    let ptr = buf.as_ptr();
    let owner = Bound::new(py, Buffer { buf })?.into_any();
    // SAFETY: `ptr` points at the buffer's heap memory, which `owner` owns
    // and never reallocates or frees while alive; `owner` is the array's
    // base, so it lives as long as any array viewing the memory. The memory
    // holds `shape`'s elements of `dtype` (Tensor checks that), aligned to
    // 64 bytes.
    unsafe {
        Ok(match dtype {
            TensorType::I64 => view::<i64>(ptr, &shape, owner),
            TensorType::I32 => view::<i32>(ptr, &shape, owner),
            TensorType::F32 => view::<f32>(ptr, &shape, owner),
            TensorType::U8 => view::<u8>(ptr, &shape, owner),
            // The bits as uint16, seen as ml_dtypes.bfloat16 (JAX's).
            TensorType::BF16 => {
                let bits = view::<u16>(ptr, &shape, owner);
                let bf16 = py.import("ml_dtypes")?.getattr("bfloat16")?;
                bits.call_method1("view", (bf16,))?
            }
        })
    }
}

/// A numpy array of `bytes` objects (dtype object) in the column's shape:
/// Python objects cannot view the column's buffer, so each value is a copy.
fn to_object_array<'py>(py: Python<'py>, column: &BytesColumn) -> PyResult<Bound<'py, PyAny>> {
    let values: Vec<Py<PyAny>> = column
        .iter()
        .map(|v| PyBytes::new(py, v).into_any().unbind())
        .collect();
    let array = numpy::ndarray::Array::from_shape_vec(IxDyn(column.shape()), values)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok(PyArray::from_owned_array(py, array).into_any())
}

/// # Safety
/// As [`PyArray::borrow_from_array`]: `ptr` holds `shape`'s elements of `T`
/// and stays valid while `owner` lives.
unsafe fn view<'py, T: Element>(
    ptr: *const u8,
    shape: &[usize],
    owner: Bound<'py, PyAny>,
) -> Bound<'py, PyAny> {
    // SAFETY: the caller's promise.
    unsafe {
        let array = ArrayView::from_shape_ptr(IxDyn(shape), ptr.cast::<T>());
        PyArray::<T, IxDyn>::borrow_from_array(&array, owner).into_any()
    }
}
