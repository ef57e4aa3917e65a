//! Feature specs: which features to parse, their types and shapes, with the
//! meaning of `tf.io.parse_example` / `tf.io.parse_sequence_example`.

use std::fmt;

/// The type of a feature's values.
///
/// `Int32` reads an `Int64List` from the wire and narrows each value to i32
/// (a value out of range is an error, never a silent wrap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Int64,
    Int32,
    Float32,
    Bytes,
}

/// The list kind a `tf.train.Feature` holds on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WireKind {
    BytesList,
    FloatList,
    Int64List,
}

impl DType {
    /// The wire list kind this dtype is read from.
    pub fn wire_kind(self) -> WireKind {
        match self {
            DType::Int64 | DType::Int32 => WireKind::Int64List,
            DType::Float32 => WireKind::FloatList,
            DType::Bytes => WireKind::BytesList,
        }
    }

    /// The name TensorFlow uses for this dtype.
    pub fn name(self) -> &'static str {
        match self {
            DType::Int64 => "int64",
            DType::Int32 => "int32",
            DType::Float32 => "float",
            DType::Bytes => "string",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl WireKind {
    /// The name TensorFlow uses for the dtype of this list.
    pub fn name(self) -> &'static str {
        match self {
            WireKind::BytesList => "string",
            WireKind::FloatList => "float",
            WireKind::Int64List => "int64",
        }
    }
}

impl fmt::Display for WireKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Values used when a fixed-length feature is missing from a record.
#[derive(Clone, Debug, PartialEq)]
pub enum DefaultValue {
    Int64(Vec<i64>),
    Float32(Vec<f32>),
    Bytes(Vec<Vec<u8>>),
}

impl DefaultValue {
    /// Number of values given.
    pub fn len(&self) -> usize {
        match self {
            DefaultValue::Int64(v) => v.len(),
            DefaultValue::Float32(v) => v.len(),
            DefaultValue::Bytes(v) => v.len(),
        }
    }

    /// True when no value is given.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The wire kind these values belong to.
    pub fn wire_kind(&self) -> WireKind {
        match self {
            DefaultValue::Int64(_) => WireKind::Int64List,
            DefaultValue::Float32(_) => WireKind::FloatList,
            DefaultValue::Bytes(_) => WireKind::BytesList,
        }
    }
}

/// How a feature's values are shaped.
#[derive(Clone, Debug, PartialEq)]
pub enum FeatureKind {
    /// Exactly `shape.iter().product()` values per record (`FixedLenFeature`).
    /// A missing feature takes `default`; without one it is an error.
    /// A default holds either every value or a single value repeated.
    FixedLen {
        shape: Vec<usize>,
        default: Option<DefaultValue>,
    },
    /// Any number of values per record (`VarLenFeature`, or a ragged
    /// feature with one ragged dimension); a missing feature has none.
    VarLen,
}

/// Number of values in `shape` (saturating: a shape too large to count can
/// never match a record, and must not overflow).
fn shape_count(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .unwrap_or(usize::MAX)
}

/// One feature to parse.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureDef {
    pub name: String,
    pub dtype: DType,
    pub kind: FeatureKind,
}

impl FeatureDef {
    /// Values per record of a fixed-length feature.
    pub fn fixed_count(&self) -> Option<usize> {
        match &self.kind {
            FeatureKind::FixedLen { shape, .. } => Some(shape_count(shape)),
            FeatureKind::VarLen => None,
        }
    }
}

/// A spec error: a default of the wrong type or size.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    #[error(
        "default of feature {name:?} holds {actual} values but its shape needs {expected} (or 1)"
    )]
    DefaultCount {
        name: String,
        expected: usize,
        actual: usize,
    },
    #[error("default of feature {name:?} is {actual} but the feature is {expected}")]
    DefaultType {
        name: String,
        expected: DType,
        actual: WireKind,
    },
}

/// How an image feature is brought to its static `[H, W, C]` shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageMode {
    /// Every image must already be `H×W` (another size is an error).
    Fixed,
    /// Evaluation: the shorter side resized to `shorter_side` (bilinear,
    /// half-pixel centers, no antialias), then the centered `H×W`.
    ResizeCrop { shorter_side: usize },
    /// Training: a random crop of 8–100% of the area with an aspect ratio
    /// in 3/4–4/3 (Inception / ImageNet recipe), resized to `H×W`.
    RandomResizedCrop,
}

