//! One encoded image to its static `[H, W, C]` u8: sniff the format, pick
//! the window the mode asks for, decode only what it needs (JPEG: the
//! region the output reads; in train mode at 1/2, 1/4 or 1/8 scale when
//! the crop is at least twice the output; eval stays at full scale so its
//! pixels follow TensorFlow's decode and resize), resample, flip.

use crate::spec::{ImageMode, ImageSpec};

use super::error::ImageError;
use super::geometry::{self, Axis};
use super::jpeg::{self, Jpeg, Region};
use super::resize;
use super::sniff::{Format, sniff};

/// A decoder with its scratch buffers and JPEG handle; one per thread,
/// reused from image to image.
#[derive(Default)]
pub struct Decoder {
    jpeg: Option<Jpeg>,
    pixels: Vec<u8>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").finish_non_exhaustive()
    }
}

impl Decoder {
    /// A decoder; its buffers grow to the largest image it decodes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes `data` (PNG or JPEG, by its bytes) into `out`, which holds
    /// `spec.height * spec.width * spec.channels` bytes, drawing the random
    /// crop and flip from `draw` (never called for a fixed or eval image
    /// without flip).
    pub fn decode_into(
        &mut self,
        data: &[u8],
        spec: &ImageSpec,
        draw: &mut dyn FnMut() -> u64,
        out: &mut [u8],
    ) -> Result<(), ImageError> {
        let [oh, ow, c] = spec.shape();
        if out.len() != oh * ow * c {
            return Err(ImageError::ValueCount { count: out.len() });
        }
        let format = sniff(data).ok_or_else(|| ImageError::UnknownFormat {
            first: data.iter().take(8).copied().collect(),
        })?;
        // PNG is decoded whole (no scaled decode exists); JPEG's header comes
        // first so the window can choose the region and scale.
        let (width, height, header) = match format {
            Format::Png => {
                let (w, h) = super::png::decode(data, c, &mut self.scratch, &mut self.pixels)?;
                (w, h, None)
            }
            Format::Jpeg => {
                let jpeg = self.jpeg()?;
                let header = match jpeg.header(data) {
                    Ok(h) => h,
                    Err(e) => return Err(self.failed(e)),
                };
                super::check_size(format, header.width as u64, header.height as u64)?;
                (header.width, header.height, Some(header))
            }
        };
        if spec.mode == ImageMode::Fixed && (width, height) != (ow, oh) {
            return Err(ImageError::SizeMismatch {
                format,
                width,
                height,
                expected_width: ow,
                expected_height: oh,
            });
        }
        let window = geometry::window(spec, width, height, draw);
        let flip = spec.flip && draw() & 1 == 1;
        let (y, x) = match (spec.mode, window) {
            (ImageMode::ResizeCrop { shorter_side }, _) => {
                geometry::resize_center_crop(width, height, shorter_side, oh, ow)
            }
            (_, Some(w)) => (Axis::crop(w.y, w.height, oh), Axis::crop(w.x, w.width, ow)),
            (_, None) => (Axis::crop(0, height, oh), Axis::crop(0, width, ow)),
        };
        let (y, x, src_w) = match header {
            None => (y, x, width),
            Some(header) => {
                let denom = match (spec.mode, window) {
                    (ImageMode::RandomResizedCrop, Some(w)) => {
                        geometry::dct_denominator(&w, oh, ow)
                    }
                    _ => 1,
                };
                let region = region(&header, &y, &x, oh, ow, denom, spec.mode);
                let mut pixels = std::mem::take(&mut self.pixels);
                let decoded = self.jpeg()?.decode(data, &header, region, c, &mut pixels);
                self.pixels = pixels;
                if let Err(e) = decoded {
                    return Err(self.failed(e));
                }
                (
                    y.rescaled(denom, region.y, region.h),
                    x.rescaled(denom, region.x, region.w),
                    region.w,
                )
            }
        };
        if spec.mode == ImageMode::Fixed {
            resize::copy(&self.pixels, src_w, c, flip, out);
        } else {
            resize::resize(&self.pixels, src_w, c, &y, &x, oh, ow, flip, out);
        }
        Ok(())
    }

