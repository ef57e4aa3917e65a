//! Replays the Python side's steps into the Rust builder, with its words.

use std::time::Duration;

use infeed::pipeline::{MixChoice, OnExhausted, ParsedPipeline, Pipeline};
use infeed::record::{Compression, CorruptPolicy, ReadOptions};
use infeed::source::SourceOptions;
use infeed::spec::{DType, DefaultValue, FeatureSpec, ImageSpec};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::errors;

/// One step as the Python side records it: `(name, args)`.
type Step<'py> = (String, Bound<'py, PyTuple>);

/// The pipeline the steps describe, over `files` (or, with `tfds`, over a
/// split of a TFDS directory: `(dir, split)`), resumed from `state`.
///
/// Record-level steps apply to the [`Pipeline`] and the others to the
/// [`ParsedPipeline`], each in the order given (the Rust builder decides
/// the order in which they run, as it does for a Rust caller). Each step
/// name is written once, in one of the two `match`es: the first passes the
/// steps it does not know on to the second, which refuses those it does
/// not know either.
pub fn build(
    py: Python<'_>,
    files: Vec<String>,
    tfds: Option<(String, String)>,
    steps: &Bound<'_, PyList>,
    state: Option<&[u8]>,
) -> PyResult<ParsedPipeline> {
    let steps: Vec<Step<'_>> = steps.extract()?;
    let (mut pipeline, steps) = match steps.split_first() {
        // A mixture: its sources first, each a record-level pipeline.
        Some(((name, args), rest)) if name == "mix" => (mixture(py, args)?, rest),
        _ => (source(py, files, tfds)?, &steps[..]),
    };
    let mut spec = None;
    let mut parsed_steps = Vec::new();
    for (name, args) in steps {
        pipeline = match record_step(py, pipeline, name, args)? {
            Ok(pipeline) => pipeline,
            Err(pipeline) if name == "parse" => {
                spec = Some(feature_spec(py, &args.get_item(0)?)?);
                pipeline
            }
            Err(pipeline) => {
                parsed_steps.push((name, args));
                pipeline
            }
        };
    }
    let spec = spec.ok_or_else(|| {
        errors::spec(
            py,
            "the pipeline has no parse(spec) step: infeed needs a spec to make batches".into(),
        )
    })?;
    let mut parsed = pipeline.parse(spec);
    for (name, args) in parsed_steps {
        parsed = match name.as_str() {
            "batch" => parsed.batch(count(py, args, 0, "batch")?, args.get_item(1)?.extract()?),
            "drop_remainder" => parsed.drop_remainder(args.get_item(0)?.extract()?),
            "pad_to_multiple_of" => {
                parsed.pad_to_multiple_of(count(py, args, 0, "pad_to_multiple_of")?)
            }
            "max_length" => parsed.max_length(count(py, args, 0, "max_length")?),
            "fixed_length" => parsed.fixed_length(count(py, args, 0, "fixed_length")?),
            "truncation" => parsed.truncation(word(py, &args.get_item(0)?.extract::<String>()?)?),
            "masks" => parsed.masks(word(py, &args.get_item(0)?.extract::<String>()?)?),
            "mask" => {
                let feature: String = args.get_item(0)?.extract()?;
                parsed.mask(&feature, word(py, &args.get_item(1)?.extract::<String>()?)?)
            }
            "cast" => parsed.cast(word(py, &args.get_item(0)?.extract::<String>()?)?),
            "decode_raw" => {
                let feature: String = args.get_item(0)?.extract()?;
                let shape: Vec<usize> = counts(py, &args.get_item(1)?, "decode_raw shape")?;
                parsed.decode_raw(&feature, &shape)
            }
            "inputs_targets" => {
                let feature: String = args.get_item(0)?.extract()?;
                parsed.inputs_targets(&feature, args.get_item(1)?.extract()?)
            }
            "normalize" => {
                let feature: String = args.get_item(0)?.extract()?;
                let mean: Vec<f32> = args.get_item(1)?.extract()?;
                let std: Vec<f32> = args.get_item(2)?.extract()?;
                let dtype = word(py, &args.get_item(3)?.extract::<String>()?)?;
                parsed.normalize_to(&feature, &mean, &std, dtype)
            }
            "bucket_by_length" => {
                let feature: String = args.get_item(0)?.extract()?;
                let boundaries: Vec<usize> = counts(py, &args.get_item(1)?, "boundaries")?;
                let batch_sizes: Vec<usize> = counts(py, &args.get_item(2)?, "batch_sizes")?;
                parsed.bucket_by_length(&feature, &boundaries, &batch_sizes)
            }
            "tokenize" => {
                let feature: String = args.get_item(0)?.extract()?;
                let tokenizer: String = args.get_item(1)?.extract()?;
                let add_bos: bool = args.get_item(2)?.extract()?;
                let add_eos: bool = args.get_item(3)?.extract()?;
                parsed.tokenize(&feature, &tokenizer, add_bos, add_eos)
            }
            "pack" => {
                let strategy = word(py, &args.get_item(1)?.extract::<String>()?)?;
                let packed = parsed
                    .pack(count(py, args, 0, "pack")?)
                    .pack_strategy(strategy);
                match args.get_item(2)?.is_none() {
                    true => packed,
                    false => packed.pack_max_segments(count(py, args, 2, "max_segments")?),
                }
            }
            "pack_overflow" => {
                parsed.pack_overflow(word(py, &args.get_item(0)?.extract::<String>()?)?)
            }
            other => return Err(errors::spec(py, format!("unknown pipeline step {other:?}"))),
        };
    }
    Ok(match state {
        Some(state) => parsed.resume_from(state),
        None => parsed,
    })
}

