"""tf.data's side of the comparison: runs one pipeline, prints one JSON line.

    python tfdata_bench.py WORKLOAD STAGE 'GLOB' [--epochs 2] [--seed 1]

With --numpy the batches are consumed through ds.as_numpy_iterator() (numpy arrays,
as a JAX or PyTorch training loop takes them). WORKLOAD is lm, img or ctr; STAGE is raw (read + CRC, batched), parse (read, batch,
parse) or full (the reference pipeline of docs/architecture.md). Each is written the way tf.data runs it
fastest: shuffle serialized records, batch, then parse the whole batch with
tf.io.parse_example in a map with AUTOTUNE parallelism.

WORKLOAD jpeg (ImageNet-style JPEG records, gen_data.py --workloads jpeg) takes STAGE train or eval,
written as the Flax ImageNet example's input pipeline (examples/imagenet/input_pipeline.py) writes
them: per record, in a map with AUTOTUNE parallelism, train samples a crop box
(tf.image.sample_distorted_bounding_box: area 0.08-1, aspect 3/4-4/3, 10 tries), decodes only it
(tf.io.decode_and_crop_jpeg; the center crop when the box is the whole image), resizes it to
224x224, flips it at random and normalizes it with ImageNet's mean and std; eval decodes the center
square of 224/256 of the shorter side (decode_and_crop_jpeg, "padding 32") and resizes and normalizes
it; then batch 128 (drop remainder) and prefetch. Train shuffles (2 500 records) after repeat, as
Flax does. The resize is bilinear, as infeed's is (Flax's is bicubic: --resize bicubic). Timing, CPU time and
the first batch are measured in this process from the creation of the
iterator, so TensorFlow's import and graph tracing are not counted; peak RSS
(ru_maxrss) is the whole process's, TensorFlow's own import included
(`baseline_rss_bytes` tells how much that is).
"""

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
BATCH = 256
SHUFFLE = 10_000
LM_SPEC = {"input_ids": tf.io.RaggedFeature(tf.int64),
           "attention_mask": tf.io.RaggedFeature(tf.int64)}
IMG_SPEC = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
# Many small records: 16 shards interleaved, batches of 4096; `blob` is left unparsed.
CTR_SPEC = {"label": tf.io.FixedLenFeature([], tf.int64),
            "dense": tf.io.FixedLenFeature([16], tf.float32),
            "ids": tf.io.FixedLenFeature([16], tf.int64)}
CTR_BATCH = 4096
CTR_CYCLE = 16
SPECS = {"lm": LM_SPEC, "img": IMG_SPEC, "ctr": CTR_SPEC}
# The jpeg workload: ImageNet-style records and the Flax ImageNet example's constants.
JPEG_SPEC = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
             "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
