"""Writes the reference workloads (docs/architecture.md) with TensorFlow's own TFRecordWriter.

    python gen_data.py OUT_DIR [--scale 1.0] [--seed 0] [--workloads lm,img,ctr]

OUT_DIR/lm/train-0000N-of-00004.tfrecord     input_ids, attention_mask: Int64List, length uniform in 8..512
OUT_DIR/img/train-0000N-of-00004.tfrecord    image: 3072 raw bytes (32x32x3), label: Int64 scalar
OUT_DIR/ctr/train-000NN-of-00064.tfrecord    label: Int64 scalar, dense: 16 floats, ids: 16 Int64
                                             ids, blob: ~40 bytes no spec asks for (~250 B/record)
and the same records GZIP-compressed as OUT_DIR/{lm,img,ctr}-gzip/*.tfrecord.gz. At --scale 1 each
lm and img shard holds ~100 MB and each ctr shard ~6 MB (~400 MB per workload).

Only when --workloads names it (scripts/compare-images.sh does):
OUT_DIR/jpeg/train-0000N-of-00004.tfrecord   ImageNet-style tf.train.Examples: image/encoded (one JPEG,
                                             quality 90, 4:2:0, ~400x300 of varied size and shape),
                                             image/class/label (int64), and image/height, image/width,
                                             image/format, image/filename no spec asks for; 1 000
                                             records per shard at scale 1 (~50 MB; plain files only)
The pictures look like photographs to the encoder, not like noise (which JPEG does not compress):
smooth gradients, textures of several scales, flat and shaded shapes with sharp edges, mild noise
(~45 KB a picture at ~400x300; ImageNet's training JPEGs average ~110 KB, 138 GB for 1.28 M).

OUT_DIR/meta.json records what was written (the generator's arguments, records and payload bytes per
epoch), and a rerun with the same arguments writes only the workloads it does not list.
Deterministic: the records depend only on --seed and --scale.
"""

import argparse
import contextlib
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
JPEG_RECORDS = 1_000  # per shard at scale 1: 4 000 pictures
DEFAULT_WORKLOADS = "lm,img,ctr"


