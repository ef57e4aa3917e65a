"""Write infeed's test data with TensorFlow's own TFRecord writer.

Usage (from anywhere; tensorflow-cpu==2.21.0):

    python testdata/make_testdata.py            # (re)write the files next to this script
    python testdata/make_testdata.py --out DIR  # write them into DIR instead
    python testdata/make_testdata.py --check    # write into a temp dir, compare byte for byte
                                                # with the committed files, exit 1 on a difference

Deterministic: every value is fixed in this file or drawn from the seeded splitmix64
generator defined here (no numpy / random streams whose algorithms could change), protos
are serialized with ``deterministic=True`` (map keys sorted), and TensorFlow's GZIP and
ZLIB writers put no timestamp or file name in their headers. Rerunning reproduces
byte-identical files; ``--check`` (run by scripts/test.sh) proves it.

Every file is written by ``tf.io.TFRecordWriter`` with ``tf.io.TFRecordOptions``, and
every file is read back with ``tf.data.TFRecordDataset`` and compared with the expected
values before the script finishes.

Expected values go to ``<file>.json`` as JSON Lines in the format of ``infeed cat``: one
object per record keyed by feature name (keys sorted), each value tagged by its type:
``{"input_ids": {"int64": [5, 7]}, "score": {"float": [0.5]}, "text": {"bytes": ["aGk="]}}``.
Bytes are standard base64 with padding, floats are the exact double of the float32
(``json.dumps(float(np.float32(x)))``), a Feature with no list set is ``{}``, and a
SequenceExample is ``{"context": {...}, "feature_lists": {"name": [{...}, ...]}}``.
The expected JSON is built from the Python values below, not from decoding the files.
A compressed file holds the same records as its plain twin and shares its ``.json``.
"""

import argparse
import base64
import filecmp
import json
import os
import struct
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
F32_MAX = float(np.finfo(np.float32).max)  # 3.4028234663852886e+38
F32_TINY = float(np.finfo(np.float32).tiny)  # smallest normal, 1.1754943508222875e-38
F32_SUBNORMAL_MIN = float(np.float32(1e-45))  # smallest subnormal, 1.401298464324817e-45


