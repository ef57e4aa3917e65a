//! Split strings as TFDS reads them (`train`, `train[:80%]`, `test[-1000:]`,
//! `train[2shard]`, `train[:50%]+test`, `all`), turned into the records of
//! each shard to read.
//!
//! The grammar, the rounding and the bounds follow `tfds.core.ReadInstruction`
//! (tensorflow_datasets/core/splits.py of TFDS 4.9): a percentage is rounded
//! to the closest record with Python's `round` (half to even); a slice selects
//! records by their index across the split's shards in shard order.

use super::error::TfdsError;
use super::info::SplitInfo;

/// The records of one shard that a split string selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSlice {
    /// Index of the split in the dataset's list.
    pub split: usize,
    /// The shard's index in its split.
    pub shard: usize,
    /// The first record taken (its index in the shard) and how many.
    pub first: u64,
    pub count: u64,
    /// The shard's records in all (`first == 0 && count == records`: the
    /// whole shard).
    pub records: u64,
}

impl ShardSlice {
    /// True when the whole shard is read.
    pub fn is_whole(&self) -> bool {
        self.first == 0 && self.count == self.records
    }
}

/// A slice boundary: a record count, a percentage or a shard count.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Abs,
    Percent,
    Shard,
}

/// One `name[from:to]` of a split string.
#[derive(Clone, Debug, PartialEq)]
struct Instruction {
    split: String,
    from: Option<f64>,
    to: Option<f64>,
    unit: Unit,
}

/// The shards' records that `spec` selects from `splits`, in the order of
/// its `+` terms, each term's shards in shard order. `dir` names the
/// dataset in errors.
pub fn resolve(spec: &str, splits: &[SplitInfo], dir: &str) -> Result<Vec<ShardSlice>, TfdsError> {
    let bad = |reason: String| TfdsError::BadSplit {
        spec: spec.to_owned(),
        reason,
    };
    let mut out = Vec::new();
    for term in split_terms(spec) {
        let instructions = if term == "all" {
            splits
                .iter()
                .map(|s| Instruction {
                    split: s.name.clone(),
                    from: None,
                    to: None,
                    unit: Unit::Abs,
                })
                .collect()
        } else {
            vec![parse_term(term).map_err(bad)?]
        };
        for instruction in instructions {
            let Some(index) = splits.iter().position(|s| s.name == instruction.split) else {
                return Err(TfdsError::UnknownSplit {
                    dir: dir.to_owned(),
                    split: instruction.split,
                    available: splits.iter().map(|s| s.name.clone()).collect(),
                });
            };
            let (from, to) = absolute(&instruction, &splits[index]).map_err(bad)?;
            out.extend(shard_slices(index, &splits[index], from, to));
        }
    }
    if out.is_empty() {
        return Err(TfdsError::EmptySlice {
            dir: dir.to_owned(),
            spec: spec.to_owned(),
        });
    }
    Ok(out)
}

/// The `+`-separated terms, whitespace around each `+` dropped (and none
/// elsewhere, as TFDS does).
fn split_terms(spec: &str) -> Vec<&str> {
    let last = spec.matches('+').count();
    spec.split('+')
        .enumerate()
        .map(|(i, t)| {
            let t = if i > 0 { t.trim_start() } else { t };
            if i < last { t.trim_end() } else { t }
        })
        .collect()
}

/// `name` or `name[selector]`.
fn parse_term(term: &str) -> Result<Instruction, String> {
    let unrecognized = || format!("unrecognized split format {term:?}");
    let (name, selector) = match term.find('[') {
        None => (term, None),
        Some(open) => {
            let inner = term[open + 1..]
                .strip_suffix(']')
                .ok_or_else(unrecognized)?;
            (&term[..open], Some(inner))
        }
    };
    let word = |c: char| c.is_alphanumeric() || c == '_';
    if name.is_empty() || !name.chars().all(|c| word(c) || c == '-') {
        return Err(unrecognized());
    }
    let Some(selector) = selector else {
        return Ok(Instruction {
            split: name.to_owned(),
            from: None,
            to: None,
            unit: Unit::Abs,
        });
    };
    if name == "all" {
        return Err("the split \"all\" cannot be sliced".into());
    }
    if selector.is_empty()
        || !selector
            .chars()
            .all(|c| word(c) || matches!(c, '%' | ':' | '.' | '-'))
    {
        return Err(unrecognized());
    }
    let parts: Vec<Option<(&str, Option<Unit>)>> = selector
        .split(':')
        .map(boundary)
        .collect::<Result<_, _>>()
        .map_err(|()| unrecognized())?;
    if parts.iter().all(Option::is_none) {
        return Err(unrecognized());
    }
    let (from, to, unit) = match parts[..] {
        // `train[2shard]`: one shard; TFDS takes no single record or percent.
        [Some((value, unit))] => {
            if unit != Some(Unit::Shard) {
                return Err("a single index is only for shards (`train[2shard]`); \
                            records and percentages take slices (`train[2:3]`)"
                    .into());
            }
            let from = int(value).ok_or_else(unrecognized)?;
            (Some(from as f64), Some((from + 1) as f64), Unit::Shard)
        }
        [from, to] => {
            let unit = from
                .and_then(|f| f.1)
                .or(to.and_then(|t| t.1))
                .unwrap_or(Unit::Abs);
            let value = |part: Option<(&str, Option<Unit>)>| -> Result<Option<f64>, String> {
                match part {
                    None => Ok(None),
                    Some((v, _)) if unit == Unit::Percent => {
                        number(v).map(Some).ok_or_else(unrecognized)
                    }
                    Some((v, _)) => int(v).map(|i| Some(i as f64)).ok_or_else(unrecognized),
                }
            };
            (value(from)?, value(to)?, unit)
        }
        _ => return Err(unrecognized()),
    };
    if unit == Unit::Percent
        && (from.unwrap_or(0.0).abs() > 100.0 || to.unwrap_or(0.0).abs() > 100.0)
    {
        return Err("percent slice boundaries must be in [-100, 100]".into());
    }
    Ok(Instruction {
        split: name.to_owned(),
        from,
        to,
        unit,
    })
}

