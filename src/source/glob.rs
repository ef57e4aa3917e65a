//! Shell-style wildcards within one path segment: `*` (any run of characters),
//! `?` (one character), `[abc]`, `[a-z]`, `[!a-z]` / `[^a-z]`. No wildcard
//! matches `/`: each pattern segment matches one path segment, so a glob is
//! resolved one directory level at a time and never walks a whole bucket.

/// Whether `s` holds a wildcard character.
pub(crate) fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The part of a segment before its first wildcard: the literal prefix a
/// listing can be narrowed to.
pub(crate) fn literal_prefix(segment: &str) -> &str {
    match segment.find(['*', '?', '[']) {
        Some(i) => &segment[..i],
        None => segment,
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Char(char),
    Any,
    Star,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A compiled one-segment pattern.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pattern {
    tokens: Vec<Token>,
}

impl Pattern {
    /// Compiles one path segment. Errors: `**` (recursive globs are not
    /// supported: they would walk everything below), an unclosed `[`, an empty
    /// class, or a reversed range.
    pub fn new(segment: &str) -> Result<Pattern, String> {
        let mut tokens = Vec::new();
        let mut chars = segment.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' => {
                    if chars.peek() == Some(&'*') {
                        return Err(
                            "'**' (recursive glob) is not supported: name each level with '*'"
                                .into(),
                        );
                    }
                    tokens.push(Token::Star);
                }
                '?' => tokens.push(Token::Any),
                '[' => {
                    let negated = matches!(chars.peek(), Some('!' | '^'));
                    if negated {
                        chars.next();
                    }
                    let mut ranges = Vec::new();
                    let mut first = true;
                    loop {
                        let Some(lo) = chars.next() else {
                            return Err(format!("unclosed '[' in {segment:?}"));
                        };
                        // A ']' right after '[' (or '[!') is a literal member.
                        if lo == ']' && !first {
                            break;
                        }
                        first = false;
                        let mut hi = lo;
                        if chars.peek() == Some(&'-') {
                            let mut ahead = chars.clone();
                            ahead.next();
                            match ahead.peek() {
                                Some(&h) if h != ']' => {
                                    chars.next();
                                    chars.next();
                                    hi = h;
                                }
                                _ => {}
                            }
                        }
                        if hi < lo {
                            return Err(format!("reversed range {lo}-{hi} in {segment:?}"));
                        }
                        ranges.push((lo, hi));
                    }
                    tokens.push(Token::Class { negated, ranges });
                }
                c => tokens.push(Token::Char(c)),
            }
        }
        Ok(Pattern { tokens })
    }

    /// Whether `name` (one path segment) matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        let (mut t, mut n) = (0usize, 0usize);
        // Where to resume after the last star: (token after it, name position).
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            let c = name[n];
            match self.tokens.get(t) {
                Some(Token::Star) => {
                    star = Some((t + 1, n));
                    t += 1;
                    continue;
                }
                Some(tok) if c != '/' && token_matches(tok, c) => {
                    t += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            // Mismatch: let the last star swallow one more character.
            match star {
                Some((after, from)) if name[from] != '/' => {
                    star = Some((after, from + 1));
                    t = after;
                    n = from + 1;
                }
                _ => return false,
            }
        }
        self.tokens[t.min(self.tokens.len())..]
            .iter()
            .all(|tok| *tok == Token::Star)
    }
}

fn token_matches(tok: &Token, c: char) -> bool {
    match tok {
        Token::Char(x) => *x == c,
        Token::Any => true,
        Token::Star => true,
        Token::Class { negated, ranges } => {
            ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(p: &str, s: &str) -> bool {
        Pattern::new(p).expect("pattern").matches(s)
    }

    #[test]
    fn wildcards() {
        assert!(m("train-*.tfrecord", "train-00001.tfrecord"));
        assert!(m("train-*.tfrecord", "train-.tfrecord"));
        assert!(!m("train-*.tfrecord", "train-00001.tfrecord.gz"));
        assert!(m("*", ""));
        assert!(m("*", "abc"));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(!m("a*b*c", "aXbYbZ"));
        assert!(m("?", "x"));
        assert!(!m("?", ""));
        assert!(!m("?", "xy"));
        assert!(m("part-?[0-9]", "part-a7"));
        assert!(!m("part-?[0-9]", "part-ab"));
        assert!(m("[!a]", "b"));
        assert!(m("[^a]", "b"));
        assert!(!m("[!a]", "a"));
        assert!(m("[]]", "]"));
        assert!(m("[a-]", "-"));
        assert!(m("x[a-c]y", "xby"));
        assert!(!m("x[a-c]y", "xdy"));
        assert!(m("é*", "été"));
        assert!(!m("*", "a/b"), "no wildcard matches '/'");
        assert!(!m("a?b", "a/b"));
    }

    #[test]
    fn bad_patterns() {
        assert!(Pattern::new("**").unwrap_err().contains("recursive"));
        assert!(Pattern::new("a[bc").unwrap_err().contains("unclosed"));
        assert!(Pattern::new("[z-a]").unwrap_err().contains("reversed"));
    }

    #[test]
    fn prefixes() {
        assert_eq!(literal_prefix("train-*.tfrecord"), "train-");
        assert_eq!(literal_prefix("[ab]x"), "");
        assert_eq!(literal_prefix("plain"), "plain");
        assert!(has_wildcard("a?"));
        assert!(!has_wildcard("a.b"));
    }

    /// A slow, obviously right matcher (recursive) to compare against.
    fn reference(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|i| reference(rest, &s[i..])),
            Some(('?', rest)) => !s.is_empty() && reference(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && reference(rest, &s[1..]),
        }
    }

    proptest! {
        #[test]
        fn star_and_any_agree_with_reference(p in "[ab*?]{0,8}", s in "[ab]{0,10}") {
            prop_assume!(!p.contains("**"));
            let pc: Vec<char> = p.chars().collect();
            let sc: Vec<char> = s.chars().collect();
            prop_assert_eq!(m(&p, &s), reference(&pc, &sc));
        }
    }
}
