//! PNG decoding (the `png` crate, pure Rust) to 8-bit samples in the
//! spec's channels, converted as libpng converts them for TensorFlow.

use std::io::Cursor;

use png::{BitDepth, ColorType, Transformations};

use super::channels::convert;
use super::error::ImageError;
use super::sniff::Format;

/// Decodes `data` into `out` as `channels` 8-bit samples per pixel; gives
/// the width and height. An image of more than
/// [`MAX_PIXELS`](super::MAX_PIXELS) pixels is refused before any is decoded.
pub(crate) fn decode(
    data: &[u8],
    channels: usize,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(usize, usize), ImageError> {
    let mut decoder = png::Decoder::new(Cursor::new(data));
    // Palette to RGB, tRNS to alpha, 1/2/4-bit gray to 8 bits (libpng's
    // expand); 16-bit samples are kept for the gray conversion.
    decoder.set_transformations(Transformations::EXPAND);
    decoder.set_limits(png::Limits {
        bytes: super::MAX_PIXELS * 8 + (1 << 20),
    });
    let mut reader = decoder.read_info().map_err(corrupt)?;
    let (w, h) = reader.info().size();
    super::check_size(Format::Png, w.into(), h.into())?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| message("image too large to decode".into()))?;
    scratch.clear();
    scratch.resize(size, 0);
    let frame = reader.next_frame(scratch).map_err(corrupt)?;
    let from = match frame.color_type {
        ColorType::Grayscale => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb => 3,
        ColorType::Rgba => 4,
        ColorType::Indexed => return Err(message("palette left unexpanded".into())),
    };
    let depth = match frame.bit_depth {
        BitDepth::Sixteen => 16,
        BitDepth::Eight => 8,
        other => return Err(message(format!("{other:?} samples left unexpanded"))),
    };
    let (w, h) = (frame.width as usize, frame.height as usize);
    let used = w * h * from * (depth as usize / 8);
    let rows = scratch
        .get(..used)
        .ok_or_else(|| message("short frame".into()))?;
    out.clear();
    convert(rows, from, depth, channels, out);
    Ok((w, h))
}

fn corrupt(e: png::DecodingError) -> ImageError {
    message(e.to_string())
}

fn message(message: String) -> ImageError {
    ImageError::Corrupt {
        format: Format::Png,
        message,
    }
}