/// The pipeline over `files` (or a TFDS split: `(dir, split)`).
fn source(
    py: Python<'_>,
    files: Vec<String>,
    tfds: Option<(String, String)>,
) -> PyResult<Pipeline> {
    let pipeline = match tfds {
        // The split's record ranges and counts come with it, which a file
        // list cannot carry.
        Some((dir, split)) => py.detach(|| Pipeline::from_tfds(&dir, &split)),
        None => Pipeline::from_files(files),
    };
    pipeline.map_err(|e| errors::to_py(py, e))
}

/// Applies a record-level step; gives the pipeline back untouched
/// (`Err`) when `name` is not one.
fn record_step(
    py: Python<'_>,
    pipeline: Pipeline,
    name: &str,
    args: &Bound<'_, PyTuple>,
) -> PyResult<Result<Pipeline, Pipeline>> {
    Ok(Ok(match name {
        "seed" => pipeline.seed(count(py, args, 0, "seed")?),
        "shard" => pipeline.shard(
            count(py, args, 0, "shard index")?,
            count(py, args, 1, "shard count")?,
        ),
        "streams" => pipeline.streams(count(py, args, 0, "streams")?),
        "shuffle_files" => pipeline.shuffle_files(),
        "interleave" => pipeline.interleave(
            count(py, args, 0, "cycle_length")?,
            count(py, args, 1, "block_length")?,
        ),
        "skip" => pipeline.skip(count(py, args, 0, "skip")?),
        "take" => pipeline.take(count(py, args, 0, "take")?),
        "shuffle" => pipeline.shuffle(count(py, args, 0, "shuffle")?),
        "global_shuffle" => pipeline.global_shuffle(),
        "global_shuffle_blocks" => {
            pipeline.global_shuffle_blocks(count(py, args, 0, "global_shuffle block_bytes")?)
        }
        "index_dir" => pipeline.index_dir(&args.get_item(0)?.extract::<String>()?),
        "worker_reads" => pipeline.worker_reads(),
        "repeat" => {
            let epochs = args.get_item(0)?;
            pipeline.repeat(match epochs.is_none() {
                true => None,
                false => Some(count_of(py, &epochs, "repeat")?),
            })
        }
        "read_options" => pipeline.read_options(read_options(py, args)?),
        "source_options" => pipeline.source_options(source_options(py, args)?),
        "threads" => pipeline.threads(count(py, args, 0, "threads")?),
        "cpu_affinity" => {
            let cores: Vec<usize> = counts(py, &args.get_item(0)?, "cpu_affinity")?;
            pipeline.cpu_affinity(cores)
        }
        "prefetch" => pipeline.prefetch(count(py, args, 0, "prefetch")?),
        "unordered" => pipeline.unordered(),
        "skip_steps" => {
            let ranges: Vec<(u64, u64)> = args.get_item(0)?.extract()?;
            pipeline.skip_steps(&ranges)
        }
        "equal_batches" => {
            let how: String = args.get_item(0)?.extract()?;
            pipeline.equal_batches(word(py, &how)?)
        }
        _ => return Ok(Err(pipeline)),
    }))
}

