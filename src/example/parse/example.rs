//! `tf.train.Example` records: [`ExampleParser`].

use super::buffers::{bytes_of, recycled};
use super::canonical;
use super::columns::ParsedBatch;
use super::error::{ParseError, malformed};
use super::feature_set::FeatureSet;
use crate::example::runs::PackedRuns;
use crate::example::wire::{Cursor, Span, TAG_1_LEN, TAG_3_LEN, WireError};
use crate::prefetch::{START_BYTES, prefetch_ahead};
use crate::spec::{DType, FeatureSpec};

/// Parses batches of serialized `tf.train.Example`s by a [`FeatureSpec`],
/// like `tf.io.parse_example`. Build it once per spec: it precomputes the
/// name lookup and keeps scratch space between batches.
pub struct ExampleParser {
    set: FeatureSet,
    /// Scratch of [`ExampleParser::locate_runs`], kept between batches.
    runs: PackedRuns,
}

impl ExampleParser {
    /// A parser for `spec`.
    pub fn new(spec: &FeatureSpec) -> Self {
        Self {
            set: FeatureSet::new(spec, true),
            runs: PackedRuns::default(),
        }
    }

    /// The spec's features (name and dtype, in order) when all are
    /// variable-length integers: the case [`locate_runs`](Self::locate_runs)
    /// handles.
    pub(crate) fn var_len_int_features(&self) -> Option<Vec<(&str, DType)>> {
        self.set
            .features
            .iter()
            .map(|f| {
                let int = matches!(f.dtype, DType::Int64 | DType::Int32);
                (f.fixed.is_none() && int).then_some((f.name.as_str(), f.dtype))
            })
            .collect()
    }

    /// Finds the values of every feature of every record without decoding
    /// them, for direct assembly (decoding straight into padded tensors).
    /// `None` when the spec is not all variable-length integers, or when
    /// some record needs the general parser: anything but at most one
    /// `Int64List` holding at most one packed run per feature, or bytes the
    /// parser would report (the general path then gives the exact error).
    pub(crate) fn locate_runs<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Option<&PackedRuns> {
        let features = self.set.features.len();
        let ints = self
            .set
            .features
            .iter()
            .all(|f| f.fixed.is_none() && matches!(f.dtype, DType::Int64 | DType::Int32));
        if !ints {
            return None;
        }
        let mut runs = std::mem::take(&mut self.runs);
        runs.reset(features, records.len());
        let mut ok = true;
        for (i, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            prefetch_ahead(records, i, START_BYTES);
            let spans = runs.record_mut(i);
            let found =
                canonical::runs(rec, &self.set.index, spans) || self.general_runs(rec, spans);
            // A run must end its last varint (else: truncated, an error).
            let cut = |&run: &Span| bytes_of(rec, run).last().is_some_and(|&b| b >= 0x80);
            if !found || spans.iter().any(cut) {
                ok = false;
                break;
            }
        }
        self.runs = runs;
        ok.then_some(&self.runs)
    }

    /// The runs of `rec` by the general scan (any layout the parser reads),
    /// into `spans`: false where the direct path does not apply (a record
    /// the parser reports, or a feature that is not one packed run).
    fn general_runs(&mut self, rec: &[u8], spans: &mut [Span]) -> bool {
        self.set.clear_slots();
        if self.scan_example(rec).is_err() {
            return false;
        }
        for (span, slot) in spans.iter_mut().zip(&self.set.slots) {
            let run = match *slot {
                None => Some(Span::default()),
                Some(feature) => packed_run(rec, feature),
            };
            let Some(run) = run else { return false };
            *span = run;
        }
        true
    }

    /// Parses a batch of serialized `Example`s into one column per spec
    /// feature, in spec order. Stops at the first bad record.
    ///
    /// Each call allocates the columns afresh. On a stream of batches
    /// prefer [`ExampleParser::parse_into`]: touching new memory (page
    /// faults) can cost more than the parse itself.
    pub fn parse<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Result<ParsedBatch, ParseError> {
        let mut out = ParsedBatch {
            num_records: 0,
            columns: Vec::new(),
        };
        self.parse_into(records, &mut out)?;
        Ok(out)
    }

