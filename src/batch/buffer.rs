//! 64-byte aligned byte buffers and the pool that recycles them.
//!
//! Batch tensors live in [`AlignedBuf`]s: one heap allocation each, aligned to
//! [`ALIGN`] bytes, taken from a [`BufferPool`] and handed back to it when the
//! buffer drops, so a steady pipeline allocates nothing per batch.

use std::alloc::{self, Layout};
use std::collections::HashMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::dtype::Element;

/// Alignment of every [`AlignedBuf`] in bytes (what PJRT zero-copy needs, and
/// a cache line).
pub const ALIGN: usize = 64;

/// The capacity class a request of `len` bytes is served from: at least 64
/// bytes, then powers of two with three steps between (2^k · {1, 1.25, 1.5,
/// 1.75}), so a buffer wastes at most a quarter of its size while buffers of
/// nearby sizes still share a class.
///
/// # Panics
/// When the class would exceed `isize::MAX` bytes (as `Vec::with_capacity`).
pub fn capacity_class(len: usize) -> usize {
    if len <= ALIGN {
        return ALIGN;
    }
    let k = usize::BITS - 1 - len.leading_zeros(); // floor(log2(len))
    let step = (1usize << k) >> 2;
    len.checked_add(step - 1)
        .map(|n| n & !(step - 1))
        .filter(|&n| n <= isize::MAX as usize - ALIGN)
        .unwrap_or_else(|| panic!("buffer of {len} bytes is too large"))
}

/// Buffers of at least this many bytes start on a page of their own (their
/// capacity classes are whole pages too), so no other allocation shares
/// their pages: a device runtime that pins memory page by page can pin
/// each on its own (`xla/dma.rs`).
pub(crate) const PAGE_ALIGNED_FROM: usize = 64 << 10;

fn layout(capacity: usize) -> Layout {
    let align = if capacity >= PAGE_ALIGNED_FROM {
        4096
    } else {
        ALIGN
    };
    // `capacity_class` keeps capacities within isize::MAX - ALIGN.
    Layout::from_size_align(capacity, align).expect("capacity within Layout limits")
}

/// An owned allocation (no length, no pool): what the pool keeps.
struct RawAlloc {
    ptr: NonNull<u8>,
    capacity: usize,
    /// The [`thread_tag`] of the thread that last took it from the pool.
    taker: u32,
}

/// A number for the calling thread, unique in the process (never 0).
fn thread_tag() -> u32 {
    use std::cell::Cell;
    use std::sync::atomic::AtomicU32;
    static NEXT: AtomicU32 = AtomicU32::new(1);
    thread_local!(static TAG: Cell<u32> = const { Cell::new(0) });
    TAG.with(|tag| {
        if tag.get() == 0 {
            tag.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        tag.get()
    })
}

// SAFETY: a RawAlloc is the sole owner of its heap memory.
unsafe impl Send for RawAlloc {}

impl RawAlloc {
    /// A fresh zeroed allocation: every byte of every buffer is initialised
    /// from birth, so views of reused buffers never read uninitialised memory.
    fn new_zeroed(capacity: usize) -> Self {
        let layout = layout(capacity);
        // SAFETY: capacity >= ALIGN > 0, so the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Self {
            ptr,
            capacity,
            taker: 0,
        }
    }

    fn free(self) {
        #[cfg(feature = "xla")]
        super::registered::before_free(self.ptr.as_ptr() as usize);
        // SAFETY: allocated by `new_zeroed` with this same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout(self.capacity)) }
    }
}

/// How many buffers a [`BufferPool`] keeps for reuse: [`PoolConfig::default`]
/// and the setters (`#[non_exhaustive]`; the fields stay public).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolConfig {
    /// Buffers kept per capacity class; more are freed when they drop.
    pub max_per_class: usize,
    /// Bytes kept in all; a returned buffer that would pass this is freed.
    pub max_bytes: usize,
}

impl Default for PoolConfig {
    /// 256 buffers per class, 512 MiB in all. The bytes are the bound that
    /// matters; the count only has to exceed what a pipeline has out at
    /// once: a batch per worker being made, the output queue (prefetch plus
    /// a batch per worker), the consumer's few, times the tensors of a
    /// batch that share a class. At 32, a GPU run on 16 cores freed 157
    /// pool buffers in 300 steps, which the pool does only with more than 32
    /// of a class out at once; each was then allocated, faulted in and
    /// mapped for DMA again (docs/xla.md, "On a GPU").
    fn default() -> Self {
        Self {
            max_per_class: 256,
            max_bytes: 512 << 20,
        }
    }
}