class SplitMix64:
    """splitmix64: a tiny PRNG defined here so the streams never change."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n):
        """A value in 0..n-1 (modulo bias is irrelevant for test data)."""
        return self.next_u64() % n

    def finite_f32(self):
        """A float32 with a random bit pattern, never NaN or infinite."""
        while True:
            bits = self.next_u64() & 0xFFFFFFFF
            if (bits >> 23) & 0xFF != 0xFF:
                return struct.unpack("<f", struct.pack("<I", bits))[0]


# ---------------------------------------------------------------------------
# Values. A feature value is ("int64" | "float" | "bytes", [values]) or None for a
# Feature with no list set.


def i64(*v):
    return ("int64", list(v))


def f32(*v):
    return ("float", list(v))


def byt(*v):
    return ("bytes", list(v))


NON_UTF8 = b"\xff\xfe\x00\x80\xc3\x28\xed\xa0\x80"  # invalid UTF-8 in several ways
BIG_BYTES = bytes(range(256)) + bytes(range(44))  # 300 bytes, every byte value


def example_records():
    """The records of examples.tfrecord (+ .gz, .zz). Record 3 is hand-encoded."""
    rng = SplitMix64(0x1F1EED)
    return [
        {
            "label": i64(0),
            "embedding": f32(0.0, -0.0, 1.0, -1.0),
            "tokens": i64(1, 2, 3),
            "ints": i64(
                I64_MIN, I64_MAX, 0, -1, 1,
                2**31 - 1, 2**31, -(2**31), -(2**31) - 1,
                2**32, 2**53 + 1, -(2**53) - 1,
            ),
            "floats": f32(
                -0.0, 0.0, F32_SUBNORMAL_MIN, -F32_SUBNORMAL_MIN, F32_TINY,
                F32_MAX, -F32_MAX, 0.1, 1e20, -2.5, 123456.789, 16777217.0,
            ),
            "text": byt(b"", b"hello", NON_UTF8, BIG_BYTES),
        },
        {
            "label": i64(1),
            "embedding": f32(0.5, 0.25, -0.125, 1e-3),
            "tokens": i64(),
            "empty_int64": i64(),
            "empty_float": f32(),
            "empty_bytes": byt(),
            "unset": None,
        },
        {
            "label": i64(-1),
            "embedding": f32(1e-38, -1e-38, 3.0e38, -3.0e38),
            "tokens": i64(50000, 0, 7, 7, 7),
            "text": byt(b""),
            "unset": None,
        },
        # Hand-encoded in encode_example_record3: int64 and float lists unpacked (one
        # tag per value), which TF's protobuf and its fast parse_example both accept.
        {
            "label": i64(3),
            "embedding": f32(1.5, -1.5, 2.0**-20, 65504.0),
            "tokens": i64(1, 2, 3, 4),
            "ints": i64(-5, I64_MIN, 300),
            "text": byt(b"unpacked"),
        },
        {
            "label": i64(I64_MAX),
            "embedding": f32(*[rng.finite_f32() for _ in range(4)]),
            "tokens": i64(*[rng.below(50001) for _ in range(100)]),
            "floats": f32(*[rng.finite_f32() for _ in range(16)]),
            "ints": i64(*[rng.next_u64() - 2**63 for _ in range(16)]),
        },
        {
            "label": i64(5),
            "embedding": f32(-0.0, -0.0, -0.0, -0.0),
            "tokens": i64(-1, I64_MIN),
            "text": byt(b"\x00", b"\n", b'"quoted"', "ünïcødé".encode("utf-8")),
            "ünïcødé": i64(42),
            "with space": f32(0.5),
        },
    ]


def sequence_records():
    """The records of sequence.tfrecord: (context, feature_lists); steps are values."""
    return [
        (
            {"id": i64(0), "name": byt(b"first"), "weights": f32(0.5, -0.0)},
            {
                "frames": [f32(0.1, 0.2), f32(1.5, -2.5), f32(F32_MAX, F32_SUBNORMAL_MIN)],
                "ids": [i64(1, 2, 3), i64(), i64(I64_MIN, I64_MAX)],
                "words": [byt(b"a"), byt(b"", NON_UTF8), byt(b"ccc")],
            },
        ),
        (
            # No "words" feature list in this record.
            {"id": i64(1), "name": byt(b""), "weights": f32()},
            {
                "frames": [f32(0.0, -0.0)],
                "ids": [i64(-1)],
            },
        ),
        (
            {"id": i64(2), "name": byt(BIG_BYTES), "weights": f32(1e-3, 2e-3)},
            {
                "frames": [],  # a feature list with zero steps
                "ids": [i64(), i64(), i64(5)],
                "words": [byt(b"x", b"y", b"z"), byt()],
            },
        ),
    ]


def corrupt_records():
    """The records of corrupt.tfrecord before the bit flip (record 3 is empty)."""
    return [
        {"label": i64(0), "text": byt(b"record zero")},
        {"label": i64(1), "text": byt(b"record one")},
        {"label": i64(2), "text": byt(b"record two, whose payload gets one bit flipped")},
        None,  # tf.train.Example() with nothing set: a zero-length record
        {"label": i64(4), "text": byt(b"record four")},
    ]


CORRUPT_INDEX = 2


def lm_records():
    """256 lm-shaped records: input_ids of length 8..512, ids 0..50000, mask of ones."""
    rng = SplitMix64(256)
    out = []
    for _ in range(256):
        n = 8 + rng.below(505)
        out.append(
            {
                "input_ids": i64(*[rng.below(50001) for _ in range(n)]),
                "attention_mask": i64(*([1] * n)),
            }
        )
    return out


# ---------------------------------------------------------------------------
# Values -> protos and -> expected JSON.


def to_feature(value):
    if value is None:
        return tf.train.Feature()
    kind, vals = value
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=vals))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=vals))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=vals))


def to_features(record):
    return tf.train.Features(feature={k: to_feature(v) for k, v in record.items()})


def to_example(record):
    """None: an Example with no Features at all (it serializes to zero bytes)."""
    if record is None:
        return tf.train.Example()
    return tf.train.Example(features=to_features(record))


def to_sequence_example(context, lists):
    return tf.train.SequenceExample(
        context=to_features(context),
        feature_lists=tf.train.FeatureLists(
            feature_list={
                k: tf.train.FeatureList(feature=[to_feature(s) for s in steps])
                for k, steps in lists.items()
            }
        ),
    )


def value_json(value):
    if value is None:
        return {}
    kind, vals = value
    if kind == "int64":
        return {"int64": [int(v) for v in vals]}
    if kind == "float":
        return {"float": [float(np.float32(v)) for v in vals]}
    return {"bytes": [base64.b64encode(v).decode("ascii") for v in vals]}


def example_json(record):
    return {k: value_json(v) for k, v in (record or {}).items()}


def sequence_json(context, lists):
    return {
        "context": example_json(context),
        "feature_lists": {k: [value_json(s) for s in steps] for k, steps in lists.items()},
    }


def dumps(obj):
    """One line of ``infeed cat`` output (shared with scripts/tf_read.py)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)


