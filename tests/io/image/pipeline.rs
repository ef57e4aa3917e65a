//! Image features through the pipeline: shapes, the same pixels at any
//! thread count and after a restore, crops that differ per epoch and per
//! seed, and errors that name the file, the record and the feature.

use std::path::Path;

use infeed::batch::TensorType;
use infeed::example::proto::{BytesList, Example, Feature, Features, Int64List, feature::Kind};
use infeed::pipeline::{ParsedPipeline, Pipeline, PipelineError};
use infeed::record::{Compression, CorruptPolicy, ReadOptions};
use infeed::spec::{DType, FeatureSpec, ImageSpec};

use super::encode::{self, BASELINE_420};
use crate::support::tfrecord::{offsets, write_file};

fn example(image: &[u8], label: i64) -> Vec<u8> {
    let bytes = Feature {
        kind: Some(Kind::BytesList(BytesList {
            value: vec![image.to_vec()],
        })),
    };
    let label = Feature {
        kind: Some(Kind::Int64List(Int64List { value: vec![label] })),
    };
    prost::Message::encode_to_vec(&Example {
        features: Some(Features {
            feature: [("image".to_owned(), bytes), ("label".to_owned(), label)]
                .into_iter()
                .collect(),
        }),
    })
}

/// Writes `images` as one record each into `dir/name`; gives the path and
/// each record's byte offset.
fn write(dir: &Path, name: &str, images: &[Vec<u8>]) -> (String, Vec<u64>) {
    let records: Vec<Vec<u8>> = images
        .iter()
        .enumerate()
        .map(|(i, image)| example(image, i as i64))
        .collect();
    let path = write_file(&dir.join(name), &records, Compression::None);
    (path, offsets(&records))
}

/// Three shards of mixed PNGs and JPEGs of several sizes (12 records each).
fn shards(dir: &Path) -> Vec<String> {
    (0..3)
        .map(|f| {
            let images: Vec<Vec<u8>> = (0..12)
                .map(|i| {
                    let (w, h) = (40 + 7 * i, 30 + 5 * ((i + f) % 4));
                    let px = encode::pixels(w, h, 3, (f * 100 + i) as u64);
                    if i % 2 == 0 {
                        encode::jpeg(w, h, 3, &px, BASELINE_420)
                    } else {
                        encode::png(w, h, png::ColorType::Rgb, png::BitDepth::Eight, &px, None)
                    }
                })
                .collect();
            write(dir, &format!("img-{f}.tfrecord"), &images).0
        })
        .collect()
}

fn train(files: &[String], seed: u64, threads: usize) -> ParsedPipeline {
    let spec = FeatureSpec::new()
        .image(
            "image",
            ImageSpec::new(16, 16, 3).random_resized_crop().flip(),
        )
        .fixed_len("label", DType::Int64, &[]);
    Pipeline::from_files(files.iter().cloned())
        .unwrap()
        .interleave(3, 1)
        .shuffle(10)
        .seed(seed)
        .repeat(Some(2))
        .threads(threads)
        .parse(spec)
        .batch(5, false)
}

/// Every batch's images and labels, in order.
fn run(p: &ParsedPipeline) -> Vec<(Vec<u8>, Vec<i64>)> {
    p.build()
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            let image = &b["image"];
            assert_eq!(image.dtype(), TensorType::U8);
            assert_eq!(image.shape(), &[5, 16, 16, 3]);
            let labels = b["label"].values::<i64>().unwrap().to_vec();
            (image.bytes().to_vec(), labels)
        })
        .collect()
}

#[test]
fn train_crops_are_the_same_at_any_thread_count_and_differ_by_seed_and_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path());
    let one = run(&train(&files, 7, 1));
    assert_eq!(one.len(), 15); // 72 records in batches of 5, last padded
    assert_eq!(run(&train(&files, 7, 4)), one);
    let other_seed = run(&train(&files, 8, 1));
    assert_ne!(
        other_seed.iter().map(|b| &b.0).collect::<Vec<_>>(),
        one.iter().map(|b| &b.0).collect::<Vec<_>>()
    );
    // The same record (by label and file) is cropped anew in epoch 2: find
    // each record's image in both epochs and count the ones that differ.
    let mut per_record: std::collections::HashMap<(i64, Vec<u8>), usize> = Default::default();
    let rows: Vec<(i64, &[u8])> = one
        .iter()
        .flat_map(|(px, labels)| labels.iter().copied().zip(px.chunks_exact(16 * 16 * 3)))
        .collect();
    for (label, px) in &rows[..72] {
        *per_record.entry((*label, px.to_vec())).or_default() += 1;
    }
    let repeated = rows[..72]
        .iter()
        .filter(|(l, px)| per_record.get(&(*l, px.to_vec())) == Some(&2))
        .count();
    assert!(repeated < 8, "{repeated} of 72 crops repeat across epochs");
}

