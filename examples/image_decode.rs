//! Image decoding speed, one thread: the JPEG decoders compared when the
//! `images` feature chose its decoder (docs/performance.md, "Image
//! decoding"), and infeed's own decode paths.
//!
//!     cargo build --release --example image_decode --features images
//!     taskset -c 0 target/release/examples/image_decode [--count 64] [--rounds 20] [--size 400x300]
//!
//! Images are made here: `--count` natural-looking pictures (gradients,
//! flat discs and boxes, mild noise) encoded by libjpeg-turbo at quality 90
//! (4:2:0, baseline and progressive) and as 8-bit RGB PNGs. Each line is
//! one decoder over all of them, `--rounds` times after a warm-up round:
//! images/s, MB/s of encoded input, and megapixels/s of output.

use std::ffi::c_int;
use std::time::Instant;

#[path = "common/pictures.rs"]
mod pictures;

use infeed::image::Decoder;
use infeed::spec::ImageSpec;
use pictures::{jpeg, picture};
use turbojpeg_sys as tj;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn png(w: usize, h: usize, rgb: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w as u32, h as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().expect("png header");
    writer.write_image_data(rgb).expect("png data");
    writer.finish().expect("png end");
    out
}

/// Runs `decode` (which gives the pixels it wrote) over `images`.
fn measure(name: &str, images: &[Vec<u8>], rounds: usize, mut decode: impl FnMut(&[u8]) -> usize) {
    images.iter().for_each(|i| {
        decode(i);
    });
    let start = Instant::now();
    let mut pixels = 0;
    for _ in 0..rounds {
        for i in images {
            pixels += decode(i);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let n = (rounds * images.len()) as f64;
    let bytes: usize = images.iter().map(Vec::len).sum::<usize>() * rounds;
    println!(
        "{name:44} {:8.0} images/s {:7.1} MB/s {:7.1} Mpx/s",
        n / secs,
        bytes as f64 / secs / 1e6,
        pixels as f64 / secs / 1e6
    );
}

/// libjpeg-turbo through its TurboJPEG API: the whole image at 1/`denom`,
/// or the `region` (x, y, w, h of the scaled image); `fast` is the fast
/// integer IDCT (TensorFlow's default), else the accurate one.
fn turbo(
    denom: usize,
    region: Option<(usize, usize, usize, usize)>,
    fast: bool,
) -> impl FnMut(&[u8]) -> usize {
    // SAFETY: one handle, used by this closure alone, destroyed never (the
    // process ends after the measurement).
    let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int) };
    let mut out = Vec::new();
    move |data: &[u8]| {
        // SAFETY: the handle is live; `out` holds the w × h × 3 bytes
        // written at pitch 3 w; `data` outlives each call.
        unsafe {
            tj::tj3Set(
                handle,
                tj::TJPARAM_TJPARAM_FASTDCT as c_int,
                c_int::from(fast),
            );
            assert_eq!(
                tj::tj3DecompressHeader(handle, data.as_ptr(), data.len() as _),
                0
            );
            let factor = tj::tjscalingfactor {
                num: 1,
                denom: denom as c_int,
            };
            tj::tj3SetScalingFactor(handle, factor);
            let w = tj::tj3Get(handle, tj::TJPARAM_TJPARAM_JPEGWIDTH as c_int) as usize;
            let h = tj::tj3Get(handle, tj::TJPARAM_TJPARAM_JPEGHEIGHT as c_int) as usize;
            let (sw, sh) = (w.div_ceil(denom), h.div_ceil(denom));
            let (x, y, rw, rh) = region.unwrap_or((0, 0, sw, sh));
            let crop = match region {
                Some(_) => tj::tjregion {
                    x: x as c_int,
                    y: y as c_int,
                    w: rw as c_int,
                    h: rh as c_int,
                },
                None => tj::tjregion {
                    x: 0,
                    y: 0,
                    w: 0,
                    h: 0,
                },
            };
            tj::tj3SetCroppingRegion(handle, crop);
            out.resize(rw * rh * 3, 0);
            let rc = tj::tj3Decompress8(
                handle,
                data.as_ptr(),
                data.len() as _,
                out.as_mut_ptr(),
                (rw * 3) as c_int,
                tj::TJPF_TJPF_RGB as c_int,
            );
            assert_eq!(rc, 0, "tj3Decompress8");
            rw * rh
        }
    }
}

