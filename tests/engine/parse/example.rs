//! The batch parser on `tf.train.Example` records: exact values for every
//! dtype and layout, TensorFlow's semantics for defaults, duplicates and
//! empty features, protobuf encodings built by hand, and exact errors.
//!
//! The TensorFlow behaviours asserted here were checked against
//! `tf.io.parse_example` (TensorFlow 2.21) on the same bytes.

use infeed::example::proto::{Example, Feature};
use infeed::example::{
    BytesValues, Column, ExampleParser, ParseError, ParseErrorKind, ParsedBatch, Values,
    parse_examples,
};
use infeed::spec::{DType, DefaultValue, FeatureSpec, WireKind};
use prost::Message;

use super::{col, err};
use crate::support::wire as wire_common;

/// Protobuf wire bytes by hand, to build encodings prost never writes.
mod enc {
    pub use super::wire_common::{entry, ints, ld, tag, varint};

    /// Int64List body, packed.
    pub fn i64_packed(vals: &[i64]) -> Vec<u8> {
        let body: Vec<u8> = vals.iter().flat_map(|&v| varint(v as u64)).collect();
        ld(1, &body)
    }

    /// Int64List body, one field per value.
    pub fn i64_unpacked(vals: &[i64]) -> Vec<u8> {
        vals.iter()
            .flat_map(|&v| [tag(1, 0), varint(v as u64)].concat())
            .collect()
    }

    /// FloatList body, packed.
    pub fn f32_packed(vals: &[f32]) -> Vec<u8> {
        let body: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        ld(1, &body)
    }

    /// FloatList body, one field per value.
    pub fn f32_unpacked(vals: &[f32]) -> Vec<u8> {
        vals.iter()
            .flat_map(|v| [tag(1, 5), v.to_le_bytes().to_vec()].concat())
            .collect()
    }

    /// BytesList body.
    pub fn bytes_list(vals: &[&[u8]]) -> Vec<u8> {
        vals.iter().flat_map(|v| ld(1, v)).collect()
    }

    pub fn bytes_feature(body: &[u8]) -> Vec<u8> {
        ld(1, body)
    }

    pub fn float_feature(body: &[u8]) -> Vec<u8> {
        ld(2, body)
    }

    pub fn int64_feature(body: &[u8]) -> Vec<u8> {
        ld(3, body)
    }

    /// An Example with one `features` field holding these entries.
    pub fn example(entries: &[Vec<u8>]) -> Vec<u8> {
        ld(1, &entries.concat())
    }
}

use enc::*;

fn ragged(values: Values, row_splits: &[usize]) -> Column {
    Column::Ragged {
        values,
        row_splits: row_splits.to_vec(),
        inner_shape: vec![],
    }
}

fn dense(shape: &[usize], values: Values) -> Column {
    Column::Dense {
        shape: shape.to_vec(),
        values,
    }
}

fn bytes(vals: &[&[u8]]) -> Values {
    Values::Bytes(vals.iter().collect())
}

