//! Bucketing by length: rows of similar length go to the same batch, so each
//! batch pads little, and each bucket has one static shape.

/// A bucketer's configuration is unusable.
/// Records a bucket reserves room for before its first batch fills.
const FIRST_RESERVE: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BucketError {
    #[error("{boundaries} boundaries need {expected} batch sizes, got {actual}")]
    BatchSizes {
        boundaries: usize,
        expected: usize,
        actual: usize,
    },
    #[error("boundaries must be at least 1 and strictly increasing: {boundaries:?}")]
    Boundaries { boundaries: Vec<usize> },
    #[error("batch sizes must be at least 1: {batch_sizes:?}")]
    ZeroBatchSize { batch_sizes: Vec<usize> },
}

/// What to do with the partly filled buckets at the end of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remainder {
    /// Drop them (`drop_remainder`).
    Drop,
    /// Emit them; assembly pads them to full batches with masked rows.
    Pad,
}

/// The rows of one bucket, ready to assemble into one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketGroup<T> {
    /// Index of the bucket.
    pub bucket: usize,
    /// Rows the batch has (items may be fewer at the end of the input).
    pub batch_size: usize,
    /// Length to pad to: the bucket's boundary, `None` for the last bucket
    /// (padded to the length policy's bound).
    pub pad_to: Option<usize>,
    /// The rows in arrival order.
    pub items: Vec<T>,
}

/// A sequential operator grouping rows by length into buckets.
///
/// With boundaries `b_0 < b_1 < … < b_{n-1}`, bucket `i < n` takes lengths in
/// `(b_{i-1}, b_i]` (bucket 0 from 0) and is padded to `b_i`; bucket `n` takes
/// lengths above `b_{n-1}` and is padded to the length policy's bound. Bucket
/// `i` emits a group once it holds `batch_sizes[i]` rows. The output order
/// depends only on the input order, so it is deterministic.
///
/// Items are whatever identifies a row: typically a shared parsed batch and
/// a record index, `(Arc<ParsedBatch>, usize)`, which
/// [`Assembler::assemble_bucket`](super::Assembler::assemble_bucket) takes.
#[derive(Clone, Debug)]
pub struct Bucketer<T> {
    boundaries: Vec<usize>,
    batch_sizes: Vec<usize>,
    pending: Vec<Vec<T>>,
}

impl<T> Bucketer<T> {
    /// A bucketer with `boundaries.len() + 1` buckets.
    pub fn new(boundaries: Vec<usize>, batch_sizes: Vec<usize>) -> Result<Self, BucketError> {
        if batch_sizes.len() != boundaries.len() + 1 {
            return Err(BucketError::BatchSizes {
                boundaries: boundaries.len(),
                expected: boundaries.len() + 1,
                actual: batch_sizes.len(),
            });
        }
        let increasing = boundaries.windows(2).all(|w| w[0] < w[1]);
        if !increasing || boundaries.first() == Some(&0) {
            return Err(BucketError::Boundaries { boundaries });
        }
        if batch_sizes.contains(&0) {
            return Err(BucketError::ZeroBatchSize { batch_sizes });
        }
        // A bucket reserves its full size once a batch of it has filled:
        // sizes no data reaches reserve nothing large.
        let pending = batch_sizes
            .iter()
            .map(|&b| Vec::with_capacity(b.min(FIRST_RESERVE)))
            .collect();
        Ok(Self {
            boundaries,
            batch_sizes,
            pending,
        })
    }

    /// Number of buckets (boundaries + 1).
    pub fn num_buckets(&self) -> usize {
        self.batch_sizes.len()
    }

    /// The bucket a row of `length` goes to.
    pub fn bucket_of(&self, length: usize) -> usize {
        self.boundaries.partition_point(|&b| b < length)
    }

    /// Rows per batch of `bucket` (0 past the last bucket).
    pub fn batch_size(&self, bucket: usize) -> usize {
        self.batch_sizes.get(bucket).copied().unwrap_or(0)
    }

    /// The length `bucket` pads to (`None` for the last one).
    pub fn pad_to(&self, bucket: usize) -> Option<usize> {
        self.boundaries.get(bucket).copied()
    }

    /// Rows waiting in each bucket.
    pub fn pending(&self) -> Vec<usize> {
        self.pending.iter().map(Vec::len).collect()
    }

    /// The rows waiting, bucket by bucket, each in arrival order: pushed
    /// again in this order into an empty bucketer, they rebuild this state
    /// (how a pipeline checkpoint restores its buckets).
    pub fn pending_items(&self) -> impl Iterator<Item = &T> {
        self.pending.iter().flatten()
    }

    /// Rows that can be pushed with at most the last filling a bucket:
    /// the fewest any bucket is short of full.
    pub fn room(&self) -> usize {
        let short = self.batch_sizes.iter().zip(&self.pending);
        short
            .map(|(size, rows)| size - rows.len())
            .min()
            .unwrap_or(0)
    }

    /// Adds a row of `length`; returns its bucket's group when that is full.
    pub fn push(&mut self, item: T, length: usize) -> Option<BucketGroup<T>> {
        let bucket = self.bucket_of(length);
        let size = self.batch_size(bucket);
        let list = self.pending.get_mut(bucket)?;
        list.push(item);
        if list.len() < size {
            return None;
        }
        let items = std::mem::replace(list, Vec::with_capacity(size));
        Some(self.group(bucket, items))
    }

    /// Ends the input: the partly filled buckets, in bucket order (none when
    /// `remainder` is [`Remainder::Drop`]). The bucketer is empty afterwards.
    pub fn finish(&mut self, remainder: Remainder) -> Vec<BucketGroup<T>> {
        let mut out = Vec::new();
        for bucket in 0..self.pending.len() {
            let items = std::mem::take(&mut self.pending[bucket]);
            if remainder == Remainder::Pad && !items.is_empty() {
                out.push(self.group(bucket, items));
            }
        }
        out
    }

    fn group(&self, bucket: usize, items: Vec<T>) -> BucketGroup<T> {
        BucketGroup {
            bucket,
            batch_size: self.batch_size(bucket),
            pad_to: self.pad_to(bucket),
            items,
        }
    }
}
