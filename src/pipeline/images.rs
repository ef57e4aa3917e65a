//! Image features decoded on the workers (feature `images`): after the
//! parse (and the parsed ops, which see the encoded bytes), each image
//! column's values are replaced by their pixels, `H × W × C` bytes per
//! record, which the batch plan's raw decode lays out as `[B, H, W, C]` u8.
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

use std::cell::RefCell;
use std::sync::Arc;

use crate::example::{BytesValues, Column, ParsedBatch, Values};
use crate::image::{Decoder, ImageError};
use crate::spec::{FeatureSpec, ImageSpec};

use super::error::PipelineError;
use super::group::raw_batch::RawBatch;
use super::parsed::select_rows;
use super::rng::{CounterRng, domain};
use super::stats::StageStats;

thread_local! {
    /// Each worker's decoder (its JPEG handle and scratch buffers).
    static DECODER: RefCell<Decoder> = RefCell::new(Decoder::new());
    /// The rows the last `apply` on this worker left out, for the batch's
    /// provenance (`take_left_out`): a group is decoded and assembled on
    /// one worker in one call, so this is that group's.
    static LEFT_OUT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The rows the last image decoding on this thread left out under the skip
/// policy (sorted), and forgets them.
pub(crate) fn take_left_out() -> Vec<usize> {
    LEFT_OUT.with_borrow_mut(std::mem::take)
}

/// The image features of a spec and the seed of their crops.
#[derive(Clone, Debug)]
pub(crate) struct ImageStage {
    images: Vec<(String, ImageSpec)>,
    seed: u64,
    /// Under the skip policy: where a skipped record is counted.
    skips: Option<Arc<StageStats>>,
}

impl ImageStage {
    /// The stage for `spec`'s images; `None` when it has none. With
    /// `skips`, a record whose image does not decode is skipped and
    /// counted there; without, it is an error.
    pub(crate) fn new(
        spec: &FeatureSpec,
        seed: u64,
        skips: Option<Arc<StageStats>>,
    ) -> Option<Self> {
        (!spec.images().is_empty()).then(|| ImageStage {
            images: spec.images().to_vec(),
            seed,
            skips,
        })
    }

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

    /// Replaces each image column of `parsed` by the decoded pixels (and,
    /// under the skip policy, leaves out the records whose image does not
    /// decode).
    pub(crate) fn apply(
        &self,
        raw: &RawBatch,
        parsed: &mut ParsedBatch,
    ) -> Result<(), PipelineError> {
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
}
