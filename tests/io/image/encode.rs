//! Test images: natural-looking pixels (gradients, a disc, a box, mild
//! noise; never pure noise, which no codec sees in practice), encoded as
//! PNG (every color type and depth) or JPEG (libjpeg-turbo's compressor).

use std::ffi::c_int;

use turbojpeg_sys as tj;

/// `w × h` pixels of `channels` samples: smooth gradients per channel, a
/// flat disc and a flat box, and ±3 of deterministic noise.
pub fn pixels(w: usize, h: usize, channels: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut noise = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 7) as i32 - 3
    };
    let mut out = Vec::with_capacity(w * h * channels);
    let (cx, cy, r) = (w as i32 / 3, h as i32 / 2, (w.min(h) / 4) as i32 + 1);
    for y in 0..h as i32 {
        for x in 0..w as i32 {
            for c in 0..channels as i32 {
                let base = if (x - cx).pow(2) + (y - cy).pow(2) < r * r {
                    40 + 70 * c
                } else if x > w as i32 * 2 / 3 && y < h as i32 / 3 {
                    220 - 50 * c
                } else {
                    (x * 255 / w.max(1) as i32 * (c + 1) + y * 255 / h.max(1) as i32) / (c + 2)
                        + 30 * c
                };
                out.push((base + noise()).clamp(0, 255) as u8);
            }
        }
    }
    out
}

/// A PNG of `color` and `depth` (16-bit samples big-endian in `data`).
pub fn png(
    w: usize,
    h: usize,
    color: png::ColorType,
    depth: png::BitDepth,
    data: &[u8],
    palette: Option<(&[u8], &[u8])>,
) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w as u32, h as u32);
        enc.set_color(color);
        enc.set_depth(depth);
        if let Some((plte, trns)) = palette {
            enc.set_palette(plte.to_vec());
            if !trns.is_empty() {
                enc.set_trns(trns.to_vec());
            }
        }
        let mut writer = enc.write_header().unwrap();
        writer.write_image_data(data).unwrap();
    }
    out
}

/// How a test JPEG is encoded.
#[derive(Clone, Copy, Debug)]
pub struct JpegOptions {
    pub quality: i32,
    /// TurboJPEG's TJSAMP (0 4:4:4, 2 4:2:0).
    pub subsamp: i32,
    pub progressive: bool,
}

pub const BASELINE_420: JpegOptions = JpegOptions {
    quality: 90,
    subsamp: tj::TJSAMP_TJSAMP_420,
    progressive: false,
};

/// A JPEG of `w × h` pixels of `channels` samples: 1 gray, 3 RGB, 4 CMYK.
pub fn jpeg(w: usize, h: usize, channels: usize, data: &[u8], o: JpegOptions) -> Vec<u8> {
    let (format, subsamp) = match channels {
        1 => (tj::TJPF_TJPF_GRAY, tj::TJSAMP_TJSAMP_GRAY),
        3 => (tj::TJPF_TJPF_RGB, o.subsamp),
        _ => (tj::TJPF_TJPF_CMYK, o.subsamp),
    };
    assert_eq!(data.len(), w * h * channels);
    // SAFETY: a fresh compressor; `data` holds `h` rows of `w * channels`
    // bytes as the pitch says; the output buffer is TurboJPEG's own,
    // copied out and freed once.
    unsafe {
        let handle = tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int);
        assert!(!handle.is_null());
        let set = |p: tj::TJPARAM, v: i32| assert_eq!(tj::tj3Set(handle, p as c_int, v), 0);
        set(tj::TJPARAM_TJPARAM_QUALITY, o.quality);
        set(tj::TJPARAM_TJPARAM_SUBSAMP, subsamp);
        set(tj::TJPARAM_TJPARAM_PROGRESSIVE, i32::from(o.progressive));
        let mut buf: *mut u8 = std::ptr::null_mut();
        let mut size: tj::size_t = 0;
        let rc = tj::tj3Compress8(
            handle,
            data.as_ptr(),
            w as c_int,
            (w * channels) as c_int,
            h as c_int,
            format as c_int,
            &mut buf,
            &mut size,
        );
        assert_eq!(rc, 0, "tj3Compress8 failed");
        let out = std::slice::from_raw_parts(buf, size as usize).to_vec();
        tj::tj3Free(buf.cast());
        tj::tj3Destroy(handle);
        out
    }
}