#[test]
fn a_restore_mid_run_gives_the_same_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path());
    let p = train(&files, 11, 2);
    let whole = run(&p);
    let mut batches = p.build().unwrap();
    for _ in 0..6 {
        batches.next_batch().unwrap().unwrap();
    }
    let state = batches.state();
    drop(batches);
    let rest = run(&p.clone().resume_from(&state));
    assert_eq!(rest, whole[6..]);
}

#[test]
fn eval_and_fixed_images_are_deterministic_without_a_seed_and_columns_hold_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let px = encode::pixels(8, 6, 3, 1);
    let png = encode::png(8, 6, png::ColorType::Rgb, png::BitDepth::Eight, &px, None);
    let (path, _) = write(dir.path(), "fixed.tfrecord", &[png.clone(), png]);
    let spec = FeatureSpec::new().image("image", ImageSpec::new(6, 8, 3));
    let p = Pipeline::from_files([path])
        .unwrap()
        .parse(spec)
        .batch(2, true);
    let shapes = p.shapes().unwrap();
    assert_eq!(shapes[0].get("image").unwrap().shape, vec![2, 6, 8, 3]);
    let batch = p.build().unwrap().next_batch().unwrap().unwrap();
    // A fixed PNG is its pixels, unchanged.
    assert_eq!(batch["image"].bytes(), [px.clone(), px.clone()].concat());
    let mut columns = p.build_columns().unwrap();
    let parsed = columns.next_batch().unwrap().unwrap();
    let values = parsed.get("image").unwrap().values();
    let infeed::example::Values::Bytes(b) = values else {
        panic!("{values:?}")
    };
    assert_eq!(b.get(1), px.as_slice());
}

/// The error of a one-image pipeline over `image` (at record 1, after a
/// good one), as text with the temporary path replaced by `FILE` and the
/// record's offset (checked to be the record's) by `OFFSET`.
fn error_of(image: Vec<u8>, spec: ImageSpec) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (spec.width, spec.height);
    let good = encode::pixels(w, h, 3, 0);
    let good = encode::png(w, h, png::ColorType::Rgb, png::BitDepth::Eight, &good, None);
    let (path, offsets) = write(dir.path(), "bad.tfrecord", &[good, image]);
    let p = Pipeline::from_files([path.clone()])
        .unwrap()
        .parse(FeatureSpec::new().image("image", spec))
        .batch(2, false);
    let err = p.build().unwrap().next_batch().unwrap_err();
    assert!(
        matches!(err, PipelineError::Image { offset, .. } if offset == offsets[1]),
        "{err:?}"
    );
    err.to_string()
        .replace(&path, "FILE")
        .replace(&format!("byte {}", offsets[1]), "byte OFFSET")
}

