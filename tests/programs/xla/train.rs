//! A real training loop through the device feeder on the CPU plugin: the
//! token-band classifier of examples/token_band.mlir on testdata/lm-sample.
//! Needs the plugin (`scripts/fetch-pjrt.sh` or PJRT_PLUGIN_PATH): with the
//! `xla` feature on and no plugin these tests fail.
#![cfg(feature = "xla")]

#[path = "../../../examples/common/token_band.rs"]
mod token_band;

use std::sync::Arc;

use infeed::batch::BatchShape;
use infeed::xla::{DeviceFeeder, DmaMap, DmaStatus, XlaError};

const DATA: &str = "testdata/lm-sample.tfrecord.gz";

fn files() -> Vec<String> {
    vec![DATA.to_owned()]
}

#[test]
fn loss_falls_and_nothing_compiles_in_the_loop() {
    // Lengths capped at 128: two shapes, [32, 64] and [32, 128].
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 128).unwrap();
    let shapes = pipeline.shapes().unwrap();
    assert_eq!(shapes.len(), 2);
    let config = token_band::config(shapes, Some(60), 10, false);
    let feeder = DeviceFeeder::spawn(config, pipeline.build().unwrap()).unwrap();
    let streamed: Vec<_> = feeder.progress().iter().collect();
    let report = feeder.join().unwrap();
    assert_eq!(report.steps, 60);
    assert_eq!(report.compiles_ahead, 2);
    assert_eq!(report.compiles_in_loop, 0);
    let steps: Vec<u64> = report.losses.iter().map(|p| p.step).collect();
    assert_eq!(steps, [0, 10, 20, 30, 40, 50, 59]);
    assert_eq!(streamed, report.losses);
    // Output weights start at zero: the first loss is ln 2 exactly (f32).
    let first = report.first_loss().unwrap();
    assert!((first - std::f32::consts::LN_2).abs() < 1e-5, "{first}");
    let last = report.last_loss().unwrap();
    assert!(last < 0.4 * first, "loss {first} -> {last}");
    assert!((0.0..=1.0).contains(&report.input_wait_fraction));
    // The trained state comes back: four tensors, changed from the start.
    assert_eq!(report.state.len(), 4);
    assert_ne!(report.state[2].1, token_band::initial_state()[2].1);
}

#[test]
fn reused_batch_trains_on_one_batch() {
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 64).unwrap();
    let config = token_band::config(pipeline.shapes().unwrap(), Some(30), 100, true);
    let report = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(report.steps, 30);
    assert_eq!(report.compiles_in_loop, 0);
    assert_eq!(report.input_fetch_secs, 0.0);
    let steps: Vec<u64> = report.losses.iter().map(|p| p.step).collect();
    assert_eq!(steps, [0, 29]);
    assert!(report.last_loss().unwrap() < 0.5 * report.first_loss().unwrap());
}

#[test]
fn shapes_not_compiled_ahead_are_compiled_and_counted() {
    let pipeline = token_band::pipeline(&files(), 3, Some(1), 32, 64).unwrap();
    let config = token_band::config(Vec::new(), None, 100, false);
    let report = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap();
    // 256 records, one epoch, batches of 32 (remainder dropped).
    assert_eq!(report.steps, 8);
    assert_eq!(report.compiles_ahead, 0);
    assert_eq!(report.compiles_in_loop, 1);
}

#[test]
fn program_shape_mismatch_names_both_shapes() {
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 64).unwrap();
    let mut config = token_band::config(pipeline.shapes().unwrap(), Some(5), 1, false);
    // A program written for length 128, given batches of length 64.
    config.program = Arc::new(|_: &BatchShape| {
        token_band::TEMPLATE
            .replace("$B", "32")
            .replace("$L", "128")
    });
    let err = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "argument 4 (input_ids) is tensor<32x64xi32> but parameter 4 of the program is tensor<32x128xi32>: shapes differ"
    );
}

#[test]
fn batch_dtype_mismatch_names_both_types() {
    // The same pipeline without the int32 cast: i64 batches.
    let spec = infeed::spec::FeatureSpec::new()
        .var_len("input_ids", infeed::spec::DType::Int64)
        .var_len("attention_mask", infeed::spec::DType::Int64);
    let pipeline = infeed::pipeline::Pipeline::from_files(files())
        .unwrap()
        .parse(spec)
        .fixed_length(64)
        .truncation(infeed::batch::Truncation::KeepStart)
        .batch(32, true);
    let config = token_band::config(pipeline.shapes().unwrap(), Some(5), 1, false);
    let err = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap_err();
    assert!(
        matches!(&err, XlaError::ArgumentType { index: 4, name, .. } if name == "input_ids"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "argument 4 (input_ids) is tensor<32x64xi64> but parameter 4 of the program is tensor<32x64xi32>: element types differ"
    );
}

#[test]
fn missing_batch_tensor_is_named() {
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 64).unwrap();
    let mut config = token_band::config(pipeline.shapes().unwrap(), Some(5), 1, false);
    config.inputs = Some(vec!["input_ids".into(), "labels".into()]);
    let err = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("the step takes batch tensor \"labels\""),
        "{msg}"
    );
}

#[test]
fn missing_plugin_is_a_clear_error() {
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 64).unwrap();
    let mut config = token_band::config(pipeline.shapes().unwrap(), Some(5), 1, false);
    config.plugin = Some("/nonexistent/libtpu.so".into());
    let err = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap_err();
    assert!(matches!(err, XlaError::PluginNotFound { .. }), "{err:?}");
}