/// An image feature: a `BytesList` of one PNG or JPEG value per record,
/// decoded on the workers into `[H, W, C]` u8 (see `infeed::image`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImageSpec {
    pub height: usize,
    pub width: usize,
    /// 1 (gray), 3 (RGB) or 4 (RGBA), converted as
    /// `tf.io.decode_image(channels=c)` does.
    pub channels: usize,
    pub mode: ImageMode,
    /// Mirror left to right with probability 1/2.
    pub flip: bool,
}

impl ImageSpec {
    /// Images of exactly `height×width`, with `channels` channels.
    pub fn new(height: usize, width: usize, channels: usize) -> Self {
        ImageSpec {
            height,
            width,
            channels,
            mode: ImageMode::Fixed,
            flip: false,
        }
    }

    /// Resize the shorter side to `shorter_side`, then crop the center.
    pub fn resize_crop(mut self, shorter_side: usize) -> Self {
        self.mode = ImageMode::ResizeCrop { shorter_side };
        self
    }

    /// A random resized crop per record (training).
    pub fn random_resized_crop(mut self) -> Self {
        self.mode = ImageMode::RandomResizedCrop;
        self
    }

    /// A random horizontal flip per record.
    pub fn flip(mut self) -> Self {
        self.flip = true;
        self
    }

    /// `[height, width, channels]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.height, self.width, self.channels]
    }

    /// Why this spec cannot give static images, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if !matches!(self.channels, 1 | 3 | 4) {
            return Err(format!("channels must be 1, 3 or 4, not {}", self.channels));
        }
        if self.height == 0 || self.width == 0 {
            return Err("height and width must be at least 1".into());
        }
        if shape_count(&self.shape()) > MAX_IMAGE_VALUES {
            return Err(format!(
                "{}x{}x{} is more than {MAX_IMAGE_VALUES} values per image",
                self.height, self.width, self.channels
            ));
        }
        if let ImageMode::ResizeCrop { shorter_side } = self.mode
            && shorter_side < self.height.max(self.width)
        {
            return Err(format!(
                "the shorter side ({shorter_side}) must be at least the crop's height and \
                 width ({}x{})",
                self.height, self.width
            ));
        }
        Ok(())
    }
}

/// Most values an output image may hold (64 Mi: e.g. 4096×4096×4).
pub const MAX_IMAGE_VALUES: usize = 1 << 26;

impl fmt::Display for ImageSpec {
    /// The text form's kind and mode: `image[224,224,3]:train+flip`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "image[{},{},{}]:",
            self.height, self.width, self.channels
        )?;
        match self.mode {
            ImageMode::Fixed => f.write_str("fixed")?,
            ImageMode::ResizeCrop { shorter_side } => write!(f, "eval={shorter_side}")?,
            ImageMode::RandomResizedCrop => f.write_str("train")?,
        }
        if self.flip {
            f.write_str("+flip")?;
        }
        Ok(())
    }
}

/// The features to parse from `tf.train.Example` records, in output order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeatureSpec {
    features: Vec<FeatureDef>,
    /// Features among `features` that hold encoded images (each a
    /// fixed-length bytes feature of one value).
    images: Vec<(String, ImageSpec)>,
}

impl FeatureSpec {
    /// An empty spec.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a fixed-length feature with no default: a record without it is an error.
    pub fn fixed_len(self, name: impl Into<String>, dtype: DType, shape: &[usize]) -> Self {
        self.push(
            name.into(),
            dtype,
            FeatureKind::FixedLen {
                shape: shape.to_vec(),
                default: None,
            },
        )
    }

