//! Trains a tiny token classifier (examples/token_band.mlir) on lm-shaped
//! TFRecords through a PJRT plugin, fed by infeed's pipeline:
//!
//! ```sh
//! scripts/fetch-pjrt.sh   # the CPU plugin into .pjrt/ (or set PJRT_PLUGIN_PATH)
//! cargo run --release --features xla --example train_lm -- [--steps 300] [--batch 32] [FILES...]
//! ```
//!
//! Runs the loop twice: on the real pipeline (shuffle, pad to a multiple of
//! 64, int32, batch) and on one batch reused every step (no input work).
//! Prints the losses as they are read, then one JSON line.

#[path = "common/token_band.rs"]
mod token_band;

use infeed::xla::{DeviceFeeder, FeederReport};

struct Args {
    files: Vec<String>,
    steps: u64,
    batch: usize,
    loss_every: u64,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        files: Vec::new(),
        steps: 300,
        batch: 32,
        loss_every: 25,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("{name} needs a value"))?
                .parse::<u64>()
                .map_err(|e| format!("{name}: {e}"))
        };
        match a.as_str() {
            "--steps" => args.steps = value("--steps")?,
            "--batch" => args.batch = value("--batch")? as usize,
            "--loss-every" => args.loss_every = value("--loss-every")?,
            "--seed" => args.seed = value("--seed")?,
            "-h" | "--help" => {
                return Err(
                    "usage: train_lm [--steps N] [--batch B] [--loss-every N] [--seed S] [FILES...]"
                        .into(),
                );
            }
            f => args.files.push(f.to_owned()),
        }
    }
    if args.files.is_empty() {
        args.files.push("testdata/lm-sample.tfrecord.gz".into());
    }
    Ok(args)
}

fn train(args: &Args, reuse: bool) -> Result<FeederReport, Box<dyn std::error::Error>> {
    let pipeline = token_band::pipeline(&args.files, args.seed, None, args.batch, 512)?;
    let shapes = pipeline.shapes()?;
    let config = token_band::config(shapes, Some(args.steps), args.loss_every, reuse);
    let feeder = DeviceFeeder::spawn(config, pipeline.build()?)?;
    for point in feeder.progress() {
        let tag = if reuse { " (one batch reused)" } else { "" };
        eprintln!("step {:>5}  loss {:.4}{tag}", point.step, point.loss);
    }
    Ok(feeder.join()?)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let run = || -> Result<(FeederReport, FeederReport), Box<dyn std::error::Error>> {
        Ok((train(&args, false)?, train(&args, true)?))
    };
    let (real, reused) = match run() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("train_lm: {e}");
            std::process::exit(1);
        }
    };
    let line = serde_json::json!({
        "platform": real.platform,
        "steps": real.steps,
        "batch": args.batch,
        "steps_per_sec": real.steps_per_sec,
        "first_loss": real.first_loss(),
        "last_loss": real.last_loss(),
        "compiles_ahead": real.compiles_ahead,
        "compile_secs": real.compile_secs,
        "compiles_in_loop": real.compiles_in_loop,
        "input_wait_fraction": real.input_wait_fraction,
        "input_fetch_secs": real.input_fetch_secs,
        "first_batch_secs": real.first_batch_secs,
        "batch_uploads": real.batch_uploads,
        "zero_copy_uploads": real.zero_copy_uploads,
        "pinned_uploads": real.pinned_uploads,
        "dma": format!("{:?}", real.dma),
        "steps_per_sec_one_batch_reused": reused.steps_per_sec,
        "input_bound": real.input_wait_fraction > 0.1,
    });
    println!("{line}");
}
