//! Which compression a file is read with: the [`Compression`] kinds, and
//! detection from the file name and first bytes ([`Detection`]), which
//! remembers whether it was told, certain, or guessing.

use std::fmt;

use flate2::{Decompress, FlushDecompress};

use super::frame::{HEADER_LEN, header_crc_matches};

/// How a TFRecord file is compressed (TensorFlow's `compression_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Plain TFRecord framing.
    None,
    /// A GZIP stream (several concatenated members are read as one stream).
    Gzip,
    /// A ZLIB stream (several concatenated streams are read as one stream).
    Zlib,
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zlib => "zlib",
        })
    }
}

/// How many first bytes of a file [`Detection::detect`] looks at: a header
/// and enough of a compressed stream to see that it decodes.
pub const DETECT_LEN: usize = 64;

impl Compression {
    /// The compression a file name implies: `.gz`/`.gzip` → GZIP,
    /// `.zz`/`.zlib` → ZLIB; anything else → `None` (unknown, not "plain").
    pub fn from_extension(path: &str) -> Option<Compression> {
        let ext = match path.rsplit_once('.') {
            Some((_, ext)) if !ext.contains('/') => ext,
            _ => return None,
        };
        if ext.eq_ignore_ascii_case("gz") || ext.eq_ignore_ascii_case("gzip") {
            Some(Compression::Gzip)
        } else if ext.eq_ignore_ascii_case("zz") || ext.eq_ignore_ascii_case("zlib") {
            Some(Compression::Zlib)
        } else {
            None
        }
    }

    /// The compression [`Detection::detect`] picks.
    pub fn detect(path: &str, first_bytes: &[u8]) -> Compression {
        Detection::detect(path, first_bytes).compression
    }

    /// Parses the CLI spelling: `none`, `gzip`, `zlib` → `Some(Some(..))`,
    /// `auto` → `Some(None)` (detect), anything else → `None`. Case-insensitive.
    pub fn parse(s: &str) -> Option<Option<Compression>> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Some(Some(Compression::None)),
            "gzip" => Some(Some(Compression::Gzip)),
            "zlib" => Some(Some(Compression::Zlib)),
            "auto" => Some(None),
            _ => None,
        }
    }
}

/// What decided the compression a file is read with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DetectedBy {
    /// The caller said so (`--compression`, [`super::ReadOptions::compression`]).
    Caller,
    /// The file name's extension (`.gz`, `.gzip`, `.zz`, `.zlib`): a guess.
    Extension,
    /// The first 12 bytes are a valid TFRecord header: plain, certainly.
    Header,
    /// The first bytes start a GZIP or ZLIB stream that decodes: a guess.
    Magic,
    /// Nothing recognised, so plain: a guess.
    Default,
}

/// The compression chosen for a file, and what chose it; errors that a
/// wrong guess would cause name the guess and how to override it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Detection {
    /// The compression the file is read with.
    pub compression: Compression,
    /// What chose it.
    pub by: DetectedBy,
}

impl From<Compression> for Detection {
    /// A compression the caller chose.
    fn from(compression: Compression) -> Self {
        Detection {
            compression,
            by: DetectedBy::Caller,
        }
    }
}

