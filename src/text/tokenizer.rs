//! [`Tokenizer`]: a `tokenizer.json` or a SentencePiece `.model`, loaded
//! once and shared by the workers; text in, int32 token ids out.

use std::io::Read;

use xxhash_rust::xxh3::xxh3_64;

use super::error::TokenizerError;
use crate::source::{SourceOptions, open_blocking};

/// Largest tokenizer file read: real ones are a few MB (Llama 3's
/// `tokenizer.json` 9 MB, Gemma's `.model` 4 MB); a larger file is a wrong
/// path, refused before it fills memory.
pub const MAX_TOKENIZER_BYTES: u64 = 256 << 20;

/// Which library a tokenizer file is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// A Hugging Face `tokenizer.json` (a JSON object).
    HuggingFace,
    /// A SentencePiece model (a serialized `ModelProto`).
    SentencePiece,
}

impl TokenizerKind {
    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            TokenizerKind::HuggingFace => "Hugging Face tokenizer.json",
            TokenizerKind::SentencePiece => "SentencePiece model",
        }
    }

    /// What a file is: a `tokenizer.json` is a JSON object, so its first
    /// byte that is not white space is `{`; a SentencePiece model is a
    /// protobuf, whose first byte is a field key (`0x0a`, its pieces).
    fn of(bytes: &[u8]) -> Self {
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => TokenizerKind::HuggingFace,
            _ => TokenizerKind::SentencePiece,
        }
    }
}

/// The library's tokenizer (none in a build with neither feature: loading
/// is then refused, so no value exists).
enum Model {
    #[cfg(feature = "tokenize")]
    HuggingFace(Box<tokenizers::Tokenizer>),
    #[cfg(feature = "sentencepiece")]
    SentencePiece(super::sentencepiece::SentencePiece),
}

/// A loaded tokenizer: [`encode`](Self::encode) gives the ids the Python
/// `tokenizers` package (`encode(text, add_special_tokens=False)`) or
/// `sentencepiece` package (`encode(text)`) gives, with the
/// beginning- and end-of-sequence tokens added where asked.
pub struct Tokenizer {
    path: String,
    digest: u64,
    kind: TokenizerKind,
    model: Model,
    bos: Vec<i32>,
    eos: Vec<i32>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("digest", &format_args!("{:016x}", self.digest))
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish()
    }
}

