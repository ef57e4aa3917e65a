//! StableHLO programs as MLIR text, and the signature of their `main`
//! function, read by us so that a batch whose shapes or types do not match
//! the program is refused with both shapes named, before the plugin sees it.

use std::fmt;

use super::error::XlaError;
use super::sys;
use crate::batch::TensorType;

/// The element type of a device array (the PJRT buffer types infeed uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// Boolean (`i1` in MLIR).
    Pred,
    S8,
    S16,
    S32,
    S64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

impl ElementType {
    /// Bytes per element (a boolean takes one byte on the host).
    pub fn size(self) -> usize {
        match self {
            ElementType::Pred | ElementType::S8 | ElementType::U8 => 1,
            ElementType::S16 | ElementType::U16 | ElementType::F16 | ElementType::BF16 => 2,
            ElementType::S32 | ElementType::U32 | ElementType::F32 => 4,
            ElementType::S64 | ElementType::U64 | ElementType::F64 => 8,
        }
    }

    /// The MLIR spelling (`i32`, `f32`, `ui8`, `i1`, ...).
    pub fn mlir_name(self) -> &'static str {
        match self {
            ElementType::Pred => "i1",
            ElementType::S8 => "i8",
            ElementType::S16 => "i16",
            ElementType::S32 => "i32",
            ElementType::S64 => "i64",
            ElementType::U8 => "ui8",
            ElementType::U16 => "ui16",
            ElementType::U32 => "ui32",
            ElementType::U64 => "ui64",
            ElementType::F16 => "f16",
            ElementType::BF16 => "bf16",
            ElementType::F32 => "f32",
            ElementType::F64 => "f64",
        }
    }

    fn from_mlir(name: &str) -> Option<Self> {
        Some(match name {
            "i1" => ElementType::Pred,
            "i8" | "si8" => ElementType::S8,
            "i16" | "si16" => ElementType::S16,
            "i32" | "si32" => ElementType::S32,
            "i64" | "si64" => ElementType::S64,
            "ui8" => ElementType::U8,
            "ui16" => ElementType::U16,
            "ui32" => ElementType::U32,
            "ui64" => ElementType::U64,
            "f16" => ElementType::F16,
            "bf16" => ElementType::BF16,
            "f32" => ElementType::F32,
            "f64" => ElementType::F64,
            _ => return None,
        })
    }

    /// The batch tensor type with the same elements, if there is one.
    pub fn tensor_type(self) -> Option<TensorType> {
        match self {
            ElementType::S64 => Some(TensorType::I64),
            ElementType::S32 => Some(TensorType::I32),
            ElementType::F32 => Some(TensorType::F32),
            ElementType::U8 => Some(TensorType::U8),
            _ => None,
        }
    }

    pub(crate) fn to_pjrt(self) -> sys::PJRT_Buffer_Type {
        match self {
            ElementType::Pred => sys::PJRT_Buffer_Type_PRED,
            ElementType::S8 => sys::PJRT_Buffer_Type_S8,
            ElementType::S16 => sys::PJRT_Buffer_Type_S16,
            ElementType::S32 => sys::PJRT_Buffer_Type_S32,
            ElementType::S64 => sys::PJRT_Buffer_Type_S64,
            ElementType::U8 => sys::PJRT_Buffer_Type_U8,
            ElementType::U16 => sys::PJRT_Buffer_Type_U16,
            ElementType::U32 => sys::PJRT_Buffer_Type_U32,
            ElementType::U64 => sys::PJRT_Buffer_Type_U64,
            ElementType::F16 => sys::PJRT_Buffer_Type_F16,
            ElementType::BF16 => sys::PJRT_Buffer_Type_BF16,
            ElementType::F32 => sys::PJRT_Buffer_Type_F32,
            ElementType::F64 => sys::PJRT_Buffer_Type_F64,
        }
    }

    pub(crate) fn from_pjrt(t: sys::PJRT_Buffer_Type) -> Option<Self> {
        [
            ElementType::Pred,
            ElementType::S8,
            ElementType::S16,
            ElementType::S32,
            ElementType::S64,
            ElementType::U8,
            ElementType::U16,
            ElementType::U32,
            ElementType::U64,
            ElementType::F16,
            ElementType::BF16,
            ElementType::F32,
            ElementType::F64,
        ]
        .into_iter()
        .find(|e| e.to_pjrt() == t)
    }
}