def feature_int64(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def lm_records(rng, n, shard=0):
    for _ in range(n):
        length = int(rng.integers(8, 513))
        ids = rng.integers(0, 50_000, length).tolist()
        yield tf.train.Example(features=tf.train.Features(feature={
            "input_ids": feature_int64(ids),
            "attention_mask": feature_int64([1] * length),
        })).SerializeToString()


def img_records(rng, n, shard=0):
    for _ in range(n):
        image = rng.integers(0, 256, 32 * 32 * 3, dtype=np.uint8).tobytes()
        yield tf.train.Example(features=tf.train.Features(feature={
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
            "label": feature_int64([int(rng.integers(0, 10))]),
        })).SerializeToString()


def ctr_records(rng, n, shard=0):
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


def upsample(grid, h, w):
    """Bilinear upsampling of a (gh, gw, 3) grid to (h, w, 3), grid corners on the picture's."""
    gh, gw = grid.shape[:2]
    ys, xs = np.linspace(0, gh - 1, h, dtype=np.float32), np.linspace(0, gw - 1, w, dtype=np.float32)
    y0, x0 = np.minimum(ys.astype(int), gh - 2), np.minimum(xs.astype(int), gw - 2)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    rows = grid[y0] * (1 - fy) + grid[y0 + 1] * fy
    return rows[:, x0] * (1 - fx) + rows[:, x0 + 1] * fx


def texture(rng, h, w, cell, amplitude):
    """Value noise: a random grid every `cell` pixels, bilinearly upsampled to h x w x 3."""
    grid = rng.standard_normal((h // cell + 2, w // cell + 2, 3), dtype=np.float32)
    return np.float32(amplitude) * upsample(grid, h, w)


def picture(rng, h, w):
    """A photograph-like h x w RGB picture: a gradient sky, textures of four scales, 8 to 40 shapes
    (discs, ellipses, boxes, large and small; flat or shaded, each with a texture of its own),
    then noise of sigma 3."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = y / h, x / w
    top, bottom = rng.uniform(20, 235, 3), rng.uniform(20, 235, 3)
    tilt = rng.uniform(-0.4, 0.4)
    t = np.clip(y + tilt * (x - 0.5), 0, 1)[..., None]
    img = (top * (1 - t) + bottom * t).astype(np.float32)
    for cell, amplitude in ((48, 20.0), (12, 12.0), (4, 8.0)):
        img += texture(rng, h, w, cell, amplitude)
    # Fine detail mostly in brightness, as in photographs: one texture for all three channels.
    img += texture(rng, h, w, 2, 20.0)[..., :1]
    for _ in range(int(rng.integers(8, 41))):
        cy, cx = rng.uniform(0, 1, 2)
        ry, rx = rng.uniform(0.01, 0.25, 2)
        color = rng.uniform(0, 255, 3)
        disc, shaded = rng.random() < 0.6, rng.random() < 0.5
        cell, amplitude = int(rng.integers(1, 6)), rng.uniform(3, 40)
        # Only the shape's bounding box is computed.
        top_, left = max(0, int((cy - ry) * h)), max(0, int((cx - rx) * w))
        box = np.s_[top_:min(h, int((cy + ry) * h) + 1), left:min(w, int((cx + rx) * w) + 1)]
        by, bx = y[box], x[box]
        if by.size == 0:
            continue
        if disc:
            inside = ((by - cy) / ry) ** 2 + ((bx - cx) / rx) ** 2 < 1
        else:
            inside = (np.abs(by - cy) < ry) & (np.abs(bx - cx) < rx)
        fill = np.broadcast_to(color, by.shape + (3,)).copy()
        if shaded:  # lit from one side
            fill *= (0.6 + 0.8 * np.clip((bx - cx + rx) / (2 * rx), 0, 1))[..., None]
        fill += texture(rng, *by.shape, cell, amplitude)[..., :1] + texture(rng, *by.shape, 8, 6.0)
        img[box][inside] = fill[inside]
    img += rng.normal(0, 3.0, img.shape).astype(np.float32)
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def jpeg_records(rng, n, shard=0):
    """ImageNet-style records (the fields of the Inception / TPU ImageNet TFRecords that a
    training pipeline reads, and a few it does not)."""
    for i in range(n):
        long_side = int(rng.integers(340, 461))
        short_side = round(long_side / rng.uniform(1.2, 1.5))
        h, w = (long_side, short_side) if rng.random() < 0.2 else (short_side, long_side)
        encoded = tf.io.encode_jpeg(picture(rng, h, w), quality=90, chroma_downsampling=True)
        yield tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded.numpy()])),
            "image/class/label": feature_int64([int(rng.integers(1, 1001))]),
            "image/height": feature_int64([h]),
            "image/width": feature_int64([w]),
            "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"JPEG"])),
            "image/filename": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[f"n{shard:04d}_{i:06d}.JPEG".encode()])),
        })).SerializeToString()


def write(out, name, make, per_shard, seed, shards=SHARDS, gzip=True):
    """Writes one workload, plain (and GZIP); returns its records and payload bytes per epoch."""
    plain = os.path.join(out, name)
    os.makedirs(plain, exist_ok=True)
    if gzip:
        os.makedirs(os.path.join(out, name + "-gzip"), exist_ok=True)
    records = payload = 0
    for shard in range(shards):
        base = f"train-{shard:05d}-of-{shards:05d}.tfrecord"
        rng = np.random.default_rng([seed, shard])
        with contextlib.ExitStack() as stack:
            writers = [stack.enter_context(tf.io.TFRecordWriter(os.path.join(plain, base)))]
            if gzip:
                writers.append(stack.enter_context(tf.io.TFRecordWriter(
                    os.path.join(out, name + "-gzip", base + ".gz"), options="GZIP")))
            for record in make(rng, per_shard, shard):
                for w in writers:
                    w.write(record)
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
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                    help=f"comma-separated, of lm, img, ctr, jpeg (default {DEFAULT_WORKLOADS})")
    args = ap.parse_args()
    wanted = {"scale": args.scale, "seed": args.seed, "version": 1}
    meta_path = os.path.join(args.out, "meta.json")
    done = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("args") == wanted:
            done = meta["workloads"]  # a workload added later is written beside the others
    known = {
        "lm": (lm_records, LM_RECORDS, SHARDS),
        "img": (img_records, IMG_RECORDS, SHARDS),
        "ctr": (ctr_records, CTR_RECORDS, CTR_SHARDS),
        "jpeg": (jpeg_records, JPEG_RECORDS, SHARDS),
    }
    names = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in names if w not in known]
    if unknown:
        sys.exit(f"gen_data: unknown workloads {unknown} (known: {', '.join(known)})")
    todo = {name: known[name] for name in names}
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
                                args.seed, shards, gzip=name != "jpeg")
        with open(meta_path, "w") as f:
            json.dump({"args": wanted, "workloads": workloads}, f, indent=1)


if __name__ == "__main__":
    main()