# ---------------------------------------------------------------------------
# Hand-encoding (protobuf wire format) for the unpacked record.


def varint(n):
    n &= 0xFFFFFFFFFFFFFFFF  # negative int64 -> two's complement, 10 bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_len(tag, payload):
    return varint(tag << 3 | 2) + varint(len(payload)) + payload


def unpacked_int64s(vals):
    return b"".join(varint(1 << 3 | 0) + varint(v) for v in vals)


def packed_int64s(vals):
    return field_len(1, b"".join(varint(v) for v in vals))


def unpacked_floats(vals):
    return b"".join(varint(1 << 3 | 5) + struct.pack("<f", v) for v in vals)


def map_entry(name, feature_bytes):
    entry = field_len(1, name.encode("utf-8")) + field_len(2, feature_bytes)
    return field_len(1, entry)  # Features.feature (map entry, field 1)


def encode_example_record3():
    """Record 3 of examples.tfrecord with unpacked repeated scalars (both are valid)."""
    feats = b"".join(
        [
            map_entry("label", field_len(3, unpacked_int64s([3]))),
            map_entry("embedding", field_len(2, unpacked_floats([1.5, -1.5, 2.0**-20, 65504.0]))),
            map_entry("tokens", field_len(3, unpacked_int64s([1, 2, 3, 4]))),
            map_entry("ints", field_len(3, unpacked_int64s([-5, I64_MIN, 300]))),
            map_entry("text", field_len(1, field_len(1, b"unpacked"))),
        ]
    )
    return field_len(1, feats)  # Example.features


def packed_floats(vals):
    return field_len(1, b"".join(struct.pack("<f", v) for v in vals))


def one_feature(name, feature_bytes):
    return field_len(1, map_entry(name, feature_bytes))