fn zune(data: &[u8]) -> usize {
    use zune_core::bytestream::ZCursor;
    use zune_core::colorspace::ColorSpace;
    use zune_core::options::DecoderOptions;
    let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(data), options);
    decoder.decode().expect("zune-jpeg").len() / 3
}

fn main() {
    let count: usize = arg("--count", "64").parse().expect("--count N");
    let rounds: usize = arg("--rounds", "20").parse().expect("--rounds N");
    let size = arg("--size", "400x300");
    let (w, h) = size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<usize>().ok()?, h.parse::<usize>().ok()?)))
        .expect("--size WxH");
    let pictures: Vec<Vec<u8>> = (0..count).map(|i| picture(w, h, i as u64 + 1)).collect();
    let baseline: Vec<Vec<u8>> = pictures.iter().map(|p| jpeg(w, h, p, false)).collect();
    let progressive: Vec<Vec<u8>> = pictures.iter().map(|p| jpeg(w, h, p, true)).collect();
    let pngs: Vec<Vec<u8>> = pictures.iter().map(|p| png(w, h, p)).collect();
    let mean = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>() / v.len();
    println!(
        "{count} images of {w}x{h}: JPEG q90 4:2:0 {} bytes on average (progressive {}), PNG {}",
        mean(&baseline),
        mean(&progressive),
        mean(&pngs)
    );
    println!("-- decode only, RGB");
    measure("zune-jpeg", &baseline, rounds, zune);
    measure(
        "libjpeg-turbo, accurate IDCT",
        &baseline,
        rounds,
        turbo(1, None, false),
    );
    measure(
        "libjpeg-turbo, fast IDCT (TF's default)",
        &baseline,
        rounds,
        turbo(1, None, true),
    );
    measure("zune-jpeg, progressive", &progressive, rounds, zune);
    measure(
        "libjpeg-turbo, progressive, fast IDCT",
        &progressive,
        rounds,
        turbo(1, None, true),
    );
    for denom in [2, 4, 8] {
        let name = format!("libjpeg-turbo, DCT-scaled 1/{denom}");
        measure(&name, &baseline, rounds, turbo(denom, None, true));
    }
    // The central half of each side (a quarter of the area), from an iMCU edge.
    let region = ((w / 4) / 16 * 16, h / 4, w / 2, h / 2);
    measure(
        "libjpeg-turbo, central quarter cropped",
        &baseline,
        rounds,
        turbo(1, Some(region), true),
    );
    let mut scratch = Vec::new();
    measure("png crate (8-bit RGB)", &pngs, rounds, |data| {
        let mut reader = png::Decoder::new(std::io::Cursor::new(data))
            .read_info()
            .expect("png");
        scratch.resize(reader.output_buffer_size().expect("size"), 0);
        let info = reader.next_frame(&mut scratch).expect("png frame");
        (info.width * info.height) as usize
    });
    println!("-- infeed's image feature paths (decode, crop, resize), RGB");
    let mut decoder = Decoder::new();
    let mut bits = 0x2545_f491_4f6c_dd1du64;
    let specs = [
        (
            "eval: shorter side 256, center 224x224",
            ImageSpec::new(224, 224, 3).resize_crop(256),
        ),
        (
            "train: random resized crop to 224x224",
            ImageSpec::new(224, 224, 3).random_resized_crop(),
        ),
        (
            "train: random resized crop to 64x64",
            ImageSpec::new(64, 64, 3).random_resized_crop(),
        ),
    ];
    for (name, spec) in specs {
        let mut out = vec![0u8; spec.height * spec.width * 3];
        measure(&format!("{name}, JPEG"), &baseline, rounds, |data| {
            let mut draw = || {
                bits ^= bits << 13;
                bits ^= bits >> 7;
                bits ^= bits << 17;
                bits
            };
            decoder
                .decode_into(data, &spec, &mut draw, &mut out)
                .expect("decode");
            spec.height * spec.width
        });
    }
}
