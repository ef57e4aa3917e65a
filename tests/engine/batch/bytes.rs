//! Bytes and text in batches: a bytes feature without a raw decode becomes a
//! bytes column of the batch, exact values and `b""` padding, beside the
//! tensors; a variable-length one is padded like any other, its mask a tensor.

use infeed::batch::{
    BatchErrorKind, BatchPlan, LengthPolicy, PackPlan, PlanError, TensorType, Truncation,
};
use infeed::example::parse_examples;
use infeed::example::proto::{Example, Feature};
use infeed::spec::{DType, FeatureSpec};
use prost::Message;

fn record(text: &str, tags: &[&str], id: i64) -> Vec<u8> {
    Example::from_features([
        ("text", Feature::bytes([text.as_bytes().to_vec()])),
        (
            "tags",
            Feature::bytes(tags.iter().map(|t| t.as_bytes().to_vec())),
        ),
        ("id", Feature::int64s(vec![id])),
    ])
    .encode_to_vec()
}

fn spec() -> FeatureSpec {
    FeatureSpec::new()
        .fixed_len("text", DType::Bytes, &[])
        .var_len("tags", DType::Bytes)
        .fixed_len("id", DType::Int64, &[])
}

fn strings(values: impl Iterator<Item = impl AsRef<[u8]>>) -> Vec<String> {
    values
        .map(|v| String::from_utf8(v.as_ref().to_vec()).unwrap())
        .collect()
}

#[test]
fn text_and_tags_come_as_bytes_columns_with_empty_padding() {
    let records = [
        record("héllo wörld", &["a", "bb"], 7),
        record("", &[], 8),
        record("third", &["c", "d", "e"], 9),
    ];
    let parsed = parse_examples(&spec(), &records).unwrap();
    let asm = BatchPlan::new(&spec(), 4)
        .pad(&["tags"], LengthPolicy::new().max_length(4))
        .build()
        .unwrap();
    assert_eq!(asm.bytes_names(), ["text", "tags"]);
    assert_eq!(asm.tensor_names(), ["tags_mask", "id"]);
    let b = asm.assemble(&parsed).unwrap();
    assert_eq!(b.real_rows, 3);

    let text = b.get_bytes("text").unwrap();
    assert_eq!(text.shape(), &[4]);
    assert_eq!(strings(text.iter()), ["héllo wörld", "", "third", ""]);
    assert_eq!(text.data(), "héllo wörldthird".as_bytes());
    assert_eq!(text.offsets(), &[0, 13, 13, 18, 18]);

    // Padded to the batch's longest (3), b"" after each row's tags.
    let tags = b.get_bytes("tags").unwrap();
    assert_eq!(tags.shape(), &[4, 3]);
    assert_eq!(
        strings(tags.iter()),
        ["a", "bb", "", "", "", "", "c", "d", "e", "", "", ""]
    );
    let mask = b["tags_mask"].values::<u8>().unwrap();
    assert_eq!(mask, [1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0]);
    assert_eq!(b["id"].values::<i64>().unwrap(), [7, 8, 9, 0]);

    // The shapes the plan promises are the tensors' (bytes stay on the host).
    assert!(asm.shapes().contains(&b.shape()));
    // The mask and ids, then the text's and the tags' bytes.
    assert_eq!(b.num_bytes(), 4 * 3 + 4 * 8 + 18 + 6);
}

