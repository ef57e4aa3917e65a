//! The device feeder: a training loop on a device thread, fed by any
//! iterator of batches (a pipeline's `Batches`, or batches of your own).
//!
//! The step is one compiled program per batch shape, compiled before the
//! first step from the shapes given (a pipeline's `shapes()`).
//! Its parameters are the training state (kept on the device between
//! steps) followed by the batch tensors; its results are the new state
//! followed by the loss (an f32 scalar):
//!
//! ```text
//! main(state_0, ..., state_{n-1}, batch_0, ..., batch_{m-1})
//!     -> (state_0', ..., state_{n-1}', loss: tensor<f32>)
//! ```
//!
//! Per step k the device thread launches step k (asynchronous), then takes
//! batch k+1 from the pipeline and uploads it (zero-copy) while step k runs,
//! then waits for step k-1, so at most two steps are queued and at most
//! three batches' host buffers are out of their pool.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::buffer::DeviceBuffer;
use super::client::{Client, ClientOptions, Executable, check_params};
use super::dma::DmaStatus;
use super::error::XlaError;
use super::event::Completion;
use super::plugin::Plugin;
use super::program::{ArrayType, ElementType, Program};
use crate::batch::{Batch, BatchShape, Tensor};

/// Writes the step program (MLIR text) for one batch shape. The shape holds
/// only the batch tensors the step takes ([`FeederConfig::inputs`]).
pub type StepProgram = Arc<dyn Fn(&BatchShape) -> String + Send + Sync>;

/// What the device thread runs: [`FeederConfig::new`] and the setters
/// (`#[non_exhaustive]`; the fields stay public).
#[derive(Clone)]
#[non_exhaustive]
pub struct FeederConfig {
    /// The plugin file; `None`: [`Plugin::load_default`].
    pub plugin: Option<PathBuf>,
    /// How the client is made (one CPU device by default).
    pub client: ClientOptions,
    /// The step program for each batch shape.
    pub program: StepProgram,
    /// Shapes to compile before the first step (the pipeline's `shapes()`).
    pub shapes: Vec<BatchShape>,
    /// The initial training state, uploaded once and kept on the device.
    pub state: Vec<(String, Tensor)>,
    /// The batch tensors the step takes, in parameter order; `None`: all,
    /// in batch order.
    pub inputs: Option<Vec<String>>,
    /// Stop after this many steps (`None`: when the batches end).
    pub max_steps: Option<u64>,
    /// Read the loss back every this many steps (0: only at the first and
    /// last step, which are always read); reading waits for that step.
    pub loss_every: u64,
    /// Run every step on the first batch, uploaded once: no input work, the
    /// device's own speed. Needs `max_steps`.
    pub reuse_first_batch: bool,
}

impl FeederConfig {
    /// Steps of `program` on batches of `shapes`, compiled before the first
    /// step: the default plugin and client, no state, every batch tensor,
    /// until the batches end, the loss read only at the first and last step.
    pub fn new(program: StepProgram, shapes: Vec<BatchShape>) -> Self {
        FeederConfig {
            plugin: None,
            client: ClientOptions::default(),
            program,
            shapes,
            state: Vec::new(),
            inputs: None,
            max_steps: None,
            loss_every: 0,
            reuse_first_batch: false,
        }
    }

    /// Sets [`plugin`](Self::plugin): the plugin file to load.
    pub fn plugin(mut self, path: impl Into<PathBuf>) -> Self {
        self.plugin = Some(path.into());
        self
    }

    /// Sets [`client`](Self::client): how the client is made.
    pub fn client(mut self, client: ClientOptions) -> Self {
        self.client = client;
        self
    }

    /// Sets [`state`](Self::state): the initial training state.
    pub fn state(mut self, state: Vec<(String, Tensor)>) -> Self {
        self.state = state;
        self
    }

    /// Sets [`inputs`](Self::inputs): the batch tensors the step takes, in
    /// parameter order (`None`: all, in batch order).
    pub fn inputs(mut self, inputs: impl Into<Option<Vec<String>>>) -> Self {
        self.inputs = inputs.into();
        self
    }

    /// Sets [`max_steps`](Self::max_steps) (`None`: until the batches end).
    pub fn max_steps(mut self, steps: impl Into<Option<u64>>) -> Self {
        self.max_steps = steps.into();
        self
    }

    /// Sets [`loss_every`](Self::loss_every): read the loss back every this
    /// many steps.
    pub fn loss_every(mut self, steps: u64) -> Self {
        self.loss_every = steps;
        self
    }

    /// Sets [`reuse_first_batch`](Self::reuse_first_batch): every step on
    /// the first batch (the device's own speed).
    pub fn reuse_first_batch(mut self, reuse: bool) -> Self {
        self.reuse_first_batch = reuse;
        self
    }
}

