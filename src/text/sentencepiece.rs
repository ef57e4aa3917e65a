//! A SentencePiece model through the C++ library itself
//! (`sentencepiece-sys`, built from its vendored source), so that ids are
//! exactly the Python `sentencepiece` package's.
//!
//! Why not the `sentencepiece` crate's `encode`: it decodes each
//! encoding's serialized proto into a `String` per piece, which cost half
//! the tokens per second of the pipeline (measured: 2.3 M tokens/s on one
//! core against the Python package's 4.4 M with the unigram model of
//! testdata/tokenizer). Here the same C entry point's proto is scanned for
//! the ids alone, with no allocation per token.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::NonNull;

use sentencepiece_sys as sys;

unsafe extern "C" {
    /// The C library's `free`, for the buffers the C entry points
    /// `malloc`.
    fn free(ptr: *mut c_void);
}

/// A loaded SentencePiece model.
pub(super) struct SentencePiece {
    spp: NonNull<sys::SentencePieceProcessor>,
}

// SAFETY: SentencePiece's processor is immutable once loaded; its encode is
// a const method that many threads may call at once (the Python package
// and the C++ library's own multi-threaded trainer rely on it).
unsafe impl Send for SentencePiece {}
// SAFETY: as above.
unsafe impl Sync for SentencePiece {}

impl Drop for SentencePiece {
    fn drop(&mut self) {
        // SAFETY: `spp` came from `spp_new` and is freed once, here.
        unsafe { sys::spp_free(self.spp.as_ptr()) }
    }
}

impl SentencePiece {
    /// The model in `bytes` (a serialized `ModelProto`), or the library's
    /// status code when it refuses them.
    pub(super) fn load(bytes: &[u8]) -> Result<Self, String> {
        // SAFETY: `spp_new` returns a new processor or null.
        let spp =
            NonNull::new(unsafe { sys::spp_new() }).ok_or_else(|| "out of memory".to_owned())?;
        let model = SentencePiece { spp };
        // SAFETY: `bytes` is valid for its length; the processor is ours.
        let status = unsafe {
            sys::spp_from_serialized_proto(
                model.spp.as_ptr(),
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        };
        if status != 0 {
            return Err(format!(
                "SentencePiece status {status} ({})",
                status_name(status)
            ));
        }
        Ok(model)
    }

    fn id(&self, f: unsafe extern "C" fn(*mut sys::SentencePieceProcessor) -> c_int) -> c_int {
        // SAFETY: the processor is loaded and lives as long as `self`.
        unsafe { f(self.spp.as_ptr()) }
    }

    /// The beginning-of-sequence id, when the model has one.
    pub(super) fn bos(&self) -> Option<u32> {
        u32::try_from(self.id(sys::spp_bos_id)).ok()
    }

    /// The end-of-sequence id, when the model has one.
    pub(super) fn eos(&self) -> Option<u32> {
        u32::try_from(self.id(sys::spp_eos_id)).ok()
    }

    /// Pieces in the vocabulary.
    pub(super) fn len(&self) -> usize {
        usize::try_from(self.id(sys::spp_piece_size)).unwrap_or(0)
    }

    /// Appends the ids of `text` (`encode(text)` in Python) to `out`.
    pub(super) fn encode(&self, text: &str, out: &mut Vec<i32>) -> Result<(), String> {
        let mut len = 0usize;
        // SAFETY: `text` is valid for its length; the processor is loaded.
        // The result is a `malloc`ed buffer of `len` bytes (or null), ours
        // to free.
        let data = unsafe {
            sys::spp_encode_as_serialized_proto(
                self.spp.as_ptr(),
                text.as_ptr().cast::<c_char>(),
                text.len(),
                &mut len,
            )
        };
        if data.is_null() {
            return Err("SentencePiece returned no encoding".into());
        }
        // SAFETY: `data` holds `len` initialized bytes until freed below.
        let proto = unsafe { std::slice::from_raw_parts(data, len) };
        let scanned = piece_ids(proto, out);
        // SAFETY: `data` was `malloc`ed by the library and is not used after.
        unsafe { free(data.cast::<c_void>()) };
        scanned.ok_or_else(|| "SentencePiece returned a malformed encoding".into())
    }
}

/// Names of the library's status codes (absl's).
fn status_name(code: c_int) -> &'static str {
    match code {
        3 => "invalid argument: not a SentencePiece model",
        5 => "not found",
        13 => "internal",
        _ => "error",
    }
}

/// Reads a varint at `*at`.
fn varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Skips a field of wire type `wire` at `*at`.
fn skip(buf: &[u8], wire: u64, at: &mut usize) -> Option<()> {
    match wire {
        0 => varint(buf, at).map(drop),
        1 => (*at + 8 <= buf.len()).then(|| *at += 8),
        2 => {
            let n = usize::try_from(varint(buf, at)?).ok()?;
            (n <= buf.len() - *at).then(|| *at += n)
        }
        5 => (*at + 4 <= buf.len()).then(|| *at += 4),
        _ => None,
    }
}