/// `mix(sources, weights, by, on_exhausted)`, each source `(name, files,
/// steps, tfds)` with record-level steps only.
fn mixture(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Pipeline> {
    type SourceArgs<'py> = (
        String,
        Vec<String>,
        Vec<Step<'py>>,
        Option<(String, String)>,
    );
    let sources: Vec<SourceArgs<'_>> = args.get_item(0)?.extract()?;
    let weights: Vec<f64> = args.get_item(1)?.extract()?;
    let by: String = args.get_item(2)?.extract()?;
    let on_exhausted: String = args.get_item(3)?.extract()?;
    let mut built = Vec::with_capacity(sources.len());
    for (name, files, steps, tfds) in sources {
        let mut pipeline = source(py, files, tfds)?;
        for (step, args) in &steps {
            pipeline = match record_step(py, pipeline, step, args)? {
                Ok(pipeline) => pipeline,
                Err(_) => {
                    return Err(errors::spec(
                        py,
                        format!(
                            "mix: source {name:?} has a {step}() step; a source takes \
                             record-level steps only (parse, padding and batching go on the \
                             mixture)"
                        ),
                    ));
                }
            };
        }
        built.push((name, pipeline));
    }
    let choice: MixChoice = word(py, &by)?;
    let policy: OnExhausted = word(py, &on_exhausted)?;
    let schedule: Vec<(u64, Vec<f64>)> = args.get_item(4)?.extract()?;
    let interpolate: bool = args.get_item(5)?.extract()?;
    let per_step = args.get_item(6)?;
    let mut p = Pipeline::mix(built, &weights)
        .map(|p| p.mix_by(choice).on_exhausted(policy))
        .map_err(|e| errors::to_py(py, e))?;
    if !schedule.is_empty() {
        p = p.mix_schedule(&schedule, interpolate);
    }
    if !per_step.is_none() {
        p = p.mix_records_per_step(count_of(py, &per_step, "records_per_step")?);
    }
    Ok(p.mix_by_tokens(args.get_item(7)?.extract()?))
}

