//! The batch parser on `tf.train.SequenceExample` records: context and
//! feature lists with exact values, TensorFlow's rules for missing lists,
//! empty steps and step counts, and exact errors.
//!
//! The TensorFlow behaviours asserted here were checked against
//! `tf.io.parse_sequence_example` (TensorFlow 2.21) on the same bytes.

use std::collections::HashMap;

use infeed::example::proto::{Feature, FeatureList, FeatureLists, Features, SequenceExample};
use infeed::example::{
    Column, ParseError, ParseErrorKind, ParsedBatch, SequenceBatch, SequenceParser, Values,
    parse_sequence_examples,
};
use infeed::spec::{DType, DefaultValue, FeatureSpec, SequenceSpec, WireKind};
use prost::Message;

use super::{col, err};
use crate::support::wire as wire_common;

mod enc {
    pub use super::wire_common::{entry, ints, ld, tag, varint};

    /// A Feature holding an unpacked Int64List.
    pub fn ints_unpacked(vals: &[i64]) -> Vec<u8> {
        let body: Vec<u8> = vals
            .iter()
            .flat_map(|&v| [tag(1, 0), varint(v as u64)].concat())
            .collect();
        ld(3, &body)
    }

    /// A Feature holding a packed FloatList.
    pub fn floats(vals: &[f32]) -> Vec<u8> {
        let body: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        ld(2, &ld(1, &body))
    }

    /// A FeatureList of these steps (each a serialized Feature).
    pub fn steps(features: &[Vec<u8>]) -> Vec<u8> {
        features.iter().flat_map(|f| ld(1, f)).collect()
    }

    /// A SequenceExample: context entries, then feature-list entries.
    pub fn seq_example(context: &[Vec<u8>], lists: &[Vec<u8>]) -> Vec<u8> {
        [ld(1, &context.concat()), ld(2, &lists.concat())].concat()
    }
}

use enc::*;

fn seq_record(context: Vec<(&str, Feature)>, lists: Vec<(&str, Vec<Feature>)>) -> Vec<u8> {
    SequenceExample {
        context: Some(Features {
            feature: context
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        }),
        feature_lists: Some(FeatureLists {
            feature_list: lists
                .into_iter()
                .map(|(k, v)| (k.to_owned(), FeatureList { feature: v }))
                .collect::<HashMap<_, _>>(),
        }),
    }
    .encode_to_vec()
}

#[test]
fn context_and_feature_lists_exact() {
    let records = [
        seq_record(
            vec![
                ("len", Feature::int64s(vec![2])),
                ("tags", Feature::bytes([b"a".to_vec(), b"bc".to_vec()])),
            ],
            vec![
                (
                    "frames",
                    vec![
                        Feature::floats(vec![1.0, 2.0]),
                        Feature::floats(vec![3.0, 4.0]),
                    ],
                ),
                (
                    "tokens",
                    vec![Feature::int64s(vec![5]), Feature::int64s(vec![6, 7])],
                ),
                (
                    "words",
                    vec![
                        Feature::bytes([b"hi".to_vec()]),
                        Feature::bytes(Vec::<Vec<u8>>::new()),
                    ],
                ),
            ],
        ),
        seq_record(
            vec![("len", Feature::int64s(vec![1]))],
            vec![
                ("frames", vec![Feature::floats(vec![5.0, 6.0])]),
                (
                    "tokens",
                    vec![
                        Feature::int64s(vec![]),
                        Feature { kind: None },
                        Feature::int64s(vec![8, 9, 10]),
                    ],
                ),
            ],
        ),
    ];
    let spec = SequenceSpec::new(
        FeatureSpec::new()
            .fixed_len("len", DType::Int64, &[])
            .var_len("tags", DType::Bytes),
    )
    .fixed_len_sequence("frames", DType::Float32, &[2])
    .var_len_sequence("tokens", DType::Int32)
    .var_len_sequence("words", DType::Bytes);
    let batch = parse_sequence_examples(&spec, &records).unwrap();
    let want = SequenceBatch {
        context: ParsedBatch {
            num_records: 2,
            columns: vec![
                (
                    "len".into(),
                    Column::Dense {
                        shape: vec![2],
                        values: Values::Int64(vec![2, 1]),
                    },
                ),
                (
                    "tags".into(),
                    Column::Ragged {
                        values: Values::Bytes([b"a".as_slice(), b"bc"].into_iter().collect()),
                        row_splits: vec![0, 2, 2],
                        inner_shape: vec![],
                    },
                ),
            ],
        },
        sequence: ParsedBatch {
            num_records: 2,
            columns: vec![
                (
                    "frames".into(),
                    Column::Ragged {
                        values: Values::Float32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                        row_splits: vec![0, 2, 3],
                        inner_shape: vec![2],
                    },
                ),
                (
                    "tokens".into(),
                    Column::Ragged2 {
                        values: Values::Int32(vec![5, 6, 7, 8, 9, 10]),
                        outer_splits: vec![0, 2, 5],
                        inner_splits: vec![0, 1, 3, 3, 3, 6],
                    },
                ),
                (
                    "words".into(),
                    Column::Ragged2 {
                        values: Values::Bytes([b"hi".as_slice()].into_iter().collect()),
                        // Record 1 has no "words" list: zero steps.
                        outer_splits: vec![0, 2, 2],
                        inner_splits: vec![0, 1, 1],
                    },
                ),
            ],
        },
    };
    assert_eq!(batch, want);
}