#[test]
fn corrupt_truncated_cmyk_foreign_and_misfit_images_are_typed_errors() {
    let px = encode::pixels(32, 24, 3, 5);
    let jpeg = encode::jpeg(32, 24, 3, &px, BASELINE_420);
    let spec = ImageSpec::new(24, 32, 3);
    assert_eq!(
        error_of(jpeg[..jpeg.len() / 2].to_vec(), spec),
        "FILE: record 1 at byte OFFSET: feature \"image\": corrupt or truncated JPEG: \
         Premature end of JPEG file"
    );
    let mut garbled = jpeg.clone();
    let mid = garbled.len() / 2;
    garbled[20..mid].fill(0xff);
    assert_eq!(
        error_of(garbled, spec),
        "FILE: record 1 at byte OFFSET: feature \"image\": corrupt or truncated JPEG: \
         Corrupt JPEG data: 164 extraneous bytes before marker 0xda"
    );
    let cmyk = encode::jpeg(8, 8, 4, &[100; 256], BASELINE_420);
    assert_eq!(
        error_of(cmyk, spec),
        "FILE: record 1 at byte OFFSET: feature \"image\": CMYK JPEG images are not supported \
         (convert them to RGB)"
    );
    assert_eq!(
        error_of(b"GIF89a\x01\x00".to_vec(), spec),
        "FILE: record 1 at byte OFFSET: feature \"image\": not a PNG or JPEG image \
         (first bytes [47, 49, 46, 38, 39, 61, 01, 00])"
    );
    let png = encode::png(32, 24, png::ColorType::Rgb, png::BitDepth::Eight, &px, None);
    assert_eq!(
        error_of(png[..png.len() - 30].to_vec(), spec),
        "FILE: record 1 at byte OFFSET: feature \"image\": corrupt or truncated PNG: \
         unexpected end of file"
    );
    assert_eq!(
        error_of(png, ImageSpec::new(24, 24, 3)),
        "FILE: record 1 at byte OFFSET: feature \"image\": PNG is 32x24 (width x height), \
         the spec says 24x24"
    );
    // Headers claiming 100 000 × 100 000 pixels are refused before any
    // decoding (the PNG's header CRC made right, so only the size is wrong).
    let mut huge = encode::png(
        1,
        1,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &[0; 3],
        None,
    );
    huge[16..24].copy_from_slice(&[0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0]);
    let mut crc = flate2::Crc::new();
    crc.update(&huge[12..29]);
    huge[29..33].copy_from_slice(&crc.sum().to_be_bytes());
    assert_eq!(
        error_of(huge, spec),
        "FILE: record 1 at byte OFFSET: feature \"image\": PNG of 100000x100000 pixels: \
         only 1 to 67108864 pixels are decoded"
    );
    let mut huge = jpeg.clone();
    let sof = huge.windows(2).position(|m| m == [0xff, 0xc0]).unwrap();
    huge[sof + 5..sof + 9].copy_from_slice(&[0x4e, 0x20, 0x4e, 0x20]);
    assert_eq!(
        error_of(huge, spec),
        "FILE: record 1 at byte OFFSET: feature \"image\": JPEG of 20000x20000 pixels: \
         only 1 to 67108864 pixels are decoded"
    );
}

/// Under the skip policy a record whose image does not decode is left out
/// and counted: the batch keeps its shape, the rows after it move up and
/// the last rows are padding (`real_rows`); columns simply have fewer rows.
#[test]
fn under_the_skip_policy_a_corrupt_image_leaves_its_record_out_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (12, 10);
    let mut images: Vec<Vec<u8>> = (0..6)
        .map(|i| {
            let px = encode::pixels(w, h, 3, i);
            encode::png(w, h, png::ColorType::Rgb, png::BitDepth::Eight, &px, None)
        })
        .collect();
    let half = images[1].len() / 2;
    images[1].truncate(half);
    images[4] = b"GIF89a\x01\x00".to_vec();
    let (path, offsets) = write(dir.path(), "some-bad.tfrecord", &images);
    let spec = FeatureSpec::new()
        .image("image", ImageSpec::new(h, w, 3))
        .fixed_len("label", DType::Int64, &[]);
    let skip = ReadOptions::default().on_corrupt(CorruptPolicy::Skip);
    let p = Pipeline::from_files([path.clone()])
        .unwrap()
        .read_options(skip.clone())
        .parse(spec.clone())
        .batch(3, true);
    let mut batches = p.build().unwrap();
    let mut got = Vec::new();
    let mut positions = Vec::new();
    while let Some(b) = batches.next_batch().unwrap() {
        assert_eq!(b["image"].shape(), &[3, h, w, 3]);
        positions.push(
            b.positions()
                .into_iter()
                .map(|row| row.first().map(|&(_, offset)| offset))
                .collect::<Vec<_>>(),
        );
        let labels = b["label"].values::<i64>().unwrap().to_vec();
        got.push((b.real_rows, labels, b["image"].bytes().to_vec()));
    }
    let pixels = |i: u64| encode::pixels(w, h, 3, i);
    let padding = vec![0u8; h * w * 3];
    let want = vec![
        (
            2,
            vec![0, 2, 0],
            [pixels(0), pixels(2), padding.clone()].concat(),
        ),
        (2, vec![3, 5, 0], [pixels(3), pixels(5), padding].concat()),
    ];
    assert_eq!(got, want);
    // The rows name the records they hold, the left-out ones moved past.
    let at = |i: usize| Some(offsets[i]);
    assert_eq!(positions, [[at(0), at(2), None], [at(3), at(5), None]]);
    let stats = batches.stats();
    let bytes = (images[1].len() + images[4].len()) as u64;
    assert_eq!(
        (stats.batch.skipped_records, stats.batch.skipped_bytes),
        (2, bytes)
    );
    // The record account: six read, four delivered, two left out as corrupt.
    let account = stats.records;
    assert_eq!(
        (account.read, account.delivered, account.left_out.corrupt),
        (6, 4, 2)
    );
    assert!(account.balanced(), "{account:?}");

    // Columns: the two good records of each batch.
    let columns = Pipeline::from_files([path])
        .unwrap()
        .read_options(skip)
        .parse(spec)
        .batch(3, true);
    let labels: Vec<Vec<i64>> = columns
        .build_columns()
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            b.get("label")
                .unwrap()
                .values()
                .as_int64()
                .unwrap()
                .to_vec()
        })
        .collect();
    assert_eq!(labels, [vec![0, 2], vec![3, 5]]);
}

