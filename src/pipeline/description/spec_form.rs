//! A feature spec as a description holds it: a list of features, each a
//! table (`{"name": "label", "kind": "fixed_len", "dtype": "int64",
//! "shape": [1]}`), or the text form the command line takes
//! (`label:fixed_len[1]:int64,...`), read by [`FeatureSpec`]'s `FromStr`.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::pipeline::error::PipelineError;
use crate::spec::{
    DType, DefaultValue, FeatureKind, FeatureSpec, ImageSpec, SequenceKind, SequenceSpec,
};

/// How records are parsed: an Example's features, or a SequenceExample's
/// context features and feature lists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parse {
    /// The features of an Example, or the context of a SequenceExample.
    pub features: Features,
    /// The feature lists of a SequenceExample (absent: Example records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Vec<SequenceFeature>>,
    /// Feature lists a record must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
}

/// The features of a spec, in output order: tables, or the text form as
/// given (read when the pipeline is made, so that its error names the
/// item).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Features {
    Text(String),
    List(Vec<Feature>),
}

/// A spec a description gives that makes no spec.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecProblem {
    pub message: String,
    /// The feature at fault (the item, in the text form).
    pub feature: Option<String>,
}

impl From<SpecProblem> for PipelineError {
    fn from(p: SpecProblem) -> Self {
        PipelineError::Spec {
            message: p.message,
            feature: p.feature,
        }
    }
}

/// A problem with no feature to name.
fn unplaced(message: String) -> SpecProblem {
    SpecProblem {
        message,
        feature: None,
    }
}

/// One feature: `kind` `var_len` (with `dtype`), `fixed_len` (with
/// `dtype`, `shape` and maybe `default`) or `image` (with `image`, the text
/// form `image[H,W,C]:MODE`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feature {
    pub name: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Default>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// A fixed-length feature's default values, read by the feature's dtype.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Default(pub Vec<DefaultItem>);

/// One default value: a number; for a float feature `"nan"`, `"inf"` or
/// `"-inf"` too (JSON has no such numbers); for a bytes feature its text
/// (UTF-8) or its bytes as a list of numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DefaultItem {
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

/// One feature list of a SequenceExample: `kind` `fixed_len` (with
/// `shape`, its steps' shape) or `var_len`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceFeature {
    pub name: String,
    pub kind: String,
    pub dtype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<usize>>,
}

impl Parse {
    /// The form of an Example spec.
    pub fn of(spec: &FeatureSpec) -> Self {
        Parse {
            features: Features::of(spec),
            sequence: None,
            required: Vec::new(),
        }
    }

    /// The form of a SequenceExample spec.
    pub fn of_sequence(spec: &SequenceSpec) -> Self {
        let sequence = spec
            .sequence()
            .iter()
            .map(|f| SequenceFeature {
                name: f.name.clone(),
                kind: match f.kind {
                    SequenceKind::FixedLen { .. } => "fixed_len",
                    SequenceKind::VarLen => "var_len",
                }
                .into(),
                dtype: f.dtype.to_string(),
                shape: match &f.kind {
                    SequenceKind::FixedLen { shape } => Some(shape.clone()),
                    SequenceKind::VarLen => None,
                },
            })
            .collect();
        Parse {
            features: Features::of(spec.context()),
            sequence: Some(sequence),
            required: spec.required().to_vec(),
        }
    }

    /// The spec (the context's, for a SequenceExample) and the whole
    /// sequence spec; an error names the feature.
    pub fn specs(&self) -> Result<(FeatureSpec, Option<SequenceSpec>), SpecProblem> {
        // A SequenceExample may have no context features.
        let spec = match (&self.features, &self.sequence) {
            (Features::List(list), Some(_)) if list.is_empty() => FeatureSpec::new(),
            _ => self.features.spec()?,
        };
        let Some(lists) = &self.sequence else {
            if let Some(name) = self.required.first() {
                return Err(SpecProblem {
                    message: format!("required feature list {name:?} without `sequence`"),
                    feature: Some(name.clone()),
                });
            }
            return Ok((spec, None));
        };
        let mut sequence = SequenceSpec::new(spec.clone());
        for f in lists {
            let bad = |message: String| SpecProblem {
                message: format!("feature list {:?}: {message}", f.name),
                feature: Some(f.name.clone()),
            };
            let dtype: DType = f.dtype.parse().map_err(bad)?;
            sequence = match (f.kind.as_str(), &f.shape) {
                ("fixed_len", Some(shape)) => sequence.fixed_len_sequence(&f.name, dtype, shape),
                ("var_len", None) => sequence.var_len_sequence(&f.name, dtype),
                (kind, _) => {
                    return Err(bad(format!(
                        "kind {kind:?} (expected fixed_len with a shape, or var_len without \
                         one)"
                    )));
                }
            };
        }
        for name in &self.required {
            sequence = sequence.require(name);
        }
        Ok((spec, Some(sequence)))
    }
}

