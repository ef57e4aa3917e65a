//! What makes a plan unable to give static-shape batches: [`PlanError`].

use super::fill::Scalar;
use crate::batch::dtype::TensorType;
use crate::spec::DType;

/// Most distinct batch shapes a plan may produce: each one is an XLA compile.
pub const MAX_SHAPES: usize = 4096;

/// A plan that cannot produce static-shape batches.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("batch size must be at least 1")]
    ZeroBatchSize,
    #[error("feature {feature:?} is not in the spec")]
    UnknownFeature { feature: String },
    #[error(
        "feature {feature:?} has variable length but no length bound \
         (give it fixed_length or max_length): unbounded shape"
    )]
    Unbounded { feature: String },
    #[error("feature {feature:?} has a fixed length: it takes no length policy or mask")]
    NotVarLen { feature: String },
    #[error("feature {feature:?} is in two padding groups")]
    DuplicateGroup { feature: String },
    #[error("a padding group names no feature")]
    EmptyGroup,
    #[error(
        "feature {feature:?}: fixed_length cannot be combined with max_length or pad_to_multiple_of"
    )]
    ConflictingLengths { feature: String },
    #[error("feature {feature:?}: {what} must be at least 1")]
    ZeroLength { feature: String, what: &'static str },
    #[error("feature {feature:?} is {from}: it cannot be cast to {to}")]
    BadCast {
        feature: String,
        from: DType,
        to: TensorType,
    },
    #[error(
        "feature {feature:?} holds bytes: only numeric features can be packed (tokenize text first)"
    )]
    NotNumeric { feature: String },
    #[error("feature {feature:?} is {dtype}: only a fixed-length bytes feature can be decoded raw")]
    NotDecodable { feature: String, dtype: DType },
    #[error("image feature {feature:?}: {reason}")]
    BadImage { feature: String, reason: String },
    #[error("feature {feature:?}: pad value {value} is not a {dtype}")]
    PadValue {
        feature: String,
        value: Scalar,
        dtype: TensorType,
    },
    #[error("two output tensors are called {name:?}")]
    DuplicateName { name: String },
    #[error("the plan can produce {count} batch shapes, more than {max}", max = MAX_SHAPES)]
    TooManyShapes { count: usize },
    #[error("the batch of feature {feature:?} would be too large: {dims:?} values")]
    TooLarge {
        feature: String,
        /// The batch's dimensions (rows first).
        dims: Vec<usize>,
    },
    #[error("bucket boundary {boundary} is above feature {feature:?}'s length bound {bound}")]
    BoundaryAboveBound {
        feature: String,
        boundary: usize,
        bound: usize,
    },
    #[error("feature {feature:?} was given to the packer twice")]
    DuplicateFeature { feature: String },
    #[error("the packer needs at least one feature")]
    NoFeatures,
    #[error(
        "feature list {feature:?} has steps of varying length: only feature lists of \
         fixed-shape steps can be padded to a static shape"
    )]
    RaggedSteps { feature: String },
}
