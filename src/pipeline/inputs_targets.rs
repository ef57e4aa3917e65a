//! `inputs_targets(feature)`: next-token inputs and targets made from a
//! packed or padded token feature on the workers, after assembly, so that a
//! training step shifts nothing of its own.
//!
//! The targets are the tokens. The inputs are the tokens shifted right by
//! one within each segment — a packed row's sequence (or piece of one), a
//! padded row's values — with `bos` as each segment's first input: the
//! convention of T5X and MaxText, whose `shift_right` respects segments so
//! that no sequence sees the last token of the one before it. Inputs and
//! targets share their segment ids and positions.
//!
//! Out: [`INPUTS`], [`TARGETS`] (the feature's type), [`TARGETS_MASK`] (1 on
//! a real target, 0 on padding; the feature's type), [`SEGMENT_IDS`] and
//! [`POSITIONS`] (i32: a packed batch's own; for a padded batch made here,
//! 1 and 0, 1, 2, … on values, 0 on padding). The feature and its mask
//! leave the batch (they are `targets` and `targets_mask` now).

use crate::batch::{
    AlignedBuf, Batch, BatchShape, BufferPool, Element, POSITIONS, SEGMENT_IDS, Tensor,
    TensorShape, TensorType,
};

use super::error::PipelineError;
use super::parsed::{ParsedStep, Stage};
use crate::spec::FeatureSpec;

/// The shifted tokens.
pub const INPUTS: &str = "inputs";
/// The tokens.
pub const TARGETS: &str = "targets";
/// 1 where a target is a token, 0 on padding: a loss's weights.
pub const TARGETS_MASK: &str = "targets_mask";

/// The op's settings.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct InputsTargets {
    pub feature: String,
    /// Each segment's first input.
    pub bos: i64,
}

/// Where a batch's segments come from.
enum Segments {
    /// A packed batch's segment ids and positions.
    Packed,
    /// A padded batch's mask of the feature.
    Mask,
}

impl InputsTargets {
    fn mask_name(&self) -> String {
        format!("{}_mask", self.feature)
    }

    fn segments(&self, shape: &BatchShape) -> Option<Segments> {
        let packed = shape.get(SEGMENT_IDS).is_some() && shape.get(POSITIONS).is_some();
        match (packed, shape.get(&self.mask_name()).is_some()) {
            (true, _) => Some(Segments::Packed),
            (false, true) => Some(Segments::Mask),
            (false, false) => None,
        }
    }

    /// Checks the feature in a batch shape: integer tokens `[rows, length]`,
    /// packed or with its mask, no output name taken, `bos` of its type.
    pub(crate) fn check(&self, shape: &BatchShape) -> Result<(), PipelineError> {
        let bad = |why: String| {
            PipelineError::Config(format!("inputs_targets({:?}): {why}", self.feature))
        };
        let t = shape
            .get(&self.feature)
            .ok_or_else(|| bad("the feature is not a tensor of the batch".into()))?;
        if !matches!(t.dtype, TensorType::I32 | TensorType::I64) || t.shape.len() != 2 {
            return Err(bad(format!(
                "it makes inputs and targets of integer tokens [rows, length], not {}{:?}",
                t.dtype, t.shape
            )));
        }
        if t.dtype == TensorType::I32 && i32::try_from(self.bos).is_err() {
            return Err(bad(format!("bos {} is not an int32", self.bos)));
        }
        let segments = self.segments(shape).ok_or_else(|| {
            bad(format!(
                "it needs packing or the feature's mask ({:?}), which masks turned off",
                self.mask_name()
            ))
        })?;
        let mut made = vec![INPUTS, TARGETS, TARGETS_MASK];
        if let Segments::Mask = segments {
            made.extend([SEGMENT_IDS, POSITIONS]);
        }
        let mask = self.mask_name();
        if let Some(taken) = shape
            .tensors
            .iter()
            .map(|t| t.name.as_str())
            .find(|n| made.contains(n) && *n != self.feature && *n != mask)
        {
            return Err(bad(format!("the batch already has a tensor {taken:?}")));
        }
        Ok(())
    }

    /// The shape after the op (checked first).
    pub(crate) fn reshape(&self, shape: &mut BatchShape) {
        let Some(t) = shape.get(&self.feature).cloned() else {
            return;
        };
        let segments = self.segments(shape);
        let mask = self.mask_name();
        shape
            .tensors
            .retain(|s| s.name != self.feature && s.name != mask);
        let like = |name: &str, dtype| TensorShape {
            name: name.to_string(),
            dtype,
            shape: t.shape.clone(),
        };
        for name in [INPUTS, TARGETS, TARGETS_MASK] {
            shape.tensors.push(like(name, t.dtype));
        }
        if let Some(Segments::Mask) = segments {
            for name in [SEGMENT_IDS, POSITIONS] {
                shape.tensors.push(like(name, TensorType::I32));
            }
        }
    }

