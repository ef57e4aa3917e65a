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
