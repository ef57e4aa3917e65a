//! The wire scan that buckets and packs records agrees with the parser on
//! every TensorFlow-written and hand-encoded test record, and on mangled
//! bytes it never panics and never disagrees with a successful parse.

use infeed::example::{Column, ExampleParser, LengthError, feature_length, longest_feature_length};
use infeed::spec::{DType, FeatureSpec};
use proptest::prelude::*;

use crate::support::testdata;
use crate::support::tfrecord::read_file;

fn records(name: &str) -> Vec<bytes::Bytes> {
    read_file(testdata(name))
        .into_iter()
        .map(|r| r.data)
        .collect()
}

/// The parser's count of values of `feature` in `record`, if it parses.
fn parsed_len(record: &[u8], feature: &str, dtype: DType) -> Option<usize> {
    let spec = FeatureSpec::new().var_len(feature, dtype);
    let batch = ExampleParser::new(&spec).parse(&[record]).ok()?;
    match batch.get(feature) {
        Some(Column::Ragged { row_splits, .. }) => Some(row_splits[1] - row_splits[0]),
        _ => None,
    }
}

#[test]
fn agrees_with_the_parser_on_every_test_record() {
    let mut checked = 0;
    for (file, features) in [
        (
            "examples.tfrecord",
            &["tokens", "label", "embedding", "unset", "nope"][..],
        ),
        ("packing.tfrecord", &["a"][..]),
        ("lm-sample.tfrecord", &["input_ids", "attention_mask"][..]),
    ] {
        for record in records(file) {
            for &feature in features {
                for dtype in [DType::Int64, DType::Float32, DType::Bytes] {
                    let scanned = feature_length(&record, feature, dtype.wire_kind());
                    match parsed_len(&record, feature, dtype) {
                        Some(n) => assert_eq!(scanned, Ok(n), "{file} {feature} {dtype}"),
                        None => assert!(
                            matches!(scanned, Err(LengthError::Kind { .. })),
                            "{file} {feature} {dtype}: {scanned:?}"
                        ),
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 6 * 5 * 3 + 8 * 3 + 256 * 2 * 3);
}

#[test]
fn the_longest_of_several_features_is_the_most_any_of_them_holds() {
    use infeed::spec::WireKind;
    let names = ["tokens", "label", "embedding", "unset", "nope"];
    let kinds = [
        WireKind::Int64List,
        WireKind::Int64List,
        WireKind::FloatList,
        WireKind::Int64List,
        WireKind::BytesList,
    ];
    for record in records("examples.tfrecord") {
        let features: Vec<(&str, WireKind)> = names.iter().copied().zip(kinds).collect();
        let one_by_one: Vec<usize> = features
            .iter()
            .map(|&(f, k)| feature_length(&record, f, k).unwrap())
            .collect();
        let most = one_by_one.iter().copied().max().unwrap();
        assert_eq!(longest_feature_length(&record, &features), Ok(most));
        // More than one pass holds (8 features a pass): the same answer.
        let many: Vec<(&str, WireKind)> = features.iter().cycle().take(19).copied().collect();
        assert_eq!(longest_feature_length(&record, &many), Ok(most));
        // An error names the feature it concerns: index 11 of 12 here.
        let mut wrong = many[..11].to_vec();
        wrong.push(("embedding", WireKind::Int64List));
        if one_by_one[2] > 0 {
            assert!(matches!(
                longest_feature_length(&record, &wrong),
                Err((11, LengthError::Kind { .. }))
            ));
        }
    }
}

proptest! {
    #[test]
    fn mangled_records_never_panic_nor_disagree_with_a_parse(
        which in 0usize..14,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut all = records("examples.tfrecord");
        all.extend(records("packing.tfrecord"));
        let mut record = all[which].to_vec();
        for (at, byte) in flips {
            let i = at.index(record.len());
            record[i] = byte;
        }
        record.truncate(cut.index(record.len() + 1));
        for (feature, dtype) in [("tokens", DType::Int64), ("a", DType::Int64), ("a", DType::Float32), ("embedding", DType::Float32)] {
            let scanned = feature_length(&record, feature, dtype.wire_kind());
            if let Some(n) = parsed_len(&record, feature, dtype) {
                prop_assert_eq!(scanned, Ok(n));
            }
        }
    }
}

/// Found by the property above: a malformed `Int64List` (a group tag) that
/// a later `FloatList` overrides is never decoded by the parser, so the scan
/// must not look into it either.
#[test]
fn a_malformed_list_that_loses_the_oneof_is_no_error() {
    // features { feature { key "a" value {
    //   int64_list { <tag 0x03: field 0, start group> 1 1 }
    //   float_list { value: 0.5 } } } }
    let record = [
        0x0a, 0x14, 0x0a, 0x12, 0x0a, 0x01, b'a', 0x12, 0x0d, 0x1a, 0x03, 0x03, 0x01, 0x01, 0x12,
        0x06, 0x0a, 0x04, 0x00, 0x00, 0x00, 0x3f,
    ];
    assert_eq!(parsed_len(&record, "a", DType::Float32), Some(1));
    assert_eq!(
        feature_length(&record, "a", DType::Float32.wire_kind()),
        Ok(1)
    );
    // Asked as int64, it is the float list that decides: a kind mismatch.
    assert!(matches!(
        feature_length(&record, "a", DType::Int64.wire_kind()),
        Err(LengthError::Kind { .. })
    ));
}
