//! `features.json` → the Example features a TFDS dataset stores and the
//! [`FeatureSpec`] that parses them.
//!
//! Two forms exist: the current one, a `Feature` proto as proto-JSON
//! (`{"pythonClassName": "...FeaturesDict", "featuresDict": {"features": …}}`),
//! and the legacy one of older TFDS (`{"type": "...FeaturesDict", "content":
//! …}`, content as a dict, or as proto-JSON when `proto_cls` is set).
//!
//! How TFDS writes each feature (tensorflow_datasets/core/features and
//! example_serializer.py): nested dicts are flattened to `/`-joined keys
//! (`meta/id`); integers and bools go to an Int64List, floats (float64 too)
//! to a FloatList, strings to a BytesList; a `Sequence` puts its items'
//! values end to end in one list per key (a sequence of dicts gives one key
//! per field); a tensor with `encoding="bytes"` is one bytes value holding its
//! raw little-endian buffer.

use serde_json::{Map, Value};

use super::error::TfdsError;
use crate::spec::{DType, FeatureSpec, ImageSpec};

/// One Example feature of a TFDS dataset, as infeed parses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfdsFeature {
    /// Its key in the Example (nested dicts joined with `/`).
    pub name: String,
    /// The TFDS feature it comes from (`Tensor`, `ClassLabel`, `Image`, …).
    pub tfds_type: String,
    /// The type of its values on the wire.
    pub dtype: DType,
    /// Its TFDS shape, with the sequence dimension first for an item of a
    /// `Sequence`; `None` for an unknown dimension. An `Image`'s value is
    /// its encoded bytes: no dimension (or the sequence's).
    pub dims: Vec<Option<usize>>,
    /// For an `Image` decoded on the workers: the `[H, W, C]` every image of
    /// the dataset has (see [`image_feature`]).
    pub image: Option<[usize; 3]>,
}

impl TfdsFeature {
    /// The feature in the spec's text form (`name:fixed_len[2,3]:int64`,
    /// `name:var_len:string`), as `infeed inspect` prints specs.
    pub fn spec_text(&self) -> String {
        if let Some([h, w, c]) = self.image {
            return format!("{}:image[{h},{w},{c}]:fixed", self.name);
        }
        match self.fixed_shape() {
            Some(shape) => {
                let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
                format!("{}:fixed_len[{}]:{}", self.name, dims.join(","), self.dtype)
            }
            None => format!("{}:var_len:{}", self.name, self.dtype),
        }
    }

    /// The static shape of a fixed-length feature; `None` for a feature
    /// whose first dimension is unknown (parsed as variable-length, its
    /// values flattened).
    pub fn fixed_shape(&self) -> Option<Vec<usize>> {
        self.dims.iter().copied().collect()
    }
}

