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
///
/// Separable, with TensorFlow's arithmetic kept exactly: each source row the
/// grid reads is interpolated across once (`left + (right - left) * lerp`,
/// the values TensorFlow's `top` and `bottom` take for every output row that
/// reads it), and each output row is then the interpolation down between
/// its two rows (`top + (bottom - top) * lerp`), so every pixel is the same
/// f32 computation as before, in the same order: the same bytes.
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
    // The columns in output order (mirrored when flipped), as byte offsets
    // into a source row.
    let mut cols: Vec<Tap> = taps(&x, out_w)
        .into_iter()
        .map(|t| Tap {
            lower: t.lower * channels,
            upper: t.upper * channels,
            lerp: t.lerp,
        })
        .collect();
    if flip {
        cols.reverse();
    }
    let row_len = src_w * channels;
    let width = out_w * channels;
    // The two source rows interpolated across last, by row index (one value
    // more than the width: the four-lane pass writes a spare lane past the
    // last pixel).
    let mut held: [Option<usize>; 2] = [None, None];
    let mut lines = [vec![0f32; width + 1], vec![0f32; width + 1]];
    // A source row as f32, and a spare zero after it for the same reason.
    let mut floats = vec![0f32; row_len + 1];
    for (r, line) in rows.iter().zip(out.chunks_exact_mut(width)) {
        let mut slot_of = |row: usize, other: usize| {
            if let Some(s) = held.iter().position(|&h| h == Some(row)) {
                return s;
            }
            // The slot not holding the other row this output row needs.
            let s = usize::from(held[0] == Some(other));
            across(
                &src[row * row_len..][..row_len],
                &cols,
                channels,
                &mut floats,
                &mut lines[s],
            );
            held[s] = Some(row);
            s
        };
        let top = slot_of(r.lower, r.upper);
        let bottom = slot_of(r.upper, r.lower);
        down(&lines[top], &lines[bottom], r.lerp, line);
    }
}

/// One source row interpolated across at `cols`: `channels` values per
/// output pixel. `floats` holds one more value than `row`, `out` one more
/// than the output's.
fn across(row: &[u8], cols: &[Tap], channels: usize, floats: &mut [f32], out: &mut [f32]) {
    if channels == 3 || channels == 4 {
        for (f, &b) in floats.iter_mut().zip(row) {
            *f = f32::from(b);
        }
        return match channels {
            3 => across_lanes::<3>(floats, cols, out),
            _ => across_lanes::<4>(floats, cols, out),
        };
    }
    for (o, c) in out.chunks_exact_mut(channels).zip(cols) {
        for (k, o) in o.iter_mut().enumerate() {
            let (l, u) = (f32::from(row[c.lower + k]), f32::from(row[c.upper + k]));
            *o = l + (u - l) * c.lerp;
        }
    }
}

/// [`across`] for 3 or 4 channels: each output pixel is four lanes at once
/// (`left + (right - left) * lerp`, lane by lane: the same f32 values as
/// one at a time), stored at its place; with 3 channels the fourth lane
/// reads the next pixel's first value and is overwritten by the next store
/// (the last one lands in the spare value at the end).
fn across_lanes<const C: usize>(floats: &[f32], cols: &[Tap], out: &mut [f32]) {
    for (j, c) in cols.iter().enumerate() {
        let l: &[f32; 4] = floats[c.lower..][..4].try_into().expect("4 lanes");
        let u: &[f32; 4] = floats[c.upper..][..4].try_into().expect("4 lanes");
        let o: &mut [f32; 4] = (&mut out[j * C..][..4]).try_into().expect("4 lanes");
        for k in 0..4 {
            o[k] = l[k] + (u[k] - l[k]) * c.lerp;
        }
    }
}

/// An output row: `top` and `bottom` interpolated down, rounded to u8.
fn down(top: &[f32], bottom: &[f32], lerp: f32, out: &mut [u8]) {
    for ((o, &t), &b) in out.iter_mut().zip(top).zip(bottom) {
        let v = t + (b - t) * lerp;
        // `(v + 0.5).clamp(0.0, 255.0) as u8`, written so that it compiles
        // to packed instructions: `max` turns NaN into 0 (as `as u8` does),
        // so the value is a number in 0..=255 and its truncation to i32 is
        // that of `as u8`. (`clamp` keeps NaN.)
        #[allow(clippy::manual_clamp)]
        let v = (v + 0.5).max(0.0).min(255.0);
        // SAFETY: `v` is not NaN and lies in 0..=255, inside i32's range.
        *o = unsafe { v.to_int_unchecked::<i32>() } as u8;
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

    /// The per-pixel form of the same arithmetic (how `resize` computed it
    /// before it was made separable): every pixel from its four neighbours.
    #[allow(clippy::too_many_arguments)]
    fn per_pixel(
        src: &[u8],
        src_w: usize,
        channels: usize,
        y: &Axis,
        x: &Axis,
        out_h: usize,
        out_w: usize,
        flip: bool,
    ) -> Vec<u8> {
        let src_h = src.len() / (src_w * channels);
        let fit = |a: &Axis, len: usize| Axis {
            lo: a.lo.min(len - 1),
            hi: a.hi.min(len - 1),
            ..*a
        };
        let (y, x) = (fit(y, src_h), fit(x, src_w));
        let (rows, cols) = (taps(&y, out_h), taps(&x, out_w));
        let row_len = src_w * channels;
        let mut out = vec![0u8; out_h * out_w * channels];
        for (oy, r) in rows.iter().enumerate() {
            let top = &src[r.lower * row_len..][..row_len];
            let bottom = &src[r.upper * row_len..][..row_len];
            for (ox, c) in cols.iter().enumerate() {
                let to = if flip { out_w - 1 - ox } else { ox };
                let (l, u) = (c.lower * channels, c.upper * channels);
                for k in 0..channels {
                    let (tl, tr) = (f32::from(top[l + k]), f32::from(top[u + k]));
                    let (bl, br) = (f32::from(bottom[l + k]), f32::from(bottom[u + k]));
                    let t = tl + (tr - tl) * c.lerp;
                    let b = bl + (br - bl) * c.lerp;
                    let v = t + (b - t) * r.lerp;
                    out[(oy * out_w + to) * channels + k] = (v + 0.5).clamp(0.0, 255.0) as u8;
                }
            }
        }
        out
    }

    #[test]
    fn the_separable_resize_gives_the_bytes_of_the_per_pixel_one() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n as u64) as usize
        };
        for case in 0..400 {
            let channels = [1, 2, 3, 4, 5][case % 5];
            let (w, h) = (1 + next(70), 1 + next(70));
            let src: Vec<u8> = (0..w * h * channels).map(|_| next(256) as u8).collect();
            let (out_w, out_h) = (1 + next(90), 1 + next(90));
            let (cw, ch) = (1 + next(w), 1 + next(h));
            let (cx, cy) = (next(w - cw + 1), next(h - ch + 1));
            let (mut y, mut x) = (Axis::crop(cy, ch, out_h), Axis::crop(cx, cw, out_w));
            if case % 3 == 0 {
                // A grid off the pixel lattice, as the eval mode's and a
                // DCT-scaled decode's are.
                y = y.rescaled(1, 0, h);
                y.start += 0.37;
                x.scale *= 1.13;
            }
            let flip = case % 2 == 1;
            let mut out = vec![0u8; out_h * out_w * channels];
            resize(&src, w, channels, &y, &x, out_h, out_w, flip, &mut out);
            let want = per_pixel(&src, w, channels, &y, &x, out_h, out_w, flip);
            assert_eq!(out, want, "case {case}");
        }
    }

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