impl Tokenizer {
    /// Reads and loads the tokenizer at `path` (local, or gs://, s3://,
    /// az:// through `source`).
    pub fn load(path: &str, source: &SourceOptions) -> Result<Self, TokenizerError> {
        let reader = open_blocking(path, source).map_err(|source| TokenizerError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut bytes = Vec::new();
        reader
            .take(MAX_TOKENIZER_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| TokenizerError::Io {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        if bytes.len() as u64 > MAX_TOKENIZER_BYTES {
            return Err(TokenizerError::TooLarge {
                path: path.to_owned(),
                max: MAX_TOKENIZER_BYTES,
            });
        }
        Self::from_bytes(path, &bytes)
    }

    /// Loads a tokenizer from the bytes of its file (`path`: for messages).
    pub fn from_bytes(path: &str, bytes: &[u8]) -> Result<Self, TokenizerError> {
        let kind = TokenizerKind::of(bytes);
        let (model, bos, eos) = load_model(path, kind, bytes)?;
        let ids = |ids: Vec<u32>| -> Result<Vec<i32>, TokenizerError> {
            ids.into_iter()
                .map(|id| {
                    i32::try_from(id).map_err(|_| TokenizerError::IdTooLarge {
                        path: path.to_owned(),
                        id: id.into(),
                    })
                })
                .collect()
        };
        let tokenizer = Tokenizer {
            path: path.to_owned(),
            digest: xxh3_64(bytes),
            kind,
            model,
            bos: ids(bos)?,
            eos: ids(eos)?,
        };
        let vocab = tokenizer.vocab_size();
        if vocab > i32::MAX as usize {
            return Err(TokenizerError::IdTooLarge {
                path: path.to_owned(),
                id: vocab as u64,
            });
        }
        Ok(tokenizer)
    }

    /// The path or URL it was read from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// XXH3-64 of the file's bytes: the same tokenizer wherever it lies
    /// (the checkpoint's fingerprint holds it).
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Which library it is for.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }

    /// The beginning-of-sequence ids `add_bos` adds: a SentencePiece
    /// model's `bos_id`; the tokens a `tokenizer.json`'s post-processor puts
    /// before a sequence. Empty when there is none.
    pub fn bos(&self) -> &[i32] {
        &self.bos
    }

    /// The end-of-sequence ids `add_eos` adds (as [`bos`](Self::bos), after
    /// the sequence).
    pub fn eos(&self) -> &[i32] {
        &self.eos
    }

    /// Ids in the vocabulary (added tokens included).
    pub fn vocab_size(&self) -> usize {
        match &self.model {
            #[cfg(feature = "tokenize")]
            Model::HuggingFace(t) => t.get_vocab_size(true),
            #[cfg(feature = "sentencepiece")]
            Model::SentencePiece(sp) => sp.len(),
            #[cfg(not(any(feature = "tokenize", feature = "sentencepiece")))]
            _ => 0,
        }
    }

    /// Refuses `add_bos` / `add_eos` where the tokenizer has no such token.
    pub fn check_special(&self, add_bos: bool, add_eos: bool) -> Result<(), TokenizerError> {
        let how = match self.kind {
            TokenizerKind::HuggingFace => "its post-processor adds none",
            TokenizerKind::SentencePiece => "the model's id for it is -1",
        };
        let missing = |which, short| TokenizerError::NoSpecialToken {
            path: self.path.clone(),
            which,
            short,
            how,
        };
        if add_bos && self.bos.is_empty() {
            return Err(missing("beginning-of-sequence", "bos"));
        }
        if add_eos && self.eos.is_empty() {
            return Err(missing("end-of-sequence", "eos"));
        }
        Ok(())
    }

    /// Appends the ids of `text` to `out`, after [`bos`](Self::bos) with
    /// `add_bos` and before [`eos`](Self::eos) with `add_eos`.
    pub fn encode(
        &self,
        text: &str,
        add_bos: bool,
        add_eos: bool,
        out: &mut Vec<i32>,
    ) -> Result<(), String> {
        if add_bos {
            out.extend_from_slice(&self.bos);
        }
        // Ids fit i32: the vocabulary was checked at load.
        match &self.model {
            #[cfg(feature = "tokenize")]
            Model::HuggingFace(t) => {
                let encoding = t.encode_fast(text, false).map_err(|e| e.to_string())?;
                out.extend(encoding.get_ids().iter().map(|&id| id as i32));
            }
            #[cfg(feature = "sentencepiece")]
            Model::SentencePiece(sp) => sp.encode(text, out)?,
            #[cfg(not(any(feature = "tokenize", feature = "sentencepiece")))]
            _ => {
                let _ = text;
            }
        }
        if add_eos {
            out.extend_from_slice(&self.eos);
        }
        Ok(())
    }
}

/// The library's tokenizer for `bytes`, with its bos and eos ids.
fn load_model(
    path: &str,
    kind: TokenizerKind,
    bytes: &[u8],
) -> Result<(Model, Vec<u32>, Vec<u32>), TokenizerError> {
    let load = |message: String| TokenizerError::Load {
        path: path.to_owned(),
        kind: kind.name(),
        message,
    };
    let _ = (&load, bytes);
    match kind {
        #[cfg(feature = "tokenize")]
        TokenizerKind::HuggingFace => {
            let mut t =
                tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| load(e.to_string()))?;
            // Truncation and padding would change the ids; a file may carry them.
            t.with_truncation(None).map_err(|e| load(e.to_string()))?;
            t.with_padding(None);
            let (bos, eos) = special_around(&t).map_err(load)?;
            Ok((Model::HuggingFace(Box::new(t)), bos, eos))
        }
        #[cfg(feature = "sentencepiece")]
        TokenizerKind::SentencePiece => {
            let sp = super::sentencepiece::SentencePiece::load(bytes).map_err(load)?;
            let (bos, eos) = (sp.bos(), sp.eos());
            Ok((
                Model::SentencePiece(sp),
                bos.into_iter().collect(),
                eos.into_iter().collect(),
            ))
        }
        #[allow(unreachable_patterns)]
        _ => Err(TokenizerError::Unsupported {
            path: path.to_owned(),
            kind: kind.name(),
            feature: match kind {
                TokenizerKind::HuggingFace => "tokenize",
                TokenizerKind::SentencePiece => "sentencepiece",
            },
        }),
    }
}

/// The ids a `tokenizer.json`'s post-processor puts before and after a
/// sequence: what encoding a text with special tokens adds around its ids
/// without (whatever the post-processor: a template, BERT's, RoBERTa's).
#[cfg(feature = "tokenize")]
fn special_around(t: &tokenizers::Tokenizer) -> Result<(Vec<u32>, Vec<u32>), String> {
    let plain = t.encode_fast("a", false).map_err(|e| e.to_string())?;
    let with = t.encode_fast("a", true).map_err(|e| e.to_string())?;
    let (plain, with) = (plain.get_ids(), with.get_ids());
    let at = (0..=with.len().saturating_sub(plain.len()))
        .find(|&i| with.get(i..i + plain.len()) == Some(plain));
    Ok(match at {
        Some(i) => (with[..i].to_vec(), with[i + plain.len()..].to_vec()),
        None => (Vec::new(), Vec::new()),
    })
}

#[cfg(all(test, feature = "tokenize"))]
mod tests {
    use super::*;

    fn testdata(name: &str) -> Vec<u8> {
        let path = format!("{}/testdata/tokenizer/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(path).unwrap()
    }

    #[test]
    fn a_tokenizer_json_takes_bos_and_eos_from_its_template() {
        let t = Tokenizer::from_bytes("tokenizer.json", &testdata("tokenizer.json")).unwrap();
        assert_eq!(t.kind(), TokenizerKind::HuggingFace);
        // <s> $A </s>: ids 1 and 2.
        assert_eq!((t.bos(), t.eos()), (&[1][..], &[2][..]));
        let mut plain = Vec::new();
        t.encode("hello world", false, false, &mut plain).unwrap();
        let mut both = Vec::new();
        t.encode("hello world", true, true, &mut both).unwrap();
        assert_eq!(both, [&[1][..], &plain, &[2]].concat());
        assert!(!plain.is_empty());
    }

    #[test]
    fn bad_files_are_refused_by_name() {
        let e = Tokenizer::from_bytes("x/tokenizer.json", b"{\"not\": 1}").unwrap_err();
        assert!(
            matches!(&e, TokenizerError::Load { path, kind, .. }
                if path == "x/tokenizer.json" && *kind == "Hugging Face tokenizer.json"),
            "{e:?}"
        );
    }
}
