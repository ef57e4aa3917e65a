//! Image features decoded on the workers (feature `images`): a step on
//! parsed batches (`ParsedStep`, in the stage `Stage::Decoded`) made
//! from the spec's image features, not from a builder word. After the parse
//! (and the column steps, which see the encoded bytes), each image column's
//! values are replaced by their pixels, `H × W × C` bytes per record, which
//! the batch plan's raw decode lays out as `[B, H, W, C]` u8.
//!
//! A record's random crop and flip come from its own generator on the
//! `IMAGE` stream, seeded by the pipeline seed, the batch's number in the
//! run and the record's place: its file's name and its byte offset. Not its
//! row or its file's index, which depend on how many hosts share the job's
//! logical streams: so the same pixels at any thread count, after a
//! restore (batches keep their numbers) and on any host count. (A record
//! twice in one batch, across an epoch boundary, gets the same crop twice.)
//!
//! A corrupt image is a [`PipelineError::Image`] naming its file, offset and
//! feature; under the skip policy (`CorruptPolicy::Skip`) its record is
//! left out of the batch instead, counted as a skipped record of the
//! workers' stage and logged: the rows after it move up and the batch keeps
//! its static shape, one more padding row at its end (`real_rows`).
//!
//! A build without the feature has no decoders: it refuses a spec with
//! images when the pipeline starts ([`step`]).

use std::sync::Arc;

use crate::spec::FeatureSpec;

use super::error::PipelineError;
use super::parsed::Step;
use super::stats::StageStats;

#[cfg(feature = "images")]
use {
    super::group::raw_batch::RawBatch,
    super::parsed::{ParsedStep, Stage, select_rows},
    super::rng::{CounterRng, domain},
    crate::example::{BytesValues, Column, ParsedBatch, Values},
    crate::image::{Decoder, ImageError},
    crate::spec::ImageSpec,
    std::cell::RefCell,
};

/// The step that decodes `spec`'s images, its crops seeded by `seed`;
/// `None` when it has none. With `skips`, a record whose image does not
/// decode is skipped and counted there; without, it is an error.
#[cfg(feature = "images")]
pub(crate) fn step(
    spec: &FeatureSpec,
    seed: u64,
    skips: Option<Arc<StageStats>>,
) -> Result<Option<Step>, PipelineError> {
    Ok((!spec.images().is_empty()).then(|| {
        Arc::new(ImageStep {
            images: spec.images().to_vec(),
            seed,
            skips,
        }) as Step
    }))
}

/// Without the `images` feature a spec with images cannot run.
#[cfg(not(feature = "images"))]
pub(crate) fn step(
    spec: &FeatureSpec,
    _seed: u64,
    _skips: Option<Arc<StageStats>>,
) -> Result<Option<Step>, PipelineError> {
    match spec.images().first() {
        Some((name, _)) => Err(PipelineError::Config(format!(
            "feature {name:?} is an image: this build of infeed has no image \
             decoders (cargo feature `images`)"
        ))),
        None => Ok(None),
    }
}

#[cfg(feature = "images")]
thread_local! {
    /// Each worker's decoder (its JPEG handle and scratch buffers).
    static DECODER: RefCell<Decoder> = RefCell::new(Decoder::new());
    /// The rows the last `decode` on this worker left out, for the batch's
    /// provenance (`take_left_out`): a group is decoded and assembled on
    /// one worker in one call, so this is that group's.
    static LEFT_OUT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The image features of a spec and the seed of their crops.
#[cfg(feature = "images")]
struct ImageStep {
    images: Vec<(String, ImageSpec)>,
    seed: u64,
    /// Under the skip policy: where a skipped record is counted.
    skips: Option<Arc<StageStats>>,
}

#[cfg(feature = "images")]
impl ImageStep {
    /// The generator of record `row` of `raw`.
    fn rng(&self, raw: &RawBatch, row: usize) -> CounterRng {
        let (path, offset) = raw.origin(row);
        // The file's name, not its folder (mounted elsewhere on other hosts).
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&self.seed.to_le_bytes());
        key[8..16].copy_from_slice(&raw.number.to_le_bytes());
        key[16..24].copy_from_slice(&xxhash_rust::xxh3::xxh3_64(name.as_bytes()).to_le_bytes());
        key[24..].copy_from_slice(&offset.to_le_bytes());
        CounterRng::new(xxhash_rust::xxh3::xxh3_64(&key), domain::IMAGE, 0)
    }
}