#[test]
fn every_dtype_fixed_and_var_len() {
    let records = [
        Example::from_features([
            ("i", Feature::int64s(vec![1, -2])),
            ("n", Feature::int64s(vec![7, -8])),
            ("f", Feature::floats(vec![0.5, -1.25])),
            ("s", Feature::bytes([b"ab".to_vec(), b"".to_vec()])),
            ("vi", Feature::int64s(vec![10, 11, 12])),
            ("vn", Feature::int64s(vec![-1])),
            ("vf", Feature::floats(vec![3.0])),
            ("vs", Feature::bytes([b"x".to_vec()])),
        ])
        .encode_to_vec(),
        Example::from_features([
            ("i", Feature::int64s(vec![3, 4])),
            ("n", Feature::int64s(vec![i32::MAX as i64, i32::MIN as i64])),
            ("f", Feature::floats(vec![f32::INFINITY, 0.0])),
            ("s", Feature::bytes([b"cd".to_vec(), b"efg".to_vec()])),
            ("vi", Feature::int64s(vec![])),
            ("vf", Feature::floats(vec![4.0, 5.0])),
            ("vs", Feature::bytes([b"".to_vec(), b"yz".to_vec()])),
        ])
        .encode_to_vec(),
    ];
    let spec = FeatureSpec::new()
        .fixed_len("i", DType::Int64, &[2])
        .fixed_len("n", DType::Int32, &[2])
        .fixed_len("f", DType::Float32, &[2])
        .fixed_len("s", DType::Bytes, &[2])
        .var_len("vi", DType::Int64)
        .var_len("vn", DType::Int32)
        .var_len("vf", DType::Float32)
        .var_len("vs", DType::Bytes);
    let batch = parse_examples(&spec, &records).unwrap();
    let want = ParsedBatch {
        num_records: 2,
        columns: vec![
            ("i".into(), dense(&[2, 2], Values::Int64(vec![1, -2, 3, 4]))),
            (
                "n".into(),
                dense(&[2, 2], Values::Int32(vec![7, -8, i32::MAX, i32::MIN])),
            ),
            (
                "f".into(),
                dense(
                    &[2, 2],
                    Values::Float32(vec![0.5, -1.25, f32::INFINITY, 0.0]),
                ),
            ),
            (
                "s".into(),
                dense(&[2, 2], bytes(&[b"ab", b"", b"cd", b"efg"])),
            ),
            (
                "vi".into(),
                ragged(Values::Int64(vec![10, 11, 12]), &[0, 3, 3]),
            ),
            ("vn".into(), ragged(Values::Int32(vec![-1]), &[0, 1, 1])),
            (
                "vf".into(),
                ragged(Values::Float32(vec![3.0, 4.0, 5.0]), &[0, 1, 3]),
            ),
            ("vs".into(), ragged(bytes(&[b"x", b"", b"yz"]), &[0, 1, 3])),
        ],
    };
    assert_eq!(batch, want);
}

#[test]
fn scalar_and_multi_dim_shapes() {
    let records: Vec<Vec<u8>> = (0..3)
        .map(|r| {
            let base = r as f32 * 10.0;
            let grid: Vec<f32> = (0..6).map(|i| base + i as f32).collect();
            Example::from_features([
                ("label", Feature::int64s(vec![r])),
                ("grid", Feature::floats(grid)),
            ])
            .encode_to_vec()
        })
        .collect();
    let spec = FeatureSpec::new()
        .fixed_len("grid", DType::Float32, &[2, 3])
        .fixed_len("label", DType::Int64, &[]);
    let batch = parse_examples(&spec, &records).unwrap();
    assert_eq!(batch.num_records, 3);
    // Spec order, not record order.
    assert_eq!(batch.columns[0].0, "grid");
    assert_eq!(batch.columns[1].0, "label");
    let grid: Vec<f32> = (0..3)
        .flat_map(|r| (0..6).map(move |i| r as f32 * 10.0 + i as f32))
        .collect();
    assert_eq!(
        col(&batch, "grid"),
        &dense(&[3, 2, 3], Values::Float32(grid))
    );
    assert_eq!(
        col(&batch, "label"),
        &dense(&[3], Values::Int64(vec![0, 1, 2]))
    );
}

#[test]
fn defaults_fill_missing_features() {
    let records = [
        example(&[]),
        Vec::new(), // an empty record is an Example with no features
        example(&[entry("other", &ints(&[1]))]),
    ];
    let spec = FeatureSpec::new()
        .fixed_len_with_default("full", DType::Int64, &[2], DefaultValue::Int64(vec![4, 5]))
        .unwrap()
        .fixed_len_with_default(
            "one",
            DType::Float32,
            &[3],
            DefaultValue::Float32(vec![0.5]),
        )
        .unwrap()
        .fixed_len_with_default(
            "s",
            DType::Bytes,
            &[2],
            DefaultValue::Bytes(vec![b"d".to_vec()]),
        )
        .unwrap()
        .fixed_len_with_default("n", DType::Int32, &[], DefaultValue::Int64(vec![-9]))
        .unwrap()
        .var_len("v", DType::Int64);
    let batch = parse_examples(&spec, &records).unwrap();
    assert_eq!(
        col(&batch, "full"),
        &dense(&[3, 2], Values::Int64(vec![4, 5, 4, 5, 4, 5]))
    );
    assert_eq!(
        col(&batch, "one"),
        &dense(&[3, 3], Values::Float32(vec![0.5; 9]))
    );
    assert_eq!(
        col(&batch, "s"),
        &dense(&[3, 2], bytes(&[b"d".as_slice(); 6]))
    );
    assert_eq!(
        col(&batch, "n"),
        &dense(&[3], Values::Int32(vec![-9, -9, -9]))
    );
    // A missing var-len feature has zero values.
    assert_eq!(
        col(&batch, "v"),
        &ragged(Values::Int64(vec![]), &[0, 0, 0, 0])
    );
}