# packing.tfrecord: valid protobuf encodings that TF's protobuf library (and prost)
# decode by the protobuf rules (repeated chunks concatenate, a repeated message field
# merges, the last map entry for a key wins, the last oneof member wins), but that TF's
# fast tf.io.parse_example reads differently. Each row: (payload, value of feature "a"
# by protobuf, what tf.io.parse_example returns for VarLenFeature(dtype) or "error").
PACKING = [
    # 0: two packed chunks; the fast parser reads only the first.
    (one_feature("a", field_len(3, packed_int64s([1, 2]) + packed_int64s([4]))),
     i64(1, 2, 4), tf.int64, [1, 2]),
    # 1: packed then unpacked; the fast parser reads only the packed chunk.
    (one_feature("a", field_len(3, packed_int64s([1, 2]) + unpacked_int64s([3]))),
     i64(1, 2, 3), tf.int64, [1, 2]),
    # 2: unpacked then packed; the fast parser rejects the record.
    (one_feature("a", field_len(3, unpacked_int64s([3]) + packed_int64s([1, 2]))),
     i64(3, 1, 2), tf.int64, "error"),
    # 3: floats, packed then unpacked; the fast parser reads only the packed chunk.
    (one_feature("a", field_len(2, packed_floats([0.5]) + unpacked_floats([1.5]))),
     f32(0.5, 1.5), tf.float32, [0.5]),
    # 4: the same map key twice: the last entry wins (the fast parser agrees).
    (field_len(1, map_entry("a", field_len(3, packed_int64s([1])))
                + map_entry("a", field_len(3, packed_int64s([2, 3])))),
     i64(2, 3), tf.int64, [2, 3]),
    # 5: Feature.int64_list twice: the messages merge; the fast parser takes the first.
    (one_feature("a", field_len(3, packed_int64s([1])) + field_len(3, packed_int64s([2]))),
     i64(1, 2), tf.int64, [1]),
    # 6: int64_list then float_list: the last oneof member wins; the fast parser
    #    takes the first and so reports a type mismatch for a float spec.
    (one_feature("a", field_len(3, packed_int64s([1])) + field_len(2, packed_floats([0.5]))),
     f32(0.5), tf.float32, "error"),
    # 7: Example.features twice: the messages merge (the fast parser agrees).
    (field_len(1, b"") + one_feature("a", field_len(3, packed_int64s([7]))),
     i64(7), tf.int64, [7]),
]


def check_packing_fast_parser(payloads):
    """Asserts the third column of PACKING: what tf.io.parse_example returns."""
    for i, (payload, _, dtype, want) in enumerate(PACKING):
        try:
            got = tf.io.parse_example([payload], {"a": tf.io.VarLenFeature(dtype)})
            got = got["a"].values.numpy().tolist()
        except tf.errors.InvalidArgumentError:
            got = "error"
        assert got == want, (i, got, want)


# ---------------------------------------------------------------------------
# TFRecord framing, to compute offsets and to check the corrupt file.

CRC32C_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    CRC32C_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_offsets(blob):
    """[(header_offset, payload_length)] of a plain TFRecord byte string, checked."""
    out, pos = [], 0
    while pos < len(blob):
        (n,) = struct.unpack_from("<Q", blob, pos)
        (len_crc,) = struct.unpack_from("<I", blob, pos + 8)
        assert len_crc == masked_crc(blob[pos : pos + 8]), pos
        out.append((pos, n))
        pos += 16 + n
    assert pos == len(blob)
    return out


def valid_header_positions(blob):
    """Every offset where 12 bytes form a length with a matching masked CRC."""
    return [
        p
        for p in range(len(blob) - 11)
        if struct.unpack_from("<I", blob, p + 8)[0] == masked_crc(blob[p : p + 8])
    ]


# ---------------------------------------------------------------------------
# Writing and checking.

COMPRESSIONS = {"": ".tfrecord", "GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz"}


def write_tfrecord(path, payloads, compression=""):
    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(path, options) as w:
        for p in payloads:
            w.write(p)


def read_tfrecord(path, compression=""):
    ds = tf.data.TFRecordDataset(path, compression_type=compression)
    return [bytes(r) for r in ds.as_numpy_iterator()]


def write_json_lines(path, objs):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for o in objs:
            f.write(dumps(o) + "\n")