/// The features `features.json` (its text, read from `path`) describes.
pub fn parse_features(text: &[u8], path: &str) -> Result<Vec<TfdsFeature>, TfdsError> {
    let doc: Value = serde_json::from_slice(text).map_err(|e| TfdsError::Json {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let p = Parser { path };
    let root = p.node("", &doc)?;
    let mut out = Vec::new();
    p.flatten("", &root, None, &mut out)?;
    Ok(out)
}

/// The spec that parses `features`: decoded images where
/// [`TfdsFeature::image`] says so, fixed-length where every dimension is
/// known, variable-length otherwise.
pub fn spec_of(features: &[TfdsFeature]) -> FeatureSpec {
    features.iter().fold(FeatureSpec::new(), |spec, f| {
        match (f.image, f.fixed_shape()) {
            (Some([h, w, c]), _) => spec.image(f.name.clone(), ImageSpec::new(h, w, c)),
            (None, Some(shape)) => spec.fixed_len(f.name.clone(), f.dtype, &shape),
            (None, None) => spec.var_len(f.name.clone(), f.dtype),
        }
    })
}

/// How an `Image` feature of TFDS shape `shape` and dtype `dtype` is
/// parsed. Decoded on the workers to uint8 `[H, W, C]` (as `tfds` decodes
/// it) when that shape is static (MNIST's `(28, 28, 1)`), the dtype uint8
/// and the channels 1, 3 or 4. Otherwise its encoded bytes (PNG, JPEG, …
/// as stored), one value per image: images of unknown size need an output
/// size only the user can choose (a spec with an image entry: eval or train
/// crops), a `Sequence` of images (video frames) and 16-bit or float images
/// are not decoded by the dataset's spec.
pub fn image_feature(
    name: &str,
    outer: Option<Option<usize>>,
    shape: &[Option<usize>],
    dtype: &str,
) -> TfdsFeature {
    let image = match (outer, shape, dtype) {
        (None, &[Some(h), Some(w), Some(c)], "uint8")
            if ImageSpec::new(h, w, c).check().is_ok() =>
        {
            Some([h, w, c])
        }
        _ => None,
    };
    TfdsFeature {
        name: name.to_owned(),
        tfds_type: "Image".into(),
        dtype: DType::Bytes,
        dims: outer.into_iter().collect(),
        image,
    }
}

/// A feature connector, read from either form.
enum Node {
    Dict(Vec<(String, Node)>),
    Sequence {
        feature: Box<Node>,
        length: Option<usize>,
    },
    Tensor {
        class: String,
        dtype: String,
        shape: Vec<Option<usize>>,
        encoding: String,
    },
    ClassLabel,
    Text,
    Image {
        shape: Vec<Option<usize>>,
        dtype: String,
    },
}

struct Parser<'a> {
    path: &'a str,
}

impl Parser<'_> {
    fn field(&self, feature: &str, message: &str) -> TfdsError {
        TfdsError::Field {
            path: self.path.to_owned(),
            field: if feature.is_empty() {
                "(top level)".into()
            } else {
                feature.to_owned()
            },
            message: message.to_owned(),
        }
    }

    fn unsupported(&self, feature: &str, reason: String) -> TfdsError {
        TfdsError::UnsupportedFeature {
            path: self.path.to_owned(),
            feature: feature.to_owned(),
            reason,
        }
    }

    /// The feature `v`, at key `name`.
    fn node(&self, name: &str, v: &Value) -> Result<Node, TfdsError> {
        let obj = v
            .as_object()
            .ok_or_else(|| self.field(name, "not a JSON object"))?;
        if let Some(class) = obj.get("type") {
            let class = class
                .as_str()
                .ok_or_else(|| self.field(name, "\"type\" is not a string"))?;
            let content = obj.get("content").unwrap_or(&Value::Null);
            // `proto_cls`: the content is the proto-JSON of the feature's message.
            let proto = obj.contains_key("proto_cls");
            return self.legacy(name, class, content, proto);
        }
        let class = obj
            .get("pythonClassName")
            .and_then(Value::as_str)
            .unwrap_or("(no pythonClassName)");
        for key in [
            "featuresDict",
            "sequence",
            "tensor",
            "boundingBox",
            "classLabel",
            "text",
            "image",
        ] {
            if let Some(content) = obj.get(key) {
                return self.content(name, key, short(class), content, true);
            }
        }
        Err(TfdsError::UnknownFeature {
            path: self.path.to_owned(),
            feature: name.to_owned(),
            type_name: class.to_owned(),
        })
    }

    /// A legacy `{"type": class, "content": content}`.
    fn legacy(
        &self,
        name: &str,
        class: &str,
        content: &Value,
        proto: bool,
    ) -> Result<Node, TfdsError> {
        let kind = match short(class) {
            "FeaturesDict" => "featuresDict",
            "Sequence" => "sequence",
            "Tensor" | "Scalar" => "tensor",
            "BBoxFeature" => "boundingBox",
            "ClassLabel" => "classLabel",
            "Text" => "text",
            "Image" => "image",
            _ => {
                return Err(TfdsError::UnknownFeature {
                    path: self.path.to_owned(),
                    feature: name.to_owned(),
                    type_name: class.to_owned(),
                });
            }
        };
        self.content(name, kind, short(class), content, proto)
    }

    /// The content of a feature of `kind` (the proto's field name), as
    /// proto-JSON (`proto`) or as a legacy dict.
    fn content(
        &self,
        name: &str,
        kind: &str,
        class: &str,
        content: &Value,
        proto: bool,
    ) -> Result<Node, TfdsError> {
        let empty = Map::new();
        let obj = match content {
            Value::Object(o) => o,
            Value::Null => &empty,
            _ => return Err(self.field(name, "the feature's content is not a JSON object")),
        };
        Ok(match kind {
            "featuresDict" => {
                let features = if proto {
                    match obj.get("features") {
                        None => &empty,
                        Some(Value::Object(f)) => f,
                        Some(_) => return Err(self.field(name, "\"features\" is not an object")),
                    }
                } else {
                    obj
                };
                let mut children = Vec::with_capacity(features.len());
                for (key, child) in features {
                    let child_name = join(name, key);
                    children.push((key.clone(), self.node(&child_name, child)?));
                }
                Node::Dict(children)
            }
            "sequence" => {
                let feature = obj
                    .get("feature")
                    .ok_or_else(|| self.field(name, "a Sequence without \"feature\""))?;
                let length = match obj.get("length") {
                    None | Some(Value::Null) => None,
                    Some(v) => match dim(v) {
                        Some(d) => d,
                        None => {
                            return Err(self.field(name, "the Sequence's length is not a number"));
                        }
                    },
                };
                Node::Sequence {
                    feature: Box::new(self.node(name, feature)?),
                    length,
                }
            }
            "tensor" | "boundingBox" => {
                let dtype = obj
                    .get("dtype")
                    .and_then(Value::as_str)
                    .ok_or_else(|| self.field(name, "a tensor without a \"dtype\" string"))?;
                let shape = self.shape(name, obj.get("shape"))?;
                let encoding = obj
                    .get("encoding")
                    .and_then(Value::as_str)
                    .unwrap_or("none");
                Node::Tensor {
                    class: class.to_owned(),
                    dtype: dtype.to_owned(),
                    shape,
                    encoding: encoding.to_owned(),
                }
            }
            "classLabel" => Node::ClassLabel,
            "text" => {
                if obj
                    .get("use_encoder")
                    .is_some_and(|v| v != &Value::Bool(false))
                {
                    return Err(self.unsupported(
                        name,
                        "a Text feature with a (deprecated) text encoder: its values are \
                         token ids TFDS no longer reads either"
                            .into(),
                    ));
                }
                Node::Text
            }
            _ => Node::Image {
                shape: self.shape(name, obj.get("shape"))?,
                // TFDS's default, which older files leave out.
                dtype: obj
                    .get("dtype")
                    .and_then(Value::as_str)
                    .unwrap_or("uint8")
                    .to_owned(),
            },
        })
    }

    /// A shape: proto-JSON `{"dimensions": ["-1", "3"]}` (`{}` for a
    /// scalar) or a legacy list `[null, 3]`.
    fn shape(&self, name: &str, v: Option<&Value>) -> Result<Vec<Option<usize>>, TfdsError> {
        let dims = match v {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(dims)) => dims,
            Some(Value::Object(o)) => match o.get("dimensions") {
                None => return Ok(Vec::new()),
                Some(Value::Array(dims)) => dims,
                Some(_) => return Err(self.field(name, "\"dimensions\" is not a list")),
            },
            Some(_) => return Err(self.field(name, "\"shape\" is neither a list nor an object")),
        };
        dims.iter()
            .map(|d| match d {
                Value::Null => Ok(None),
                d => dim(d).ok_or_else(|| self.field(name, "a dimension is not a number")),
            })
            .collect()
    }

    /// Appends the Example features of `node` at key `name`; `outer` is the
    /// length of the enclosing `Sequence` (`Some(None)`: unknown).
    fn flatten(
        &self,
        name: &str,
        node: &Node,
        outer: Option<Option<usize>>,
        out: &mut Vec<TfdsFeature>,
    ) -> Result<(), TfdsError> {
        let leaf = |tfds_type: &str, dtype: DType, inner: &[Option<usize>]| {
            let dims: Vec<Option<usize>> = outer.into_iter().chain(inner.iter().copied()).collect();
            // TFDS parses an unknown first dimension as a sequence of fixed
            // items; an unknown one further in it cannot parse without a codec.
            if dims.iter().skip(1).any(Option::is_none) {
                return Err(self.unsupported(
                    name,
                    format!(
                        "{tfds_type} of shape {}: only the first dimension may be unknown",
                        shape_text(&dims)
                    ),
                ));
            }
            Ok(TfdsFeature {
                name: name.to_owned(),
                tfds_type: tfds_type.to_owned(),
                dtype,
                dims,
                image: None,
            })
        };
        match node {
            Node::Dict(children) => {
                for (key, child) in children {
                    self.flatten(&join(name, key), child, outer, out)?;
                }
            }
            Node::Sequence { feature, length } => {
                if outer.is_some() {
                    return Err(self.unsupported(
                        name,
                        "a Sequence inside a Sequence (ragged in two dimensions)".into(),
                    ));
                }
                self.flatten(name, feature, Some(*length), out)?;
            }
            Node::Tensor {
                class,
                dtype,
                shape,
                encoding,
            } => {
                let wire = wire_dtype(dtype).ok_or_else(|| {
                    self.unsupported(
                        name,
                        format!("{class} of dtype {dtype:?}, not a TFDS dtype"),
                    )
                })?;
                match encoding.as_str() {
                    "none" | "" => out.push(leaf(class, wire, shape)?),
                    // One bytes value per tensor: its raw buffer.
                    "bytes" if shape.iter().filter(|d| d.is_none()).count() <= 1 => {
                        out.push(leaf(class, DType::Bytes, &[])?)
                    }
                    "bytes" => {
                        return Err(self.unsupported(
                            name,
                            format!(
                                "{class} of shape {} encoded as bytes: its shape is stored \
                                 beside it and is not read",
                                shape_text(shape)
                            ),
                        ));
                    }
                    other => {
                        return Err(self.unsupported(
                            name,
                            format!("{class} with encoding {other:?}: infeed does not inflate it"),
                        ));
                    }
                }
            }
            Node::ClassLabel => out.push(leaf("ClassLabel", DType::Int64, &[])?),
            Node::Text => out.push(leaf("Text", DType::Bytes, &[])?),
            Node::Image { shape, dtype } => out.push(image_feature(name, outer, shape, dtype)),
        }
        Ok(())
    }
}

