//! Property tests of the batch parser: random records encoded with prost
//! parse to exactly the values prost decodes, hand-built unpacked encodings
//! parse like packed ones, and arbitrary or corrupted bytes never panic.

use std::collections::HashMap;

use infeed::example::proto::{
    Example, Feature, FeatureList, FeatureLists, Features, SequenceExample, feature::Kind,
};
use infeed::example::{Column, ExampleParser, ParseErrorKind, ParsedBatch, SequenceParser, Values};
use infeed::spec::{DType, DefaultValue, FeatureSpec, SequenceSpec};
use proptest::prelude::*;
use prost::Message;

use crate::support::wire::{ld, varint};

/// Requested names, each always of one type.
const INTS: [&str; 2] = ["i0", "i1"];
const FLOATS: [&str; 2] = ["f0", "f1"];
const BYTES: [&str; 2] = ["b0", "b1"];

fn int_feature() -> impl Strategy<Value = Feature> {
    prop_oneof![
        8 => prop::collection::vec(any::<i64>(), 0..40).prop_map(Feature::int64s),
        8 => prop::collection::vec(0i64..50_000, 0..300).prop_map(Feature::int64s),
        1 => Just(Feature { kind: None }),
    ]
}

fn float_feature() -> impl Strategy<Value = Feature> {
    prop_oneof![
        8 => prop::collection::vec(any::<f32>(), 0..40).prop_map(Feature::floats),
        1 => Just(Feature { kind: None }),
    ]
}

fn bytes_feature() -> impl Strategy<Value = Feature> {
    prop_oneof![
        8 => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 0..6)
            .prop_map(Feature::bytes),
        1 => Just(Feature { kind: None }),
    ]
}

fn any_feature() -> impl Strategy<Value = Feature> {
    prop_oneof![int_feature(), float_feature(), bytes_feature()]
}

/// A record holding any subset of the requested names, plus unrequested ones.
fn example() -> impl Strategy<Value = Example> {
    (
        prop::collection::vec(prop::option::of(int_feature()), 2),
        prop::collection::vec(prop::option::of(float_feature()), 2),
        prop::collection::vec(prop::option::of(bytes_feature()), 2),
        prop::collection::hash_map("[a-z]{0,12}", any_feature(), 0..4),
    )
        .prop_map(|(ints, floats, bytes, extra)| {
            let mut feature: HashMap<String, Feature> = extra
                .into_iter()
                .filter(|(k, _)| {
                    !["i0", "i1", "f0", "f1", "b0", "b1", "absent"].contains(&k.as_str())
                })
                .collect();
            let named = INTS
                .iter()
                .zip(ints)
                .chain(FLOATS.iter().zip(floats))
                .chain(BYTES.iter().zip(bytes));
            for (name, f) in named {
                if let Some(f) = f {
                    feature.insert((*name).to_owned(), f);
                }
            }
            Example {
                features: Some(Features { feature }),
            }
        })
}

fn full_spec() -> FeatureSpec {
    let mut spec = FeatureSpec::new();
    for n in INTS {
        spec = spec.var_len(n, DType::Int64);
    }
    for n in FLOATS {
        spec = spec.var_len(n, DType::Float32);
    }
    for n in BYTES {
        spec = spec.var_len(n, DType::Bytes);
    }
    spec.var_len("absent", DType::Int64)
}

/// What a feature holds, by prost: the list, or nothing.
fn prost_values(ex: &Example, name: &str, dtype: DType) -> Values {
    let kind = ex
        .features
        .as_ref()
        .and_then(|f| f.feature.get(name))
        .and_then(|f| f.kind.as_ref());
    match (dtype, kind) {
        (DType::Int64, Some(Kind::Int64List(l))) => Values::Int64(l.value.clone()),
        (DType::Int64, _) => Values::Int64(vec![]),
        (DType::Float32, Some(Kind::FloatList(l))) => Values::Float32(l.value.clone()),
        (DType::Float32, _) => Values::Float32(vec![]),
        (DType::Bytes, Some(Kind::BytesList(l))) => Values::Bytes(l.value.iter().collect()),
        (DType::Bytes, _) => Values::Bytes(Default::default()),
        (DType::Int32, _) => unreachable!("not generated"),
    }
}

