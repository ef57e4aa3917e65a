//! Pixels against TensorFlow's: `tf.io.decode_png` (exactly equal, every
//! color type and depth, 1, 3 and 4 channels), `tf.io.decode_jpeg` (within
//! [`JPEG_MAX_DIFF`]), and the eval and train geometry against
//! `tf.image.resize` of TensorFlow's decode (within the stated tolerances).
//! TensorFlow runs `tests/io/image/tf_images.py` through `$INFEED_PYTHON`.
//!
//! Needs TensorFlow: ignored by default, run by `scripts/test.sh` (or
//! `INFEED_PYTHON=$PWD/.venv/bin/python cargo test --features images --test io image::tf_ -- --include-ignored`).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use infeed::image::{Decoder, geometry};
use infeed::spec::ImageSpec;
use png::{BitDepth, ColorType};
use serde_json::{Value, json};

use super::encode::{self, JpegOptions};

/// Largest difference of a JPEG sample from `tf.io.decode_jpeg`'s: both are
/// libjpeg-turbo with the accurate integer IDCT and fancy upsampling.
const JPEG_MAX_DIFF: u8 = 0;
/// Largest difference of a resized sample from `tf.image.resize`'s float:
/// ours is that value rounded to u8 (f32 arithmetic in another order may
/// move a sample that sits on .5 by one).
const RESIZE_MAX_DIFF: f32 = 0.5 + 1e-3;
/// The train crop of a JPEG decoded at 1/2, 1/4 or 1/8 (DCT scaling) is
/// not the crop of the full decode resized: DCT scaling averages each
/// block (an antialiasing filter) where bilinear resize without antialias
/// reads 4 pixels, so samples on sharp edges differ (measured here: max
/// 42, mean at most 2.2); the largest and mean differences allowed.
const SCALED_MAX_DIFF: f32 = 64.0;
const SCALED_MEAN_DIFF: f32 = 3.0;

/// TensorFlow's output for each case, by name: (shape, u8 or f32 values).
enum Pixels {
    U8(Vec<u8>),
    F32(Vec<f32>),
}

fn tf(dir: &Path, cases: &[Value]) -> HashMap<String, (Vec<usize>, Pixels)> {
    std::fs::write(dir.join("cases.json"), serde_json::to_vec(cases).unwrap()).unwrap();
    let python = std::env::var("INFEED_PYTHON")
        .expect("INFEED_PYTHON is not set: these tests need a Python with tensorflow-cpu");
    let script = crate::support::repo("tests/io/image/tf_images.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let shape = v["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            let pixels = if let Some(b) = v["u8"].as_str() {
                Pixels::U8(BASE64.decode(b).unwrap())
            } else {
                let bytes = BASE64.decode(v["f32"].as_str().unwrap()).unwrap();
                Pixels::F32(
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                        .collect(),
                )
            };
            (v["name"].as_str().unwrap().to_owned(), (shape, pixels))
        })
        .collect()
}

/// Our decode of `data` by `spec`, drawing from `draws` in order.
fn ours(data: &[u8], spec: &ImageSpec, draws: &[u64]) -> Vec<u8> {
    let mut out = vec![0u8; spec.height * spec.width * spec.channels];
    let mut next = draws.iter().copied();
    Decoder::new()
        .decode_into(data, spec, &mut || next.next().unwrap(), &mut out)
        .unwrap();
    out
}

/// 16-bit samples (big-endian) whose high bytes are `px` and low bytes vary.
fn wide(px: &[u8]) -> Vec<u8> {
    px.iter().flat_map(|&p| [p, p ^ 0x5a]).collect()
}