impl std::fmt::Debug for FeederConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeederConfig")
            .field("plugin", &self.plugin)
            .field("shapes", &self.shapes.len())
            .field("state", &self.state.len())
            .field("inputs", &self.inputs)
            .field("max_steps", &self.max_steps)
            .field("loss_every", &self.loss_every)
            .field("reuse_first_batch", &self.reuse_first_batch)
            .finish()
    }
}

/// The loss after one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossPoint {
    /// Step index, from 0.
    pub step: u64,
    pub loss: f32,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct FeederReport {
    /// Platform of the device (`cpu`, `cuda`, ...).
    pub platform: String,
    /// Steps run.
    pub steps: u64,
    /// Wall time of the loop (from the first launch to the last step done).
    pub loop_secs: f64,
    /// Steps per second over the loop.
    pub steps_per_sec: f64,
    /// Losses read back (every `loss_every` steps, first and last).
    pub losses: Vec<LossPoint>,
    /// Programs compiled before the loop (one per distinct shape).
    pub compiles_ahead: u64,
    /// Seconds spent compiling before the loop.
    pub compile_secs: f64,
    /// Programs compiled during the loop: batches of a shape not compiled
    /// ahead. Zero when the shapes came from the pipeline.
    pub compiles_in_loop: u64,
    /// Seconds the device thread spent taking batches from the pipeline.
    pub input_fetch_secs: f64,
    /// Seconds the device sat idle, its queued steps done, while the device
    /// thread waited for the next batch: input starvation.
    pub input_wait_secs: f64,
    /// `input_wait_secs / loop_secs`: near 0 the device is the bottleneck;
    /// near 1 the input pipeline is.
    pub input_wait_fraction: f64,
    /// Seconds from start to the first batch on the device.
    pub first_batch_secs: f64,
    /// Batch tensors uploaded (each step's inputs; one batch's with
    /// `reuse_first_batch`).
    pub batch_uploads: u64,
    /// Of those, the ones the device reads in place: its buffer's address
    /// is the batch tensor's own (pooled, aligned) host memory. On a CPU
    /// device every upload should be; a GPU or TPU copies to its own memory,
    /// so there it is 0.
    pub zero_copy_uploads: u64,
    /// Of those, the ones uploaded from host memory mapped for DMA (pinned:
    /// straight over the link, no staging copy). 0 on a CPU device, which
    /// reads in place instead.
    pub pinned_uploads: u64,
    /// What came of mapping batch buffers for DMA.
    pub dma: DmaStatus,
    /// The final training state, read back.
    pub state: Vec<(String, Tensor)>,
}

impl FeederReport {
    /// The first loss read.
    pub fn first_loss(&self) -> Option<f32> {
        self.losses.first().map(|p| p.loss)
    }

    /// The last loss read (the last step's).
    pub fn last_loss(&self) -> Option<f32> {
        self.losses.last().map(|p| p.loss)
    }
}

/// A training loop running on its own device thread, which owns every PJRT
/// handle.
pub struct DeviceFeeder {
    handle: std::thread::JoinHandle<Result<FeederReport, XlaError>>,
    progress: Receiver<LossPoint>,
}

impl std::fmt::Debug for DeviceFeeder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceFeeder").finish_non_exhaustive()
    }
}

impl DeviceFeeder {
    /// Starts the device thread: load the plugin, make the client, compile
    /// the step for every shape, upload the state, then train on `batches`
    /// (a pipeline's `Batches`, or any iterator of batches; an `Err` from it
    /// ends the loop as [`XlaError::Input`]).
    pub fn spawn<I, E>(config: FeederConfig, batches: I) -> Result<Self, XlaError>
    where
        I: IntoIterator<Item = Result<Batch, E>>,
        I::IntoIter: Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let batches = batches.into_iter();
        let (tx, progress) = crossbeam_channel::unbounded();
        let handle = std::thread::Builder::new()
            .name("infeed-device".into())
            .spawn(move || run(config, batches, tx))
            .map_err(|e| XlaError::DeviceThread(e.to_string()))?;
        Ok(Self { handle, progress })
    }

    /// Losses as they are read (the channel closes when the loop ends).
    pub fn progress(&self) -> &Receiver<LossPoint> {
        &self.progress
    }

    /// Waits for the loop to end.
    pub fn join(self) -> Result<FeederReport, XlaError> {
        self.handle.join().unwrap_or_else(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Err(XlaError::DeviceThread(message))
        })
    }

    /// Runs the loop on the calling thread (which then owns the handles).
    pub fn run_here<I, E>(config: FeederConfig, batches: I) -> Result<FeederReport, XlaError>
    where
        I: IntoIterator<Item = Result<Batch, E>>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let (tx, _rx) = crossbeam_channel::unbounded();
        run(config, batches.into_iter(), tx)
    }
}

