"""Random access beside ArrayRecord and Grain, in one run, one process.

    python python/benches/grain_source.py [--glob '/tmp/benchdata/lm/*.tfrecord'] \\
        [--shards 2] [--scratch /tmp/grain-bench] [--rounds 3] [--json OUT]

On the first ``--shards`` shards of the glob (the lm reference data: ~1 KB
records), written once more as ArrayRecord files (``group_size:1``, as
Grain's docs advise for random access) in ``--scratch``:

- ``__getitem__`` one record at a time in a random order, and
  ``__getitems__`` of 256 random records, on ``ArrayRecordDataSource`` and
  on ``infeed.grain.TFRecordSource`` (its index built first, and timed);
- Grain's ``MapDataset.source(X).shuffle(seed=1).batch(256)`` over each,
  and over a Python list of the same records (Grain's own cost per record:
  the ceiling of any source inside that loop);
- ``infeed.grain.IterDataset(pipeline)`` iterated by Grain against the same
  pipeline's own Python iterator (the lm pipeline: parse, pad to a multiple
  of 64 up to 512, batch 256);
- with ``--mnist``: grain#1164's case, MNIST-sized records (784 bytes and a
  label) in batches of 128, Grain over infeed and over ArrayRecord (tf.data
  on the same TFRecord: scripts/compare-grain.sh runs it in the TensorFlow
  venv).

Alternate rounds, medians; records per second. Pin with ``taskset -c 0``
for one core (scripts/compare-grain.sh runs both). Build the package in
release (``maturin develop --release``) for meaningful figures.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import grain
import numpy as np
from array_record.python import array_record_data_source, array_record_module

import infeed
import infeed.grain

SPEC = "input_ids:var_len:int64,attention_mask:var_len:int64"


def to_array_record(shards: list[str], scratch: str) -> list[str]:
    """Each shard's records as an ArrayRecord file (written once)."""
    os.makedirs(scratch, exist_ok=True)
    out = []
    for shard in shards:
        path = os.path.join(scratch, os.path.basename(shard) + ".array_record")
        if not os.path.exists(path):
            tmp = path + ".tmp"
            writer = array_record_module.ArrayRecordWriter(tmp, "group_size:1")
            source = infeed.grain.TFRecordSource([shard])
            for record in source.__getitems__(list(range(len(source)))):
                writer.write(record)
            writer.close()
            os.rename(tmp, path)
        out.append(path)
    return out


