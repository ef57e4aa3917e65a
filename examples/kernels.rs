//! The hot kernels, one per run, over inputs generated in-process
//! (deterministic: the same instructions every run of the same build), for
//! `scripts/callgrind-guard.sh`, which counts each kernel's instructions per
//! record under callgrind and compares them with
//! `benches/callgrind-baseline.json`.
//!
//! `kernels NAME` runs the kernel once unmeasured (first-use allocations,
//! lazy statics), then [`ITERATIONS`] times inside [`measured_region`] (the
//! function callgrind collects in), checks what it produced, and prints
//! `NAME RECORDS` — the records the measured region processed in all.
//!
//! Kernels (the lm workload of docs/architecture.md: `input_ids` and `attention_mask`,
//! Int64List, lengths uniform in 8..512):
//! - `deframe_crc`: TFRecord framing and both masked CRC32Cs over 1 MiB
//!   chunks (`Deframer`, what every shard reader runs);
//! - `lm_parse`: the lm spec parsed into columns, 256 records a batch
//!   (`ExampleParser::parse_into`, recycled columns);
//! - `lm_assemble`: those columns into padded tensors: multiple of 64, max
//!   512, cast to int32, batch 256 (`Assembler::assemble`);
//! - `lm_direct`: records straight into the same tensors in one pass (the
//!   workers' path for this pipeline);
//! - `img_direct`: the img workload's records (a 32×32×3 raw image, an
//!   int64 label in 0..10) straight into `[256, 32, 32, 3]` u8 and `[256]`
//!   i64 (the workers' path for fixed-length features).

use std::hint::black_box;
use std::process::ExitCode;

use bytes::Bytes;
use infeed::batch::{Assembler, BatchPlan, LengthPolicy, TensorType, Truncation};
use infeed::example::proto::{Example, Feature};
use infeed::example::{ExampleParser, ParsedBatch};
use infeed::record::{Compression, Deframer, ReadOptions, RecordWriter};
use infeed::spec::{DType, FeatureSpec};
use prost::Message;

/// Records per batch, and batches per iteration.
const BATCH: usize = 256;
const BATCHES: usize = 8;
const ITERATIONS: usize = 2;
const CHUNK: usize = 1 << 20;

#[path = "../benches/support/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

/// lm records: ids uniform in 0..50 000, the mask all ones.
fn lm_records(n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(1);
    (0..n)
        .map(|_| {
            let len = 8 + rng.below(512 - 8 + 1) as usize;
            let ids: Vec<i64> = (0..len).map(|_| rng.below(50_000) as i64).collect();
            Example::from_features([
                ("input_ids", Feature::int64s(ids)),
                ("attention_mask", Feature::int64s(vec![1i64; len])),
            ])
            .encode_to_vec()
        })
        .collect()
}

fn lm_spec() -> FeatureSpec {
    FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64)
}

fn lm_assembler() -> Result<Assembler, String> {
    BatchPlan::new(&lm_spec(), BATCH)
        .pad_all(
            LengthPolicy::new()
                .pad_to_multiple_of(64)
                .max_length(512)
                .truncation(Truncation::KeepStart),
        )
        .cast_ints(TensorType::I32)
        .build()
        .map_err(|e| e.to_string())
}

/// The region callgrind collects in (`--toggle-collect`): never inlined, so
/// its name stays in the binary.
#[inline(never)]
fn measured_region(kernel: &mut dyn FnMut() -> Result<usize, String>) -> Result<usize, String> {
    let mut records = 0;
    for _ in 0..ITERATIONS {
        records += kernel()?;
    }
    Ok(records)
}

/// Runs `kernel` once outside the region, then measured; checks that each
/// iteration processed `expected` records.
fn run(
    name: &str,
    expected: usize,
    mut kernel: impl FnMut() -> Result<usize, String>,
) -> Result<(), String> {
    let warm = kernel()?;
    if warm != expected {
        return Err(format!("{name}: {warm} records, expected {expected}"));
    }
    let records = measured_region(&mut kernel)?;
    if records != expected * ITERATIONS {
        return Err(format!("{name}: {records} records measured"));
    }
    println!("{name} {records}");
    Ok(())
}