/// The batch shape restricted to `inputs`, in their order.
fn select_shape(shape: &BatchShape, inputs: Option<&[String]>) -> Result<BatchShape, XlaError> {
    let Some(names) = inputs else {
        return Ok(shape.clone());
    };
    let tensors = names
        .iter()
        .map(|n| {
            shape.get(n).cloned().ok_or_else(|| XlaError::Program {
                message: format!(
                    "the step takes batch tensor {n:?}, but batches hold only {shape}"
                ),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BatchShape { tensors })
}

/// The steps' executables by input shape, and the checks of each program
/// against the state and the batch.
struct Steps<'a> {
    client: &'a Client,
    config: &'a FeederConfig,
    state_types: Vec<(String, ArrayType)>,
    by_shape: HashMap<BatchShape, Executable>,
}

impl Steps<'_> {
    fn get(&mut self, shape: &BatchShape) -> Result<&Executable, XlaError> {
        if !self.by_shape.contains_key(shape) {
            let exe = self.compile(shape)?;
            self.by_shape.insert(shape.clone(), exe);
        }
        self.by_shape.get(shape).ok_or_else(|| XlaError::Program {
            message: format!("no step for {shape}"),
        })
    }

    /// Writes, checks and compiles the step for one input shape.
    fn compile(&self, shape: &BatchShape) -> Result<Executable, XlaError> {
        let program = Program::from_mlir((self.config.program)(shape))?;
        let sig = program.signature();
        let inputs: Vec<(String, ArrayType)> = shape
            .tensors
            .iter()
            .map(|t| (t.name.clone(), ArrayType::new(t.dtype.into(), &t.shape)))
            .collect();
        let expected: Vec<(&str, &ArrayType)> = self
            .state_types
            .iter()
            .chain(&inputs)
            .map(|(n, t)| (n.as_str(), t))
            .collect();
        // Check the parameters before the plugin sees the program.
        check_params(sig, &expected)?;
        let n = self.state_types.len();
        let loss = ArrayType::new(ElementType::F32, &[]);
        let results_ok = sig.results.len() == n + 1
            && sig.results[..n]
                .iter()
                .zip(&self.state_types)
                .all(|(r, (_, s))| r == s)
            && sig.results[n] == loss;
        if !results_ok {
            let want: Vec<String> = self
                .state_types
                .iter()
                .map(|(_, t)| t.to_string())
                .chain([loss.to_string()])
                .collect();
            return Err(XlaError::Program {
                message: format!(
                    "the step must return the new state then the loss, ({}); for {shape} it returns {sig}",
                    want.join(", ")
                ),
            });
        }
        self.client.compile(&program)
    }
}

/// Batch tensors uploaded, and those the device reads in place.
#[derive(Default)]
struct Uploads {
    all: u64,
    in_place: u64,
    pinned: u64,
}

/// Uploads the chosen tensors of a batch, in parameter order.
fn upload_batch(
    client: &Client,
    batch: Batch,
    inputs: Option<&[String]>,
    uploads: &mut Uploads,
) -> Result<(BatchShape, Vec<DeviceBuffer>), XlaError> {
    let shape = select_shape(&batch.shape(), inputs)?;
    let mut tensors = batch.tensors;
    let mut buffers = Vec::with_capacity(shape.tensors.len());
    for t in &shape.tensors {
        let at = tensors
            .iter()
            .position(|(n, _)| *n == t.name)
            .ok_or_else(|| XlaError::Program {
                message: format!("batch has no tensor {:?}", t.name),
            })?;
        let (name, tensor) = tensors.swap_remove(at);
        let host = tensor.data().as_ptr() as usize;
        let buffer = client.upload(&name, tensor)?;
        uploads.all += 1;
        uploads.pinned += u64::from(buffer.uploaded_pinned());
        // A plugin without the unsafe-pointer call just counts as a copy.
        if buffer.device_address().ok() == Some(host) {
            uploads.in_place += 1;
        }
        buffers.push(buffer);
    }
    Ok((shape, buffers))
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The next batch, `None` at the end; the iterator's error as
/// [`XlaError::Input`].
fn next_batch<E: std::error::Error + Send + Sync + 'static>(
    batches: &mut impl Iterator<Item = Result<Batch, E>>,
) -> Result<Option<Batch>, XlaError> {
    batches
        .next()
        .transpose()
        .map_err(|e| XlaError::Input(Box::new(e)))
}

fn run<E: std::error::Error + Send + Sync + 'static>(
    config: FeederConfig,
    mut batches: impl Iterator<Item = Result<Batch, E>>,
    progress: Sender<LossPoint>,
) -> Result<FeederReport, XlaError> {
    let start = Instant::now();
    if config.reuse_first_batch && config.max_steps.is_none() {
        return Err(XlaError::Program {
            message: "reuse_first_batch needs max_steps (one batch reused never ends)".into(),
        });
    }
    let plugin = match &config.plugin {
        Some(p) => Plugin::load(p)?,
        None => Plugin::load_default()?,
    };
    let client = Client::new(plugin, &config.client)?;
    let inputs = config.inputs.as_deref();
    let mut steps = Steps {
        client: &client,
        config: &config,
        state_types: config
            .state
            .iter()
            .map(|(n, t)| (n.clone(), ArrayType::new(t.dtype().into(), t.shape())))
            .collect(),
        by_shape: HashMap::new(),
    };
    let compile_start = Instant::now();
    for shape in &config.shapes {
        let shape = select_shape(shape, inputs)?;
        if !steps.by_shape.contains_key(&shape) {
            let exe = steps.compile(&shape)?;
            steps.by_shape.insert(shape, exe);
        }
    }
    let compile_secs = secs(compile_start.elapsed());
    let compiles_ahead = client.compile_count();

    let mut state: Vec<DeviceBuffer> = config
        .state
        .iter()
        .map(|(name, t)| client.upload(name, t.clone()))
        .collect::<Result<_, _>>()?;
    let n_state = state.len();

    let Some(first) = next_batch(&mut batches)? else {
        return Err(XlaError::Program {
            message: "the pipeline gave no batch".into(),
        });
    };
    let mut uploads = Uploads::default();
    let mut current = Some(upload_batch(&client, first, inputs, &mut uploads)?);
    let first_batch_secs = secs(start.elapsed());
    let reuse = config.reuse_first_batch;

    let mut losses = Vec::new();
    let mut fetch = Duration::ZERO;
    let mut starved = Duration::ZERO;
    let mut previous: Option<Completion> = None;
    let mut step: u64 = 0;
    let loop_start = Instant::now();
    let every = config.loss_every;
    loop {
        let Some((shape, batch_buffers)) = current.take() else {
            break;
        };
        let exe = steps.get(&shape)?;
        let args: Vec<&DeviceBuffer> = state.iter().chain(&batch_buffers).collect();
        let (mut outputs, done) = exe.launch(&args)?;
        drop(args);
        let loss_buffer = outputs.pop().ok_or_else(|| XlaError::Program {
            message: "the step returned nothing".into(),
        })?;
        state = outputs;
        debug_assert_eq!(state.len(), n_state);
        let last_allowed = config.max_steps.is_some_and(|m| step + 1 >= m);

        // While step k runs: the next batch, uploaded.
        if reuse {
            if !last_allowed {
                current = Some((shape, batch_buffers));
            }
        } else {
            // The device may still read these; their host memory returns to
            // the pool when it is done.
            drop(batch_buffers);
            if !last_allowed {
                let t0 = Instant::now();
                let next = next_batch(&mut batches)?;
                let t1 = Instant::now();
                fetch += t1 - t0;
                if let Some(done_at) = done.done_at() {
                    // The device finished step k before the batch came.
                    starved += t1.saturating_duration_since(done_at.max(t0));
                }
                current = next
                    .map(|b| upload_batch(&client, b, inputs, &mut uploads))
                    .transpose()?;
            }
        }
        // At most two steps queued: wait for step k-1.
        if let Some(prev) = previous.take() {
            prev.wait()?;
        }
        let is_last = current.is_none();
        if step == 0 || is_last || (every > 0 && step.is_multiple_of(every)) {
            let loss = loss_buffer
                .to_vec::<f32>()?
                .first()
                .copied()
                .unwrap_or(f32::NAN);
            let point = LossPoint { step, loss };
            losses.push(point);
            let _ = progress.send(point);
        }
        previous = Some(done);
        step += 1;
    }
    if let Some(prev) = previous.take() {
        prev.wait()?;
    }
    let loop_secs = secs(loop_start.elapsed());
    let compiles_in_loop = client.compile_count() - compiles_ahead;
    let state = config
        .state
        .iter()
        .zip(&state)
        .map(|((name, _), b)| Ok((name.clone(), b.to_tensor()?)))
        .collect::<Result<Vec<_>, XlaError>>()?;
    client.release_host_buffers();
    Ok(FeederReport {
        platform: client.platform().to_owned(),
        steps: step,
        loop_secs,
        steps_per_sec: if loop_secs > 0.0 {
            step as f64 / loop_secs
        } else {
            0.0
        },
        losses,
        compiles_ahead,
        compile_secs,
        compiles_in_loop,
        input_fetch_secs: secs(fetch),
        input_wait_secs: secs(starved),
        input_wait_fraction: if loop_secs > 0.0 {
            secs(starved) / loop_secs
        } else {
            0.0
        },
        first_batch_secs,
        batch_uploads: uploads.all,
        zero_copy_uploads: uploads.in_place,
        pinned_uploads: uploads.pinned,
        dma: client.dma_status(),
        state,
    })
}