impl PoolConfig {
    /// Sets [`max_per_class`](Self::max_per_class): buffers kept per
    /// capacity class.
    pub fn max_per_class(mut self, buffers: usize) -> Self {
        self.max_per_class = buffers;
        self
    }

    /// Sets [`max_bytes`](Self::max_bytes): bytes kept in all.
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }
}

/// Counters of a [`BufferPool`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers allocated fresh from the system.
    pub allocations: u64,
    /// Takes served by a kept buffer.
    pub reuses: u64,
    /// Dropped buffers kept for reuse.
    pub returned: u64,
    /// Dropped buffers freed because the pool was full.
    pub released: u64,
    /// Buffers kept now.
    pub kept_buffers: usize,
    /// Bytes (capacity) kept now.
    pub kept_bytes: usize,
}

#[derive(Default)]
struct FreeLists {
    by_class: HashMap<usize, Vec<RawAlloc>>,
    buffers: usize,
    bytes: usize,
}

struct PoolInner {
    config: PoolConfig,
    free: Mutex<FreeLists>,
    allocations: AtomicU64,
    reuses: AtomicU64,
    returned: AtomicU64,
    released: AtomicU64,
}

impl PoolInner {
    /// The newest kept buffer of `capacity` that this thread took last,
    /// else the newest of any thread, else a fresh one. A worker so gets
    /// back the buffers it wrote itself once the consumer drops them: their
    /// lines are in its own core's caches, not modified in another core's,
    /// which on 2 cores made lm and img ~8% slower (docs/architecture.md,
    /// "Decisions": aligned, pooled output).
    fn take(&self, capacity: usize) -> RawAlloc {
        let me = thread_tag();
        let kept = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            let raw = free.by_class.get_mut(&capacity).and_then(|list| {
                let at = (list.iter().rposition(|r| r.taker == me))
                    .or_else(|| list.len().checked_sub(1))?;
                Some(list.remove(at))
            });
            if raw.is_some() {
                free.buffers -= 1;
                free.bytes -= capacity;
            }
            raw
        };
        let mut raw = match kept {
            Some(raw) => {
                self.reuses.fetch_add(1, Ordering::Relaxed);
                raw
            }
            None => {
                self.allocations.fetch_add(1, Ordering::Relaxed);
                RawAlloc::new_zeroed(capacity)
            }
        };
        raw.taker = me;
        raw
    }

    fn give_back(&self, raw: RawAlloc) {
        let rejected = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            let fits_bytes = free.bytes + raw.capacity <= self.config.max_bytes;
            let list = free.by_class.entry(raw.capacity).or_default();
            if fits_bytes && list.len() < self.config.max_per_class {
                let capacity = raw.capacity;
                list.push(raw);
                free.buffers += 1;
                free.bytes += capacity;
                None
            } else {
                Some(raw)
            }
        };
        match rejected {
            None => {
                self.returned.fetch_add(1, Ordering::Relaxed);
            }
            Some(raw) => {
                self.released.fetch_add(1, Ordering::Relaxed);
                raw.free();
            }
        }
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        let free = self.free.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, list) in free.by_class.drain() {
            list.into_iter().for_each(RawAlloc::free);
        }
    }
}

/// A thread-safe pool of [`AlignedBuf`]s, recycled by capacity class.
///
/// Cloning is cheap and shares the pool. Buffers taken from it return to it
/// when they drop (from any thread), up to [`PoolConfig`]'s bounds; the pool's
/// memory is freed when the pool and every buffer taken from it are gone.
/// Reuse is last-in first-out, so a steady loop gets the same (cache-warm)
/// memory back, and a thread gets first the buffers it took itself (wherever
/// they were dropped): each batch worker writes the memory it wrote before.
#[derive(Clone)]
pub struct BufferPool {
    inner: Arc<PoolInner>,
}

impl Default for BufferPool {
    fn default() -> Self {
        Self::new(PoolConfig::default())
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("config", &self.inner.config)
            .field("stats", &self.stats())
            .finish()
    }
}