    /// Adds a fixed-length feature that takes `default` when a record lacks it.
    pub fn fixed_len_with_default(
        self,
        name: impl Into<String>,
        dtype: DType,
        shape: &[usize],
        default: DefaultValue,
    ) -> Result<Self, SpecError> {
        let name = name.into();
        let expected = shape_count(shape);
        if default.wire_kind() != dtype.wire_kind() {
            return Err(SpecError::DefaultType {
                name,
                expected: dtype,
                actual: default.wire_kind(),
            });
        }
        if default.len() != expected && default.len() != 1 {
            return Err(SpecError::DefaultCount {
                name,
                expected,
                actual: default.len(),
            });
        }
        let kind = FeatureKind::FixedLen {
            shape: shape.to_vec(),
            default: Some(default),
        };
        Ok(self.push(name, dtype, kind))
    }

    /// Adds a variable-length feature (values plus row splits).
    pub fn var_len(self, name: impl Into<String>, dtype: DType) -> Self {
        self.push(name.into(), dtype, FeatureKind::VarLen)
    }

    /// Adds an image feature: one PNG or JPEG per record (a `BytesList`
    /// of one value), decoded on the workers into `[H, W, C]` u8 as `image`
    /// says; a record without it is an error.
    pub fn image(self, name: impl Into<String>, image: ImageSpec) -> Self {
        let name = name.into();
        let mut spec = self.fixed_len(name.clone(), DType::Bytes, &[]);
        spec.images.push((name, image));
        spec
    }

    /// The image features and how each is decoded.
    pub fn images(&self) -> &[(String, ImageSpec)] {
        &self.images
    }

    /// How feature `name` is decoded, if it is an image.
    pub fn image_of(&self, name: &str) -> Option<&ImageSpec> {
        self.images.iter().find(|(n, _)| n == name).map(|(_, i)| i)
    }

    fn push(mut self, name: String, dtype: DType, kind: FeatureKind) -> Self {
        // A repeated name replaces the earlier entry (an image's too),
        // keeping its position.
        self.images.retain(|(n, _)| *n != name);
        match self.features.iter_mut().find(|f| f.name == name) {
            Some(f) => *f = FeatureDef { name, dtype, kind },
            None => self.features.push(FeatureDef { name, dtype, kind }),
        }
        self
    }

    /// The features in output order.
    pub fn features(&self) -> &[FeatureDef] {
        &self.features
    }

    /// The feature called `name`.
    pub fn get(&self, name: &str) -> Option<&FeatureDef> {
        self.features.iter().find(|f| f.name == name)
    }

    /// Number of features.
    pub fn len(&self) -> usize {
        self.features.len()
    }

    /// True when the spec asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
    }
}

/// How a sequence feature's steps are shaped.
#[derive(Clone, Debug, PartialEq)]
pub enum SequenceKind {
    /// Every step holds `shape.iter().product()` values
    /// (`FixedLenSequenceFeature`); a record has any number of steps.
    FixedLen { shape: Vec<usize> },
    /// Every step holds any number of values (`VarLenFeature` in
    /// `sequence_features`): ragged over steps and over values.
    VarLen,
}

/// One sequence feature (a `FeatureList`) to parse.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceFeatureDef {
    pub name: String,
    pub dtype: DType,
    pub kind: SequenceKind,
}

/// The features to parse from `tf.train.SequenceExample` records: context
/// features (as in [`FeatureSpec`]) and per-step feature lists. A record
/// without a feature list has zero steps of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SequenceSpec {
    context: FeatureSpec,
    sequence: Vec<SequenceFeatureDef>,
    /// Feature lists a record must hold (TensorFlow's `allow_missing=False`).
    required: Vec<String>,
}

impl SequenceSpec {
    /// A spec with these context features and no feature lists yet.
    pub fn new(context: FeatureSpec) -> Self {
        Self {
            context,
            sequence: Vec::new(),
            required: Vec::new(),
        }
    }

    /// Adds a feature list whose steps each hold a fixed shape.
    pub fn fixed_len_sequence(
        self,
        name: impl Into<String>,
        dtype: DType,
        shape: &[usize],
    ) -> Self {
        self.push(
            name.into(),
            dtype,
            SequenceKind::FixedLen {
                shape: shape.to_vec(),
            },
        )
    }

    /// Adds a feature list whose steps each hold any number of values.
    pub fn var_len_sequence(self, name: impl Into<String>, dtype: DType) -> Self {
        self.push(name.into(), dtype, SequenceKind::VarLen)
    }

