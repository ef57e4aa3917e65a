//! Images decoded in the engine (feature `images`): PNG and JPEG values of
//! an image feature ([`ImageSpec`](crate::spec::ImageSpec)) become static
//! `[H, W, C]` u8 on the worker threads, as
//! `tf.io.decode_image(channels=c)` followed by the spec's mode.
//!
//! - [`sniff()`]: the format from the bytes, never from a name.
//! - `png` / `jpeg`: the decoders (the `png` crate; libjpeg-turbo with
//!   DCT-scaled, cropped decodes), `channels`: PNG channel conversion with
//!   libpng's rules.
//! - [`geometry`]: crop windows (fixed, eval resize + center crop, train
//!   random resized crop) and the sampling grid.
//! - `resize`: bilinear resampling as `tf.image.resize`, and the flip.
//! - [`Decoder`]: one image from bytes to pixels.
//!
//! Randomness comes from the caller (`draw`): the pipeline draws from its
//! counter-based RNG keyed per record, so pixels do not depend on threads.

mod channels;
mod decode;
mod error;
pub mod geometry;
mod jpeg;
mod png;
mod resize;
pub mod sniff;

pub use decode::Decoder;
pub use error::ImageError;
pub use sniff::{Format, sniff};

/// Most pixels a source image may have (64 Mi, e.g. 8192×8192): a bigger
/// one is refused before it is decoded, so a hostile header cannot make a
/// worker allocate without bound.
pub const MAX_PIXELS: usize = 1 << 26;

/// Refuses an empty image or one of more than [`MAX_PIXELS`] pixels.
fn check_size(format: Format, width: u64, height: u64) -> Result<(), ImageError> {
    let pixels = width.saturating_mul(height);
    if pixels == 0 || pixels > MAX_PIXELS as u64 {
        return Err(ImageError::BadSize {
            format,
            width,
            height,
        });
    }
    Ok(())
}