def proto_value_json(feature):
    """The cat JSON of a decoded tf.train.Feature (the check reads files back with it)."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        return {}
    if kind == "int64_list":
        return {"int64": list(feature.int64_list.value)}
    if kind == "float_list":
        return {"float": list(feature.float_list.value)}
    return {"bytes": [base64.b64encode(v).decode("ascii") for v in feature.bytes_list.value]}


def proto_example_json(ex):
    return {k: proto_value_json(f) for k, f in ex.features.feature.items()}


def proto_sequence_json(seq):
    return {
        "context": {k: proto_value_json(f) for k, f in seq.context.feature.items()},
        "feature_lists": {
            k: [proto_value_json(f) for f in fl.feature]
            for k, fl in seq.feature_lists.feature_list.items()
        },
    }


def check_read_back(path, compression, payloads, expected, sequence=False):
    """TensorFlow reads the file back: same payloads, same JSON (compared as text)."""
    got = read_tfrecord(path, compression)
    assert got == payloads, f"{path}: payloads differ"
    cls, conv = (
        (tf.train.SequenceExample, proto_sequence_json)
        if sequence
        else (tf.train.Example, proto_example_json)
    )
    lines = [dumps(conv(cls.FromString(p))) for p in got]
    assert lines == [dumps(e) for e in expected], f"{path}: values differ"


def check_parse_example(path, n):
    """TF's own fast parser agrees on the spec'd features (incl. the unpacked record)."""
    spec = {
        "label": tf.io.FixedLenFeature([], tf.int64),
        "embedding": tf.io.FixedLenFeature([4], tf.float32),
        "tokens": tf.io.VarLenFeature(tf.int64),
    }
    batch = next(iter(tf.data.TFRecordDataset(path).batch(n)))
    parsed = tf.io.parse_example(batch, spec)
    recs = example_records()
    labels = [r["label"][1][0] for r in recs]
    assert parsed["label"].numpy().tolist() == labels
    emb = np.array([r["embedding"][1] for r in recs], dtype=np.float32)
    assert parsed["embedding"].numpy().tobytes() == emb.tobytes()
    toks = tf.sparse.to_dense(parsed["tokens"]).numpy()
    for i, r in enumerate(recs):
        want = r["tokens"][1]
        assert toks[i][: len(want)].tolist() == want, i
    lengths = np.bincount(parsed["tokens"].indices.numpy()[:, 0], minlength=n).tolist()
    assert lengths == [len(r["tokens"][1]) for r in recs]


def make(out):
    written = []

    def note(name):
        written.append(name)
        return os.path.join(out, name)

    # examples.tfrecord (+ .gz, .zz)
    recs = example_records()
    payloads = [
        encode_example_record3() if i == 3 else to_example(r).SerializeToString(deterministic=True)
        for i, r in enumerate(recs)
    ]
    # The hand-encoded record decodes (by TF's protobuf) to exactly its listed values.
    assert proto_example_json(tf.train.Example.FromString(payloads[3])) == json.loads(
        dumps(example_json(recs[3]))
    )
    expected = [example_json(r) for r in recs]
    for comp, ext in COMPRESSIONS.items():
        path = note("examples" + ext)
        write_tfrecord(path, payloads, comp)
        check_read_back(path, comp, payloads, expected)
    write_json_lines(note("examples.tfrecord.json"), expected)
    check_parse_example(os.path.join(out, "examples.tfrecord"), len(recs))

    # sequence.tfrecord
    seqs = sequence_records()
    payloads = [to_sequence_example(c, l).SerializeToString(deterministic=True) for c, l in seqs]
    expected = [sequence_json(c, l) for c, l in seqs]
    path = note("sequence.tfrecord")
    write_tfrecord(path, payloads)
    check_read_back(path, "", payloads, expected, sequence=True)
    write_json_lines(note("sequence.tfrecord.json"), expected)

    # packing.tfrecord: hand-encoded records whose meaning follows the protobuf rules.
    payloads = [row[0] for row in PACKING]
    expected = [{"a": value_json(row[1])} for row in PACKING]
    path = note("packing.tfrecord")
    write_tfrecord(path, payloads)
    check_read_back(path, "", payloads, expected)
    write_json_lines(note("packing.tfrecord.json"), expected)
    check_packing_fast_parser(payloads)

    # corrupt.tfrecord: written by TF, then one bit of record 2's payload flipped.
    recs = corrupt_records()
    payloads = [to_example(r).SerializeToString(deterministic=True) for r in recs]
    path = note("corrupt.tfrecord")
    write_tfrecord(path, payloads)
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    frames = frame_offsets(bytes(blob))
    assert [n for _, n in frames] == [len(p) for p in payloads]
    assert frames[3][1] == 0
    bad_off, bad_len = frames[CORRUPT_INDEX]
    flip_at = bad_off + 12 + bad_len // 2
    flip_mask = 0x10
    blob[flip_at] ^= flip_mask
    with open(path, "wb") as f:
        f.write(blob)
    stored = struct.unpack_from("<I", blob, bad_off + 12 + bad_len)[0]
    computed = masked_crc(bytes(blob[bad_off + 12 : bad_off + 12 + bad_len]))
    assert stored == masked_crc(payloads[CORRUPT_INDEX]) and stored != computed
    # A reader that resynchronises by scanning for a valid length+CRC finds only the
    # true headers: no false sync point hides inside a payload.
    assert valid_header_positions(bytes(blob)) == [o for o, _ in frames]
    # TensorFlow itself stops at record 2 with a DataLossError.
    got = []
    try:
        for r in tf.data.TFRecordDataset(path).as_numpy_iterator():
            got.append(bytes(r))
        raise AssertionError("TensorFlow read the corrupt record without error")
    except tf.errors.DataLossError:
        pass
    assert got == payloads[:CORRUPT_INDEX]
    good = [i for i in range(len(recs)) if i != CORRUPT_INDEX]
    write_json_lines(note("corrupt.tfrecord.json"), [example_json(recs[i]) for i in good])
    offsets = {
        "comment": (
            "corrupt.tfrecord: 5 tf.train.Example records written by TensorFlow; one bit "
            "of record corrupt_index's payload was flipped afterwards, so its data CRC "
            "fails (its length and length CRC are intact). offset = byte offset of the "
            "record's 12-byte header, length = its payload length; payload at offset+12, "
            "data CRC at offset+12+length, next record at offset+16+length. CRCs are "
            "masked CRC32C as stored on disk. corrupt.tfrecord.json holds the records "
            "other than corrupt_index, in order."
        ),
        "file_length": len(blob),
        "records": [
            {"index": i, "offset": o, "length": n, "corrupt": i == CORRUPT_INDEX}
            for i, (o, n) in enumerate(frames)
        ],
        "corrupt_index": CORRUPT_INDEX,
        "flipped_byte_offset": flip_at,
        "flipped_bit_mask": flip_mask,
        "stored_masked_crc": stored,
        "computed_masked_crc": computed,
    }
    with open(note("corrupt.tfrecord.offsets.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(offsets, indent=2) + "\n")

    # lm-sample.tfrecord (+ .gz)
    recs = lm_records()
    payloads = [to_example(r).SerializeToString(deterministic=True) for r in recs]
    expected = [example_json(r) for r in recs]
    for comp, ext in (("", ".tfrecord"), ("GZIP", ".tfrecord.gz")):
        path = note("lm-sample" + ext)
        write_tfrecord(path, payloads, comp)
        check_read_back(path, comp, payloads, expected)
    write_json_lines(note("lm-sample.tfrecord.json"), expected)

    total = 0
    for name in written:
        size = os.path.getsize(os.path.join(out, name))
        assert size < 1_000_000, f"{name} is {size} bytes"
        total += size
    assert total < 3_000_000, total
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--out", default=HERE, help="directory to write into (default: testdata/)")
    g.add_argument("--check", action="store_true", help="compare a fresh run with testdata/")
    args = ap.parse_args()
    if not args.check:
        os.makedirs(args.out, exist_ok=True)
        for name in make(args.out):
            print(f"{os.path.getsize(os.path.join(args.out, name)):>8}  {name}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        names = make(tmp)
        differ = [
            n
            for n in names
            if not os.path.exists(os.path.join(HERE, n))
            or not filecmp.cmp(os.path.join(tmp, n), os.path.join(HERE, n), shallow=False)
        ]
    if differ:
        print("testdata differs from a fresh run of make_testdata.py:", *differ, file=sys.stderr)
        return 1
    print(f"testdata: {len(names)} files reproduced byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