#[test]
fn a_bad_image_spec_is_refused_when_the_pipeline_is_built() {
    let p = Pipeline::from_files(["unused.tfrecord"])
        .unwrap()
        .parse(FeatureSpec::new().image("image", ImageSpec::new(224, 224, 2)))
        .batch(2, false);
    assert_eq!(
        p.shapes().unwrap_err().to_string(),
        "invalid batch plan: image feature \"image\": channels must be 1, 3 or 4, not 2"
    );
}

#[test]
fn normalize_gives_float_pixels_and_numbers_per_channel_or_scalar() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path());
    let spec = FeatureSpec::new()
        .image("image", ImageSpec::new(16, 16, 3).resize_crop(20))
        .fixed_len("label", DType::Int64, &[]);
    let base = Pipeline::from_files(files.iter().cloned())
        .unwrap()
        .parse(spec)
        .batch(4, false);
    let (mean, std) = ([120.0, 110.0, 100.0], [60.0, 50.0, 40.0]);
    let normalized = base.clone().normalize("image", &mean, &std).normalize_to(
        "label",
        &[5.5],
        &[2.0],
        TensorType::BF16,
    );
    let shapes = normalized.shapes().unwrap();
    assert_eq!(shapes[0].get("image").unwrap().dtype, TensorType::F32);
    assert_eq!(shapes[0].get("label").unwrap().dtype, TensorType::BF16);
    let plain = base.build().unwrap().next_batch().unwrap().unwrap();
    let got = normalized.build().unwrap().next_batch().unwrap().unwrap();
    assert_eq!(got.shape(), shapes[0]);
    let expected: Vec<f32> = plain["image"]
        .bytes()
        .iter()
        .enumerate()
        .map(|(i, &x)| (f32::from(x) - mean[i % 3]) / std[i % 3])
        .collect();
    assert_eq!(got["image"].values::<f32>().unwrap(), expected.as_slice());
    let labels: Vec<f32> = got["label"]
        .values::<infeed::batch::Bf16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(labels, [-2.75, -2.25, -1.75, -1.25]);
    // Two means for three channels: refused when built.
    let err = base
        .normalize("image", &[1.0, 2.0], &[1.0])
        .build()
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "invalid pipeline: normalize(\"image\"): mean has 2 values: give 1, or one per channel (3)"
    );
}

#[test]
fn a_job_of_logical_streams_crops_alike_on_any_host_count() {
    // Three streams (one shard each), one epoch, 2 rows per stream a step:
    // one host's batch of 6 is the three hosts' batches of 2 end to end.
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path());
    let host = |i: u64, n: u64| {
        let spec = FeatureSpec::new()
            .image(
                "image",
                ImageSpec::new(16, 16, 3).random_resized_crop().flip(),
            )
            .fixed_len("label", DType::Int64, &[]);
        Pipeline::from_files(files.iter().cloned())
            .unwrap()
            .shard(i, n)
            .streams(3)
            .seed(4)
            .shuffle(4)
            .parse(spec)
            .batch(6 / n as usize, true)
    };
    let one: Vec<Vec<u8>> = host(0, 1)
        .build()
        .unwrap()
        .map(|b| b.unwrap()["image"].bytes().to_vec())
        .collect();
    let three: Vec<Vec<Vec<u8>>> = (0..3)
        .map(|i| {
            host(i, 3)
                .build()
                .unwrap()
                .map(|b| b.unwrap()["image"].bytes().to_vec())
                .collect()
        })
        .collect();
    assert_eq!(one.len(), 6);
    for (t, global) in one.iter().enumerate() {
        let joined: Vec<u8> = three.iter().flat_map(|h| h[t].clone()).collect();
        assert!(
            joined == *global,
            "step {t}: the hosts' crops differ from one host's"
        );
    }
}