impl BufferPool {
    /// An empty pool with these bounds.
    pub fn new(config: PoolConfig) -> Self {
        Self {
            inner: Arc::new(PoolInner {
                config,
                free: Mutex::new(FreeLists::default()),
                allocations: AtomicU64::new(0),
                reuses: AtomicU64::new(0),
                returned: AtomicU64::new(0),
                released: AtomicU64::new(0),
            }),
        }
    }

    /// The pool's bounds.
    pub fn config(&self) -> PoolConfig {
        self.inner.config
    }

    /// A buffer of `len` bytes whose contents are whatever they were: zeros
    /// when fresh, earlier data when reused. Always initialised memory; for
    /// writers that overwrite every byte (batch assembly).
    pub fn take_stale(&self, len: usize) -> AlignedBuf {
        let raw = self.inner.take(capacity_class(len));
        AlignedBuf {
            ptr: raw.ptr,
            len,
            capacity: raw.capacity,
            taker: raw.taker,
            pool: Some(Arc::clone(&self.inner)),
        }
    }

    /// A buffer of `len` zero bytes.
    ///
    /// # Panics
    /// When `len` is near `isize::MAX` (as `Vec::with_capacity`).
    pub fn take_zeroed(&self, len: usize) -> AlignedBuf {
        let mut buf = self.take_stale(len);
        buf.as_bytes_mut().fill(0);
        buf
    }

    /// A buffer of `count` elements, each `value`.
    ///
    /// # Panics
    /// When the byte size overflows or is near `isize::MAX`.
    pub fn take_filled<T: Element>(&self, count: usize, value: T) -> AlignedBuf {
        let len = count
            .checked_mul(size_of::<T>())
            .unwrap_or_else(|| panic!("buffer of {count} elements is too large"));
        let mut buf = self.take_stale(len);
        buf.as_mut_slice::<T>().fill(value);
        buf
    }

    /// A copy of `values` in a pooled buffer.
    pub fn take_copy<T: Element>(&self, values: &[T]) -> AlignedBuf {
        let mut buf = self.take_stale(size_of_val(values));
        buf.as_mut_slice::<T>().copy_from_slice(values);
        buf
    }

    /// The pool's counters now.
    pub fn stats(&self) -> PoolStats {
        let (kept_buffers, kept_bytes) = {
            let free = self.inner.free.lock().unwrap_or_else(|e| e.into_inner());
            (free.buffers, free.bytes)
        };
        PoolStats {
            allocations: self.inner.allocations.load(Ordering::Relaxed),
            reuses: self.inner.reuses.load(Ordering::Relaxed),
            returned: self.inner.returned.load(Ordering::Relaxed),
            released: self.inner.released.load(Ordering::Relaxed),
            kept_buffers,
            kept_bytes,
        }
    }
}

/// A heap buffer of `len` bytes aligned to [`ALIGN`], optionally owned by a
/// [`BufferPool`] that gets it back on drop.
///
/// Every byte is always initialised. Typed views ([`as_slice`](Self::as_slice))
/// reinterpret the bytes as `i64`, `i32`, `f32` or `u8` in native byte order.
///
/// # Handing a buffer to a device (PJRT zero-copy)
/// PJRT's `BufferFromHostBuffer` with zero-copy semantics only avoids a copy
/// when the host memory is 64-byte aligned (it silently copies otherwise), and
/// the memory must stay valid until the device buffer is done with it. Both
/// hold for an `AlignedBuf`:
/// - its start is always a multiple of 64 ([`AlignedBuf::as_ptr`]);
/// - its memory is a separate heap allocation, so moving the `AlignedBuf` (or
///   the [`Tensor`](super::Tensor) or [`Batch`](super::Batch) holding it) never
///   moves the bytes.
///
/// To keep the memory alive for the device, move the buffer (or its tensor)
/// into an `Arc`, take the raw pointer, and give a clone of the `Arc` to the
/// callback PJRT calls when it no longer needs the host memory; drop it there.
/// The buffer returns to the pool only then.
///
/// ```
/// use std::sync::Arc;
/// use infeed::batch::{AlignedBuf, ALIGN};
/// let buf = Arc::new(AlignedBuf::zeroed(1024));
/// let ptr = buf.as_ptr();                 // hand `ptr` to the device...
/// assert_eq!(ptr as usize % ALIGN, 0);
/// let keep_alive = Arc::clone(&buf);      // ...and this to its on-done callback
/// drop(buf);
/// assert_eq!(keep_alive.as_ptr(), ptr);   // still valid until the last Arc drops
/// ```
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
    taker: u32,
    pool: Option<Arc<PoolInner>>,
}

