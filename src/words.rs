//! Settings given as words — by the command line, the Python package, a
//! config file — parsed in one place: each enum's `FromStr` (beside the
//! enum) reads its words from one table here, so every face accepts the
//! same words with the same spelling (`keep_start`; `keep-start` too, the
//! command line's habit) and refuses others with the same error, which
//! lists them.

use std::fmt;

/// A word that names no value of a setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownWord {
    /// The setting (`truncation`, `cast`, ...).
    pub setting: &'static str,
    /// The word given.
    pub given: String,
    /// The words it takes.
    pub expected: Vec<&'static str>,
}

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}: expected ", self.setting, self.given)?;
        let n = self.expected.len();
        for (i, word) in self.expected.iter().enumerate() {
            let sep = match i {
                0 => "",
                _ if i + 1 == n => " or ",
                _ => ", ",
            };
            write!(f, "{sep}{word}")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownWord {}

/// One value of a setting and the words that name it (the first is the
/// one the error lists).
pub(crate) type Word<T> = (&'static [&'static str], T);

/// A setting whose values are named by words: its table, read by its
/// `FromStr` ([`read`]), written by [`word`] (the first word of a value's
/// entry), and by serde as that word ([`as_word`]), so a pipeline's
/// description holds the words every face takes.
pub(crate) trait Words: Copy + PartialEq + Sized + 'static {
    /// The setting's name in an error (`truncation`, `dtype`, ...).
    const SETTING: &'static str;
    /// Each value and its words, the first the one written.
    const WORDS: &'static [Word<Self>];
}

/// The value `given` names, for a [`Words`] setting.
pub(crate) fn read<T: Words>(given: &str) -> Result<T, UnknownWord> {
    parse(T::SETTING, given, T::WORDS)
}

/// The word that names `value` (every table lists every value; a test of
/// each checks that it reads back).
pub(crate) fn word<T: Words>(value: T) -> &'static str {
    let found = T::WORDS.iter().find(|(_, v)| *v == value);
    debug_assert!(found.is_some(), "{}: a value without a word", T::SETTING);
    found.map_or("", |(words, _)| words[0])
}

/// serde's form of a [`Words`] setting: its word
/// (`#[serde(with = "crate::words::as_word")]`).
pub(crate) mod as_word {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use super::{Words, read, word};

    pub fn serialize<T: Words, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(word(*value))
    }

    pub fn deserialize<'de, T: Words, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let given = String::deserialize(d)?;
        read(&given).map_err(D::Error::custom)
    }
}

/// The value `given` names in `table`, for `setting`. A hyphen is read as
/// an underscore.
pub(crate) fn parse<T: Copy>(
    setting: &'static str,
    given: &str,
    table: &[Word<T>],
) -> Result<T, UnknownWord> {
    let word = given.trim().replace('-', "_");
    table
        .iter()
        .find(|(words, _)| words.contains(&word.as_str()))
        .map(|&(_, value)| value)
        .ok_or_else(|| UnknownWord {
            setting,
            given: given.to_owned(),
            expected: table.iter().map(|(words, _)| words[0]).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of `T` is written as a word that reads back as it.
    fn reads_back<T: Words + std::fmt::Debug>() {
        for &(words, value) in T::WORDS {
            assert_eq!(word(value), words[0]);
            assert_eq!(read::<T>(word(value)), Ok(value), "{}", T::SETTING);
        }
    }

    #[test]
    fn every_settings_words_read_back() {
        use crate::batch::{MaskType, Overflow, PackStrategy, TensorType, Truncation};
        use crate::pipeline::{EqualBatches, MixChoice, OnExhausted};
        reads_back::<TensorType>();
        reads_back::<MaskType>();
        reads_back::<Truncation>();
        reads_back::<Overflow>();
        reads_back::<PackStrategy>();
        reads_back::<EqualBatches>();
        reads_back::<MixChoice>();
        reads_back::<OnExhausted>();
        reads_back::<crate::record::CorruptPolicy>();
    }

    #[test]
    fn words_with_hyphens_or_underscores_and_the_error_lists_the_words() {
        const TABLE: &[Word<u8>] = &[(&["keep_start", "start"], 1), (&["error"], 2), (&["x"], 3)];
        assert_eq!(parse("s", "keep-start", TABLE), Ok(1));
        assert_eq!(parse("s", "keep_start", TABLE), Ok(1));
        assert_eq!(parse("s", "start", TABLE), Ok(1));
        let err = parse("truncation", "keep", TABLE).unwrap_err();
        assert_eq!(
            err.to_string(),
            "truncation \"keep\": expected keep_start, error or x"
        );
    }
}