def rate(n: int, fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def one_at_a_time(source: Any, order: list[int]) -> Callable[[], None]:
    def run() -> None:
        for i in order:
            source[i]

    return run


def in_256s(source: Any, order: list[int]) -> Callable[[], None]:
    def run() -> None:
        for k in range(0, len(order), 256):
            source.__getitems__(order[k : k + 256])

    return run


def grain_loop(source: Any, batches: int) -> Callable[[], None]:
    def run() -> None:
        ds = grain.MapDataset.source(source).shuffle(seed=1).batch(256)
        it = iter(ds)
        for _ in range(batches):
            next(it)

    return run


def lm_pipeline(shards: list[str]) -> infeed.Pipeline:
    return (
        infeed.Pipeline.from_files(shards)
        .seed(1)
        .global_shuffle()
        .parse(SPEC)
        .pad_to_multiple_of(64)
        .max_length(512)
        .batch(256)
    )


def iterate(it: Any, batches: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(batches):
            next(it)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--glob", default="/tmp/benchdata/lm/*.tfrecord")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--scratch", default="/tmp/grain-bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reads", type=int, default=20_000, help="records per random-read figure")
    ap.add_argument(
        "--grain-batches",
        type=int,
        default=300,
        help="batches of 256 per Grain-loop figure (Grain prefetches on 16 threads: a short "
        "run measures its start)",
    )
    ap.add_argument("--json", help="append the figures as one JSON line to this file")
    ap.add_argument(
        "--mnist",
        help="a TFRecord of MNIST-sized examples (scripts/compare-grain.sh writes one with "
        "TensorFlow): Grain over it through infeed and over its ArrayRecord copy, batch 128",
    )
    args = ap.parse_args()
    shards = sorted(glob.glob(args.glob))[: args.shards]

    start = time.perf_counter()
    infeed.build_index(shards, os.path.join(args.scratch, "index"))
    index_s = time.perf_counter() - start
    ours = infeed.grain.TFRecordSource(shards, index=os.path.join(args.scratch, "index"))
    theirs = array_record_data_source.ArrayRecordDataSource(to_array_record(shards, args.scratch))
    n = len(ours)
    assert len(theirs) == n, (len(theirs), n)
    records = ours.__getitems__(list(range(n)))
    assert theirs[12345 % n] == records[12345 % n]
    order = random.Random(0).sample(range(n), min(args.reads, n))
    batches = min(args.grain_batches, n // 256)

    cases: dict[str, tuple[int, Callable[[], None]]] = {
        "array_record one at a time": (len(order), one_at_a_time(theirs, order)),
        "infeed one at a time": (len(order), one_at_a_time(ours, order)),
        "array_record __getitems__(256)": (len(order), in_256s(theirs, order)),
        "infeed __getitems__(256)": (len(order), in_256s(ours, order)),
        "grain over array_record": (batches * 256, grain_loop(theirs, batches)),
        "grain over infeed": (batches * 256, grain_loop(ours, batches)),
        "grain over a list": (batches * 256, grain_loop(records, batches)),
    }
    pipeline = lm_pipeline(shards)
    lm_batches = 200
    figures: dict[str, list[float]] = {name: [] for name in cases}
    figures["infeed pipeline, its iterator"] = []
    figures["infeed pipeline through grain.IterDataset"] = []
    for _ in range(args.rounds):
        for name, (count, fn) in cases.items():
            figures[name].append(rate(count, fn))
        figures["infeed pipeline, its iterator"].append(
            rate(lm_batches * 256, iterate(iter(pipeline), lm_batches))
        )
        figures["infeed pipeline through grain.IterDataset"].append(
            rate(lm_batches * 256, iterate(iter(infeed.grain.IterDataset(pipeline)), lm_batches))
        )
    if args.mnist:
        m_ours = infeed.grain.TFRecordSource([args.mnist])
        m_theirs = array_record_data_source.ArrayRecordDataSource(
            to_array_record([args.mnist], args.scratch)
        )

        def mnist_loop(source: Any) -> Callable[[], None]:
            def run() -> None:
                # The serialized Example's bytes as an array: Grain's batch
                # of 128 stacks them (the example parses nothing, as
                # grain#1164's loop decodes nothing infeed would not).
                ds = (
                    grain.MapDataset.source(source)
                    .shuffle(seed=1)
                    .map(lambda r: np.frombuffer(r, dtype=np.uint8))
                    .batch(128)
                )
                for _ in ds:
                    pass

            return run

        figures["mnist: grain over infeed"] = []
        figures["mnist: grain over array_record"] = []
        for _ in range(args.rounds):
            figures["mnist: grain over infeed"].append(rate(len(m_ours), mnist_loop(m_ours)))
            figures["mnist: grain over array_record"].append(
                rate(len(m_theirs), mnist_loop(m_theirs))
            )
    medians = {name: statistics.median(v) for name, v in figures.items()}
    ratios = {
        "one at a time, infeed / array_record": medians["infeed one at a time"]
        / medians["array_record one at a time"],
        "__getitems__(256), infeed / array_record": medians["infeed __getitems__(256)"]
        / medians["array_record __getitems__(256)"],
        "grain loop, infeed / array_record": medians["grain over infeed"]
        / medians["grain over array_record"],
        "IterDataset / own iterator": medians["infeed pipeline through grain.IterDataset"]
        / medians["infeed pipeline, its iterator"],
    }
    for name, value in medians.items():
        print(f"{name:45s} {value:12,.0f} records/s")
    for name, value in ratios.items():
        print(f"{name:45s} {value:12.2f}")
    print(f"{'index build of the shards':45s} {index_s:12.2f} s")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"records_per_s": medians, "ratios": ratios, "index_s": index_s}))
            f.write("\n")


if __name__ == "__main__":
    main()