    /// Replaces the feature (and its mask) in `batch` by the outputs.
    pub(crate) fn apply(&self, batch: &mut Batch, pool: &BufferPool) {
        let shape = batch.shape();
        let Some(segments) = self.segments(&shape) else {
            return;
        };
        let Some(at) = batch.tensors.iter().position(|(n, _)| *n == self.feature) else {
            return;
        };
        let (_, tokens) = batch.tensors.remove(at);
        let (rows, length) = match tokens.shape() {
            &[rows, length] => (rows, length),
            _ => return,
        };
        // The mask is the targets' mask now.
        let mask_name = self.mask_name();
        let mask = (batch.tensors.iter())
            .position(|(n, _)| *n == mask_name)
            .map(|at| batch.tensors.remove(at).1);
        // Segment ids and positions: the packed batch's, or from the mask.
        let made = match (&segments, mask) {
            (Segments::Packed, _) => None,
            (Segments::Mask, Some(mask)) => Some(from_mask(&mask, length, pool)),
            (Segments::Mask, None) => return,
        };
        let segment_ids: &[i32] = match &made {
            Some((ids, _)) => ids.as_slice(),
            None => batch
                .get(SEGMENT_IDS)
                .and_then(|t| t.values::<i32>())
                .unwrap_or_default(),
        };
        let n = rows * length;
        if segment_ids.len() != n {
            return;
        }
        let dtype = tokens.dtype();
        let (inputs, targets_mask) = match dtype {
            TensorType::I32 => shift::<i32>(&tokens, segment_ids, length, self.bos as i32, pool),
            _ => shift::<i64>(&tokens, segment_ids, length, self.bos, pool),
        };
        let dims = vec![rows, length];
        batch.tensors.push((
            INPUTS.to_string(),
            Tensor::from_parts(dtype, dims.clone(), inputs),
        ));
        batch.tensors.push((TARGETS.to_string(), tokens));
        batch.tensors.push((
            TARGETS_MASK.to_string(),
            Tensor::from_parts(dtype, dims.clone(), targets_mask),
        ));
        if let Some((ids, positions)) = made {
            batch.tensors.push((
                SEGMENT_IDS.to_string(),
                Tensor::from_parts(TensorType::I32, dims.clone(), ids),
            ));
            batch.tensors.push((
                POSITIONS.to_string(),
                Tensor::from_parts(TensorType::I32, dims, positions),
            ));
        }
    }
}

/// A padded batch's segment ids (1 on values, 0 on padding) and positions
/// (0, 1, … on values) from a mask of any type (a zero is all-zero bytes).
fn from_mask(mask: &Tensor, length: usize, pool: &BufferPool) -> (AlignedBuf, AlignedBuf) {
    let size = mask.dtype().size();
    let n = mask.num_elements();
    let mut ids = pool.take_stale(n * size_of::<i32>());
    let mut positions = pool.take_stale(n * size_of::<i32>());
    let on = mask
        .bytes()
        .chunks_exact(size)
        .map(|c| c.iter().any(|&b| b != 0));
    let (ids_out, pos_out) = (ids.as_mut_slice::<i32>(), positions.as_mut_slice::<i32>());
    for (k, on) in on.enumerate() {
        let i = (k % length) as i32;
        ids_out[k] = i32::from(on);
        pos_out[k] = if on { i } else { 0 };
    }
    (ids, positions)
}

/// The inputs (each segment's tokens shifted right by one, `bos` first;
/// padding as the tokens have it) and the targets' mask.
fn shift<T: Element + Copy + From<u8>>(
    tokens: &Tensor,
    segment_ids: &[i32],
    length: usize,
    bos: T,
    pool: &BufferPool,
) -> (AlignedBuf, AlignedBuf) {
    let values = tokens.values::<T>().unwrap_or_default();
    let n = values.len();
    let mut inputs = pool.take_stale(size_of_val(values));
    let mut mask = pool.take_stale(size_of_val(values));
    let (inputs_out, mask_out) = (inputs.as_mut_slice::<T>(), mask.as_mut_slice::<T>());
    for k in 0..n.min(segment_ids.len()) {
        let seg = segment_ids[k];
        let starts = k % length == 0 || segment_ids[k - 1] != seg;
        (inputs_out[k], mask_out[k]) = match (seg, starts) {
            (0, _) => (values[k], T::from(0)),
            (_, true) => (bos, T::from(1)),
            (_, false) => (values[k - 1], T::from(1)),
        };
    }
    (inputs, mask)
}