    /// Like [`ExampleParser::parse`], but fills `out`, reusing the buffers
    /// of the batch it holds (one this parser returned earlier): a steady
    /// stream of batches then allocates nothing. On error `out` is left empty.
    pub fn parse_into<R: AsRef<[u8]>>(
        &mut self,
        records: &[R],
        out: &mut ParsedBatch,
    ) -> Result<(), ParseError> {
        let mut cols = self.set.begin(records.len(), recycled(out));
        out.num_records = 0;
        for (r, rec) in records.iter().enumerate() {
            let rec = rec.as_ref();
            self.set.clear_slots();
            self.scan_example(rec).map_err(|e| malformed(r, None, e))?;
            self.set.finish_record(rec, r, &mut cols)?;
        }
        *out = self.set.finish(cols, records.len());
        Ok(())
    }

    fn scan_example(&mut self, rec: &[u8]) -> Result<(), WireError> {
        let mut c = Cursor::new(rec);
        while !c.at_end() {
            let tag = c.tag()?;
            if tag == TAG_1_LEN {
                let features = c.len_delimited()?;
                self.set.scan_features(rec, features)?;
            } else {
                c.skip(tag)?;
            }
        }
        Ok(())
    }
}

/// The span of the packed run of a `Feature` (at `feature`) that holds one
/// `Int64List` of at most one packed run, or no list at all (an empty span:
/// zero values, as the general parser gives a variable-length feature).
/// `None` for any other form, valid or not.
fn packed_run(rec: &[u8], feature: Span) -> Option<Span> {
    if feature.is_empty() {
        return Some(Span::default());
    }
    let mut c = Cursor::over(rec, feature);
    if c.tag().ok()? != TAG_3_LEN {
        return None;
    }
    let list = c.len_delimited().ok()?;
    if !c.at_end() {
        return None;
    }
    if list.is_empty() {
        return Some(Span::default());
    }
    let mut l = Cursor::over(rec, list);
    if l.tag().ok()? != TAG_1_LEN {
        return None;
    }
    let run = l.len_delimited().ok()?;
    l.at_end().then_some(run)
}

