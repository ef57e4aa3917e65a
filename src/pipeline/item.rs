//! A record on its way through the pipeline ([`Item`]): its bytes, where it
//! came from, and its length when a shard reader measured it already. Every
//! layer of the engine passes items; this module depends on none of them.

use std::sync::Arc;

use bytes::Bytes;

/// A record on its way through the pipeline, with where it came from.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub data: Bytes,
    /// Index of its file in the host's file list.
    pub file: u32,
    /// Byte offset of its header in the (uncompressed) file.
    pub offset: u64,
    /// The record's length as the grouping measures it, when its shard
    /// reader measured it already ([`StreamConfig::scan`]); else
    /// [`UNMEASURED`] (not scanned, changed by a map, read again on a
    /// restore, or a scan that failed: the record thread measures it in its
    /// turn, and an error names the record there).
    pub measured: u32,
    /// `data` is a view of a mapped file: holding it pins page-cache pages
    /// (which the kernel can reclaim), not a heap chunk of other records.
    pub mapped: bool,
    /// Not read yet: `data` stands in for the record, framed by its index
    /// or headers: bytes of its length, which only that length is taken
    /// from; the worker that assembles the record reads and checks it
    /// (`read/in_workers.rs`), and so first does a prefilter thread where a
    /// parsed filter or length decides its grouping (`threads/prefilter.rs`).
    pub unread: bool,
}

/// [`Item::measured`] when the record's length is not known yet.
pub(crate) const UNMEASURED: u32 = u32::MAX;

impl Item {
    /// A record that is not a view of a mapped file, not measured yet.
    pub fn new(data: Bytes, file: u32, offset: u64) -> Self {
        Item {
            data,
            file,
            offset,
            measured: UNMEASURED,
            mapped: false,
            unread: false,
        }
    }

    /// The length its shard reader measured, if it did.
    #[inline]
    pub fn measured(&self) -> Option<usize> {
        (self.measured != UNMEASURED).then_some(self.measured as usize)
    }
}

/// A record's bytes (an unread one's stand-in), as parsers take them.
impl AsRef<[u8]> for Item {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// The grouping's length scan of a serialized record, run by the shard
/// readers as they frame it (its bytes are in cache then, and the record
/// thread, which orders every record, is spared it); `None` when it cannot
/// tell (the record thread measures again and reports why).
pub(crate) type LengthScan = Arc<dyn Fn(&[u8]) -> Option<usize> + Send + Sync>;

/// A length for [`Item::measured`]: `UNMEASURED` for a scan that failed or
/// a length that does not fit.
#[inline]
pub(crate) fn carried(scan: &LengthScan, data: &[u8]) -> u32 {
    scan(data)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n != UNMEASURED)
        .unwrap_or(UNMEASURED)
}
