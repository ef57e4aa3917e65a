//! TFRecord framing: a sans-IO deframer, sync and async readers, writers,
//! masked CRC32C, GZIP/ZLIB, and the policy for corrupt records.
//!
//! On disk each record is
//! `u64 length (LE) | u32 masked_crc32c(length) | data | u32 masked_crc32c(data)`.
