//! Where the output pixels come from: the crop windows of the three modes
//! (fixed, resize-and-center-crop, random resized crop) and the sampling
//! grid that maps output pixels to source coordinates.

use crate::spec::{ImageMode, ImageSpec};

/// A rectangle of the source image in pixels (integers, as TensorFlow's
/// crops are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub x: usize,
    pub y: usize,
    pub width: usize,
    pub height: usize,
}

/// How one axis of the output samples the source: output index `o` reads
/// source coordinate `start + (o + 0.5) * scale - 0.5` (half-pixel
/// centers, `tf.image.resize`), clamped to `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    pub start: f64,
    pub scale: f64,
    pub lo: usize,
    pub hi: usize,
}

impl Axis {
    /// `len` source pixels from `from` resized to `out` pixels.
    pub fn crop(from: usize, len: usize, out: usize) -> Self {
        Axis {
            start: from as f64,
            scale: len as f64 / out as f64,
            lo: from,
            hi: from + len.max(1) - 1,
        }
    }

    /// The same samples read from an image decoded at 1/`denom` scale
    /// whose first decoded pixel is scaled pixel `origin`; `len` is the
    /// number of scaled pixels decoded.
    pub fn rescaled(&self, denom: usize, origin: usize, len: usize) -> Self {
        let d = denom as f64;
        // A full-scale coordinate c is scaled coordinate (c + 0.5) / d - 0.5,
        // so the grid's start divides by d (the half pixels cancel).
        let lo = (self.lo / denom).saturating_sub(origin);
        let hi = (self.hi / denom).saturating_sub(origin).min(len.max(1) - 1);
        Axis {
            start: self.start / d - origin as f64,
            scale: self.scale / d,
            lo,
            hi: hi.max(lo),
        }
    }

    /// The lowest and highest source pixels output indices `0..out` read.
    pub fn span(&self, out: usize) -> (usize, usize) {
        let first = (self.start + 0.5 * self.scale - 0.5).floor().max(0.0) as usize;
        let last = (self.start + (out as f64 - 0.5) * self.scale - 0.5)
            .ceil()
            .max(0.0) as usize;
        (first.clamp(self.lo, self.hi), last.clamp(self.lo, self.hi))
    }
}

/// A uniform number in `[0, 1)` from 64 random bits.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Area fraction and aspect ratio bounds of the random resized crop, and
/// its tries before the fallback (the Inception / ImageNet recipe).
const AREA: (f64, f64) = (0.08, 1.0);
const RATIO: (f64, f64) = (3.0 / 4.0, 4.0 / 3.0);
const ATTEMPTS: usize = 10;

/// The random resized crop of a `width × height` image: up to 10 tries of
/// an area fraction uniform in 0.08–1 and an aspect ratio (width / height)
/// log-uniform in 3/4–4/3, at a uniform position; when no try fits, the
/// center crop of the whole image with its ratio clamped into 3/4–4/3.
/// Each try draws two numbers, and two more place a crop that fits.
pub fn random_resized_crop(width: usize, height: usize, draw: &mut dyn FnMut() -> u64) -> Window {
    let area = width as f64 * height as f64;
    for _ in 0..ATTEMPTS {
        let target = area * (AREA.0 + (AREA.1 - AREA.0) * unit(draw()));
        let log_ratio = RATIO.0.ln() + (RATIO.1.ln() - RATIO.0.ln()) * unit(draw());
        let ratio = log_ratio.exp();
        let w = (target * ratio).sqrt().round() as usize;
        let h = (target / ratio).sqrt().round() as usize;
        if (1..=width).contains(&w) && (1..=height).contains(&h) {
            let x = below(draw(), width - w + 1);
            let y = below(draw(), height - h + 1);
            return Window {
                x,
                y,
                width: w,
                height: h,
            };
        }
    }
    let ratio = width as f64 / height as f64;
    let (w, h) = if ratio < RATIO.0 {
        (
            width,
            ((width as f64 / RATIO.0).round() as usize).min(height),
        )
    } else if ratio > RATIO.1 {
        (
            ((height as f64 * RATIO.1).round() as usize).min(width),
            height,
        )
    } else {
        (width, height)
    };
    Window {
        x: (width - w) / 2,
        y: (height - h) / 2,
        width: w.max(1),
        height: h.max(1),
    }
}

/// A uniform integer in `0..n` (`n > 0`) from 64 random bits.
fn below(bits: u64, n: usize) -> usize {
    ((u128::from(bits) * n as u128) >> 64) as usize
}

/// The sampling grid of the eval mode: the image resized so its shorter
/// side is `side` (the longer one in proportion, rounded), then the
/// centered `out_h × out_w` of that (offsets rounded down).
pub fn resize_center_crop(
    width: usize,
    height: usize,
    side: usize,
    out_h: usize,
    out_w: usize,
) -> (Axis, Axis) {
    let short = width.min(height).max(1) as f64;
    let resized = |len: usize| ((len as f64 * side as f64 / short).round() as usize).max(side);
    let (rh, rw) = (resized(height), resized(width));
    let axis = |len: usize, resized: usize, out: usize| {
        let scale = len as f64 / resized as f64;
        let offset = resized.saturating_sub(out) / 2;
        Axis {
            start: offset as f64 * scale,
            scale,
            lo: 0,
            hi: len.max(1) - 1,
        }
    };
    (axis(height, rh, out_h), axis(width, rw, out_w))
}

