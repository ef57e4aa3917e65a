//! Local files mapped into memory, where a file cut short under its map is
//! an error, not a signal.
//!
//! A read of a mapped page past a file's new end raises SIGBUS, which ends
//! the process. Every map infeed reads through is made here and listed in
//! a fixed table of address ranges. On Linux a SIGBUS handler, installed
//! with the first map, looks the faulting address up there. When it falls
//! in one of these maps, the handler maps zero pages over the rest of that
//! map, marks it cut, and returns; the read goes on over the zeros. The
//! deframer that reads records from a map notices the cut after every record
//! (`faults` moved, then `cut_under` its chunk). It ends the read with an
//! error naming the shard ([`ErrorKind::CutWhileMapped`]), never a record
//! made of those zeros. A fault anywhere else goes to the handler that was
//! there before, or to the default action, as if this one were not there.
//!
//! The JVM's `MappedByteBuffer` is handled the same way; the alternative,
//! reading through `pread` always, costs a system call and a copy per read,
//! which maps avoid (`ReadOptions::mmap`).
//!
//! A handler installed later that does not pass faults on to the one before
//! (Python's `faulthandler` re-raises to the one before it; one that does
//! not) takes this guard away.
//!
//! [`ErrorKind::CutWhileMapped`]: super::ErrorKind::CutWhileMapped

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

/// Faults turned into cuts so far, in the whole process: a reader looks at
/// its own maps only when this moved.
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// Faults this process turned into cuts so far (a relaxed load: one
/// instruction on the hot path).
#[inline]
pub(crate) fn faults() -> u64 {
    FAULTS.load(Ordering::Relaxed)
}

/// Whether a map that the `len` bytes at address `addr` lie in was cut
/// under it (a read past the file's new end faulted there).
pub(crate) fn cut_under(addr: usize, len: usize) -> bool {
    guard::cut_under(addr, len)
}

/// `len` bytes of `file` from `offset`, mapped read-only (`len` > 0), with
/// the page-table entries made at once when `populate`. The map lives as
/// long as the returned bytes (and their slices).
pub(crate) fn map(file: &File, offset: u64, len: usize, populate: bool) -> io::Result<Bytes> {
    let mut options = memmap2::MmapOptions::new();
    options.offset(offset).len(len); // memmap2 maps from the page boundary below
    if populate {
        options.populate();
    }
    // SAFETY: read-only, and alive as long as the `Bytes` over it. Bytes
    // changed meanwhile are caught by the records' CRCs; a cut is turned
    // into an error (above).
    let map = unsafe { options.map(file) }?;
    Ok(Bytes::from_owner(guard::Guarded::new(map)?))
}

/// The whole of `file`, mapped (empty for an empty file).
pub(crate) fn map_whole(file: &File) -> io::Result<Bytes> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    let len = usize::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
    map(file, 0, len, false)
}

/// Lets go of the pages of `map` (a map made here, or a view of one) that
/// the process has touched: they leave its RSS, and the next read of one
/// faults it in again from the page cache, the same bytes (the map is of a
/// file, read-only; over a cut, of zeros). Nothing where that is not
/// supported.
pub(crate) fn release_pages(map: &[u8]) {
    #[cfg(unix)]
    {
        if map.is_empty() {
            return;
        }
        // SAFETY: `_SC_PAGESIZE` has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let start = map.as_ptr() as usize & !(page - 1);
        let len = map.as_ptr() as usize + map.len() - start;
        // SAFETY: the range lies in one read-only map of a file (from the
        // page boundary below its first byte, which memmap2 maps too), or
        // in the zero pages mapped over a cut one: dropping their page
        // table entries changes no byte anyone reads through them.
        unsafe {
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED);
        }
    }
}

#[cfg(target_os = "linux")]
mod guard {
    //! The table of maps and the SIGBUS handler (Linux).

    use std::io;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::FAULTS;

    /// Maps listed at once: a global shuffle keeps a map per shard it has
    /// read, so this is the most shards a process reads mapped at once.
    const SLOTS: usize = 1 << 16;

    struct Slot {
        /// The map's first page; 0: a free slot.
        start: AtomicUsize,
        /// Its length, in whole pages.
        len: AtomicUsize,
        cut: AtomicBool,
    }

