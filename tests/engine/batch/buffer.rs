//! Aligned pooled buffers and tensors: alignment, reuse, bounds, counters.

use std::sync::Arc;

use infeed::batch::{
    ALIGN, AlignedBuf, Batch, BufferPool, PoolConfig, PoolStats, Tensor, TensorError, TensorType,
};
use proptest::prelude::*;

#[test]
fn same_pointer_comes_back() {
    let pool = BufferPool::default();
    let a = pool.take_zeroed(1000);
    let p = a.as_ptr();
    assert_eq!(a.len(), 1000);
    assert_eq!(a.capacity(), 1024);
    drop(a);
    // 900 bytes is the same class (1024) as 1000: the kept buffer returns.
    let b = pool.take_zeroed(900);
    assert_eq!(b.as_ptr(), p);
    assert_eq!(b.len(), 900);
    assert_eq!(
        pool.stats(),
        PoolStats {
            allocations: 1,
            reuses: 1,
            returned: 1,
            released: 0,
            kept_buffers: 0,
            kept_bytes: 0,
        }
    );
    // Another class gets another allocation.
    let c = pool.take_zeroed(2000);
    assert_ne!(c.as_ptr(), p);
    assert_eq!(c.capacity(), 2048);
    assert_eq!(pool.stats().allocations, 2);
    drop((b, c));
    let s = pool.stats();
    assert_eq!((s.kept_buffers, s.kept_bytes), (2, 1024 + 2048));
}

#[test]
fn reuse_is_last_in_first_out() {
    let pool = BufferPool::default();
    let a = pool.take_zeroed(64);
    let b = pool.take_zeroed(64);
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    drop(a);
    drop(b);
    assert_eq!(pool.take_zeroed(10).as_ptr(), pb);
    // the first one dropped back in; `b` came back again after it dropped
    let x = pool.take_zeroed(10);
    let y = pool.take_zeroed(10);
    assert_eq!((x.as_ptr(), y.as_ptr()), (pb, pa));
}

#[test]
fn a_thread_gets_back_the_buffers_it_took_first() {
    let pool = BufferPool::default();
    let worker_pool = pool.clone();
    let theirs =
        std::thread::spawn(move || [worker_pool.take_zeroed(64), worker_pool.take_zeroed(64)])
            .join()
            .unwrap();
    let their_ptrs = theirs.each_ref().map(AlignedBuf::as_ptr);
    let mine = pool.take_zeroed(64);
    let my_ptr = mine.as_ptr();
    // Mine is dropped first, so the newest kept buffer is another thread's.
    drop(mine);
    drop(theirs);
    let again = pool.take_zeroed(64);
    assert_eq!(again.as_ptr(), my_ptr);
    // None of mine is left: the newest of any thread's.
    let next = pool.take_zeroed(64);
    assert_eq!(next.as_ptr(), their_ptrs[1]);
    drop((again, next));
    // A thread that took none gets the newest.
    let other_pool = pool.clone();
    let got = std::thread::spawn(move || other_pool.take_zeroed(64).as_ptr() as usize)
        .join()
        .unwrap();
    assert_eq!(got, their_ptrs[1] as usize);
    assert_eq!(pool.stats().allocations, 3);
}

#[test]
fn reused_buffers_are_zeroed_or_filled() {
    let pool = BufferPool::default();
    let mut a = pool.take_zeroed(256);
    a.as_bytes_mut().fill(0xAB);
    drop(a);
    let b = pool.take_zeroed(256);
    assert!(b.as_bytes().iter().all(|&x| x == 0));
    drop(b);
    let c = pool.take_filled(64, -7i32);
    assert_eq!(c.len(), 256);
    assert_eq!(c.as_slice::<i32>(), &[-7; 64][..]);
    assert_eq!(pool.stats().reuses, 2);
    let d = pool.take_copy(&[1.5f32, -2.0]);
    assert_eq!(d.as_slice::<f32>(), &[1.5, -2.0]);
    assert_eq!(d.as_bytes(), &[0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0]);
}

