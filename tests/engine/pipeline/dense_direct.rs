//! Fixed-length features (the img pipeline) go from the record straight
//! into the tensor: every batch equals the two-step path's (parse into
//! columns, then assemble), values exact, and records the direct path does
//! not take (defaults, unpacked ints, extra features, duplicates) still come
//! out right.

use infeed::batch::TensorType;
use infeed::example::proto::{Example, Feature};
use infeed::pipeline::{ParsedPipeline, Pipeline};
use infeed::record::Compression;
use infeed::spec::{DType, DefaultValue, FeatureSpec};
use prost::Message;

use crate::support::tfrecord::write_file;

fn image(i: u8) -> Vec<u8> {
    (0..12)
        .map(|j| i.wrapping_mul(16).wrapping_add(j))
        .collect()
}

/// Record `i`: a 12-byte image and label `i * 10`; record 5 lacks its label,
/// record 6 has an extra feature.
fn write(dir: &std::path::Path, n: u8) -> String {
    let records = (0..n).map(|i| {
        let mut features = vec![("image", Feature::bytes([image(i)]))];
        if i != 5 {
            features.push(("label", Feature::int64s(vec![i64::from(i) * 10])));
        }
        if i == 6 {
            features.push(("other", Feature::floats(vec![1.5])));
        }
        Example::from_features(features).encode_to_vec()
    });
    write_file(&dir.join("img.tfrecord"), records, Compression::None)
}

fn pipeline(file: &str, two_step: bool) -> ParsedPipeline {
    let spec = FeatureSpec::new()
        .fixed_len("image", DType::Bytes, &[])
        .fixed_len_with_default("label", DType::Int64, &[], DefaultValue::Int64(vec![-1]))
        .unwrap();
    let p = Pipeline::from_files([file])
        .unwrap()
        .parse(spec)
        .decode_raw("image", &[2, 2, 3])
        .cast(TensorType::I32)
        .batch(4, false);
    if two_step { p.map_batch(Ok) } else { p }
}

#[test]
fn fixed_length_batches_equal_the_two_step_path_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), 10);
    let direct: Vec<_> = pipeline(&file, false)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let two: Vec<_> = pipeline(&file, true)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(direct.len(), 3);
    assert_eq!(
        direct.iter().map(|b| b.digest()).collect::<Vec<_>>(),
        two.iter().map(|b| b.digest()).collect::<Vec<_>>()
    );
    assert_eq!(direct[0]["image"].shape(), [4, 2, 2, 3]);
    assert_eq!(
        direct[0]["image"].values::<u8>().unwrap()[12..24],
        image(1)[..]
    );
    assert_eq!(direct[0]["label"].values::<i32>().unwrap(), [0, 10, 20, 30]);
    // Record 5 takes the default; the last batch's padding rows are 0.
    assert_eq!(
        direct[1]["label"].values::<i32>().unwrap(),
        [40, -1, 60, 70]
    );
    assert_eq!(direct[2]["label"].values::<i32>().unwrap(), [80, 90, 0, 0]);
    assert_eq!(direct[2]["image"].values::<u8>().unwrap()[24..], [0; 24]);
    assert_eq!(direct[2].real_rows, 2);
}

#[test]
fn a_wrong_image_size_is_still_the_exact_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), 3);
    let spec = FeatureSpec::new()
        .fixed_len("image", DType::Bytes, &[])
        .fixed_len("label", DType::Int64, &[]);
    let err = Pipeline::from_files([file.as_str()])
        .unwrap()
        .parse(spec)
        .decode_raw("image", &[2, 2, 2])
        .batch(4, false)
        .build()
        .unwrap()
        .next_batch()
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("image") && text.contains("12"), "{text}");
}