    #[allow(clippy::declare_interior_mutable_const)] // only to fill the table
    const FREE: Slot = Slot {
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        cut: AtomicBool::new(false),
    };

    static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
    /// The slots ever taken (a free one is looked for below this first).
    static USED: AtomicUsize = AtomicUsize::new(0);
    /// The SIGBUS action before ours, passed the faults that are not ours.
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

    /// The page size, read when the handler is installed (sysconf is not
    /// one of the calls a signal handler may make).
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    fn page() -> usize {
        PAGE.load(Ordering::Relaxed)
    }

    /// A map listed in the table while it lives.
    pub(super) struct Guarded {
        map: memmap2::Mmap,
        slot: usize,
    }

    impl Guarded {
        pub(super) fn new(map: memmap2::Mmap) -> io::Result<Guarded> {
            install();
            let page = page();
            let start = map.as_ptr() as usize & !(page - 1);
            let end = (map.as_ptr() as usize + map.len()).div_ceil(page) * page;
            let slot = take_slot().ok_or_else(|| {
                io::Error::other(format!(
                    "more than {SLOTS} files mapped at once: turn ReadOptions::mmap off"
                ))
            })?;
            let s = &TABLE[slot];
            s.cut.store(false, Ordering::Relaxed);
            s.len.store(end - start, Ordering::Relaxed);
            // Published last: a slot with a start is whole.
            s.start.store(start, Ordering::Release);
            Ok(Guarded { map, slot })
        }
    }

    impl AsRef<[u8]> for Guarded {
        fn as_ref(&self) -> &[u8] {
            &self.map
        }
    }

    impl Drop for Guarded {
        fn drop(&mut self) {
            // Off the table before the map goes (its field drops after).
            let s = &TABLE[self.slot];
            s.len.store(0, Ordering::Relaxed);
            s.start.store(0, Ordering::Release);
        }
    }

    /// A free slot, taken (its start set to a placeholder until filled).
    fn take_slot() -> Option<usize> {
        const TAKEN: usize = usize::MAX;
        let used = USED.load(Ordering::Acquire).min(SLOTS);
        for (i, slot) in TABLE[..used].iter().enumerate() {
            if slot
                .start
                .compare_exchange(0, TAKEN, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some(i);
            }
        }
        loop {
            let i = USED.fetch_add(1, Ordering::AcqRel);
            if i >= SLOTS {
                USED.store(SLOTS, Ordering::Release);
                return None;
            }
            if TABLE[i]
                .start
                .compare_exchange(0, TAKEN, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some(i);
            }
        }
    }