#[test]
fn pool_keeps_a_bounded_number() {
    let pool = BufferPool::new(PoolConfig::default().max_per_class(2).max_bytes(1 << 20));
    let bufs: Vec<AlignedBuf> = (0..3).map(|_| pool.take_zeroed(100)).collect();
    drop(bufs);
    let s = pool.stats();
    assert_eq!((s.allocations, s.returned, s.released), (3, 2, 1));
    assert_eq!((s.kept_buffers, s.kept_bytes), (2, 2 * 112));

    // The byte bound: a 1 MiB pool keeps one 640 KiB buffer, not two.
    let pool = BufferPool::new(PoolConfig::default().max_per_class(8).max_bytes(1 << 20));
    let a = pool.take_zeroed(600 << 10);
    let b = pool.take_zeroed(600 << 10);
    assert_eq!(a.capacity(), 640 << 10);
    drop((a, b));
    let s = pool.stats();
    assert_eq!((s.returned, s.released, s.kept_bytes), (1, 1, 640 << 10));
}

/// What a 16-worker pipeline feeding a device has out at once: a batch per
/// worker being made, the output queue (prefetch and a batch per worker),
/// the device's few, two tensors of a class each. A default pool keeps them
/// all when they come back, so the next round allocates nothing (and maps
/// nothing for DMA again).
#[test]
fn a_default_pool_keeps_what_a_many_worker_pipeline_has_out() {
    let pool = BufferPool::default();
    let out = 2 * (16 + (2 + 16) + 3);
    for _ in 0..3 {
        let bufs: Vec<AlignedBuf> = (0..out).map(|_| pool.take_zeroed(64 << 10)).collect();
        drop(bufs);
    }
    let s = pool.stats();
    assert_eq!((s.allocations, s.released), (out as u64, 0));
    assert_eq!((s.reuses, s.kept_buffers), (2 * out as u64, out));
}

#[test]
fn zero_length_and_unpooled() {
    let pool = BufferPool::default();
    let z = pool.take_zeroed(0);
    assert!(z.is_empty());
    assert_eq!(z.as_ptr() as usize % ALIGN, 0);
    assert_eq!(z.as_slice::<i64>(), &[] as &[i64]);
    let u = AlignedBuf::from_slice(&[1i64, -1]);
    assert!(!u.is_pooled());
    assert!(z.is_pooled());
    assert_eq!(u.as_slice::<i64>(), &[1, -1]);
    assert_eq!(u.as_slice::<i32>(), &[1, 0, -1, -1]);
    let c = u.clone();
    assert_eq!(c, u);
    assert_ne!(c.as_ptr(), u.as_ptr());
}

#[test]
#[should_panic(expected = "a buffer of 6 bytes is not a whole number of 4-byte elements")]
fn typed_view_of_partial_elements_panics() {
    let b = AlignedBuf::zeroed(6);
    let _ = b.as_slice::<f32>();
}

#[test]
fn buffers_cross_threads_and_outlive_the_pool_handle() {
    let pool = BufferPool::default();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                (0..100)
                    .map(|j| pool.take_filled(16 * (1 + (i + j) % 3), i as u8))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut bufs = Vec::new();
    for h in handles {
        bufs.extend(h.join().expect("thread"));
    }
    let s = pool.stats();
    assert_eq!(s.allocations + s.reuses, 400);
    // Dropped on another thread, after the last pool handle is gone.
    drop(pool);
    std::thread::spawn(move || drop(bufs))
        .join()
        .expect("drop thread");
}

#[test]
fn arc_keeps_memory_alive_for_a_device() {
    let pool = BufferPool::default();
    let t = Tensor::new(TensorType::I32, vec![2, 2], pool.take_filled(4, 3i32)).expect("tensor");
    let shared = Arc::new(t);
    let ptr = shared.data().as_ptr();
    let for_device = Arc::clone(&shared);
    drop(shared);
    assert_eq!(pool.stats().kept_buffers, 0);
    assert_eq!(for_device.data().as_ptr(), ptr);
    assert_eq!(for_device.values::<i32>(), Some(&[3, 3, 3, 3][..]));
    drop(for_device);
    assert_eq!(pool.stats().kept_buffers, 1);
    assert_eq!(pool.take_zeroed(16).as_ptr(), ptr);
}

