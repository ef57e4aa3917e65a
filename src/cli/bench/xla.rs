//! `infeed bench --program FILE.mlir` (feature `xla`): feed the pipeline's
//! batches to a StableHLO step on a PJRT device and report the step rate
//! beside the rate with one batch reused, and the input-wait fraction.
//!
//! The program is MLIR text whose `$B` and `$L` are replaced by each batch
//! shape's first two dimensions (of the first input tensor). Its `main`
//! takes the training state, then the batch tensors (`--program-inputs`,
//! default all, in batch order), and returns the new state then an f32
//! loss. The state is every parameter before the batch tensors, zeros at
//! the start.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use infeed::batch::{BatchShape, BufferPool, Tensor};
use infeed::pipeline::ParsedPipeline;
use infeed::xla::{DeviceFeeder, FeederConfig, FeederReport, Program, XlaError};
use serde_json::json;

use super::CliError;

/// `$B` and `$L` of `template` for one (input-restricted) batch shape.
fn instantiate(template: &str, shape: &BatchShape) -> String {
    let dims = shape
        .tensors
        .first()
        .map(|t| t.shape.clone())
        .unwrap_or_default();
    let mut text = template.to_owned();
    if let Some(b) = dims.first() {
        text = text.replace("$B", &b.to_string());
    }
    if let Some(l) = dims.get(1) {
        text = text.replace("$L", &l.to_string());
    }
    text
}

fn xla_error(e: XlaError) -> CliError {
    CliError::Message(e.to_string())
}

pub(super) fn run(
    parsed: ParsedPipeline,
    path: &Path,
    inputs: Option<&[String]>,
    max_steps: Option<u64>,
    out: &mut impl Write,
) -> Result<i32, CliError> {
    if max_steps.is_none() {
        return Err(CliError::Message(
            "--program needs --batches (the number of steps to run)".into(),
        ));
    }
    let template = std::fs::read_to_string(path)
        .map_err(|e| CliError::Message(format!("{}: {e}", path.display())))?;
    let shapes = parsed.shapes()?;
    let first = shapes
        .first()
        .ok_or_else(|| CliError::Message("the pipeline has no batch shape".into()))?;
    let input_shape = match inputs {
        None => first.clone(),
        Some(names) => BatchShape {
            tensors: names
                .iter()
                .map(|n| {
                    first.get(n).cloned().ok_or_else(|| {
                        CliError::Message(format!(
                            "--program-inputs: no batch tensor {n:?} in {first}"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
        },
    };
    // The state: every parameter before the batch tensors, zeros.
    let program = Program::from_mlir(instantiate(&template, &input_shape)).map_err(xla_error)?;
    let params = &program.signature().params;
    let n_state = params
        .len()
        .checked_sub(input_shape.tensors.len())
        .ok_or_else(|| {
            CliError::Message(format!(
                "{} takes {} parameters, fewer than the {} batch tensors ({input_shape})",
                path.display(),
                params.len(),
                input_shape.tensors.len()
            ))
        })?;
    let pool = BufferPool::default();
    let state = params[..n_state]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let dtype = t.dtype.tensor_type().ok_or_else(|| {
                CliError::Message(format!(
                    "state parameter {i} is {t}: use i64, i32, f32 or u8"
                ))
            })?;
            let tensor = Tensor::zeros(dtype, &t.dims, &pool)
                .map_err(|e| CliError::Message(format!("state parameter {i}: {e}")))?;
            Ok((format!("state {i}"), tensor))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let config = |reuse: bool| {
        let template = template.clone();
        FeederConfig::new(
            Arc::new(move |shape: &BatchShape| instantiate(&template, shape)),
            shapes.clone(),
        )
        .state(state.clone())
        .inputs(inputs.map(<[String]>::to_vec))
        .max_steps(max_steps)
        .loss_every(0)
        .reuse_first_batch(reuse)
    };
    let train = |reuse: bool| -> Result<FeederReport, CliError> {
        DeviceFeeder::spawn(config(reuse), parsed.build()?)
            .and_then(DeviceFeeder::join)
            .map_err(xla_error)
    };
    let real = train(false)?;
    let reused = train(true)?;
    let line = json!({
        "program": path.display().to_string(),
        "platform": real.platform,
        "shapes": shapes.len(),
        "steps": real.steps,
        "steps_per_sec": real.steps_per_sec,
        "steps_per_sec_one_batch_reused": reused.steps_per_sec,
        "input_wait_fraction": real.input_wait_fraction,
        "input_fetch_secs": real.input_fetch_secs,
        "first_loss": real.first_loss(),
        "last_loss": real.last_loss(),
        "compiles_ahead": real.compiles_ahead,
        "compile_secs": real.compile_secs,
        "compiles_in_loop": real.compiles_in_loop,
        "first_batch_secs": real.first_batch_secs,
    });
    serde_json::to_writer(&mut *out, &line).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(0)
}