/// One side of a `:`: empty, or a value with an optional unit
/// (`-?[\d_.]+(%|shard)?`).
fn boundary(part: &str) -> Result<Option<(&str, Option<Unit>)>, ()> {
    if part.is_empty() {
        return Ok(None);
    }
    let (value, unit) = if let Some(v) = part.strip_suffix('%') {
        (v, Some(Unit::Percent))
    } else if let Some(v) = part.strip_suffix("shard") {
        (v, Some(Unit::Shard))
    } else {
        (part, None)
    };
    let digits = value.strip_prefix('-').unwrap_or(value);
    if digits.is_empty()
        || !digits
            .chars()
            .all(|c| c.is_ascii_digit() || c == '_' || c == '.')
    {
        return Err(());
    }
    Ok(Some((value, unit)))
}

/// The text without its digit separators, if they sit between digits (as
/// Python's `int` and `float` accept them).
fn without_underscores(v: &str) -> Option<String> {
    let b = v.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'_' {
            let before = i > 0 && b[i - 1].is_ascii_digit();
            let after = b.get(i + 1).is_some_and(u8::is_ascii_digit);
            if !(before && after) {
                return None;
            }
        }
    }
    Some(v.replace('_', ""))
}

/// Python's `int(v)` on this text.
fn int(v: &str) -> Option<i64> {
    without_underscores(v)?.parse().ok()
}

