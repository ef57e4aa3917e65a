"""The Python sides of scripts/compare-python.sh: one full pipeline consumed in a
Python loop into numpy arrays; prints one JSON line (the keys tfdata_bench.py prints).

    python python_bench.py SIDE WORKLOAD 'GLOB' [--epochs 2] [--seed 1] [--workers N]

SIDE is infeed-py (the infeed package) or grain (Grain's TFRecord reader with its own
interleave, window shuffle and batch, Examples parsed with the protobuf classes, the way
Grain users read TFRecord; `--workers` processes through `mp_prefetch`, 0 for none).
WORKLOAD is lm or img, with the meaning of the full pipelines (docs/architecture.md) as
tfdata_bench.py and `infeed bench` run them: lm shuffles files, interleaves 4, shuffles
10 000 records, repeats, parses input_ids and attention_mask, pads each batch to a
multiple of 64 capped at 512 (keeping the start) as int32, batches 256 dropping the
remainder; img the same without the file shuffle, its image decoded to 32×32×3 uint8.
Timing starts when the iterator is created.
"""

import argparse
import glob
import gzip
import json
import resource
import struct
import sys
import time

import numpy as np

BATCH = 256
SHUFFLE = 10_000
LM_SPEC = "input_ids:var_len:int64,attention_mask:var_len:int64"
IMG_SPEC = "image:fixed_len[]:bytes,label:fixed_len[]:int64"


def infeed_py(workload, files, epochs, seed):
    import infeed

    # Shards nothing rewrites while they are read: mapped (as `--mmap`).
    p = infeed.Pipeline.from_files(files).seed(seed).interleave(4).read_options(mmap=True)
    if workload == "lm":
        p = p.shuffle_files()
    p = p.shuffle(SHUFFLE).repeat(epochs)
    if workload == "lm":
        p = (
            p.parse(LM_SPEC)
            .pad_to_multiple_of(64)
            .max_length(512)
            .truncation("keep_start")
            .cast("int32")
            .masks(None)
        )
    else:
        p = p.parse(IMG_SPEC).decode_raw("image", [32, 32, 3])
    return iter(p.batch(BATCH, drop_remainder=True))


def grain_side(workload, files, epochs, seed, workers):
    import grain
    from grain import experimental as ge

    if any(f.endswith(".gz") for f in files):
        sys.exit("python_bench: Grain's TFRecord reader has no GZIP")
    source = grain.MapDataset.source(files)
    if workload == "lm":
        source = source.shuffle(seed=seed)
    source = source.repeat(epochs).map(ge.TFRecordIterDataset)
    ds = ge.InterleaveIterDataset(source, cycle_length=4)
    ds = ge.WindowShuffleIterDataset(ds, window_size=SHUFFLE, seed=seed)
    ds = ds.map(parse_lm if workload == "lm" else parse_img)
    ds = ds.batch(
        BATCH, drop_remainder=True, batch_fn=pad_lm if workload == "lm" else None
    )
    if workers:
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    return iter(ds)


def example(record):
    # The protobuf class only (no TensorFlow runtime): what a Grain user parses with.
    from tensorflow.core.example import example_pb2

    return example_pb2.Example.FromString(record).features.feature


def parse_lm(record):
    f = example(record)
    return {
        name: np.array(f[name].int64_list.value, dtype=np.int64)
        for name in ("input_ids", "attention_mask")
    }


def parse_img(record):
    f = example(record)
    image = np.frombuffer(f["image"].bytes_list.value[0], dtype=np.uint8).reshape(
        32, 32, 3
    )
    return {"image": image, "label": np.int64(f["label"].int64_list.value[0])}


def pad_lm(rows):
    longest = min(512, max(len(r["input_ids"]) for r in rows))
    width = (longest + 63) // 64 * 64
    out = {}
    for name in ("input_ids", "attention_mask"):
        dense = np.zeros((len(rows), width), dtype=np.int32)
        for i, r in enumerate(rows):
            values = r[name][:512]
            dense[i, : len(values)] = values
        out[name] = dense
    return out


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def records_per_epoch(files):
    """Records in the plain files, counted from their length fields (untimed)."""
    n = 0
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            pos += 16 + length
            n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("side", choices=["infeed-py", "grain"])
    ap.add_argument("workload", choices=["lm", "img"])
    ap.add_argument("glob")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    files = sorted(glob.glob(args.glob))
    if not files:
        sys.exit(f"python_bench: no files match {args.glob}")
    key = "label" if args.workload == "img" else "input_ids"

    cpu0, t0 = cpu_seconds(), time.perf_counter()
    if args.side == "infeed-py":
        it = infeed_py(args.workload, files, args.epochs, args.seed)
    else:
        it = grain_side(args.workload, files, args.epochs, args.seed, args.workers)
    first = None
    records = batches = 0
    shapes = set()
    for batch in it:
        if first is None:
            first = time.perf_counter() - t0
        records += int(batch[key].shape[0])
        batches += 1
        shapes.add(
            json.dumps({k: list(v.shape) for k, v in batch.items()}, sort_keys=True)
        )
    seconds = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    print(
        json.dumps(
            {
                "side": args.side,
                "records": records,
                "batches": batches,
                "seconds": seconds,
                "records_per_sec": records / seconds,
                "first_batch_ms": None if first is None else first * 1e3,
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                * 1024,
                "cpu_seconds": cpu,
                "records_per_epoch": records_per_epoch(files),
                "shapes": [json.loads(s) for s in sorted(shapes)],
                "workers": args.workers if args.side == "grain" else 0,
            }
        )
    )


if __name__ == "__main__":
    main()
