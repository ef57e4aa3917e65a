//! Pooled memory registered with a device for DMA ("pinned"): a device
//! runtime maps a pooled buffer once, on its first upload, and the buffer
//! keeps the mapping through every reuse. The mapping is undone before the
//! memory is freed, whoever frees it (a pool dropping its spare buffers on a
//! worker thread), or when the runtime goes first ([`release_owner`]).
//!
//! One process-wide table, since buffers outlive and cross the threads and
//! clients that map them; a free looks it up only while something is mapped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Undoes a mapping (a device runtime's unmap call).
pub trait Unmap: Send + Sync {
    /// Unmaps the region starting at `addr`; errors are the runtime's to
    /// log, since nothing can be done about them at a free.
    fn unmap(&self, addr: usize);
}

struct Entry {
    owner: u64,
    unmap: Arc<dyn Unmap>,
}

/// By address, each owner's mapping (two clients in one process map the
/// same buffer each for itself).
static MAPPED: Mutex<Option<HashMap<usize, Vec<Entry>>>> = Mutex::new(None);
/// Entries in `MAPPED`: 0 lets a free skip the lock.
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn table() -> MutexGuard<'static, Option<HashMap<usize, Vec<Entry>>>> {
    MAPPED.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when `owner` mapped the allocation at `addr`.
pub fn is_registered(addr: usize, owner: u64) -> bool {
    COUNT.load(Ordering::Acquire) > 0
        && table()
            .as_ref()
            .and_then(|t| t.get(&addr))
            .is_some_and(|es| es.iter().any(|e| e.owner == owner))
}

/// Records that `owner` mapped the allocation at `addr`; `unmap` is called
/// once, before the memory is freed or when the owner releases it. False
/// (and nothing recorded) when it is mapped already.
pub fn register(addr: usize, owner: u64, unmap: Arc<dyn Unmap>) -> bool {
    let mut guard = table();
    let entries = guard
        .get_or_insert_with(HashMap::new)
        .entry(addr)
        .or_default();
    if entries.iter().any(|e| e.owner == owner) {
        return false;
    }
    entries.push(Entry { owner, unmap });
    COUNT.fetch_add(1, Ordering::Release);
    true
}

/// How many allocations `owner` has mapped now (those it mapped, less the
/// ones unmapped since because their memory was freed).
pub fn mapped_by(owner: u64) -> usize {
    if COUNT.load(Ordering::Acquire) == 0 {
        return 0;
    }
    table().as_ref().map_or(0, |t| {
        t.values()
            .map(|es| es.iter().filter(|e| e.owner == owner).count())
            .sum()
    })
}

/// Unmaps everything `owner` mapped (the runtime is going away); how many.
pub fn release_owner(owner: u64) -> usize {
    let mut guard = table();
    let Some(t) = guard.as_mut() else {
        return 0;
    };
    let mut released = 0;
    t.retain(|&addr, entries| {
        entries.retain(|e| {
            if e.owner != owner {
                return true;
            }
            e.unmap.unmap(addr);
            released += 1;
            false
        });
        !entries.is_empty()
    });
    COUNT.fetch_sub(released, Ordering::Release);
    released
}

/// Called by the pool just before it frees the allocation at `addr`.
pub(super) fn before_free(addr: usize) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    // Unmapped under the lock, so an owner's release cannot unmap it too.
    let mut guard = table();
    for e in guard
        .as_mut()
        .and_then(|t| t.remove(&addr))
        .unwrap_or_default()
    {
        COUNT.fetch_sub(1, Ordering::Release);
        e.unmap.unmap(addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BufferPool, PoolConfig};

    #[derive(Default)]
    struct Log(Mutex<Vec<usize>>);

    impl Unmap for Log {
        fn unmap(&self, addr: usize) {
            self.0.lock().unwrap().push(addr);
        }
    }

    // One test for the whole table: the tests of this crate run in one
    // process, and these count its entries.
    #[test]
    fn a_mapping_lives_as_long_as_the_memory_or_its_owner() {
        let log = Arc::new(Log::default());
        let pool = BufferPool::new(PoolConfig::default().max_per_class(1));

        // Mapped once, kept through reuse, unmapped when the pool frees it.
        let a = pool.take_zeroed(1000);
        let addr = a.as_ptr() as usize;
        assert!(register(addr, 7, log.clone()));
        assert!(!register(addr, 7, log.clone()));
        drop(a);
        let again = pool.take_zeroed(1000);
        assert_eq!(again.as_ptr() as usize, addr);
        assert!(is_registered(addr, 7));
        assert!(!is_registered(addr, 8));
        assert_eq!((mapped_by(7), mapped_by(8)), (1, 0));
        let other = pool.take_zeroed(1000);
        let other_addr = other.as_ptr() as usize;
        assert!(register(other_addr, 8, log.clone()));
        drop(again); // kept by the pool: still mapped
        assert!(log.0.lock().unwrap().is_empty());
        drop(other); // the class is full: freed, so unmapped first
        assert_eq!(*log.0.lock().unwrap(), vec![other_addr]);
        assert!(!is_registered(other_addr, 8));
        assert_eq!((mapped_by(7), mapped_by(8)), (1, 0));

        // The owner goes first: its mappings are undone, the memory stays.
        assert_eq!(release_owner(7), 1);
        assert_eq!(*log.0.lock().unwrap(), vec![other_addr, addr]);
        assert!(!is_registered(addr, 7));
        assert_eq!(mapped_by(7), 0);
        drop(pool); // frees `addr` without a second unmap
        assert_eq!(log.0.lock().unwrap().len(), 2);
        assert_eq!(release_owner(7), 0);
    }
}
