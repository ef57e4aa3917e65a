//! JPEG decoding through libjpeg-turbo's TurboJPEG 3 API (the
//! `turbojpeg-sys` crate builds it from its vendored source): the decoder
//! TensorFlow's `decode_jpeg` uses, with the same defaults (fast integer
//! IDCT, fancy upsampling), plus DCT-domain scaling by 1/2, 1/4,
//! 1/8 and decoding only a region. Why this decoder:
//! docs/performance.md, "Image decoding".

use std::ffi::{CStr, c_int};

use turbojpeg_sys as tj;

use super::error::ImageError;
use super::sniff::Format;

/// What a JPEG's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub width: usize,
    pub height: usize,
    /// Width of an iMCU in pixels at full scale (a cropped decode starts
    /// on a multiple of it); 0 when unknown (no cropped decode).
    pub mcu_width: usize,
}

/// A region to decode at a scale: `denom` of 1, 2, 4 or 8, and the rows and
/// columns `x..x + w`, `y..y + h` of the scaled image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    pub denom: usize,
    pub x: usize,
    pub y: usize,
    pub w: usize,
    pub h: usize,
}

/// The size of a `dim`-pixel side decoded at 1/`denom` (libjpeg rounds up).
pub(crate) fn scaled(dim: usize, denom: usize) -> usize {
    dim.div_ceil(denom.max(1))
}

/// A TurboJPEG decompressor; one per worker thread (a handle is not
/// thread-safe).
pub(crate) struct Jpeg {
    handle: tj::tjhandle,
}

impl Jpeg {
    pub fn new() -> Result<Self, ImageError> {
        // SAFETY: tj3Init has no preconditions; a null handle is checked.
        let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as c_int) };
        if handle.is_null() {
            return Err(corrupt("cannot create a TurboJPEG decompressor".into()));
        }
        let jpeg = Jpeg { handle };
        // A warning (e.g. "premature end of data") is an error: a truncated
        // image is refused, never half grey. The scan limit bounds the work
        // a hostile progressive JPEG can ask for.
        jpeg.set(tj::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
        // TensorFlow's default `dct_method` ("") is libjpeg's fast integer
        // IDCT (JDCT_IFAST), not TurboJPEG's accurate default.
        jpeg.set(tj::TJPARAM_TJPARAM_FASTDCT, 1)?;
        jpeg.set(tj::TJPARAM_TJPARAM_SCANLIMIT, 500)?;
        Ok(jpeg)
    }

    fn set(&self, param: tj::TJPARAM, value: c_int) -> Result<(), ImageError> {
        // SAFETY: the handle is live (owned by self).
        let rc = unsafe { tj::tj3Set(self.handle, param as c_int, value) };
        self.check(rc)
    }

    fn get(&self, param: tj::TJPARAM) -> c_int {
        // SAFETY: the handle is live.
        unsafe { tj::tj3Get(self.handle, param as c_int) }
    }

    fn check(&self, rc: c_int) -> Result<(), ImageError> {
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: the handle is live; the string it returns lives in it
        // until the next call, and is copied out at once.
        let message = unsafe { CStr::from_ptr(tj::tj3GetErrorStr(self.handle)) };
        Err(corrupt(message.to_string_lossy().into_owned()))
    }

    /// Reads the header of `data`; a CMYK or YCCK image is
    /// [`ImageError::Cmyk`].
    pub fn header(&mut self, data: &[u8]) -> Result<Header, ImageError> {
        // SAFETY: the pointer and length describe `data`, which outlives the call.
        let rc = unsafe { tj::tj3DecompressHeader(self.handle, data.as_ptr(), data.len() as _) };
        self.check(rc)?;
        let colorspace = self.get(tj::TJPARAM_TJPARAM_COLORSPACE);
        if colorspace == tj::TJCS_TJCS_CMYK as c_int || colorspace == tj::TJCS_TJCS_YCCK as c_int {
            return Err(ImageError::Cmyk);
        }
        let (w, h) = (
            self.get(tj::TJPARAM_TJPARAM_JPEGWIDTH),
            self.get(tj::TJPARAM_TJPARAM_JPEGHEIGHT),
        );
        // iMCU widths by subsampling (TurboJPEG's tjMCUWidth): 4:4:4, 4:2:2,
        // 4:2:0, gray, 4:4:0, 4:1:1, 4:4:1.
        const MCU_WIDTH: [usize; 7] = [8, 16, 16, 8, 8, 32, 8];
        let lossless = self.get(tj::TJPARAM_TJPARAM_LOSSLESS) == 1;
        let mcu_width = usize::try_from(self.get(tj::TJPARAM_TJPARAM_SUBSAMP))
            .ok()
            .and_then(|s| MCU_WIDTH.get(s).copied())
            .filter(|_| !lossless)
            .unwrap_or(0);
        Ok(Header {
            width: usize::try_from(w).unwrap_or(0),
            height: usize::try_from(h).unwrap_or(0),
            mcu_width,
        })
    }

    /// Decodes `region` of `data` (whose header was just read) into `out`
    /// as `channels` (1 gray, 3 RGB, 4 RGBA with alpha 255) 8-bit samples
    /// per pixel, `region.w * region.h` pixels.
    pub fn decode(
        &mut self,
        data: &[u8],
        header: &Header,
        region: Region,
        channels: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), ImageError> {
        let format = match channels {
            1 => tj::TJPF_TJPF_GRAY,
            3 => tj::TJPF_TJPF_RGB,
            _ => tj::TJPF_TJPF_RGBA,
        };
        let (sw, sh) = (
            scaled(header.width, region.denom),
            scaled(header.height, region.denom),
        );
        let whole = region.x == 0 && region.y == 0 && region.w == sw && region.h == sh;
        let fits = region.x + region.w <= sw && region.y + region.h <= sh && region.w > 0;
        if !fits || region.h == 0 {
            return Err(corrupt(format!("bad decode region {region:?}")));
        }
        let factor = tj::tjscalingfactor {
            num: 1,
            denom: region.denom as c_int,
        };
        // SAFETY: the handle is live.
        self.check(unsafe { tj::tj3SetScalingFactor(self.handle, factor) })?;
        let crop = if whole {
            tj::tjregion {
                x: 0,
                y: 0,
                w: 0,
                h: 0,
            }
        } else {
            tj::tjregion {
                x: region.x as c_int,
                y: region.y as c_int,
                w: region.w as c_int,
                h: region.h as c_int,
            }
        };
        // SAFETY: the handle is live.
        self.check(unsafe { tj::tj3SetCroppingRegion(self.handle, crop) })?;
        let pitch = region.w * channels;
        out.clear();
        out.resize(pitch * region.h, 0);
        // SAFETY: `out` holds `pitch * region.h` bytes, what TurboJPEG writes
        // for a region of `region.w × region.h` pixels at this pitch; `data`
        // outlives the call.
        let rc = unsafe {
            tj::tj3Decompress8(
                self.handle,
                data.as_ptr(),
                data.len() as _,
                out.as_mut_ptr(),
                pitch as c_int,
                format as c_int,
            )
        };
        self.check(rc)
    }
}

impl Drop for Jpeg {
    fn drop(&mut self) {
        // SAFETY: the handle is live and dropped once.
        unsafe { tj::tj3Destroy(self.handle) }
    }
}

fn corrupt(message: String) -> ImageError {
    ImageError::Corrupt {
        format: Format::Jpeg,
        message,
    }
}