#[test]
fn truncation_keeps_the_end_and_padding_batches_hold_empty_values() {
    let records = [record("x", &["1", "2", "3", "4", "5"], 1)];
    let parsed = parse_examples(&spec(), &records).unwrap();
    let asm = BatchPlan::new(&spec(), 2)
        .pad(
            &["tags"],
            LengthPolicy::new()
                .fixed_length(2)
                .truncation(Truncation::KeepEnd),
        )
        .build()
        .unwrap();
    let b = asm.assemble(&parsed).unwrap();
    assert_eq!(
        strings(b.get_bytes("tags").unwrap().iter()),
        ["4", "5", "", ""]
    );

    let pad = asm.padding_batch().unwrap();
    assert_eq!(pad.real_rows, 0);
    assert_eq!(strings(pad.get_bytes("text").unwrap().iter()), ["", ""]);
    assert_eq!(pad.get_bytes("tags").unwrap().shape(), &[2, 2]);
    assert!(pad.get_bytes("tags").unwrap().iter().all(|v| v.is_empty()));
    assert_eq!(pad["tags_mask"].values::<u8>().unwrap(), [0, 0, 0, 0]);

    let too_long = BatchPlan::new(&spec(), 2)
        .pad(&["tags"], LengthPolicy::new().fixed_length(2))
        .build()
        .unwrap()
        .assemble(&parsed)
        .unwrap_err();
    assert_eq!(too_long.record, Some(0));
    assert_eq!(too_long.feature.as_deref(), Some("tags"));
    assert_eq!(
        too_long.kind,
        BatchErrorKind::TooLong {
            length: 5,
            limit: 2
        }
    );
}

#[test]
fn a_fixed_length_bytes_feature_of_several_values_keeps_its_shape() {
    let spec = FeatureSpec::new().fixed_len("pair", DType::Bytes, &[2]);
    let records: Vec<Vec<u8>> = [["a", "b"], ["cc", "dd"]]
        .iter()
        .map(|p| {
            Example::from_features([(
                "pair",
                Feature::bytes(p.iter().map(|s| s.as_bytes().to_vec())),
            )])
            .encode_to_vec()
        })
        .collect();
    let parsed = parse_examples(&spec, &records).unwrap();
    let b = BatchPlan::new(&spec, 3)
        .build()
        .unwrap()
        .assemble(&parsed)
        .unwrap();
    assert!(b.tensors.is_empty());
    let pair = b.get_bytes("pair").unwrap();
    assert_eq!(pair.shape(), &[3, 2]);
    assert_eq!(strings(pair.iter()), ["a", "b", "cc", "dd", "", ""]);
}

#[test]
fn bytes_digest_and_the_pad_value_that_is_not_a_byte_string() {
    let records = [record("a", &["t"], 1), record("b", &[], 2)];
    let parsed = parse_examples(&spec(), &records).unwrap();
    // A numeric pad value for a group that also holds bytes applies to the numbers only.
    let asm = BatchPlan::new(&spec(), 2)
        .pad(&["tags"], LengthPolicy::new().max_length(2).pad_value(-1))
        .build()
        .unwrap();
    let b = asm.assemble(&parsed).unwrap();
    let mut other = b.clone();
    assert_eq!(b.digest(), other.digest());
    // The digest covers each bytes value, not only the tensors.
    let (shape, mut values) = other.bytes.remove(0).1.into_parts();
    values.data[0] = b'z';
    other.bytes.insert(
        0,
        (
            "text".into(),
            infeed::batch::BytesColumn::new(shape, values).unwrap(),
        ),
    );
    assert_ne!(b.digest(), other.digest());
}

#[test]
fn packing_refuses_bytes_and_casting_bytes_is_refused_by_name() {
    let Err(e) = PackPlan::new(&spec(), &["tags"], 8, 2).build() else {
        panic!("a bytes feature was packed");
    };
    assert_eq!(
        e,
        PlanError::NotNumeric {
            feature: "tags".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "feature \"tags\" holds bytes: only numeric features can be packed (tokenize text first)"
    );
    assert_eq!(
        BatchPlan::new(&spec(), 2)
            .pad_all(LengthPolicy::new().max_length(2))
            .cast("text", TensorType::I32)
            .build()
            .unwrap_err(),
        PlanError::BadCast {
            feature: "text".into(),
            from: DType::Bytes,
            to: TensorType::I32
        }
    );
}
