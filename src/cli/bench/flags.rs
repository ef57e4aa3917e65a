//! The value parsers of `infeed bench`'s flags.

//! Words (`--truncation keep-start`, `--cast int32`, ...) parse by their
//! enum's `FromStr` (`infeed::words`): the same words the Python package
//! takes.

use super::super::convert::parse_size;
use infeed::batch::MaskType;

pub(super) fn parse_mask(s: &str) -> Result<(String, MaskType), String> {
    let (name, kind) = s
        .split_once(':')
        .ok_or("expected FEATURE:TYPE, e.g. input_ids:none")?;
    let kind: MaskType = kind
        .parse()
        .map_err(|e: infeed::words::UnknownWord| e.to_string())?;
    Ok((name.to_owned(), kind))
}

/// `FEATURE:TOKENIZER`: split at the first colon, so the tokenizer may be
/// a URL (`text:gs://bucket/tokenizer.model`).
pub(super) fn parse_tokenize(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            Ok((name.to_owned(), path.to_owned()))
        }
        _ => Err("expected FEATURE:TOKENIZER, e.g. text:tokenizer.json".into()),
    }
}

/// `FEATURE:MIN:MAX`: a length filter's feature and bounds (either bound
/// may be left empty: 0, or no upper bound).
pub(super) fn parse_filter_length(s: &str) -> Result<(String, u64, u64), String> {
    let mut parts = s.rsplitn(3, ':');
    let (Some(max), Some(min), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected FEATURE:MIN:MAX, e.g. input_ids:16:2048 or input_ids:16:".into());
    };
    let bound = |x: &str, none: u64| match x.trim() {
        "" => Ok(none),
        x => x
            .parse::<u64>()
            .map_err(|_| format!("{x:?} is not a whole number")),
    };
    Ok((name.to_owned(), bound(min, 0)?, bound(max, u64::MAX)?))
}

pub(super) fn parse_decode(s: &str) -> Result<(String, Vec<usize>), String> {
    let (name, dims) = s
        .split_once(':')
        .ok_or("expected NAME:D1xD2x…, e.g. image:32x32x3")?;
    let shape = dims
        .split('x')
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| format!("{d:?} is not a whole number"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name.to_owned(), shape))
}

pub(super) fn parse_normalize(s: &str) -> Result<(String, Vec<f32>, Vec<f32>), String> {
    // From the right, so a feature's name may hold a colon.
    let mut parts = s.rsplitn(3, ':');
    let (Some(std), Some(mean), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected NAME:MEAN:STD, e.g. image:127.5:127.5 or \
             image:123.675,116.28,103.53:58.395,57.12,57.375"
            .into());
    };
    let numbers = |list: &str| {
        list.split(',')
            .map(|v| {
                v.trim()
                    .parse::<f32>()
                    .map_err(|_| format!("{v:?} is not a number"))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    if name.is_empty() {
        return Err("expected NAME:MEAN:STD: the feature's name is empty".into());
    }
    Ok((name.to_owned(), numbers(mean)?, numbers(std)?))
}

pub(super) fn parse_mix(s: &str) -> Result<(String, f64, String), String> {
    let mut parts = s.splitn(3, ':');
    let (Some(name), Some(weight), Some(glob)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected NAME:WEIGHT:GLOB, e.g. web:3:data/web-*".into());
    };
    let weight: f64 = weight
        .parse()
        .map_err(|_| format!("weight {weight:?} is not a number"))?;
    Ok((name.to_owned(), weight, glob.to_owned()))
}

/// `STEP:W1,W2,…`: a mixture schedule's point.
pub(super) fn parse_mix_point(s: &str) -> Result<(u64, Vec<f64>), String> {
    let (step, weights) = s
        .split_once(':')
        .ok_or("expected STEP:W1,W2,…, e.g. 1000:1,3")?;
    let step = step
        .trim()
        .parse()
        .map_err(|_| format!("step {step:?} is not a whole number"))?;
    let weights = weights
        .split(',')
        .map(|w| {
            w.trim()
                .parse()
                .map_err(|_| format!("weight {w:?} is not a number"))
        })
        .collect::<Result<_, _>>()?;
    Ok((step, weights))
}

/// `A:B`: the steps A to B - 1.
pub(super) fn parse_step_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once(':').ok_or("expected A:B, e.g. 1200:1300")?;
    let step = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("{x:?} is not a step number"))
    };
    Ok((step(a)?, step(b)?))
}

pub(super) fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s.split_once('/').ok_or("expected INDEX/COUNT, e.g. 0/4")?;
    let parse = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("{x:?} is not a whole number"))
    };
    Ok((parse(i)?, parse(n)?))
}

/// A read size: what `convert --shard-size` takes ([`parse_size`]: K = 1000,
/// KiB = 1024, ...), from 4K to 256 MiB.
pub(super) fn parse_chunk_size(s: &str) -> Result<usize, String> {
    let n = parse_size(s).map_err(|_| format!("{s:?} is not a size (bytes, or with K or M)"))?;
    if !(4_000..=256 << 20).contains(&n) {
        return Err(format!("{s:?}: a chunk size is from 4K to 256M"));
    }
    // At most 256 MiB: fits usize everywhere.
    Ok(n as usize)
}
