"""Records/s of writing TFRecords from JSONL: `infeed convert` on one core,
infeed.beam.ConvertFiles (Beam hands out the `--files` input files, split
into byte ranges of `--split-mb`, and Rust reads them) and
infeed.beam.WriteTFRecords (rows from ReadFromText and
json.loads) on Beam's DirectRunner (2 worker processes), and
Beam's WriteToTFRecord fed by a Python tf.train.Example encoder (the usual
way; only where tensorflow imports).

    python benches/beam_write.py --cli target/release/infeed --mb 1000 --rounds 3

Generates the input (`--files` JSONL files, 8 by default; every writer reads
all of them) under a temporary folder (deleted at the end), then runs
the writers in turn, `--rounds` times (alternating, so that a noisy machine
weighs on all alike), and prints one JSON line per run (records, seconds,
records/s, records/s per core or worker) and a summary line: the medians and
the ratios of ConvertFiles' and WriteTFRecords' records/s per worker to
`infeed convert`'s per core (`--no-rows`, `--no-tf` leave writers out).
`--breakdown` adds ConvertFiles' Rust work without Beam (every range
through `RowWriter.write_file` in one process) and two runs that split
WriteTFRecords' time: the Beam pipeline without the writer (ReadFromText,
json.loads) and the writer without Beam (json.loads and RowWriter.write in
one process; not with `--no-rows`). `infeed convert`'s CPU seconds are printed too (its
`--threads 1` is a reading thread, a worker and a writing thread). `--whole`
adds ConvertFiles with files unsplit (`split_bytes=0`: one file, one
worker), `--fixed` the ConvertFiles pipeline on `--files` one-line files
(the DirectRunner's cost that does not grow with the input) and, beside
it, a pipeline that only maps the paths to themselves (the least any
DirectRunner pipeline costs). Run it with a
Python that has apache-beam and a release build of the package
(scripts/bench-beam.sh sets that up).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from infeed.beam import ConvertFiles, WriteTFRecords

FEATURES = ["id:int64", "label:int64", "score:float", "text:bytes", "tokens:int64[]"]
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "keeps", "on", "running", "far"]


def make_input(tmp: Path, mb: int, files: int) -> tuple[list[Path], int]:
    """About ``mb`` MB of JSONL rows in ``files`` files of about equal size
    (consecutive rows per file)."""
    rng = random.Random(1)
    paths = [tmp / f"in-{k:03d}.jsonl" for k in range(files)]
    per_file = mb * 1_000_000 / files
    n = 0
    for path in paths:
        size = 0
        with path.open("w") as f:
            while size < per_file:
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
    return paths, n


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


CONVERT = "infeed convert --threads 1"
BEAM = "infeed.beam.WriteTFRecords, DirectRunner x2"
FILES = "infeed.beam.ConvertFiles, DirectRunner x2"
WHOLE = "infeed.beam.ConvertFiles, files unsplit, DirectRunner x2"
FIXED = "infeed.beam.ConvertFiles on one-line files, DirectRunner x2"
FLOOR = "Beam alone: Create(paths) | Map(noop), DirectRunner x2"
TF = "Beam WriteToTFRecord + tf.train.Example, DirectRunner x2"
BEAM_READ = "Beam ReadFromText + json.loads only, DirectRunner x2"
ROWFILE = "RowWriter.write_file over the ranges, no Beam, 1 process"
ROWWRITER = "json.loads + RowWriter.write, no Beam, 1 process"


def report(name: str, records: int, seconds: float, workers: int, round_: int) -> float:
    rate = records / seconds
    print(
        json.dumps(
            {
                "round": round_,
                "writer": name,
                "records": records,
                "seconds": round(seconds, 2),
                "records_per_s": round(rate),
                "per_core_or_worker": round(rate / workers),
            }
        ),
        flush=True,
    )
    return rate / workers


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_convert(cli: str, src: list[Path], out: Path) -> None:
    """`infeed convert --threads 1`: its reading thread, one worker and its
    writing thread; prints the CPU seconds they took (its rate per core is
    records per CPU second)."""
    flags = [a for f in FEATURES for a in ("--feature", f)]
    cpu = children_cpu()
    subprocess.run(
        [cli, "convert", "-q", "--threads", "1", *map(str, src), "-o", str(out), *flags],
        check=True,
    )
    print(json.dumps({"convert_cpu_seconds": round(children_cpu() - cpu, 2)}), flush=True)


def glob_of(src: list[Path]) -> str:
    return str(src[0].parent / "in-*.jsonl")


def run_beam(src: list[Path], out: Path, batch_rows: int) -> None:
    with beam.Pipeline(options=options()) as p:
        _ = (
            p
            | beam.io.ReadFromText(glob_of(src))
            | beam.Map(json.loads)
            | WriteTFRecords(str(out), features=FEATURES, batch_rows=batch_rows)
        )


def run_files(src: list[Path], out: Path, split_bytes: int) -> None:
    """Beam hands out the file paths (byte ranges of `split_bytes`); Rust
    reads, encodes and writes each."""
    with beam.Pipeline(options=options()) as p:
        _ = (
            p
            | beam.Create([str(x) for x in src])
            | ConvertFiles(str(out), features=FEATURES, format="jsonl", split_bytes=split_bytes)
        )


def run_tf(src: list[Path], out: Path) -> None:
    with beam.Pipeline(options=options()) as p:
        _ = (
            p
            | beam.io.ReadFromText(glob_of(src))
            | beam.Map(json.loads)
            | beam.Map(tf_example)
            | beam.io.WriteToTFRecord(str(out / "train"))
        )


def noop(x: Any) -> Any:
    return x


def run_floor(src: list[Path]) -> None:
    """The least a DirectRunner pipeline costs: the paths, mapped to themselves."""
    with beam.Pipeline(options=options()) as p:
        _ = p | beam.Create([str(x) for x in src], reshuffle=False) | beam.Map(noop)


def run_beam_read(src: list[Path], out: Path) -> None:
    """The Beam side without the writer: reading, json.loads and a no-op."""
    with beam.Pipeline(options=options()) as p:
        _ = (
            p
            | beam.io.ReadFromText(glob_of(src))
            | beam.Map(json.loads)
            | beam.Filter(lambda row: False)
        )


def run_rowwriter(src: list[Path], out: Path, batch_rows: int) -> None:
    """The writer without Beam: json.loads and the Rust encoder, in this process."""
    from infeed import _infeed

    writer = _infeed.RowWriter(str(out), "train", "bench", FEATURES, shard_bytes=100_000_000)
    rows: list[Any] = []
    for path in src:
        with path.open() as f:
            for line in f:
                rows.append(json.loads(line))
                if len(rows) >= batch_rows:
                    writer.write(rows)
                    rows = []
    if rows:
        writer.write(rows)
    writer.finish()


def run_rowfile(src: list[Path], out: Path, split_bytes: int) -> None:
    """ConvertFiles' work without Beam: every range (or file) through one
    RowWriter.write_file in this process, one thread; prints its CPU seconds."""
    from infeed import _infeed

    cpu = time.process_time()
    writer = _infeed.RowWriter(str(out), "train", "bench", FEATURES, shard_bytes=100_000_000)
    for path in src:
        ranges = _infeed.split_file(str(path), "jsonl", split_bytes) if split_bytes else None
        for start, end in ranges or [(None, None)]:
            writer.write_file(str(path), "jsonl", start, end)
    writer.finish()
    print(json.dumps({"rowfile_cpu_seconds": round(time.process_time() - cpu, 2)}), flush=True)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True, help="a release build of the infeed binary")
    ap.add_argument("--mb", type=int, default=1000, help="input size in MB")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of the writers, alternating")
    ap.add_argument("--batch-rows", type=int, default=1000, help="WriteTFRecords(batch_rows=)")
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="also time Beam without the writer, and the writer without Beam",
    )
    ap.add_argument("--no-tf", action="store_true", help="leave out WriteToTFRecord")
    ap.add_argument(
        "--no-rows", action="store_true", help="leave out WriteTFRecords (rows from Python)"
    )
    ap.add_argument("--files", type=int, default=8, help="input files")
    ap.add_argument(
        "--split-mb", type=int, default=64, help="ConvertFiles(split_bytes=) in MiB; 0: no split"
    )
    ap.add_argument("--whole", action="store_true", help="also ConvertFiles with split_bytes=0")
    ap.add_argument(
        "--fixed", action="store_true", help="also ConvertFiles on --files one-line files"
    )
    args = ap.parse_args()
    tf = not args.no_tf
    if tf:
        try:
            import tensorflow  # noqa: F401
        except ImportError:
            print(json.dumps({"writer": "WriteToTFRecord", "skipped": "no tensorflow"}))
            tf = False
    tmp = Path(tempfile.mkdtemp(prefix="infeed-beam-bench-"))
    rates: dict[str, list[float]] = {}

    def timed(name: str, workers: int, round_: int, run: Callable[[Path], None]) -> None:
        out = tmp / "out"
        t = time.perf_counter()
        run(out)
        rate = report(name, n, time.perf_counter() - t, workers, round_)
        rates.setdefault(name, []).append(rate)
        shutil.rmtree(out, ignore_errors=True)

    try:
        src, n = make_input(tmp, args.mb, args.files)
        tiny = [tmp / f"tiny-{k:03d}.jsonl" for k in range(args.files)]
        for k, path in enumerate(tiny):
            with src[k].open() as f:
                path.write_text(f.readline())
        print(json.dumps({"input_mb": args.mb, "files": args.files, "rows": n}), flush=True)
        split = args.split_mb << 20
        for r in range(args.rounds):
            timed(CONVERT, 1, r, lambda out: run_convert(args.cli, src, out))
            timed(FILES, 2, r, lambda out: run_files(src, out, split))
            if args.whole:
                timed(WHOLE, 2, r, lambda out: run_files(src, out, 0))
            if args.fixed:
                # Seconds, not records/s: the rate is of the big input's n.
                timed(FIXED, 2, r, lambda out: run_files(tiny, out, split))
                timed(FLOOR, 2, r, lambda out: run_floor(tiny))
            if not args.no_rows:
                timed(BEAM, 2, r, lambda out: run_beam(src, out, args.batch_rows))
            if tf:
                timed(TF, 2, r, lambda out: run_tf(src, out))
            if args.breakdown:
                timed(ROWFILE, 1, r, lambda out: run_rowfile(src, out, split))
            if args.breakdown and not args.no_rows:
                timed(BEAM_READ, 2, r, lambda out: run_beam_read(src, out))
                timed(ROWWRITER, 1, r, lambda out: run_rowwriter(src, out, args.batch_rows))
        summary: dict[str, Any] = {
            "summary": "median records/s per core or worker",
            "rounds": args.rounds,
            **{name: round(median(xs)) for name, xs in rates.items()},
            "files_per_worker / convert_per_core": round(
                median(rates[FILES]) / median(rates[CONVERT]), 3
            ),
        }
        if args.whole:
            summary["unsplit_per_worker / convert_per_core"] = round(
                median(rates[WHOLE]) / median(rates[CONVERT]), 3
            )
        if args.fixed:
            summary["fixed_seconds"] = round(n / (2 * median(rates[FIXED])), 2)
            summary["floor_seconds"] = round(n / (2 * median(rates[FLOOR])), 2)
        if not args.no_rows:
            summary["beam_per_worker / convert_per_core"] = round(
                median(rates[BEAM]) / median(rates[CONVERT]), 3
            )
        if tf:
            summary["tf_per_worker / convert_per_core"] = round(
                median(rates[TF]) / median(rates[CONVERT]), 3
            )
        if tf and not args.no_rows:
            summary["beam / tf"] = round(median(rates[BEAM]) / median(rates[TF]), 2)
        print(json.dumps(summary), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.exists(tmp):
            raise SystemExit(f"could not remove {tmp}")


if __name__ == "__main__":
    main()