impl Features {
    fn of(spec: &FeatureSpec) -> Self {
        let features = spec.features().iter().map(|f| {
            if let Some(image) = spec.image_of(&f.name) {
                return Feature {
                    name: f.name.clone(),
                    kind: "image".into(),
                    dtype: None,
                    shape: None,
                    default: None,
                    image: Some(image.to_string()),
                };
            }
            let (kind, shape, default) = match &f.kind {
                FeatureKind::VarLen => ("var_len", None, None),
                FeatureKind::FixedLen { shape, default } => (
                    "fixed_len",
                    Some(shape.clone()),
                    default.as_ref().map(default_form),
                ),
            };
            Feature {
                name: f.name.clone(),
                kind: kind.into(),
                dtype: Some(f.dtype.to_string()),
                shape,
                default,
                image: None,
            }
        });
        Features::List(features.collect())
    }

    /// The spec these features make; an error names the feature.
    pub fn spec(&self) -> Result<FeatureSpec, SpecProblem> {
        let list = match self {
            Features::Text(text) => {
                return text
                    .parse()
                    .map_err(|e: crate::spec::SpecParseError| SpecProblem {
                        message: e.to_string(),
                        feature: Some(e.item),
                    });
            }
            Features::List(list) => list,
        };
        if list.is_empty() {
            return Err(unplaced("the spec has no features".into()));
        }
        let mut spec = FeatureSpec::new();
        for f in list {
            let bad = |m: String| SpecProblem {
                message: format!("feature {:?}: {m}", f.name),
                feature: Some(f.name.clone()),
            };
            if f.kind == "image" {
                let text = f
                    .image
                    .as_deref()
                    .ok_or_else(|| bad("an image needs `image`".into()))?;
                let image: ImageSpec = text.parse().map_err(bad)?;
                spec = spec.image(f.name.as_str(), image);
                continue;
            }
            let dtype: DType = f
                .dtype
                .as_deref()
                .ok_or_else(|| bad("needs a dtype".into()))?
                .parse()
                .map_err(bad)?;
            spec = match (f.kind.as_str(), &f.shape, &f.default) {
                ("var_len", None, None) => spec.var_len(f.name.as_str(), dtype),
                ("fixed_len", Some(shape), None) => spec.fixed_len(f.name.as_str(), dtype, shape),
                ("fixed_len", Some(shape), Some(default)) => {
                    let values = default_values(dtype, default).map_err(bad)?;
                    spec.fixed_len_with_default(f.name.as_str(), dtype, shape, values)
                        .map_err(|e| bad(e.to_string()))?
                }
                (kind, _, _) => {
                    return Err(bad(format!(
                        "kind {kind:?} (expected var_len; fixed_len with a shape, maybe a \
                         default; or image)"
                    )));
                }
            };
        }
        Ok(spec)
    }
}

/// The form of a default: each value as it reads back exactly.
fn default_form(d: &DefaultValue) -> Default {
    Default(match d {
        DefaultValue::Int64(v) => v.iter().map(|&x| DefaultItem::Int(x)).collect(),
        DefaultValue::Float32(v) => v
            .iter()
            .map(|&x| match x {
                x if x.is_finite() => DefaultItem::Float(f64::from(x)),
                x if x.is_nan() => DefaultItem::Text("nan".into()),
                x if x > 0.0 => DefaultItem::Text("inf".into()),
                _ => DefaultItem::Text("-inf".into()),
            })
            .collect(),
        DefaultValue::Bytes(v) => v
            .iter()
            .map(|b| match std::str::from_utf8(b) {
                Ok(text) => DefaultItem::Text(text.to_owned()),
                Err(_) => DefaultItem::Bytes(b.clone()),
            })
            .collect(),
    })
}

/// `default` as the values of a `dtype` feature.
fn default_values(dtype: DType, default: &Default) -> Result<DefaultValue, String> {
    fn no<T>(dtype: DType, item: &DefaultItem) -> Result<T, String> {
        Err(format!("default {item:?} is no {dtype} value"))
    }
    let items = default.0.iter();
    Ok(match dtype {
        DType::Int64 | DType::Int32 => DefaultValue::Int64(
            items
                .map(|item| match item {
                    DefaultItem::Int(x) => Ok(*x),
                    other => no(dtype, other),
                })
                .collect::<Result<_, _>>()?,
        ),
        DType::Float32 => DefaultValue::Float32(
            items
                .map(|item| match item {
                    DefaultItem::Int(x) => Ok(*x as f32),
                    DefaultItem::Float(x) => Ok(*x as f32),
                    DefaultItem::Text(w) if w == "nan" => Ok(f32::NAN),
                    DefaultItem::Text(w) if w == "inf" => Ok(f32::INFINITY),
                    DefaultItem::Text(w) if w == "-inf" => Ok(f32::NEG_INFINITY),
                    other => no(dtype, other),
                })
                .collect::<Result<_, _>>()?,
        ),
        DType::Bytes => DefaultValue::Bytes(
            items
                .map(|item| match item {
                    DefaultItem::Text(text) => Ok(text.as_bytes().to_vec()),
                    DefaultItem::Bytes(bytes) => Ok(bytes.clone()),
                    other => no(dtype, other),
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

impl<'de> Deserialize<'de> for Features {
    /// A list of feature tables, or the text form.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Form;
        impl<'de> Visitor<'de> for Form {
            type Value = Features;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of features, or a spec's text form")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Features, E> {
                Ok(Features::Text(text.to_owned()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Features, A::Error> {
                let mut features = Vec::new();
                while let Some(f) = seq.next_element()? {
                    features.push(f);
                }
                Ok(Features::List(features))
            }
        }
        d.deserialize_any(Form)
    }
}