impl From<TensorType> for ElementType {
    fn from(t: TensorType) -> Self {
        match t {
            TensorType::I64 => ElementType::S64,
            TensorType::I32 => ElementType::S32,
            TensorType::F32 => ElementType::F32,
            TensorType::U8 => ElementType::U8,
            TensorType::BF16 => ElementType::BF16,
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mlir_name())
    }
}

/// The type of one array: element type and static dimensions. Displayed as
/// MLIR writes it, `tensor<32x128xi32>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayType {
    pub dtype: ElementType,
    pub dims: Vec<usize>,
}

impl ArrayType {
    /// An array type.
    pub fn new(dtype: ElementType, dims: &[usize]) -> Self {
        Self {
            dtype,
            dims: dims.to_vec(),
        }
    }

    /// Bytes of a dense row-major array of this type, `None` on overflow.
    pub fn byte_size(&self) -> Option<usize> {
        self.dims
            .iter()
            .try_fold(self.dtype.size(), |n, &d| n.checked_mul(d))
    }

    /// Parses `tensor<AxBxT>` (static dimensions only).
    fn parse(text: &str) -> Result<Self, String> {
        let inner = text
            .trim()
            .strip_prefix("tensor<")
            .and_then(|t| t.strip_suffix('>'))
            .ok_or_else(|| format!("`{text}` is not a ranked tensor type"))?;
        // An encoding (`tensor<4xf32, #enc>`) is not supported.
        if inner.contains(',') {
            return Err(format!(
                "`{text}` has an encoding; only plain tensors are supported"
            ));
        }
        // Leading `<dim>x` groups are dimensions; what is left is the type.
        let mut rest = inner.trim();
        let mut dim_texts = Vec::new();
        loop {
            let n = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '?'))
                .unwrap_or(rest.len());
            if n > 0 && rest[n..].starts_with('x') {
                dim_texts.push(&rest[..n]);
                rest = &rest[n + 1..];
            } else {
                break;
            }
        }
        let dtype_name = rest.trim();
        let dtype = ElementType::from_mlir(dtype_name)
            .ok_or_else(|| format!("element type `{dtype_name}` of `{text}` is not supported"))?;
        let dims = dim_texts
            .iter()
            .map(|d| {
                d.parse::<usize>().map_err(|_| {
                    format!("dimension `{d}` of `{text}` is not static (shapes must be static)")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { dtype, dims })
    }
}

impl fmt::Display for ArrayType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.dims {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.dtype)
    }
}

/// Parameter and result types of a program's `main`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub params: Vec<ArrayType>,
    pub results: Vec<ArrayType>,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, types: &[ArrayType]| {
            for (i, t) in types.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{t}")?;
            }
            Ok(())
        };
        f.write_str("(")?;
        list(f, &self.params)?;
        f.write_str(") -> (")?;
        list(f, &self.results)?;
        f.write_str(")")
    }
}

/// A StableHLO program in MLIR text form with its `main` signature.
#[derive(Clone, Debug)]
pub struct Program {
    text: String,
    signature: Signature,
}

impl Program {
    /// Reads the signature of `@main` from MLIR text: every parameter and
    /// result must be a statically shaped tensor.
    pub fn from_mlir(text: impl Into<String>) -> Result<Self, XlaError> {
        let text = text.into();
        let signature = parse_main(&text).map_err(|message| XlaError::Program { message })?;
        Ok(Self { text, signature })
    }

    /// The MLIR text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The types of `main`'s parameters and results.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }
}