#[test]
fn int32_default_out_of_range_is_an_error_when_used() {
    let spec = FeatureSpec::new()
        .fixed_len_with_default("n", DType::Int32, &[], DefaultValue::Int64(vec![1 << 40]))
        .unwrap();
    // Present: the default is never needed.
    let batch = parse_examples(&spec, &[example(&[entry("n", &ints(&[3]))])]).unwrap();
    assert_eq!(col(&batch, "n"), &dense(&[1], Values::Int32(vec![3])));
    let e =
        parse_examples(&spec, &[example(&[entry("n", &ints(&[3]))]), example(&[])]).unwrap_err();
    assert_eq!(
        e,
        err(1, "n", ParseErrorKind::Int32Overflow { value: 1 << 40 })
    );
}

/// TensorFlow: a `Feature` with no list set counts as absent for a
/// FixedLenFeature (default, or "required but could not be found") and as
/// no values for a VarLen/Ragged feature, for every dtype.
#[test]
fn empty_feature_is_absent_for_fixed_len_and_empty_for_var_len() {
    for (dtype, default, want) in [
        (
            DType::Int64,
            DefaultValue::Int64(vec![3]),
            Values::Int64(vec![3]),
        ),
        (
            DType::Float32,
            DefaultValue::Float32(vec![2.5]),
            Values::Float32(vec![2.5]),
        ),
        (
            DType::Bytes,
            DefaultValue::Bytes(vec![b"d".to_vec()]),
            bytes(&[b"d"]),
        ),
    ] {
        let rec = example(&[entry("a", &[])]);
        let with_default = FeatureSpec::new()
            .fixed_len_with_default("a", dtype, &[], default)
            .unwrap();
        let batch = parse_examples(&with_default, &[&rec]).unwrap();
        assert_eq!(col(&batch, "a"), &dense(&[1], want));

        let required = FeatureSpec::new().fixed_len("a", dtype, &[]);
        assert_eq!(
            parse_examples(&required, &[&rec]).unwrap_err(),
            err(0, "a", ParseErrorKind::Missing { dtype })
        );

        let var = FeatureSpec::new().var_len("a", dtype);
        let batch = parse_examples(&var, &[&rec]).unwrap();
        assert_eq!(col(&batch, "a").values().len(), 0);
    }
}

/// TensorFlow: a list that is present but empty is not absent: a
/// FixedLenFeature with a default still gets "Number of values != expected".
#[test]
fn present_empty_list_does_not_take_the_default() {
    for (dtype, feature) in [
        (DType::Int64, int64_feature(&[])),
        (DType::Float32, float_feature(&[])),
        (DType::Bytes, bytes_feature(&[])),
    ] {
        let default = match dtype {
            DType::Float32 => DefaultValue::Float32(vec![1.0]),
            DType::Bytes => DefaultValue::Bytes(vec![b"x".to_vec()]),
            _ => DefaultValue::Int64(vec![1]),
        };
        let spec = FeatureSpec::new()
            .fixed_len_with_default("a", dtype, &[], default)
            .unwrap();
        let rec = example(&[entry("a", &feature)]);
        assert_eq!(
            parse_examples(&spec, &[rec]).unwrap_err(),
            err(
                0,
                "a",
                ParseErrorKind::WrongCount {
                    expected: 1,
                    actual: 0
                }
            )
        );
        // A shape with no values accepts it.
        let spec = FeatureSpec::new().fixed_len("a", dtype, &[0]);
        let batch = parse_examples(&spec, &[example(&[entry("a", &feature)])]).unwrap();
        assert_eq!(col(&batch, "a").values().len(), 0);
        assert!(matches!(col(&batch, "a"), Column::Dense { shape, .. } if shape == &[1, 0]));
    }
}

