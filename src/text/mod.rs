//! Text: tokenizers the pipeline runs on the workers
//! ([`ParsedPipeline::tokenize`](crate::pipeline::ParsedPipeline::tokenize)).
//!
//! A [`Tokenizer`] is a Hugging Face `tokenizer.json` (the `tokenizers`
//! crate, feature `tokenize`) or a SentencePiece `.model` (the C++ library
//! through `sentencepiece-sys`, feature `sentencepiece`), read from a
//! local path or gs://, s3://, az://; which one a file is, its bytes say.
//! Its ids are the ids the Python `tokenizers` and `sentencepiece`
//! packages give for the same text (`python/tests/test_tokenize.py`).

mod error;
#[cfg(feature = "sentencepiece")]
mod sentencepiece;
mod tokenizer;

pub use error::TokenizerError;
pub use tokenizer::{MAX_TOKENIZER_BYTES, Tokenizer, TokenizerKind};