fn concat(parts: Vec<Values>) -> Values {
    let mut it = parts.into_iter();
    let Some(mut acc) = it.next() else {
        unreachable!("at least one record")
    };
    for v in it {
        match (&mut acc, v) {
            (Values::Int64(a), Values::Int64(b)) => a.extend(b),
            (Values::Float32(a), Values::Float32(b)) => a.extend(b),
            (Values::Bytes(a), Values::Bytes(b)) => b.iter().for_each(|x| a.push(x)),
            _ => unreachable!("one dtype per column"),
        }
    }
    acc
}

/// Compares floats by bits, so that NaN payloads count.
fn same(a: &Values, b: &Values) -> bool {
    match (a, b) {
        (Values::Float32(x), Values::Float32(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        _ => a == b,
    }
}

/// Structural invariants every parsed batch keeps.
fn check_shapes(batch: &ParsedBatch) {
    for (name, column) in &batch.columns {
        match column {
            Column::Dense { shape, values } => {
                assert_eq!(shape[0], batch.num_records, "{name}");
                assert_eq!(shape.iter().product::<usize>(), values.len(), "{name}");
            }
            Column::Ragged {
                values,
                row_splits,
                inner_shape,
            } => {
                assert_eq!(row_splits.len(), batch.num_records + 1, "{name}");
                assert_eq!(row_splits[0], 0);
                assert!(row_splits.windows(2).all(|w| w[0] <= w[1]));
                let rows = *row_splits.last().unwrap();
                assert_eq!(rows * inner_shape.iter().product::<usize>(), values.len());
            }
            Column::Ragged2 {
                values,
                outer_splits,
                inner_splits,
            } => {
                assert_eq!(outer_splits.len(), batch.num_records + 1, "{name}");
                assert!(outer_splits.windows(2).all(|w| w[0] <= w[1]));
                assert_eq!(*outer_splits.last().unwrap() + 1, inner_splits.len());
                assert!(inner_splits.windows(2).all(|w| w[0] <= w[1]));
                assert_eq!(*inner_splits.last().unwrap(), values.len());
            }
        }
        if let Values::Bytes(b) = column.values() {
            assert_eq!(b.offsets[0], 0);
            assert_eq!(*b.offsets.last().unwrap(), b.data.len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn prost_encoded_examples_parse_to_prost_values(
        examples in prop::collection::vec(example(), 1..8)
    ) {
        let records: Vec<Vec<u8>> = examples.iter().map(Message::encode_to_vec).collect();
        let decoded: Vec<Example> = records
            .iter()
            .map(|r| Example::decode(r.as_slice()).unwrap())
            .collect();
        let spec = full_spec();
        let batch = ExampleParser::new(&spec).parse(&records).unwrap();
        check_shapes(&batch);
        prop_assert_eq!(batch.num_records, records.len());
        for f in spec.features() {
            let per_record: Vec<Values> =
                decoded.iter().map(|e| prost_values(e, &f.name, f.dtype)).collect();
            let mut splits = vec![0];
            for v in &per_record {
                splits.push(splits.last().unwrap() + v.len());
            }
            let Column::Ragged { values, row_splits, inner_shape } =
                batch.get(&f.name).unwrap() else { panic!("ragged") };
            prop_assert!(inner_shape.is_empty());
            prop_assert_eq!(row_splits, &splits, "{}", f.name);
            prop_assert!(same(values, &concat(per_record)), "{}", f.name);
        }
    }

    #[test]
    fn fixed_len_matches_prost(
        count in 0usize..6,
        seed in prop::collection::vec((any::<i64>(), any::<f32>(), any::<u8>()), 1..10),
    ) {
        let examples: Vec<Example> = seed
            .iter()
            .map(|&(i, f, b)| {
                Example::from_features([
                    ("i", Feature::int64s(vec![i; count])),
                    ("f", Feature::floats(vec![f; count])),
                    ("b", Feature::bytes(vec![vec![b; b as usize % 5]; count])),
                ])
            })
            .collect();
        let records: Vec<Vec<u8>> = examples.iter().map(Message::encode_to_vec).collect();
        let spec = FeatureSpec::new()
            .fixed_len("i", DType::Int64, &[count])
            .fixed_len("f", DType::Float32, &[count])
            .fixed_len("b", DType::Bytes, &[count]);
        let batch = ExampleParser::new(&spec).parse(&records).unwrap();
        check_shapes(&batch);
        for f in spec.features() {
            let want = concat(examples.iter().map(|e| prost_values(e, &f.name, f.dtype)).collect());
            let Column::Dense { shape, values } = batch.get(&f.name).unwrap() else {
                panic!("dense")
            };
            prop_assert_eq!(shape, &vec![records.len(), count]);
            prop_assert!(same(values, &want));
        }
    }

    #[test]
    fn int32_narrowing_matches_or_reports_the_first_overflow(
        lists in prop::collection::vec(
            prop::collection::vec(
                prop_oneof![
                    8 => any::<i32>().prop_map(i64::from),
                    1 => any::<i64>(),
                ],
                0..50,
            ),
            1..6,
        )
    ) {
        let records: Vec<Vec<u8>> = lists
            .iter()
            .map(|l| Example::from_features([("n", Feature::int64s(l.clone()))]).encode_to_vec())
            .collect();
        let spec = FeatureSpec::new().var_len("n", DType::Int32);
        let result = ExampleParser::new(&spec).parse(&records);
        let first_bad = lists.iter().enumerate().find_map(|(r, l)| {
            l.iter().find(|&&v| i32::try_from(v).is_err()).map(|&v| (r, v))
        });
        match first_bad {
            None => {
                let batch = result.unwrap();
                let want: Vec<i32> = lists.iter().flatten().map(|&v| v as i32).collect();
                prop_assert_eq!(batch.get("n").unwrap().values(), &Values::Int32(want));
            }
            Some((record, value)) => {
                let e = result.unwrap_err();
                prop_assert_eq!(e.record, record);
                prop_assert_eq!(e.feature.as_deref(), Some("n"));
                prop_assert_eq!(e.kind, ParseErrorKind::Int32Overflow { value });
            }
        }
    }

    #[test]
    fn unpacked_encodings_parse_like_packed(
        ints in prop::collection::vec(any::<i64>(), 0..100),
        floats in prop::collection::vec(any::<f32>(), 0..100),
        split in any::<prop::sample::Index>(),
    ) {
        // Packed by prost.
        let packed = Example::from_features([
            ("i", Feature::int64s(ints.clone())),
            ("f", Feature::floats(floats.clone())),
        ])
        .encode_to_vec();
        // By hand: the ints as a packed run, then unpacked; floats unpacked.
        let at = split.index(ints.len() + 1);
        let mut run = Vec::new();
        for &v in &ints[..at] {
            run.extend(varint(v as u64));
        }
        let mut list = Vec::new();
        list.extend(ld(1, &run));
        for &v in &ints[at..] {
            list.extend(varint(1 << 3));
            list.extend(varint(v as u64));
        }
        let mut flist = Vec::new();
        for v in &floats {
            flist.extend(varint(1 << 3 | 5));
            flist.extend_from_slice(&v.to_le_bytes());
        }
        let mut fi = Vec::new();
        fi.extend(ld(3, &list));
        let mut ff = Vec::new();
        ff.extend(ld(2, &flist));
        let mut entries = Vec::new();
        for (k, f) in [("i", &fi), ("f", &ff)] {
            let mut e = Vec::new();
            e.extend(ld(1, k.as_bytes()));
            e.extend(ld(2, f));
            entries.extend(ld(1, &e));
        }
        let mut unpacked = Vec::new();
        unpacked.extend(ld(1, &entries));

        let spec = FeatureSpec::new().var_len("i", DType::Int64).var_len("f", DType::Float32);
        let a = ExampleParser::new(&spec).parse(&[packed]).unwrap();
        let b = ExampleParser::new(&spec).parse(&[unpacked]).unwrap();
        prop_assert_eq!(a.get("i").unwrap().values(), &Values::Int64(ints));
        prop_assert_eq!(a.get("i"), b.get("i"));
        prop_assert!(same(a.get("f").unwrap().values(), b.get("f").unwrap().values()));
        prop_assert!(same(b.get("f").unwrap().values(), &Values::Float32(floats)));
    }

    #[test]
    fn prost_encoded_sequence_examples_parse_to_prost_values(
        records in prop::collection::vec(
            (
                prop::option::of(prop::collection::vec(any::<f32>(), 0..5)),
                prop::option::of(prop::collection::vec(
                    prop::collection::vec(any::<i64>(), 0..10), 0..6)),
                prop::option::of(prop::collection::vec(any::<[i64; 2]>(), 0..6)),
            ),
            1..6,
        )
    ) {
        let examples: Vec<SequenceExample> = records
            .iter()
            .map(|(ctx, var, fixed)| {
                let mut lists = HashMap::new();
                if let Some(var) = var {
                    lists.insert("var".to_owned(), FeatureList {
                        feature: var.iter().map(|s| Feature::int64s(s.clone())).collect(),
                    });
                }
                if let Some(fixed) = fixed {
                    lists.insert("fixed".to_owned(), FeatureList {
                        feature: fixed.iter().map(|s| Feature::int64s(s.to_vec())).collect(),
                    });
                }
                SequenceExample {
                    context: ctx.as_ref().map(|c| Features {
                        feature: HashMap::from([("c".to_owned(), Feature::floats(c.clone()))]),
                    }),
                    feature_lists: Some(FeatureLists { feature_list: lists }),
                }
            })
            .collect();
        let bytes: Vec<Vec<u8>> = examples.iter().map(Message::encode_to_vec).collect();
        let spec = SequenceSpec::new(FeatureSpec::new().var_len("c", DType::Float32))
            .var_len_sequence("var", DType::Int64)
            .fixed_len_sequence("fixed", DType::Int64, &[2]);
        let batch = SequenceParser::new(&spec).parse(&bytes).unwrap();
        check_shapes(&batch.context);
        check_shapes(&batch.sequence);

        let ctx: Vec<f32> = records.iter().flat_map(|r| r.0.clone().unwrap_or_default()).collect();
        prop_assert!(same(batch.context.get("c").unwrap().values(), &Values::Float32(ctx)));

        let mut outer = vec![0];
        let mut inner = vec![0];
        let mut values = Vec::new();
        for (_, var, _) in &records {
            let steps = var.clone().unwrap_or_default();
            outer.push(outer.last().unwrap() + steps.len());
            for s in steps {
                values.extend(s);
                inner.push(values.len());
            }
        }
        prop_assert_eq!(
            batch.sequence.get("var").unwrap(),
            &Column::Ragged2 { values: Values::Int64(values), outer_splits: outer, inner_splits: inner }
        );

        let mut splits = vec![0];
        let mut values = Vec::new();
        for (_, _, fixed) in &records {
            let steps = fixed.clone().unwrap_or_default();
            splits.push(splits.last().unwrap() + steps.len());
            values.extend(steps.into_iter().flatten());
        }
        prop_assert_eq!(
            batch.sequence.get("fixed").unwrap(),
            &Column::Ragged { values: Values::Int64(values), row_splits: splits, inner_shape: vec![2] }
        );
    }
}

fn example_specs() -> Vec<FeatureSpec> {
    vec![
        full_spec(),
        FeatureSpec::new()
            .fixed_len("i0", DType::Int32, &[2])
            .fixed_len_with_default("f0", DType::Float32, &[1], DefaultValue::Float32(vec![0.0]))
            .unwrap()
            .fixed_len_with_default("b0", DType::Bytes, &[3], DefaultValue::Bytes(vec![vec![]]))
            .unwrap()
            .var_len("", DType::Int32),
    ]
}

fn sequence_spec() -> SequenceSpec {
    SequenceSpec::new(
        FeatureSpec::new()
            .var_len("i0", DType::Int64)
            .fixed_len_with_default("f0", DType::Float32, &[], DefaultValue::Float32(vec![1.0]))
            .unwrap(),
    )
    .var_len_sequence("i0", DType::Int32)
    .fixed_len_sequence("b0", DType::Bytes, &[1])
}

/// Parses with every spec; nothing may panic, and what parses is consistent.
fn parse_everything(records: &[Vec<u8>]) {
    for spec in example_specs() {
        if let Ok(batch) = ExampleParser::new(&spec).parse(records) {
            check_shapes(&batch);
        }
    }
    if let Ok(batch) = SequenceParser::new(&sequence_spec()).parse(records) {
        check_shapes(&batch.context);
        check_shapes(&batch.sequence);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_bytes_never_panic(
        records in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..4)
    ) {
        parse_everything(&records);
    }

    #[test]
    fn corrupted_records_never_panic(
        ex in example(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..6),
    ) {
        let mut rec = ex.encode_to_vec();
        for (at, byte, op) in edits {
            if rec.is_empty() {
                rec.push(byte);
                continue;
            }
            let i = at.index(rec.len());
            match op {
                0 => rec[i] = byte,
                1 => rec.truncate(i),
                _ => rec.insert(i, byte),
            }
        }
        parse_everything(&[rec]);
    }
}