/// The crop window of `spec`'s mode for a `width × height` image, drawing
/// from `draw` in train mode; `None` for the eval mode, which resizes the
/// whole image (see [`resize_center_crop`]).
pub fn window(
    spec: &ImageSpec,
    width: usize,
    height: usize,
    draw: &mut dyn FnMut() -> u64,
) -> Option<Window> {
    match spec.mode {
        ImageMode::Fixed => Some(Window {
            x: 0,
            y: 0,
            width,
            height,
        }),
        ImageMode::ResizeCrop { .. } => None,
        ImageMode::RandomResizedCrop => Some(random_resized_crop(width, height, draw)),
    }
}

/// The largest DCT scale denominator (8, 4, 2, else 1) at which a crop of
/// `window` still has at least as many pixels as the output on each side,
/// so decoding at that scale and resizing loses nothing the output keeps.
pub fn dct_denominator(window: &Window, out_h: usize, out_w: usize) -> usize {
    [8, 4, 2]
        .into_iter()
        .find(|&d| window.height >= d * out_h && window.width >= d * out_w)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws that give `units` as `unit()` values, in order.
    fn draws(units: &[f64]) -> impl FnMut() -> u64 + '_ {
        let mut i = 0;
        move || {
            let u = units[i];
            i += 1;
            ((u * (1u64 << 53) as f64) as u64) << 11
        }
    }

    #[test]
    fn random_crop_takes_the_first_try_that_fits() {
        // 400×300, try 1: area 0.5 of 120 000 = 60 000, log ratio at the
        // middle (ratio 1): 245×245 (244.9 rounded); x uniform 0..=155 at
        // 0.5 → 78, y 0..=55 at 0.25 → 14.
        let mut d = draws(&[(0.5 - 0.08) / 0.92, 0.5, 0.5, 0.25]);
        let w = random_resized_crop(400, 300, &mut d);
        assert_eq!(
            w,
            Window {
                x: 78,
                y: 14,
                width: 245,
                height: 245
            }
        );
    }

    #[test]
    fn random_crop_retries_then_falls_back_to_the_center() {
        // A 100×10 image: every try with area ≥ 0.08 and ratio ≤ 4/3 is
        // taller than 10 at full area... area 1, ratio 4/3: h = 27 > 10.
        let units = [0.999; 20];
        let mut d = draws(&units);
        let w = random_resized_crop(100, 10, &mut d);
        // Ratio 10 > 4/3: the full height and 13 (13.3) columns, centered.
        assert_eq!(
            w,
            Window {
                x: 43,
                y: 0,
                width: 13,
                height: 10
            }
        );
        // A tall image clamps the other way: 10 wide, 13 high.
        let mut d = draws(&units);
        assert_eq!(
            random_resized_crop(10, 100, &mut d),
            Window {
                x: 0,
                y: 43,
                width: 10,
                height: 13
            }
        );
    }

    #[test]
    fn eval_grid_centers_the_crop_of_the_resized_image() {
        // 400×300 with shorter side 256: 341×256 (341.33 rounded); the
        // central 224×224 starts at (58, 16) of the resized image.
        let (y, x) = resize_center_crop(400, 300, 256, 224, 224);
        assert_eq!(y.scale, 300.0 / 256.0);
        assert_eq!(y.start, 16.0 * (300.0 / 256.0));
        assert_eq!(x.scale, 400.0 / 341.0);
        assert_eq!(x.start, 58.0 * (400.0 / 341.0));
        assert_eq!((y.lo, y.hi, x.lo, x.hi), (0, 299, 0, 399));
    }

    #[test]
    fn dct_scale_only_when_the_crop_is_twice_the_output() {
        let win = |w, h| Window {
            x: 0,
            y: 0,
            width: w,
            height: h,
        };
        assert_eq!(dct_denominator(&win(447, 1000), 224, 224), 1);
        assert_eq!(dct_denominator(&win(448, 448), 224, 224), 2);
        assert_eq!(dct_denominator(&win(1000, 900), 224, 224), 4);
        assert_eq!(dct_denominator(&win(1792, 1792), 224, 224), 8);
    }

    #[test]
    fn a_rescaled_axis_reads_the_same_places() {
        // Crop rows 16..48 to 8 rows; decoded at 1/2 from scaled row 4.
        let full = Axis::crop(16, 32, 8);
        let half = full.rescaled(2, 4, 20);
        for o in 0..8 {
            let c = full.start + (o as f64 + 0.5) * full.scale - 0.5;
            let s = half.start + (o as f64 + 0.5) * half.scale - 0.5;
            // Full-scale c is scaled (c + 0.5) / 2 - 0.5, less the origin.
            assert!((s - ((c + 0.5) / 2.0 - 0.5 - 4.0)).abs() < 1e-9, "{o}");
        }
        assert_eq!((half.lo, half.hi), (4, 19));
    }
}