#[test]
fn tensor_checks_its_buffer() {
    let err = Tensor::new(TensorType::I64, vec![2, 3], AlignedBuf::zeroed(40)).unwrap_err();
    assert_eq!(
        err,
        TensorError::Length {
            dtype: TensorType::I64,
            shape: vec![2, 3],
            expected: 48,
            actual: 40
        }
    );
    assert_eq!(
        err.to_string(),
        "a i64 tensor of shape [2, 3] needs 48 bytes, the buffer has 40"
    );
    let err = Tensor::new(TensorType::U8, vec![usize::MAX, 2], AlignedBuf::zeroed(0)).unwrap_err();
    assert_eq!(
        err,
        TensorError::Overflow {
            shape: vec![usize::MAX, 2]
        }
    );
    let t = Tensor::from_slice(&[3], &[1i32, 2, 3]).expect("tensor");
    assert_eq!(t.values::<i32>(), Some(&[1, 2, 3][..]));
    assert_eq!(t.values::<i64>(), None);
    assert_eq!(t.num_elements(), 3);
    let z = Tensor::zeros(TensorType::F32, &[2, 0], &BufferPool::default()).expect("zeros");
    assert_eq!(z.num_elements(), 0);
}

fn small_batch() -> Batch {
    Batch {
        tensors: vec![
            (
                "ids".to_string(),
                Tensor::from_slice(&[2, 2], &[1i32, 2, 3, 0]).expect("ids"),
            ),
            (
                "label".to_string(),
                Tensor::from_slice(&[2], &[7i64, 0]).expect("label"),
            ),
        ],
        real_rows: 2,
        bytes: Vec::new(),
        provenance: Default::default(),
    }
}

#[test]
fn digest_is_stable_and_sensitive() {
    let b = small_batch();
    // Pinned: the documented encoding, hashed by Python's `xxhash.xxh3_64`
    // over the same bytes built by hand; it must not drift between versions.
    assert_eq!(b.digest(), 0xc34e_8efc_f4b8_e765);
    assert_eq!(b.digest(), small_batch().digest());
    let mut renamed = small_batch();
    renamed.tensors[0].0 = "idz".to_string();
    let mut fewer_real = small_batch();
    fewer_real.real_rows = 1;
    let mut reshaped = small_batch();
    reshaped.tensors[0].1 = Tensor::from_slice(&[4], &[1i32, 2, 3, 0]).expect("t");
    let mut retyped = small_batch();
    retyped.tensors[0].1 = Tensor::from_slice(&[2, 2], &[1f32, 2., 3., 0.]).expect("t");
    let mut changed = small_batch();
    changed.tensors[1].1 = Tensor::from_slice(&[2], &[7i64, 1]).expect("t");
    let digests = [
        b.digest(),
        renamed.digest(),
        fewer_real.digest(),
        reshaped.digest(),
        retyped.digest(),
        changed.digest(),
    ];
    for i in 0..digests.len() {
        for j in i + 1..digests.len() {
            assert_ne!(digests[i], digests[j], "{i} vs {j}");
        }
    }
    assert_eq!(b.rows(), 2);
    assert_eq!(b.num_bytes(), 32);
    assert_eq!(b["label"].values::<i64>(), Some(&[7, 0][..]));
    assert_eq!(b.shape().to_string(), "ids: i32[2, 2], label: i64[2]");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn always_aligned(sizes in proptest::collection::vec(0usize..100_000, 1..40)) {
        let pool = BufferPool::default();
        let mut live = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let b = pool.take_zeroed(n);
            prop_assert_eq!(b.as_ptr() as usize % ALIGN, 0);
            prop_assert_eq!(b.len(), n);
            prop_assert!(b.capacity() >= n && b.capacity() <= (n * 5 / 4).max(64));
            prop_assert!(b.as_bytes().iter().all(|&x| x == 0));
            let u = AlignedBuf::zeroed(n);
            prop_assert_eq!(u.as_ptr() as usize % ALIGN, 0);
            // Keep every other one alive so later takes mix fresh and reused.
            if i % 2 == 0 { live.push(b); }
        }
    }
}

#[test]
fn types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<AlignedBuf>();
    send_sync::<BufferPool>();
    send_sync::<Tensor>();
    send_sync::<Batch>();
    send_sync::<infeed::batch::Assembler>();
    send::<infeed::batch::Packer>();
    send::<infeed::batch::Bucketer<(Arc<infeed::example::ParsedBatch>, usize)>>();
}
