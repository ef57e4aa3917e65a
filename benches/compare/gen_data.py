"""Writes the reference workloads (docs/architecture.md) with TensorFlow's own TFRecordWriter.

    python gen_data.py OUT_DIR [--scale 1.0] [--seed 0]

OUT_DIR/lm/train-0000N-of-00004.tfrecord     input_ids, attention_mask: Int64List, length uniform in 8..512
OUT_DIR/img/train-0000N-of-00004.tfrecord    image: 3072 raw bytes (32x32x3), label: Int64 scalar
OUT_DIR/ctr/train-000NN-of-00064.tfrecord    label: Int64 scalar, dense: 16 floats, ids: 16 Int64
                                             ids, blob: ~40 bytes no spec asks for (~250 B/record)
and the same records GZIP-compressed as OUT_DIR/{lm,img,ctr}-gzip/*.tfrecord.gz. At --scale 1 each
lm and img shard holds ~100 MB and each ctr shard ~6 MB (~400 MB per workload). OUT_DIR/meta.json records what was written (the generator's arguments,
records and payload bytes per epoch), and a rerun with the same arguments writes only the workloads it does not list.
Deterministic: the records depend only on --seed and --scale.
"""

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf

SHARDS = 4
CTR_SHARDS = 64
LM_RECORDS = 100_000  # per shard at scale 1: ~98 MB
IMG_RECORDS = 32_000  # per shard at scale 1: ~99 MB
CTR_RECORDS = 25_000  # per shard at scale 1: ~6.3 MB, 64 shards


def feature_int64(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def lm_records(rng, n):
    for _ in range(n):
        length = int(rng.integers(8, 513))
        ids = rng.integers(0, 50_000, length).tolist()
        yield tf.train.Example(features=tf.train.Features(feature={
            "input_ids": feature_int64(ids),
            "attention_mask": feature_int64([1] * length),
        })).SerializeToString()


def img_records(rng, n):
    for _ in range(n):
        image = rng.integers(0, 256, 32 * 32 * 3, dtype=np.uint8).tobytes()
        yield tf.train.Example(features=tf.train.Features(feature={
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
            "label": feature_int64([int(rng.integers(0, 10))]),
        })).SerializeToString()


def ctr_records(rng, n):
    """A click-through-style record: what a ranking model reads, plus a field it does not."""
    for _ in range(n):
        yield tf.train.Example(features=tf.train.Features(feature={
            "label": feature_int64([int(rng.integers(0, 2))]),
            "dense": tf.train.Feature(float_list=tf.train.FloatList(
                value=rng.standard_normal(16, dtype=np.float32).tolist())),
            "ids": feature_int64(rng.integers(0, 1 << 40, 16).tolist()),
            "blob": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[rng.integers(0, 256, int(rng.integers(32, 49)), dtype=np.uint8).tobytes()])),
        })).SerializeToString()


def write(out, name, make, per_shard, seed, shards=SHARDS):
    """Writes one workload, plain and GZIP; returns its records and payload bytes per epoch."""
    plain, gzip = os.path.join(out, name), os.path.join(out, name + "-gzip")
    os.makedirs(plain, exist_ok=True)
    os.makedirs(gzip, exist_ok=True)
    records = payload = 0
    for shard in range(shards):
        base = f"train-{shard:05d}-of-{shards:05d}.tfrecord"
        rng = np.random.default_rng([seed, shard])
        with tf.io.TFRecordWriter(os.path.join(plain, base)) as p, \
                tf.io.TFRecordWriter(os.path.join(gzip, base + ".gz"), options="GZIP") as g:
            for record in make(rng, per_shard):
                p.write(record)
                g.write(record)
                records += 1
                payload += len(record)
        if shard % 16 == 15 or shards <= 16:
            print(f"gen_data: {name} shard {shard} written", file=sys.stderr)
    return {"records_per_epoch": records, "payload_bytes_per_epoch": payload,
            "shards": shards}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    wanted = {"scale": args.scale, "seed": args.seed, "version": 1}
    meta_path = os.path.join(args.out, "meta.json")
    done = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("args") == wanted:
            done = meta["workloads"]  # a workload added later is written beside the others
    todo = {
        "lm": (lm_records, LM_RECORDS, SHARDS),
        "img": (img_records, IMG_RECORDS, SHARDS),
        "ctr": (ctr_records, CTR_RECORDS, CTR_SHARDS),
    }
    if all(name in done for name in todo):
        print(f"gen_data: {args.out} already holds this data", file=sys.stderr)
        return
    os.makedirs(args.out, exist_ok=True)
    workloads = dict(done)
    for name, (make, per_shard, shards) in todo.items():
        if name in done:
            continue
        if os.path.exists(meta_path):
            os.remove(meta_path)  # half-written data must never look complete
        workloads[name] = write(args.out, name, make, max(1, round(per_shard * args.scale)),
                                args.seed, shards)
        with open(meta_path, "w") as f:
            json.dump({"args": wanted, "workloads": workloads}, f, indent=1)


if __name__ == "__main__":
    main()