// SAFETY: an AlignedBuf is the sole owner of its heap memory; shared access
// only reads it.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` zero bytes that belongs to no pool (freed on drop).
    pub fn zeroed(len: usize) -> Self {
        let raw = RawAlloc::new_zeroed(capacity_class(len));
        Self {
            ptr: raw.ptr,
            len,
            capacity: raw.capacity,
            taker: 0,
            pool: None,
        }
    }

    /// An unpooled copy of `values`.
    pub fn from_slice<T: Element>(values: &[T]) -> Self {
        let mut buf = Self::zeroed(size_of_val(values));
        buf.as_mut_slice::<T>().copy_from_slice(values);
        buf
    }

    /// Shortens the buffer to `len` bytes (its capacity stays); nothing
    /// when it is not longer.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (the capacity class; at least `len`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// True when dropping the buffer returns it to a pool.
    pub fn is_pooled(&self) -> bool {
        self.pool.is_some()
    }

    /// The start of the buffer: a multiple of [`ALIGN`], stable for the
    /// buffer's life however the buffer is moved.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The start of the buffer, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: ptr is valid for `capacity >= len` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, for writing.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes as elements of `T`.
    ///
    /// # Panics
    /// When `len` is not a multiple of `size_of::<T>()` (never for the buffer
    /// of a [`Tensor`](super::Tensor) viewed as its own element type).
    pub fn as_slice<T: Element>(&self) -> &[T] {
        let n = self.elements::<T>();
        // SAFETY: ptr is 64-byte aligned (≥ align_of::<T>()), valid for
        // n * size_of::<T>() <= len initialised bytes, and T is plain old data.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<T>(), n) }
    }

    /// The bytes as elements of `T`, for writing.
    ///
    /// # Panics
    /// As [`as_slice`](Self::as_slice).
    pub fn as_mut_slice<T: Element>(&mut self) -> &mut [T] {
        let n = self.elements::<T>();
        // SAFETY: as in `as_slice`, and `&mut self` makes the access unique;
        // any value written is a valid bit pattern for the other views.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<T>(), n) }
    }

    fn elements<T: Element>(&self) -> usize {
        let size = size_of::<T>();
        assert!(
            self.len.is_multiple_of(size),
            "a buffer of {} bytes is not a whole number of {}-byte elements",
            self.len,
            size
        );
        self.len / size
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let raw = RawAlloc {
            ptr: self.ptr,
            capacity: self.capacity,
            taker: self.taker,
        };
        match self.pool.take() {
            Some(pool) => pool.give_back(raw),
            None => raw.free(),
        }
    }
}

impl Clone for AlignedBuf {
    /// A copy in a buffer of the same pool (or unpooled).
    fn clone(&self) -> Self {
        let mut copy = match &self.pool {
            Some(pool) => BufferPool {
                inner: Arc::clone(pool),
            }
            .take_stale(self.len),
            None => Self::zeroed(self.len),
        };
        copy.as_bytes_mut().copy_from_slice(self.as_bytes());
        copy
    }
}

impl PartialEq for AlignedBuf {
    /// Equal bytes (capacity and pool do not count).
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("pooled", &self.pool.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_own_their_pages() {
        let pool = BufferPool::default();
        for len in [PAGE_ALIGNED_FROM, PAGE_ALIGNED_FROM + 1, 3 << 20] {
            let b = pool.take_zeroed(len);
            assert_eq!(b.as_ptr() as usize % 4096, 0, "{len}");
            assert_eq!(b.capacity() % 4096, 0, "{len}");
        }
        let small = pool.take_zeroed(1000);
        assert_eq!(small.as_ptr() as usize % ALIGN, 0);
    }

    #[test]
    fn classes() {
        let got: Vec<usize> = [0, 1, 64, 65, 80, 96, 127, 128, 129, 160, 161, 1000, 1024]
            .iter()
            .map(|&n| capacity_class(n))
            .collect();
        assert_eq!(
            got,
            [64, 64, 64, 80, 80, 96, 128, 128, 160, 160, 192, 1024, 1024]
        );
        assert_eq!(capacity_class(256 * 512 * 4), 512 << 10);
        assert_eq!(capacity_class((512 << 10) + 1), 640 << 10);
    }
}
