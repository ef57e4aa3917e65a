//! Mask settings: the type of every `<name>_mask`, per feature or for all,
//! no mask where a feature already is one; `shapes()` says so, and a state
//! saved under other masks is refused.

use super::grouping::*;
use infeed::batch::{MaskType, TensorType};
use infeed::pipeline::{ParsedPipeline, Pipeline, PipelineError, StateError};

/// Records of lengths 3 and 1 (and 2, 2), batches of 2 padded to a
/// multiple of 4.
fn padded(dir: &std::path::Path) -> ParsedPipeline {
    let files = write_lm_files(dir, &[vec![3, 1, 2, 2]]);
    Pipeline::from_files(files)
        .unwrap()
        .parse(spec())
        .batch(2, false)
        .pad_to_multiple_of(4)
        .max_length(8)
}

fn shape_strings(p: &ParsedPipeline) -> Vec<String> {
    p.shapes().unwrap().iter().map(|s| s.to_string()).collect()
}

#[test]
fn default_masks_keep_the_features_type() {
    let dir = tempfile::tempdir().unwrap();
    let p = padded(dir.path());
    assert_eq!(
        shape_strings(&p)[0],
        "ids: i64[2, 4], ids_mask: i64[2, 4], mask: i64[2, 4], mask_mask: i64[2, 4]"
    );
    let b = p.build().unwrap().next_batch().unwrap().unwrap();
    assert_eq!(
        b["ids_mask"].values::<i64>().unwrap(),
        [1, 1, 1, 0, 1, 0, 0, 0]
    );
}

#[test]
fn u8_masks_are_one_byte_per_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = padded(dir.path()).masks(MaskType::Type(TensorType::U8));
    assert_eq!(
        shape_strings(&p)[0],
        "ids: i64[2, 4], ids_mask: u8[2, 4], mask: i64[2, 4], mask_mask: u8[2, 4]"
    );
    let b = p.build().unwrap().next_batch().unwrap().unwrap();
    assert_eq!(
        b["ids_mask"].values::<u8>().unwrap(),
        [1, 1, 1, 0, 1, 0, 0, 0]
    );
    assert_eq!(
        b["mask_mask"].values::<u8>().unwrap(),
        [1, 1, 1, 0, 1, 0, 0, 0]
    );
    assert_eq!(
        b["ids"].values::<i64>().unwrap(),
        [1, 2, 3, 0, 1001, 0, 0, 0]
    );
}

#[test]
fn no_masks_where_the_data_carries_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let p = padded(dir.path()).masks(MaskType::None);
    assert_eq!(
        shape_strings(&p),
        [
            "ids: i64[2, 4], mask: i64[2, 4]",
            "ids: i64[2, 8], mask: i64[2, 8]"
        ]
    );
    let b = p.build().unwrap().next_batch().unwrap().unwrap();
    assert!(b.get("ids_mask").is_none());
    assert!(b.get("mask_mask").is_none());
    // The lm's attention_mask is the mask: 1 on values, 0 on padding.
    assert_eq!(b["mask"].values::<i64>().unwrap(), [1, 1, 1, 0, 1, 0, 0, 0]);
}

#[test]
fn a_per_feature_mask_overrides_the_all_setting() {
    let dir = tempfile::tempdir().unwrap();
    let p = padded(dir.path())
        .masks(MaskType::None)
        .mask("ids", MaskType::Type(TensorType::U8));
    assert_eq!(
        shape_strings(&p)[0],
        "ids: i64[2, 4], ids_mask: u8[2, 4], mask: i64[2, 4]"
    );
    let b = p.build().unwrap().next_batch().unwrap().unwrap();
    assert_eq!(
        b["ids_mask"].values::<u8>().unwrap(),
        [1, 1, 1, 0, 1, 0, 0, 0]
    );
    assert!(b.get("mask_mask").is_none());
}

#[test]
fn packed_masks_follow_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_lm_files(dir.path(), &[vec![3, 1]]);
    let p = Pipeline::from_files(files)
        .unwrap()
        .parse(spec())
        .pack(4)
        .batch(1, false)
        .masks(MaskType::Type(TensorType::U8))
        .mask("mask", MaskType::None);
    assert_eq!(
        shape_strings(&p),
        [
            "ids: i64[1, 4], ids_mask: u8[1, 4], mask: i64[1, 4], segment_ids: i32[1, 4], positions: i32[1, 4]"
        ]
    );
    let b = p.build().unwrap().next_batch().unwrap().unwrap();
    assert_eq!(b["ids_mask"].values::<u8>().unwrap(), [1, 1, 1, 1]);
}

#[test]
fn a_mask_on_an_unknown_feature_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = padded(dir.path())
        .mask("nope", MaskType::None)
        .shapes()
        .unwrap_err();
    assert!(err.to_string().contains("\"nope\""), "{err}");
}

#[test]
fn a_state_saved_under_other_masks_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut batches = padded(dir.path()).build().unwrap();
    batches.next_batch().unwrap().unwrap();
    let state = batches.state();
    // The same masks restore.
    let same = padded(dir.path()).resume_from(&state).build();
    assert!(same.is_ok());
    for other in [
        padded(dir.path()).masks(MaskType::None),
        padded(dir.path()).masks(MaskType::Type(TensorType::U8)),
        padded(dir.path()).mask("ids", MaskType::None),
    ] {
        match other.resume_from(&state).build() {
            Err(PipelineError::BadState(StateError::OtherPipeline { found, expected })) => {
                assert_ne!(found, expected)
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a state of other masks restored"),
        }
    }
}

#[test]
fn mask_words_parse() {
    assert_eq!("u8".parse(), Ok(MaskType::Type(TensorType::U8)));
    assert_eq!("bool".parse(), Ok(MaskType::Type(TensorType::U8)));
    assert_eq!("none".parse(), Ok(MaskType::None));
    assert_eq!("auto".parse(), Ok(MaskType::Auto));
    assert_eq!("i32".parse(), Ok(MaskType::Type(TensorType::I32)));
    assert!("int8".parse::<MaskType>().is_err());
    assert_eq!(MaskType::Type(TensorType::U8).to_string(), "u8");
}
