//! Which format an encoded image is in, from its first bytes: a declared
//! format (a file name, a feature name) is never trusted.

use std::fmt;

/// An encoded image's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Png,
    Jpeg,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Png => "PNG",
            Format::Jpeg => "JPEG",
        })
    }
}

/// The PNG signature (PNG spec, 5.2).
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// The format `data` starts like, if PNG or JPEG (SOI marker followed by
/// the start of another marker).
pub fn sniff(data: &[u8]) -> Option<Format> {
    if data.starts_with(&PNG_SIGNATURE) {
        Some(Format::Png)
    } else if data.starts_with(&[0xff, 0xd8, 0xff]) {
        Some(Format::Jpeg)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_by_signature_only() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), Some(Format::Png));
        assert_eq!(sniff(&[0xff, 0xd8, 0xff, 0xe0, 0, 16]), Some(Format::Jpeg));
        // A truncated signature, a GIF, text and nothing are not images.
        assert_eq!(sniff(b"\x89PNG\r\n"), None);
        assert_eq!(sniff(&[0xff, 0xd8]), None);
        assert_eq!(sniff(b"GIF89a"), None);
        assert_eq!(sniff(b"image.jpg"), None);
        assert_eq!(sniff(b""), None);
    }
}
