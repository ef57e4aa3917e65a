//! The largest value each size setting takes, checked when a pipeline is
//! built, so that a typo'd size (`--batch 4294967296`) is a
//! [`SettingError`] naming the setting, the value and the limit, never an
//! allocation that aborts the process or a panic.
//!
//! Sizes that only count (`skip`, `take`, `repeat`, `block_length`) take
//! any value. Sizes that hold memory either grow with use (a shuffle
//! buffer larger than the data holds only the data) or are bounded here:
//! by a count (threads, files open at once, batches ahead, rows) or, for a
//! batch's tensors, by the machine's memory, since every shape is known
//! before the first batch.

use super::error::SettingError;

/// Rows (records, or packed rows) of one host's batch.
pub const MAX_BATCH_ROWS: u64 = 1 << 24;
/// Worker threads, and logical streams on one host (a record thread each).
pub const MAX_THREADS: u64 = 1024;
/// Files open at once (`interleave`'s cycle length: a reader thread each).
pub const MAX_CYCLE_LENGTH: u64 = 4096;
/// Batches prepared ahead of the consumer.
pub const MAX_PREFETCH: u64 = 4096;
/// Bytes of one read (a local chunk, or a cloud range request).
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
/// Range reads in flight per shard.
pub const MAX_READAHEAD: u64 = 256;
/// Shard reader threads a host may run at once: each of its logical streams
/// reads `interleave` files at once (and opens the next), each on a thread
/// of its own, so the two settings are checked together.
pub const MAX_SHARD_THREADS: u64 = 4096;

/// `value` of `setting`, at most `max`.
pub(crate) fn at_most(setting: &'static str, value: u64, max: u64) -> Result<(), SettingError> {
    if value > max {
        return Err(SettingError {
            setting,
            value: value.to_string(),
            limit: format!("at most {max}"),
        });
    }
    Ok(())
}

/// `value` of `setting`, at least 1.
pub(crate) fn positive(setting: &'static str, value: u64) -> Result<(), SettingError> {
    if value == 0 {
        return Err(SettingError {
            setting,
            value: "0".into(),
            limit: "at least 1".into(),
        });
    }
    Ok(())
}

/// The machine's physical memory in bytes (`None` where it cannot be
/// read): no batch may take more.
pub(crate) fn memory_bytes() -> Option<u64> {
    // SAFETY: sysconf reads a system constant; it has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| (pages as u64).saturating_mul(page as u64))
}

/// A batch of `bytes` (its largest shape) fits the machine's memory.
pub(crate) fn batch_fits(bytes: u64, shape: &str) -> Result<(), SettingError> {
    let Some(memory) = memory_bytes() else {
        return Ok(());
    };
    if bytes > memory {
        return Err(SettingError {
            setting: "batch size and lengths",
            value: format!("a batch of {shape}: {bytes} bytes"),
            limit: format!(
                "at most this machine's memory ({memory} bytes): lower the batch size, \
                 max_length, fixed_length or the pack row length"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_the_setting_the_value_and_the_limit() {
        assert!(at_most("prefetch", 4096, MAX_PREFETCH).is_ok());
        let err = at_most("prefetch", 4097, MAX_PREFETCH).unwrap_err();
        assert_eq!(err.to_string(), "prefetch = 4097: at most 4096");
        assert_eq!(
            positive("batch", 0).unwrap_err().to_string(),
            "batch = 0: at least 1"
        );
        let memory = memory_bytes().expect("a Linux machine says its memory");
        assert!(memory > 1 << 20);
        assert!(batch_fits(memory, "x").is_ok());
        let err = batch_fits(memory + 1, "[2, 3] i64").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("batch size and lengths = a batch of [2, 3] i64")
        );
    }
}
