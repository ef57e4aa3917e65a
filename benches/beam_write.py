"""Records/s of writing TFRecords from JSONL: `infeed convert` on one core,
infeed.beam.WriteTFRecords on Beam's DirectRunner (2 worker processes), and
Beam's WriteToTFRecord fed by a Python tf.train.Example encoder (the usual
way; only where tensorflow imports).

    python benches/beam_write.py --cli target/release/infeed --mb 1000

Generates the input under a temporary folder (deleted at the end), prints
one JSON line per writer: records, seconds, records/s, and records/s per
core or worker. Run it with a Python that has apache-beam and a release
build of the package (scripts/bench-beam.sh sets that up).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from infeed.beam import WriteTFRecords

FEATURES = ["id:int64", "label:int64", "score:float", "text:bytes", "tokens:int64[]"]
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "keeps", "on", "running", "far"]


def make_input(path: Path, mb: int) -> int:
    rng = random.Random(1)
    n, size = 0, 0
    with path.open("w") as f:
        while size < mb * 1_000_000:
            row = {
                "id": n,
                "label": rng.randrange(10),
                "score": rng.random(),
                "text": " ".join(rng.choices(WORDS, k=rng.randrange(10, 60))),
                "tokens": [rng.randrange(50_000) for _ in range(rng.randrange(8, 64))],
            }
            line = json.dumps(row) + "\n"
            f.write(line)
            size += len(line)
            n += 1
    return n


def options() -> PipelineOptions:
    return PipelineOptions(
        flags=[], direct_num_workers=2, direct_running_mode="multi_processing"
    )


def tf_example(row: dict[str, Any]) -> bytes:
    import tensorflow as tf

    feature = tf.train.Feature
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                "id": feature(int64_list=tf.train.Int64List(value=[row["id"]])),
                "label": feature(int64_list=tf.train.Int64List(value=[row["label"]])),
                "score": feature(float_list=tf.train.FloatList(value=[row["score"]])),
                "text": feature(bytes_list=tf.train.BytesList(value=[row["text"].encode()])),
                "tokens": feature(int64_list=tf.train.Int64List(value=row["tokens"])),
            }
        )
    ).SerializeToString()


def report(name: str, records: int, seconds: float, workers: int) -> None:
    rate = records / seconds
    print(
        json.dumps(
            {
                "writer": name,
                "records": records,
                "seconds": round(seconds, 2),
                "records_per_s": round(rate),
                "per_core_or_worker": round(rate / workers),
            }
        ),
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True, help="a release build of the infeed binary")
    ap.add_argument("--mb", type=int, default=1000, help="input size in MB")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="infeed-beam-bench-"))
    try:
        src = tmp / "in.jsonl"
        n = make_input(src, args.mb)
        flags = [a for f in FEATURES for a in ("--feature", f)]
        t = time.perf_counter()
        subprocess.run(
            [args.cli, "convert", "-q", "--threads", "1", str(src), "-o", str(tmp / "cli"), *flags],
            check=True,
        )
        report("infeed convert --threads 1", n, time.perf_counter() - t, 1)
        shutil.rmtree(tmp / "cli")

        t = time.perf_counter()
        with beam.Pipeline(options=options()) as p:
            _ = (
                p
                | beam.io.ReadFromText(str(src))
                | beam.Map(json.loads)
                | WriteTFRecords(str(tmp / "beam"), features=FEATURES)
            )
        report("infeed.beam.WriteTFRecords, DirectRunner x2", n, time.perf_counter() - t, 2)
        shutil.rmtree(tmp / "beam")

        try:
            import tensorflow  # noqa: F401
        except ImportError:
            print(json.dumps({"writer": "WriteToTFRecord", "skipped": "no tensorflow"}))
            return
        t = time.perf_counter()
        with beam.Pipeline(options=options()) as p:
            _ = (
                p
                | beam.io.ReadFromText(str(src))
                | beam.Map(json.loads)
                | beam.Map(tf_example)
                | beam.io.WriteToTFRecord(str(tmp / "tf" / "train"))
            )
        report("Beam WriteToTFRecord + tf.train.Example, DirectRunner x2", n,
               time.perf_counter() - t, 2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.exists(tmp):
            raise SystemExit(f"could not remove {tmp}")


if __name__ == "__main__":
    main()