impl Detection {
    /// Detects the compression of a file from its name, then its first
    /// bytes (give [`DETECT_LEN`] bytes, or the whole file if shorter).
    ///
    /// 1. The extension wins (`.gz` → GZIP, `.zz` → ZLIB).
    /// 2. A valid TFRecord header (its length CRC matches) means plain,
    ///    whatever else the bytes look like: a record of 0x8B1F bytes
    ///    starts with the GZIP magic `1f 8b`, one of 0x0178 bytes with a
    ///    ZLIB header.
    /// 3. GZIP magic or a ZLIB header is believed only if the first bytes
    ///    decode: a plain file whose first header is damaged often starts
    ///    like a ZLIB header but never decodes as one, and must stay plain
    ///    so that the skip policy can recover the records after it.
    /// 4. Anything else is plain.
    pub fn detect(path: &str, first_bytes: &[u8]) -> Detection {
        if let Some(compression) = Compression::from_extension(path) {
            return Detection {
                compression,
                by: DetectedBy::Extension,
            };
        }
        if first_bytes
            .first_chunk::<HEADER_LEN>()
            .is_some_and(header_crc_matches)
        {
            return Detection {
                compression: Compression::None,
                by: DetectedBy::Header,
            };
        }
        let candidate = if first_bytes.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if let [cmf, flg, ..] = *first_bytes
            && cmf & 0x0f == 8
            && cmf >> 4 <= 7
            && ((u16::from(cmf) << 8) | u16::from(flg)) % 31 == 0
        {
            Some(Compression::Zlib)
        } else {
            None
        };
        match candidate {
            Some(compression) if decodes(compression, first_bytes) => Detection {
                compression,
                by: DetectedBy::Magic,
            },
            _ => Detection {
                compression: Compression::None,
                by: DetectedBy::Default,
            },
        }
    }

    /// Whether the choice was a guess (not the caller's, not certain).
    pub fn is_guess(&self) -> bool {
        matches!(
            self.by,
            DetectedBy::Extension | DetectedBy::Magic | DetectedBy::Default
        )
    }

    /// What was guessed and how to override it, for an error a wrong guess
    /// would cause; `None` when nothing was guessed.
    pub fn hint(&self) -> Option<String> {
        let c = self.compression;
        Some(match self.by {
            DetectedBy::Caller | DetectedBy::Header => return None,
            DetectedBy::Extension => format!(
                "read as {c} because of the file name's extension; \
                 if the file is not compressed, use ReadOptions::compression none"
            ),
            DetectedBy::Magic => format!(
                "read as {c}, guessed from the first bytes; \
                 if the file is not compressed, use ReadOptions::compression none"
            ),
            DetectedBy::Default => "read as plain TFRecord: neither the name nor the first bytes \
                                    show a compression; if the file is compressed, use \
                                    ReadOptions::compression gzip or zlib"
                .to_string(),
        })
    }
}