#[test]
fn missing_or_empty_feature_list_has_zero_steps() {
    let spec = SequenceSpec::new(FeatureSpec::new())
        .fixed_len_sequence("s", DType::Int64, &[2])
        .var_len_sequence("v", DType::Int64);
    let records = [
        seq_example(
            &[],
            &[
                entry("s", &steps(&[ints(&[1, 2])])),
                entry("v", &steps(&[ints(&[3])])),
            ],
        ),
        // No feature_lists field at all.
        ld(1, &[]),
        // Empty FeatureLists, and an empty record.
        seq_example(&[], &[]),
        Vec::new(),
        // Present but with no steps.
        seq_example(&[], &[entry("s", &[]), entry("v", &[])]),
    ];
    let batch = parse_sequence_examples(&spec, &records).unwrap();
    assert_eq!(
        col(&batch.sequence, "s"),
        &Column::Ragged {
            values: Values::Int64(vec![1, 2]),
            row_splits: vec![0, 1, 1, 1, 1, 1],
            inner_shape: vec![2],
        }
    );
    assert_eq!(
        col(&batch.sequence, "v"),
        &Column::Ragged2 {
            values: Values::Int64(vec![3]),
            outer_splits: vec![0, 1, 1, 1, 1, 1],
            inner_splits: vec![0, 1],
        }
    );
}

#[test]
fn fixed_len_step_with_wrong_count_is_an_error() {
    let spec = SequenceSpec::new(FeatureSpec::new()).fixed_len_sequence("s", DType::Int64, &[2]);
    let ok = seq_example(&[], &[entry("s", &steps(&[ints(&[1, 2])]))]);
    for (bad_steps, actual) in [
        (vec![ints(&[1, 2]), ints(&[3, 4, 5, 6])], 4),
        // Even when the total is a multiple of the step size.
        (vec![ints(&[1]), ints(&[2, 3, 4])], 1),
        // An empty list, or a Feature with no list, holds 0 values.
        (vec![ints(&[1, 2]), ints(&[])], 0),
        (vec![ints(&[1, 2]), Vec::new()], 0),
    ] {
        let bad = seq_example(&[], &[entry("s", &steps(&bad_steps))]);
        let e = parse_sequence_examples(&spec, &[&ok, &bad]).unwrap_err();
        assert_eq!(
            e,
            err(
                1,
                "s",
                ParseErrorKind::WrongCount {
                    expected: 2,
                    actual
                }
            )
        );
    }
    let bad = seq_example(&[], &[entry("s", &steps(&[ints(&[1])]))]);
    assert_eq!(
        parse_sequence_examples(&spec, &[bad])
            .unwrap_err()
            .to_string(),
        "record 0, feature \"s\": expected 2 values, found 1"
    );
}

#[test]
fn step_of_the_wrong_type_is_an_error() {
    let spec = SequenceSpec::new(FeatureSpec::new()).var_len_sequence("s", DType::Int64);
    for step in [floats(&[1.0]), floats(&[])] {
        let rec = seq_example(&[], &[entry("s", &steps(&[ints(&[1]), step]))]);
        assert_eq!(
            parse_sequence_examples(&spec, &[rec]).unwrap_err(),
            err(
                0,
                "s",
                ParseErrorKind::TypeMismatch {
                    expected: DType::Int64,
                    actual: WireKind::FloatList
                }
            )
        );
    }
}

