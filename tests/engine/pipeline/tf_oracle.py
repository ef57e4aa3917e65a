"""TensorFlow as the oracle of tests/engine/pipeline/tf_oracle.rs.

    python tf_oracle.py parse DIR    TensorFlow writes Examples to DIR/part-0.tfrecord
                                     (plain) and DIR/part-1.tfrecord.gz (GZIP), then
                                     decodes them with tf.io.parse_example in batches
                                     of 16: one JSON line per batch.
    python tf_oracle.py bucket DIR DROP
                                     TensorFlow writes lm-like Examples (DIR/lm-0.tfrecord,
                                     DIR/lm-1.tfrecord.gz) and groups them with
                                     tf.data's bucket_by_sequence_length (DROP: 0 or 1,
                                     drop_remainder): one JSON line per batch.

Floats are printed as their float32 bit patterns, so the comparison is exact.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

WEIGHTS_DEFAULT = [0.5, -0.25, 2.0]
# Floats that catch a lossy path: signed zero, a subnormal, the extremes.
ODD_FLOATS = [0.0, -0.0, 1e-45, -3.4028235e38, 3.4028235e38, 1.1754944e-38, 0.1, -7.25]


def bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32).tolist()


def int64_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def float_feature(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def bytes_feature(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def parse_record(g):
    """Record g of the parse case: some features missing, odd values."""
    f = {}
    if g % 7 != 3:
        f["label"] = int64_feature([(g * 2654435761) % 1000003 - 500000])
    if g % 5 != 1:
        f["weights"] = float_feature([ODD_FLOATS[(g + k) % len(ODD_FLOATS)] for k in range(3)])
    if g % 11 != 4:
        n = (g * 37) % 23
        big = [-(1 << 62), (1 << 62) + 5, -1, 0, 1 << 40]
        f["ids"] = int64_feature([big[(g + j) % 5] + g * 1000 + j for j in range(n)])
    n = (g * 13) % 9
    f["scores"] = float_feature(
        [ODD_FLOATS[(g * 3 + j) % len(ODD_FLOATS)] / (j + 1) for j in range(n)]
    )
    f["pixels"] = bytes_feature([bytes((g * 7 + k) % 256 for k in range(12))])
    # A feature the spec does not ask for.
    f["unused"] = bytes_feature([b"x" * (g % 5)])
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def lm_record(g):
    """Record g of the bucket case: `ids` of length 0..32 (missing when 0)."""
    n = (g * 29 + g // 7) % 33
    f = {}
    if n > 0:
        f["ids"] = int64_feature([g * 1000 + j + 1 for j in range(n)])
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def write(out_dir, stem, make, counts):
    """Writes file 0 plain and file 1 GZIP; returns the dataset reading both in order."""
    datasets = []
    g = 0
    for i, count in enumerate(counts):
        gzip = i % 2 == 1
        path = os.path.join(out_dir, f"{stem}-{i}.tfrecord" + (".gz" if gzip else ""))
        options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
        with tf.io.TFRecordWriter(path, options=options) as w:
            for _ in range(count):
                w.write(make(g))
                g += 1
        datasets.append(tf.data.TFRecordDataset(path, compression_type="GZIP" if gzip else ""))
    ds = datasets[0]
    for d in datasets[1:]:
        ds = ds.concatenate(d)
    return ds


def parse_case(out_dir):
    ds = write(out_dir, "part", parse_record, [37, 29])
    spec = {
        "label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "weights": tf.io.FixedLenFeature([3], tf.float32, default_value=WEIGHTS_DEFAULT),
        "ids": tf.io.VarLenFeature(tf.int64),
        "scores": tf.io.VarLenFeature(tf.float32),
        "pixels": tf.io.FixedLenFeature([], tf.string),
    }
    for serialized in ds.batch(16):
        parsed = tf.io.parse_example(serialized, spec)
        line = {
            "label": parsed["label"].numpy().tolist(),
            "weights": bits(parsed["weights"].numpy()),
            "pixels": tf.io.decode_raw(parsed["pixels"], tf.uint8).numpy().tolist(),
        }
        for name in ("ids", "scores"):
            sparse = parsed[name]
            dense = tf.sparse.to_dense(sparse).numpy()
            lengths = tf.RaggedTensor.from_sparse(sparse).row_lengths().numpy().tolist()
            line[name] = {
                "dense": bits(dense) if name == "scores" else dense.tolist(),
                "lengths": lengths,
            }
        print(json.dumps(line))


def bucket_case(out_dir, drop):
    ds = write(out_dir, "lm", lm_record, [120, 90])

    def parse(serialized):
        ids = tf.sparse.to_dense(
            tf.io.parse_single_example(serialized, {"ids": tf.io.VarLenFeature(tf.int64)})["ids"]
        )
        return {"ids": ids, "mask": tf.ones_like(ids)}

    ds = ds.map(parse).bucket_by_sequence_length(
        element_length_func=lambda x: tf.shape(x["ids"])[0],
        bucket_boundaries=[9, 17, 33],
        # The last bucket (33 and longer) never fills: no record is that long.
        bucket_batch_sizes=[8, 6, 4, 1],
        pad_to_bucket_boundary=True,
        drop_remainder=drop,
    )
    for batch in ds:
        print(
            json.dumps(
                {"ids": batch["ids"].numpy().tolist(), "mask": batch["mask"].numpy().tolist()}
            )
        )


def main():
    case, out_dir = sys.argv[1], sys.argv[2]
    if case == "parse":
        parse_case(out_dir)
    elif case == "bucket":
        bucket_case(out_dir, sys.argv[3] == "1")
    else:
        raise SystemExit(f"unknown case {case!r}")


if __name__ == "__main__":
    main()