/// Whether `bytes` (the start of a file) decode as `compression` without
/// error. Stops early once some output has been made.
fn decodes(compression: Compression, bytes: &[u8]) -> bool {
    let mut decoder = match compression {
        Compression::None => return true,
        Compression::Gzip => Decompress::new_gzip(15),
        Compression::Zlib => Decompress::new(true),
    };
    let mut out = Vec::with_capacity(4096);
    let mut input = bytes;
    loop {
        let before = decoder.total_in();
        match decoder.decompress_vec(input, &mut out, FlushDecompress::None) {
            Err(_) => return false,
            Ok(flate2::Status::StreamEnd) => return true,
            Ok(_) => {}
        }
        let used = usize::try_from(decoder.total_in() - before).unwrap_or(usize::MAX);
        input = input.get(used..).unwrap_or_default();
        if input.is_empty() || out.len() == out.capacity() || used == 0 {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::crc::masked_crc32c;
    use super::super::inflate::tests::{gzip, zlib};
    use super::*;

    #[test]
    fn extension() {
        assert_eq!(Compression::from_extension("a.gz"), Some(Compression::Gzip));
        assert_eq!(
            Compression::from_extension("a/b.tfrecord.GZIP"),
            Some(Compression::Gzip)
        );
        assert_eq!(Compression::from_extension("a.zz"), Some(Compression::Zlib));
        assert_eq!(
            Compression::from_extension("a.zlib"),
            Some(Compression::Zlib)
        );
        assert_eq!(Compression::from_extension("a.tfrecord"), None);
        assert_eq!(Compression::from_extension("dir.gz/file"), None);
        assert_eq!(Compression::from_extension("gz"), None);
        assert_eq!(
            Compression::from_extension("gs://bucket/x-00001-of-00004.gz"),
            Some(Compression::Gzip)
        );
    }

    #[test]
    fn detect_by_magic_and_header() {
        // The TFRecord framing of b"hello", as written by TensorFlow.
        let hello: [u8; 21] = [
            5, 0, 0, 0, 0, 0, 0, 0, 0xea, 0xb2, 0x04, 0x3e, b'h', b'e', b'l', b'l', b'o', 0xbb,
            0x1f, 0x1c, 0x19,
        ];
        assert_eq!(Compression::detect("f", &hello), Compression::None);
        assert_eq!(Compression::detect("f", &gzip(&hello)), Compression::Gzip);
        assert_eq!(Compression::detect("f", &zlib(&hello)), Compression::Zlib);
        // Extension wins over content.
        assert_eq!(Compression::detect("f.gz", &hello), Compression::Gzip);
        assert_eq!(
            Compression::detect("f.zz", &gzip(&hello)),
            Compression::Zlib
        );
        // Empty and garbage files: plain.
        assert_eq!(Compression::detect("f", b""), Compression::None);
        assert_eq!(
            Compression::detect("f", b"garbage garbage"),
            Compression::None
        );
    }

    #[test]
    fn detect_prefers_a_valid_tfrecord_header_over_a_zlib_lookalike() {
        // A record of length 0x9c78 starts with 78 9c, a valid zlib header.
        let len: u64 = 0x9c78;
        let mut header = len.to_le_bytes().to_vec();
        header.extend_from_slice(&masked_crc32c(&len.to_le_bytes()).to_le_bytes());
        assert_eq!(&header[..2], &[0x78, 0x9c]);
        assert_eq!(Compression::detect("f", &header), Compression::None);
        // Without a valid length CRC the two bytes still do not decode as
        // zlib (a stored block with LEN 0, NLEN 0): plain, by default.
        header[8] ^= 1;
        assert_eq!(
            Detection::detect("f", &header),
            Detection {
                compression: Compression::None,
                by: DetectedBy::Default
            }
        );
    }

    #[test]
    fn parse() {
        assert_eq!(Compression::parse("none"), Some(Some(Compression::None)));
        assert_eq!(Compression::parse("GZIP"), Some(Some(Compression::Gzip)));
        assert_eq!(Compression::parse("zlib"), Some(Some(Compression::Zlib)));
        assert_eq!(Compression::parse("auto"), Some(None));
        assert_eq!(Compression::parse("lz4"), None);
        assert_eq!(Compression::Gzip.to_string(), "gzip");
    }

    #[test]
    fn a_valid_header_is_plain_whatever_it_looks_like() {
        // A first record of 35589 + 26 = 0x8B1F bytes makes
        // the file begin 1f 8b, the GZIP magic.
        for len in [0x8b1f_u64, 0x0178, 0x9c78] {
            let mut head = super::super::frame::encode_header(len).to_vec();
            head.extend_from_slice(&[b'a'; 52]);
            assert_eq!(
                Detection::detect("f.tfrecord", &head),
                Detection {
                    compression: Compression::None,
                    by: DetectedBy::Header
                },
                "{len:#x}"
            );
        }
    }

    #[test]
    fn a_damaged_first_header_that_looks_like_zlib_stays_plain() {
        // A record of 376 = 0x0178 bytes starts 78 01, a
        // valid ZLIB header; with its length CRC damaged it must not be
        // read as ZLIB.
        let mut head = super::super::frame::encode_header(0x0178).to_vec();
        head[9] ^= 0x40;
        head.extend_from_slice(&[b'a'; 52]);
        let d = Detection::detect("f", &head);
        assert_eq!(
            d,
            Detection {
                compression: Compression::None,
                by: DetectedBy::Default
            }
        );
        assert!(d.is_guess());
        // A real ZLIB or GZIP stream is still recognised by its bytes.
        let z = zlib(&head);
        assert_eq!(
            Detection::detect("f", &z[..DETECT_LEN.min(z.len())]),
            Detection {
                compression: Compression::Zlib,
                by: DetectedBy::Magic
            }
        );
        let g = gzip(&head);
        assert_eq!(Detection::detect("f", &g).compression, Compression::Gzip);
        assert_eq!(Detection::from(Compression::Gzip).by, DetectedBy::Caller);
        assert_eq!(Detection::from(Compression::Gzip).hint(), None);
    }
}