    /// The listed map holding `addr`.
    fn slot_of(addr: usize) -> Option<&'static Slot> {
        let used = USED.load(Ordering::Acquire).min(SLOTS);
        TABLE[..used].iter().find(|s| {
            let start = s.start.load(Ordering::Acquire);
            start != 0 && addr >= start && addr - start < s.len.load(Ordering::Relaxed)
        })
    }

    pub(super) fn cut_under(addr: usize, len: usize) -> bool {
        let used = USED.load(Ordering::Acquire).min(SLOTS);
        TABLE[..used].iter().any(|s| {
            let start = s.start.load(Ordering::Acquire);
            let end = start.saturating_add(s.len.load(Ordering::Relaxed));
            start != 0 && s.cut.load(Ordering::Acquire) && addr < end && addr + len.max(1) > start
        })
    }

    /// Installs the handler once, keeping the action before it.
    fn install() {
        PREVIOUS.get_or_init(|| {
            // SAFETY: sysconf has no preconditions.
            let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if let Ok(size @ 1..) = usize::try_from(size) {
                PAGE.store(size, Ordering::Relaxed);
            }
            // SAFETY: plain sigaction calls on zeroed structs of libc's
            // types; the handler is async-signal-safe (atomics, mmap).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_sigbus as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut previous: libc::sigaction = std::mem::zeroed();
                libc::sigaction(libc::SIGBUS, &action, &mut previous);
                previous
            }
        });
    }

    /// A fault in a listed map: zero pages over the rest of it (the file
    /// ended there), the map marked cut; any other: the action before.
    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        if let Some(slot) = slot_of(addr) {
            let page = page();
            let from = addr & !(page - 1);
            let end = slot.start.load(Ordering::Acquire) + slot.len.load(Ordering::Relaxed);
            // SAFETY: [from, end) lies in a live map of ours (listed until
            // it is unmapped): replaced by anonymous zero pages, read-only.
            let zeros = unsafe {
                libc::mmap(
                    from as *mut libc::c_void,
                    end - from,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                slot.cut.store(true, Ordering::Release);
                FAULTS.fetch_add(1, Ordering::AcqRel);
                return;
            }
        }
        pass_on(sig, info, ctx);
    }

    /// The fault to the action that was there before ours.
    fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let Some(previous) = PREVIOUS.get() else {
            return;
        };
        let handler = previous.sa_sigaction;
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            // The default action: put back, and the fault happens again
            // when this returns (a memory fault cannot be ignored).
            // SAFETY: sigaction is async-signal-safe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
            }
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the previous handler took these arguments.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            f(sig, info, ctx);
        } else {
            // SAFETY: a plain handler takes the signal number.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(sig);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod guard {
    //! Elsewhere maps are not guarded: a cut still faults
    //! (`ReadOptions::mmap` says so).

    pub(super) struct Guarded(memmap2::Mmap);

    impl Guarded {
        pub(super) fn new(map: memmap2::Mmap) -> std::io::Result<Guarded> {
            Ok(Guarded(map))
        }
    }

    impl AsRef<[u8]> for Guarded {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }

    pub(super) fn cut_under(_addr: usize, _len: usize) -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::record::{Compression, Deframer, ErrorKind, ReadOptions, RecordWriter};

    /// Three records of 20 000 bytes, mapped whole, then the file cut to
    /// 25 000 bytes: the second record's payload runs into pages past the
    /// new end.
    fn cut_file(dir: &std::path::Path) -> (String, Bytes) {
        let path = dir.join("cut.tfrecord");
        let mut w = RecordWriter::new(File::create(&path).unwrap(), Compression::None);
        for i in 0..3u8 {
            w.write_record(&vec![i + 1; 20_000]).unwrap();
        }
        w.finish().unwrap();
        let map = map_whole(&File::open(&path).unwrap()).unwrap();
        let writable = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        writable.set_len(25_000).unwrap();
        (path.to_str().unwrap().to_owned(), map)
    }

    #[test]
    fn a_file_cut_under_its_map_is_an_error_naming_it_not_a_signal() {
        for verify_crc in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let (path, map) = cut_file(dir.path());
            let opts = ReadOptions::default().verify_crc(verify_crc);
            let mut d = Deframer::new(path.clone(), &opts);
            d.push(map);
            let first = d.next_record().unwrap().unwrap();
            assert_eq!((first.offset, &first.data[..]), (0, &[1u8; 20_000][..]));
            // Read past the cut: zeros where the pages were, and then the
            // error, with or without the payload's CRC checked.
            let e = d.next_record().unwrap_err();
            assert_eq!(
                e.kind,
                ErrorKind::CutWhileMapped { len: 25_000 },
                "{verify_crc}"
            );
            assert_eq!((e.path.as_str(), e.offset), (path.as_str(), 20_016));
            assert_eq!(
                e.to_string(),
                format!(
                    "{path}: record 1 at byte 20016: the file was cut short while it was \
                     read (mapped): it is 25000 bytes now, and this record was past its end"
                )
            );
            assert!(d.next_record().unwrap().is_none(), "it stops there");
        }
    }

    #[test]
    fn a_fault_outside_the_maps_is_not_ours_and_other_maps_read_on() {
        let dir = tempfile::tempdir().unwrap();
        let (_, cut) = cut_file(dir.path());
        // Another map of a file nobody cuts reads as it should after a
        // fault in the first.
        let path = dir.path().join("whole.tfrecord");
        std::fs::write(&path, vec![7u8; 3 * 4096]).unwrap();
        let whole = map_whole(&File::open(&path).unwrap()).unwrap();
        let before = faults();
        assert_eq!(cut[30_000], 0, "zeros past the cut");
        assert!(faults() > before);
        assert!(cut_under(cut.as_ptr() as usize + 30_000, 1));
        assert!(!cut_under(whole.as_ptr() as usize, whole.len()));
        assert!(whole.iter().all(|&b| b == 7));
        // Dropped, a map leaves the table: its range is no longer cut.
        let at = cut.as_ptr() as usize;
        drop(cut);
        assert!(!cut_under(at + 30_000, 1));
    }
}
