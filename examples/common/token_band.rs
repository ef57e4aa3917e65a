//! The token-band classifier of examples/token_band.mlir: its program for
//! each batch shape, initial parameters and input pipeline. Shared by
//! examples/train_lm.rs and tests/programs/xla/train.rs.

use std::sync::Arc;

use infeed::batch::{BatchShape, Tensor, TensorType, Truncation};
use infeed::pipeline::{ParsedPipeline, Pipeline, PipelineError};
use infeed::spec::{DType, FeatureSpec};
use infeed::xla::{ClientOptions, FeederConfig};

/// The program text, `$B` and `$L` still to be replaced.
pub const TEMPLATE: &str = include_str!("../token_band.mlir");

/// Hidden units (fixed in the program text).
pub const HIDDEN: usize = 16;

/// The batch tensors the step takes, in parameter order.
pub fn inputs() -> Vec<String> {
    ["input_ids", "input_ids_mask", "attention_mask"]
        .map(String::from)
        .to_vec()
}

/// The step for one batch shape: `$B`, `$L` from `input_ids`' `[B, L]`.
pub fn program(shape: &BatchShape) -> String {
    let (b, l) = match shape.get("input_ids").map(|t| t.shape.as_slice()) {
        Some(&[b, l]) => (b, l),
        // The signature check then names the mismatch.
        _ => (0, 0),
    };
    TEMPLATE
        .replace("$B", &b.to_string())
        .replace("$L", &l.to_string())
}

/// Initial parameters: hidden units with thresholds spread over [0, 1]
/// (alternating sign), output weights zero (loss starts at ln 2).
pub fn initial_state() -> Vec<(String, Tensor)> {
    let w1: Vec<f32> = (0..HIDDEN)
        .map(|i| if i % 2 == 0 { 8.0 } else { -8.0 })
        .collect();
    let b1: Vec<f32> = w1
        .iter()
        .enumerate()
        .map(|(i, w)| -w * (0.03 + 0.94 * i as f32 / (HIDDEN - 1) as f32))
        .collect();
    let tensor = |shape: &[usize], v: &[f32]| Tensor::from_slice(shape, v).expect("sizes match");
    vec![
        ("w1".into(), tensor(&[HIDDEN], &w1)),
        ("b1".into(), tensor(&[HIDDEN], &b1)),
        ("w2".into(), tensor(&[HIDDEN], &[0.0; HIDDEN])),
        ("b2".into(), tensor(&[], &[0.0])),
    ]
}

/// The reference lm input chain on `files`: shuffle, repeat (`epochs`,
/// `None` forever), parse, pad to a multiple of 64 (at most `max_len`,
/// longer rows keep their start), int32, batches of `batch` (remainder
/// dropped).
pub fn pipeline(
    files: &[String],
    seed: u64,
    epochs: Option<u64>,
    batch: usize,
    max_len: usize,
) -> Result<ParsedPipeline, PipelineError> {
    let spec = FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64);
    Ok(Pipeline::from_files(files.iter().cloned())?
        .seed(seed)
        .shuffle(1000)
        .repeat(epochs)
        .parse(spec)
        .pad_to_multiple_of(64)
        .max_length(max_len)
        .truncation(Truncation::KeepStart)
        .cast(TensorType::I32)
        .batch(batch, true))
}

/// A feeder configuration for this model.
pub fn config(
    shapes: Vec<BatchShape>,
    max_steps: Option<u64>,
    loss_every: u64,
    reuse_first_batch: bool,
) -> FeederConfig {
    FeederConfig::new(Arc::new(program), shapes)
        .client(ClientOptions::default())
        .state(initial_state())
        .inputs(inputs())
        .max_steps(max_steps)
        .loss_every(loss_every)
        .reuse_first_batch(reuse_first_batch)
}