#[test]
fn a_slow_pipeline_shows_as_input_wait() {
    // Each record takes 4 ms to "read" on one worker: ~130 ms per batch of
    // 32, against a step of a few milliseconds. The device starves (after
    // the few batches prepared while the step compiled).
    let spec = infeed::spec::FeatureSpec::new()
        .var_len("input_ids", infeed::spec::DType::Int64)
        .var_len("attention_mask", infeed::spec::DType::Int64);
    let pipeline = infeed::pipeline::Pipeline::from_files(files())
        .unwrap()
        .threads(1)
        .prefetch(1)
        .repeat(None)
        .map(|record| {
            std::thread::sleep(std::time::Duration::from_millis(4));
            record
        })
        .parse(spec)
        .fixed_length(64)
        .truncation(infeed::batch::Truncation::KeepStart)
        .cast(infeed::batch::TensorType::I32)
        .batch(32, true);
    let config = token_band::config(pipeline.shapes().unwrap(), Some(30), 100, false);
    let report = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(report.steps, 30);
    assert!(report.input_wait_fraction > 0.5, "{report:?}");
    assert!(report.input_wait_secs <= report.input_fetch_secs);
}

#[test]
fn reusing_a_batch_needs_a_step_limit() {
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 64).unwrap();
    let config = token_band::config(pipeline.shapes().unwrap(), None, 1, true);
    let err = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("reuse_first_batch needs max_steps"),
        "{err}"
    );
}

/// The batches of `inner`, noting each one's tensors' host addresses (the
/// pooled buffers the pipeline filled) as the feeder takes it.
struct Noting<I> {
    inner: I,
    addresses: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl<I, E> Iterator for Noting<I>
where
    I: Iterator<Item = Result<infeed::batch::Batch, E>>,
{
    type Item = Result<infeed::batch::Batch, E>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next()?;
        if let Ok(batch) = &item {
            let mut seen = self.addresses.lock().unwrap();
            for name in token_band::inputs() {
                seen.push(batch[name.as_str()].data().as_ptr() as usize);
            }
        }
        Some(item)
    }
}

/// Zero-copy upload on the feeder's own path (docs/xla.md): every
/// batch tensor the feeder uploads is read by the CPU device in place, at
/// the address of the pooled, 64-byte aligned buffer the pipeline filled.
#[test]
fn the_feeder_uploads_every_batch_tensor_without_a_copy() {
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 128).unwrap();
    let config = token_band::config(pipeline.shapes().unwrap(), Some(20), 100, false);
    let addresses = Arc::new(std::sync::Mutex::new(Vec::new()));
    let batches = Noting {
        inner: pipeline.build().unwrap(),
        addresses: Arc::clone(&addresses),
    };
    let report = DeviceFeeder::spawn(config, batches)
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(report.steps, 20);
    let addresses = addresses.lock().unwrap();
    // 20 batches taken (the feeder takes none past the last step), three
    // tensors each, all aligned.
    assert_eq!(addresses.len(), 20 * 3);
    assert!(addresses.iter().all(|a| a % 64 == 0), "{addresses:?}");
    assert_eq!(report.batch_uploads, 20 * 3);
    assert_eq!(report.zero_copy_uploads, report.batch_uploads);
    // On the CPU device nothing is mapped for DMA (it reads in place).
    assert_eq!(
        (report.pinned_uploads, report.dma.clone()),
        (0, DmaStatus::Off)
    );
}

/// Asked to map batch buffers for DMA on the CPU plugin: the plugin's
/// answer is reported, and the loop trains the same either way.
#[test]
fn dma_mapping_asked_of_the_cpu_plugin_reports_its_answer() {
    let run = |dma: DmaMap| {
        // Batches of 256 x 128 int32 (128 KiB a tensor): big enough to map.
        let pipeline = token_band::pipeline(&files(), 3, None, 256, 128).unwrap();
        let mut config = token_band::config(pipeline.shapes().unwrap(), Some(12), 100, false);
        config.client = config.client.dma_map(dma);
        DeviceFeeder::spawn(config, pipeline.build().unwrap())
            .unwrap()
            .join()
            .unwrap()
    };
    let asked = run(DmaMap::Always);
    let off = run(DmaMap::Never);
    // The CPU plugin lacks the call: asked once, refused, never again.
    assert_eq!(
        asked.dma,
        DmaStatus::Unsupported(
            "PJRT_Client_DmaMap failed (UNIMPLEMENTED): DmaMap not supported on platform cpu"
                .into()
        )
    );
    assert_eq!(asked.pinned_uploads, 0);
    assert_eq!(off.dma, DmaStatus::Off);
    assert_eq!(asked.losses, off.losses);
    assert_eq!(asked.zero_copy_uploads, asked.batch_uploads);
}

#[test]
fn a_reused_first_batch_is_uploaded_once_without_a_copy() {
    let pipeline = token_band::pipeline(&files(), 3, None, 32, 64).unwrap();
    let config = token_band::config(pipeline.shapes().unwrap(), Some(10), 100, true);
    let report = DeviceFeeder::spawn(config, pipeline.build().unwrap())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(report.steps, 10);
    assert_eq!((report.batch_uploads, report.zero_copy_uploads), (3, 3));
}
