//! Bucketing by length: grouping, flushing, per-bucket shapes.

use std::sync::Arc;

use super::columns::ragged;
use infeed::batch::{
    BatchErrorKind, BatchPlan, BucketError, BucketGroup, Bucketer, LengthPolicy, PlanError,
    Remainder, TensorType,
};
use infeed::example::ParsedBatch;
use infeed::spec::{DType, FeatureSpec};

#[test]
fn buckets_and_config_errors() {
    let b: Bucketer<u32> = Bucketer::new(vec![4, 8], vec![3, 2, 1]).expect("bucketer");
    let got: Vec<usize> = [0, 1, 4, 5, 8, 9, 1000]
        .iter()
        .map(|&l| b.bucket_of(l))
        .collect();
    assert_eq!(got, [0, 0, 0, 1, 1, 2, 2]);
    assert_eq!(
        (b.pad_to(0), b.pad_to(1), b.pad_to(2)),
        (Some(4), Some(8), None)
    );
    assert_eq!(b.num_buckets(), 3);
    assert_eq!(
        Bucketer::<u32>::new(vec![4, 8], vec![1, 1]).unwrap_err(),
        BucketError::BatchSizes {
            boundaries: 2,
            expected: 3,
            actual: 2
        }
    );
    assert_eq!(
        Bucketer::<u32>::new(vec![8, 8], vec![1, 1, 1]).unwrap_err(),
        BucketError::Boundaries {
            boundaries: vec![8, 8]
        }
    );
    assert_eq!(
        Bucketer::<u32>::new(vec![0, 8], vec![1, 1, 1]).unwrap_err(),
        BucketError::Boundaries {
            boundaries: vec![0, 8]
        }
    );
    assert_eq!(
        Bucketer::<u32>::new(vec![8], vec![1, 0])
            .unwrap_err()
            .to_string(),
        "batch sizes must be at least 1: [1, 0]"
    );
}

#[test]
fn groups_in_arrival_order_and_flush() {
    let mut b: Bucketer<char> = Bucketer::new(vec![4, 8], vec![2, 2, 1]).expect("bucketer");
    let mut out = Vec::new();
    for (item, len) in [
        ('a', 3),
        ('b', 6),
        ('c', 20),
        ('d', 1),
        ('e', 7),
        ('f', 2),
        ('g', 5),
    ] {
        out.extend(b.push(item, len));
    }
    assert_eq!(
        out,
        [
            BucketGroup {
                bucket: 2,
                batch_size: 1,
                pad_to: None,
                items: vec!['c']
            },
            BucketGroup {
                bucket: 0,
                batch_size: 2,
                pad_to: Some(4),
                items: vec!['a', 'd']
            },
            BucketGroup {
                bucket: 1,
                batch_size: 2,
                pad_to: Some(8),
                items: vec!['b', 'e']
            },
        ]
    );
    assert_eq!(b.pending(), [1, 1, 0]);
    let mut keep = b.clone();
    assert_eq!(b.finish(Remainder::Drop), []);
    assert_eq!(b.pending(), [0, 0, 0]);
    assert_eq!(
        keep.finish(Remainder::Pad),
        [
            BucketGroup {
                bucket: 0,
                batch_size: 2,
                pad_to: Some(4),
                items: vec!['f']
            },
            BucketGroup {
                bucket: 1,
                batch_size: 2,
                pad_to: Some(8),
                items: vec!['g']
            },
        ]
    );
    assert_eq!(keep.finish(Remainder::Pad), []);
}