/// Parses a batch of serialized `tf.train.Example`s by `spec`
/// (`tf.io.parse_example`). Build an [`ExampleParser`] to parse many batches.
pub fn parse_examples<R: AsRef<[u8]>>(
    spec: &FeatureSpec,
    records: &[R],
) -> Result<ParsedBatch, ParseError> {
    ExampleParser::new(spec).parse(records)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use prost::Message;

    use super::*;
    use crate::example::proto::{Example, Feature};

    /// A protobuf field: one-byte `tag`, its length as a varint, `body`.
    fn field(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let mut len = body.len();
        while len >= 0x80 {
            out.push(len as u8 | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend(body);
        out
    }

    fn varints(values: &[i64]) -> Vec<u8> {
        let mut out = Vec::new();
        for &v in values {
            let mut v = v as u64;
            while v >= 0x80 {
                out.push(v as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        out
    }

    /// How a map entry's `Feature` is written.
    #[derive(Clone, Debug)]
    enum Value {
        Packed(Vec<i64>),
        /// Enough values (of 5 bytes) for lengths of three bytes.
        Long(usize),
        Unpacked(Vec<i64>),
        TwoRuns(Vec<i64>, Vec<i64>),
        Floats(usize),
        EmptyList,
        NoList,
    }

    impl Value {
        fn feature(&self) -> Vec<u8> {
            let list = |body: Vec<u8>| field(0x1a, &body);
            match self {
                Value::Packed(v) => list(field(0x0a, &varints(v))),
                Value::Long(n) => list(field(0x0a, &varints(&vec![1 << 30; *n]))),
                Value::Unpacked(v) => list(
                    v.iter()
                        .flat_map(|&x| [&[8][..], &varints(&[x])].concat())
                        .collect(),
                ),
                Value::TwoRuns(a, b) => {
                    list([field(0x0a, &varints(a)), field(0x0a, &varints(b))].concat())
                }
                Value::Floats(n) => field(0x12, &field(0x0a, &vec![0; 4 * n])),
                Value::EmptyList => list(Vec::new()),
                Value::NoList => Vec::new(),
            }
        }
    }

    /// How a record departs from the layout serializers write.
    #[derive(Clone, Debug)]
    enum Layout {
        Canonical,
        ValueBeforeKey(usize),
        NoValue(usize),
        UnknownFieldAtTop,
        FeaturesTwice,
        OverlongLength,
        Cut(usize),
        Flip(usize, u8),
    }

    fn value() -> impl Strategy<Value = Value> {
        let values = || proptest::collection::vec(any::<i64>(), 0..40);
        prop_oneof![
            4 => values().prop_map(Value::Packed),
            1 => (3300usize..3400).prop_map(Value::Long),
            1 => values().prop_map(Value::Unpacked),
            1 => (values(), values()).prop_map(|(a, b)| Value::TwoRuns(a, b)),
            1 => (0usize..4).prop_map(Value::Floats),
            1 => Just(Value::EmptyList),
            1 => Just(Value::NoList),
        ]
    }

    fn layout() -> impl Strategy<Value = Layout> {
        prop_oneof![
            4 => Just(Layout::Canonical),
            1 => any::<usize>().prop_map(Layout::ValueBeforeKey),
            1 => any::<usize>().prop_map(Layout::NoValue),
            1 => Just(Layout::UnknownFieldAtTop),
            1 => Just(Layout::FeaturesTwice),
            1 => Just(Layout::OverlongLength),
            1 => any::<usize>().prop_map(Layout::Cut),
            1 => (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Layout::Flip(at, b)),
        ]
    }

    fn record(entries: &[(&str, Value)], layout: &Layout) -> Vec<u8> {
        let entry = |i: usize, (key, value): &(&str, Value)| {
            let (key, value) = (field(0x0a, key.as_bytes()), field(0x12, &value.feature()));
            match layout {
                Layout::ValueBeforeKey(at) if at % entries.len() == i => {
                    field(0x0a, &[value, key].concat())
                }
                Layout::NoValue(at) if at % entries.len() == i => field(0x0a, &key),
                _ => field(0x0a, &[key, value].concat()),
            }
        };
        let map: Vec<Vec<u8>> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| entry(i, e))
            .collect();
        let mut rec = match layout {
            Layout::FeaturesTwice => {
                let (a, b) = map.split_at(map.len() / 2);
                [field(0x0a, &a.concat()), field(0x0a, &b.concat())].concat()
            }
            // The features' length in two bytes where one would do.
            Layout::OverlongLength if map.concat().len() < 0x80 => {
                let body = map.concat();
                [&[0x0a, body.len() as u8 | 0x80, 0][..], &body].concat()
            }
            _ => field(0x0a, &map.concat()),
        };
        match *layout {
            Layout::UnknownFieldAtTop => rec.extend([0x10, 0x2a]),
            Layout::Cut(at) => rec.truncate(at % (rec.len() + 1)),
            Layout::Flip(at, b) => {
                let at = at % rec.len();
                rec[at] ^= b;
            }
            _ => {}
        }
        rec
    }

    /// The runs the general scan finds, if the direct path applies.
    fn general(parser: &mut ExampleParser, rec: &[u8]) -> Option<Vec<Span>> {
        let mut spans = vec![Span::default(); parser.set.features.len()];
        parser.general_runs(rec, &mut spans).then_some(spans)
    }

    fn parser() -> ExampleParser {
        let spec = FeatureSpec::new()
            .var_len("ids", DType::Int64)
            .var_len("mask", DType::Int32);
        ExampleParser::new(&spec)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Where the canonical scan finds runs, they are the general
        /// scan's; on records as serializers write them, it finds them.
        #[test]
        fn the_canonical_scan_agrees_with_the_general_one(
            entries in proptest::collection::vec(
                (prop_oneof![Just("ids"), Just("mask"), Just("other"), Just("")], value()),
                1..5,
            ),
            layout in layout(),
        ) {
            let rec = record(&entries, &layout);
            let mut parser = parser();
            let mut spans = vec![Span::default(); 2];
            let canonical = canonical::runs(&rec, &parser.set.index, &mut spans);
            let general = general(&mut parser, &rec);
            if canonical {
                prop_assert_eq!(Some(spans), general);
            }
            let plain = |v: &Value| matches!(v, Value::Packed(_) | Value::Long(_) | Value::EmptyList | Value::NoList);
            if matches!(layout, Layout::Canonical) && entries.iter().all(|(_, v)| plain(v)) {
                prop_assert!(canonical, "declined a canonical record");
            }
        }
    }

    #[test]
    fn records_as_prost_writes_them_take_the_canonical_scan() {
        let rec = Example::from_features([
            ("other", Feature::floats(vec![1.5])),
            ("mask", Feature::int64s(vec![1; 300])),
            ("ids", Feature::int64s(vec![7, 1 << 40, -1])),
        ])
        .encode_to_vec();
        let mut parser = parser();
        let mut spans = vec![Span::default(); 2];
        assert!(canonical::runs(&rec, &parser.set.index, &mut spans));
        assert_eq!(bytes_of(&rec, spans[0]), varints(&[7, 1 << 40, -1]));
        assert_eq!(bytes_of(&rec, spans[1]), vec![1; 300]);
        assert_eq!(Some(spans), general(&mut parser, &rec));
    }
}