#[test]
#[ignore = "needs TensorFlow (INFEED_PYTHON): run by scripts/test.sh"]
fn tf_png_pixels_equal_decode_png_for_every_color_type_and_depth() {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (13, 9);
    let px = |c| encode::pixels(w, h, c, c as u64);
    let palette: Vec<u8> = (0..16u8)
        .flat_map(|i| [i * 16, 255 - i * 9, i * 5])
        .collect();
    let alphas: Vec<u8> = (0..16u8).map(|i| 255 - i * 15).collect();
    let indices: Vec<u8> = px(1).iter().map(|p| p % 16).collect();
    let kinds: Vec<(&str, Vec<u8>)> = vec![
        (
            "gray8",
            encode::png(w, h, ColorType::Grayscale, BitDepth::Eight, &px(1), None),
        ),
        (
            "gray16",
            encode::png(
                w,
                h,
                ColorType::Grayscale,
                BitDepth::Sixteen,
                &wide(&px(1)),
                None,
            ),
        ),
        (
            "ga8",
            encode::png(
                w,
                h,
                ColorType::GrayscaleAlpha,
                BitDepth::Eight,
                &px(2),
                None,
            ),
        ),
        (
            "ga16",
            encode::png(
                w,
                h,
                ColorType::GrayscaleAlpha,
                BitDepth::Sixteen,
                &wide(&px(2)),
                None,
            ),
        ),
        (
            "rgb8",
            encode::png(w, h, ColorType::Rgb, BitDepth::Eight, &px(3), None),
        ),
        (
            "rgb16",
            encode::png(w, h, ColorType::Rgb, BitDepth::Sixteen, &wide(&px(3)), None),
        ),
        (
            "rgba8",
            encode::png(w, h, ColorType::Rgba, BitDepth::Eight, &px(4), None),
        ),
        (
            "rgba16",
            encode::png(
                w,
                h,
                ColorType::Rgba,
                BitDepth::Sixteen,
                &wide(&px(4)),
                None,
            ),
        ),
        (
            "palette",
            encode::png(
                w,
                h,
                ColorType::Indexed,
                BitDepth::Eight,
                &indices,
                Some((&palette, &[])),
            ),
        ),
        (
            "palette_trns",
            encode::png(
                w,
                h,
                ColorType::Indexed,
                BitDepth::Eight,
                &indices,
                Some((&palette, &alphas)),
            ),
        ),
    ];
    let mut cases = Vec::new();
    for (kind, bytes) in &kinds {
        std::fs::write(dir.path().join(kind), bytes).unwrap();
        for c in [1, 3, 4] {
            cases.push(
                json!({"name": format!("{kind}/{c}"), "file": kind, "channels": c, "op": "decode"}),
            );
        }
    }
    let theirs = tf(dir.path(), &cases);
    for (kind, bytes) in &kinds {
        for c in [1, 3, 4] {
            let name = format!("{kind}/{c}");
            let (shape, Pixels::U8(expected)) = &theirs[&name] else {
                panic!("{name}")
            };
            assert_eq!(shape, &vec![h, w, c], "{name}");
            let got = ours(bytes, &ImageSpec::new(h, w, c), &[]);
            assert!(
                got == *expected,
                "{name}: pixels differ from tf.io.decode_png"
            );
        }
    }
}

#[test]
#[ignore = "needs TensorFlow (INFEED_PYTHON): run by scripts/test.sh"]
fn tf_jpeg_pixels_match_decode_jpeg_baseline_progressive_gray() {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (37, 29);
    let rgb = encode::pixels(w, h, 3, 3);
    let opts = |quality, subsamp, progressive| JpegOptions {
        quality,
        subsamp,
        progressive,
    };
    let kinds: Vec<(&str, Vec<u8>)> = vec![
        ("420q90", encode::jpeg(w, h, 3, &rgb, opts(90, 2, false))),
        ("444q75", encode::jpeg(w, h, 3, &rgb, opts(75, 0, false))),
        (
            "progressive",
            encode::jpeg(w, h, 3, &rgb, opts(90, 2, true)),
        ),
        (
            "gray",
            encode::jpeg(w, h, 1, &encode::pixels(w, h, 1, 4), opts(90, 3, false)),
        ),
    ];
    let mut cases = Vec::new();
    for (kind, bytes) in &kinds {
        std::fs::write(dir.path().join(kind), bytes).unwrap();
        for c in [1, 3] {
            cases.push(
                json!({"name": format!("{kind}/{c}"), "file": kind, "channels": c, "op": "decode"}),
            );
        }
    }
    let theirs = tf(dir.path(), &cases);
    for (kind, bytes) in &kinds {
        for c in [1, 3] {
            let name = format!("{kind}/{c}");
            let (shape, Pixels::U8(expected)) = &theirs[&name] else {
                panic!("{name}")
            };
            assert_eq!(shape, &vec![h, w, c], "{name}");
            let got = ours(bytes, &ImageSpec::new(h, w, c), &[]);
            let max = got.iter().zip(expected).map(|(a, b)| a.abs_diff(*b)).max();
            assert!(max <= Some(JPEG_MAX_DIFF), "{name}: max diff {max:?}");
        }
    }
}

/// Max and mean |ours - theirs| over all samples.
fn diffs(ours: &[u8], theirs: &[f32]) -> (f32, f32) {
    assert_eq!(ours.len(), theirs.len());
    let d: Vec<f32> = ours
        .iter()
        .zip(theirs)
        .map(|(&a, &b)| (f32::from(a) - b).abs())
        .collect();
    let max = d.iter().copied().fold(0.0, f32::max);
    (max, d.iter().sum::<f32>() / d.len() as f32)
}