/// Index of the bracket closing the one opened at `open` (which must be one
/// of `( [ { <`), skipping string literals; `None` when unbalanced.
fn closing(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = Vec::new();
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b @ (b'(' | b'[' | b'{' | b'<') => depth.push(b),
            b @ (b')' | b']' | b'}' | b'>') => {
                // `->` is an arrow, not a closing bracket.
                if b == b'>' && i > 0 && bytes[i - 1] == b'-' {
                    i += 1;
                    continue;
                }
                let want = match b {
                    b')' => b'(',
                    b']' => b'[',
                    b'}' => b'{',
                    _ => b'<',
                };
                if depth.pop() != Some(want) {
                    return None;
                }
                if depth.is_empty() {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits `text` at top-level commas (outside brackets and strings).
fn split_top(text: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'{' | b'<' | b'"' => {
                i = if bytes[i] == b'"' {
                    closing_quote(text, i)
                } else {
                    closing(text, i)
                }
                .ok_or_else(|| format!("unbalanced brackets in `{text}`"))?;
            }
            b',' => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if !text[start..].trim().is_empty() {
        out.push(&text[start..]);
    }
    Ok(out)
}

fn closing_quote(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'"' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The leading `tensor<...>` of `text` (a type possibly followed by
/// attributes).
fn leading_type(text: &str) -> Result<ArrayType, String> {
    let text = text.trim();
    let open = text
        .find('<')
        .filter(|_| text.starts_with("tensor<"))
        .ok_or_else(|| format!("`{text}` is not a tensor type"))?;
    let close = closing(text, open).ok_or_else(|| format!("unbalanced `{text}`"))?;
    ArrayType::parse(&text[..=close])
}

fn parse_main(text: &str) -> Result<Signature, String> {
    let at = text
        .find("@main(")
        .ok_or("the program has no `func.func @main(...)`")?;
    let open = at + "@main".len();
    let close = closing(text, open).ok_or("unbalanced parameter list of @main")?;
    let params = split_top(&text[open + 1..close])?
        .into_iter()
        .enumerate()
        .map(|(i, arg)| {
            let (_, ty) = arg
                .split_once(':')
                .ok_or_else(|| format!("parameter {i} of @main (`{}`) has no type", arg.trim()))?;
            leading_type(ty).map_err(|e| format!("parameter {i} of @main: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let rest = text[close + 1..].trim_start();
    let results = match rest.strip_prefix("->") {
        None => Vec::new(),
        Some(rest) => {
            let rest = rest.trim_start();
            if rest.starts_with('(') {
                let start = text.len() - rest.len();
                let end = closing(text, start).ok_or("unbalanced result list of @main")?;
                split_top(&text[start + 1..end])?
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| leading_type(r).map_err(|e| format!("result {i} of @main: {e}")))
                    .collect::<Result<Vec<_>, String>>()?
            } else {
                vec![leading_type(rest).map_err(|e| format!("result 0 of @main: {e}"))?]
            }
        }
    };
    Ok(Signature { params, results })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_main_signature() {
        let text = r#"module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32> {jax.arg_info = "w", mhlo.sharding = "{replicated}"}, %ids: tensor<32x128xi32>, %s: tensor<f32>) -> (tensor<f32> {jax.result_info = "loss"}, tensor<16xf32>) {
    return %s, %arg0 : tensor<f32>, tensor<16xf32>
  }
}"#;
        let p = Program::from_mlir(text).unwrap();
        assert_eq!(
            p.signature().to_string(),
            "(tensor<16xf32>, tensor<32x128xi32>, tensor<f32>) -> (tensor<f32>, tensor<16xf32>)"
        );
        assert_eq!(
            p.signature().params[1],
            ArrayType::new(ElementType::S32, &[32, 128])
        );
    }

    #[test]
    fn single_result_and_no_result() {
        let one = "func.func @main(%a: tensor<2x3xui8>) -> tensor<2x3xui8> {\n return %a : tensor<2x3xui8>\n}";
        let sig = Program::from_mlir(one).unwrap().signature().clone();
        assert_eq!(sig.results, vec![ArrayType::new(ElementType::U8, &[2, 3])]);
        let none = "func.func @main() {\n return\n}";
        let sig = Program::from_mlir(none).unwrap().signature().clone();
        assert!(sig.params.is_empty() && sig.results.is_empty());
    }

    #[test]
    fn refuses_dynamic_and_unknown() {
        let dynamic = "func.func @main(%a: tensor<?x3xf32>) -> tensor<f32> {}";
        let err = Program::from_mlir(dynamic).unwrap_err().to_string();
        assert!(
            err.contains("dimension `?` of `tensor<?x3xf32>` is not static"),
            "{err}"
        );
        let complex = "func.func @main(%a: tensor<3xcomplex<f32>>) -> tensor<f32> {}";
        let err = Program::from_mlir(complex).unwrap_err().to_string();
        assert!(err.contains("element type `complex<f32>`"), "{err}");
        let missing = "func.func @step(%a: tensor<3xf32>) {}";
        let err = Program::from_mlir(missing).unwrap_err().to_string();
        assert!(err.contains("no `func.func @main"), "{err}");
    }
}