#[cfg(feature = "images")]
impl ParsedStep for ImageStep {
    fn stage(&self) -> Stage {
        Stage::Decoded
    }

    /// Replaces each image column of `parsed` by the decoded pixels (and,
    /// under the skip policy, leaves out the records whose image does not
    /// decode).
    fn decode(&self, raw: &RawBatch, parsed: &mut ParsedBatch) -> Result<(), PipelineError> {
        // Rows left out under the skip policy, in order.
        let mut skipped: Vec<usize> = Vec::new();
        for (name, spec) in &self.images {
            let Some((_, column)) = parsed.columns.iter_mut().find(|(n, _)| n == name) else {
                continue;
            };
            let Column::Dense {
                values: Values::Bytes(values),
                ..
            } = column
            else {
                continue;
            };
            let size = spec.height * spec.width * spec.channels;
            let rows = parsed.num_records;
            let mut pixels = BytesValues {
                data: vec![0u8; size * rows],
                offsets: (0..=rows).map(|r| r * size).collect(),
            };
            let fail = |row: usize, error: ImageError| {
                let (path, offset) = raw.origin(row);
                PipelineError::Image {
                    path: path.to_owned(),
                    offset,
                    at: None,
                    feature: name.clone(),
                    error,
                }
            };
            if values.len() != rows {
                let count = values.len();
                return Err(fail(0, ImageError::ValueCount { count }));
            }
            DECODER.with_borrow_mut(|decoder| {
                for (row, out) in pixels.data.chunks_exact_mut(size).enumerate() {
                    if skipped.binary_search(&row).is_ok() {
                        continue;
                    }
                    let data = values.get(row);
                    let mut rng = self.rng(raw, row);
                    let Err(e) = decoder.decode_into(data, spec, &mut || rng.next_u64(), out)
                    else {
                        continue;
                    };
                    let error = fail(row, e);
                    let Some(skips) = &self.skips else {
                        return Err(error);
                    };
                    tracing::warn!(error = %error, "infeed: skipping a record whose image does not decode");
                    skips.add_skipped(1, data.len() as u64);
                    crate::pipeline::accounting::leave_out_here();
                    let at = skipped.partition_point(|&r| r < row);
                    skipped.insert(at, row);
                }
                Ok::<(), PipelineError>(())
            })?;
            *values = pixels;
        }
        if !skipped.is_empty() {
            let kept: Vec<usize> = (0..parsed.num_records)
                .filter(|r| skipped.binary_search(r).is_err())
                .collect();
            *parsed = select_rows(parsed, &kept);
        }
        LEFT_OUT.with_borrow_mut(|left_out| *left_out = skipped);
        Ok(())
    }