#[test]
#[ignore = "needs TensorFlow (INFEED_PYTHON): run by scripts/test.sh"]
fn tf_eval_resize_and_center_crop_match_resize_then_crop() {
    let dir = tempfile::tempdir().unwrap();
    // (name, width, height, shorter side, out h, out w): down and up.
    let sizes = [
        ("down", 60, 45, 32, 24, 24),
        ("down_wide", 61, 40, 30, 20, 28),
        ("up", 20, 15, 32, 28, 28),
        // A JPEG decodes only the region the crop reads: columns 32..128 of 160.
        ("region", 160, 96, 48, 32, 32),
    ];
    let mut cases = Vec::new();
    let mut ours_by_name = HashMap::new();
    for (size, w, h, side, oh, ow) in sizes {
        let px = encode::pixels(w, h, 3, 9);
        let files = [
            (
                "png",
                encode::png(w, h, ColorType::Rgb, BitDepth::Eight, &px, None),
            ),
            ("jpeg", encode::jpeg(w, h, 3, &px, encode::BASELINE_420)),
        ];
        let short = w.min(h) as f64;
        let rh = (h as f64 * side as f64 / short).round() as usize;
        let rw = (w as f64 * side as f64 / short).round() as usize;
        for (format, bytes) in files {
            let name = format!("{size}/{format}");
            std::fs::write(dir.path().join(name.replace('/', "_")), &bytes).unwrap();
            cases.push(json!({
                "name": name, "file": name.replace('/', "_"), "channels": 3, "op": "eval",
                "rh": rh, "rw": rw, "top": (rh - oh) / 2, "left": (rw - ow) / 2, "h": oh, "w": ow,
            }));
            let spec = ImageSpec::new(oh, ow, 3).resize_crop(side);
            ours_by_name.insert(name, ours(&bytes, &spec, &[]));
        }
    }
    let theirs = tf(dir.path(), &cases);
    for (name, got) in &ours_by_name {
        let (_, Pixels::F32(expected)) = &theirs[name] else {
            panic!("{name}")
        };
        let (max, mean) = diffs(got, expected);
        println!("eval {name}: max {max:.3} mean {mean:.4}");
        assert!(max <= RESIZE_MAX_DIFF, "{name}: max diff {max}");
    }
}

/// Random bits for the train crop of case `i`.
fn draws(i: u64) -> Vec<u64> {
    let mut s = i.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    (0..64)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
        .collect()
}

#[test]
#[ignore = "needs TensorFlow (INFEED_PYTHON): run by scripts/test.sh"]
fn tf_train_crops_match_crop_then_resize() {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (200, 150);
    let px = encode::pixels(w, h, 3, 21);
    let files = [
        (
            "png",
            encode::png(w, h, ColorType::Rgb, BitDepth::Eight, &px, None),
        ),
        ("jpeg", encode::jpeg(w, h, 3, &px, encode::BASELINE_420)),
    ];
    let mut cases = Vec::new();
    let mut ours_by_name = Vec::new();
    for (format, bytes) in &files {
        std::fs::write(dir.path().join(format), bytes).unwrap();
        // 96×96 outputs: crops under twice the output, decoded at full
        // scale (a JPEG region); 24×24: most crops DCT-scaled.
        for (out, scaled) in [(96, false), (24, true)] {
            for i in 0..6u64 {
                let d = draws(i + out as u64);
                let mut next = d.iter().copied();
                let win = geometry::random_resized_crop(w, h, &mut || next.next().unwrap());
                let denom = geometry::dct_denominator(&win, out, out);
                let name = format!("{format}/{out}/{i}");
                cases.push(json!({
                    "name": name, "file": format, "channels": 3, "op": "crop",
                    "y": win.y, "x": win.x, "ch": win.height, "cw": win.width, "h": out, "w": out,
                }));
                let spec = ImageSpec::new(out, out, 3).random_resized_crop();
                let exact = *format == "png" || denom == 1;
                assert!(scaled || denom == 1, "{name}: {win:?}");
                ours_by_name.push((name, exact, ours(bytes, &spec, &d)));
            }
        }
    }
    let theirs = tf(dir.path(), &cases);
    let mut scaled_cases = 0;
    for (name, exact, got) in &ours_by_name {
        let (_, Pixels::F32(expected)) = &theirs[name] else {
            panic!("{name}")
        };
        let (max, mean) = diffs(got, expected);
        println!("train {name}: max {max:.3} mean {mean:.4}");
        if *exact {
            assert!(max <= RESIZE_MAX_DIFF, "{name}: max diff {max}");
        } else {
            scaled_cases += 1;
            assert!(
                max <= SCALED_MAX_DIFF && mean <= SCALED_MEAN_DIFF,
                "{name}: {max} {mean}"
            );
        }
    }
    assert!(scaled_cases >= 3, "only {scaled_cases} DCT-scaled crops");
}
