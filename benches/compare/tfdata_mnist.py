"""grain#1164's case on tf.data: MNIST-sized tf.train.Examples (784 pixel
bytes and an int64 label), written here with TensorFlow's own writer when
missing, read as `TFRecordDataset(path).shuffle(60_000, seed=1).batch(128)`
into numpy (`as_numpy_iterator`), serialized records as they are (Grain's
loop in python/benches/grain_source.py decodes nothing either).

    python benches/compare/tfdata_mnist.py OUT.tfrecord [--rounds 3]

Prints one JSON line: records/s of each round.
"""

import argparse
import json
import os
import time

import numpy as np
import tensorflow as tf


def write(path: str, n: int = 60_000) -> None:
    rng = np.random.default_rng(0)
    tmp = path + ".tmp"
    with tf.io.TFRecordWriter(tmp) as w:
        for i in range(n):
            example = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[rng.integers(0, 256, 784, dtype=np.uint8).tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
            }))
            w.write(example.SerializeToString())
    os.rename(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not os.path.exists(args.path):
        write(args.path)
    rates = []
    for _ in range(args.rounds):
        ds = tf.data.TFRecordDataset(args.path).shuffle(60_000, seed=1).batch(128)
        start = time.perf_counter()
        n = sum(len(b) for b in ds.as_numpy_iterator())
        rates.append(n / (time.perf_counter() - start))
    print(json.dumps({"tf.data records/s": rates}))


if __name__ == "__main__":
    main()