    fn push(mut self, name: String, dtype: DType, kind: SequenceKind) -> Self {
        match self.sequence.iter_mut().find(|f| f.name == name) {
            Some(f) => *f = SequenceFeatureDef { name, dtype, kind },
            None => self.sequence.push(SequenceFeatureDef { name, dtype, kind }),
        }
        self
    }

    /// Makes feature list `name` required: a record without it is an error
    /// (`FixedLenSequenceFeature(allow_missing=False)` in TensorFlow); a
    /// present but empty list still has zero steps. By default a missing
    /// list has zero steps (`allow_missing=True`).
    pub fn require(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !self.required.contains(&name) {
            self.required.push(name);
        }
        self
    }

    /// The feature lists a record must hold.
    pub fn required(&self) -> &[String] {
        &self.required
    }

    /// The same feature lists with `context` as the context features (what
    /// a pipeline's parsed ops make of them, e.g. a tokenized text).
    pub fn with_context(mut self, context: FeatureSpec) -> Self {
        self.context = context;
        self
    }

    /// The context features.
    pub fn context(&self) -> &FeatureSpec {
        &self.context
    }

    /// The feature lists in output order.
    pub fn sequence(&self) -> &[SequenceFeatureDef] {
        &self.sequence
    }
}

/// A spec string that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "bad feature spec {item:?}: {reason} (expected e.g. `ids:var_len:int64,label:fixed_len[1]:int64`)"
)]
pub struct SpecParseError {
    pub item: String,
    pub reason: String,
}

impl std::str::FromStr for DType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "int64" => Ok(DType::Int64),
            "int32" => Ok(DType::Int32),
            "float" | "float32" => Ok(DType::Float32),
            "bytes" | "string" => Ok(DType::Bytes),
            other => Err(format!(
                "unknown dtype {other:?} (int64, int32, float, bytes)"
            )),
        }
    }
}

impl std::str::FromStr for FeatureSpec {
    type Err = SpecParseError;

    /// Reads the text form `name:var_len:DTYPE`,
    /// `name:fixed_len[D1,D2,…]:DTYPE` or `name:image[H,W,C]:MODE` (MODE:
    /// `fixed`, `eval=S`, `train`, each optionally with `+flip`; see
    /// [`ImageSpec`]), comma-separated (the form `infeed
    /// inspect` prints and the CLI takes). A fixed-length feature without a
    /// default must be present in every record.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut spec = FeatureSpec::new();
        for item in split_top_level(s) {
            let bad = |reason: &str| SpecParseError {
                item: item.to_owned(),
                reason: reason.to_owned(),
            };
            let mut parts = item.splitn(3, ':');
            let (Some(name), Some(kind), Some(dtype)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad("needs name:kind:dtype"));
            };
            if name.is_empty() {
                return Err(bad("empty feature name"));
            }
            if let Some(dims) = kind
                .strip_prefix("image[")
                .and_then(|k| k.strip_suffix(']'))
            {
                let image = image_from_text(dims, dtype).map_err(|e| bad(&e))?;
                spec = spec.image(name, image);
                continue;
            }
            let dtype: DType = dtype.parse().map_err(|e: String| bad(&e))?;
            spec = if kind == "var_len" {
                spec.var_len(name, dtype)
            } else if let Some(dims) = kind
                .strip_prefix("fixed_len[")
                .and_then(|k| k.strip_suffix(']'))
            {
                let shape = dims
                    .split(',')
                    .filter(|d| !d.trim().is_empty())
                    .map(|d| {
                        d.trim()
                            .parse::<usize>()
                            .map_err(|_| bad("dimensions must be whole numbers"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                spec.fixed_len(name, dtype, &shape)
            } else {
                return Err(bad("kind must be var_len or fixed_len[dims]"));
            };
        }
        if spec.is_empty() {
            return Err(SpecParseError {
                item: s.to_owned(),
                reason: "no features".into(),
            });
        }
        Ok(spec)
    }
}

impl std::str::FromStr for ImageSpec {
    type Err = String;

    /// Reads the form [`Display`](fmt::Display) writes:
    /// `image[H,W,C]:MODE`, MODE `fixed`, `eval=S` or `train`, optionally
    /// followed by `+flip`; the spec is [checked](Self::check).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (dims, mode) = s
            .strip_prefix("image[")
            .and_then(|r| r.split_once("]:"))
            .ok_or_else(|| format!("{s:?} is not image[H,W,C]:MODE"))?;
        image_from_text(dims, mode)
    }
}

/// An image's text form after `image[`: `H,W,C` and the mode (`fixed`,
/// `eval=S`, `train`), optionally followed by `+flip`.
fn image_from_text(dims: &str, mode: &str) -> Result<ImageSpec, String> {
    let dims = dims
        .split(',')
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "image dimensions must be whole numbers".to_string())?;
    let &[h, w, c] = dims.as_slice() else {
        return Err("an image needs [height,width,channels]".into());
    };
    let (mode, flip) = match mode.strip_suffix("+flip") {
        Some(m) => (m, true),
        None => (mode, false),
    };
    let mut image = ImageSpec::new(h, w, c);
    image = match mode {
        "fixed" => image,
        "train" => image.random_resized_crop(),
        _ => match mode.strip_prefix("eval=").map(str::parse::<usize>) {
            Some(Ok(s)) => image.resize_crop(s),
            _ => {
                return Err(format!(
                    "image mode {mode:?}: expected fixed, eval=S or train (with +flip)"
                ));
            }
        },
    };
    if flip {
        image = image.flip();
    }
    image.check()?;
    Ok(image)
}