JPEG_BATCH = 128
JPEG_SHUFFLE = 2_500
IMAGE_SIZE = 224
CROP_PADDING = 32
MEAN_RGB = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STDDEV_RGB = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def pad_lm(batch):
    """int32, padded to a multiple of 64 and capped at 512 (keep the start)."""
    out = {}
    for name, ragged in batch.items():
        dense = tf.cast(ragged, tf.int32).to_tensor()[:, :512]
        length = tf.shape(dense)[1]
        out[name] = tf.pad(dense, [[0, 0], [0, (length + 63) // 64 * 64 - length]])
    return out


def decode_img(batch):
    image = tf.reshape(tf.io.decode_raw(batch["image"], tf.uint8), [-1, 32, 32, 3])
    return {"image": image, "label": batch["label"]}


def resize(image, method):
    return tf.image.resize([image], [IMAGE_SIZE, IMAGE_SIZE], method=method)[0]


def center_crop(image_bytes, method):
    """Flax's _decode_and_center_crop: the center square of 224/256 of the shorter side."""
    shape = tf.io.extract_jpeg_shape(image_bytes)
    height, width = shape[0], shape[1]
    size = tf.cast(IMAGE_SIZE / (IMAGE_SIZE + CROP_PADDING)
                   * tf.cast(tf.minimum(height, width), tf.float32), tf.int32)
    window = tf.stack([(height - size + 1) // 2, (width - size + 1) // 2, size, size])
    return resize(tf.io.decode_and_crop_jpeg(image_bytes, window, channels=3), method)


def random_crop(image_bytes, method):
    """Flax's _decode_and_random_crop (Inception's crop), the center crop when no box fits."""
    shape = tf.io.extract_jpeg_shape(image_bytes)
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        shape, bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
        min_object_covered=0.1, aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0),
        max_attempts=10, use_image_if_no_bounding_boxes=True)
    offset_y, offset_x, _ = tf.unstack(begin)
    height, width, _ = tf.unstack(size)
    window = tf.stack([offset_y, offset_x, height, width])
    image = tf.io.decode_and_crop_jpeg(image_bytes, window, channels=3)
    whole = tf.reduce_sum(tf.cast(tf.equal(shape, tf.shape(image)), tf.int32)) >= 3
    return tf.cond(whole, lambda: center_crop(image_bytes, method), lambda: resize(image, method))


def normalize(image):
    image -= tf.constant(MEAN_RGB, shape=[1, 1, 3], dtype=image.dtype)
    image /= tf.constant(STDDEV_RGB, shape=[1, 1, 3], dtype=image.dtype)
    return image


def build_jpeg(stage, files, epochs, seed, method):
    """The Flax ImageNet example's create_split on these shards (TFDS reads the shards interleaved)."""
    train = stage == "train"

    def decode_example(record):
        example = tf.io.parse_single_example(record, JPEG_SPEC)
        image_bytes = example["image/encoded"]
        if train:
            image = random_crop(image_bytes, method)
            image = tf.reshape(image, [IMAGE_SIZE, IMAGE_SIZE, 3])
            image = tf.image.random_flip_left_right(image)
        else:
            image = tf.reshape(center_crop(image_bytes, method), [IMAGE_SIZE, IMAGE_SIZE, 3])
        image = tf.image.convert_image_dtype(normalize(image), dtype=tf.float32)
        return {"image/encoded": image, "image/class/label": example["image/class/label"]}

    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE)
    ds = ds.repeat(epochs)
    if train:
        ds = ds.shuffle(JPEG_SHUFFLE, seed=seed)
    ds = ds.map(decode_example, num_parallel_calls=AUTOTUNE)
    ds = ds.batch(JPEG_BATCH, drop_remainder=True)
    return ds.prefetch(AUTOTUNE)


def build(workload, stage, files, compression, epochs, seed):
    ds = tf.data.Dataset.from_tensor_slices(files)
    full = stage == "full"
    if full and workload == "lm":
        ds = ds.shuffle(len(files), seed=seed)  # a new file order each epoch
    ctr = workload == "ctr"
    ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
                       cycle_length=CTR_CYCLE if ctr else 4, num_parallel_calls=AUTOTUNE)
    if full:
        ds = ds.shuffle(SHUFFLE, seed=seed).repeat(epochs)
    ds = ds.batch(CTR_BATCH if ctr else BATCH, drop_remainder=full)
    spec = SPECS[workload]
    if stage == "parse" or (full and ctr):
        ds = ds.map(lambda x: tf.io.parse_example(x, spec), num_parallel_calls=AUTOTUNE)
    elif full:
        after = pad_lm if workload == "lm" else decode_img
        ds = ds.map(lambda x: after(tf.io.parse_example(x, spec)), num_parallel_calls=AUTOTUNE)
    return ds.prefetch(AUTOTUNE)


def shape_of(batch):
    """name -> dims (None for a ragged dimension), as infeed bench reports it."""
    if isinstance(batch, dict):
        return {k: shape_of(v) for k, v in batch.items()}
    if isinstance(batch, tf.RaggedTensor):
        return [int(batch.nrows())] + [None] * (batch.shape.rank - 1)
    return [int(d) for d in batch.shape]


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=["lm", "img", "ctr", "jpeg"])
    ap.add_argument("stage", choices=["raw", "parse", "full", "train", "eval"])
    ap.add_argument("glob")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--numpy", action="store_true",
                    help="consume ds.as_numpy_iterator(), as a JAX or PyTorch loop does")
    ap.add_argument("--resize", default="bilinear", choices=["bilinear", "bicubic"],
                    help="jpeg: the resize method (Flax's example uses bicubic)")
    args = ap.parse_args()
    jpeg = args.workload == "jpeg"
    if jpeg != (args.stage in ("train", "eval")):
        sys.exit("tfdata_bench: the jpeg workload takes the stages train and eval, the others raw, parse, full")
    files = sorted(tf.io.gfile.glob(args.glob))
    if not files:
        sys.exit(f"tfdata_bench: no files match {args.glob}")
    compression = "GZIP" if files[0].endswith(".gz") else ""
    epochs = args.epochs if args.stage in ("full", "train", "eval") else 1
    if jpeg:
        ds = build_jpeg(args.stage, files, epochs, args.seed, args.resize)
    else:
        ds = build(args.workload, args.stage, files, compression, epochs, args.seed)
    baseline_rss = rss_bytes()

    cpu0, t0 = cpu_seconds(), time.perf_counter()
    first = None
    records = batches = 0
    shapes = set()
    for batch in ds.as_numpy_iterator() if args.numpy else ds:
        if first is None:
            first = time.perf_counter() - t0
        if args.stage == "raw":
            n = int(batch.shape[0])
            shapes.add(json.dumps({"records": [n]}))
        else:
            count_by = {"lm": "input_ids", "jpeg": "image/class/label"}.get(args.workload, "label")
            n = int(batch[count_by].shape[0])
            shapes.add(json.dumps(shape_of(batch), sort_keys=True))
        records += n
        batches += 1
    seconds = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    # Records per epoch, counted apart and untimed: what this side's reader sees.
    per_epoch = int(tf.data.TFRecordDataset(files, compression_type=compression)
                    .batch(4096).reduce(0, lambda n, b: n + tf.shape(b)[0]))
    print(json.dumps({
        "side": "tf.data-numpy" if args.numpy else "tf.data", "tf_version": tf.__version__,
        "records": records, "batches": batches, "seconds": seconds,
        "records_per_sec": records / seconds,
        "first_batch_ms": None if first is None else first * 1e3,
        "peak_rss_bytes": peak, "baseline_rss_bytes": baseline_rss,
        "cpu_seconds": cpu, "records_per_epoch": per_epoch,
        "shapes": [json.loads(s) for s in sorted(shapes)],
    }))


if __name__ == "__main__":
    main()