/// The type of a TFDS dtype's values in an Example.
fn wire_dtype(dtype: &str) -> Option<DType> {
    Some(match dtype {
        "bool" | "int8" | "int16" | "int32" | "int64" | "uint8" | "uint16" | "uint32"
        | "uint64" => DType::Int64,
        "float16" | "bfloat16" | "float32" | "float64" => DType::Float32,
        "string" | "str" | "bytes" | "object" => DType::Bytes,
        _ => return None,
    })
}

/// A proto-JSON dimension (`"-1"`: unknown) or a legacy one.
fn dim(v: &Value) -> Option<Option<usize>> {
    let n = match v {
        Value::String(s) => s.parse::<i64>().ok()?,
        Value::Number(n) => n.as_i64()?,
        _ => return None,
    };
    if n == -1 {
        Some(None)
    } else {
        usize::try_from(n).ok().map(Some)
    }
}

/// `a/b` (or `b` at the top).
fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}/{key}")
    }
}

/// The class name without its module.
fn short(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

/// `[None, 3]` as TFDS prints shapes.
fn shape_text(dims: &[Option<usize>]) -> String {
    let dims: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("None".into(), |d| d.to_string()))
        .collect();
    format!("({})", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: &str, dims: &[&str], encoding: &str) -> String {
        let dims: Vec<String> = dims.iter().map(|d| format!("\"{d}\"")).collect();
        let shape = if dims.is_empty() {
            "{}".to_owned()
        } else {
            format!("{{\"dimensions\": [{}]}}", dims.join(", "))
        };
        format!(
            r#"{{"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
                "tensor": {{"dtype": "{dtype}", "encoding": "{encoding}", "shape": {shape}}}}}"#
        )
    }

    fn dict(features: &[(&str, String)]) -> String {
        let items: Vec<String> = features
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        format!(
            r#"{{"pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
                "featuresDict": {{"features": {{{}}}}}}}"#,
            items.join(", ")
        )
    }

    fn sequence(feature: &str, length: i64) -> String {
        format!(
            r#"{{"pythonClassName": "tensorflow_datasets.core.features.sequence_feature.Sequence",
                "sequence": {{"feature": {feature}, "length": "{length}"}}}}"#
        )
    }

    const LABEL: &str = r#"{"pythonClassName": "tensorflow_datasets.core.features.class_label_feature.ClassLabel",
        "classLabel": {"numClasses": "3"}}"#;
    const TEXT: &str =
        r#"{"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text", "text": {}}"#;
    const IMAGE: &str = r#"{"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
        "image": {"dtype": "uint8", "encodingFormat": "png", "shape": {"dimensions": ["4", "4", "3"]}}}"#;

    /// (name, type, dtype, fixed shape) of each feature.
    fn summary(fs: &[TfdsFeature]) -> Vec<(String, String, DType, Option<Vec<usize>>)> {
        fs.iter()
            .map(|f| {
                (
                    f.name.clone(),
                    f.tfds_type.clone(),
                    f.dtype,
                    f.fixed_shape(),
                )
            })
            .collect()
    }

    #[test]
    fn maps_every_known_feature_and_flattens_dicts() {
        let doc = dict(&[
            ("label", LABEL.into()),
            ("text", TEXT.into()),
            ("image", IMAGE.into()),
            ("score", tensor("float64", &[], "none")),
            ("vec", tensor("int32", &["2", "3"], "none")),
            ("ragged", tensor("int64", &["-1"], "none")),
            ("rows", tensor("uint8", &["-1", "3"], "none")),
            ("raw", tensor("uint8", &["2", "2"], "bytes")),
            ("tokens", sequence(&tensor("int64", &[], "none"), -1)),
            ("three", sequence(&tensor("float32", &["2"], "none"), 3)),
            ("frames", sequence(IMAGE, -1)),
            (
                "meta",
                dict(&[
                    ("id", tensor("int64", &[], "none")),
                    ("deep", dict(&[("t", TEXT.into())])),
                ]),
            ),
            (
                "steps",
                sequence(
                    &dict(&[("x", tensor("int64", &[], "none")), ("y", TEXT.into())]),
                    -1,
                ),
            ),
        ]);
        let fs = parse_features(doc.as_bytes(), "features.json").unwrap();
        let s = |v: &[usize]| Some(v.to_vec());
        let want = vec![
            ("frames", "Image", DType::Bytes, None),
            ("image", "Image", DType::Bytes, s(&[])),
            ("label", "ClassLabel", DType::Int64, s(&[])),
            ("meta/deep/t", "Text", DType::Bytes, s(&[])),
            ("meta/id", "Tensor", DType::Int64, s(&[])),
            ("ragged", "Tensor", DType::Int64, None),
            ("raw", "Tensor", DType::Bytes, s(&[])),
            ("rows", "Tensor", DType::Int64, None),
            ("score", "Tensor", DType::Float32, s(&[])),
            ("steps/x", "Tensor", DType::Int64, None),
            ("steps/y", "Text", DType::Bytes, None),
            ("text", "Text", DType::Bytes, s(&[])),
            ("three", "Tensor", DType::Float32, s(&[3, 2])),
            ("tokens", "Tensor", DType::Int64, None),
            ("vec", "Tensor", DType::Int64, s(&[2, 3])),
        ];
        let want: Vec<_> = want
            .into_iter()
            .map(|(n, t, d, s)| (n.to_owned(), t.to_owned(), d, s))
            .collect();
        assert_eq!(summary(&fs), want);
        let rows = fs.iter().find(|f| f.name == "rows").unwrap();
        assert_eq!(rows.dims, [None, Some(3)]);
        let texts: Vec<String> = fs.iter().take(2).map(TfdsFeature::spec_text).collect();
        assert_eq!(texts, ["frames:var_len:string", "image:image[4,4,3]:fixed"]);
        // A static uint8 image decodes; a sequence of them (frames) does not.
        assert_eq!((fs[0].image, fs[1].image), (None, Some([4, 4, 3])));
        assert_eq!(fs[14].spec_text(), "vec:fixed_len[2,3]:int64");
        let text: Vec<String> = fs.iter().map(TfdsFeature::spec_text).collect();
        let parsed: FeatureSpec = text.join(",").parse().unwrap();
        let spec = spec_of(&fs);
        assert_eq!(parsed.features(), spec.features());
        assert_eq!(parsed.images(), spec.images());
        assert_eq!(
            spec.images(),
            [("image".to_owned(), ImageSpec::new(4, 4, 3))]
        );
        assert_eq!(spec.len(), 15);
        assert!(spec.get("meta/id").is_some());
    }

    #[test]
    fn only_static_uint8_images_of_1_3_or_4_channels_are_decoded() {
        let image = |dtype: &str, dims: &[&str]| {
            let dims: Vec<String> = dims.iter().map(|d| format!("\"{d}\"")).collect();
            format!(
                r#"{{"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
                    "image": {{"dtype": "{dtype}", "encodingFormat": "png",
                               "shape": {{"dimensions": [{}]}}}}}}"#,
                dims.join(", ")
            )
        };
        let doc = dict(&[
            ("gray", image("uint8", &["28", "28", "1"])),
            ("rgba", image("uint8", &["5", "7", "4"])),
            ("any", image("uint8", &["-1", "-1", "3"])),
            ("wide", image("uint16", &["28", "28", "1"])),
            ("float", image("float32", &["28", "28", "1"])),
            ("two", image("uint8", &["28", "28", "2"])),
        ]);
        let fs = parse_features(doc.as_bytes(), "features.json").unwrap();
        let got: Vec<(&str, Option<[usize; 3]>)> =
            fs.iter().map(|f| (f.name.as_str(), f.image)).collect();
        assert_eq!(
            got,
            [
                ("any", None),
                ("float", None),
                ("gray", Some([28, 28, 1])),
                ("rgba", Some([5, 7, 4])),
                ("two", None),
                ("wide", None),
            ]
        );
        // The rest stay one encoded value each.
        assert!(
            fs.iter()
                .all(|f| f.dtype == DType::Bytes && f.dims.is_empty())
        );
        assert_eq!(spec_of(&fs).images().len(), 2);
    }

    #[test]
    fn reads_the_legacy_form() {
        let doc = r#"{"type": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
          "content": {
            "image": {"type": "tensorflow_datasets.core.features.image_feature.Image",
                      "content": {"shape": [null, null, 3], "dtype": "uint8", "encoding_format": "jpeg"}},
            "label": {"type": "tensorflow_datasets.core.features.class_label_feature.ClassLabel",
                      "content": {"num_classes": 10}},
            "emb": {"type": "tensorflow_datasets.core.features.feature.Tensor",
                    "content": {"shape": [4], "dtype": "float32"}},
            "ids": {"type": "tensorflow_datasets.core.features.sequence_feature.Sequence",
                    "content": {"feature": {"type": "tensorflow_datasets.core.features.feature.Tensor",
                                            "content": {"shape": [], "dtype": "int64"}},
                                "length": null}},
            "text": {"type": "tensorflow_datasets.core.features.text_feature.Text", "content": {}},
            "proto": {"type": "tensorflow_datasets.core.features.tensor_feature.Tensor",
                      "proto_cls": "tensorflow_datasets.TensorFeature",
                      "content": {"shape": {"dimensions": ["2"]}, "dtype": "int64", "encoding": "none"}}
          }}"#;
        let fs = parse_features(doc.as_bytes(), "features.json").unwrap();
        let got: Vec<(String, DType, Option<Vec<usize>>)> = fs
            .iter()
            .map(|f| (f.name.clone(), f.dtype, f.fixed_shape()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("emb".into(), DType::Float32, Some(vec![4])),
                ("ids".into(), DType::Int64, None),
                ("image".into(), DType::Bytes, Some(vec![])),
                ("label".into(), DType::Int64, Some(vec![])),
                ("proto".into(), DType::Int64, Some(vec![2])),
                ("text".into(), DType::Bytes, Some(vec![])),
            ]
        );
    }

    #[test]
    fn unknown_and_unsupported_features_are_errors_naming_them() {
        let video = r#"{"pythonClassName": "tensorflow_datasets.core.features.video_feature.Video",
                        "video": {}}"#;
        let err = parse_features(
            dict(&[("clip", video.into())]).as_bytes(),
            "d/features.json",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "d/features.json: feature \"clip\": unknown feature type \
             \"tensorflow_datasets.core.features.video_feature.Video\""
        );
        let legacy = r#"{"type": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
            "content": {"a": {"type": "my.project.Custom", "content": {}}}}"#;
        let err = parse_features(legacy.as_bytes(), "f").unwrap_err();
        assert!(
            matches!(&err, TfdsError::UnknownFeature { feature, type_name, .. }
                if feature == "a" && type_name == "my.project.Custom"),
            "{err:?}"
        );
        let cases = [
            (
                "nested",
                sequence(&sequence(&tensor("int64", &[], "none"), -1), -1),
                "inside a Sequence",
            ),
            ("z", tensor("float32", &["3"], "zlib"), "zlib"),
            (
                "two",
                tensor("int64", &["-1", "-1"], "none"),
                "only the first dimension",
            ),
            (
                "dyn",
                tensor("int64", &["-1", "-1"], "bytes"),
                "encoded as bytes",
            ),
            ("d", tensor("complex64", &[], "none"), "complex64"),
        ];
        for (name, feature, says) in cases {
            let err = parse_features(dict(&[(name, feature)]).as_bytes(), "f").unwrap_err();
            assert!(
                matches!(&err, TfdsError::UnsupportedFeature { feature, .. } if feature == name),
                "{name}: {err:?}"
            );
            assert!(err.to_string().contains(says), "{name}: {err}");
        }
        let err = parse_features(b"[1, 2", "d/features.json").unwrap_err();
        assert!(matches!(err, TfdsError::Json { .. }), "{err:?}");
        let err =
            parse_features(dict(&[("t", "{\"tensor\": {}}".into())]).as_bytes(), "f").unwrap_err();
        assert!(err.to_string().contains("dtype"), "{err}");
    }
}
