//! Batch assembly throughput on the lm and img workloads (docs/architecture.md), from parsed
//! columns built at bench time (parsing is measured in `benches/parse.rs`):
//! - lm: 256 records, `input_ids` (uniform in 0..50 000) and
//!   `attention_mask` (all 1), lengths uniform in 8..512, padded to a
//!   multiple of 64 (max 512), cast to i32, each with a mask tensor; once
//!   from int64 columns (the cast at assembly) and once from int32 columns
//!   (the parser narrowed them, so rows are plain copies);
//! - img: 256 × 3072 raw bytes decoded to u8 [256, 32, 32, 3] plus the label;
//! - pack: the lm records packed into rows of 512 (throughput in records).
//!
//! Throughput is bytes of output tensors; batches/s is 1 / time per batch.
//! Run as `cargo bench --bench batch` and `taskset -c 0 cargo bench --bench batch`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use infeed::batch::{BatchPlan, LengthPolicy, MaskType, PackPlan, Remainder, TensorType};
use infeed::example::{BytesValues, Column, ParsedBatch, Values};
use infeed::spec::{DType, FeatureSpec};

const ROWS: usize = 256;

#[path = "support/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

fn lm_parsed(int32: bool) -> ParsedBatch {
    let mut rng = Rng(1);
    let mut splits = vec![0usize];
    let mut ids = Vec::new();
    for _ in 0..ROWS {
        let len = 8 + rng.below(512 - 8 + 1) as usize;
        ids.extend((0..len).map(|_| rng.below(50_000) as i64));
        splits.push(ids.len());
    }
    let ones = vec![1i64; ids.len()];
    let values = |v: Vec<i64>| {
        if int32 {
            Values::Int32(v.into_iter().map(|x| x as i32).collect())
        } else {
            Values::Int64(v)
        }
    };
    let col = |v| Column::Ragged {
        values: values(v),
        row_splits: splits.clone(),
        inner_shape: vec![],
    };
    ParsedBatch {
        num_records: ROWS,
        columns: vec![
            ("input_ids".into(), col(ids)),
            ("attention_mask".into(), col(ones)),
        ],
    }
}

fn img_parsed() -> ParsedBatch {
    let mut rng = Rng(2);
    let images: BytesValues = (0..ROWS)
        .map(|_| (0..3072).map(|_| rng.next() as u8).collect::<Vec<u8>>())
        .collect();
    ParsedBatch {
        num_records: ROWS,
        columns: vec![
            (
                "image".into(),
                Column::Dense {
                    shape: vec![ROWS],
                    values: Values::Bytes(images),
                },
            ),
            (
                "label".into(),
                Column::Dense {
                    shape: vec![ROWS],
                    values: Values::Int64((0..ROWS).map(|_| rng.below(10) as i64).collect()),
                },
            ),
        ],
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch");
    g.measurement_time(Duration::from_secs(4));
    g.warm_up_time(Duration::from_secs(1));

    for (name, int32, masks) in [
        ("lm_i64_cast_i32", false, MaskType::Auto),
        ("lm_i32_copy", true, MaskType::Auto),
        ("lm_i64_cast_i32_no_masks", false, MaskType::None),
    ] {
        let spec = FeatureSpec::new()
            .var_len("input_ids", if int32 { DType::Int32 } else { DType::Int64 })
            .var_len(
                "attention_mask",
                if int32 { DType::Int32 } else { DType::Int64 },
            );
        let asm = BatchPlan::new(&spec, ROWS)
            .pad_all(
                LengthPolicy::new()
                    .pad_to_multiple_of(64)
                    .max_length(512)
                    .mask(masks),
            )
            .cast_ints(TensorType::I32)
            .build()
            .expect("plan");
        let parsed = lm_parsed(int32);
        let out = asm.assemble(&parsed).expect("batch");
        eprintln!("{name}: {} ({} bytes)", out.shape(), out.num_bytes());
        g.throughput(Throughput::Bytes(out.num_bytes() as u64));
        drop(out);
        g.bench_function(name, |b| {
            b.iter(|| black_box(asm.assemble(black_box(&parsed)).expect("batch")))
        });
        let s = asm.pool().stats();
        eprintln!(
            "{name}: pool allocations {} reuses {}",
            s.allocations, s.reuses
        );
    }

    let spec = FeatureSpec::new()
        .fixed_len("image", DType::Bytes, &[])
        .fixed_len("label", DType::Int64, &[]);
    let asm = BatchPlan::new(&spec, ROWS)
        .decode_raw("image", &[32, 32, 3])
        .build()
        .expect("plan");
    let parsed = img_parsed();
    let bytes = asm.assemble(&parsed).expect("batch").num_bytes();
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("img_decode_u8", |b| {
        b.iter(|| black_box(asm.assemble(black_box(&parsed)).expect("batch")))
    });

    let spec = FeatureSpec::new()
        .var_len("input_ids", DType::Int64)
        .var_len("attention_mask", DType::Int64);
    let parsed = lm_parsed(false);
    let mut packer = PackPlan::new(&spec, &["input_ids", "attention_mask"], 512, ROWS)
        .cast_ints(TensorType::I32)
        .build()
        .expect("packer");
    // Packing streams: each iteration packs 256 more records and drops the
    // batches that filled (about half a batch per iteration). Throughput in
    // records.
    g.throughput(Throughput::Elements(ROWS as u64));
    let mut out = Vec::new();
    g.bench_function("pack_lm_512_records", |b| {
        b.iter(|| {
            packer.push_all(black_box(&parsed), &mut out).expect("pack");
            out.clear();
        })
    });
    drop(packer.finish(Remainder::Drop));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
