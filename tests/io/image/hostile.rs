//! Hostile bytes: every prefix and many single-byte changes of a JPEG
//! (baseline and progressive) and a PNG decode or fail with a typed error,
//! in every mode; never a panic, never an out-of-bounds read.

use infeed::image::Decoder;
use infeed::spec::ImageSpec;

use super::encode::{self, JpegOptions};

fn specs(w: usize, h: usize) -> [ImageSpec; 3] {
    [
        ImageSpec::new(h, w, 3),
        ImageSpec::new(8, 8, 1).resize_crop(10),
        ImageSpec::new(5, 7, 4).random_resized_crop().flip(),
    ]
}

/// Decodes `data` by every spec; gives how many decodes succeeded.
fn decode_all(decoder: &mut Decoder, data: &[u8], w: usize, h: usize, seed: u64) -> usize {
    let mut ok = 0;
    for spec in specs(w, h) {
        let mut out = vec![0u8; spec.height * spec.width * spec.channels];
        let mut bits = seed | 1;
        let mut draw = || {
            bits ^= bits << 13;
            bits ^= bits >> 7;
            bits ^= bits << 17;
            bits
        };
        ok += usize::from(
            decoder
                .decode_into(data, &spec, &mut draw, &mut out)
                .is_ok(),
        );
    }
    ok
}

#[test]
fn prefixes_and_corruptions_are_errors_or_images_never_panics() {
    let (w, h) = (23, 17);
    let px = encode::pixels(w, h, 3, 8);
    let opts = |progressive| JpegOptions {
        progressive,
        ..encode::BASELINE_420
    };
    let files = [
        ("baseline", encode::jpeg(w, h, 3, &px, opts(false)), 2),
        ("progressive", encode::jpeg(w, h, 3, &px, opts(true)), 2),
        // A PNG needs no IEND once its pixels are read.
        (
            "png",
            encode::png(w, h, png::ColorType::Rgb, png::BitDepth::Eight, &px, None),
            12,
        ),
    ];
    let mut decoder = Decoder::new();
    for (name, data, tail) in &files {
        assert_eq!(decode_all(&mut decoder, data, w, h, 1), 3, "{name} whole");
        for len in 0..data.len() - tail {
            assert_eq!(
                decode_all(&mut decoder, &data[..len], w, h, len as u64),
                0,
                "{name}[..{len}]"
            );
        }
        // Single bytes set to values that upset parsers (markers, lengths).
        let mut changed = data.clone();
        let mut failures = 0;
        for (i, value) in (0..data.len()).flat_map(|i| [(i, 0x00), (i, 0xff), (i, data[i] ^ 0x10)])
        {
            changed[i] = value;
            failures += 3 - decode_all(&mut decoder, &changed, w, h, i as u64);
            changed[i] = data[i];
        }
        assert!(failures > 0, "{name}: no corruption was noticed");
        // The decoder is still sound after all those failures.
        assert_eq!(decode_all(&mut decoder, data, w, h, 2), 3, "{name} after");
    }
}