/// Python's `float(v)` on this text.
fn number(v: &str) -> Option<f64> {
    let v = without_underscores(v)?;
    let digits = v.strip_prefix('-').unwrap_or(&v);
    if !digits.bytes().any(|c| c.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// The absolute `[from, to)` records of the split an instruction selects.
fn absolute(i: &Instruction, split: &SplitInfo) -> Result<(u64, u64), String> {
    let n = split.num_examples() as i64;
    let (from, to) = match i.unit {
        Unit::Percent => (
            i.from.map_or(0, |b| percent(b, n)),
            i.to.map_or(n, |b| percent(b, n)),
        ),
        Unit::Shard => {
            let shards = split.shard_lengths.len() as i64;
            let before = |k: i64| -> i64 {
                // Python's `sum(shard_lengths[:k])`.
                let k = if k < 0 {
                    (shards + k).max(0)
                } else {
                    k.min(shards)
                };
                split.shard_lengths[..k as usize].iter().sum::<u64>() as i64
            };
            let from = i.from.map_or(0, |f| before(f as i64));
            let to = match i.to.map(|t| t as i64) {
                None => n,
                Some(t) if t <= 0 => before(shards + t),
                Some(t) => before(t),
            };
            (from, to)
        }
        Unit::Abs => (i.from.map_or(0, |f| f as i64), i.to.map_or(n, |t| t as i64)),
    };
    if from.abs() > n || to.abs() > n {
        return Err(format!(
            "slice [{from}:{to}] of split {:?} is out of its {n} records",
            i.split
        ));
    }
    let from = if from < 0 { from + n } else { from };
    let to = if to < 0 { to + n } else { to };
    Ok((from as u64, to as u64))
}

/// TFDS's "closest" rounding: `int(round(boundary * n / 100.0))`.
fn percent(boundary: f64, n: i64) -> i64 {
    (boundary * n as f64 / 100.0).round_ties_even() as i64
}

/// The records `[from, to)` of a split, shard by shard (empty shards and
/// shards outside the range left out).
fn shard_slices(split: usize, info: &SplitInfo, from: u64, to: u64) -> Vec<ShardSlice> {
    let mut out = Vec::new();
    let mut start = 0u64;
    for (shard, &records) in info.shard_lengths.iter().enumerate() {
        let end = start + records;
        if records > 0 && from < end && to > start {
            let first = from.saturating_sub(start);
            let last = to.min(end) - start;
            if last > first {
                out.push(ShardSlice {
                    split,
                    shard,
                    first,
                    count: last - first,
                    records,
                });
            }
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splits() -> Vec<SplitInfo> {
        let split = |name: &str, lengths: &[u64]| SplitInfo {
            name: name.into(),
            shard_lengths: lengths.to_vec(),
            num_bytes: 0,
            template: super::super::info::DEFAULT_TEMPLATE.into(),
        };
        vec![split("train", &[4, 0, 3, 3]), split("test", &[5])]
    }

    /// (split, shard, first, count) of each slice.
    fn picks(spec: &str) -> Vec<(usize, usize, u64, u64)> {
        resolve(spec, &splits(), "d")
            .unwrap_or_else(|e| panic!("{spec}: {e}"))
            .iter()
            .map(|s| (s.split, s.shard, s.first, s.count))
            .collect()
    }

    /// The global record indexes a spec selects, per split, to compare with
    /// TFDS: `list(range(n))[from:to]` as `_rel_to_abs_instr` computes it.
    fn indexes(spec: &str) -> Vec<(usize, u64)> {
        let s = splits();
        let mut out = Vec::new();
        for slice in resolve(spec, &s, "d").unwrap() {
            let start: u64 = s[slice.split].shard_lengths[..slice.shard].iter().sum();
            out.extend((slice.first..slice.first + slice.count).map(|i| (slice.split, start + i)));
        }
        out
    }

    fn range(split: usize, r: std::ops::Range<u64>) -> Vec<(usize, u64)> {
        r.map(|i| (split, i)).collect()
    }

    /// Expected values are those of `tfds.core.ReadInstruction.from_spec(spec)
    /// .to_absolute(...)` on splits of these lengths (train: 10 records in
    /// shards of 4, 0, 3, 3; test: 5), computed with TFDS 4.9.10.
    #[test]
    fn slices_match_tfds() {
        let cases: &[(&str, Vec<(usize, u64)>)] = &[
            ("train", range(0, 0..10)),
            ("train[:80%]", range(0, 0..8)),
            ("train[10%:]", range(0, 1..10)),
            ("train[:3]", range(0, 0..3)),
            ("train[-3:]", range(0, 7..10)),
            ("train[-3:-1]", range(0, 7..9)),
            ("train[:25%]", range(0, 0..2)), // 2.5 rounds to even: 2
            ("train[:35%]", range(0, 0..4)), // 3.5 → 4
            ("train[33.3%:66.6%]", range(0, 3..7)),
            ("train[1_0%:]", range(0, 1..10)),
            ("train[1shard:]", range(0, 4..10)),
            ("train[2shard]", range(0, 4..7)),
            ("train[-1shard]", range(0, 7..10)),
            ("train[:-1shard]", range(0, 0..7)),
            ("train[:0shard]", range(0, 0..10)),
            ("train[20:50%]", range(0, 2..5)), // the unit of one side is both's
            (
                "test[:40%]+train[-2:]",
                [range(1, 0..2), range(0, 8..10)].concat(),
            ),
            (
                "train[:50%] + test",
                [range(0, 0..5), range(1, 0..5)].concat(),
            ),
            ("all", [range(0, 0..10), range(1, 0..5)].concat()),
            (
                "train[:2]+train[:2]",
                [range(0, 0..2), range(0, 0..2)].concat(),
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(&indexes(spec), want, "{spec}");
        }
    }

    #[test]
    fn a_slice_reads_whole_shards_whole_and_leaves_out_the_rest() {
        // train: shards 0..4, 4..4 (empty), 4..7, 7..10.
        assert_eq!(
            picks("train[3:8]"),
            [(0, 0, 3, 1), (0, 2, 0, 3), (0, 3, 0, 1)]
        );
        let s = resolve("train[4:7]", &splits(), "d").unwrap();
        assert_eq!(s.len(), 1);
        assert!(s[0].is_whole());
        assert!(!resolve("train[4:6]", &splits(), "d").unwrap()[0].is_whole());
    }

    #[test]
    fn bad_strings_and_bounds_are_errors_naming_them() {
        for spec in [
            "",
            "train[",
            "train[]",
            "train[:]",
            "train[1:2:3]",
            "train[3]",
            "train[5%]",
            "train[a:]",
            "train[_1:]",
            "train[1__0:]",
            "train[1.5:]",
            " train",
            "train[1:2]x",
            "all[:5]",
            "train[:101%]",
            "train[:11]",
            "train[-11:]",
            "train[.:]",
        ] {
            let err = resolve(spec, &splits(), "d").unwrap_err();
            assert!(
                matches!(&err, TfdsError::BadSplit { spec: s, .. } if s == spec),
                "{spec:?}: {err:?}"
            );
        }
        let err = resolve("validation[:10%]", &splits(), "/data/tiny/1.0.0").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/data/tiny/1.0.0: no split \"validation\"; the dataset has splits \"train\", \"test\""
        );
        for spec in [
            "train[5:5]",
            "train[6:2]",
            "train[4:4]+test[:0%]",
            "train[:-1%]",
            "train[2:5%]",
        ] {
            assert!(
                matches!(
                    resolve(spec, &splits(), "d"),
                    Err(TfdsError::EmptySlice { .. })
                ),
                "{spec}"
            );
        }
    }
}
