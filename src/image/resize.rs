//! Bilinear resampling of u8 pixels along a sampling grid (see
//! [`Axis`](super::geometry::Axis)): `tf.image.resize(method="bilinear",
//! antialias=False)` with half-pixel centers, in f32 as TensorFlow computes
//! it, rounded to the nearest u8. Optionally mirrored left to right.

use super::geometry::Axis;

/// Where one output index reads: the two source indices and the weight of
/// the second.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tap {
    lower: usize,
    upper: usize,
    lerp: f32,
}

/// TensorFlow's `compute_interpolation_weights`: floor and ceil of the
/// source coordinate, clamped into the axis.
fn taps(axis: &Axis, out: usize) -> Vec<Tap> {
    (0..out)
        .map(|o| {
            let at = (axis.start + (o as f64 + 0.5) * axis.scale - 0.5) as f32;
            let floor = at.floor();
            let clamp = |v: f32| (v.max(axis.lo as f32) as usize).clamp(axis.lo, axis.hi);
            Tap {
                lower: clamp(floor),
                upper: clamp(at.ceil()),
                lerp: at - floor,
            }
        })
        .collect()
}

/// Resamples `src` (`src_w` pixels per row of `channels` u8) into `out`
/// (`out_h × out_w × channels`), mirrored when `flip`. The axes' `hi` must
/// lie inside `src` (checked: a bad grid is clamped, never read past).
#[allow(clippy::too_many_arguments)]
pub(crate) fn resize(
    src: &[u8],
    src_w: usize,
    channels: usize,
    y: &Axis,
    x: &Axis,
    out_h: usize,
    out_w: usize,
    flip: bool,
    out: &mut [u8],
) {
    let src_h = if src_w == 0 || channels == 0 {
        0
    } else {
        src.len() / (src_w * channels)
    };
    if src_h == 0 || out.len() < out_h * out_w * channels {
        return;
    }
    let fit = |a: &Axis, len: usize| Axis {
        lo: a.lo.min(len - 1),
        hi: a.hi.min(len - 1),
        ..*a
    };
    let (y, x) = (fit(y, src_h), fit(x, src_w));
    let rows = taps(&y, out_h);
    let cols = taps(&x, out_w);
    let row_len = src_w * channels;
    for (oy, r) in rows.iter().enumerate() {
        let top = &src[r.lower * row_len..][..row_len];
        let bottom = &src[r.upper * row_len..][..row_len];
        let line = &mut out[oy * out_w * channels..][..out_w * channels];
        for (ox, c) in cols.iter().enumerate() {
            let to = if flip { out_w - 1 - ox } else { ox };
            let (l, u) = (c.lower * channels, c.upper * channels);
            for k in 0..channels {
                let (tl, tr) = (f32::from(top[l + k]), f32::from(top[u + k]));
                let (bl, br) = (f32::from(bottom[l + k]), f32::from(bottom[u + k]));
                let t = tl + (tr - tl) * c.lerp;
                let b = bl + (br - bl) * c.lerp;
                let v = t + (b - t) * r.lerp;
                line[to * channels + k] = (v + 0.5).clamp(0.0, 255.0) as u8;
            }
        }
    }
}

/// Copies `src` (`w` pixels per row) into `out`, mirrored when `flip`.
pub(crate) fn copy(src: &[u8], w: usize, channels: usize, flip: bool, out: &mut [u8]) {
    let n = src.len().min(out.len());
    if !flip {
        out[..n].copy_from_slice(&src[..n]);
        return;
    }
    let row = w * channels;
    if row == 0 {
        return;
    }
    for (s, o) in src[..n].chunks_exact(row).zip(out.chunks_exact_mut(row)) {
        for (sp, op) in s
            .chunks_exact(channels)
            .zip(o.chunks_exact_mut(channels).rev())
        {
            op.copy_from_slice(sp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upscaling_two_pixels_by_two_matches_hand_computed_values() {
        // One row [0, 100] to 4 columns: source coordinates
        // (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 → clamped 0, then
        // 25, 75, then clamped 100.
        let src = [0u8, 100];
        let mut out = [0u8; 4];
        let (y, x) = (Axis::crop(0, 1, 1), Axis::crop(0, 2, 4));
        resize(&src, 2, 1, &y, &x, 1, 4, false, &mut out);
        assert_eq!(out, [0, 25, 75, 100]);
        resize(&src, 2, 1, &y, &x, 1, 4, true, &mut out);
        assert_eq!(out, [100, 75, 25, 0]);
    }

    #[test]
    fn downscaling_by_two_averages_pairs() {
        // 4×4 → 2×2: coordinates 0.5 and 2.5, each the mean of a 2×2 block;
        // 10, 20, 50, 60 → 35; rounding half up (37.5 → 38).
        #[rustfmt::skip]
        let src = [
            10, 20, 30, 40,
            50, 60, 70, 80,
            0, 0, 255, 255,
            0, 1, 255, 255,
        ];
        let mut out = [0u8; 4];
        let a = Axis::crop(0, 4, 2);
        resize(&src, 4, 1, &a, &a, 2, 2, false, &mut out);
        assert_eq!(out, [35, 55, 0, 255]);
        // The mean 0.25 of the third block rounds to 0; 37.5 to 38:
        let src = [0u8, 75, 0, 75];
        let mut one = [0u8; 1];
        resize(
            &src,
            2,
            1,
            &Axis::crop(0, 2, 1),
            &Axis::crop(0, 2, 1),
            1,
            1,
            false,
            &mut one,
        );
        assert_eq!(one, [38]);
    }

    #[test]
    fn a_crop_window_reads_only_inside_it() {
        // Columns 1..3 of [0, 10, 20, 250] to 4 outputs: the clamp keeps
        // the edge at 10 and 20, never 0 or 250.
        let src = [0u8, 10, 20, 250];
        let mut out = [0u8; 4];
        resize(
            &src,
            4,
            1,
            &Axis::crop(0, 1, 1),
            &Axis::crop(1, 2, 4),
            1,
            4,
            false,
            &mut out,
        );
        assert_eq!(out, [10, 13, 18, 20]);
    }

    #[test]
    fn copy_mirrors_pixels_not_bytes() {
        let mut out = [0u8; 6];
        copy(&[1, 2, 3, 4, 5, 6], 2, 3, true, &mut out);
        assert_eq!(out, [4, 5, 6, 1, 2, 3]);
    }
}
