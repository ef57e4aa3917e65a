"""infeed's Ray Data datasource beside ``ray.data.read_tfrecords`` on the
same shards, alternated in one run.

    bash scripts/ray-cluster.sh start
    python python/benches/ray_data_read.py --address 127.0.0.1:29600 \\
        --lm 'bench-data/scale-1/lm/*.tfrecord' [--rounds 3]

Needs a venv with infeed, ``ray[data]`` and TensorFlow (``read_tfrecords``
parses with ``tf.train.Example``). Each round, every record of the shards
once, drained with ``iter_batches(batch_size=None)`` (the blocks as they
come): ``infeed``, ``infeed.ray_data.read`` of the lm spec padded to 512
and cast to int32 in batches of 1 024 (its blocks are padded tensors with
masks: more output than Ray's); ``ray``, ``ray.data.read_tfrecords`` (each
feature a list column). Prints records/s of each and their ratio.
"""

from __future__ import annotations

import argparse
import glob
import logging
import time

import ray
import ray.data

import infeed
import infeed.ray_data

LM_SPEC = {"input_ids": infeed.VarLen("int64"), "attention_mask": infeed.VarLen("int64")}


def drain(ds: ray.data.Dataset) -> tuple[int, float]:
    start = time.perf_counter()
    rows = 0
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        rows += len(next(iter(batch.values())))
    return rows, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--lm", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ray.init(address=args.address, logging_level=logging.ERROR, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    files = sorted(glob.glob(args.lm))
    pipeline = (
        infeed.Pipeline.from_files(files)
        .parse(LM_SPEC)
        .pad_to_multiple_of(64)
        .max_length(512)
        .cast("int32")
        .batch(1024, drop_remainder=False)
    )
    for round_ in range(args.rounds):
        ours, ours_s = drain(infeed.ray_data.read(pipeline))
        theirs, theirs_s = drain(ray.data.read_tfrecords(files))
        assert ours == theirs, (ours, theirs)
        print(
            f"round {round_}: infeed {ours / ours_s / 1e3:.0f} K records/s, "
            f"read_tfrecords {theirs / theirs_s / 1e3:.0f} K ({theirs_s / ours_s:.1f}x)",
            flush=True,
        )


if __name__ == "__main__":
    main()
