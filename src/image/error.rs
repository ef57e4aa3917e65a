//! What decoding an image can fail with. The pipeline adds the file, the
//! record's byte offset and the feature (`PipelineError::Image`).

use super::sniff::Format;

/// An image that could not be decoded into its static shape.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// Neither a PNG nor a JPEG signature.
    #[error("not a PNG or JPEG image (first bytes {first:02x?})")]
    UnknownFormat { first: Vec<u8> },
    /// A CMYK (or YCCK) JPEG: TensorFlow refuses them too.
    #[error("CMYK JPEG images are not supported (convert them to RGB)")]
    Cmyk,
    /// The decoder refused the data: corrupt, truncated, or a kind it
    /// does not read (e.g. 12-bit JPEG).
    #[error("corrupt or truncated {format}: {message}")]
    Corrupt { format: Format, message: String },
    /// Larger than [`MAX_PIXELS`](super::MAX_PIXELS) pixels (or empty).
    #[error("{format} of {width}x{height} pixels: only 1 to {max} pixels are decoded", max = super::MAX_PIXELS)]
    BadSize {
        format: Format,
        width: u64,
        height: u64,
    },
    /// With `ImageMode::Fixed`, an image of another size than the spec's.
    #[error(
        "{format} is {width}x{height} (width x height), the spec says {expected_width}x{expected_height}"
    )]
    SizeMismatch {
        format: Format,
        width: usize,
        height: usize,
        expected_width: usize,
        expected_height: usize,
    },
    /// A record holds other than one bytes value for the image.
    #[error("an image feature holds one value per record, this one holds {count}")]
    ValueCount { count: usize },
}
