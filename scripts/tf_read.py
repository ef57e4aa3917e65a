"""Read TFRecord files with TensorFlow and print each record as one JSON line.

Usage: python scripts/tf_read.py FILE none|gzip|zlib [FILE none|gzip|zlib ...] [--sequence] [--glob]

Each FILE is read by ``tf.data.TFRecordDataset(FILE, compression_type=...)`` (TensorFlow's
own framing, CRC checks and decompression), and its records end with an empty line, so
that one process (TensorFlow takes seconds to import) reads many files and the caller
still tells each file's records apart. With ``--glob``, each FILE is a pattern and every
file ``tf.io.gfile.glob(FILE)`` gives is read, in sorted order, as a TensorFlow user
reads a folder of shards (so a file the glob takes that is no shard fails) and each record is decoded by TensorFlow's
protobuf as a ``tf.train.Example`` (or, with ``--sequence``, a ``tf.train.SequenceExample``).
The output is the format of ``infeed cat`` and of testdata/*.json: one object per record
keyed by feature name (keys sorted), each value tagged by its type
(``{"int64": [...]}``, ``{"float": [...]}``, ``{"bytes": ["<base64>"]}``, ``{}`` for a
Feature with no list set); a SequenceExample is
``{"context": {...}, "feature_lists": {"name": [{...}, ...]}}``.

tests/io/interop.rs and tests/io/convert/tf.rs run it (through $INFEED_PYTHON) on files
infeed wrote and compare the output with the values infeed wrote. Exit status 2 with a
one-line message on stderr when TensorFlow cannot read a file or decode a record.
"""

import argparse
import base64
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from google.protobuf.message import DecodeError  # noqa: E402

COMPRESSION = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}


def value_json(feature):
    kind = feature.WhichOneof("kind")
    if kind is None:
        return {}
    if kind == "int64_list":
        return {"int64": list(feature.int64_list.value)}
    if kind == "float_list":
        return {"float": list(feature.float_list.value)}
    return {"bytes": [base64.b64encode(v).decode("ascii") for v in feature.bytes_list.value]}


def features_json(features):
    return {k: value_json(f) for k, f in features.feature.items()}


def example_json(payload):
    return features_json(tf.train.Example.FromString(payload).features)


def sequence_json(payload):
    seq = tf.train.SequenceExample.FromString(payload)
    return {
        "context": features_json(seq.context),
        "feature_lists": {
            k: [value_json(f) for f in fl.feature]
            for k, fl in seq.feature_lists.feature_list.items()
        },
    }


def dumps(obj):
    """One line of ``infeed cat`` output (the same as testdata/make_testdata.py)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)


def read(pattern, compression, convert, glob, out):
    """Prints the records of one FILE argument; 0, or 2 when TensorFlow cannot read it."""
    files = sorted(tf.io.gfile.glob(pattern)) if glob else pattern
    if glob:
        print(f"tf_read.py: {pattern}: {len(files)} files: {files}", file=sys.stderr)
    ds = tf.data.TFRecordDataset(files, compression_type=COMPRESSION[compression])
    try:
        for payload in ds.as_numpy_iterator():
            out.write(dumps(convert(payload)) + "\n")
    except tf.errors.OpError as e:
        out.flush()
        print(f"tf_read.py: {pattern}: {type(e).__name__}: {e.message}", file=sys.stderr)
        return 2
    except DecodeError as e:
        out.flush()
        print(f"tf_read.py: {pattern}: not a valid protobuf record: {e}", file=sys.stderr)
        return 2
    out.write("\n")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reads", nargs="+", metavar="FILE COMPRESSION")
    ap.add_argument("--sequence", action="store_true", help="records are SequenceExamples")
    ap.add_argument("--glob", action="store_true", help="each FILE is a tf.io.gfile.glob pattern")
    args = ap.parse_args()
    if len(args.reads) % 2:
        ap.error("give each FILE with its compression: FILE none|gzip|zlib ...")
    reads = list(zip(args.reads[::2], args.reads[1::2]))
    for _, compression in reads:
        if compression not in COMPRESSION:
            ap.error(f"compression {compression!r}: one of {', '.join(sorted(COMPRESSION))}")
    convert = sequence_json if args.sequence else example_json
    out = sys.stdout
    for pattern, compression in reads:
        status = read(pattern, compression, convert, args.glob, out)
        if status:
            return status
    out.flush()
    return 0


if __name__ == "__main__":
    sys.stdout.reconfigure(encoding="utf-8")
    sys.exit(main())