fn deframe_crc() -> Result<(), String> {
    let records = lm_records(BATCH * BATCHES);
    let mut w = RecordWriter::new(Vec::new(), Compression::None);
    for r in &records {
        w.write_record(r).map_err(|e| e.to_string())?;
    }
    let stream = w.finish().map_err(|e| e.to_string())?;
    let chunks: Vec<Bytes> = stream.chunks(CHUNK).map(Bytes::copy_from_slice).collect();
    let opts = ReadOptions::default();
    run("deframe_crc", records.len(), || {
        let mut d = Deframer::new("mem", &opts);
        let mut n = 0;
        for chunk in &chunks {
            d.push(chunk.clone());
            while let Some(r) = d.next_record().map_err(|e| e.to_string())? {
                black_box(&r.data);
                n += 1;
            }
        }
        d.finish().map_err(|e| e.to_string())?;
        Ok(n)
    })
}

fn lm_parse() -> Result<(), String> {
    let records = lm_records(BATCH * BATCHES);
    let mut parser = ExampleParser::new(&lm_spec());
    let mut out = parser.parse(&records[..BATCH]).map_err(|e| e.to_string())?;
    run("lm_parse", records.len(), || {
        let mut n = 0;
        for batch in records.chunks(BATCH) {
            parser
                .parse_into(black_box(batch), &mut out)
                .map_err(|e| e.to_string())?;
            n += out.num_records;
        }
        Ok(n)
    })
}

fn lm_assemble() -> Result<(), String> {
    let records = lm_records(BATCH * BATCHES);
    let mut parser = ExampleParser::new(&lm_spec());
    let parsed: Vec<ParsedBatch> = records
        .chunks(BATCH)
        .map(|b| parser.parse(b).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let assembler = lm_assembler()?;
    run("lm_assemble", records.len(), || {
        let mut n = 0;
        for p in &parsed {
            let batch = assembler
                .assemble(black_box(p))
                .map_err(|e| e.to_string())?;
            n += batch.real_rows;
        }
        Ok(n)
    })
}

fn lm_direct() -> Result<(), String> {
    let records = lm_records(BATCH * BATCHES);
    let mut parser = ExampleParser::new(&lm_spec());
    let assembler = lm_assembler()?;
    run("lm_direct", records.len(), || {
        let mut n = 0;
        for b in records.chunks(BATCH) {
            let batch = infeed::kernels::lm_direct(&assembler, &mut parser, black_box(b))
                .ok_or("lm_direct: the direct path does not apply to the lm plan")?;
            n += batch.real_rows;
        }
        Ok(n)
    })
}

/// img records: random image bytes, labels in 0..10.
fn img_records(n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(2);
    (0..n)
        .map(|_| {
            let image: Vec<u8> = (0..3072).map(|_| rng.below(256) as u8).collect();
            Example::from_features([
                ("image", Feature::bytes([image])),
                ("label", Feature::int64s(vec![rng.below(10) as i64])),
            ])
            .encode_to_vec()
        })
        .collect()
}

fn img_direct() -> Result<(), String> {
    let records = img_records(BATCH * BATCHES);
    let spec = FeatureSpec::new()
        .fixed_len("image", DType::Bytes, &[])
        .fixed_len("label", DType::Int64, &[]);
    let assembler = BatchPlan::new(&spec, BATCH)
        .decode_raw("image", &[32, 32, 3])
        .build()
        .map_err(|e| e.to_string())?;
    run("img_direct", records.len(), || {
        let mut n = 0;
        for b in records.chunks(BATCH) {
            let batch = infeed::kernels::img_direct(&assembler, &spec, black_box(b))
                .ok_or("img_direct: the direct path does not apply to the img plan")?;
            n += batch.real_rows;
        }
        Ok(n)
    })
}

/// A kernel's setup and measured run.
type Kernel = fn() -> Result<(), String>;

const KERNELS: [(&str, Kernel); 5] = [
    ("deframe_crc", deframe_crc),
    ("lm_parse", lm_parse),
    ("lm_assemble", lm_assemble),
    ("lm_direct", lm_direct),
    ("img_direct", img_direct),
];

fn main() -> ExitCode {
    let name = std::env::args().nth(1).unwrap_or_default();
    if name == "--list" {
        for (k, _) in KERNELS {
            println!("{k}");
        }
        return ExitCode::SUCCESS;
    }
    let Some((_, kernel)) = KERNELS.iter().find(|(k, _)| *k == name) else {
        let names: Vec<&str> = KERNELS.iter().map(|(k, _)| *k).collect();
        eprintln!("usage: kernels NAME|--list (NAME: {})", names.join(", "));
        return ExitCode::from(2);
    };
    match kernel() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kernels: {e}");
            ExitCode::FAILURE
        }
    }
}