/// Splits at commas that are not inside `[…]`.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(s[start..].trim());
    items.into_iter().filter(|i| !i.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_parses_to_the_builder_spec() {
        let spec: FeatureSpec =
            "ids:var_len:int32, image:fixed_len[]:bytes,emb:fixed_len[2,3]:float"
                .parse()
                .unwrap();
        let expected = FeatureSpec::new()
            .var_len("ids", DType::Int32)
            .fixed_len("image", DType::Bytes, &[])
            .fixed_len("emb", DType::Float32, &[2, 3]);
        assert_eq!(spec, expected);
    }

    #[test]
    fn bad_text_names_the_item() {
        let err = "ids:var_len:int64,label:fixed:int64"
            .parse::<FeatureSpec>()
            .unwrap_err();
        assert_eq!(err.item, "label:fixed:int64");
        assert!(
            "ids:var_len:uint8"
                .parse::<FeatureSpec>()
                .unwrap_err()
                .reason
                .contains("unknown dtype")
        );
        assert!("".parse::<FeatureSpec>().is_err());
        assert!("x:fixed_len[a]:int64".parse::<FeatureSpec>().is_err());
    }

    #[test]
    fn image_text_form_parses_to_the_builder_spec() {
        let spec: FeatureSpec =
            "a:image[224,224,3]:train+flip,b:image[4,5,1]:fixed,c:image[224,224,3]:eval=256"
                .parse()
                .unwrap();
        let expected = FeatureSpec::new()
            .image(
                "a",
                ImageSpec::new(224, 224, 3).random_resized_crop().flip(),
            )
            .image("b", ImageSpec::new(4, 5, 1))
            .image("c", ImageSpec::new(224, 224, 3).resize_crop(256));
        assert_eq!(spec, expected);
        assert_eq!(
            spec.image_of("a").unwrap().to_string(),
            "image[224,224,3]:train+flip"
        );
        assert_eq!(spec.get("a").unwrap().fixed_count(), Some(1));
        let reason = |s: &str| s.parse::<FeatureSpec>().unwrap_err().reason;
        assert_eq!(
            reason("a:image[2,2,2]:fixed"),
            "channels must be 1, 3 or 4, not 2"
        );
        assert_eq!(
            reason("a:image[2,2]:fixed"),
            "an image needs [height,width,channels]"
        );
        assert_eq!(
            reason("a:image[224,224,3]:eval=200"),
            "the shorter side (200) must be at least the crop's height and width (224x224)"
        );
        assert_eq!(
            reason("a:image[2,2,3]:zoom"),
            "image mode \"zoom\": expected fixed, eval=S or train (with +flip)"
        );
        // A later plain feature of the same name is no longer an image.
        let spec = FeatureSpec::new()
            .image("a", ImageSpec::new(2, 2, 3))
            .var_len("a", DType::Int64);
        assert!(spec.images().is_empty());
    }
}