#[test]
fn missing_required_feature_names_record_and_feature() {
    let records = [
        example(&[entry("label", &ints(&[1]))]),
        example(&[entry("label", &ints(&[2]))]),
        example(&[entry("other", &ints(&[3]))]),
    ];
    let spec = FeatureSpec::new().fixed_len("label", DType::Int64, &[]);
    let e = parse_examples(&spec, &records).unwrap_err();
    assert_eq!(
        e,
        err(
            2,
            "label",
            ParseErrorKind::Missing {
                dtype: DType::Int64
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "record 2, feature \"label\": required feature could not be found (data type: int64)"
    );
}

#[test]
fn wrong_count_names_record_feature_and_counts() {
    let records = [
        example(&[entry("label", &ints(&[1]))]),
        example(&[entry("label", &ints(&[1]))]),
        example(&[entry("label", &ints(&[1]))]),
        example(&[entry("label", &ints(&[1, 2]))]),
    ];
    let spec = FeatureSpec::new().fixed_len("label", DType::Int64, &[]);
    let e = parse_examples(&spec, &records).unwrap_err();
    assert_eq!(
        e,
        err(
            3,
            "label",
            ParseErrorKind::WrongCount {
                expected: 1,
                actual: 2
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "record 3, feature \"label\": expected 1 value, found 2"
    );
    let spec = FeatureSpec::new().fixed_len("label", DType::Int64, &[3]);
    let e = parse_examples(&spec, &records[..1]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "record 0, feature \"label\": expected 3 values, found 1"
    );
}

#[test]
fn type_mismatch_names_both_types() {
    let records = [
        example(&[entry("x", &ints(&[1]))]),
        example(&[entry("x", &float_feature(&f32_packed(&[1.0])))]),
    ];
    for spec in [
        FeatureSpec::new().fixed_len("x", DType::Int64, &[]),
        FeatureSpec::new().var_len("x", DType::Int64),
    ] {
        let e = parse_examples(&spec, &records).unwrap_err();
        assert_eq!(
            e,
            err(
                1,
                "x",
                ParseErrorKind::TypeMismatch {
                    expected: DType::Int64,
                    actual: WireKind::FloatList
                }
            )
        );
        assert_eq!(
            e.to_string(),
            "record 1, feature \"x\": data types don't match: expected int64 values, found float values"
        );
    }
    // An empty list of the wrong type is still the wrong type.
    let spec = FeatureSpec::new().var_len("x", DType::Bytes);
    let e = parse_examples(&spec, &[example(&[entry("x", &int64_feature(&[]))])]).unwrap_err();
    assert_eq!(
        e.kind,
        ParseErrorKind::TypeMismatch {
            expected: DType::Bytes,
            actual: WireKind::Int64List
        }
    );
}

#[test]
fn int32_overflow_reports_the_value() {
    let spec = FeatureSpec::new().var_len("ids", DType::Int32);
    for bad in [1i64 << 31, -(1i64 << 31) - 1, i64::MAX, i64::MIN] {
        let records = [
            example(&[entry("ids", &ints(&[1, 2]))]),
            example(&[entry("ids", &ints(&[5, bad, 7]))]),
        ];
        let e = parse_examples(&spec, &records).unwrap_err();
        assert_eq!(
            e,
            err(1, "ids", ParseErrorKind::Int32Overflow { value: bad })
        );
        assert_eq!(
            e.to_string(),
            format!("record 1, feature \"ids\": int64 value {bad} does not fit in int32")
        );
    }
    // Unpacked values are checked too.
    let rec = example(&[entry(
        "ids",
        &int64_feature(&i64_unpacked(&[3_000_000_000])),
    )]);
    assert_eq!(
        parse_examples(&spec, &[rec]).unwrap_err().kind,
        ParseErrorKind::Int32Overflow {
            value: 3_000_000_000
        }
    );
    // The limits themselves fit.
    let rec = example(&[entry("ids", &ints(&[i32::MAX as i64, i32::MIN as i64, -1]))]);
    let batch = parse_examples(&spec, &[rec]).unwrap();
    assert_eq!(
        col(&batch, "ids"),
        &ragged(Values::Int32(vec![i32::MAX, i32::MIN, -1]), &[0, 3])
    );
}

#[test]
fn unpacked_and_mixed_encodings() {
    let records = [
        example(&[
            entry("i", &int64_feature(&i64_unpacked(&[1, -1, 300]))),
            entry("f", &float_feature(&f32_unpacked(&[1.5, -2.0]))),
        ]),
        // Several packed runs and unpacked values in one list: protobuf
        // concatenates them all.
        example(&[
            entry(
                "i",
                &int64_feature(
                    &[i64_packed(&[4]), i64_unpacked(&[5]), i64_packed(&[6, 7])].concat(),
                ),
            ),
            entry(
                "f",
                &float_feature(&[f32_unpacked(&[3.0]), f32_packed(&[4.0, 5.0])].concat()),
            ),
        ]),
    ];
    let spec = FeatureSpec::new()
        .var_len("i", DType::Int64)
        .var_len("f", DType::Float32);
    let batch = parse_examples(&spec, &records).unwrap();
    assert_eq!(
        col(&batch, "i"),
        &ragged(Values::Int64(vec![1, -1, 300, 4, 5, 6, 7]), &[0, 3, 7])
    );
    assert_eq!(
        col(&batch, "f"),
        &ragged(Values::Float32(vec![1.5, -2.0, 3.0, 4.0, 5.0]), &[0, 2, 5])
    );
    let fixed = FeatureSpec::new().fixed_len("i", DType::Int64, &[3]);
    let batch = parse_examples(&fixed, &records[..1]).unwrap();
    assert_eq!(
        col(&batch, "i"),
        &dense(&[1, 3], Values::Int64(vec![1, -1, 300]))
    );
}

#[test]
fn negative_and_extreme_varints() {
    let spec = FeatureSpec::new().var_len("i", DType::Int64);
    let vals = [
        -1,
        i64::MIN,
        i64::MAX,
        -300,
        0,
        127,
        128,
        1 << 56,
        -(1 << 56),
    ];
    let batch = parse_examples(&spec, &[example(&[entry("i", &ints(&vals))])]).unwrap();
    assert_eq!(
        col(&batch, "i"),
        &ragged(Values::Int64(vals.to_vec()), &[0, 9])
    );

    // Protobuf (and TensorFlow) drop the bits past 64 in a tenth byte.
    let mut high = vec![0xffu8; 9];
    high.push(0x7f);
    let rec = example(&[entry("i", &int64_feature(&ld(1, &high)))]);
    let batch = parse_examples(&spec, &[rec]).unwrap();
    assert_eq!(col(&batch, "i").values(), &Values::Int64(vec![-1]));

    // Eleven bytes is not a varint.
    let long = [vec![0xffu8; 10], vec![0x01]].concat();
    let list = int64_feature(&ld(1, &long));
    let rec = example(&[entry("i", &list)]);
    // Offsets: example tag+len (2), entry tag+len (2), key field (3),
    // value tag+len (2), Feature tag+len (2), list tag+len (2): values at 13.
    assert_eq!(rec[13..], long[..]);
    assert_eq!(
        parse_examples(&spec, &[rec]).unwrap_err(),
        err(
            0,
            "i",
            ParseErrorKind::Malformed {
                offset: 13,
                message: "varint longer than 10 bytes".into()
            }
        )
    );
}

#[test]
fn last_entry_of_a_key_wins() {
    let spec = FeatureSpec::new()
        .fixed_len("a", DType::Int64, &[])
        .var_len("b", DType::Int64);
    // Within one `features` message, and across repeated ones (merged).
    let records = [
        example(&[
            entry("a", &ints(&[1])),
            entry("b", &ints(&[1, 1])),
            entry("a", &ints(&[2])),
        ]),
        [
            example(&[entry("a", &ints(&[3])), entry("b", &ints(&[3]))]),
            example(&[entry("a", &ints(&[4]))]),
        ]
        .concat(),
        // An earlier entry of the wrong type, or malformed, is never decoded.
        example(&[
            entry("a", &float_feature(&f32_packed(&[1.0]))),
            entry("b", &int64_feature(&[0x0a, 0x05, 0x01])),
            entry("a", &ints(&[5])),
            entry("b", &ints(&[5])),
        ]),
    ];
    let batch = parse_examples(&spec, &records).unwrap();
    assert_eq!(col(&batch, "a"), &dense(&[3], Values::Int64(vec![2, 4, 5])));
    assert_eq!(
        col(&batch, "b"),
        &ragged(Values::Int64(vec![1, 1, 3, 5]), &[0, 2, 3, 4])
    );
}

/// TensorFlow skips an empty `Feature` of a dense feature before marking it
/// seen, so an earlier entry of the key still counts; for a var-len feature
/// the empty last entry wins (no values).
#[test]
fn empty_last_entry_hides_nothing_for_fixed_len() {
    let rec = example(&[entry("a", &ints(&[1])), entry("a", &[])]);
    let fixed = FeatureSpec::new()
        .fixed_len_with_default("a", DType::Int64, &[], DefaultValue::Int64(vec![9]))
        .unwrap();
    let batch = parse_examples(&fixed, &[&rec]).unwrap();
    assert_eq!(col(&batch, "a"), &dense(&[1], Values::Int64(vec![1])));
    let var = FeatureSpec::new().var_len("a", DType::Int64);
    let batch = parse_examples(&var, &[&rec]).unwrap();
    assert_eq!(col(&batch, "a"), &ragged(Values::Int64(vec![]), &[0, 0]));
}

#[test]
fn unknown_fields_are_skipped_everywhere() {
    let unknown = [
        [tag(5, 0), varint(7)].concat(),
        [tag(6, 1), vec![1; 8]].concat(),
        ld(7, b"xyz"),
        [tag(8, 5), vec![2; 4]].concat(),
        [tag(1000, 0), varint(u64::MAX)].concat(),
    ]
    .concat();
    let list = [unknown.clone(), i64_packed(&[1, 2]), unknown.clone()].concat();
    let feature = [unknown.clone(), int64_feature(&list), unknown.clone()].concat();
    let entry = ld(
        1,
        &[
            unknown.clone(),
            ld(1, b"a"),
            unknown.clone(),
            ld(2, &feature),
        ]
        .concat(),
    );
    let features = [unknown.clone(), entry, unknown.clone()].concat();
    let rec = [unknown.clone(), ld(1, &features), unknown].concat();
    let spec = FeatureSpec::new().fixed_len("a", DType::Int64, &[2]);
    let batch = parse_examples(&spec, &[rec]).unwrap();
    assert_eq!(col(&batch, "a"), &dense(&[1, 2], Values::Int64(vec![1, 2])));
}

#[test]
fn map_entries_in_any_order_or_partial() {
    let spec = FeatureSpec::new()
        .var_len("a", DType::Int64)
        .var_len("", DType::Int64);
    let records = [
        // Value before key.
        ld(1, &ld(1, &[ld(2, &ints(&[1])), ld(1, b"a")].concat())),
        // Key only: how prost writes an empty Feature (TensorFlow's fast
        // parser rejects this record; protobuf reads an empty Feature).
        ld(1, &ld(1, &ld(1, b"a"))),
        // Value only: the key is "".
        ld(1, &ld(1, &ld(2, &ints(&[2])))),
    ];
    let batch = parse_examples(&spec, &records).unwrap();
    assert_eq!(
        col(&batch, "a"),
        &ragged(Values::Int64(vec![1]), &[0, 1, 1, 1])
    );
    assert_eq!(
        col(&batch, ""),
        &ragged(Values::Int64(vec![2]), &[0, 0, 0, 1])
    );
}

#[test]
fn last_list_of_the_oneof_wins() {
    // bytes_list, then int64_list: protobuf keeps the last one set.
    let rec = example(&[entry(
        "a",
        &[bytes_feature(&bytes_list(&[b"x"])), ints(&[7])].concat(),
    )]);
    let spec = FeatureSpec::new().var_len("a", DType::Int64);
    let batch = parse_examples(&spec, &[&rec]).unwrap();
    assert_eq!(col(&batch, "a").values(), &Values::Int64(vec![7]));
    let spec = FeatureSpec::new().var_len("a", DType::Bytes);
    assert_eq!(
        parse_examples(&spec, &[&rec]).unwrap_err().kind,
        ParseErrorKind::TypeMismatch {
            expected: DType::Bytes,
            actual: WireKind::Int64List
        }
    );
    // The same list twice merges.
    let rec = example(&[entry("a", &[ints(&[1]), ints(&[2])].concat())]);
    let spec = FeatureSpec::new().var_len("a", DType::Int64);
    let batch = parse_examples(&spec, &[&rec]).unwrap();
    assert_eq!(col(&batch, "a").values(), &Values::Int64(vec![1, 2]));
}

#[test]
fn unrequested_features_are_not_parsed() {
    // A malformed value under a key the spec does not ask for.
    let rec = example(&[entry("junk", &[0xff, 0xff, 0xff]), entry("a", &ints(&[1]))]);
    let spec = FeatureSpec::new().fixed_len("a", DType::Int64, &[]);
    let batch = parse_examples(&spec, &[rec]).unwrap();
    assert_eq!(col(&batch, "a").values(), &Values::Int64(vec![1]));
}

#[test]
fn malformed_records_give_offsets() {
    let spec = FeatureSpec::new().var_len("a", DType::Int64);
    let good = example(&[entry("a", &ints(&[1]))]);
    let cases: Vec<(Vec<u8>, Option<&str>, usize, &str)> = vec![
        // Length past the end of the record.
        (
            vec![0x0a, 0x7f, 0x00],
            None,
            1,
            "length 127 runs past the end (1 bytes left)",
        ),
        // Truncated: the last byte of a good record missing.
        (
            good[..good.len() - 1].to_vec(),
            None,
            1,
            "length 12 runs past the end (11 bytes left)",
        ),
        // Truncated tag varint.
        (vec![0x80], None, 0, "truncated varint"),
        // Field number 0.
        (vec![0x00, 0x00], None, 0, "field number 0"),
        // A group.
        (
            vec![0x0b, 0x0c],
            None,
            1,
            "groups (wire types 3 and 4) are not supported",
        ),
        // Wire type 7.
        (vec![0x0f], None, 1, "invalid wire type 7"),
        // Fixed64 field cut short.
        (
            vec![0x09, 1, 2, 3],
            None,
            1,
            "field needs 8 bytes but 3 are left",
        ),
        // Truncated packed varint inside the requested feature.
        (
            example(&[entry("a", &int64_feature(&ld(1, &[0x80])))]),
            Some("a"),
            13,
            "truncated varint",
        ),
        // A packed float list whose length is not a multiple of 4.
        (
            example(&[entry("a", &float_feature(&ld(1, &[0, 0, 0x80, 0x3f, 0])))]),
            Some("a"),
            13,
            "packed float list of 5 bytes (not a multiple of 4)",
        ),
    ];
    for (rec, feature, offset, message) in cases {
        let (spec, good) = if message.starts_with("packed float") {
            (
                FeatureSpec::new().var_len("a", DType::Float32),
                example(&[entry("a", &float_feature(&f32_packed(&[1.0])))]),
            )
        } else {
            (spec.clone(), good.clone())
        };
        let e = parse_examples(&spec, &[good, rec.clone()]).unwrap_err();
        assert_eq!(
            e,
            ParseError {
                record: 1,
                feature: feature.map(str::to_owned),
                kind: ParseErrorKind::Malformed {
                    offset,
                    message: message.to_owned()
                }
            },
            "record {rec:02x?}"
        );
    }
    let e = parse_examples(&spec, &[vec![0x0a, 0x7f, 0x00]]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "record 0: malformed protobuf at byte 1 of the record: length 127 runs past the end (1 bytes left)"
    );
}

#[test]
fn empty_batch_has_empty_columns() {
    let spec = FeatureSpec::new()
        .fixed_len("a", DType::Float32, &[2])
        .var_len("b", DType::Bytes);
    let batch = parse_examples::<Vec<u8>>(&spec, &[]).unwrap();
    assert_eq!(
        batch,
        ParsedBatch {
            num_records: 0,
            columns: vec![
                ("a".into(), dense(&[0, 2], Values::Float32(vec![]))),
                ("b".into(), ragged(Values::Bytes(BytesValues::new()), &[0])),
            ]
        }
    );
}

#[test]
fn parse_into_reuses_buffers_and_matches_parse() {
    let spec = FeatureSpec::new()
        .var_len("ids", DType::Int32)
        .fixed_len("s", DType::Bytes, &[])
        .fixed_len_with_default("f", DType::Float32, &[], DefaultValue::Float32(vec![0.0]))
        .unwrap();
    let batch_a: Vec<Vec<u8>> = (0..50)
        .map(|i| {
            Example::from_features([
                ("ids", Feature::int64s((0..i).collect::<Vec<_>>())),
                ("s", Feature::bytes([vec![i as u8; i as usize]])),
            ])
            .encode_to_vec()
        })
        .collect();
    let batch_b: Vec<Vec<u8>> = (0..7)
        .map(|i| {
            Example::from_features([
                ("ids", Feature::int64s(vec![i * 1000])),
                ("s", Feature::bytes([b"z".to_vec()])),
                ("f", Feature::floats(vec![i as f32])),
            ])
            .encode_to_vec()
        })
        .collect();
    let mut parser = ExampleParser::new(&spec);
    let mut out = parser.parse(&batch_a).unwrap();
    assert_eq!(out, parse_examples(&spec, &batch_a).unwrap());
    let ptr = col(&out, "ids").values().as_int32().unwrap().as_ptr();
    parser.parse_into(&batch_b, &mut out).unwrap();
    assert_eq!(out, parse_examples(&spec, &batch_b).unwrap());
    // The large column's allocation was reused.
    assert_eq!(col(&out, "ids").values().as_int32().unwrap().as_ptr(), ptr);
    parser.parse_into(&batch_a, &mut out).unwrap();
    assert_eq!(out, parse_examples(&spec, &batch_a).unwrap());
    // An error leaves `out` empty, and the parser works after it.
    let e = parser.parse_into(&[vec![0x0a]], &mut out).unwrap_err();
    assert_eq!(e.record, 0);
    assert_eq!(out.columns, vec![]);
    parser.parse_into(&batch_b, &mut out).unwrap();
    assert_eq!(out, parse_examples(&spec, &batch_b).unwrap());
}

#[test]
fn records_may_be_any_byte_container() {
    let rec = example(&[entry("a", &ints(&[1]))]);
    let spec = FeatureSpec::new().fixed_len("a", DType::Int64, &[]);
    let owned = vec![rec.clone()];
    let sliced: Vec<&[u8]> = vec![&rec];
    let bytes = vec![bytes::Bytes::from(rec.clone())];
    let want = parse_examples(&spec, &owned).unwrap();
    assert_eq!(parse_examples(&spec, &sliced).unwrap(), want);
    assert_eq!(parse_examples(&spec, &bytes).unwrap(), want);
}

#[test]
fn bytes_values_api() {
    let v: BytesValues = [b"ab".as_slice(), b"", b"cde"].into_iter().collect();
    assert_eq!(v.len(), 3);
    assert_eq!(v.data, b"abcde");
    assert_eq!(v.offsets, vec![0, 2, 2, 5]);
    assert_eq!(v.get(2), b"cde");
    assert_eq!(v.iter().collect::<Vec<_>>(), vec![&b"ab"[..], b"", b"cde"]);
    assert_eq!(BytesValues::default(), BytesValues::new());
    assert!(BytesValues::new().is_empty());
    assert_eq!(BytesValues::new().offsets, vec![0]);
}

#[test]
fn long_lists_cross_block_boundaries() {
    // Lists long enough for the block decoder, with values of every width,
    // lengths around the 64- and 72-byte edges.
    let spec = FeatureSpec::new()
        .var_len("i", DType::Int64)
        .var_len("n", DType::Int32);
    for len in [
        0usize, 1, 7, 8, 9, 63, 64, 65, 71, 72, 73, 127, 128, 129, 200, 1000,
    ] {
        let vals: Vec<i64> = (0..len as i64)
            .map(|i| match i % 5 {
                0 => i,
                1 => i * 1_000,
                2 => -i,
                3 => i << 40,
                _ => 1,
            })
            .collect();
        let small: Vec<i64> = (0..len as i64).map(|i| (i * 7919) % 50_000).collect();
        let rec = example(&[entry("i", &ints(&vals)), entry("n", &ints(&small))]);
        let batch = parse_examples(&spec, &[&rec, &rec]).unwrap();
        assert_eq!(
            col(&batch, "i"),
            &ragged(
                Values::Int64([vals.clone(), vals].concat()),
                &[0, len, 2 * len]
            )
        );
        let small32: Vec<i32> = small.iter().map(|&v| v as i32).collect();
        assert_eq!(
            col(&batch, "n"),
            &ragged(
                Values::Int32([small32.clone(), small32].concat()),
                &[0, len, 2 * len]
            )
        );
    }
}

#[test]
fn many_and_long_feature_names() {
    let long_a = "a".repeat(100);
    let long_b = format!("{}b", "a".repeat(99));
    let mut spec = FeatureSpec::new()
        .fixed_len(long_a.as_str(), DType::Int64, &[])
        .fixed_len(long_b.as_str(), DType::Int64, &[]);
    let mut entries = vec![entry(&long_b, &ints(&[2])), entry(&long_a, &ints(&[1]))];
    for i in 0..100 {
        let name = format!("f{i}");
        spec = spec.var_len(name.as_str(), DType::Int64);
        if i % 3 == 0 {
            entries.push(entry(&name, &ints(&[i])));
        }
    }
    let batch = parse_examples(&spec, &[example(&entries)]).unwrap();
    assert_eq!(col(&batch, &long_a).values(), &Values::Int64(vec![1]));
    assert_eq!(col(&batch, &long_b).values(), &Values::Int64(vec![2]));
    for i in 0..100 {
        let want = if i % 3 == 0 { vec![i] } else { vec![] };
        assert_eq!(col(&batch, &format!("f{i}")).values(), &Values::Int64(want));
    }
    assert_eq!(batch.columns.len(), 102);
    assert_eq!(batch.columns[2].0, "f0");
}