/// Appends the id of each piece of a serialized `SentencePieceText`
/// (`pieces` = field 2, each a `SentencePiece` whose `id` is field 2) to
/// `out`; `None` for bytes that are not one.
fn piece_ids(buf: &[u8], out: &mut Vec<i32>) -> Option<()> {
    let mut at = 0;
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        if key != (2 << 3 | 2) {
            skip(buf, key & 7, &mut at)?;
            continue;
        }
        let n = usize::try_from(varint(buf, &mut at)?).ok()?;
        let piece = buf.get(at..at.checked_add(n)?)?;
        at += n;
        let mut p = 0;
        let mut id = None;
        while p < piece.len() {
            let key = varint(piece, &mut p)?;
            if key == (2 << 3) {
                id = Some(i32::try_from(varint(piece, &mut p)?).ok()?);
            } else {
                skip(piece, key & 7, &mut p)?;
            }
        }
        // proto3 leaves out a zero id.
        out.push(id.unwrap_or(0));
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testdata(name: &str) -> Vec<u8> {
        let path = format!("{}/testdata/tokenizer/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(path).unwrap()
    }

    /// testdata/tokenizer/expected-spm.jsonl: each text, and for each model
    /// the Python package's `encode(text, add_bos=True, add_eos=True)`.
    fn expected() -> Vec<(String, serde_json::Value)> {
        String::from_utf8(testdata("expected-spm.jsonl"))
            .unwrap()
            .lines()
            .map(|line| {
                let row: serde_json::Value = serde_json::from_str(line).unwrap();
                (row["text"].as_str().unwrap().to_owned(), row)
            })
            .collect()
    }

    /// The package's ids for `model` in `row`, without its bos and eos.
    fn package_ids(row: &serde_json::Value, model: &str) -> Vec<i32> {
        let ids: Vec<i32> = row[model]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| i32::try_from(id.as_i64().unwrap()).unwrap())
            .collect();
        assert_eq!((ids[0], ids[ids.len() - 1]), (1, 2), "{model}: bos, eos");
        ids[1..ids.len() - 1].to_vec()
    }

    #[test]
    fn every_expected_text_gets_the_sentencepiece_packages_ids() {
        let rows = expected();
        assert!(rows.len() > 40, "{} rows", rows.len());
        for model in ["spm-unigram", "spm-bpe", "spm-runs"] {
            let sp = SentencePiece::load(&testdata(&format!("{model}.model"))).unwrap();
            assert_eq!((sp.bos(), sp.eos()), (Some(1), Some(2)));
            for (text, row) in &rows {
                let mut ids = Vec::new();
                sp.encode(text, &mut ids).unwrap();
                assert_eq!(ids, package_ids(row, model), "{model}: {text:?}");
            }
        }
    }

    #[test]
    fn a_run_of_one_character_splits_as_the_packages_both_ways() {
        // spm-runs has `w` and `ww`: `www` is `w ww` or `ww w`, the same
        // total score; which one wins is decided by the float sums of the
        // scores before the run, so it depends on the text before it: the
        // package splits `('www.python.org'` alone one way and after a
        // prefix the other, and so do we.
        let sp = SentencePiece::load(&testdata("spm-runs.model")).unwrap();
        let id = |piece: &str| {
            let piece = std::ffi::CString::new(piece).unwrap();
            // SAFETY: the processor is loaded; `piece` is a C string.
            unsafe { sys::spp_piece_to_id(sp.spp.as_ptr(), piece.as_ptr()) }
        };
        let (w, ww) = (id("w"), id("ww"));
        assert!(w > 2 && ww > 2, "{w} {ww}");
        let (mut w_ww, mut ww_w) = (0, 0);
        for (_, row) in expected() {
            let want = package_ids(&row, "spm-runs");
            w_ww += want.windows(2).filter(|p| *p == [w, ww]).count();
            ww_w += want.windows(2).filter(|p| *p == [ww, w]).count();
        }
        // The expected texts draw the tie both ways (the test above checks
        // every text's ids).
        assert!(w_ww > 0 && ww_w > 0, "w ww: {w_ww}, ww w: {ww_w}");
        let pair = |text: &str| {
            let mut ids = Vec::new();
            sp.encode(text, &mut ids).unwrap();
            ids.windows(2)
                .find(|p| p.contains(&w) && p.contains(&ww))
                .map(<[i32]>::to_vec)
        };
        assert_eq!(pair("('www.python.org'"), Some(vec![ww, w]));
        assert_eq!(pair("See ('www.python.org', 80)"), Some(vec![w, ww]));
    }

    #[test]
    fn piece_ids_reads_each_pieces_id_and_refuses_broken_bytes() {
        // text "ab"; pieces {piece "a", id 7, surface "a"}, {piece "b"} (id 0,
        // left out); score 1.0.
        let mut buf = vec![0x0a, 2, b'a', b'b'];
        buf.extend_from_slice(&[0x12, 8, 0x0a, 1, b'a', 0x10, 7, 0x1a, 1, b'a']);
        buf.extend_from_slice(&[0x12, 3, 0x0a, 1, b'b']);
        buf.extend_from_slice(&[0x1d, 0, 0, 0x80, 0x3f]);
        let mut out = vec![1];
        assert_eq!(piece_ids(&buf, &mut out), Some(()));
        assert_eq!(out, [1, 7, 0]);
        assert_eq!(piece_ids(&buf[..buf.len() - 2], &mut out), None);
        assert_eq!(piece_ids(&[0x12, 9, 0x10], &mut out), None);
    }
}
