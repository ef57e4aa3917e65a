//! Every bad directory, split or feature is a typed error naming it.

use infeed::pipeline::{Pipeline, PipelineError};
use infeed::tfds::TfdsError;

use super::hand::tiny;

fn tfds_err(r: Result<Pipeline, PipelineError>) -> TfdsError {
    match r {
        Err(PipelineError::Tfds(e)) => e,
        Err(other) => panic!("not a TFDS error: {other:?}"),
        Ok(_) => panic!("no error"),
    }
}

#[test]
fn a_missing_split_names_the_available_ones() {
    let root = tempfile::tempdir().unwrap();
    let dir = tiny(root.path());
    let err = tfds_err(Pipeline::from_tfds(&dir, "validation[:10%]"));
    assert!(
        matches!(&err, TfdsError::UnknownSplit { split, available, .. }
            if split == "validation" && available == &["train", "test"]),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("{dir}: no split \"validation\"; the dataset has splits \"train\", \"test\"")
    );
    let err = tfds_err(Pipeline::from_tfds(&dir, "train[:11]"));
    assert!(matches!(err, TfdsError::BadSplit { .. }), "{err:?}");
    let err = tfds_err(Pipeline::from_tfds(&dir, "train[5:5]"));
    assert!(matches!(err, TfdsError::EmptySlice { .. }), "{err:?}");
}

#[test]
fn another_file_format_is_refused_by_name() {
    let root = tempfile::tempdir().unwrap();
    let dir = tiny(root.path());
    let info = std::path::Path::new(&dir).join("dataset_info.json");
    let text = std::fs::read_to_string(&info).unwrap();
    std::fs::write(&info, text.replace("\"tfrecord\"", "\"array_record\"")).unwrap();
    let err = tfds_err(Pipeline::from_tfds(&dir, "train"));
    assert!(
        matches!(&err, TfdsError::UnsupportedFormat { format, .. } if format == "array_record"),
        "{err:?}"
    );
    assert!(err.to_string().contains(&dir), "{err}");
}

#[test]
fn missing_and_malformed_files_are_named() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("nothing/1.0.0").display().to_string();
    let err = tfds_err(Pipeline::from_tfds(&missing, "train"));
    assert!(
        matches!(&err, TfdsError::Read { path, .. } if path == &format!("{missing}/dataset_info.json")),
        "{err:?}"
    );
    let dir = tiny(root.path());
    let info = std::path::Path::new(&dir).join("dataset_info.json");
    std::fs::write(&info, "{\"name\": \"tiny\", \"splits\": [").unwrap();
    let err = tfds_err(Pipeline::from_tfds(&dir, "train"));
    assert!(
        matches!(&err, TfdsError::Json { path, .. } if path.ends_with("/dataset_info.json")),
        "{err:?}"
    );
}

#[test]
fn an_unknown_feature_type_fails_the_spec_not_the_records() {
    let root = tempfile::tempdir().unwrap();
    let dir = tiny(root.path());
    let features = std::path::Path::new(&dir).join("features.json");
    std::fs::write(
        &features,
        r#"{"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "featuresDict": {"features": {"clip": {
              "pythonClassName": "tensorflow_datasets.core.features.video_feature.Video",
              "video": {}}}}}"#,
    )
    .unwrap();
    // The records can still be read, with a spec of one's own.
    let p = Pipeline::from_tfds(&dir, "train").unwrap();
    assert_eq!(p.build_raw(100, false).unwrap().count(), 1);
    let err = match p.tfds_spec() {
        Err(PipelineError::Tfds(e)) => e,
        other => panic!("{other:?}"),
    };
    assert!(
        matches!(&err, TfdsError::UnknownFeature { feature, type_name, path }
            if feature == "clip" && type_name.ends_with(".Video") && path.ends_with("features.json")),
        "{err:?}"
    );
    // tfds_spec of a pipeline that is not a TFDS dataset is a config error.
    let plain = Pipeline::from_files([format!("{dir}/tiny-test.tfrecord-00000-of-00002")]).unwrap();
    assert!(matches!(plain.tfds_spec(), Err(PipelineError::Config(_))));
}
