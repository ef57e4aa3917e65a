//! Channel conversion of decoded PNG samples to the spec's 1, 3 or 4
//! channels, as `tf.io.decode_png(channels=c, dtype=uint8)` does it
//! through libpng (checked against TensorFlow in tests/io/interop.rs):
//! alpha dropped or added as 255, gray replicated, RGB to gray with
//! libpng's fixed-point weights for (0.299, 0.587), 16-bit samples
//! reduced to their high byte after the gray conversion.

/// libpng's `png_set_rgb_to_gray(png, 1, 0.299, 0.587)` weights in 1/32768
/// (`x * 32768 / 100000`, truncated; blue takes the rest).
const RED: u32 = 9797;
const GREEN: u32 = 19234;
const BLUE: u32 = 32768 - RED - GREEN;

/// Converts `pixels` decoded samples with `from` channels (1 gray, 2 gray +
/// alpha, 3 RGB, 4 RGBA) of `depth` bits (8, or 16 big-endian) into `to`
/// channels of 8 bits, appended to `out`.
pub(crate) fn convert(src: &[u8], from: usize, depth: u8, to: usize, out: &mut Vec<u8>) {
    let bytes = if depth == 16 { 2 } else { 1 };
    let step = from * bytes;
    if step == 0 {
        return;
    }
    let pixels = src.len() / step;
    out.reserve(pixels * to);
    let sample = |p: &[u8], i: usize| -> u32 {
        if bytes == 2 {
            u32::from(p[2 * i]) << 8 | u32::from(p[2 * i + 1])
        } else {
            u32::from(p[i])
        }
    };
    // The high byte of a 16-bit sample (libpng's strip_16), an 8-bit one as is.
    let narrow = |v: u32| -> u8 { if bytes == 2 { (v >> 8) as u8 } else { v as u8 } };
    let color = from >= 3;
    let alpha = from == 2 || from == 4;
    for p in src.chunks_exact(step) {
        let (r, g, b) = if color {
            (sample(p, 0), sample(p, 1), sample(p, 2))
        } else {
            let v = sample(p, 0);
            (v, v, v)
        };
        let max = if bytes == 2 { 0xffff } else { 0xff };
        let a = if alpha { sample(p, from - 1) } else { max };
        match to {
            1 => {
                let gray = if r == g && g == b {
                    r
                } else if bytes == 2 {
                    // libpng rounds the 16-bit sum, truncates the 8-bit one.
                    (RED * r + GREEN * g + BLUE * b + 16384) >> 15
                } else {
                    (RED * r + GREEN * g + BLUE * b) >> 15
                };
                out.push(narrow(gray));
            }
            3 => out.extend_from_slice(&[narrow(r), narrow(g), narrow(b)]),
            _ => out.extend_from_slice(&[narrow(r), narrow(g), narrow(b), narrow(a)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(src: &[u8], from: usize, depth: u8, to: usize) -> Vec<u8> {
        let mut out = Vec::new();
        convert(src, from, depth, to, &mut out);
        out
    }

    #[test]
    fn gray_and_alpha_are_replicated_added_or_dropped() {
        assert_eq!(run(&[7, 200], 1, 8, 3), [7, 7, 7, 200, 200, 200]);
        assert_eq!(run(&[7], 1, 8, 4), [7, 7, 7, 255]);
        assert_eq!(run(&[7, 9], 2, 8, 1), [7]);
        assert_eq!(run(&[7, 9], 2, 8, 4), [7, 7, 7, 9]);
        assert_eq!(run(&[1, 2, 3, 4], 4, 8, 3), [1, 2, 3]);
        assert_eq!(run(&[1, 2, 3], 3, 8, 4), [1, 2, 3, 255]);
    }

    #[test]
    fn rgb_to_gray_uses_libpngs_weights() {
        // (9797·255 + 19234·228 + 3737·34) >> 15 = 213 (213.96 truncated),
        // a pixel TensorFlow decodes to 213.
        assert_eq!(run(&[255, 228, 34], 3, 8, 1), [213]);
        assert_eq!(run(&[255, 0, 0], 3, 8, 1), [76]);
        assert_eq!(run(&[0, 255, 0], 3, 8, 1), [149]);
        assert_eq!(run(&[0, 0, 255], 3, 8, 1), [29]);
        // Equal samples stay as they are.
        assert_eq!(run(&[255, 255, 255, 0], 4, 8, 1), [255]);
    }

    #[test]
    fn sixteen_bit_samples_keep_their_high_byte() {
        assert_eq!(run(&[0x12, 0xff, 0xff, 0xff], 1, 16, 1), [0x12, 0xff]);
        // Gray from 16-bit RGB is computed on 16 bits, then narrowed:
        // (9797·65535 + 3737·33023 + 16384) >> 15 = 23360 → 91.
        assert_eq!(run(&[0xff, 0xff, 0, 0, 0x80, 0xff], 3, 16, 1), [91]);
        assert_eq!(
            run(&[0x12, 0x80, 0xab, 0xcd], 2, 16, 4),
            [0x12, 0x12, 0x12, 0xab]
        );
    }
}
