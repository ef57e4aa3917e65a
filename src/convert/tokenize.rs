//! Tokenization with a Hugging Face `tokenizer.json` (the `tokenizers`
//! crate, pure Rust: `fancy-regex` instead of Oniguruma).
//!
//! Like `tokenizer(texts)` in the Hugging Face TPU example, each text is
//! encoded with the tokenizer's special tokens (its post-processor), giving
//! `input_ids` and `attention_mask`. `--max-length` truncates as
//! `truncation=True, max_length=LEN` does (special tokens kept); `--group-to`
//! concatenates the tokens of a block of records and cuts chunks of exactly
//! LEN, dropping the remainder of each block, as the example's `group_texts`
//! does with `map(batched=True, batch_size=1000)`.

use std::path::Path;

#[cfg(feature = "tokenize")]
use tokenizers::Tokenizer;
#[cfg(feature = "tokenize")]
use tokenizers::utils::truncation::TruncationParams;

use super::error::ConvertError;

/// What to do with the token ids of each record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenMode {
    /// Every record's ids, whole.
    Full,
    /// At most this many ids per record.
    Truncate(usize),
    /// Concatenate the ids of each block of `block` records and cut chunks of `len`.
    Group {
        /// Ids per output record.
        len: usize,
        /// Input records per block.
        block: u64,
    },
}

/// Tokenization settings: [`TokenizeOptions::new`] and the setters
/// (`#[non_exhaustive]`; the fields stay public).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TokenizeOptions {
    /// The `tokenizer.json` file.
    pub tokenizer: std::path::PathBuf,
    /// The input column holding the text.
    pub text_column: String,
    /// Whole, truncated or grouped.
    pub mode: TokenMode,
    /// Add the tokenizer's special tokens (default true, like Hugging Face).
    pub add_special_tokens: bool,
}

impl TokenizeOptions {
    /// Tokenize with the `tokenizer.json` at `tokenizer`: the column `text`,
    /// whole, with the tokenizer's special tokens.
    pub fn new(tokenizer: impl Into<std::path::PathBuf>) -> Self {
        TokenizeOptions {
            tokenizer: tokenizer.into(),
            text_column: "text".into(),
            mode: TokenMode::Full,
            add_special_tokens: true,
        }
    }

    /// Sets [`text_column`](Self::text_column): the input column holding
    /// the text.
    pub fn text_column(mut self, column: impl Into<String>) -> Self {
        self.text_column = column.into();
        self
    }

    /// Sets [`mode`](Self::mode): whole, truncated or grouped.
    pub fn mode(mut self, mode: TokenMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets [`add_special_tokens`](Self::add_special_tokens).
    pub fn add_special_tokens(mut self, add: bool) -> Self {
        self.add_special_tokens = add;
        self
    }
}

/// A loaded tokenizer, shared by the worker threads.
#[cfg(feature = "tokenize")]
pub(crate) struct Tok {
    tokenizer: Tokenizer,
    add_special: bool,
}

#[cfg(feature = "tokenize")]
impl Tok {
    pub(super) fn load(
        path: &Path,
        mode: TokenMode,
        add_special: bool,
    ) -> Result<Tok, ConvertError> {
        let err = |message: String| ConvertError::Tokenizer {
            path: path.display().to_string(),
            message,
        };
        let mut tokenizer = Tokenizer::from_file(path).map_err(|e| err(e.to_string()))?;
        if let TokenMode::Truncate(max_length) = mode {
            tokenizer
                .with_truncation(Some(TruncationParams {
                    max_length,
                    ..TruncationParams::default()
                }))
                .map_err(|e| err(e.to_string()))?;
        } else {
            tokenizer
                .with_truncation(None)
                .map_err(|e| err(e.to_string()))?;
        }
        // Padding would change the values; a tokenizer.json may carry it.
        tokenizer.with_padding(None);
        Ok(Tok {
            tokenizer,
            add_special,
        })
    }

    /// Appends the ids and attention mask of `text`.
    pub(super) fn encode(
        &self,
        text: &str,
        ids: &mut Vec<i64>,
        mask: &mut Vec<i64>,
    ) -> Result<(), String> {
        let encoding = self
            .tokenizer
            .encode_fast(text, self.add_special)
            .map_err(|e| e.to_string())?;
        ids.extend(encoding.get_ids().iter().map(|&i| i64::from(i)));
        mask.extend(encoding.get_attention_mask().iter().map(|&m| i64::from(m)));
        Ok(())
    }
}

/// Without the `tokenize` feature a tokenizer cannot be loaded: the error
/// says so (nothing is ever encoded with it).
#[cfg(not(feature = "tokenize"))]
pub(crate) enum Tok {}

#[cfg(not(feature = "tokenize"))]
impl Tok {
    pub fn load(path: &Path, _: TokenMode, _: bool) -> Result<Tok, ConvertError> {
        Err(ConvertError::Tokenizer {
            path: path.display().to_string(),
            message: "this build of infeed has no tokenizer (the `tokenize` feature)".into(),
        })
    }

    pub fn encode(&self, _: &str, _: &mut Vec<i64>, _: &mut Vec<i64>) -> Result<(), String> {
        match *self {}
    }
}
