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

use std::cell::RefCell;

use crate::example::{BytesValues, Column, ParsedBatch, Values};
use crate::image::{Decoder, ImageError};
use crate::spec::{FeatureSpec, ImageSpec};

use super::error::PipelineError;
use super::group::plan::RawBatch;
use super::rng::{CounterRng, stream};

thread_local! {
    /// Each worker's decoder (its JPEG handle and scratch buffers).
    static DECODER: RefCell<Decoder> = RefCell::new(Decoder::new());
}

/// The image features of a spec and the seed of their crops.
#[derive(Clone, Debug)]
pub(crate) struct ImageStage {
    images: Vec<(String, ImageSpec)>,
    seed: u64,
}

impl ImageStage {
    /// The stage for `spec`'s images; `None` when it has none.
    pub(crate) fn new(spec: &FeatureSpec, seed: u64) -> Option<Self> {
        (!spec.images().is_empty()).then(|| ImageStage {
            images: spec.images().to_vec(),
            seed,
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
        CounterRng::new(xxhash_rust::xxh3::xxh3_64(&key), stream::IMAGE, 0)
    }

    /// Replaces each image column of `parsed` by the decoded pixels.
    pub(crate) fn apply(
        &self,
        raw: &RawBatch,
        parsed: &mut ParsedBatch,
    ) -> Result<(), PipelineError> {
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
                    let data = values.get(row);
                    let mut rng = self.rng(raw, row);
                    decoder
                        .decode_into(data, spec, &mut || rng.next_u64(), out)
                        .map_err(|e| fail(row, e))?;
                }
                Ok::<(), PipelineError>(())
            })?;
            *values = pixels;
        }
        Ok(())
    }
}
