//! `normalize(feature, mean, std)`: a dense feature's tensor (an image's u8
//! pixels, or fixed-length numbers) becomes float32 `(x - mean) / std` on
//! the workers, per channel (the last dimension) or with scalars, as f32
//! or bfloat16. It runs on the assembled batch, so padding rows are
//! normalized zeros (`-mean / std`), masked by `real_rows`.

use crate::batch::{Batch, BatchShape, Bf16, BufferPool, Tensor, TensorType};
use crate::spec::{DType, FeatureSpec};

use super::error::PipelineError;

/// One feature to normalize.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Normalize {
    pub feature: String,
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    /// F32 or BF16.
    pub dtype: TensorType,
}

impl Normalize {
    /// Checks the feature against the spec and the batch shape (its last
    /// dimension is the channel count a per-channel list must match).
    pub(crate) fn check(
        &self,
        spec: &FeatureSpec,
        shape: &BatchShape,
    ) -> Result<(), PipelineError> {
        let bad =
            |why: String| PipelineError::Config(format!("normalize({:?}): {why}", self.feature));
        let def = spec
            .get(&self.feature)
            .ok_or_else(|| bad("no such feature in the spec".into()))?;
        let image = spec.image_of(&self.feature).is_some();
        if def.fixed_count().is_none() || (def.dtype == DType::Bytes && !image) {
            return Err(bad(
                "only images and fixed-length numeric features can be normalized".into(),
            ));
        }
        if !matches!(self.dtype, TensorType::F32 | TensorType::BF16) {
            return Err(bad(format!(
                "the output is f32 or bf16, not {}",
                self.dtype
            )));
        }
        let t = shape
            .get(&self.feature)
            .ok_or_else(|| bad("the feature is not in the batch (skipped?)".into()))?;
        let channels = t
            .shape
            .last()
            .copied()
            .filter(|_| t.shape.len() > 1)
            .unwrap_or(1);
        for (what, list) in [("mean", &self.mean), ("std", &self.std)] {
            if list.len() != 1 && list.len() != channels {
                return Err(bad(format!(
                    "{what} has {} values: give 1, or one per channel ({channels})",
                    list.len()
                )));
            }
        }
        if let Some(s) = self.std.iter().find(|s| !s.is_finite() || **s == 0.0) {
            return Err(bad(format!("std {s} must be finite and non-zero")));
        }
        if self.mean.iter().any(|m| !m.is_finite()) {
            return Err(bad("mean must be finite".into()));
        }
        Ok(())
    }

    /// The shape after normalizing: the feature's type changes.
    pub(crate) fn reshape(&self, shape: &mut BatchShape) {
        for t in &mut shape.tensors {
            if t.name == self.feature {
                t.dtype = self.dtype;
            }
        }
    }

    /// Replaces the feature's tensor in `batch` by its normalized values.
    pub(crate) fn apply(&self, batch: &mut Batch, pool: &BufferPool) {
        let Some((_, tensor)) = batch.tensors.iter_mut().find(|(n, _)| *n == self.feature) else {
            return;
        };
        let shape = tensor.shape().to_vec();
        let channels = match (self.mean.len(), self.std.len()) {
            (1, 1) => 1,
            _ => shape.last().copied().unwrap_or(1).max(1),
        };
        let at = |list: &[f32], c: usize| list.get(c).or(list.first()).copied().unwrap_or(0.0);
        let norm = |x: f32, c: usize| (x - at(&self.mean, c)) / at(&self.std, c);
        let values: Vec<f32> = match tensor.dtype() {
            TensorType::U8 => {
                // Per channel, 256 values at most: a table, computed exactly.
                let table: Vec<f32> = (0..channels)
                    .flat_map(|c| (0..=255u8).map(move |x| (x, c)))
                    .map(|(x, c)| norm(f32::from(x), c))
                    .collect();
                let v = tensor.values::<u8>().unwrap_or_default();
                v.iter()
                    .enumerate()
                    .map(|(i, &x)| table[(i % channels) * 256 + usize::from(x)])
                    .collect()
            }
            TensorType::F32 => map(tensor.values::<f32>(), channels, norm),
            TensorType::I64 => map(tensor.values::<i64>(), channels, |x, c| norm(x as f32, c)),
            TensorType::I32 => map(tensor.values::<i32>(), channels, |x, c| norm(x as f32, c)),
            TensorType::BF16 => map(tensor.values::<Bf16>(), channels, |x, c| {
                norm(x.to_f32(), c)
            }),
        };
        let data = match self.dtype {
            TensorType::BF16 => {
                let v: Vec<Bf16> = values.into_iter().map(Bf16::from_f32).collect();
                pool.take_copy(&v)
            }
            _ => pool.take_copy(&values),
        };
        if let Ok(t) = Tensor::new(self.dtype, shape, data) {
            *tensor = t;
        }
    }
}