    fn jpeg(&mut self) -> Result<&mut Jpeg, ImageError> {
        if self.jpeg.is_none() {
            self.jpeg = Some(Jpeg::new()?);
        }
        Ok(self.jpeg.as_mut().expect("set above"))
    }

    /// After a failed JPEG call the handle is dropped: the next image gets
    /// a fresh one, whatever state the failure left behind.
    fn failed(&mut self, e: ImageError) -> ImageError {
        self.jpeg = None;
        e
    }
}

/// The region of the JPEG to decode at 1/`denom`: the source pixels the
/// grid reads (eval and train modes; a fixed image is read whole) and an
/// iMCU around them, its left edge moved down to a multiple of the scaled iMCU width as
/// TurboJPEG requires.
fn region(
    header: &jpeg::Header,
    y: &Axis,
    x: &Axis,
    out_h: usize,
    out_w: usize,
    denom: usize,
    mode: ImageMode,
) -> Region {
    let (sw, sh) = (
        jpeg::scaled(header.width, denom),
        jpeg::scaled(header.height, denom),
    );
    let whole = Region {
        denom,
        x: 0,
        y: 0,
        w: sw,
        h: sh,
    };
    let mcu = jpeg::scaled(header.mcu_width, denom);
    if mode == ImageMode::Fixed || mcu == 0 {
        return whole;
    }
    let ((y0, y1), (x0, x1)) = (y.span(out_h), x.span(out_w));
    // One iMCU of margin on every side: at a region's edge libjpeg-turbo's
    // fancy upsampling lacks its neighbours and may differ from a whole
    // decode by a level or two; inside the margin it does not.
    let to_scaled = |lo: usize, hi: usize, len: usize| {
        (
            (lo / denom).saturating_sub(mcu).min(len - 1),
            (hi / denom + mcu).min(len - 1),
        )
    };
    let (y0, y1) = to_scaled(y0, y1, sh);
    let (x0, x1) = to_scaled(x0, x1, sw);
    let left = x0 / mcu * mcu;
    Region {
        denom,
        x: left,
        y: y0,
        w: x1 + 1 - left,
        h: y1 + 1 - y0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::geometry::Window;

    #[test]
    fn an_unknown_format_is_a_typed_error() {
        let spec = ImageSpec::new(1, 1, 3);
        let mut out = [0u8; 3];
        let err = Decoder::new()
            .decode_into(b"GIF89a..", &spec, &mut || 0, &mut out)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "not a PNG or JPEG image (first bytes [47, 49, 46, 38, 39, 61, 2e, 2e])"
        );
    }

    #[test]
    fn the_eval_region_is_what_the_center_crop_reads_at_full_scale() {
        let header = jpeg::Header {
            width: 160,
            height: 96,
            mcu_width: 16,
        };
        // Shorter side 48 (80×48), center 32×32: source columns 48..=111
        // and rows 16..=79, 16 more on each side; the left edge 32 is on
        // an iMCU, the rows reach both edges.
        let (y, x) = geometry::resize_center_crop(160, 96, 48, 32, 32);
        let mode = ImageMode::ResizeCrop { shorter_side: 48 };
        assert_eq!(
            region(&header, &y, &x, 32, 32, 1, mode),
            Region {
                denom: 1,
                x: 32,
                y: 0,
                w: 96,
                h: 96
            }
        );
        // A fixed image is decoded whole.
        let r = region(&header, &y, &x, 32, 32, 1, ImageMode::Fixed);
        assert_eq!((r.x, r.y, r.w, r.h), (0, 0, 160, 96));
    }

    #[test]
    fn the_train_region_covers_the_window_from_an_mcu_edge() {
        let header = jpeg::Header {
            width: 400,
            height: 300,
            mcu_width: 16,
        };
        let w = Window {
            x: 100,
            y: 50,
            width: 200,
            height: 150,
        };
        let (y, x) = (Axis::crop(w.y, w.height, 64), Axis::crop(w.x, w.width, 64));
        let r = region(&header, &y, &x, 64, 64, 2, ImageMode::RandomResizedCrop);
        // Scaled 1/2: columns 50..=149, rows 25..=99, and 8 (16 / 2) more
        // on each side; 42 down to 40.
        assert_eq!(
            r,
            Region {
                denom: 2,
                x: 40,
                y: 17,
                w: 118,
                h: 91
            }
        );
    }
}