#[test]
fn bucketed_batches_have_the_listed_shapes() {
    let spec = FeatureSpec::new().var_len("ids", DType::Int64);
    let asm = BatchPlan::new(&spec, 99)
        .pad_all(LengthPolicy::new().pad_to_multiple_of(4).max_length(12))
        .cast_ints(TensorType::I32)
        .build()
        .expect("plan");
    let mut bucketer: Bucketer<(Arc<ParsedBatch>, usize)> =
        Bucketer::new(vec![2, 4], vec![3, 2, 2]).expect("bucketer");
    let shapes = asm.bucket_shapes(&bucketer).expect("shapes");
    let listed: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        listed,
        [
            "ids: i32[2, 4], ids_mask: i32[2, 4]",
            "ids: i32[2, 12], ids_mask: i32[2, 12]",
            "ids: i32[3, 2], ids_mask: i32[3, 2]",
        ]
    );

    let rows: Vec<Vec<i64>> = vec![vec![1], vec![2, 2, 2], vec![3; 9], vec![4, 4], vec![5; 4]];
    let parsed = Arc::new(ParsedBatch {
        num_records: rows.len(),
        columns: vec![("ids".to_string(), ragged(&rows))],
    });
    let mut batches = Vec::new();
    for r in 0..parsed.num_records {
        let len = asm.row_length(&parsed, r).expect("len");
        if let Some(g) = bucketer.push((Arc::clone(&parsed), r), len) {
            batches.push(asm.assemble_bucket(&g).expect("batch"));
        }
    }
    for g in bucketer.finish(Remainder::Pad) {
        batches.push(asm.assemble_bucket(&g).expect("batch"));
    }
    // Records 1 and 4 fill bucket 1 first; then the flush: bucket 0 (0, 3),
    // bucket 2 (2).
    assert_eq!(batches.len(), 3);
    assert_eq!(
        batches[0]["ids"].values::<i32>().expect("i32"),
        &[2, 2, 2, 0, 5, 5, 5, 5]
    );
    assert_eq!(batches[0].real_rows, 2);
    assert_eq!(
        batches[1]["ids"].values::<i32>().expect("i32"),
        &[1, 0, 4, 4, 0, 0]
    );
    assert_eq!(
        batches[1]["ids_mask"].values::<i32>().expect("i32"),
        &[1, 0, 1, 1, 0, 0]
    );
    assert_eq!(batches[1].real_rows, 2);
    let last = batches[2]["ids"].values::<i32>().expect("i32");
    assert_eq!(last.len(), 24);
    assert_eq!(&last[..12], &[3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0]);
    assert!(last[12..].iter().all(|&v| v == 0));
    for b in &batches {
        assert!(shapes.contains(&b.shape()), "{}", b.shape());
    }

    // A boundary above the policy's bound is refused, at plan time and at
    // assembly.
    let too_far: Bucketer<(Arc<ParsedBatch>, usize)> =
        Bucketer::new(vec![16], vec![1, 1]).expect("bucketer");
    assert_eq!(
        asm.bucket_shapes(&too_far).unwrap_err(),
        PlanError::BoundaryAboveBound {
            feature: "ids".into(),
            boundary: 16,
            bound: 12
        }
    );
    let huge = BucketGroup {
        bucket: 0,
        batch_size: usize::MAX / 2,
        pad_to: Some(4),
        items: vec![(Arc::clone(&parsed), 0)],
    };
    assert_eq!(
        asm.assemble_bucket(&huge).unwrap_err().kind,
        BatchErrorKind::TooLarge {
            batch_size: usize::MAX / 2
        }
    );
    let g = BucketGroup {
        bucket: 0,
        batch_size: 1,
        pad_to: Some(16),
        items: vec![(Arc::clone(&parsed), 0)],
    };
    assert_eq!(
        asm.assemble_bucket(&g).unwrap_err().kind,
        BatchErrorKind::AboveBound {
            boundary: 16,
            bound: 12
        }
    );
}

proptest::proptest! {
    /// `room` rows can be pushed with none but the last completing a
    /// bucket, whatever their lengths, and one more can complete one: the
    /// pipeline's record thread takes that many records as one run.
    #[test]
    fn room_rows_complete_at_most_one_bucket_at_the_last(
        sizes in proptest::collection::vec(1usize..6, 3),
        lens in proptest::collection::vec(0usize..12, 0..80),
    ) {
        let mut bucketer: Bucketer<usize> = Bucketer::new(vec![3, 7], sizes.clone()).unwrap();
        let mut lens = lens.into_iter().enumerate().peekable();
        while lens.peek().is_some() {
            let room = bucketer.room();
            let pending = bucketer.pending();
            let short = sizes.iter().zip(&pending).map(|(s, p)| s - p);
            proptest::prop_assert_eq!(room, short.clone().min().unwrap());
            for k in 1..=room {
                let Some((i, len)) = lens.next() else { break };
                let group = bucketer.push(i, len);
                proptest::prop_assert!(group.is_none() || k == room, "cut at {} of {}", k, room);
            }
        }
        // A bucket `room` short of full fills with `room` rows of its length.
        let mut bucketer: Bucketer<usize> = Bucketer::new(vec![3, 7], sizes.clone()).unwrap();
        let room = bucketer.room();
        let fullest = sizes.iter().position(|&s| s == room).unwrap();
        let len = [1, 5, 9][fullest];
        let cut = (0..room).filter_map(|i| bucketer.push(i, len)).count();
        proptest::prop_assert_eq!(cut, 1);
    }
}