/// `read_options(compression, verify_crc, skip_corrupt, max_record_size, mmap)`.
fn read_options(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<ReadOptions> {
    let compression: Option<String> = args.get_item(0)?.extract()?;
    let mut read = ReadOptions::default()
        .compression(match compression.as_deref() {
            None | Some("auto") => None,
            Some("none") => Some(Compression::None),
            Some("gzip") => Some(Compression::Gzip),
            Some("zlib") => Some(Compression::Zlib),
            Some(other) => {
                return Err(errors::spec(
                    py,
                    format!("compression {other:?}: expected auto, none, gzip or zlib"),
                ));
            }
        })
        .verify_crc(args.get_item(1)?.extract()?)
        .mmap(args.get_item(4)?.extract()?);
    if args.get_item(2)?.extract()? {
        read.on_corrupt = CorruptPolicy::Skip;
    }
    if let Some(max) = args.get_item(3)?.extract::<Option<u64>>()? {
        read.max_record_size = max;
    }
    Ok(read)
}

/// `source_options(max_retries, retry_timeout, request_timeout,
/// retry_backoff, max_backoff, chunk_size, readahead, retry_unknown_errors)`,
/// each `None` for its default; times in seconds.
fn source_options(py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<SourceOptions> {
    let seconds = |i: usize, name: &str| -> PyResult<Option<Duration>> {
        match args.get_item(i)?.extract::<Option<f64>>()? {
            None => Ok(None),
            Some(s) => Duration::try_from_secs_f64(s).map(Some).map_err(|_| {
                errors::spec(
                    py,
                    format!("source_options: {name} must be finite seconds >= 0, got {s}"),
                )
            }),
        }
    };
    let mut opts = SourceOptions::default();
    if let Some(n) = args.get_item(0)?.extract::<Option<u32>>()? {
        opts = opts.max_retries(n);
    }
    if let Some(d) = seconds(1, "retry_timeout")? {
        opts = opts.retry_timeout(d);
    }
    if let Some(d) = seconds(2, "request_timeout")? {
        opts = opts.request_timeout(d);
    }
    let first = seconds(3, "retry_backoff")?.unwrap_or(opts.retry_backoff);
    let max = seconds(4, "max_backoff")?.unwrap_or(opts.max_backoff);
    opts = opts.backoff(first, max);
    if let Some(n) = args.get_item(5)?.extract::<Option<usize>>()? {
        opts = opts.chunk_size(n.max(1));
    }
    if let Some(n) = args.get_item(6)?.extract::<Option<usize>>()? {
        opts = opts.readahead(n.max(1));
    }
    if let Some(retry) = args.get_item(7)?.extract::<Option<bool>>()? {
        opts = opts.retry_unknown_errors(retry);
    }
    Ok(opts)
}

/// A spec string (`name:var_len:int64,…`, as the CLI takes) or a list of
/// `(name, kind, dtype, shape, default)` from the Python spec classes (an
/// image: `(name, "image", "image[H,W,C]:MODE", [], None)`).
pub(crate) fn feature_spec(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<FeatureSpec> {
    if let Ok(text) = spec.cast::<PyString>() {
        return text
            .to_str()?
            .parse::<FeatureSpec>()
            .map_err(|e| errors::spec_at(py, e.to_string(), Some(e.item)));
    }
    type Entry<'py> = (
        String,
        String,
        String,
        Vec<usize>,
        Option<Bound<'py, PyAny>>,
    );
    let entries: Vec<Entry<'_>> = spec.extract()?;
    if entries.is_empty() {
        return Err(errors::spec(py, "the spec has no features".into()));
    }
    let mut out = FeatureSpec::new();
    for (name, kind, dtype_name, shape, default) in entries {
        let bad = |message: String| errors::spec_at(py, message, Some(name.clone()));
        if kind == "image" {
            // The image's text form (`image[H,W,C]:MODE`) rides in the dtype slot.
            let image: ImageSpec = dtype_name
                .parse()
                .map_err(|e: String| bad(format!("feature {name:?}: {e}")))?;
            out = out.image(name.as_str(), image);
            continue;
        }
        let dtype: DType = dtype_name
            .parse()
            .map_err(|e: String| bad(format!("feature {name:?}: {e}")))?;
        out = match (kind.as_str(), default) {
            ("var_len", _) => out.var_len(name.as_str(), dtype),
            ("fixed_len", None) => out.fixed_len(name.as_str(), dtype, &shape),
            ("fixed_len", Some(default)) => {
                let values = match dtype {
                    DType::Int64 | DType::Int32 => DefaultValue::Int64(default.extract()?),
                    DType::Float32 => DefaultValue::Float32(default.extract()?),
                    DType::Bytes => DefaultValue::Bytes(default.extract()?),
                };
                out.fixed_len_with_default(name.as_str(), dtype, &shape, values)
                    .map_err(|e| bad(e.to_string()))?
            }
            (other, _) => return Err(bad(format!("feature kind {other:?}"))),
        };
    }
    Ok(out)
}

/// Argument `i`, a count or a size: a whole number from 0 to 2^64 - 1 (and
/// to `T`'s largest). A negative number, or one too large, is a
/// `SpecError` naming the setting; what is no integer stays a `TypeError`.
fn count<T: TryFrom<u64>>(
    py: Python<'_>,
    args: &Bound<'_, PyTuple>,
    i: usize,
    setting: &str,
) -> PyResult<T> {
    count_of(py, &args.get_item(i)?, setting)
}

/// [`count`] of one value.
fn count_of<T: TryFrom<u64>>(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
    setting: &str,
) -> PyResult<T> {
    let too_large = || errors::spec(py, format!("{setting}: {value} is too large"));
    match value.extract::<u64>() {
        Ok(n) => T::try_from(n).map_err(|_| too_large()),
        Err(e) if !value.is_instance_of::<pyo3::types::PyInt>() => Err(e),
        Err(_) if value.lt(0)? => Err(errors::spec(
            py,
            format!("{setting}: {value} is negative; it takes a whole number >= 0"),
        )),
        Err(_) => Err(too_large()),
    }
}

/// [`count_of`] of every value of a list.
fn counts<T: TryFrom<u64>>(
    py: Python<'_>,
    list: &Bound<'_, PyAny>,
    setting: &str,
) -> PyResult<Vec<T>> {
    list.try_iter()?
        .map(|v| count_of(py, &v?, setting))
        .collect()
}

/// A setting given as a word, parsed by its enum's `FromStr` (the words
/// of `infeed::words`, the same as the command line's); an unknown word is
/// a `SpecError` that lists the words.
fn word<T: std::str::FromStr<Err = infeed::words::UnknownWord>>(
    py: Python<'_>,
    name: &str,
) -> PyResult<T> {
    name.parse()
        .map_err(|e: infeed::words::UnknownWord| errors::spec(py, e.to_string()))
}