/// TensorFlow's parse_sequence_example reads an empty context Feature as
/// present with no values: a FixedLenFeature then fails even with a
/// default (unlike parse_example, where it takes the default).
#[test]
fn context_empty_feature_has_zero_values() {
    let default = FeatureSpec::new()
        .fixed_len_with_default("c", DType::Int64, &[], DefaultValue::Int64(vec![5]))
        .unwrap()
        .var_len("v", DType::Int64);
    let spec = SequenceSpec::new(default);
    let rec = seq_example(&[entry("c", &[]), entry("v", &[])], &[]);
    assert_eq!(
        parse_sequence_examples(&spec, &[&rec]).unwrap_err(),
        err(
            0,
            "c",
            ParseErrorKind::WrongCount {
                expected: 1,
                actual: 0
            }
        )
    );
    // The last entry wins even when empty.
    let rec = seq_example(&[entry("c", &ints(&[1])), entry("c", &[])], &[]);
    assert_eq!(
        parse_sequence_examples(&spec, &[&rec]).unwrap_err().kind,
        ParseErrorKind::WrongCount {
            expected: 1,
            actual: 0
        }
    );
    // Missing takes the default; an empty var-len feature has no values.
    let rec = seq_example(&[entry("v", &[])], &[]);
    let batch = parse_sequence_examples(&spec, &[&rec]).unwrap();
    assert_eq!(col(&batch.context, "c").values(), &Values::Int64(vec![5]));
    assert_eq!(
        col(&batch.context, "v"),
        &Column::Ragged {
            values: Values::Int64(vec![]),
            row_splits: vec![0, 0],
            inner_shape: vec![],
        }
    );
}

#[test]
fn context_errors_name_record_and_feature() {
    let spec = SequenceSpec::new(FeatureSpec::new().fixed_len("c", DType::Int64, &[]));
    let ok = seq_example(&[entry("c", &ints(&[1]))], &[]);
    assert_eq!(
        parse_sequence_examples(&spec, &[ok.clone(), seq_example(&[], &[])]).unwrap_err(),
        err(
            1,
            "c",
            ParseErrorKind::Missing {
                dtype: DType::Int64
            }
        )
    );
    let two = seq_example(&[entry("c", &ints(&[1, 2]))], &[]);
    assert_eq!(
        parse_sequence_examples(&spec, &[ok.clone(), ok.clone(), two]).unwrap_err(),
        err(
            2,
            "c",
            ParseErrorKind::WrongCount {
                expected: 1,
                actual: 2
            }
        )
    );
    let float = seq_example(&[entry("c", &floats(&[1.0]))], &[]);
    assert_eq!(
        parse_sequence_examples(&spec, &[float]).unwrap_err(),
        err(
            0,
            "c",
            ParseErrorKind::TypeMismatch {
                expected: DType::Int64,
                actual: WireKind::FloatList
            }
        )
    );
}

#[test]
fn duplicates_merges_and_unknown_fields() {
    let spec = SequenceSpec::new(
        FeatureSpec::new()
            .fixed_len("a", DType::Int64, &[])
            .fixed_len("b", DType::Int64, &[]),
    )
    .fixed_len_sequence("s", DType::Int64, &[])
    .fixed_len_sequence("t", DType::Int64, &[]);
    let unknown = [tag(9, 0), varint(3), ld(10, b"zz")].concat();
    let rec = [
        unknown.clone(),
        // Repeated context messages merge; the last entry of a key wins.
        ld(
            1,
            &[entry("a", &ints(&[1])), entry("a", &ints(&[2]))].concat(),
        ),
        ld(1, &entry("b", &ints(&[3]))),
        // Repeated feature_lists messages merge too.
        ld(
            2,
            &[
                entry("s", &steps(&[ints(&[1])])),
                entry("s", &steps(&[ints(&[2]), ints(&[3])])),
            ]
            .concat(),
        ),
        unknown.clone(),
        // Unknown fields inside a FeatureList are skipped.
        ld(
            2,
            &entry(
                "t",
                &[
                    steps(&[ints_unpacked(&[4])]),
                    unknown.clone(),
                    steps(&[ints(&[5])]),
                ]
                .concat(),
            ),
        ),
    ]
    .concat();
    let batch = parse_sequence_examples(&spec, &[rec]).unwrap();
    assert_eq!(col(&batch.context, "a").values(), &Values::Int64(vec![2]));
    assert_eq!(col(&batch.context, "b").values(), &Values::Int64(vec![3]));
    assert_eq!(
        col(&batch.sequence, "s"),
        &Column::Ragged {
            values: Values::Int64(vec![2, 3]),
            row_splits: vec![0, 2],
            inner_shape: vec![],
        }
    );
    assert_eq!(
        col(&batch.sequence, "t"),
        &Column::Ragged {
            values: Values::Int64(vec![4, 5]),
            row_splits: vec![0, 2],
            inner_shape: vec![],
        }
    );
}

