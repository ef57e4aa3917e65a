//! Shapes: of one tensor ([`TensorShape`]), of every tensor of a batch
//! ([`BatchShape`], what an XLA program is compiled for), element counts
//! that cannot overflow, and [`TensorError`], a shape its data does not fit.

use std::fmt;

use super::dtype::TensorType;

/// Why a tensor could not be made from a buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorError {
    /// The buffer's size is not what the shape and type need.
    #[error("a {dtype} tensor of shape {shape:?} needs {expected} bytes, the buffer has {actual}")]
    Length {
        dtype: TensorType,
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    /// The shape's element count overflows.
    #[error("shape {shape:?} is too large")]
    Overflow { shape: Vec<usize> },
    /// A bytes column's number of values is not what the shape needs.
    #[error("a bytes column of shape {shape:?} needs {expected} values, it has {actual}")]
    Values {
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
}

/// Number of elements in `shape`, or `None` on overflow.
pub(crate) fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// The name, type and shape of one tensor of a batch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorShape {
    pub name: String,
    pub dtype: TensorType,
    pub shape: Vec<usize>,
}

/// The names, types and shapes of every tensor of a batch, in batch order:
/// what an XLA program is compiled for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchShape {
    pub tensors: Vec<TensorShape>,
}

impl BatchShape {
    /// The entry of tensor `name`.
    pub fn get(&self, name: &str) -> Option<&TensorShape> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

impl fmt::Display for BatchShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.tensors.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}: {}{:?}", t.name, t.dtype, t.shape)?;
        }
        Ok(())
    }
}