fn map<T: Copy>(values: Option<&[T]>, channels: usize, f: impl Fn(T, usize) -> f32) -> Vec<f32> {
    values
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, &x)| f(x, i % channels))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ImageSpec;

    fn batch(t: Tensor) -> Batch {
        Batch {
            tensors: vec![("x".into(), t)],
            real_rows: 1,
        }
    }

    #[test]
    fn u8_pixels_per_channel_and_scalar() {
        let pool = BufferPool::default();
        let n = Normalize {
            feature: "x".into(),
            mean: vec![10.0, 20.0],
            std: vec![2.0, 4.0],
            dtype: TensorType::F32,
        };
        let mut b = batch(Tensor::from_slice(&[1, 2, 2], &[10u8, 20, 14, 0]).unwrap());
        n.apply(&mut b, &pool);
        assert_eq!(b["x"].values::<f32>().unwrap(), [0.0, 0.0, 2.0, -5.0]);
        let n = Normalize {
            mean: vec![127.5],
            std: vec![127.5],
            dtype: TensorType::BF16,
            ..n
        };
        let mut b = batch(Tensor::from_slice(&[1, 3], &[0u8, 255, 51]).unwrap());
        n.apply(&mut b, &pool);
        let got: Vec<f32> = b["x"]
            .values::<Bf16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect();
        // (51 - 127.5) / 127.5 = -0.6, to bf16: -0.6015625.
        assert_eq!(got, [-1.0, 1.0, -0.6015625]);
        assert_eq!(b["x"].shape(), [1, 3]);
    }

    #[test]
    fn numbers_are_normalized_and_bad_settings_refused() {
        let pool = BufferPool::default();
        let n = Normalize {
            feature: "x".into(),
            mean: vec![1.0],
            std: vec![0.5],
            dtype: TensorType::F32,
        };
        let mut b = batch(Tensor::from_slice(&[1, 2], &[3i64, -1]).unwrap());
        n.apply(&mut b, &pool);
        assert_eq!(b["x"].values::<f32>().unwrap(), [4.0, -4.0]);

        let spec = FeatureSpec::new()
            .image("x", ImageSpec::new(2, 2, 3))
            .var_len("ids", DType::Int64);
        let shape = BatchShape {
            tensors: vec![crate::batch::TensorShape {
                name: "x".into(),
                dtype: TensorType::U8,
                shape: vec![4, 2, 2, 3],
            }],
        };
        let err = |n: &Normalize| n.check(&spec, &shape).unwrap_err().to_string();
        let two = Normalize {
            mean: vec![1.0, 2.0],
            ..n.clone()
        };
        assert_eq!(
            err(&two),
            "invalid pipeline: normalize(\"x\"): mean has 2 values: give 1, or one per channel (3)"
        );
        let zero = Normalize {
            std: vec![0.0],
            ..n.clone()
        };
        assert_eq!(
            err(&zero),
            "invalid pipeline: normalize(\"x\"): std 0 must be finite and non-zero"
        );
        let ids = Normalize {
            feature: "ids".into(),
            ..n.clone()
        };
        assert_eq!(
            err(&ids),
            "invalid pipeline: normalize(\"ids\"): only images and fixed-length numeric \
             features can be normalized"
        );
        n.check(&spec, &shape).unwrap();
    }
}