#[test]
fn multi_dim_steps() {
    let spec = SequenceSpec::new(FeatureSpec::new()).fixed_len_sequence("s", DType::Int64, &[2, 2]);
    let rec = seq_example(
        &[],
        &[entry(
            "s",
            &steps(&[ints(&[1, 2, 3, 4]), ints(&[5, 6, 7, 8])]),
        )],
    );
    let batch = parse_sequence_examples(&spec, &[rec]).unwrap();
    assert_eq!(
        col(&batch.sequence, "s"),
        &Column::Ragged {
            values: Values::Int64((1..=8).collect()),
            row_splits: vec![0, 2],
            inner_shape: vec![2, 2],
        }
    );
}

#[test]
fn malformed_sequence_records() {
    let spec = SequenceSpec::new(FeatureSpec::new().var_len("c", DType::Int64))
        .var_len_sequence("s", DType::Int64);
    // A one-byte step (a tag with no value) inside the list "s".
    let rec = seq_example(&[], &[entry("s", &ld(1, &[0x08]))]);
    // seq_example: context tag+len (2), feature_lists tag+len (2), entry
    // tag+len (2), key (3), value tag+len (2), step tag+len (2): step at 13.
    assert_eq!(rec[13], 0x08);
    assert_eq!(
        parse_sequence_examples(&spec, &[rec]).unwrap_err(),
        err(
            0,
            "s",
            ParseErrorKind::Malformed {
                offset: 14,
                message: "truncated varint".into()
            }
        )
    );
    let e = parse_sequence_examples(&spec, &[vec![0x12, 0x05, 0x00]]).unwrap_err();
    assert_eq!(
        e,
        ParseError {
            record: 0,
            feature: None,
            kind: ParseErrorKind::Malformed {
                offset: 1,
                message: "length 5 runs past the end (1 bytes left)".into()
            }
        }
    );
}

#[test]
fn int32_sequence_overflow() {
    let spec = SequenceSpec::new(FeatureSpec::new()).var_len_sequence("s", DType::Int32);
    let rec = seq_example(&[], &[entry("s", &steps(&[ints(&[1]), ints(&[1 << 33])]))]);
    assert_eq!(
        parse_sequence_examples(&spec, &[rec]).unwrap_err(),
        err(0, "s", ParseErrorKind::Int32Overflow { value: 1 << 33 })
    );
}

#[test]
fn parse_into_reuses_and_matches() {
    let spec = SequenceSpec::new(FeatureSpec::new().var_len("c", DType::Int64))
        .var_len_sequence("v", DType::Int64)
        .fixed_len_sequence("f", DType::Float32, &[]);
    let a: Vec<Vec<u8>> = (0..20)
        .map(|i| {
            seq_record(
                vec![("c", Feature::int64s(vec![i]))],
                vec![
                    (
                        "v",
                        (0..i)
                            .map(|j| Feature::int64s(vec![j; j as usize]))
                            .collect(),
                    ),
                    (
                        "f",
                        (0..i).map(|j| Feature::floats(vec![j as f32])).collect(),
                    ),
                ],
            )
        })
        .collect();
    let b: Vec<Vec<u8>> = a.iter().rev().take(3).cloned().collect();
    let mut parser = SequenceParser::new(&spec);
    let mut out = parser.parse(&a).unwrap();
    parser.parse_into(&b, &mut out).unwrap();
    assert_eq!(out, parse_sequence_examples(&spec, &b).unwrap());
    parser.parse_into(&a, &mut out).unwrap();
    assert_eq!(out, parse_sequence_examples(&spec, &a).unwrap());
}
