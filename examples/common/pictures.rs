//! Natural-looking test pictures and their JPEG encoding by libjpeg-turbo
//! (quality 90, 4:2:0), shared by the examples that need pictures.

use std::ffi::c_int;

use turbojpeg_sys as tj;

/// Gradients, six flat shapes and ±3 of noise, as in tests/io/image/encode.rs.
pub fn picture(w: usize, h: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let shapes: Vec<(i64, i64, i64, [i64; 3], bool)> = (0..6)
        .map(|_| {
            let r = next();
            (
                (r % w as u64) as i64,
                ((r >> 16) % h as u64) as i64,
                15 + ((r >> 32) % 60) as i64,
                [
                    (r >> 40) as i64 & 255,
                    (r >> 48) as i64 & 255,
                    (r >> 56) as i64,
                ],
                r & 1 == 1,
            )
        })
        .collect();
    let freq: Vec<i64> = (0..6).map(|_| 1 + (next() % 5) as i64).collect();
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h as i64 {
        for x in 0..w as i64 {
            let shape = shapes.iter().rev().find(|&&(cx, cy, r, _, disc)| {
                if disc {
                    (x - cx).pow(2) + (y - cy).pow(2) < r * r
                } else {
                    (x - cx).abs() < r && (y - cy).abs() < r * 3 / 5
                }
            });
            for c in 0..3 {
                let base = match shape {
                    Some(&(_, _, _, color, _)) => color[c],
                    None => (x * freq[c] * 255 / w as i64 + y * freq[c + 3] * 255 / h as i64) % 256,
                };
                let noise = (next() % 9) as i64 - 4;
                out.push((base + noise).clamp(0, 255) as u8);
            }
        }
    }
    out
}

pub fn jpeg(w: usize, h: usize, rgb: &[u8], progressive: bool) -> Vec<u8> {
    // SAFETY: a fresh compressor; `rgb` holds `h` rows of `3 w` bytes; the
    // output buffer is TurboJPEG's, copied out and freed once.
    unsafe {
        let handle = tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as c_int);
        tj::tj3Set(handle, tj::TJPARAM_TJPARAM_QUALITY as c_int, 90);
        tj::tj3Set(
            handle,
            tj::TJPARAM_TJPARAM_SUBSAMP as c_int,
            tj::TJSAMP_TJSAMP_420,
        );
        tj::tj3Set(
            handle,
            tj::TJPARAM_TJPARAM_PROGRESSIVE as c_int,
            c_int::from(progressive),
        );
        let (mut buf, mut size): (*mut u8, tj::size_t) = (std::ptr::null_mut(), 0);
        let rc = tj::tj3Compress8(
            handle,
            rgb.as_ptr(),
            w as c_int,
            (w * 3) as c_int,
            h as c_int,
            tj::TJPF_TJPF_RGB as c_int,
            &mut buf,
            &mut size,
        );
        assert_eq!(rc, 0, "tj3Compress8");
        let out = std::slice::from_raw_parts(buf, size as usize).to_vec();
        tj::tj3Free(buf.cast());
        tj::tj3Destroy(handle);
        out
    }
}