/// `inputs_targets(feature, bos)`: an assembled step, one per pipeline.
impl ParsedStep for InputsTargets {
    fn stage(&self) -> Stage {
        Stage::Assembled
    }
    fn slot(&self) -> Option<String> {
        Some("inputs_targets".into())
    }
    fn shape(&self, _spec: &FeatureSpec, shape: &mut BatchShape) -> Result<(), PipelineError> {
        self.check(shape)?;
        self.reshape(shape);
        Ok(())
    }
    fn assembled(&self, batch: &mut Batch, pool: &BufferPool) {
        self.apply(batch, pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(values: &[i64], rows: usize) -> Tensor {
        Tensor::from_slice(&[rows, values.len() / rows], values).unwrap()
    }

    fn i32s(values: &[i32], rows: usize) -> Tensor {
        Tensor::from_slice(&[rows, values.len() / rows], values).unwrap()
    }

    fn get<T: Element + Copy>(batch: &Batch, name: &str) -> Vec<T> {
        batch[name].values::<T>().unwrap().to_vec()
    }

    #[test]
    fn a_packed_row_shifts_within_each_segment() {
        let op = InputsTargets {
            feature: "ids".into(),
            bos: 7,
        };
        let mut batch = Batch::new(
            vec![
                (
                    "ids".into(),
                    tensor(&[1, 2, 3, 4, 5, 0, 6, 8, 9, 10, 0, 0], 2),
                ),
                ("ids_mask".into(), tensor(&[1; 12], 2)),
                (
                    SEGMENT_IDS.into(),
                    i32s(&[1, 1, 1, 2, 2, 0, 1, 1, 2, 3, 0, 0], 2),
                ),
                (
                    POSITIONS.into(),
                    i32s(&[0, 1, 2, 0, 1, 0, 0, 1, 0, 0, 0, 0], 2),
                ),
            ],
            2,
        );
        let mut shape = batch.shape();
        op.check(&shape).unwrap();
        op.reshape(&mut shape);
        op.apply(&mut batch, &BufferPool::default());
        assert_eq!(batch.shape(), shape);
        assert_eq!(
            get::<i64>(&batch, INPUTS),
            [7, 1, 2, 7, 4, 0, 7, 6, 7, 7, 0, 0]
        );
        assert_eq!(
            get::<i64>(&batch, TARGETS),
            [1, 2, 3, 4, 5, 0, 6, 8, 9, 10, 0, 0]
        );
        assert_eq!(
            get::<i64>(&batch, TARGETS_MASK),
            [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0]
        );
        // The packed batch's own segments stay; the feature and its mask go.
        assert!(batch.get("ids").is_none() && batch.get("ids_mask").is_none());
        assert_eq!(get::<i32>(&batch, POSITIONS)[..5], [0, 1, 2, 0, 1]);
    }

    #[test]
    fn a_padded_row_gets_segments_from_its_mask() {
        let op = InputsTargets {
            feature: "ids".into(),
            bos: 0,
        };
        let mut batch = Batch::new(
            vec![
                ("ids".into(), i32s(&[5, 6, 7, -1, 8, -1, -1, -1], 2)),
                ("ids_mask".into(), i32s(&[1, 1, 1, 0, 1, 0, 0, 0], 2)),
            ],
            2,
        );
        let mut shape = batch.shape();
        op.check(&shape).unwrap();
        op.reshape(&mut shape);
        op.apply(&mut batch, &BufferPool::default());
        assert_eq!(batch.shape(), shape);
        assert_eq!(get::<i32>(&batch, INPUTS), [0, 5, 6, -1, 0, -1, -1, -1]);
        assert_eq!(get::<i32>(&batch, TARGETS_MASK), [1, 1, 1, 0, 1, 0, 0, 0]);
        assert_eq!(get::<i32>(&batch, SEGMENT_IDS), [1, 1, 1, 0, 1, 0, 0, 0]);
        assert_eq!(get::<i32>(&batch, POSITIONS), [0, 1, 2, 0, 0, 0, 0, 0]);
        assert!(batch.get("ids_mask").is_none());
    }

    #[test]
    fn what_it_cannot_shift_is_named() {
        let op = |bos| InputsTargets {
            feature: "ids".into(),
            bos,
        };
        let shape = |tensors: Vec<(&str, Tensor)>| {
            Batch::new(
                tensors
                    .into_iter()
                    .map(|(n, t)| (n.to_string(), t))
                    .collect(),
                1,
            )
            .shape()
        };
        let err = |op: InputsTargets, s: &BatchShape| op.check(s).unwrap_err().to_string();
        let no_mask = shape(vec![("ids", i32s(&[1, 2], 1))]);
        assert!(err(op(0), &no_mask).contains("needs packing or the feature's mask"));
        let floats = shape(vec![(
            "ids",
            Tensor::from_slice(&[1, 2], &[1.0f32, 2.0]).unwrap(),
        )]);
        assert!(err(op(0), &floats).contains("integer tokens"));
        let masked = shape(vec![
            ("ids", i32s(&[1, 2], 1)),
            ("ids_mask", i32s(&[1, 1], 1)),
        ]);
        assert!(err(op(1 << 40), &masked).contains("not an int32"));
        let taken = shape(vec![
            ("ids", i32s(&[1, 2], 1)),
            ("ids_mask", i32s(&[1, 1], 1)),
            ("targets", i32s(&[1, 1], 1)),
        ]);
        assert!(err(op(0), &taken).contains("already has a tensor \"targets\""));
        let missing = shape(vec![("x", i32s(&[1, 2], 1))]);
        assert!(err(op(0), &missing).contains("not a tensor of the batch"));
    }
}