    fn take_left_out(&self) -> Vec<usize> {
        LEFT_OUT.with_borrow_mut(std::mem::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DType;
    #[cfg(feature = "images")]
    use {crate::pipeline::item::Item, bytes::Bytes};

    #[cfg(feature = "images")]
    fn png_1x1(rgb: [u8; 3]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, 1, 1);
        encoder.set_color(png::ColorType::Rgb);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(&rgb).unwrap();
        writer.finish().unwrap();
        out
    }

    /// Three records at offsets 0, 100 and 200 of `dir/a.tfrecord`, their
    /// `img` column holding `images`.
    #[cfg(feature = "images")]
    fn group(images: &[&[u8]]) -> (RawBatch, ParsedBatch) {
        let items = (0..images.len() as u64)
            .map(|i| Item::new(Bytes::new(), 0, i * 100))
            .collect();
        let mut raw = RawBatch::chunk(items, Arc::new(vec!["dir/a.tfrecord".to_owned()]));
        raw.starts = images.len();
        let parsed = ParsedBatch {
            num_records: images.len(),
            columns: vec![(
                "img".into(),
                Column::Dense {
                    shape: vec![images.len()],
                    values: Values::Bytes(images.iter().copied().collect()),
                },
            )],
        };
        (raw, parsed)
    }

    #[cfg(feature = "images")]
    #[test]
    fn the_spec_s_images_make_a_decoding_step_that_leaves_spec_and_fingerprint_alone() {
        let plain = FeatureSpec::new().var_len("ids", DType::Int64);
        assert!(step(&plain, 7, None).unwrap().is_none());
        let spec = plain.image("img", ImageSpec::new(2, 2, 3));
        let step = step(&spec, 7, None).unwrap().unwrap();
        assert_eq!(step.stage(), Stage::Decoded);
        let mut id = crate::pipeline::checkpoint::Identity::default();
        step.identity(&mut id);
        assert_eq!(
            id.fingerprint(),
            crate::pipeline::checkpoint::Identity::default().fingerprint()
        );
        assert_eq!(step.slot(), None);
        assert!(!step.maps() && step.filter().is_none());
        assert_eq!(step.out_spec(spec.clone()).unwrap(), spec);
        assert_eq!(step.take_left_out(), Vec::<usize>::new());
    }

    #[cfg(feature = "images")]
    #[test]
    fn under_the_skip_policy_a_bad_image_s_row_is_left_out_counted_and_told_once() {
        let spec = FeatureSpec::new().image("img", ImageSpec::new(1, 1, 3));
        let (red, blue) = (png_1x1([255, 0, 0]), png_1x1([0, 0, 255]));
        let (raw, mut parsed) = group(&[&red, b"not an image", &blue]);
        let skips = Arc::new(StageStats::default());
        let skipping = step(&spec, 7, Some(skips.clone())).unwrap().unwrap();
        skipping.decode(&raw, &mut parsed).unwrap();
        assert_eq!(parsed.num_records, 2);
        let Some(Column::Dense {
            values: Values::Bytes(pixels),
            ..
        }) = parsed.get("img")
        else {
            panic!("no pixels: {parsed:?}");
        };
        assert_eq!(
            (pixels.get(0), pixels.get(1)),
            (&[255, 0, 0][..], &[0, 0, 255][..])
        );
        let figures = skips.figures();
        assert_eq!((figures.skipped_records, figures.skipped_bytes), (1, 12));
        assert_eq!(skipping.take_left_out(), [1]);
        assert_eq!(skipping.take_left_out(), Vec::<usize>::new());

        // Without the policy the same record is an error naming it.
        let (raw, mut parsed) = group(&[&red, b"not an image", &blue]);
        let strict = step(&spec, 7, None).unwrap().unwrap();
        match strict.decode(&raw, &mut parsed) {
            Err(PipelineError::Image {
                path,
                offset,
                feature,
                ..
            }) => assert_eq!(
                (path.as_str(), offset, feature.as_str()),
                ("dir/a.tfrecord", 100, "img")
            ),
            other => panic!("not an image error: {other:?}"),
        }
    }

    #[cfg(not(feature = "images"))]
    #[test]
    fn a_build_without_decoders_refuses_a_spec_with_images() {
        let plain = FeatureSpec::new().var_len("ids", DType::Int64);
        assert!(step(&plain, 7, None).unwrap().is_none());
        let spec = plain.image("img", crate::spec::ImageSpec::new(2, 2, 3));
        let error = step(&spec, 7, None).err().unwrap();
        assert_eq!(
            error.to_string(),
            "invalid pipeline: feature \"img\" is an image: this build of infeed has no \
             image decoders (cargo feature `images`)"
        );
    }
}
